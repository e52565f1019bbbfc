// Package telegram is the channel adapter of the Telegram Bot API
// (https://core.telegram.org/bots/api): a bot token identifies the channel, updates arrive
// by webhook with a secret-token header, and messages are sent with sendMessage and the
// send<Media> methods. Every request goes to {base}/bot<token>/<method> with a JSON body;
// the base is https://api.telegram.org unless the deployment or the channel names another
// (a self-hosted Bot API server, or a fake in tests).
//
// The token is a credential: it appears in request URLs only, never in errors, logs or
// results. Transport errors are stripped of the URL for that reason.
package telegram

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/httpclient"
)

// DefaultBaseURL is the public Bot API server.
const DefaultBaseURL = "https://api.telegram.org"

// DefaultTimeout bounds one Bot API call when Config.HTTPClient is nil. Sends are quick;
// setWebhook makes Telegram probe nothing, so a few seconds suffice.
const DefaultTimeout = 10 * time.Second

// Limits of the Bot API that the adapter checks before sending, so that a message Telegram
// would refuse fails without a round trip. Lengths are counted as Telegram counts them, in
// UTF-16 code units (a character outside the Basic Multilingual Plane, such as most emoji,
// counts twice), which is never more lenient than counting characters.
const (
	// MaxTextLength is sendMessage's text limit.
	MaxTextLength = 4096
	// MaxCaptionLength is the media caption limit.
	MaxCaptionLength = 1024
	// MaxButtons is the most inline keyboard buttons one message may carry.
	MaxButtons = 100
	// MaxButtonTitle is the longest button title the adapter sends, in characters; the Bot
	// API documents no limit, this keeps titles readable on a phone and matches the
	// reactions' rule.
	MaxButtonTitle = 64
	// MaxCallbackData is the callback_data limit, in bytes.
	MaxCallbackData = 64
	// MaxPhotoBytes and MaxFileBytes are what Telegram downloads from a URL: photos up to
	// 5 MB, other files up to 20 MB.
	MaxPhotoBytes = 5 << 20
	MaxFileBytes  = 20 << 20
)

// maxResponseBytes caps how much of a Bot API response is read.
const maxResponseBytes = 1 << 20

// Config configures an Adapter.
type Config struct {
	// BaseURL is the Bot API server ("" means DefaultBaseURL). A channel whose credentials
	// name an api_base_url uses that instead.
	BaseURL string
	// HTTPClient makes the calls; nil means a client with DefaultTimeout that follows no
	// redirects. Its Timeout, or the caller's context, bounds each call.
	HTTPClient *http.Client
	// Now stamps button presses, which carry no time of their own; nil means time.Now.
	Now func() time.Time
}

// Adapter speaks the Telegram Bot API. It implements channel.Adapter,
// channel.CallbackAnswerer and channel.Disconnector and is safe for concurrent use.
type Adapter struct {
	base   string
	client *http.Client
	now    func() time.Time
}

var _ interface {
	channel.Adapter
	channel.CallbackAnswerer
	channel.Disconnector
} = (*Adapter)(nil)

// New returns an Adapter.
func New(cfg Config) *Adapter {
	a := &Adapter{base: strings.TrimRight(cfg.BaseURL, "/"), client: cfg.HTTPClient, now: cfg.Now}
	if a.base == "" {
		a.base = DefaultBaseURL
	}
	if a.client == nil {
		a.client = &http.Client{Timeout: DefaultTimeout, CheckRedirect: httpclient.NoRedirects}
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// Kind is channel.Telegram.
func (a *Adapter) Kind() channel.Kind { return channel.Telegram }

// Capabilities declares what a Telegram bot can send.
func (a *Adapter) Capabilities() channel.Capabilities {
	return channel.Capabilities{
		Kind: channel.Telegram,
		// A Telegram bot is attached by an operator (admin channel connect), not over REST.
		ConnectableOverREST: false,
		MessageKinds: []string{channel.MessageKindText, channel.MessageKindMedia, channel.MessageKindButtons,
			channel.MessageKindQuickReplies},
		// Sending by URL: Telegram downloads the file itself, within these limits; by URL,
		// sendDocument takes only PDF, ZIP and GIF files, sendAudio MP3 and M4A, sendVideo MP4.
		Media: []channel.MediaLimit{
			{Type: channel.Image, MaxBytes: MaxPhotoBytes, MimeTypes: []string{"image/jpeg", "image/png"}},
			{Type: channel.Video, MaxBytes: MaxFileBytes, MimeTypes: []string{"video/mp4"}},
			{Type: channel.Audio, MaxBytes: MaxFileBytes, MimeTypes: []string{"audio/mpeg", "audio/mp4"}},
			{Type: channel.Document, MaxBytes: MaxFileBytes, MimeTypes: []string{"application/pdf", "application/zip", "image/gif"}},
		},
		MaxTextLength:    MaxTextLength,
		MaxCaptionLength: MaxCaptionLength,
		Buttons:          channel.ButtonLimits{Max: MaxButtons, MaxTitleLength: MaxButtonTitle, URLButtons: true},
		// No session window: a bot may write to anyone who has started it, at any time.
		SessionWindowSeconds:  0,
		TemplateOutsideWindow: false,
		RateLimit:             "about 30 messages per second per bot overall; 1 message per second per chat (short bursts tolerated); 429 with retry_after beyond",
		MessagesPerSecond:     30,
	}
}

// Credentials are a Telegram channel's credentials.
type Credentials struct {
	// Token is the bot token from @BotFather: the bot's numeric id, a colon, 35 characters.
	Token string `json:"token"`
	// APIBaseURL is the Bot API server of this channel ("" for the deployment's), for a
	// self-hosted Bot API server or a test's fake.
	APIBaseURL string `json:"api_base_url,omitempty"`
}

// Credentials returns a new, empty *Credentials.
func (a *Adapter) Credentials() any { return &Credentials{} }

var tokenShape = regexp.MustCompile(`^[0-9]{1,20}:[A-Za-z0-9_-]{35}$`)

// Check reports the first malformed member as a *channel.CredentialsError, without the
// token's value.
func (c Credentials) Check() error {
	if c.Token == "" {
		return &channel.CredentialsError{Field: "token", Message: "is required"}
	}
	if !tokenShape.MatchString(c.Token) {
		return &channel.CredentialsError{Field: "token",
			Message: "must be a bot token as @BotFather gives it: digits, a colon and 35 characters of A-Z a-z 0-9 _ -"}
	}
	if c.APIBaseURL != "" {
		if err := CheckBaseURL(c.APIBaseURL); err != nil {
			return &channel.CredentialsError{Field: "api_base_url", Message: err.Error()}
		}
	}
	return nil
}

// CheckBaseURL reports whether s can be a Bot API base URL (Config.BaseURL, a channel's
// api_base_url): an absolute http or https URL with a host and no user info, query or
// fragment. The rule is every adapter's (httpclient.CheckBaseURL).
func CheckBaseURL(s string) error { return httpclient.CheckBaseURL(s) }

func credentialsOf(v any) (Credentials, error) {
	switch c := v.(type) {
	case *Credentials:
		if c != nil {
			return *c, nil
		}
	case Credentials:
		return c, nil
	}
	return Credentials{}, fmt.Errorf("telegram: credentials of type %T, want *telegram.Credentials", v)
}

// Settings are a Telegram channel's public facts.
type Settings struct {
	// BotID is the bot's Telegram user id.
	BotID int64 `json:"bot_id"`
	// Username is the bot's username, without the @.
	Username string `json:"username"`
}

// AllowedUpdates are the update kinds the webhook asks for; Parse ignores any other.
var AllowedUpdates = []string{"message", "callback_query"}

// Connect checks the token with getMe (Telegram's 401 is channel.ErrInvalidCredentials) and,
// when req.WebhookURL is set, registers it with setWebhook and req.WebhookSecret as the
// secret token. The lookup key is the bot's id: one Telegram bot has one webhook, so it can
// serve one channel of the deployment.
func (a *Adapter) Connect(ctx context.Context, req channel.ConnectRequest) (channel.ConnectResult, error) {
	creds, err := credentialsOf(req.Credentials)
	if err != nil {
		return channel.ConnectResult{}, err
	}
	if err := creds.Check(); err != nil {
		return channel.ConnectResult{}, err
	}
	me, err := a.Me(ctx, creds)
	if err != nil {
		return channel.ConnectResult{}, err
	}
	if req.WebhookURL != "" {
		if err := a.setWebhook(ctx, creds, req.WebhookURL, req.WebhookSecret); err != nil {
			return channel.ConnectResult{}, err
		}
	}
	settings, err := json.Marshal(me)
	if err != nil {
		return channel.ConnectResult{}, err
	}
	stored, err := json.Marshal(creds)
	if err != nil {
		return channel.ConnectResult{}, err
	}
	return channel.ConnectResult{
		Settings:    settings,
		Credentials: stored,
		DisplayName: "@" + me.Username,
		LookupKey:   strconv.FormatInt(me.BotID, 10),
	}, nil
}

// Me asks Telegram who the token belongs to (getMe).
func (a *Adapter) Me(ctx context.Context, creds Credentials) (Settings, error) {
	if err := creds.Check(); err != nil {
		return Settings{}, err
	}
	var u user
	if err := a.call(ctx, creds, "getMe", struct{}{}, &u); err != nil {
		return Settings{}, err
	}
	if !u.IsBot {
		return Settings{}, &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: channel.Telegram,
			Code: "not_a_bot", Message: "the token does not belong to a bot"}
	}
	return Settings{BotID: u.ID, Username: u.Username}, nil
}

var secretShape = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

func (a *Adapter) setWebhook(ctx context.Context, creds Credentials, webhookURL, secret string) error {
	if !secretShape.MatchString(secret) {
		// Telegram would refuse it too; an empty secret would leave the webhook unauthenticated.
		return errors.New("telegram: the webhook secret must be 1 to 256 characters of A-Z a-z 0-9 _ -")
	}
	params := struct {
		URL                string   `json:"url"`
		SecretToken        string   `json:"secret_token"`
		AllowedUpdates     []string `json:"allowed_updates"`
		DropPendingUpdates bool     `json:"drop_pending_updates"`
	}{webhookURL, secret, AllowedUpdates, false}
	var ok bool
	return a.call(ctx, creds, "setWebhook", params, &ok)
}

// Disconnect stops Telegram's deliveries to the channel's webhook (deleteWebhook, pending
// updates kept for whoever connects the bot next), for a channel disconnected or never
// stored. A Telegram bot has one webhook: when it no longer points at this channel (the bot
// was connected again elsewhere meanwhile), it is left alone.
func (a *Adapter) Disconnect(ctx context.Context, conn channel.Connection) error {
	creds, err := openCredentials(conn)
	if err != nil {
		return err
	}
	var info struct {
		URL string `json:"url"`
	}
	if err := a.call(ctx, creds, "getWebhookInfo", struct{}{}, &info); err != nil {
		return err
	}
	u, err := url.Parse(info.URL)
	if info.URL == "" || err != nil || conn.ChannelID == "" || !strings.HasSuffix(u.Path, "/"+conn.ChannelID) {
		return nil
	}
	var ok bool
	return a.call(ctx, creds, "deleteWebhook", struct {
		DropPendingUpdates bool `json:"drop_pending_updates"`
	}{false}, &ok)
}

func openCredentials(conn channel.Connection) (Credentials, error) {
	var c Credentials
	if err := json.Unmarshal(conn.Credentials, &c); err != nil {
		return Credentials{}, fmt.Errorf("telegram: channel %s: unreadable credentials", conn.ChannelID)
	}
	if err := c.Check(); err != nil {
		return Credentials{}, fmt.Errorf("telegram: channel %s: %w", conn.ChannelID, err)
	}
	return c, nil
}

// Outbound shapes of the Bot API.
type (
	inlineKeyboard struct {
		InlineKeyboard [][]inlineButton `json:"inline_keyboard"`
	}
	inlineButton struct {
		Text         string `json:"text"`
		CallbackData string `json:"callback_data,omitempty"`
		URL          string `json:"url,omitempty"`
	}
	// replyKeyboard (ReplyKeyboardMarkup) is a keyboard of answers that replaces the
	// subscriber's keyboard: a tap sends the button's text as a message. It hides after one
	// tap (one_time_keyboard) and is sized to its buttons (resize_keyboard).
	replyKeyboard struct {
		Keyboard        [][]keyboardButton `json:"keyboard"`
		OneTimeKeyboard bool               `json:"one_time_keyboard"`
		ResizeKeyboard  bool               `json:"resize_keyboard"`
	}
	keyboardButton struct {
		Text string `json:"text"`
	}
	// sendMessage carries no parse_mode: the text is sent as written, so markup characters
	// in subscriber-provided values can neither break the message nor format it.
	sendMessage struct {
		ChatID      int64  `json:"chat_id"`
		Text        string `json:"text"`
		ReplyMarkup any    `json:"reply_markup,omitempty"`
	}
)

// mediaMethods maps a media type to its Bot API method and file parameter.
var mediaMethods = map[channel.MediaType][2]string{
	channel.Image:    {"sendPhoto", "photo"},
	channel.Video:    {"sendVideo", "video"},
	channel.Audio:    {"sendAudio", "audio"},
	channel.Document: {"sendDocument", "document"},
}

// Send delivers m to the private chat of userID (a Telegram user id) and returns the
// message id Telegram gave it (unique within that chat). Text goes with sendMessage, media
// by URL with sendPhoto, sendVideo, sendAudio or sendDocument; buttons become an inline
// keyboard, one button per row, and quick replies a one-time reply keyboard (a tap sends
// the title as a text message). A message the adapter can tell Telegram would refuse fails
// with channel.ErrRejected without a call. The Bot API has no idempotency key: m.Key is not
// used, and a send retried after a lost answer can arrive twice.
func (a *Adapter) Send(ctx context.Context, conn channel.Connection, userID string, m channel.Message) (string, error) {
	creds, err := openCredentials(conn)
	if err != nil {
		return "", err
	}
	chatID, err := strconv.ParseInt(userID, 10, 64)
	if err != nil || chatID <= 0 {
		return "", rejected("the user id is not a Telegram user id")
	}
	method, params, err := build(chatID, m)
	if err != nil {
		return "", err
	}
	var sent struct {
		MessageID int64 `json:"message_id"`
	}
	if err := a.call(ctx, creds, method, params, &sent); err != nil {
		return "", err
	}
	return strconv.FormatInt(sent.MessageID, 10), nil
}

// build checks m against the Bot API's limits and returns the method and its parameters.
func build(chatID int64, m channel.Message) (string, any, error) {
	if m.Template != nil {
		return "", nil, rejected("Telegram has no message templates")
	}
	keyboard, err := keyboardOf(m.Buttons, m.QuickReplies)
	if err != nil {
		return "", nil, err
	}
	if m.Media == nil {
		if err := checkText("text", m.Text, 1, MaxTextLength); err != nil {
			return "", nil, err
		}
		return "sendMessage", sendMessage{ChatID: chatID, Text: m.Text, ReplyMarkup: keyboard}, nil
	}
	if m.Text != "" {
		return "", nil, rejected("a message has either text or media; put the words in the caption")
	}
	mm, ok := mediaMethods[m.Media.Type]
	if !ok {
		return "", nil, rejected(fmt.Sprintf("media type %q is not one of image, video, audio, document", m.Media.Type))
	}
	if !fetchable(m.Media.URL) {
		return "", nil, rejected("the media URL must be an absolute http or https URL")
	}
	if err := checkText("caption", m.Media.Caption, 0, MaxCaptionLength); err != nil {
		return "", nil, err
	}
	params := map[string]any{"chat_id": chatID, mm[1]: m.Media.URL}
	if m.Media.Caption != "" {
		params["caption"] = m.Media.Caption
	}
	if keyboard != nil {
		params["reply_markup"] = keyboard
	}
	return mm[0], params, nil
}

// keyboardOf returns the reply_markup of the buttons: an inline keyboard (nil without
// buttons), or for quick replies a one-time reply keyboard. A reply keyboard button carries
// only its text, which is what a tap sends back: the payload stays with the platform, which
// recognises the title (docs/runtime.md).
func keyboardOf(buttons []channel.Button, quick bool) (any, error) {
	if len(buttons) == 0 {
		return nil, nil
	}
	if len(buttons) > MaxButtons {
		return nil, rejected(fmt.Sprintf("at most %d buttons", MaxButtons))
	}
	inline := &inlineKeyboard{InlineKeyboard: make([][]inlineButton, 0, len(buttons))}
	reply := &replyKeyboard{Keyboard: make([][]keyboardButton, 0, len(buttons)), OneTimeKeyboard: true, ResizeKeyboard: true}
	for i, b := range buttons {
		// Titles are the platform's own limit, so they count characters, as reactions do.
		if n := utf8.RuneCountInString(b.Title); !utf8.ValidString(b.Title) || n < 1 || n > MaxButtonTitle {
			return nil, rejected(fmt.Sprintf("button %d: the title must be 1 to %d characters of valid UTF-8", i+1, MaxButtonTitle))
		}
		switch {
		case (b.Payload == "") == (b.URL == ""):
			return nil, rejected(fmt.Sprintf("button %d needs exactly one of a payload and a URL", i+1))
		case b.URL != "" && quick:
			return nil, rejected(fmt.Sprintf("button %d: quick replies cannot open links", i+1))
		case b.Payload != "" && len(b.Payload) > MaxCallbackData && !quick:
			return nil, rejected(fmt.Sprintf("button %d: the payload is over %d bytes", i+1, MaxCallbackData))
		case b.URL != "" && !linkable(b.URL):
			return nil, rejected(fmt.Sprintf("button %d: the URL must be an http, https or tg URL", i+1))
		}
		inline.InlineKeyboard = append(inline.InlineKeyboard, []inlineButton{{Text: b.Title, CallbackData: b.Payload, URL: b.URL}})
		reply.Keyboard = append(reply.Keyboard, []keyboardButton{{Text: b.Title}})
	}
	if quick {
		return reply, nil
	}
	return inline, nil
}

func checkText(what, s string, minLen, maxLen int) error {
	if !utf8.ValidString(s) {
		return rejected(what + " is not valid UTF-8")
	}
	n := UTF16Len(s)
	if n < minLen {
		return rejected(what + " is empty")
	}
	if n > maxLen {
		return rejected(fmt.Sprintf("%s is %d UTF-16 code units long; Telegram takes at most %d", what, n, maxLen))
	}
	return nil
}

// UTF16Len is the length of s as Telegram counts it, in UTF-16 code units.
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r) // never -1: ranging over a string yields no surrogate
	}
	return n
}

func fetchable(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

func linkable(s string) bool {
	u, err := url.Parse(s)
	return err == nil && ((u.Scheme == "http" || u.Scheme == "https") && u.Host != "" || u.Scheme == "tg")
}

func rejected(msg string) error {
	return &channel.Error{Kind: channel.ErrRejected, Provider: channel.Telegram, Code: "invalid_message", Message: msg}
}

// AnswerCallback acknowledges a button press (answerCallbackQuery) so the subscriber's app
// stops showing a progress indicator on the button. It shows the subscriber nothing.
func (a *Adapter) AnswerCallback(ctx context.Context, conn channel.Connection, callbackID string) error {
	if callbackID == "" {
		return rejected("no callback query id")
	}
	creds, err := openCredentials(conn)
	if err != nil {
		return err
	}
	var ok bool
	return a.call(ctx, creds, "answerCallbackQuery", struct {
		CallbackQueryID string `json:"callback_query_id"`
	}{callbackID}, &ok)
}

// SecretHeader is the header Telegram sends the webhook's secret token in.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// Verify accepts a delivery only when its secret-token header equals the channel's webhook
// secret (compared in constant time). A channel without a secret accepts nothing.
func (a *Adapter) Verify(r *http.Request, _ []byte, conn channel.Connection) error {
	got := r.Header.Get(SecretHeader)
	if conn.WebhookSecret == "" || got == "" ||
		subtle.ConstantTimeCompare([]byte(got), []byte(conn.WebhookSecret)) != 1 {
		return &channel.Error{Kind: channel.ErrUnauthenticWebhook, Provider: channel.Telegram,
			Code: "secret_token", Message: "missing or wrong " + SecretHeader}
	}
	return nil
}

// Inbound shapes of the Bot API (the members the adapter reads).
type (
	update struct {
		UpdateID      *int64         `json:"update_id"`
		Message       *message       `json:"message"`
		CallbackQuery *callbackQuery `json:"callback_query"`
	}
	message struct {
		MessageID int64  `json:"message_id"`
		From      *user  `json:"from"`
		Chat      chat   `json:"chat"`
		Date      int64  `json:"date"`
		Text      string `json:"text"`
		Caption   string `json:"caption"`
	}
	user struct {
		ID           int64  `json:"id"`
		IsBot        bool   `json:"is_bot"`
		FirstName    string `json:"first_name"`
		LastName     string `json:"last_name"`
		Username     string `json:"username"`
		LanguageCode string `json:"language_code"`
	}
	chat struct {
		ID   int64  `json:"id"`
		Type string `json:"type"`
	}
	callbackQuery struct {
		ID      string   `json:"id"`
		From    *user    `json:"from"`
		Message *message `json:"message"`
		Data    string   `json:"data"`
	}
)

// Parse turns one webhook delivery (an Update) into at most one Inbound:
//   - a message in a private chat with text (commands such as /start included, as text) or
//     a caption: Text;
//   - a callback query (an inline button press) with data: Payload, and CallbackID to
//     answer it; its time is the time of parsing, since Telegram sends none;
//   - anything else (edited messages, other update kinds, group chats, messages from bots,
//     stickers and media without a caption, game callbacks): nothing.
func (a *Adapter) Parse(body []byte) ([]channel.Inbound, error) {
	var u update
	if err := json.Unmarshal(body, &u); err != nil {
		return nil, fmt.Errorf("telegram: not an Update: %w", err)
	}
	if u.UpdateID == nil {
		return nil, errors.New("telegram: not an Update: no update_id")
	}
	in := channel.Inbound{UpdateID: strconv.FormatInt(*u.UpdateID, 10)}
	switch {
	case u.Message != nil:
		m := u.Message
		if m.Chat.Type != "private" || m.From == nil || m.From.IsBot || m.From.ID <= 0 {
			return nil, nil
		}
		in.Text = m.Text
		if in.Text == "" {
			in.Text = m.Caption
		}
		if in.Text == "" {
			return nil, nil
		}
		setUser(&in, m.From)
		in.At = time.Unix(m.Date, 0).UTC()
	case u.CallbackQuery != nil:
		q := u.CallbackQuery
		if q.Data == "" || q.ID == "" || q.From == nil || q.From.IsBot || q.From.ID <= 0 {
			return nil, nil
		}
		if q.Message != nil && q.Message.Chat.Type != "private" {
			return nil, nil
		}
		setUser(&in, q.From)
		in.Payload, in.CallbackID = q.Data, q.ID
		in.At = a.now().UTC().Truncate(time.Second)
	default:
		return nil, nil
	}
	return []channel.Inbound{in}, nil
}

func setUser(in *channel.Inbound, u *user) {
	in.UserID = strconv.FormatInt(u.ID, 10)
	in.FirstName, in.LastName, in.Locale = u.FirstName, u.LastName, u.LanguageCode
}

// response is the Bot API's envelope.
type response struct {
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  *struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

// call makes one Bot API call and decodes its result into out, mapping failures to
// *channel.Error. Nothing it returns contains the token.
func (a *Adapter) call(ctx context.Context, creds Credentials, method string, params, out any) error {
	base := a.base
	if creds.APIBaseURL != "" {
		base = strings.TrimRight(creds.APIBaseURL, "/")
	}
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("telegram: bad base URL: %w", err)
	}
	u = u.JoinPath("bot"+creds.Token, method)
	body, err := json.Marshal(params)
	if err != nil {
		return fmt.Errorf("telegram: %s: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		// The error would quote the URL, and with it the token.
		return fmt.Errorf("telegram: %s: cannot build the request", method)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	res, err := a.client.Do(req)
	if err != nil {
		// Without the URL, which holds the token.
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.Telegram, Code: "transport",
			Message: method + ": " + httpclient.WithoutURL(err).Error()}
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.Telegram, Code: "transport",
			Message: method + ": reading the response: " + err.Error()}
	}
	var r response
	if err := json.Unmarshal(raw, &r); err != nil || (!r.OK && r.ErrorCode == 0 && res.StatusCode < 300) {
		// An HTML page from a proxy in front of the Bot API (502, 504), or garbage.
		kind := channel.ErrUnavailable
		if res.StatusCode >= 400 && res.StatusCode < 500 {
			kind = kindOf(res.StatusCode)
		}
		return &channel.Error{Kind: kind, Provider: channel.Telegram, Code: strconv.Itoa(res.StatusCode),
			Message: method + ": unreadable response", RetryAfter: retryAfter(res, 0)}
	}
	if !r.OK {
		code := r.ErrorCode
		if code == 0 {
			code = res.StatusCode
		}
		secs := 0
		if r.Parameters != nil {
			secs = r.Parameters.RetryAfter
		}
		e := &channel.Error{Kind: kindOf(code), Provider: channel.Telegram, Code: strconv.Itoa(code),
			Message: method + ": " + truncate(r.Description, 300)}
		if e.Kind == channel.ErrRateLimited {
			e.RetryAfter = retryAfter(res, secs)
		}
		return e
	}
	if out != nil {
		if err := json.Unmarshal(r.Result, out); err != nil {
			return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.Telegram, Code: strconv.Itoa(res.StatusCode),
				Message: method + ": unexpected result"}
		}
	}
	return nil
}

// kindOf maps a Bot API error code to the platform's error kinds.
func kindOf(code int) error {
	switch {
	case code == http.StatusTooManyRequests:
		return channel.ErrRateLimited
	case code == http.StatusUnauthorized, code == http.StatusNotFound:
		// 401: the token is revoked or wrong; 404: the token is malformed (the Bot API
		// answers an unknown path).
		return channel.ErrInvalidCredentials
	case code == http.StatusForbidden:
		// The bot was blocked by the user, the user is deactivated, or the bot may not
		// write to the chat: nothing a retry changes.
		return channel.ErrBlocked
	case code >= 500:
		return channel.ErrUnavailable
	default:
		return channel.ErrRejected
	}
}

// retryAfter is the wait Telegram asks for: parameters.retry_after, else the Retry-After
// header, else one second (a rate limit always makes the caller wait).
func retryAfter(res *http.Response, secs int) time.Duration {
	if secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if d := httpclient.RetryAfter(res.Header.Get("Retry-After"), time.Now()); d > 0 {
		return d
	}
	return time.Second
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
