// Package telegram is a fake Telegram Bot API server on 127.0.0.1 for tests. It speaks the
// real wire format ({base}/bot<token>/<method>; parameters as JSON, form or query; answers
// {"ok":true,"result":...} or {"ok":false,"error_code":...,"description":...,"parameters":...})
// and checks what the real server checks before it answers: the token (a malformed one is
// 404, an unknown or revoked one 401), the required parameters, the text, caption and
// callback data limits, the inline and reply keyboards' shapes, and the webhook's URL and
// secret token.
// It records what it accepted (per chat), builds updates the way Telegram does, delivers
// them to the registered webhook with the secret header, and can be told to misbehave: rate
// limit, fail with 5xx, answer that a user blocked the bot or is deactivated, revoke a token,
// answer slowly; or to enforce a provider's rate (Limit).
//
// It behaves like a self-hosted Bot API server in --local mode, which accepts plain http
// webhooks on any port; RequireHTTPS(true) makes it as strict as api.telegram.org.
// It does not download media URLs and does not model "bot can't initiate conversation":
// any positive chat id is a private chat that started the bot.
package telegram

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
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
	"unicode/utf16"
	"unicode/utf8"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// Limits the fake enforces, as the Bot API does (lengths in UTF-16 code units).
const (
	MaxTextLength     = 4096
	MaxCaptionLength  = 1024
	MaxCallbackData   = 64
	MaxButtonsPerRow  = 8
	MaxButtons        = 100
	MaxCallbackAnswer = 200
	MaxPlaceholder    = 64
)

// Bot is a bot the fake knows.
type Bot struct {
	ID        int64
	Username  string
	FirstName string
	Token     string
}

// User is a Telegram user who writes to a bot.
type User struct {
	ID           int64
	FirstName    string
	LastName     string
	Username     string
	LanguageCode string
}

// Webhook is what setWebhook registered for a bot.
type Webhook struct {
	URL                string
	SecretToken        string
	AllowedUpdates     []string
	DropPendingUpdates bool
	MaxConnections     int
}

// Button is one inline keyboard button as received.
type Button struct {
	Text         string `json:"text"`
	CallbackData string `json:"callback_data,omitempty"`
	URL          string `json:"url,omitempty"`
}

// ReplyKeyboard is a reply keyboard (ReplyKeyboardMarkup) as received: buttons that replace
// the user's keyboard and send their text as a message when tapped.
type ReplyKeyboard struct {
	// Buttons are the buttons' texts, row by row.
	Buttons         [][]string
	OneTimeKeyboard bool
	ResizeKeyboard  bool
	IsPersistent    bool
}

// Message is one message the fake accepted from a bot.
type Message struct {
	BotID     int64
	Method    string // sendMessage, sendPhoto, ...
	ChatID    int64
	MessageID int64
	Text      string
	ParseMode string
	// MediaType is photo, video, audio or document; MediaURL the URL sent.
	MediaType string
	MediaURL  string
	Caption   string
	// Buttons is the inline keyboard, row by row.
	Buttons [][]Button
	// Keyboard is the reply keyboard, when the message had one instead.
	Keyboard *ReplyKeyboard
	// Params are every parameter as received, for assertions on what was not sent.
	Params map[string]any
	// At is when the fake accepted the message (its clock), for rates measured at the
	// provider's side (tests/bench -broadcast).
	At time.Time
}

// Call is one request that reached the fake.
type Call struct {
	BotID  int64 // 0 when the token was not a known bot's
	Method string
	Status int
}

// Answer is one answerCallbackQuery call the fake accepted.
type Answer struct {
	BotID           int64
	CallbackQueryID string
	Text            string
}

// Server is the fake Bot API.
type Server struct {
	// URL is the base URL to give the adapter (its BaseURL or a channel's api_base_url).
	URL string

	// What the fake received and accepted, for tests to read back (each log locks itself).
	calls   fakehttp.Log[Call]
	sent    fakehttp.Log[Message]
	answers fakehttp.Log[Answer]

	mu           sync.Mutex
	bots         map[string]*Bot // by token
	revoked      map[string]bool
	webhooks     map[int64]Webhook
	nextBot      int64
	nextUpdate   int64
	nextMessage  map[int64]int64 // per chat
	callbacks    map[string]int64
	answered     map[string]bool
	blocked      map[int64]string
	rateLimit    int
	perSecond    int         // Limit's sends a sliding second (0: no limit)
	recent       []time.Time // the times of the sends accepted in the last second, with Limit
	failStatus   int
	delay        time.Duration
	requireHTTPS bool
	now          func() time.Time
}

// New starts a fake Bot API on 127.0.0.1, closed when the test ends. It knows no bot yet:
// AddBot registers one.
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
		bots:        map[string]*Bot{},
		revoked:     map[string]bool{},
		webhooks:    map[int64]Webhook{},
		nextBot:     7000000000,
		nextUpdate:  100000000,
		nextMessage: map[int64]int64{},
		callbacks:   map[string]int64{},
		answered:    map[string]bool{},
		blocked:     map[int64]string{},
		now:         time.Now,
	}
	return s
}

// AddBot registers a bot with a fresh token, as @BotFather would.
func (s *Server) AddBot(username string) Bot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextBot++
	b := &Bot{ID: s.nextBot, Username: username, FirstName: username, Token: strconv.FormatInt(s.nextBot, 10) + ":AA" + fakehttp.RandomString(33)}
	s.bots[b.Token] = b
	return *b
}

// Misbehaviour switches.

// RevokeToken makes the bot's token unknown: every later call with it is 401 Unauthorized.
func (s *Server) RevokeToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revoked[token] = true
}

// RateLimit makes every send and answerCallbackQuery answer 429 with retry_after seconds,
// until RateLimit(0).
func (s *Server) RateLimit(retryAfter int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rateLimit = retryAfter
}

// Limit makes the fake enforce a provider's rate: a send that would be the (perSecond+1)-th
// accepted within the last second (a sliding window, on the fake's clock) answers 429 with
// retry_after 1, and is not recorded. Limit(0) lifts it. RateLimit, when set, wins.
func (s *Server) Limit(perSecond int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perSecond = max(0, perSecond)
	s.recent = nil
}

// Fail makes every call answer status (500: a Bot API error; 502, 503, 504: the HTML page
// of the proxy in front of it), until Fail(0).
func (s *Server) Fail(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failStatus = status
}

// Delay makes every answer wait d (or until the client gives up).
func (s *Server) Delay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// Block makes sends to the chat answer 403 "bot was blocked by the user".
func (s *Server) Block(chatID int64) { s.setBlocked(chatID, "Forbidden: bot was blocked by the user") }

// Deactivate makes sends to the chat answer 403 "user is deactivated".
func (s *Server) Deactivate(chatID int64) { s.setBlocked(chatID, "Forbidden: user is deactivated") }

// Unblock undoes Block and Deactivate.
func (s *Server) Unblock(chatID int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blocked, chatID)
}

func (s *Server) setBlocked(chatID int64, desc string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blocked[chatID] = desc
}

// RequireHTTPS makes setWebhook as strict as api.telegram.org: an https URL on port 443,
// 80, 88 or 8443.
func (s *Server) RequireHTTPS(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requireHTTPS = on
}

// Records.

// Calls returns every request so far, in order.
func (s *Server) Calls() []Call { return s.calls.All() }

// Sent returns the messages accepted for the chat, in order.
func (s *Server) Sent(chatID int64) []Message {
	var out []Message
	for _, m := range s.sent.All() {
		if m.ChatID == chatID {
			out = append(out, m)
		}
	}
	return out
}

// AllSent returns every message accepted, in order.
func (s *Server) AllSent() []Message { return s.sent.All() }

// Answers returns the accepted answerCallbackQuery calls, in order.
func (s *Server) Answers() []Answer { return s.answers.All() }

// Webhook returns the bot's registered webhook.
func (s *Server) Webhook(b Bot) (Webhook, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.webhooks[b.ID]
	return w, ok
}

// Updates, built as Telegram builds them.

func (s *Server) updateID() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextUpdate++
	return s.nextUpdate
}

func userJSON(u User) map[string]any {
	m := map[string]any{"id": u.ID, "is_bot": false, "first_name": u.FirstName}
	if u.LastName != "" {
		m["last_name"] = u.LastName
	}
	if u.Username != "" {
		m["username"] = u.Username
	}
	if u.LanguageCode != "" {
		m["language_code"] = u.LanguageCode
	}
	return m
}

func privateChat(u User) map[string]any {
	m := map[string]any{"id": u.ID, "type": "private", "first_name": u.FirstName}
	if u.LastName != "" {
		m["last_name"] = u.LastName
	}
	if u.Username != "" {
		m["username"] = u.Username
	}
	return m
}

func (s *Server) messageJSON(from User, text string) map[string]any {
	s.mu.Lock()
	s.nextMessage[from.ID]++
	id := s.nextMessage[from.ID]
	s.mu.Unlock()
	m := map[string]any{"message_id": id, "from": userJSON(from), "chat": privateChat(from),
		"date": s.now().Unix(), "text": text}
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(text, " ")
		m["entities"] = []any{map[string]any{"offset": 0, "length": utf16Len(cmd), "type": "bot_command"}}
	}
	return m
}

// TextUpdate is the Update of a private text message from the user (commands included).
func (s *Server) TextUpdate(from User, text string) []byte {
	return fakehttp.MustJSON(map[string]any{"update_id": s.updateID(), "message": s.messageJSON(from, text)})
}

// EditedUpdate is the Update of a private message the user edited.
func (s *Server) EditedUpdate(from User, text string) []byte {
	m := s.messageJSON(from, text)
	m["edit_date"] = s.now().Unix()
	return fakehttp.MustJSON(map[string]any{"update_id": s.updateID(), "edited_message": m})
}

// CallbackUpdate is the Update of the user pressing an inline button with callback data on
// a message of bot b; it returns the callback query id, which answerCallbackQuery accepts once.
func (s *Server) CallbackUpdate(b Bot, from User, data string) ([]byte, string) {
	var n [8]byte
	_, _ = rand.Read(n[:])
	id := strconv.FormatUint(binary.BigEndian.Uint64(n[:])>>1, 10)
	s.mu.Lock()
	s.callbacks[id] = b.ID
	s.mu.Unlock()
	msg := map[string]any{"message_id": 1, "date": s.now().Unix(), "text": "menu", "chat": privateChat(from),
		"from": map[string]any{"id": b.ID, "is_bot": true, "first_name": b.FirstName, "username": b.Username}}
	q := map[string]any{"id": id, "from": userJSON(from), "message": msg, "chat_instance": "-" + strconv.FormatInt(from.ID, 10), "data": data}
	return fakehttp.MustJSON(map[string]any{"update_id": s.updateID(), "callback_query": q}), id
}

// RawUpdate is an Update with the given members and a fresh update_id (other update kinds:
// "channel_post", "my_chat_member", ...).
func (s *Server) RawUpdate(members map[string]any) []byte {
	m := map[string]any{"update_id": s.updateID()}
	for k, v := range members {
		m[k] = v
	}
	return fakehttp.MustJSON(m)
}

// Deliver POSTs the update to the bot's registered webhook as Telegram does, with the
// secret token header when one was set, and returns the response status.
func (s *Server) Deliver(b Bot, update []byte) (int, error) {
	w, ok := s.Webhook(b)
	if !ok {
		return 0, fmt.Errorf("telegram fake: bot %d has no webhook", b.ID)
	}
	return s.Post(w.URL, w.SecretToken, update)
}

// Post POSTs the update to url with secret in X-Telegram-Bot-Api-Secret-Token ("" sends
// no header) and returns the response status.
func (s *Server) Post(url, secret string, update []byte) (int, error) {
	h := http.Header{}
	if secret != "" {
		h.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	status, _, err := fakehttp.Post(url, update, h)
	return status, err
}

// The server.

var tokenShape = regexp.MustCompile(`^[0-9]{1,20}:[A-Za-z0-9_-]{35}$`)

// apiError is a Bot API error answer.
type apiError struct {
	status     int
	desc       string
	retryAfter int
}

func badRequest(format string, args ...any) *apiError {
	return &apiError{status: 400, desc: "Bad Request: " + fmt.Sprintf(format, args...)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	delay, fail := s.delay, s.failStatus
	s.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/bot")
	token, method, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 || !tokenShape.MatchString(token) || strings.Contains(method, "/") {
		s.calls.Add(Call{Method: method, Status: 404})
		writeError(w, &apiError{status: 404, desc: "Not Found"})
		return
	}
	s.mu.Lock()
	b, known := s.bots[token]
	revoked := s.revoked[token]
	s.mu.Unlock()
	if !known || revoked {
		s.calls.Add(Call{Method: method, Status: 401})
		writeError(w, &apiError{status: 401, desc: "Unauthorized"})
		return
	}
	if fail != 0 {
		s.calls.Add(Call{BotID: b.ID, Method: method, Status: fail})
		if fail >= 502 && fail <= 504 {
			fakehttp.ProxyError(w, fail)
			return
		}
		writeError(w, &apiError{status: fail, desc: http.StatusText(fail)})
		return
	}
	p, perr := readParams(r)
	var result any
	var err *apiError
	if perr != nil {
		err = perr
	} else {
		result, err = s.dispatch(b, strings.ToLower(method), p)
	}
	if err != nil {
		s.calls.Add(Call{BotID: b.ID, Method: method, Status: err.status})
		writeError(w, err)
		return
	}
	s.calls.Add(Call{BotID: b.ID, Method: method, Status: 200})
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"ok": true, "result": result})
}

func writeError(w http.ResponseWriter, e *apiError) {
	body := map[string]any{"ok": false, "error_code": e.status, "description": e.desc}
	if e.retryAfter > 0 {
		body["parameters"] = map[string]any{"retry_after": e.retryAfter}
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	fakehttp.WriteJSON(w, e.status, body)
}

// params are a request's parameters: JSON values from a JSON body, strings from the query
// string or a form (where objects travel JSON-serialized).
type params map[string]any

func readParams(r *http.Request) (params, *apiError) {
	p := params{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	if r.Body == nil {
		return p, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		return nil, badRequest("can't read the request")
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return p, nil
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			return nil, badRequest("can't parse JSON request body")
		}
		for k, v := range m {
			p[k] = v
		}
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, badRequest("can't parse form")
		}
		for k, v := range form {
			p[k] = v[0]
		}
	default:
		return nil, badRequest("unsupported Content-Type %q", mt)
	}
	return p, nil
}

func (p params) str(name string) (string, bool) {
	switch v := p[name].(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

func (p params) integer(name string) (int64, bool, *apiError) {
	s, ok := p.str(name)
	if !ok || s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, true, badRequest("invalid %s specified", name)
	}
	return n, true, nil
}

func (p params) boolean(name string) bool {
	s, _ := p.str(name)
	return s == "true" || s == "True" || s == "1"
}

// object decodes a parameter that is a JSON object or array, also when it travels as a
// JSON-serialized string.
func (p params) object(name string, v any) (bool, error) {
	raw, ok := p[name]
	if !ok || raw == nil {
		return false, nil
	}
	var b []byte
	if s, isStr := raw.(string); isStr {
		b = []byte(s)
	} else {
		b = fakehttp.MustJSON(raw)
	}
	return true, json.Unmarshal(b, v)
}

func (s *Server) dispatch(b *Bot, method string, p params) (any, *apiError) {
	switch method {
	case "getme":
		return map[string]any{"id": b.ID, "is_bot": true, "first_name": b.FirstName, "username": b.Username,
			"can_join_groups": true, "can_read_all_group_messages": false, "supports_inline_queries": false}, nil
	case "setwebhook":
		return s.setWebhook(b, p)
	case "deletewebhook":
		s.mu.Lock()
		delete(s.webhooks, b.ID)
		s.mu.Unlock()
		return true, nil
	case "getwebhookinfo":
		w, _ := s.Webhook(*b)
		info := map[string]any{"url": w.URL, "has_custom_certificate": false, "pending_update_count": 0}
		if w.AllowedUpdates != nil {
			info["allowed_updates"] = w.AllowedUpdates
		}
		return info, nil
	case "sendmessage":
		return s.send(b, "sendMessage", "", p)
	case "sendphoto":
		return s.send(b, "sendPhoto", "photo", p)
	case "sendvideo":
		return s.send(b, "sendVideo", "video", p)
	case "sendaudio":
		return s.send(b, "sendAudio", "audio", p)
	case "senddocument":
		return s.send(b, "sendDocument", "document", p)
	case "answercallbackquery":
		return s.answerCallback(b, p)
	}
	return nil, &apiError{status: 404, desc: "Not Found: method not found"}
}

var secretShape = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

var updateKinds = []string{"message", "edited_message", "channel_post", "edited_channel_post", "business_connection",
	"business_message", "edited_business_message", "deleted_business_messages", "message_reaction",
	"message_reaction_count", "inline_query", "chosen_inline_result", "callback_query", "shipping_query",
	"pre_checkout_query", "purchased_paid_media", "poll", "poll_answer", "my_chat_member", "chat_member",
	"chat_join_request", "chat_boost", "removed_chat_boost"}

func (s *Server) setWebhook(b *Bot, p params) (any, *apiError) {
	raw, _ := p.str("url")
	if raw == "" {
		s.mu.Lock()
		delete(s.webhooks, b.ID)
		s.mu.Unlock()
		return true, nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, badRequest("bad webhook: invalid webhook URL specified")
	}
	s.mu.Lock()
	strict := s.requireHTTPS
	s.mu.Unlock()
	if strict {
		if u.Scheme != "https" {
			return nil, badRequest("bad webhook: An HTTPS URL must be provided for webhook")
		}
		if port := u.Port(); port != "" && !slices.Contains([]string{"443", "80", "88", "8443"}, port) {
			return nil, badRequest("bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443")
		}
	}
	w := Webhook{URL: raw, MaxConnections: 40}
	if secret, _ := p.str("secret_token"); secret != "" {
		if !secretShape.MatchString(secret) {
			return nil, badRequest("secret token contains unallowed characters")
		}
		w.SecretToken = secret
	}
	if ok, err := p.object("allowed_updates", &w.AllowedUpdates); ok && err != nil {
		return nil, badRequest("can't parse allowed updates JSON object")
	}
	for _, k := range w.AllowedUpdates {
		if !slices.Contains(updateKinds, k) {
			return nil, badRequest("can't parse allowed updates JSON object: unknown update type %q", k)
		}
	}
	if n, ok, e := p.integer("max_connections"); e != nil {
		return nil, e
	} else if ok {
		if n < 1 || n > 100 {
			return nil, badRequest("bad webhook: max_connections must be between 1 and 100")
		}
		w.MaxConnections = int(n)
	}
	w.DropPendingUpdates = p.boolean("drop_pending_updates")
	s.mu.Lock()
	s.webhooks[b.ID] = w
	s.mu.Unlock()
	return true, nil
}

func (s *Server) chatID(p params) (int64, *apiError) {
	raw, ok := p.str("chat_id")
	if !ok || raw == "" {
		return 0, badRequest("chat_id is empty")
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		// Usernames (@channel) and group chats are not modelled: no such chat.
		return 0, badRequest("chat not found")
	}
	return id, nil
}

func (s *Server) send(b *Bot, method, media string, p params) (any, *apiError) {
	chatID, e := s.chatID(p)
	if e != nil {
		return nil, e
	}
	m := Message{BotID: b.ID, Method: method, ChatID: chatID, Params: p}
	m.ParseMode, _ = p.str("parse_mode")
	if !slices.Contains([]string{"", "HTML", "Markdown", "MarkdownV2"}, m.ParseMode) {
		return nil, badRequest("unsupported parse_mode")
	}
	if media == "" {
		m.Text, _ = p.str("text")
		if e := checkLength(m.Text, MaxTextLength, "text must be encoded in UTF-8", "message is too long"); e != nil {
			return nil, e
		}
		if strings.TrimSpace(m.Text) == "" {
			return nil, badRequest("message text is empty")
		}
	} else {
		m.MediaType = media
		m.MediaURL, _ = p.str(media)
		if m.MediaURL == "" {
			return nil, badRequest("there is no %s in the request", media)
		}
		if u, err := url.Parse(m.MediaURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, badRequest("wrong remote file identifier specified: Wrong string length")
		}
		m.Caption, _ = p.str("caption")
		if e := checkLength(m.Caption, MaxCaptionLength, "caption must be encoded in UTF-8", "message caption is too long"); e != nil {
			return nil, e
		}
	}
	var markup struct {
		InlineKeyboard        [][]Button           `json:"inline_keyboard"`
		Keyboard              *[][]json.RawMessage `json:"keyboard"`
		OneTimeKeyboard       bool                 `json:"one_time_keyboard"`
		ResizeKeyboard        bool                 `json:"resize_keyboard"`
		IsPersistent          bool                 `json:"is_persistent"`
		InputFieldPlaceholder string               `json:"input_field_placeholder"`
	}
	if ok, err := p.object("reply_markup", &markup); ok {
		if err != nil {
			return nil, badRequest("can't parse reply keyboard markup JSON object")
		}
		// As the Bot API does, a keyboard (ReplyKeyboardMarkup) wins over an inline keyboard
		// given with it.
		if markup.Keyboard != nil {
			kb, e := checkReplyKeyboard(*markup.Keyboard)
			if e != nil {
				return nil, e
			}
			if utf16Len(markup.InputFieldPlaceholder) > MaxPlaceholder {
				return nil, badRequest("input field placeholder is too long")
			}
			m.Keyboard = &ReplyKeyboard{Buttons: kb, OneTimeKeyboard: markup.OneTimeKeyboard,
				ResizeKeyboard: markup.ResizeKeyboard, IsPersistent: markup.IsPersistent}
		} else {
			if e := checkKeyboard(markup.InlineKeyboard); e != nil {
				return nil, e
			}
			m.Buttons = markup.InlineKeyboard
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if desc, ok := s.blocked[chatID]; ok {
		return nil, &apiError{status: 403, desc: desc}
	}
	if s.rateLimit > 0 {
		return nil, &apiError{status: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", s.rateLimit), retryAfter: s.rateLimit}
	}
	m.At = s.now()
	if s.perSecond > 0 {
		// Forget the sends older than a second; what is left counts against the limit.
		i := 0
		for i < len(s.recent) && !s.recent[i].After(m.At.Add(-time.Second)) {
			i++
		}
		s.recent = s.recent[i:]
		if len(s.recent) >= s.perSecond {
			return nil, &apiError{status: 429, desc: "Too Many Requests: retry after 1", retryAfter: 1}
		}
		s.recent = append(s.recent, m.At)
	}
	s.nextMessage[chatID]++
	m.MessageID = s.nextMessage[chatID]
	s.sent.Add(m)
	out := map[string]any{
		"message_id": m.MessageID, "date": s.now().Unix(),
		"from": map[string]any{"id": b.ID, "is_bot": true, "first_name": b.FirstName, "username": b.Username},
		"chat": map[string]any{"id": chatID, "type": "private"},
	}
	if media == "" {
		out["text"] = m.Text
	} else {
		out[media] = map[string]any{"file_id": "AgAC" + fakehttp.RandomString(20), "file_unique_id": fakehttp.RandomString(12)}
		if m.Caption != "" {
			out["caption"] = m.Caption
		}
	}
	if m.Buttons != nil {
		out["reply_markup"] = map[string]any{"inline_keyboard": m.Buttons}
	}
	return out, nil
}

func checkLength(s string, max int, invalid, tooLong string) *apiError {
	if !utf8.ValidString(s) {
		return badRequest("%s", invalid)
	}
	if utf16Len(s) > max {
		return badRequest("%s", tooLong)
	}
	return nil
}

func checkKeyboard(rows [][]Button) *apiError {
	total := 0
	for _, row := range rows {
		if len(row) > MaxButtonsPerRow {
			return badRequest("too many buttons in a row")
		}
		for _, b := range row {
			total++
			switch {
			case b.Text == "":
				return badRequest("text of an inline keyboard button must be non-empty")
			case b.CallbackData == "" && b.URL == "":
				return badRequest("text buttons are unallowed in the inline keyboard")
			case b.CallbackData != "" && b.URL != "":
				return badRequest("inline keyboard button must have exactly one optional field")
			case b.CallbackData != "" && len(b.CallbackData) > MaxCallbackData:
				return badRequest("BUTTON_DATA_INVALID")
			case b.URL != "":
				u, err := url.Parse(b.URL)
				if err != nil || !(u.Scheme == "tg" || (u.Scheme == "http" || u.Scheme == "https") && u.Host != "") {
					return badRequest("inline keyboard button URL '%s' is invalid: Wrong HTTP URL", b.URL)
				}
			}
		}
	}
	if total > MaxButtons {
		return badRequest("reply markup is too long")
	}
	return nil
}

// checkReplyKeyboard reads a ReplyKeyboardMarkup's keyboard: rows of KeyboardButton objects
// (or plain strings, which the Bot API takes as text buttons), and returns the texts. The Bot
// API silently ignores members a KeyboardButton does not have, so a callback_data or url there
// would never travel; the fake refuses them, so that a test cannot believe a payload or link
// reached the user. The inline keyboard's limits apply (8 a row, 100 in all).
func checkReplyKeyboard(rows [][]json.RawMessage) ([][]string, *apiError) {
	if len(rows) == 0 {
		return nil, badRequest("field \"keyboard\" of the ReplyKeyboardMarkup should be non-empty")
	}
	out := make([][]string, 0, len(rows))
	total := 0
	for _, row := range rows {
		if len(row) > MaxButtonsPerRow {
			return nil, badRequest("too many buttons in a row")
		}
		texts := make([]string, 0, len(row))
		for _, raw := range row {
			total++
			var text string
			if json.Unmarshal(raw, &text) != nil {
				var b map[string]json.RawMessage
				if err := json.Unmarshal(raw, &b); err != nil {
					return nil, badRequest("can't parse keyboard button: object expected")
				}
				t, ok := b["text"]
				if !ok || json.Unmarshal(t, &text) != nil {
					return nil, badRequest("can't parse keyboard button: field \"text\" must be of type String")
				}
				for k := range b {
					if k == "callback_data" || k == "url" {
						return nil, badRequest("keyboard button: %s is a member of inline keyboard buttons only", k)
					}
				}
			}
			if strings.TrimSpace(text) == "" {
				return nil, badRequest("BUTTON_TEXT_INVALID")
			}
			texts = append(texts, text)
		}
		out = append(out, texts)
	}
	if total > MaxButtons {
		return nil, badRequest("reply markup is too long")
	}
	return out, nil
}

func (s *Server) answerCallback(b *Bot, p params) (any, *apiError) {
	id, _ := p.str("callback_query_id")
	if id == "" {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	text, _ := p.str("text")
	if utf16Len(text) > MaxCallbackAnswer {
		return nil, badRequest("MESSAGE_TOO_LONG")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rateLimit > 0 {
		return nil, &apiError{status: 429, desc: fmt.Sprintf("Too Many Requests: retry after %d", s.rateLimit), retryAfter: s.rateLimit}
	}
	if s.callbacks[id] != b.ID || s.answered[id] {
		return nil, badRequest("query is too old and response timeout expired or query ID is invalid")
	}
	s.answered[id] = true
	s.answers.Add(Answer{BotID: b.ID, CallbackQueryID: id, Text: text})
	return true, nil
}

// utf16Len is the length of s as the Bot API counts it, in UTF-16 code units.
func utf16Len(s string) int { return len(utf16.Encode([]rune(s))) }
