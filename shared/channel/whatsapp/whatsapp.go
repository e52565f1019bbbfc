// Package whatsapp is the adapter of the template-based messenger: the WhatsApp Business
// Cloud API on Meta's Graph API. It connects a phone number of a WhatsApp Business Account
// (WABA), sends text, reply buttons, lists, media by link and template messages, verifies
// and parses the app-level webhook (X-Hub-Signature-256 and the GET verification challenge),
// and manages the account's message templates (list with paging, create, edit, delete, and
// header media examples through the Resumable Upload API).
//
// Credentials (an access token, the phone number id and the WABA id) belong to one channel
// and travel only in the Authorization header, never in a URL, a log line or an error. The
// app id and the app secret belong to the deployment's Meta app: they are Config, not
// channel credentials.
package whatsapp

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/httpclient"
)

// DefaultBaseURL is the Graph API with the version this adapter speaks.
const DefaultBaseURL = "https://graph.facebook.com/v21.0"

// Timeouts of one call. Uploads of header media (up to 100 MB) get longer.
const (
	callTimeout   = 30 * time.Second
	uploadTimeout = 10 * time.Minute
	// maxResponseBytes bounds what is read of a Graph API answer.
	maxResponseBytes = 8 << 20
)

// Config configures the adapter. Only the base URL has a default; AppID and AppSecret are
// needed for header media uploads and for webhook verification respectively, and their
// absence fails those operations closed.
type Config struct {
	// BaseURL is the Graph API root including its version (DefaultBaseURL when empty);
	// tests point it at a fake.
	BaseURL string
	// HTTPClient makes the calls (a client with connection timeouts when nil). Per-call
	// deadlines come from the adapter: 30 s for API calls, 10 min for uploads.
	HTTPClient *http.Client
	// AppID is the Meta app's id: the Resumable Upload API opens sessions under it.
	AppID string
	// AppSecret is the Meta app's secret: webhooks are signed with it (X-Hub-Signature-256).
	AppSecret string
	// AllowPrivateDownloads lets FetchMedia reach loopback and private addresses (the local
	// process and tests); otherwise a customer-given URL cannot reach into the deployment's
	// network (instance metadata, internal services).
	AllowPrivateDownloads bool
}

// CheckBaseURL reports whether s can be a Graph API base URL: an absolute http or https URL
// with a host and no user info, query or fragment. The rule is every adapter's
// (httpclient.CheckBaseURL).
func CheckBaseURL(s string) error { return httpclient.CheckBaseURL(s) }

// ValidAppID reports whether id looks like a Meta app id (digits).
func ValidAppID(id string) bool { return graphID.MatchString(id) }

// Adapter speaks to the WhatsApp Business Cloud API. It is safe for concurrent use.
type Adapter struct {
	base      string
	client    *http.Client
	appID     string
	appSecret []byte
	// download fetches customer-given media URLs (FetchMedia).
	download *http.Client
}

// New returns an adapter for cfg.
func New(cfg Config) *Adapter {
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = DefaultBaseURL
	}
	client := cfg.HTTPClient
	if client == nil {
		client = defaultClient()
	}
	return &Adapter{base: base, client: client, appID: cfg.AppID, appSecret: []byte(cfg.AppSecret),
		download: downloadClient(cfg.AllowPrivateDownloads)}
}

// defaultClient bounds connecting and waiting for headers; the whole exchange is bounded by
// each call's context, so a long upload is not cut by a client-wide timeout.
func defaultClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   16,
		},
		// Graph API calls never redirect; following one could carry the token elsewhere.
		CheckRedirect: httpclient.NoRedirects,
	}
}

// Kind is channel.WhatsApp.
func (a *Adapter) Kind() channel.Kind { return channel.WhatsApp }

// Media limits of the Cloud API for messages sent by link.
var sendMedia = []channel.MediaLimit{
	{Type: channel.Image, MaxBytes: 5 << 20, MimeTypes: []string{"image/jpeg", "image/png"}},
	{Type: channel.Video, MaxBytes: 16 << 20, MimeTypes: []string{"video/mp4", "video/3gpp"}},
	{Type: channel.Audio, MaxBytes: 16 << 20, MimeTypes: []string{"audio/aac", "audio/amr", "audio/mpeg", "audio/mp4", "audio/ogg"}},
	{Type: channel.Document, MaxBytes: 100 << 20, MimeTypes: []string{
		"application/pdf", "text/plain", "application/msword",
		"application/vnd.openxmlformats-officedocument.wordprocessingml.document",
		"application/vnd.ms-excel", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
		"application/vnd.ms-powerpoint", "application/vnd.openxmlformats-officedocument.presentationml.presentation",
	}},
}

// uploadTypes are the file types the Resumable Upload API accepts.
var uploadTypes = []string{"application/pdf", "image/jpeg", "image/jpg", "image/png", "video/mp4"}

// Limits of the Cloud API that Send enforces before calling it.
const (
	maxText            = 4096
	maxInteractiveBody = 1024
	maxCaption         = 1024
	maxReplyButtons    = 3
	maxListRows        = 10
	maxButtonTitle     = 20
	maxRowTitle        = 24
	maxButtonID        = 256
	maxRowID           = 200
	// MessagesPerSecond is the default throughput of one business phone number.
	MessagesPerSecond = 80
	// SessionWindow is how long after a user's last message free-form messages may be sent.
	SessionWindow = 24 * time.Hour
)

// Capabilities declares what a WhatsApp channel can do.
func (a *Adapter) Capabilities() channel.Capabilities {
	return channel.Capabilities{
		Kind:                channel.WhatsApp,
		ConnectableOverREST: true,
		MessageKinds: []string{channel.MessageKindText, channel.MessageKindMedia, channel.MessageKindButtons,
			channel.MessageKindQuickReplies, channel.MessageKindTemplate},
		Media:            cloneLimits(sendMedia),
		MaxTextLength:    maxText,
		MaxCaptionLength: maxCaption,
		// Up to three reply buttons; four to ten go as a list (whose rows take 24 characters).
		Buttons:               channel.ButtonLimits{Max: maxListRows, MaxTitleLength: maxButtonTitle, URLButtons: true, URLButtonAlone: true},
		SessionWindowSeconds:  int(SessionWindow / time.Second),
		TemplateOutsideWindow: true,
		RateLimit: "80 messages per second per business phone number by default (more after Meta upgrades the number); " +
			"about one message every 6 seconds to the same user; daily limits on business-initiated conversations by messaging tier",
		MessagesPerSecond:   MessagesPerSecond,
		TemplateHeaderMedia: HeaderMediaLimits(),
	}
}

// HeaderMediaLimits are the media a template header example may be: the media types a
// header can show (image, video, document) with the send limits, restricted to the file
// types the Resumable Upload API accepts. That gives image jpeg/png up to 5 MB, video mp4
// up to 16 MB, document pdf up to 100 MB.
func HeaderMediaLimits() []channel.MediaLimit {
	var out []channel.MediaLimit
	for _, m := range sendMedia {
		if m.Type == channel.Audio {
			continue // a header cannot be audio
		}
		lim := channel.MediaLimit{Type: m.Type, MaxBytes: m.MaxBytes}
		for _, mt := range m.MimeTypes {
			for _, u := range uploadTypes {
				if mt == u {
					lim.MimeTypes = append(lim.MimeTypes, mt)
				}
			}
		}
		if len(lim.MimeTypes) > 0 {
			out = append(out, lim)
		}
	}
	return out
}

func cloneLimits(in []channel.MediaLimit) []channel.MediaLimit {
	out := make([]channel.MediaLimit, len(in))
	for i, m := range in {
		out[i] = channel.MediaLimit{Type: m.Type, MaxBytes: m.MaxBytes, MimeTypes: append([]string(nil), m.MimeTypes...)}
	}
	return out
}

// Credentials are what a WhatsApp channel is connected with: a system user (or business
// integration) access token with whatsapp_business_messaging and
// whatsapp_business_management, the phone number id, and the WABA id the number belongs to.
type Credentials struct {
	AccessToken       string `json:"access_token"`
	PhoneNumberID     string `json:"phone_number_id"`
	BusinessAccountID string `json:"business_account_id"`
}

// Settings are a connected channel's public facts.
type Settings struct {
	PhoneNumberID      string `json:"phone_number_id"`
	DisplayPhoneNumber string `json:"display_phone_number"`
	VerifiedName       string `json:"verified_name"`
	BusinessAccountID  string `json:"business_account_id"`
}

// Credentials returns a new, empty *Credentials for a connect request to be decoded into.
func (a *Adapter) Credentials() any { return &Credentials{} }

// graphID is a Graph API node id: digits only, which also keeps it from changing the path
// of a URL it is put in.
var graphID = regexp.MustCompile(`^[0-9]{1,32}$`)

// Validate reports every missing or malformed member, each as a *channel.CredentialsError
// (joined), before any call to the provider.
func (c *Credentials) Validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, &channel.CredentialsError{Field: field, Message: msg}) }
	switch tok := c.AccessToken; {
	case tok == "":
		bad("access_token", "is required")
	case len(tok) > 2048 || strings.ContainsAny(tok, " \t\r\n"):
		bad("access_token", "is not an access token (at most 2048 characters, no spaces)")
	}
	for _, f := range []struct{ name, v string }{{"phone_number_id", c.PhoneNumberID}, {"business_account_id", c.BusinessAccountID}} {
		switch {
		case f.v == "":
			bad(f.name, "is required")
		case !graphID.MatchString(f.v):
			bad(f.name, "must be the numeric id shown in WhatsApp Manager")
		}
	}
	return errors.Join(errs...)
}

// credentials reads a connection's credentials.
func credentials(conn channel.Connection) (Credentials, error) {
	var c Credentials
	if err := json.Unmarshal(conn.Credentials, &c); err != nil {
		return c, fmt.Errorf("whatsapp: channel %s credentials: %w", conn.ChannelID, err)
	}
	if err := c.Validate(); err != nil {
		return c, &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: channel.WhatsApp, Code: "stored_credentials", Message: "the stored credentials are incomplete"}
	}
	return c, nil
}

// Connect checks the credentials with the Graph API: the token must read the phone number,
// and the number must belong to the business account. When the deployment has a public URL
// it also subscribes the Meta app to the account's webhooks (POST /{waba}/subscribed_apps),
// which is idempotent; the webhook URL itself is configured once in the Meta app, for every
// number, so nothing per channel is registered.
func (a *Adapter) Connect(ctx context.Context, req channel.ConnectRequest) (channel.ConnectResult, error) {
	var c Credentials
	switch v := req.Credentials.(type) {
	case *Credentials:
		c = *v
	case Credentials:
		c = v
	default:
		return channel.ConnectResult{}, fmt.Errorf("whatsapp: connect with credentials of type %T", req.Credentials)
	}
	if err := c.Validate(); err != nil {
		return channel.ConnectResult{}, err
	}
	var phone struct {
		ID                 string `json:"id"`
		DisplayPhoneNumber string `json:"display_phone_number"`
		VerifiedName       string `json:"verified_name"`
	}
	q := url.Values{"fields": {"display_phone_number,verified_name"}}
	if err := a.call(ctx, c.AccessToken, http.MethodGet, c.PhoneNumberID, q, nil, &phone); err != nil {
		return channel.ConnectResult{}, connectError(err, "phone_number_id")
	}
	found, err := a.numberInAccount(ctx, c)
	if err != nil {
		return channel.ConnectResult{}, connectError(err, "business_account_id")
	}
	if !found {
		return channel.ConnectResult{}, &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: channel.WhatsApp,
			Code: "phone_number_not_in_account", Message: "the phone number does not belong to this WhatsApp Business Account"}
	}
	if req.WebhookURL != "" {
		var ok struct {
			Success bool `json:"success"`
		}
		if err := a.call(ctx, c.AccessToken, http.MethodPost, c.BusinessAccountID+"/subscribed_apps", nil, nil, &ok); err != nil {
			return channel.ConnectResult{}, connectError(err, "business_account_id")
		}
	}
	settings, err := json.Marshal(Settings{PhoneNumberID: c.PhoneNumberID, DisplayPhoneNumber: phone.DisplayPhoneNumber,
		VerifiedName: phone.VerifiedName, BusinessAccountID: c.BusinessAccountID})
	if err != nil {
		return channel.ConnectResult{}, err
	}
	creds, err := json.Marshal(c)
	if err != nil {
		return channel.ConnectResult{}, err
	}
	name := phone.DisplayPhoneNumber
	if name == "" {
		name = c.PhoneNumberID
	}
	return channel.ConnectResult{Settings: settings, Credentials: creds, DisplayName: name, LookupKey: c.PhoneNumberID}, nil
}

// connectError: an object the token cannot see (a wrong id, or one of another business) is
// a credentials problem at connect time.
func connectError(err error, field string) error {
	if errors.Is(err, ErrNotFound) {
		var ce *channel.Error
		if errors.As(err, &ce) {
			return &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: channel.WhatsApp, Code: ce.Code,
				Message: field + " does not exist or this access token cannot see it"}
		}
	}
	return err
}

// numberInAccount pages through the account's phone numbers looking for the channel's.
func (a *Adapter) numberInAccount(ctx context.Context, c Credentials) (bool, error) {
	after := ""
	for range 50 { // a WABA has a handful of numbers; the bound stops a provider that pages forever
		q := url.Values{"fields": {"id"}, "limit": {"100"}}
		if after != "" {
			q.Set("after", after)
		}
		var page struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			Paging paging `json:"paging"`
		}
		if err := a.call(ctx, c.AccessToken, http.MethodGet, c.BusinessAccountID+"/phone_numbers", q, nil, &page); err != nil {
			return false, err
		}
		for _, p := range page.Data {
			if p.ID == c.PhoneNumberID {
				return true, nil
			}
		}
		if page.Paging.Next == "" || page.Paging.Cursors.After == "" || len(page.Data) == 0 {
			return false, nil
		}
		after = page.Paging.Cursors.After
	}
	return false, nil
}

// paging is the Graph API's cursor paging object.
type paging struct {
	Cursors struct {
		Before string `json:"before"`
		After  string `json:"after"`
	} `json:"cursors"`
	Next string `json:"next"`
}

// Outbound message shapes of POST /{phone_number_id}/messages.
type (
	outMessage struct {
		MessagingProduct string       `json:"messaging_product"`
		RecipientType    string       `json:"recipient_type"`
		To               string       `json:"to"`
		Type             string       `json:"type"`
		Text             *outText     `json:"text,omitempty"`
		Image            *outMedia    `json:"image,omitempty"`
		Video            *outMedia    `json:"video,omitempty"`
		Audio            *outMedia    `json:"audio,omitempty"`
		Document         *outMedia    `json:"document,omitempty"`
		Interactive      *interactive `json:"interactive,omitempty"`
		Template         *outTemplate `json:"template,omitempty"`
	}
	outText struct {
		Body       string `json:"body"`
		PreviewURL bool   `json:"preview_url"`
	}
	outMedia struct {
		Link     string `json:"link"`
		Caption  string `json:"caption,omitempty"`
		Filename string `json:"filename,omitempty"`
	}
	interactive struct {
		Type   string            `json:"type"`
		Body   interactiveBody   `json:"body"`
		Action interactiveAction `json:"action"`
	}
	interactiveBody struct {
		Text string `json:"text"`
	}
	interactiveAction struct {
		Buttons    []replyButton `json:"buttons,omitempty"`
		Button     string        `json:"button,omitempty"`
		Sections   []listSection `json:"sections,omitempty"`
		Name       string        `json:"name,omitempty"`
		Parameters *ctaURL       `json:"parameters,omitempty"`
	}
	replyButton struct {
		Type  string `json:"type"`
		Reply struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"reply"`
	}
	listSection struct {
		Title string    `json:"title,omitempty"`
		Rows  []listRow `json:"rows"`
	}
	listRow struct {
		ID    string `json:"id"`
		Title string `json:"title"`
	}
	ctaURL struct {
		DisplayText string `json:"display_text"`
		URL         string `json:"url"`
	}
	outTemplate struct {
		Name       string               `json:"name"`
		Language   languageCode         `json:"language"`
		Components []templateParameters `json:"components,omitempty"`
	}
	languageCode struct {
		Code string `json:"code"`
	}
	templateParameters struct {
		Type       string          `json:"type"`
		Parameters []textParameter `json:"parameters"`
	}
	textParameter struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
)

// waID is a WhatsApp user id: the phone number in international format, digits only.
var waID = regexp.MustCompile(`^[0-9]{6,20}$`)

// ListButtonLabel opens the list of choices when a message has more than three buttons.
const ListButtonLabel = "Choose"

// rejected is a message refused before it reaches the provider.
func rejected(format string, args ...any) error {
	return &channel.Error{Kind: channel.ErrRejected, Provider: channel.WhatsApp, Code: "invalid_message", Message: fmt.Sprintf(format, args...)}
}

// buildMessage turns a provider-neutral message into the Cloud API's, enforcing its limits.
func buildMessage(to string, m channel.Message) (*outMessage, error) {
	if !waID.MatchString(to) {
		return nil, rejected("the recipient is not a WhatsApp id (digits of an international phone number)")
	}
	out := &outMessage{MessagingProduct: "whatsapp", RecipientType: "individual", To: to}
	bodies := 0
	for _, set := range []bool{m.Text != "", m.Media != nil, m.Template != nil} {
		if set {
			bodies++
		}
	}
	if bodies != 1 {
		return nil, rejected("a message has exactly one of text, media or template")
	}
	if len(m.Buttons) > 0 && m.Text == "" {
		return nil, rejected("buttons go with a text")
	}
	switch {
	case m.Template != nil:
		t := m.Template
		if t.Name == "" || t.Language == "" {
			return nil, rejected("a template message needs the template's name and language")
		}
		out.Type = "template"
		out.Template = &outTemplate{Name: t.Name}
		out.Template.Language.Code = t.Language
		if len(t.Params) > 0 {
			p := templateParameters{Type: "body"}
			for i, v := range t.Params {
				if msg := paramProblem(v); msg != "" {
					return nil, rejected("template parameter %d %s", i+1, msg)
				}
				p.Parameters = append(p.Parameters, textParameter{Type: "text", Text: v})
			}
			out.Template.Components = []templateParameters{p}
		}
	case m.Media != nil:
		md := m.Media
		if u, err := url.Parse(md.URL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, rejected("media needs an http(s) URL")
		}
		if utf8.RuneCountInString(md.Caption) > maxCaption {
			return nil, rejected("a caption has at most %d characters", maxCaption)
		}
		body := &outMedia{Link: md.URL, Caption: md.Caption}
		switch md.Type {
		case channel.Image:
			out.Image = body
		case channel.Video:
			out.Video = body
		case channel.Audio:
			if md.Caption != "" {
				return nil, rejected("audio messages take no caption")
			}
			out.Audio = body
		case channel.Document:
			if u, err := url.Parse(md.URL); err == nil {
				if i := strings.LastIndexByte(u.Path, '/'); i >= 0 && i < len(u.Path)-1 {
					body.Filename = u.Path[i+1:]
				}
			}
			out.Document = body
		default:
			return nil, rejected("unknown media type %q", md.Type)
		}
		out.Type = string(md.Type)
	case len(m.Buttons) > 0:
		if m.QuickReplies && slices.ContainsFunc(m.Buttons, func(b channel.Button) bool { return b.URL != "" }) {
			return nil, rejected("quick replies cannot open links")
		}
		in, err := buildInteractive(m.Text, m.Buttons)
		if err != nil {
			return nil, err
		}
		out.Type, out.Interactive = "interactive", in
	default:
		if utf8.RuneCountInString(m.Text) > maxText {
			return nil, rejected("a text has at most %d characters", maxText)
		}
		out.Type, out.Text = "text", &outText{Body: m.Text}
	}
	return out, nil
}

// paramProblem says why the Cloud API would refuse v as a template's text parameter (empty;
// a new line, a tab or more than four spaces in a row: error 132018), or "".
func paramProblem(v string) string {
	switch {
	case strings.TrimSpace(v) == "":
		return "is empty"
	case strings.ContainsAny(v, "\n\r\t") || strings.Contains(v, "     "):
		return "has a new line, a tab or more than 4 spaces in a row"
	}
	return ""
}

// buildInteractive picks the interactive kind that can carry the buttons: up to three reply
// buttons, a list of up to ten rows, or one link button (cta_url). Links and replies cannot
// be mixed in one WhatsApp message. Quick replies are built the same way: WhatsApp's reply
// buttons are its quick replies (a tap sends the answer back as the user's message, shown in
// the chat), and it has no keyboard of answers besides them.
func buildInteractive(text string, buttons []channel.Button) (*interactive, error) {
	if utf8.RuneCountInString(text) > maxInteractiveBody {
		return nil, rejected("a text with buttons has at most %d characters", maxInteractiveBody)
	}
	in := &interactive{Body: interactiveBody{Text: text}}
	links := 0
	for _, b := range buttons {
		if b.URL != "" {
			links++
		}
	}
	switch {
	case links > 0:
		if len(buttons) != 1 {
			return nil, rejected("WhatsApp sends one link button alone, not with other buttons")
		}
		b := buttons[0]
		if utf8.RuneCountInString(b.Title) > maxButtonTitle || b.Title == "" {
			return nil, rejected("a button title has 1 to %d characters", maxButtonTitle)
		}
		in.Type = "cta_url"
		in.Action = interactiveAction{Name: "cta_url", Parameters: &ctaURL{DisplayText: b.Title, URL: b.URL}}
	case len(buttons) <= maxReplyButtons:
		in.Type = "button"
		seen := map[string]bool{}
		for _, b := range buttons {
			id := cmp.Or(b.Payload, b.Title)
			if b.Title == "" || utf8.RuneCountInString(b.Title) > maxButtonTitle {
				return nil, rejected("a button title has 1 to %d characters", maxButtonTitle)
			}
			if len(id) > maxButtonID || seen[id] {
				return nil, rejected("button payloads are unique and at most %d bytes", maxButtonID)
			}
			seen[id] = true
			var rb replyButton
			rb.Type, rb.Reply.ID, rb.Reply.Title = "reply", id, b.Title
			in.Action.Buttons = append(in.Action.Buttons, rb)
		}
	case len(buttons) <= maxListRows:
		in.Type = "list"
		sec := listSection{}
		seen := map[string]bool{}
		for _, b := range buttons {
			id := cmp.Or(b.Payload, b.Title)
			if b.Title == "" || utf8.RuneCountInString(b.Title) > maxRowTitle {
				return nil, rejected("a list row title has 1 to %d characters", maxRowTitle)
			}
			if len(id) > maxRowID || seen[id] {
				return nil, rejected("list payloads are unique and at most %d bytes", maxRowID)
			}
			seen[id] = true
			sec.Rows = append(sec.Rows, listRow{ID: id, Title: b.Title})
		}
		in.Action = interactiveAction{Button: ListButtonLabel, Sections: []listSection{sec}}
	default:
		return nil, rejected("at most %d buttons (as a list)", maxListRows)
	}
	return in, nil
}

// Send delivers m to the WhatsApp user userID (their wa_id) and returns the message id
// (wamid). Free-form messages reach a user only within 24 hours of their last message;
// outside it the provider answers ErrOutsideWindow and only a template may be sent. The Cloud
// API has no idempotency key: m.Key is not used, and a send retried after a lost answer can
// arrive twice.
func (a *Adapter) Send(ctx context.Context, conn channel.Connection, userID string, m channel.Message) (string, error) {
	c, err := credentials(conn)
	if err != nil {
		return "", err
	}
	msg, err := buildMessage(userID, m)
	if err != nil {
		return "", err
	}
	var res struct {
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	}
	if err := a.call(ctx, c.AccessToken, http.MethodPost, c.PhoneNumberID+"/messages", nil, msg, &res); err != nil {
		return "", err
	}
	if len(res.Messages) == 0 || res.Messages[0].ID == "" {
		return "", &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.WhatsApp, Code: "no_message_id", Message: "the provider answered without a message id"}
	}
	return res.Messages[0].ID, nil
}

// ErrNotFound marks a provider error for an object that does not exist or that the token
// cannot see (Graph API code 100 with subcode 33, or a template not found). It is joined
// with the *channel.Error, so errors.Is matches both.
var ErrNotFound = errors.New("whatsapp: no such object at the provider")

// ErrTemplateExists marks the provider's refusal of a template whose name and language
// exist already.
var ErrTemplateExists = errors.New("whatsapp: a template with this name and language exists")

// ErrNotConfigured: the deployment lacks the app id or app secret an operation needs.
var ErrNotConfigured = errors.New("whatsapp: the Meta app is not configured on this deployment")

// graphError is the Graph API's error object.
type graphError struct {
	Message     string `json:"message"`
	Type        string `json:"type"`
	Code        int    `json:"code"`
	Subcode     int    `json:"error_subcode"`
	UserTitle   string `json:"error_user_title"`
	UserMessage string `json:"error_user_msg"`
	IsTransient bool   `json:"is_transient"`
	FBTraceID   string `json:"fbtrace_id"`
	ErrorData   *struct {
		Details string `json:"details"`
	} `json:"error_data"`
}

// call makes one Graph API request with the token in the Authorization header and decodes
// a 2xx answer into out; any other answer becomes a *channel.Error.
func (a *Adapter) call(ctx context.Context, token, method, path string, q url.Values, body, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := a.base + "/" + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return a.do(req, token, out)
}

// do sends req and reads its answer.
func (a *Adapter) do(req *http.Request, token string, out any) error {
	res, err := a.client.Do(req)
	if err != nil {
		return unavailable(err, token)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return unavailable(err, token)
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if out == nil {
			return nil
		}
		if err := json.Unmarshal(b, out); err != nil {
			return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.WhatsApp, Code: "bad_response",
				Message: "the provider's answer could not be read"}
		}
		return nil
	}
	var env struct {
		Error *graphError `json:"error"`
	}
	_ = json.Unmarshal(b, &env)
	return mapError(res.StatusCode, env.Error, httpclient.RetryAfter(res.Header.Get("Retry-After"), time.Now()), token)
}

// unavailable is a failure to reach the provider; the error text of net/http names the URL,
// which holds no credential (the token travels in a header), but is scrubbed all the same.
func unavailable(err error, token string) error {
	return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.WhatsApp, Code: "transport", Message: scrub(err.Error(), token)}
}

// scrub removes the token from provider text that is kept in logs and traces.
func scrub(s, token string) string {
	if token != "" {
		s = strings.ReplaceAll(s, token, "[redacted]")
	}
	return s
}

// Graph API and Cloud API error codes, mapped to the platform's kinds.
const (
	codeUnknown          = 1
	codeService          = 2
	codeAppThrottled     = 4
	codePermission       = 10
	codeUserThrottled    = 17
	codeInvalidParameter = 100
	codeAccessToken      = 190
	codeBusinessThrottle = 80007
	codeRateLimit        = 130429
	codeSpamRate         = 131048
	codePairRate         = 131056
	codeUndeliverable    = 131026
	codeReengagement     = 131047
	codeUnsupported      = 131051
	codeGeneric          = 131000
	codeServiceDown      = 131016
	subcodeNoObject      = 33
	subcodeTemplateDup   = 2388024
	subcodeTemplateGone  = 2593002
)

// mapError turns a Graph API error into a *channel.Error (joined with ErrNotFound or
// ErrTemplateExists where they apply); retryAfter is the answer's Retry-After (0: none).
func mapError(status int, g *graphError, retryAfter time.Duration, token string) error {
	e := &channel.Error{Provider: channel.WhatsApp, Code: strconv.Itoa(status), RetryAfter: retryAfter}
	if g == nil {
		g = &graphError{}
	} else {
		e.Code = strconv.Itoa(g.Code)
		if g.Subcode != 0 {
			e.Code += "/" + strconv.Itoa(g.Subcode)
		}
		msg := g.Message
		if g.UserMessage != "" {
			msg += ": " + g.UserMessage
		}
		if g.ErrorData != nil && g.ErrorData.Details != "" {
			msg += " (" + g.ErrorData.Details + ")"
		}
		e.Message = scrub(msg, token)
	}
	switch {
	case g.Code == codeAccessToken || status == http.StatusUnauthorized:
		e.Kind = channel.ErrInvalidCredentials
	case g.Code == codePermission || (g.Code >= 200 && g.Code <= 299):
		e.Kind = channel.ErrInvalidCredentials // the token lacks a permission: not retryable
	case g.Code == codeReengagement:
		e.Kind = channel.ErrOutsideWindow
	case g.Code == codeRateLimit || g.Code == codeBusinessThrottle || g.Code == codeAppThrottled ||
		g.Code == codeUserThrottled || g.Code == codePairRate || g.Code == codeSpamRate || status == http.StatusTooManyRequests:
		e.Kind = channel.ErrRateLimited
		if g.Code == codePairRate && e.RetryAfter == 0 {
			e.RetryAfter = 6 * time.Second // the pair rate: about one message every 6 s to one user
		}
	case g.Code == codeUndeliverable:
		e.Kind = channel.ErrBlocked // not on WhatsApp, or cannot receive from businesses
	case g.Code == codeUnsupported:
		e.Kind = channel.ErrRejected
	case status >= 500 || g.Code == codeUnknown || g.Code == codeService || g.Code == codeGeneric ||
		g.Code == codeServiceDown || g.IsTransient:
		e.Kind = channel.ErrUnavailable
	default:
		e.Kind = channel.ErrRejected
	}
	switch {
	case g.Code == codeInvalidParameter && g.Subcode == subcodeNoObject,
		g.Code == codeInvalidParameter && g.Subcode == subcodeTemplateGone:
		return errors.Join(ErrNotFound, e)
	case g.Code == codeInvalidParameter && g.Subcode == subcodeTemplateDup:
		return errors.Join(ErrTemplateExists, e)
	}
	return e
}

// tierLimits are the people a number may start conversations with in a rolling 24 hours,
// by Meta's messaging_limit_tier (0: unlimited).
var tierLimits = map[string]int{
	"TIER_50": 50, "TIER_250": 250, "TIER_1K": 1_000, "TIER_2K": 2_000, "TIER_10K": 10_000,
	"TIER_100K": 100_000, "TIER_UNLIMITED": 0,
}

// lowestTier is assumed for a tier this package does not know: the bound of a new number,
// so that an unknown answer never lets a broadcast past what Meta allows.
const lowestTier = 250

// MessagingLimit reads the number's messaging tier (GET /{phone-number-id}?fields=
// messaging_limit_tier) and answers its bound on conversations started in 24 hours.
func (a *Adapter) MessagingLimit(ctx context.Context, conn channel.Connection) (int, error) {
	c, err := credentials(conn)
	if err != nil {
		return 0, err
	}
	var phone struct {
		Tier string `json:"messaging_limit_tier"`
	}
	q := url.Values{"fields": {"messaging_limit_tier"}}
	if err := a.call(ctx, c.AccessToken, http.MethodGet, c.PhoneNumberID, q, nil, &phone); err != nil {
		return 0, err
	}
	if n, ok := tierLimits[phone.Tier]; ok {
		return n, nil
	}
	return lowestTier, nil
}
