// Package whatsapp is a fake of the WhatsApp Business Cloud API (Meta's Graph API) on
// 127.0.0.1, for tests. It speaks the real wire format and checks what the real API checks
// before it answers: the access token (Authorization: Bearer or OAuth) and the objects it
// may see, required fields and limits of messages and templates, the Resumable Upload
// protocol (session, file_offset, length, file type), and it answers in the Graph API's
// error shape {"error": {"message", "type", "code", "error_subcode", "fbtrace_id"}}.
//
// It records what it received (messages, templates, uploads, subscriptions), keeps new
// templates PENDING until the test approves or rejects them, pages its template list with
// a small page size, can deliver signed webhooks (message_template_status_update, inbound
// messages and the statuses of the messages it accepted) to a URL, and can be told to
// misbehave: throttle, fail with 5xx, reject a token, block a user, close a user's 24-hour
// window.
//
// It implements the wire format itself and imports nothing of the adapter, so a mismatch
// between the two shows up as a failing test.
package whatsapp

import (
	"bytes"
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
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

// The account every fake starts with: one token, one business account (WABA) with one
// phone number, and the Meta app (id and secret).
const (
	Version            = "v21.0"
	AccessToken        = "EAAJfakeWhatsAppSystemUserToken0123456789"
	PhoneNumberID      = "106540352242922"
	DisplayPhoneNumber = "+1 555-010-0199"
	VerifiedName       = "Demo Shop"
	BusinessAccountID  = "102290129340398"
	AppID              = "1029384756102938"
	AppSecret          = "fake-whatsapp-app-secret"
)

// DefaultPageSize is the fake's largest template page (the real API's default is 25):
// small, so that clients must follow paging.
const DefaultPageSize = 2

// maxUploadBytes bounds one upload session (the largest header example is 100 MB).
const maxUploadBytes = 100 << 20

// Message is one message a business sent.
type Message struct {
	ID            string
	PhoneNumberID string
	To            string
	Type          string
	// Body is the whole request body.
	Body json.RawMessage
}

// Template is a message template as the fake holds it.
type Template struct {
	ID                string
	BusinessAccountID string
	Name              string
	Language          string
	Category          string
	Status            string
	RejectedReason    string
	Components        json.RawMessage
	Edits             int
}

// Upload is a finished resumable upload.
type Upload struct {
	FileName string
	FileType string
	Length   int64
	Handle   string
	SHA256   string
}

type phone struct {
	id, display, verified, waba string
	// tier is the number's messaging_limit_tier ("" answers TIER_1K).
	tier string
}

type session struct {
	id, token, fileType, fileName string
	length, offset                int64
	sig                           string
}

type failure struct {
	status, code, subcode int
	message               string
	retryAfter            string
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	srv *httptest.Server

	// What the fake received, for tests to read back, and the failures a test queued for the
	// next requests (each locks itself).
	messages fakehttp.Log[Message]
	uploads  fakehttp.Log[Upload]
	requests fakehttp.Log[string]
	failures fakehttp.Queue[failure]

	mu          sync.Mutex
	tokens      map[string][]string // token -> WABA ids it may act on
	rejected    map[string]bool
	phones      map[string]phone
	wabas       map[string]bool
	templates   []*Template
	nextID      int64
	sessions    map[string]*session
	handles     map[string]Upload
	subscribed  []string
	blocked     map[string]bool
	closed      map[string]bool
	pageSize    int
	templateHit int
}

// New starts a fake on 127.0.0.1, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := newServer()
	s.srv = fakehttp.Start(t, http.HandlerFunc(s.serve))
	return s
}

// Listen starts the fake on 127.0.0.1 outside a test (make demo); close returns its port.
func Listen() (s *Server, close func()) {
	s = newServer()
	s.srv = fakehttp.Listen(http.HandlerFunc(s.serve))
	return s, s.srv.Close
}

func newServer() *Server {
	s := &Server{
		tokens:   map[string][]string{AccessToken: {BusinessAccountID}},
		rejected: map[string]bool{},
		phones:   map[string]phone{PhoneNumberID: {id: PhoneNumberID, display: DisplayPhoneNumber, verified: VerifiedName, waba: BusinessAccountID}},
		wabas:    map[string]bool{BusinessAccountID: true},
		nextID:   1700000000000000,
		sessions: map[string]*session{},
		handles:  map[string]Upload{},
		blocked:  map[string]bool{},
		closed:   map[string]bool{},
		pageSize: DefaultPageSize,
	}
	return s
}

// URL is the Graph API base URL, version included (what the adapter's BaseURL takes).
func (s *Server) URL() string { return s.srv.URL + "/" + Version }

// Credentials are the connect credentials of the default account, as an API client sends them.
func (s *Server) Credentials() map[string]string {
	return map[string]string{"access_token": AccessToken, "phone_number_id": PhoneNumberID, "business_account_id": BusinessAccountID}
}

// AddNumber adds a phone number to a business account (creating the account).
func (s *Server) AddNumber(waba, phoneNumberID, display, verifiedName string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wabas[waba] = true
	s.phones[phoneNumberID] = phone{id: phoneNumberID, display: display, verified: verifiedName, waba: waba}
}

// AddToken makes token valid for the given business accounts.
func (s *Server) AddToken(token string, wabas ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokens[token] = append([]string(nil), wabas...)
	delete(s.rejected, token)
}

// RejectToken makes token invalid from now on (expired or revoked: code 190).
func (s *Server) RejectToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected[token] = true
}

// BlockUser makes messages to waID undeliverable (131026).
func (s *Server) BlockUser(waID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked[waID] = true
}

// CloseWindow puts waID outside the 24-hour window: only templates reach them (131047).
func (s *Server) CloseWindow(waID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed[waID] = true
}

// Throttle makes the next n requests answer the Cloud API's rate limit error (130429).
func (s *Server) Throttle(n int) {
	s.FailWith(n, http.StatusTooManyRequests, 130429, 0, "(#130429) Rate limit hit", "")
}

// Fail makes the next n requests answer a transient 500 (code 2).
func (s *Server) Fail(n int) {
	s.FailWith(n, http.StatusInternalServerError, 2, 0, "An unexpected error has occurred. Please retry your request later.", "")
}

// FailWith makes the next n requests answer the given error (retryAfter, when set, is sent
// as Retry-After).
func (s *Server) FailWith(n, status, code, subcode int, message, retryAfter string) {
	s.failures.Push(n, failure{status, code, subcode, message, retryAfter})
}

// SetPageSize sets the largest template page.
func (s *Server) SetPageSize(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pageSize = n
}

// Messages returns what businesses sent, in order.
func (s *Server) Messages() []Message { return s.messages.All() }

// Uploads returns the finished uploads, in order.
func (s *Server) Uploads() []Upload { return s.uploads.All() }

// Subscriptions returns the business accounts the app was subscribed to (subscribed_apps).
func (s *Server) Subscriptions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subscribed)
}

// Requests returns "METHOD /path" of every request received (without the query).
func (s *Server) Requests() []string { return s.requests.All() }

// TemplatePageRequests counts the template list pages served.
func (s *Server) TemplatePageRequests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.templateHit
}

// Templates returns every template, in creation order.
func (s *Server) Templates() []Template {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Template, 0, len(s.templates))
	for _, t := range s.templates {
		out = append(out, *t)
	}
	return out
}

// Template returns the template of the default account with name and language.
func (s *Server) Template(name, language string) (Template, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t := s.find(BusinessAccountID, name, language); t != nil {
		return *t, true
	}
	return Template{}, false
}

func (s *Server) find(waba, name, language string) *Template {
	for _, t := range s.templates {
		if t.BusinessAccountID == waba && t.Name == name && t.Language == language {
			return t
		}
	}
	return nil
}

// AddTemplate adds a template to the default account as if made in WhatsApp Manager, and
// returns its id.
func (s *Server) AddTemplate(name, language, category, status, components string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := strconv.FormatInt(s.nextID, 10)
	s.templates = append(s.templates, &Template{ID: id, BusinessAccountID: BusinessAccountID, Name: name, Language: language,
		Category: category, Status: status, RejectedReason: "NONE", Components: json.RawMessage(components)})
	return id
}

// RemoveTemplate deletes a template as if in WhatsApp Manager.
func (s *Server) RemoveTemplate(name, language string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.templates)
	s.templates = slices.DeleteFunc(s.templates, func(t *Template) bool {
		return t.BusinessAccountID == BusinessAccountID && t.Name == name && t.Language == language
	})
	return len(s.templates) < n
}

// Approve approves the default account's template name/language.
func (s *Server) Approve(name, language string) error {
	return s.SetStatus(name, language, "APPROVED", "NONE")
}

// Reject rejects the default account's template with a reason (INVALID_FORMAT,
// ABUSIVE_CONTENT, INCORRECT_CATEGORY, TAG_CONTENT_MISMATCH, SCAM, ...).
func (s *Server) Reject(name, language, reason string) error {
	return s.SetStatus(name, language, "REJECTED", reason)
}

// SetStatus sets a template's status as the review would.
func (s *Server) SetStatus(name, language, status, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.find(BusinessAccountID, name, language)
	if t == nil {
		return fmt.Errorf("fake whatsapp: no template %s/%s", name, language)
	}
	t.Status, t.RejectedReason = status, reason
	return nil
}

// Sign returns the X-Hub-Signature-256 value of body under the app secret.
func Sign(body []byte) string {
	m := hmac.New(sha256.New, []byte(AppSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Deliver POSTs a webhook body to url as Meta does: JSON, signed with the app secret. It
// returns the answer's status.
func (s *Server) Deliver(url string, body []byte) (int, error) {
	status, _, err := fakehttp.Post(url, body, http.Header{
		"X-Hub-Signature-256": {Sign(body)},
		"User-Agent":          {"facebookexternalua"},
	})
	return status, err
}

// TemplateStatusUpdate is the message_template_status_update webhook body announcing the
// current status of the default account's template name/language.
func (s *Server) TemplateStatusUpdate(name, language string) ([]byte, error) {
	s.mu.Lock()
	t := s.find(BusinessAccountID, name, language)
	s.mu.Unlock()
	if t == nil {
		return nil, fmt.Errorf("fake whatsapp: no template %s/%s", name, language)
	}
	id, _ := strconv.ParseInt(t.ID, 10, 64)
	value := map[string]any{"event": t.Status, "message_template_id": id, "message_template_name": t.Name,
		"message_template_language": t.Language, "reason": t.RejectedReason, "message_template_category": t.Category}
	return envelope(t.BusinessAccountID, "message_template_status_update", value)
}

// DeliverTemplateStatus POSTs the template's status update, signed, to url.
func (s *Server) DeliverTemplateStatus(url, name, language string) (int, error) {
	body, err := s.TemplateStatusUpdate(name, language)
	if err != nil {
		return 0, err
	}
	return s.Deliver(url, body)
}

// TextMessage is the webhook body of a text a user (waID, with profile name) sent to a
// business phone number; its message id is returned too.
func TextMessage(phoneNumberID, waID, name, text string) (body []byte, messageID string) {
	id := "wamid." + fakehttp.RandomString(24)
	value := inbound(phoneNumberID, waID, name, map[string]any{"from": waID, "id": id,
		"timestamp": strconv.FormatInt(time.Now().Unix(), 10), "type": "text", "text": map[string]any{"body": text}})
	b, _ := envelope(BusinessAccountID, "messages", value)
	return b, id
}

// ButtonReply is the webhook body of a press on a reply button with payload id.
func ButtonReply(phoneNumberID, waID, name, payload, title string) (body []byte, messageID string) {
	id := "wamid." + fakehttp.RandomString(24)
	value := inbound(phoneNumberID, waID, name, map[string]any{"from": waID, "id": id,
		"timestamp": strconv.FormatInt(time.Now().Unix(), 10), "type": "interactive",
		"interactive": map[string]any{"type": "button_reply", "button_reply": map[string]any{"id": payload, "title": title}}})
	b, _ := envelope(BusinessAccountID, "messages", value)
	return b, id
}

// Status is one status of a message a business sent, as the messages webhook reports it in
// its statuses array.
type Status struct {
	// MessageID is the wamid the send answered.
	MessageID string
	// RecipientID is the wa_id the message went to.
	RecipientID string
	// Status is sent, delivered, read or failed.
	Status string
	At     time.Time
	// ErrorCode and ErrorTitle describe a failure (failed only; a failed status without a
	// code carries 131026, Message undeliverable).
	ErrorCode  int
	ErrorTitle string
}

// StatusUpdate is the webhook body of statuses of messages phoneNumberID sent, in one batch
// as Meta sends them (delivered and sent carry the conversation and pricing, failed its
// errors, in the shapes of Meta's documented examples).
func StatusUpdate(phoneNumberID string, sts ...Status) []byte {
	b, _ := envelopeOf(BusinessAccountID, []change{statusChange(phoneNumberID, sts)})
	return b
}

func statusChange(phoneNumberID string, sts []Status) change {
	list := make([]any, 0, len(sts))
	for _, st := range sts {
		at := cmp.Or(st.At, time.Now())
		v := map[string]any{"id": st.MessageID, "status": st.Status, "timestamp": strconv.FormatInt(at.Unix(), 10),
			"recipient_id": st.RecipientID}
		switch st.Status {
		case "sent", "delivered":
			v["conversation"] = map[string]any{"id": fakehttp.RandomString(32),
				"expiration_timestamp": strconv.FormatInt(at.Add(24*time.Hour).Unix(), 10), "origin": map[string]any{"type": "marketing"}}
			v["pricing"] = map[string]any{"billable": true, "pricing_model": "CBP", "category": "marketing"}
		case "failed":
			code, title := st.ErrorCode, st.ErrorTitle
			if code == 0 {
				code, title = 131026, "Message undeliverable."
			}
			v["errors"] = []any{map[string]any{"code": code, "title": title, "message": title,
				"error_data": map[string]any{"details": title},
				"href":       "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"}}
		}
		list = append(list, v)
	}
	return change{field: "messages", value: map[string]any{
		"messaging_product": "whatsapp",
		"metadata":          map[string]any{"display_phone_number": DisplayPhoneNumber, "phone_number_id": phoneNumberID},
		"statuses":          list,
	}}
}

// MessageStatus is the webhook body announcing status (sent, delivered, read or failed) of
// messages the fake accepted, at the time of the call: one change per business number that
// sent them, each message's recipient as the send named it. An id the fake never answered
// is an error.
func (s *Server) MessageStatus(status string, messageIDs ...string) ([]byte, error) {
	byID := map[string]Message{}
	for _, m := range s.messages.All() {
		byID[m.ID] = m
	}
	var order []string
	byNumber := map[string][]Status{}
	for _, id := range messageIDs {
		m, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("fake whatsapp: no message %s was sent", id)
		}
		if _, seen := byNumber[m.PhoneNumberID]; !seen {
			order = append(order, m.PhoneNumberID)
		}
		byNumber[m.PhoneNumberID] = append(byNumber[m.PhoneNumberID],
			Status{MessageID: id, RecipientID: strings.TrimPrefix(m.To, "+"), Status: status, At: time.Now()})
	}
	changes := make([]change, 0, len(order))
	for _, number := range order {
		changes = append(changes, statusChange(number, byNumber[number]))
	}
	return envelopeOf(BusinessAccountID, changes)
}

// DeliverStatus POSTs the status of the messages (MessageStatus), signed, to url, and
// returns the answer's status.
func (s *Server) DeliverStatus(url, status string, messageIDs ...string) (int, error) {
	body, err := s.MessageStatus(status, messageIDs...)
	if err != nil {
		return 0, err
	}
	return s.Deliver(url, body)
}

// change is one entry change of a webhook body.
type change struct {
	field string
	value any
}

func envelopeOf(entryID string, changes []change) ([]byte, error) {
	cs := make([]any, 0, len(changes))
	for _, c := range changes {
		cs = append(cs, map[string]any{"value": c.value, "field": c.field})
	}
	return json.Marshal(map[string]any{
		"object": "whatsapp_business_account",
		"entry":  []any{map[string]any{"id": entryID, "time": time.Now().Unix(), "changes": cs}},
	})
}

func inbound(phoneNumberID, waID, name string, msg map[string]any) map[string]any {
	display := DisplayPhoneNumber
	return map[string]any{
		"messaging_product": "whatsapp",
		"metadata":          map[string]any{"display_phone_number": display, "phone_number_id": phoneNumberID},
		"contacts":          []any{map[string]any{"profile": map[string]any{"name": name}, "wa_id": waID}},
		"messages":          []any{msg},
	}
}

func envelope(entryID, field string, value any) ([]byte, error) {
	return json.Marshal(map[string]any{
		"object": "whatsapp_business_account",
		"entry": []any{map[string]any{"id": entryID, "time": time.Now().Unix(),
			"changes": []any{map[string]any{"value": value, "field": field}}}},
	})
}

// apiError is the Graph API's error answer.
type apiError struct {
	status  int
	code    int
	subcode int
	typ     string
	message string
	title   string
	userMsg string
}

func (e *apiError) write(w http.ResponseWriter) {
	body := map[string]any{"message": e.message, "type": cmp.Or(e.typ, "OAuthException"), "code": e.code,
		"fbtrace_id": "A" + fakehttp.RandomString(22)}
	if e.subcode != 0 {
		body["error_subcode"] = e.subcode
	}
	if e.title != "" {
		body["error_user_title"] = e.title
		body["error_user_msg"] = e.userMsg
	}
	if e.status >= 500 {
		body["is_transient"] = true
	}
	fakehttp.WriteJSON(w, e.status, map[string]any{"error": body})
}

func invalid(format string, args ...any) *apiError {
	return &apiError{status: 400, code: 100, message: "(#100) " + fmt.Sprintf(format, args...)}
}

func invalidSub(subcode int, title, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	return &apiError{status: 400, code: 100, subcode: subcode, message: "Invalid parameter", title: title, userMsg: msg}
}

func noObject(id, method string) *apiError {
	return &apiError{status: 400, code: 100, subcode: 33, message: fmt.Sprintf("Unsupported %s request. Object with ID '%s' does not exist, "+
		"cannot be loaded due to missing permissions, or does not support this operation.", strings.ToLower(method), id)}
}

// serve routes one request.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if err := s.route(w, r); err != nil {
		err.write(w)
	}
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) *apiError {
	s.requests.Add(r.Method + " " + r.URL.Path)
	if f, ok := s.failures.Take(nil); ok {
		if f.retryAfter != "" {
			w.Header().Set("Retry-After", f.retryAfter)
		}
		return &apiError{status: f.status, code: f.code, subcode: f.subcode, message: f.message}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/"+Version+"/")
	if !ok {
		return &apiError{status: 400, code: 2500, message: "Unknown path components: " + r.URL.Path}
	}
	token, aerr := s.authenticate(r)
	if aerr != nil {
		return aerr
	}
	parts := strings.Split(rest, "/")
	switch {
	case len(parts) == 1 && strings.HasPrefix(parts[0], "upload:"):
		return s.upload(w, r, token, parts[0])
	case len(parts) == 1 && r.Method == http.MethodGet:
		return s.getPhone(w, r, token, parts[0])
	case len(parts) == 1 && r.Method == http.MethodPost:
		return s.editTemplate(w, r, token, parts[0])
	case len(parts) == 2 && parts[1] == "phone_numbers" && r.Method == http.MethodGet:
		return s.listPhones(w, token, parts[0])
	case len(parts) == 2 && parts[1] == "subscribed_apps" && r.Method == http.MethodPost:
		return s.subscribe(w, token, parts[0])
	case len(parts) == 2 && parts[1] == "messages" && r.Method == http.MethodPost:
		return s.sendMessage(w, r, token, parts[0])
	case len(parts) == 2 && parts[1] == "message_templates":
		switch r.Method {
		case http.MethodGet:
			return s.listTemplates(w, r, token, parts[0])
		case http.MethodPost:
			return s.createTemplate(w, r, token, parts[0])
		case http.MethodDelete:
			return s.deleteTemplate(w, r, token, parts[0])
		}
	case len(parts) == 2 && parts[1] == "uploads" && r.Method == http.MethodPost:
		return s.startUpload(w, r, token, parts[0])
	}
	return noObject(parts[0], r.Method)
}

// authenticate reads the token from Authorization (Bearer or OAuth) or access_token.
func (s *Server) authenticate(r *http.Request) (string, *apiError) {
	tok := r.URL.Query().Get("access_token")
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, v, ok := strings.Cut(h, " ")
		if !ok || (!strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "OAuth")) {
			return "", &apiError{status: 401, code: 190, message: "Invalid OAuth access token - Cannot parse access token"}
		}
		tok = strings.TrimSpace(v)
	}
	if tok == "" {
		return "", &apiError{status: 400, code: 2500, message: "An active access token must be used to query information about the current user."}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tokens[tok]; !ok || s.rejected[tok] {
		if s.rejected[tok] {
			return "", &apiError{status: 401, code: 190, subcode: 463, message: "Error validating access token: Session has expired."}
		}
		return "", &apiError{status: 401, code: 190, message: "Invalid OAuth access token - Cannot parse access token"}
	}
	return tok, nil
}

// mayUse reports whether token may act on the business account. Call with s.mu held.
func (s *Server) mayUse(token, waba string) bool {
	return slices.Contains(s.tokens[token], waba)
}

func (s *Server) getPhone(w http.ResponseWriter, r *http.Request, token, id string) *apiError {
	s.mu.Lock()
	p, ok := s.phones[id]
	allowed := ok && s.mayUse(token, p.waba)
	s.mu.Unlock()
	if !allowed {
		return noObject(id, r.Method)
	}
	tier := p.tier
	if tier == "" {
		tier = "TIER_1K"
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"display_phone_number": p.display, "verified_name": p.verified, "id": p.id,
		"messaging_limit_tier": tier})
	return nil
}

// SetMessagingTier sets a phone number's messaging_limit_tier (TIER_250, TIER_1K, ...,
// TIER_UNLIMITED), as Meta moves a number between tiers.
func (s *Server) SetMessagingTier(phoneID, tier string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.phones[phoneID]; ok {
		p.tier = tier
		s.phones[phoneID] = p
	}
}

func (s *Server) listPhones(w http.ResponseWriter, token, waba string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wabas[waba] || !s.mayUse(token, waba) {
		return noObject(waba, "get")
	}
	data := []any{}
	for _, p := range s.phones {
		if p.waba == waba {
			data = append(data, map[string]any{"id": p.id, "display_phone_number": p.display, "verified_name": p.verified})
		}
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"data": data, "paging": map[string]any{"cursors": map[string]any{"before": "QVFI", "after": "QVFI"}}})
	return nil
}

func (s *Server) subscribe(w http.ResponseWriter, token, waba string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wabas[waba] || !s.mayUse(token, waba) {
		return noObject(waba, "post")
	}
	if !slices.Contains(s.subscribed, waba) {
		s.subscribed = append(s.subscribed, waba)
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

// readJSON reads a JSON object body (at most 1 MiB).
func readJSON(r *http.Request, v any) *apiError {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return invalid("Content-Type must be application/json, got %q", ct)
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return invalid("the body could not be read")
	}
	if err := json.Unmarshal(b, v); err != nil {
		return invalid("the body is not a JSON object: %v", err)
	}
	return nil
}

// The message shapes the fake reads (POST /{phone_number_id}/messages).
type (
	outMessage struct {
		MessagingProduct string       `json:"messaging_product"`
		RecipientType    string       `json:"recipient_type"`
		To               string       `json:"to"`
		Type             string       `json:"type"`
		Text             *textPart    `json:"text"`
		Image            *mediaPart   `json:"image"`
		Video            *mediaPart   `json:"video"`
		Audio            *mediaPart   `json:"audio"`
		Document         *mediaPart   `json:"document"`
		Interactive      *interactive `json:"interactive"`
		Template         *templateRef `json:"template"`
	}
	textPart struct {
		Body string `json:"body"`
	}
	mediaPart struct {
		Link     string `json:"link"`
		ID       string `json:"id"`
		Caption  string `json:"caption"`
		Filename string `json:"filename"`
	}
	interactive struct {
		Type string `json:"type"`
		Body *struct {
			Text string `json:"text"`
		} `json:"body"`
		Action *action `json:"action"`
	}
	action struct {
		Buttons []struct {
			Type  string `json:"type"`
			Reply struct {
				ID    string `json:"id"`
				Title string `json:"title"`
			} `json:"reply"`
		} `json:"buttons"`
		Button   string `json:"button"`
		Sections []struct {
			Rows []struct {
				ID    string `json:"id"`
				Title string `json:"title"`
			} `json:"rows"`
		} `json:"sections"`
		Name       string `json:"name"`
		Parameters *struct {
			DisplayText string `json:"display_text"`
			URL         string `json:"url"`
		} `json:"parameters"`
	}
	templateRef struct {
		Name     string `json:"name"`
		Language struct {
			Code string `json:"code"`
		} `json:"language"`
		Components []struct {
			Type       string `json:"type"`
			Parameters []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"parameters"`
		} `json:"components"`
	}
)

var digits = regexp.MustCompile(`^[0-9]{6,20}$`)

func (s *Server) sendMessage(w http.ResponseWriter, r *http.Request, token, phoneID string) *apiError {
	s.mu.Lock()
	p, ok := s.phones[phoneID]
	allowed := ok && s.mayUse(token, p.waba)
	s.mu.Unlock()
	if !allowed {
		return noObject(phoneID, "post")
	}
	var raw json.RawMessage
	if err := readJSON(r, &raw); err != nil {
		return err
	}
	var m outMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return invalid("the body does not match the message schema: %v", err)
	}
	if m.MessagingProduct != "whatsapp" {
		return invalid("The parameter messaging_product is required and must be whatsapp.")
	}
	if !digits.MatchString(strings.TrimPrefix(m.To, "+")) {
		return &apiError{status: 400, code: 131009, message: "(#131009) Parameter value is not valid", title: "Parameter value is not valid", userMsg: "to is not a phone number"}
	}
	if m.Type == "" {
		m.Type = "text"
	}
	s.mu.Lock()
	blocked, closed := s.blocked[m.To], s.closed[m.To]
	s.mu.Unlock()
	if blocked {
		return &apiError{status: 400, code: 131026, message: "Message Undeliverable.", title: "Message Undeliverable.",
			userMsg: "Unable to deliver message. Reasons can include: the recipient phone number is not a WhatsApp phone number; the recipient has not accepted our new Terms of Service and Privacy Policy."}
	}
	if closed && m.Type != "template" {
		return &apiError{status: 400, code: 131047, message: "Re-engagement message", title: "Re-engagement message",
			userMsg: "Message failed to send because more than 24 hours have passed since the customer last replied to this number."}
	}
	var bad *apiError
	switch m.Type {
	case "text":
		switch {
		case m.Text == nil || m.Text.Body == "":
			bad = invalid("The parameter text['body'] is required.")
		case utf8.RuneCountInString(m.Text.Body) > 4096:
			bad = invalid("Param text['body'] must be at most 4096 characters long.")
		}
	case "image", "video", "audio", "document":
		md := map[string]*mediaPart{"image": m.Image, "video": m.Video, "audio": m.Audio, "document": m.Document}[m.Type]
		switch {
		case md == nil || (md.Link == "" && md.ID == ""):
			bad = invalid("The parameter %s['link'] or %s['id'] is required.", m.Type, m.Type)
		case md.Link != "" && !strings.HasPrefix(md.Link, "http://") && !strings.HasPrefix(md.Link, "https://"):
			bad = invalid("Param %s['link'] must be a valid URL", m.Type)
		case m.Type == "audio" && md.Caption != "":
			bad = invalid("Param audio['caption'] is not a valid parameter")
		case utf8.RuneCountInString(md.Caption) > 1024:
			bad = invalid("Param %s['caption'] must be at most 1024 characters long.", m.Type)
		}
	case "interactive":
		bad = checkInteractive(m.Interactive)
	case "template":
		bad = s.checkTemplateMessage(p.waba, m.Template)
	default:
		bad = &apiError{status: 400, code: 131051, message: "(#131051) Unsupported message type", title: "Unsupported message type",
			userMsg: "Message type " + m.Type + " is not currently supported."}
	}
	if bad != nil {
		return bad
	}
	id := "wamid.HBgL" + fakehttp.RandomString(40)
	s.messages.Add(Message{ID: id, PhoneNumberID: phoneID, To: m.To, Type: m.Type, Body: raw})
	msg := map[string]any{"id": id}
	if m.Type == "template" {
		msg["message_status"] = "accepted"
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"messaging_product": "whatsapp",
		"contacts": []any{map[string]any{"input": m.To, "wa_id": strings.TrimPrefix(m.To, "+")}}, "messages": []any{msg}})
	return nil
}

func checkInteractive(in *interactive) *apiError {
	switch {
	case in == nil || in.Action == nil:
		return invalid("The parameter interactive['action'] is required.")
	case in.Body == nil || in.Body.Text == "":
		return invalid("The parameter interactive['body']['text'] is required.")
	case utf8.RuneCountInString(in.Body.Text) > 1024:
		return invalid("Param interactive['body']['text'] must be at most 1024 characters long.")
	}
	a := in.Action
	switch in.Type {
	case "button":
		if len(a.Buttons) < 1 || len(a.Buttons) > 3 {
			return invalid("Param interactive['action']['buttons'] must contain 1 to 3 buttons.")
		}
		seen := map[string]bool{}
		for _, b := range a.Buttons {
			if b.Type != "reply" || b.Reply.ID == "" || len(b.Reply.ID) > 256 || seen[b.Reply.ID] {
				return invalid("Each button needs type reply and a unique reply id of at most 256 characters.")
			}
			seen[b.Reply.ID] = true
			if n := utf8.RuneCountInString(b.Reply.Title); n < 1 || n > 20 {
				return invalid("Param interactive['action']['buttons'][]['reply']['title'] must be 1 to 20 characters long.")
			}
		}
	case "list":
		if a.Button == "" || utf8.RuneCountInString(a.Button) > 20 {
			return invalid("Param interactive['action']['button'] is required, at most 20 characters.")
		}
		rows := 0
		for _, sec := range a.Sections {
			for _, row := range sec.Rows {
				rows++
				if row.ID == "" || len(row.ID) > 200 || utf8.RuneCountInString(row.Title) > 24 || row.Title == "" {
					return invalid("List rows need an id (at most 200 characters) and a title of 1 to 24 characters.")
				}
			}
		}
		if len(a.Sections) == 0 || rows < 1 || rows > 10 {
			return invalid("A list has 1 to 10 rows in total.")
		}
	case "cta_url":
		if a.Name != "cta_url" || a.Parameters == nil || a.Parameters.URL == "" || a.Parameters.DisplayText == "" ||
			utf8.RuneCountInString(a.Parameters.DisplayText) > 20 {
			return invalid("A cta_url needs action name cta_url, a display_text of at most 20 characters and a url.")
		}
	default:
		return &apiError{status: 400, code: 131051, message: "(#131051) Unsupported message type", title: "Unsupported interactive type"}
	}
	return nil
}

func (s *Server) checkTemplateMessage(waba string, t *templateRef) *apiError {
	if t == nil || t.Name == "" || t.Language.Code == "" {
		return invalid("The parameters template['name'] and template['language']['code'] are required.")
	}
	s.mu.Lock()
	tpl := s.find(waba, t.Name, t.Language.Code)
	var comps json.RawMessage
	status := ""
	if tpl != nil {
		comps, status = tpl.Components, tpl.Status
	}
	s.mu.Unlock()
	if tpl == nil || status != "APPROVED" {
		return &apiError{status: 404, code: 132001, message: "(#132001) Template name does not exist in the translation",
			title: "Template name does not exist in the translation", userMsg: "template name (" + t.Name + ") does not exist in " + t.Language.Code}
	}
	want := 0
	var cs []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	_ = json.Unmarshal(comps, &cs)
	for _, c := range cs {
		if strings.EqualFold(c.Type, "BODY") {
			want = len(varRe.FindAllString(c.Text, -1))
		}
	}
	got := 0
	for _, c := range t.Components {
		if strings.EqualFold(c.Type, "body") {
			got = len(c.Parameters)
			for _, p := range c.Parameters {
				switch {
				case p.Type != "text" || strings.TrimSpace(p.Text) == "":
					return &apiError{status: 400, code: 131008, message: "(#131008) Required parameter is missing",
						title: "Required parameter is missing", userMsg: "a body parameter needs type text and a non-empty text"}
				case strings.ContainsAny(p.Text, "\n\t") || strings.Contains(p.Text, "     "):
					return &apiError{status: 400, code: 132018, message: "(#132018) There was an issue with the parameters in your template.",
						title: "Template Parameter Issue", userMsg: "Param text cannot have new-line/tab characters or more than 4 consecutive spaces"}
				}
			}
		}
	}
	if got != want {
		return &apiError{status: 400, code: 132000, message: "(#132000) Number of parameters does not match the expected number of params",
			title: "Number of parameters does not match the expected number of params", userMsg: fmt.Sprintf("body: number of localizable_params (%d) does not match the expected number of params (%d)", got, want)}
	}
	return nil
}

var (
	varRe       = regexp.MustCompile(`\{\{\s*([0-9]+)\s*\}\}`)
	nameRe      = regexp.MustCompile(`^[a-z0-9_]{1,512}$`)
	languageRe  = regexp.MustCompile(`^[a-z]{2,3}(_[A-Z][A-Za-z]{1,3})?$`)
	uploadTypes = []string{"application/pdf", "image/jpeg", "image/jpg", "image/png", "video/mp4"}
)

// tplComponent is a template component as the fake reads it.
type tplComponent struct {
	Type    string `json:"type"`
	Format  string `json:"format"`
	Text    string `json:"text"`
	Example *struct {
		HeaderText   []string   `json:"header_text"`
		HeaderHandle []string   `json:"header_handle"`
		BodyText     [][]string `json:"body_text"`
	} `json:"example"`
	Buttons []struct {
		Type        string   `json:"type"`
		Text        string   `json:"text"`
		URL         string   `json:"url"`
		PhoneNumber string   `json:"phone_number"`
		Example     []string `json:"example"`
	} `json:"buttons"`
}

// checkComponents applies Meta's intake checks on template content.
func (s *Server) checkComponents(raw json.RawMessage) *apiError {
	var comps []tplComponent
	if err := json.Unmarshal(raw, &comps); err != nil || len(comps) == 0 {
		return invalid("Param components must be a non-empty array of component objects")
	}
	bodies := 0
	for _, c := range comps {
		switch strings.ToUpper(c.Type) {
		case "BODY":
			bodies++
			if c.Text == "" {
				return invalidSub(2388043, "Message template body is missing", "the body text is required")
			}
			if utf8.RuneCountInString(c.Text) > 1024 {
				return invalidSub(2388040, "Character Limit Exceeded", "the body has more than 1024 characters")
			}
			n := len(varRe.FindAllString(c.Text, -1))
			if n > 0 && (c.Example == nil || len(c.Example.BodyText) != 1 || len(c.Example.BodyText[0]) != n) {
				return invalidSub(2388043, "Message template variables are missing sample values", "give a sample for each of the %d body variables", n)
			}
		case "HEADER":
			switch c.Format {
			case "TEXT":
				if c.Text == "" || utf8.RuneCountInString(c.Text) > 60 {
					return invalidSub(2388040, "Character Limit Exceeded", "a text header has 1 to 60 characters")
				}
			case "IMAGE", "VIDEO", "DOCUMENT":
				if c.Example == nil || len(c.Example.HeaderHandle) != 1 {
					return invalidSub(2388043, "Message template header is missing a sample", "a %s header needs a header_handle sample", c.Format)
				}
				s.mu.Lock()
				up, ok := s.handles[c.Example.HeaderHandle[0]]
				s.mu.Unlock()
				want := map[string][]string{"IMAGE": {"image/jpeg", "image/jpg", "image/png"}, "VIDEO": {"video/mp4"}, "DOCUMENT": {"application/pdf"}}[c.Format]
				if !ok {
					return invalidSub(2388047, "Message template header format is incorrect", "the header_handle was not issued by an upload")
				}
				if !slices.Contains(want, up.FileType) {
					return invalidSub(2388047, "Message template header format is incorrect", "a %s header cannot show a %s file", c.Format, up.FileType)
				}
			case "LOCATION":
			default:
				return invalidSub(2388047, "Message template header format is incorrect", "unknown header format %q", c.Format)
			}
		case "FOOTER":
			if c.Text == "" || utf8.RuneCountInString(c.Text) > 60 {
				return invalidSub(2388040, "Character Limit Exceeded", "a footer has 1 to 60 characters")
			}
		case "BUTTONS":
			if len(c.Buttons) == 0 || len(c.Buttons) > 10 {
				return invalidSub(2388040, "Too many buttons", "a template has 1 to 10 buttons")
			}
			for _, b := range c.Buttons {
				if b.Type != "COPY_CODE" && (b.Text == "" || utf8.RuneCountInString(b.Text) > 25) {
					return invalidSub(2388040, "Character Limit Exceeded", "button text has 1 to 25 characters")
				}
				switch b.Type {
				case "QUICK_REPLY", "PHONE_NUMBER", "COPY_CODE":
				case "URL":
					if !strings.HasPrefix(b.URL, "https://") && !strings.HasPrefix(b.URL, "http://") {
						return invalid("Param components[buttons][url] must be a valid URL")
					}
				default:
					return invalid("Param components[buttons][type] %q is not valid", b.Type)
				}
			}
		default:
			return invalid("Param components[type] %q is not valid", c.Type)
		}
	}
	if bodies != 1 {
		return invalidSub(2388043, "Message template body is missing", "a template has exactly one BODY")
	}
	return nil
}

func (s *Server) listTemplates(w http.ResponseWriter, r *http.Request, token, waba string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wabas[waba] || !s.mayUse(token, waba) {
		return noObject(waba, "get")
	}
	s.templateHit++
	q := r.URL.Query()
	limit := 25
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return invalid("Param limit must be a positive integer")
		}
		limit = n
	}
	limit = min(limit, s.pageSize)
	var mine []*Template
	for _, t := range s.templates {
		if t.BusinessAccountID == waba && (q.Get("name") == "" || t.Name == q.Get("name")) && (q.Get("status") == "" || t.Status == q.Get("status")) {
			mine = append(mine, t)
		}
	}
	start := 0
	if after := q.Get("after"); after != "" {
		b, err := base64.StdEncoding.DecodeString(after)
		n, err2 := strconv.Atoi(strings.TrimPrefix(string(b), "pos:"))
		if err != nil || err2 != nil || n < 0 || n > len(mine) {
			return invalid("Param after is not a valid cursor")
		}
		start = n
	}
	end := min(start+limit, len(mine))
	var fields []string
	if f := q.Get("fields"); f != "" {
		fields = strings.Split(f, ",")
	}
	data := []any{}
	for _, t := range mine[start:end] {
		all := map[string]any{"id": t.ID, "name": t.Name, "language": t.Language, "status": t.Status, "category": t.Category,
			"components": t.Components, "rejected_reason": t.RejectedReason}
		if fields != nil {
			for k := range all {
				if k != "id" && !slices.Contains(fields, k) {
					delete(all, k)
				}
			}
		}
		data = append(data, all)
	}
	cursor := func(n int) string { return base64.StdEncoding.EncodeToString([]byte("pos:" + strconv.Itoa(n))) }
	pg := map[string]any{"cursors": map[string]any{"before": cursor(start), "after": cursor(end)}}
	if end < len(mine) {
		next := *r.URL
		nq := next.Query()
		nq.Set("after", cursor(end))
		next.RawQuery = nq.Encode()
		pg["next"] = s.srv.URL + next.RequestURI()
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"data": data, "paging": pg})
	return nil
}

func (s *Server) createTemplate(w http.ResponseWriter, r *http.Request, token, waba string) *apiError {
	s.mu.Lock()
	ok := s.wabas[waba] && s.mayUse(token, waba)
	s.mu.Unlock()
	if !ok {
		return noObject(waba, "post")
	}
	var req struct {
		Name       string          `json:"name"`
		Language   string          `json:"language"`
		Category   string          `json:"category"`
		Components json.RawMessage `json:"components"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	switch {
	case !nameRe.MatchString(req.Name):
		return invalid("Param name must contain only lowercase alphanumeric characters and underscores")
	case !languageRe.MatchString(req.Language):
		return invalid("Param language is not a supported language code")
	case !slices.Contains([]string{"MARKETING", "UTILITY", "AUTHENTICATION"}, req.Category):
		return invalid("Param category must be one of {MARKETING, UTILITY, AUTHENTICATION}")
	}
	if err := s.checkComponents(req.Components); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.find(waba, req.Name, req.Language) != nil {
		return invalidSub(2388024, "Content in this language already exists",
			"Content for %s already exists for this template name, try another language or template name.", req.Language)
	}
	s.nextID++
	t := &Template{ID: strconv.FormatInt(s.nextID, 10), BusinessAccountID: waba, Name: req.Name, Language: req.Language,
		Category: req.Category, Status: "PENDING", RejectedReason: "NONE", Components: req.Components}
	s.templates = append(s.templates, t)
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"id": t.ID, "status": t.Status, "category": t.Category})
	return nil
}

func (s *Server) editTemplate(w http.ResponseWriter, r *http.Request, token, id string) *apiError {
	s.mu.Lock()
	var t *Template
	for _, x := range s.templates {
		if x.ID == id && s.mayUse(token, x.BusinessAccountID) {
			t = x
		}
	}
	s.mu.Unlock()
	if t == nil {
		return noObject(id, "post")
	}
	var req struct {
		Category   string          `json:"category"`
		Components json.RawMessage `json:"components"`
	}
	if err := readJSON(r, &req); err != nil {
		return err
	}
	if req.Category == "" && len(req.Components) == 0 {
		return invalid("Give category or components to edit")
	}
	if len(req.Components) > 0 {
		if err := s.checkComponents(req.Components); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains([]string{"APPROVED", "REJECTED", "PAUSED"}, t.Status) {
		return invalidSub(2388051, "Message template can't be edited", "Only approved, rejected or paused templates can be edited; this one is %s.", t.Status)
	}
	if req.Category != "" && req.Category != t.Category && t.Status == "APPROVED" {
		return invalidSub(2388051, "Message template can't be edited", "The category of an approved template cannot be changed.")
	}
	if req.Category != "" {
		t.Category = req.Category
	}
	if len(req.Components) > 0 {
		t.Components = req.Components
	}
	t.Status, t.RejectedReason = "PENDING", "NONE"
	t.Edits++
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) deleteTemplate(w http.ResponseWriter, r *http.Request, token, waba string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wabas[waba] || !s.mayUse(token, waba) {
		return noObject(waba, "delete")
	}
	q := r.URL.Query()
	name, hsm := q.Get("name"), q.Get("hsm_id")
	if name == "" {
		return invalid("The parameter name is required.")
	}
	n := len(s.templates)
	s.templates = slices.DeleteFunc(s.templates, func(t *Template) bool {
		return t.BusinessAccountID == waba && t.Name == name && (hsm == "" || t.ID == hsm)
	})
	if len(s.templates) == n {
		return invalidSub(2593002, "Message template not found", "Message template %q could not be found.", name)
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"success": true})
	return nil
}

func (s *Server) startUpload(w http.ResponseWriter, r *http.Request, token, app string) *apiError {
	if app != AppID {
		return noObject(app, "post")
	}
	q := r.URL.Query()
	length, err := strconv.ParseInt(q.Get("file_length"), 10, 64)
	if err != nil || length <= 0 || length > maxUploadBytes {
		return invalid("Param file_length must be a positive integer of at most %d", maxUploadBytes)
	}
	ft := q.Get("file_type")
	if !slices.Contains(uploadTypes, ft) {
		return invalid("Param file_type must be one of {%s}", strings.Join(uploadTypes, ", "))
	}
	id := "upload:" + base64.StdEncoding.EncodeToString([]byte("attachment:"+fakehttp.RandomString(16)+"?file_length="+strconv.FormatInt(length, 10)))
	sess := &session{id: id, token: token, fileType: ft, fileName: q.Get("file_name"), length: length, sig: fakehttp.RandomString(20)}
	s.mu.Lock()
	s.sessions[id] = sess
	s.mu.Unlock()
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"id": id + "?sig=" + sess.sig})
	return nil
}

// magic reports whether the file's first bytes fit its declared type.
func magic(fileType string, head []byte) bool {
	switch fileType {
	case "image/jpeg", "image/jpg":
		return bytes.HasPrefix(head, []byte{0xFF, 0xD8, 0xFF})
	case "image/png":
		return bytes.HasPrefix(head, []byte("\x89PNG\r\n\x1a\n"))
	case "video/mp4":
		return len(head) >= 8 && string(head[4:8]) == "ftyp"
	case "application/pdf":
		return bytes.HasPrefix(head, []byte("%PDF-"))
	}
	return false
}

func (s *Server) upload(w http.ResponseWriter, r *http.Request, token, id string) *apiError {
	s.mu.Lock()
	sess, ok := s.sessions[id]
	s.mu.Unlock()
	if !ok || r.URL.Query().Get("sig") != sess.sig || sess.token != token {
		return noObject(id, r.Method)
	}
	if r.Method == http.MethodGet {
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "file_offset": sess.offset})
		return nil
	}
	if r.Method != http.MethodPost {
		return noObject(id, r.Method)
	}
	off, err := strconv.ParseInt(r.Header.Get("file_offset"), 10, 64)
	if err != nil || off != sess.offset {
		return invalid("Header file_offset must be the session's current offset %d", sess.offset)
	}
	want := sess.length - off
	h := sha256.New()
	head := make([]byte, 0, 16)
	n, err := io.Copy(io.MultiWriter(h, headWriter{&head}), io.LimitReader(r.Body, want+1))
	if err != nil {
		return &apiError{status: 500, code: 2, message: "The upload was interrupted."}
	}
	if n != want {
		return invalid("The body has %d bytes; the session expects %d from offset %d (file_length %d)", n, want, off, sess.length)
	}
	if off == 0 && !magic(sess.fileType, head) {
		return invalid("The uploaded file is not of type %s", sess.fileType)
	}
	up := Upload{FileName: sess.fileName, FileType: sess.fileType, Length: sess.length,
		Handle: "4::" + base64.StdEncoding.EncodeToString([]byte(sess.fileType)) + ":ARa" + fakehttp.RandomString(30), SHA256: hex.EncodeToString(h.Sum(nil))}
	s.mu.Lock()
	sess.offset = sess.length
	s.handles[up.Handle] = up
	s.uploads.Add(up)
	s.mu.Unlock()
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"h": up.Handle})
	return nil
}

// headWriter keeps the first 16 bytes written.
type headWriter struct{ b *[]byte }

func (h headWriter) Write(p []byte) (int, error) {
	if room := 16 - len(*h.b); room > 0 {
		*h.b = append(*h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}
