// Package vk is a fake VK API for tests: an httptest server on 127.0.0.1 that speaks the
// real wire format of the methods the platform calls (https://api.vk.com/method/<name>,
// parameters in the query or in a form body, answers {"response": ...} or {"error":
// {"error_code", "error_msg", "request_params"}}), checks what VK checks (the access token
// and its community, the API version, required parameters and their limits, keyboards,
// uploads), records what it received, and can be told to misbehave. It also plays VK's side
// of the Callback API: it confirms a registered callback server and delivers events to it
// with the server's secret key.
package vk

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	_ "image/gif" // VK accepts GIF photos
	_ "image/jpeg"
	_ "image/png"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// The community every New server knows, with its community access key.
const (
	GroupID          int64 = 229000111
	GroupName              = "Demo Coffee"
	GroupScreenName        = "democoffee"
	Token                  = "vk1.a.fake-community-key-for-tests-0123456789abcdef"
	ConfirmationCode       = "5f2c9a1e"
	// UserToken is a user's access key: valid, but not a community's.
	UserToken = "vk1.a.fake-user-key-for-tests-0123456789abcdef"
)

// VK's error codes the fake answers.
const (
	ErrUnknown         = 1
	ErrUnknownMethod   = 3
	ErrAuth            = 5
	ErrTooMany         = 6
	ErrPermission      = 7
	ErrInvalidRequest  = 8
	ErrFlood           = 9
	ErrInternal        = 10
	ErrAccessDenied    = 15
	ErrGroupAuth       = 27
	ErrParam           = 100
	ErrCantSend        = 901
	ErrPrivacy         = 902
	ErrKeyboard        = 911
	ErrTooLong         = 914
	ErrServersLimit    = 2000
	maxCallbackServers = 10
	maxMessageRunes    = 4096
	maxPhotoBytes      = 50 << 20
	maxDocBytes        = 200 << 20
	randomIDWindow     = time.Hour
	firstMessageID     = 1001
	minAPIVersion      = 5.0
)

// Group is a community known to the fake.
type Group struct {
	ID               int64
	Name             string
	ScreenName       string
	Token            string // its community access key
	ConfirmationCode string
}

// CallbackServer is a callback server registered with groups.addCallbackServer.
type CallbackServer struct {
	ID        int64
	GroupID   int64
	URL       string
	Title     string
	SecretKey string
	// Status is VK's: unconfigured until confirmed, then ok or failed.
	Status string
	// Settings are the parameters of the last groups.setCallbackSettings (api_version,
	// message_new, ...), empty before.
	Settings map[string]string
}

// Message is one message messages.send delivered.
type Message struct {
	ID         int64
	GroupID    int64
	PeerID     int64
	RandomID   int32
	Text       string
	Keyboard   json.RawMessage // as sent, nil without one
	Attachment string
}

// Call is one API call the fake answered, its parameters without the access token.
type Call struct {
	Method string
	Params url.Values
}

// Upload is a file the fake received on an upload URL and later saved.
type Upload struct {
	Kind        string // photo or doc
	GroupID     int64
	Filename    string
	ContentType string
	Bytes       []byte
	Attachment  string // photo-1_2_key or doc-1_2, once saved
}

// Server is the fake VK API.
type Server struct {
	// URL is the server's root; the API base URL is URL + "/method" (see BaseURL).
	URL string

	// What the fake received and did, for tests to read back (each log locks itself).
	messages  fakehttp.Log[Message]
	calls     fakehttp.Log[Call]
	delivered fakehttp.Log[Delivery]
	// Misbehaviours asked for: VK errors of the next calls (by method, "" for any), HTTP
	// statuses of the next requests, methods whose next answers are lost.
	failNext    fakehttp.Queue[failure]
	unavailable fakehttp.Queue[int]
	lose        fakehttp.Queue[string]

	mu      sync.Mutex
	groups  map[int64]*Group
	tokens  map[string]int64 // access key -> community (0: a user key)
	servers []*CallbackServer
	sentIDs map[sentKey]sentID
	uploads map[string]*Upload // by upload token
	saved   map[string]bool    // upload tokens already saved
	blocked map[int64]int      // peer -> 901 or 902
	nextID  int64
}

type sentKey struct {
	group int64
	peer  int64
	rid   int32
}

type sentID struct {
	id int64
	at time.Time
}

type failure struct {
	method string // "" for any
	code   int
	msg    string
}

// Delivery is one Callback API request the fake made, with the server's answer.
type Delivery struct {
	URL    string
	Body   []byte
	Status int
	Answer string
}

// New starts the fake on 127.0.0.1 with the community GroupID (key Token); it is closed when
// the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := newServer()
	s.URL = fakehttp.Start(t, http.HandlerFunc(s.serve)).URL
	return s
}

// Listen starts the fake on 127.0.0.1 outside a test (make demo); close returns its port.
func Listen() (s *Server, close func()) {
	s = newServer()
	srv := fakehttp.Listen(http.HandlerFunc(s.serve))
	s.URL = srv.URL
	return s, srv.Close
}

func newServer() *Server {
	s := &Server{
		groups:  map[int64]*Group{},
		tokens:  map[string]int64{UserToken: 0},
		sentIDs: map[sentKey]sentID{},
		uploads: map[string]*Upload{},
		saved:   map[string]bool{},
		blocked: map[int64]int{},
		nextID:  firstMessageID,
	}
	s.AddGroup(Group{ID: GroupID, Name: GroupName, ScreenName: GroupScreenName, Token: Token, ConfirmationCode: ConfirmationCode})
	return s
}

// BaseURL is what the adapter's Config.BaseURL must be (VK's https://api.vk.com/method).
func (s *Server) BaseURL() string { return s.URL + "/method" }

// AddGroup makes another community known, with its key.
func (s *Server) AddGroup(g Group) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cp := g
	s.groups[g.ID] = &cp
	s.tokens[g.Token] = g.ID
}

// RevokeToken makes an access key unknown: VK answers error 5 to it from now on.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.tokens, token)
}

// Block makes messages.send to peer fail with 901 (the user has not allowed messages from
// the community) or, with privacy true, 902 (the user's privacy settings forbid it).
func (s *Server) Block(peer int64, privacy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked[peer] = ErrCantSend
	if privacy {
		s.blocked[peer] = ErrPrivacy
	}
}

// FailNext makes the next call of method ("" for any method) answer the VK error code with
// msg ("" for VK's usual message of the code).
func (s *Server) FailNext(method string, code int, msg string) {
	s.failNext.Push(1, failure{method: method, code: code, msg: msg})
}

// RateLimit makes the next n calls answer error 6 (too many requests per second).
func (s *Server) RateLimit(n int) { s.failNext.Push(n, failure{code: ErrTooMany}) }

// Unavailable makes the next n HTTP requests answer 502 with an HTML page, as VK's front
// end does when a backend is down.
func (s *Server) Unavailable(n int) { s.unavailable.Push(n, http.StatusBadGateway) }

// LoseAnswers makes the next n calls of method be carried out (a message is delivered) and
// their answers lost: the connection is closed without a response, as when a network
// failure or a timeout cuts the exchange after VK acted. A client that retries the call must
// not act twice (messages.send with the same random_id does not).
func (s *Server) LoseAnswers(method string, n int) { s.lose.Push(n, method) }

// Messages returns the messages delivered so far.
func (s *Server) Messages() []Message { return s.messages.All() }

// Calls returns the API calls answered so far (access tokens removed).
func (s *Server) Calls() []Call {
	out := s.calls.All()
	for i, c := range out {
		out[i].Params = cloneValues(c.Params)
	}
	return out
}

// CallsOf returns the calls of one method.
func (s *Server) CallsOf(method string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// CallbackServers returns the callback servers registered for the community.
func (s *Server) CallbackServers(groupID int64) []CallbackServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []CallbackServer
	for _, cs := range s.servers {
		if cs.GroupID == groupID {
			c := *cs
			c.Settings = cloneMap(cs.Settings)
			out = append(out, c)
		}
	}
	return out
}

// Uploads returns the files received on upload URLs.
func (s *Server) Uploads() []Upload {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Upload
	for _, u := range s.uploads {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b Upload) int { return strings.Compare(a.Attachment, b.Attachment) })
	return out
}

// Deliveries returns the Callback API requests made so far.
func (s *Server) Deliveries() []Delivery { return s.delivered.All() }

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// apiError is VK's error object.
type apiError struct {
	Code   int            `json:"error_code"`
	Msg    string         `json:"error_msg"`
	Params []requestParam `json:"request_params"`
}

type requestParam struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// messages are VK's texts for its codes.
var messages = map[int]string{
	ErrUnknown:        "Unknown error occurred",
	ErrUnknownMethod:  "Unknown method passed",
	ErrAuth:           "User authorization failed: invalid access_token (4).",
	ErrTooMany:        "Too many requests per second",
	ErrPermission:     "Permission to perform this action is denied",
	ErrInvalidRequest: "Invalid request: v (version) is required",
	ErrFlood:          "Flood control",
	ErrInternal:       "Internal server error",
	ErrAccessDenied:   "Access denied: no access to call this method",
	ErrGroupAuth:      "Group authorization failed: method is unavailable with group auth.",
	ErrParam:          "One of the parameters specified was missing or invalid",
	ErrCantSend:       "Can't send messages for users without permission",
	ErrPrivacy:        "Can't send messages to this user due to their privacy settings",
	ErrKeyboard:       "Keyboard format is invalid",
	ErrTooLong:        "Message is too long",
	ErrServersLimit:   "Servers number limit is reached",
}

// vkErr is an error answer being built.
type vkErr struct {
	code int
	msg  string
}

func fail(code int, detail string) *vkErr {
	msg := messages[code]
	if detail != "" {
		msg += ": " + detail
	}
	return &vkErr{code: code, msg: msg}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if status, ok := s.unavailable.Take(nil); ok {
		fakehttp.ProxyError(w, status)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/method/"):
		s.serveMethod(w, r, strings.TrimPrefix(r.URL.Path, "/method/"))
	case strings.HasPrefix(r.URL.Path, "/upload/"):
		s.serveUpload(w, r, strings.TrimPrefix(r.URL.Path, "/upload/"))
	default:
		http.NotFound(w, r)
	}
}

// params merges the query and a urlencoded or multipart body, as VK does.
func params(r *http.Request) (url.Values, error) {
	v := r.URL.Query()
	if r.Method != http.MethodPost {
		return v, nil
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, vs := range r.PostForm {
			v[k] = append(v[k], vs...)
		}
	case "multipart/form-data":
		if err := r.ParseMultipartForm(1 << 20); err != nil {
			return nil, err
		}
		for k, vs := range r.MultipartForm.Value {
			v[k] = append(v[k], vs...)
		}
	}
	return v, nil
}

func (s *Server) serveMethod(w http.ResponseWriter, r *http.Request, method string) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	p, err := params(r)
	if err != nil {
		s.writeError(w, method, url.Values{}, fail(ErrInvalidRequest, "cannot parse the body"))
		return
	}
	token := p.Get("access_token")
	logged := cloneValues(p)
	logged.Del("access_token")

	s.mu.Lock()
	s.calls.Add(Call{Method: method, Params: logged})
	resp, e := s.call(method, token, p)
	_, lost := s.lose.Take(func(m string) bool { return m == method })
	s.mu.Unlock()
	if lost {
		panic(http.ErrAbortHandler) // the call took effect; its answer never arrives
	}
	if e != nil {
		s.writeError(w, method, logged, e)
		return
	}
	answer(w, map[string]any{"response": resp})
}

// answer writes v as VK answers: JSON in UTF-8, status 200 whatever the outcome.
func answer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	fakehttp.WriteJSON(w, http.StatusOK, v)
}

func (s *Server) writeError(w http.ResponseWriter, method string, p url.Values, e *vkErr) {
	// VK echoes the request's parameters, never the access token.
	rp := []requestParam{{Key: "method", Value: method}, {Key: "oauth", Value: "1"}}
	keys := make([]string, 0, len(p))
	for k := range p {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		rp = append(rp, requestParam{Key: k, Value: p.Get(k)})
	}
	answer(w, map[string]any{"error": apiError{Code: e.code, Msg: e.msg, Params: rp}})
}

// call answers one method; s.mu is held.
func (s *Server) call(method, token string, p url.Values) (any, *vkErr) {
	if f, ok := s.failNext.Take(func(f failure) bool { return f.method == "" || f.method == method }); ok {
		e := fail(f.code, "")
		if f.msg != "" {
			e.msg = f.msg
		}
		return nil, e
	}
	v := p.Get("v")
	if v == "" {
		return nil, fail(ErrInvalidRequest, "")
	}
	if f, err := strconv.ParseFloat(v, 64); err != nil || f < minAPIVersion {
		return nil, &vkErr{code: ErrInvalidRequest, msg: "Invalid request: versions below 5.0 are no longer supported"}
	}
	if token == "" {
		return nil, &vkErr{code: ErrAuth, msg: "User authorization failed: no access_token passed."}
	}
	group, known := s.tokens[token]
	if !known {
		return nil, fail(ErrAuth, "")
	}
	h, ok := methods[method]
	if !ok {
		return nil, fail(ErrUnknownMethod, "")
	}
	return h(s, group, p)
}

type handler func(s *Server, group int64, p url.Values) (any, *vkErr)

// methods are the API methods the fake serves.
var methods = map[string]handler{
	"groups.getById":                     (*Server).groupsGetByID,
	"groups.getCallbackConfirmationCode": (*Server).getConfirmationCode,
	"groups.addCallbackServer":           (*Server).addCallbackServer,
	"groups.deleteCallbackServer":        (*Server).deleteCallbackServer,
	"groups.setCallbackSettings":         (*Server).setCallbackSettings,
	"groups.getCallbackServers":          (*Server).getCallbackServers,
	"messages.send":                      (*Server).messagesSend,
	"photos.getMessagesUploadServer":     (*Server).photoUploadServer,
	"photos.saveMessagesPhoto":           (*Server).savePhoto,
	"docs.getMessagesUploadServer":       (*Server).docUploadServer,
	"docs.save":                          (*Server).saveDoc,
}

func groupJSON(g *Group) map[string]any {
	return map[string]any{
		"id": g.ID, "name": g.Name, "screen_name": g.ScreenName, "is_closed": 0, "type": "group",
		"photo_50": "https://sun9-1.userapi.com/c1/50.jpg", "photo_100": "https://sun9-1.userapi.com/c1/100.jpg",
	}
}

// groupsGetByID: with a community key and no id, the key's community (how a community key is
// recognised); a user key must name the communities.
func (s *Server) groupsGetByID(group int64, p url.Values) (any, *vkErr) {
	ids := p.Get("group_ids")
	if ids == "" {
		ids = p.Get("group_id")
	}
	var out []map[string]any
	if ids == "" {
		if group == 0 {
			return nil, fail(ErrParam, "group_ids is undefined")
		}
		out = append(out, groupJSON(s.groups[group]))
	}
	for _, id := range strings.Split(ids, ",") {
		if id == "" {
			continue
		}
		var g *Group
		for _, c := range s.groups {
			if strconv.FormatInt(c.ID, 10) == id || c.ScreenName == id {
				g = c
			}
		}
		if g == nil {
			return nil, fail(ErrParam, "group_ids is invalid")
		}
		out = append(out, groupJSON(g))
	}
	return map[string]any{"groups": out, "profiles": []any{}}, nil
}

// ownGroup requires group_id to be the key's own community: only a community's own key may
// manage its Callback API.
func (s *Server) ownGroup(group int64, p url.Values) (*Group, *vkErr) {
	if group == 0 {
		return nil, fail(ErrGroupAuth, "")
	}
	id, err := strconv.ParseInt(p.Get("group_id"), 10, 64)
	if err != nil || id <= 0 {
		return nil, fail(ErrParam, "group_id is undefined")
	}
	if id != group {
		return nil, fail(ErrAccessDenied, "")
	}
	return s.groups[group], nil
}

func (s *Server) getConfirmationCode(group int64, p url.Values) (any, *vkErr) {
	g, e := s.ownGroup(group, p)
	if e != nil {
		return nil, e
	}
	return map[string]any{"code": g.ConfirmationCode}, nil
}

var secretKeyRe = regexp.MustCompile(`^[A-Za-z0-9]{1,50}$`)

func (s *Server) addCallbackServer(group int64, p url.Values) (any, *vkErr) {
	g, e := s.ownGroup(group, p)
	if e != nil {
		return nil, e
	}
	u, err := url.Parse(p.Get("url"))
	if p.Get("url") == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fail(ErrParam, "url is invalid")
	}
	title := p.Get("title")
	if title == "" || utf8.RuneCountInString(title) > 14 {
		return nil, fail(ErrParam, "title should be at most 14 characters")
	}
	if k := p.Get("secret_key"); k != "" && !secretKeyRe.MatchString(k) {
		return nil, fail(ErrParam, "secret_key should be at most 50 latin letters and digits")
	}
	n := 0
	var last int64
	for _, cs := range s.servers {
		if cs.GroupID == g.ID {
			n++
		}
		last = max(last, cs.ID)
	}
	if n >= maxCallbackServers {
		return nil, fail(ErrServersLimit, "")
	}
	cs := &CallbackServer{ID: last + 1, GroupID: g.ID, URL: u.String(), Title: title,
		SecretKey: p.Get("secret_key"), Status: "unconfigured", Settings: map[string]string{}}
	s.servers = append(s.servers, cs)
	return map[string]any{"server_id": cs.ID}, nil
}

// ownServer finds server_id among the callback servers of the key's own community (see
// ownGroup) and returns its index in s.servers.
func (s *Server) ownServer(group int64, p url.Values) (int, *vkErr) {
	g, e := s.ownGroup(group, p)
	if e != nil {
		return 0, e
	}
	id, err := strconv.ParseInt(p.Get("server_id"), 10, 64)
	if err != nil {
		return 0, fail(ErrParam, "server_id is undefined")
	}
	for i, cs := range s.servers {
		if cs.GroupID == g.ID && cs.ID == id {
			return i, nil
		}
	}
	return 0, fail(ErrParam, "server_id is invalid")
}

func (s *Server) deleteCallbackServer(group int64, p url.Values) (any, *vkErr) {
	i, e := s.ownServer(group, p)
	if e != nil {
		return nil, e
	}
	s.servers = slices.Delete(s.servers, i, i+1)
	return 1, nil
}

func (s *Server) setCallbackSettings(group int64, p url.Values) (any, *vkErr) {
	i, e := s.ownServer(group, p)
	if e != nil {
		return nil, e
	}
	for k := range p {
		switch k {
		case "access_token", "v", "group_id", "server_id":
			continue
		case "api_version":
			if f, err := strconv.ParseFloat(p.Get(k), 64); err != nil || f < minAPIVersion {
				return nil, fail(ErrParam, "api_version is invalid")
			}
		default:
			if b := p.Get(k); b != "0" && b != "1" {
				return nil, fail(ErrParam, k+" should be 0 or 1")
			}
		}
		s.servers[i].Settings[k] = p.Get(k)
	}
	return 1, nil
}

func (s *Server) getCallbackServers(group int64, p url.Values) (any, *vkErr) {
	g, e := s.ownGroup(group, p)
	if e != nil {
		return nil, e
	}
	items := []map[string]any{}
	for _, cs := range s.servers {
		if cs.GroupID == g.ID {
			items = append(items, map[string]any{"id": cs.ID, "title": cs.Title, "creator_id": 0,
				"url": cs.URL, "secret_key": cs.SecretKey, "status": cs.Status})
		}
	}
	return map[string]any{"count": len(items), "items": items}, nil
}

// messagesSend delivers one message. A random_id already used for the peer within the hour
// sends nothing and answers the first message's id, as VK de-duplicates retried sends.
func (s *Server) messagesSend(group int64, p url.Values) (any, *vkErr) {
	if group == 0 {
		return nil, fail(ErrPermission, "")
	}
	peerText := p.Get("peer_id")
	if peerText == "" {
		peerText = p.Get("user_id")
	}
	peer, err := strconv.ParseInt(peerText, 10, 64)
	if err != nil || peer == 0 {
		return nil, fail(ErrParam, "peer_id is undefined")
	}
	if p.Get("random_id") == "" {
		return nil, fail(ErrParam, "random_id is a required parameter")
	}
	rid, err := strconv.ParseInt(p.Get("random_id"), 10, 32)
	if err != nil {
		return nil, fail(ErrParam, "random_id should be int32")
	}
	text, attachment := p.Get("message"), p.Get("attachment")
	if text == "" && attachment == "" {
		return nil, fail(ErrParam, "message is empty or invalid")
	}
	if utf8.RuneCountInString(text) > maxMessageRunes {
		return nil, fail(ErrTooLong, "")
	}
	var kb json.RawMessage
	if k := p.Get("keyboard"); k != "" {
		if msg := checkKeyboard(k); msg != "" {
			return nil, fail(ErrKeyboard, msg)
		}
		kb = json.RawMessage(k)
	}
	if attachment != "" {
		for _, a := range strings.Split(attachment, ",") {
			if !s.attachmentOf(group, a) {
				return nil, fail(ErrParam, "attachment is invalid")
			}
		}
	}
	if code, ok := s.blocked[peer]; ok {
		return nil, fail(code, "")
	}
	key := sentKey{group: group, peer: peer, rid: int32(rid)}
	if prev, ok := s.sentIDs[key]; ok && rid != 0 && time.Since(prev.at) < randomIDWindow {
		return prev.id, nil
	}
	id := s.nextID
	s.nextID++
	s.sentIDs[key] = sentID{id: id, at: time.Now()}
	s.messages.Add(Message{ID: id, GroupID: group, PeerID: peer, RandomID: int32(rid),
		Text: text, Keyboard: kb, Attachment: attachment})
	return id, nil
}

func (s *Server) attachmentOf(group int64, a string) bool {
	for _, u := range s.uploads {
		if u.GroupID == group && u.Attachment != "" && u.Attachment == a {
			return true
		}
	}
	return false
}

// keyboard is the messages.send keyboard object.
type keyboard struct {
	OneTime bool       `json:"one_time"`
	Inline  bool       `json:"inline"`
	Buttons [][]button `json:"buttons"`
}

type button struct {
	Action struct {
		Type    string `json:"type"`
		Label   string `json:"label"`
		Payload string `json:"payload"`
		Link    string `json:"link"`
	} `json:"action"`
	Color string `json:"color"`
}

// checkKeyboard applies VK's keyboard rules; "" when the keyboard is valid.
func checkKeyboard(k string) string {
	var kb keyboard
	dec := json.NewDecoder(strings.NewReader(k))
	if err := dec.Decode(&kb); err != nil {
		return "keyboard is not JSON"
	}
	rows, perRow, total := 10, 5, 40
	if kb.Inline {
		rows, total = 6, 10
	}
	if kb.Inline && kb.OneTime {
		return "an inline keyboard cannot be one_time"
	}
	if len(kb.Buttons) > rows {
		return fmt.Sprintf("at most %d rows", rows)
	}
	n := 0
	for _, row := range kb.Buttons {
		if len(row) == 0 || len(row) > perRow {
			return fmt.Sprintf("1 to %d buttons per row", perRow)
		}
		for _, b := range row {
			n++
			a := b.Action
			if a.Payload != "" {
				if len(a.Payload) > 255 {
					return "payload is longer than 255"
				}
				if !json.Valid([]byte(a.Payload)) {
					return "payload is not JSON"
				}
			}
			switch a.Type {
			case "text", "callback":
				if a.Label == "" || utf8.RuneCountInString(a.Label) > 40 {
					return "label must be 1 to 40 characters"
				}
				if b.Color != "" && !slices.Contains([]string{"primary", "secondary", "negative", "positive"}, b.Color) {
					return "unknown color"
				}
			case "open_link":
				if a.Label == "" || utf8.RuneCountInString(a.Label) > 40 {
					return "label must be 1 to 40 characters"
				}
				if u, err := url.Parse(a.Link); err != nil || (u.Scheme != "http" && u.Scheme != "https") {
					return "link is invalid"
				}
				if b.Color != "" {
					return "open_link buttons have no color"
				}
			default:
				return "unknown action type " + a.Type
			}
		}
	}
	if n > total {
		return fmt.Sprintf("at most %d buttons", total)
	}
	return ""
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) peerParam(p url.Values) *vkErr {
	if p.Get("peer_id") == "" {
		return fail(ErrParam, "peer_id is undefined")
	}
	if _, err := strconv.ParseInt(p.Get("peer_id"), 10, 64); err != nil {
		return fail(ErrParam, "peer_id is invalid")
	}
	return nil
}

func (s *Server) photoUploadServer(group int64, p url.Values) (any, *vkErr) {
	if group == 0 {
		return nil, fail(ErrGroupAuth, "")
	}
	if e := s.peerParam(p); e != nil {
		return nil, e
	}
	tok := randomHex(8)
	s.uploads[tok] = &Upload{Kind: "photo", GroupID: group}
	return map[string]any{"album_id": -64, "upload_url": s.URL + "/upload/photo?t=" + tok, "user_id": 0, "group_id": group}, nil
}

func (s *Server) docUploadServer(group int64, p url.Values) (any, *vkErr) {
	if group == 0 {
		return nil, fail(ErrGroupAuth, "")
	}
	if e := s.peerParam(p); e != nil {
		return nil, e
	}
	if t := p.Get("type"); t != "" && t != "doc" && t != "audio_message" {
		return nil, fail(ErrParam, "type is invalid")
	}
	tok := randomHex(8)
	s.uploads[tok] = &Upload{Kind: "doc", GroupID: group}
	return map[string]any{"upload_url": s.URL + "/upload/doc?t=" + tok}, nil
}

// serveUpload receives a file on an upload URL: multipart/form-data with the file in the
// field "photo" (photos) or "file" (documents).
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request, kind string) {
	tok := r.URL.Query().Get("t")
	s.mu.Lock()
	u, ok := s.uploads[tok]
	usable := ok && u.Kind == kind && u.Bytes == nil
	s.mu.Unlock()
	if r.Method != http.MethodPost || !usable {
		answer(w, map[string]any{"error": "ERR_UPLOAD_BAD_URL: invalid upload url"})
		return
	}
	field, limit := "file", int64(maxDocBytes)
	if kind == "photo" {
		field, limit = "photo", maxPhotoBytes
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit+1<<20)
	f, hdr, err := r.FormFile(field)
	if err != nil {
		answer(w, map[string]any{"error": "ERR_UPLOAD_FILE_NOT_UPLOADED: file not uploaded"})
		return
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil || int64(len(data)) > limit {
		answer(w, map[string]any{"error": "ERR_UPLOAD_FILE_TOO_BIG: file is too big"})
		return
	}
	s.mu.Lock()
	u.Bytes, u.Filename, u.ContentType = data, hdr.Filename, hdr.Header.Get("Content-Type")
	s.mu.Unlock()
	if kind == "photo" {
		// VK answers a file that is not an image with an empty photo list.
		photo := "[]"
		if _, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
			photo = `[{"photo":"` + tok + `","sizes":[],"kid":"` + randomHex(4) + `"}]`
		}
		answer(w, map[string]any{"server": 851234, "photo": photo, "hash": hash(tok)})
		return
	}
	answer(w, map[string]any{"file": tok + "|" + hash(tok)})
}

func hash(tok string) string { return "h" + tok[:6] }

func (s *Server) savePhoto(group int64, p url.Values) (any, *vkErr) {
	if group == 0 {
		return nil, fail(ErrGroupAuth, "")
	}
	var list []struct {
		Photo string `json:"photo"`
	}
	if err := json.Unmarshal([]byte(p.Get("photo")), &list); err != nil || len(list) != 1 {
		return nil, fail(ErrParam, "photos_list is invalid")
	}
	tok := list[0].Photo
	u, ok := s.uploads[tok]
	if !ok || u.GroupID != group || u.Kind != "photo" || u.Bytes == nil || s.saved[tok] {
		return nil, fail(ErrParam, "photo is undefined")
	}
	if p.Get("hash") != hash(tok) || p.Get("server") != "851234" {
		return nil, fail(ErrParam, "hash is invalid")
	}
	s.saved[tok] = true
	id := s.nextID
	s.nextID++
	key := randomHex(5)
	u.Attachment = fmt.Sprintf("photo-%d_%d_%s", group, id, key)
	return []map[string]any{{"id": id, "album_id": -64, "owner_id": -group, "access_key": key,
		"date": time.Now().Unix(), "sizes": []any{}, "text": ""}}, nil
}

func (s *Server) saveDoc(group int64, p url.Values) (any, *vkErr) {
	if group == 0 {
		return nil, fail(ErrGroupAuth, "")
	}
	tok, h, _ := strings.Cut(p.Get("file"), "|")
	u, ok := s.uploads[tok]
	if !ok || u.GroupID != group || u.Kind != "doc" || u.Bytes == nil || s.saved[tok] || h != hash(tok) {
		return nil, fail(ErrParam, "file is undefined")
	}
	s.saved[tok] = true
	id := s.nextID
	s.nextID++
	u.Attachment = fmt.Sprintf("doc-%d_%d", group, id)
	title := p.Get("title")
	if title == "" {
		title = u.Filename
	}
	return map[string]any{"type": "doc", "doc": map[string]any{"id": id, "owner_id": -group, "title": title,
		"size": len(u.Bytes), "ext": strings.TrimPrefix(extOf(u.Filename), "."), "url": s.URL + "/doc" + strconv.FormatInt(id, 10),
		"date": time.Now().Unix(), "type": 1}}, nil
}

func extOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i:]
	}
	return ""
}
