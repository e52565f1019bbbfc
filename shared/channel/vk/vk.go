// Package vk is the channel adapter of the social-network messenger: VK community messages.
// It speaks the VK API (https://api.vk.com/method/<name>, version 5.199) with the
// community's access key: groups.getById and the Callback API methods to connect,
// messages.send with inline keyboards and uploaded photos and documents to send; and it
// verifies and parses Callback API deliveries (the secret key and community id in the body,
// the confirmation event answered with the community's code). See docs/channels-vk.md.
package vk

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/httpclient"
)

// APIVersion is the VK API version of every call and of the callback events we subscribe to.
const APIVersion = "5.199"

// DefaultBaseURL is VK's API endpoint.
const DefaultBaseURL = "https://api.vk.com/method"

// Limits of VK community messages.
const (
	// MaxTextLength is the longest message text, in characters.
	MaxTextLength = 4096
	// MaxButtons is the most buttons of an inline keyboard.
	MaxButtons = 10
	// MaxLabelLength is the longest button label, in characters; longer titles are shortened.
	MaxLabelLength = 40
	// MaxPayloadBytes is the longest button payload VK carries.
	MaxPayloadBytes = 255
	// DefaultMaxDownloadBytes bounds a media file the adapter downloads to upload it to VK.
	DefaultMaxDownloadBytes = 50 << 20
	// DefaultWebhookTitle names the callback server in the community's settings (at most 14
	// characters).
	DefaultWebhookTitle = "botplatform"
)

// Config configures the adapter. The zero value speaks to VK itself.
type Config struct {
	// BaseURL is the API endpoint, DefaultBaseURL when empty; tests give a fake's.
	BaseURL string
	// HTTPClient calls the API and posts uploads; a client with a 15 s timeout when nil.
	HTTPClient *http.Client
	// DownloadClient fetches media by URL before uploading them. When nil the adapter builds
	// one with a 30 s timeout that refuses any address that is not public (loopback, private,
	// link-local, CGNAT: a media URL is customer input; see httpclient.Public), unless
	// AllowPrivateDownloads is set (the local process, tests).
	DownloadClient *http.Client
	// AllowPrivateDownloads lets the default download client reach private addresses.
	AllowPrivateDownloads bool
	// MaxDownloadBytes bounds a downloaded media file (DefaultMaxDownloadBytes when 0).
	MaxDownloadBytes int64
	// WebhookTitle names the callback server in the community's settings (DefaultWebhookTitle
	// when empty).
	WebhookTitle string
	// Now is the clock for updates that carry no time (button presses); time.Now when nil.
	Now func() time.Time
}

// CheckBaseURL reports whether s can be Config.BaseURL: an absolute http or https URL
// without user info, query or fragment (the method name is appended to its path). The rule
// is every adapter's (httpclient.CheckBaseURL).
func CheckBaseURL(s string) error { return httpclient.CheckBaseURL(s) }

// Adapter is the VK channel adapter.
type Adapter struct {
	base     string
	api      *http.Client
	uploads  *http.Client
	download *http.Client
	maxBytes int64
	title    string
	now      func() time.Time
}

var _ channel.Adapter = (*Adapter)(nil)

// New returns the adapter.
func New(cfg Config) *Adapter {
	a := &Adapter{
		base:     strings.TrimRight(cfg.BaseURL, "/"),
		api:      cfg.HTTPClient,
		download: cfg.DownloadClient,
		maxBytes: cfg.MaxDownloadBytes,
		title:    cfg.WebhookTitle,
		now:      cfg.Now,
	}
	if a.base == "" {
		a.base = DefaultBaseURL
	}
	if a.api == nil {
		a.api = &http.Client{Timeout: 15 * time.Second}
	}
	// Uploads share the API client's transport and redirect policy with a longer timeout:
	// a 50 MiB file takes longer than an API call.
	a.uploads = &http.Client{Transport: a.api.Transport, CheckRedirect: a.api.CheckRedirect, Timeout: max(a.api.Timeout, 2*time.Minute)}
	if a.download == nil {
		a.download = downloadClient(cfg.AllowPrivateDownloads)
	}
	if a.maxBytes <= 0 {
		a.maxBytes = DefaultMaxDownloadBytes
	}
	if a.title == "" {
		a.title = DefaultWebhookTitle
	}
	if a.now == nil {
		a.now = time.Now
	}
	return a
}

// downloadClient fetches customer-given media URLs, whole files within 30 s; unless private
// is allowed, it refuses addresses inside the deployment's network (httpclient.PublicTransport).
func downloadClient(private bool) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: httpclient.PublicTransport(private),
		CheckRedirect: httpclient.LimitRedirects(5)}
}

// Kind is channel.VK.
func (a *Adapter) Kind() channel.Kind { return channel.VK }

// Capabilities declares what VK community messages can carry.
func (a *Adapter) Capabilities() channel.Capabilities {
	return channel.Capabilities{
		Kind:                channel.VK,
		ConnectableOverREST: true,
		MessageKinds: []string{channel.MessageKindText, channel.MessageKindMedia, channel.MessageKindButtons,
			channel.MessageKindQuickReplies},
		Media: []channel.MediaLimit{
			{Type: channel.Image, MaxBytes: min(a.maxBytes, maxPhotoBytes), MimeTypes: photoTypes},
			{Type: channel.Document, MaxBytes: a.maxBytes, MimeTypes: docTypes},
		},
		MaxTextLength:    MaxTextLength,
		MaxCaptionLength: MaxTextLength,
		Buttons:          channel.ButtonLimits{Max: MaxButtons, MaxTitleLength: MaxLabelLength, URLButtons: true},
		RateLimit: "20 API requests per second per community access key (a media message takes 4); " +
			"a user must have written to the community or allowed its messages",
		MessagesPerSecond: 15,
	}
}

// Messages of ErrInvalidCredentials at connect.
const (
	notCommunityKey = "the access key is not a community access key"
	noManageRight   = "the access key lacks the community management right"
)

// Credentials is what a client sends to connect a VK community.
type Credentials struct {
	// AccessToken is a community access key with the messages and manage rights.
	AccessToken string `json:"access_token"`
	// GroupID is the community's id (positive).
	GroupID int64 `json:"group_id"`
}

// Credentials returns an empty *Credentials to decode a connect request into.
func (a *Adapter) Credentials() any { return &Credentials{} }

// stored is what the channel keeps sealed: the key, and what Verify and Disconnect need.
type stored struct {
	AccessToken      string `json:"access_token"`
	GroupID          int64  `json:"group_id"`
	ConfirmationCode string `json:"confirmation_code"`
	// ServerID is the callback server registered at Connect (0: none).
	ServerID int64 `json:"server_id,omitempty"`
}

// Settings are a VK channel's public facts.
type Settings struct {
	GroupID    int64  `json:"group_id"`
	Name       string `json:"name"`
	ScreenName string `json:"screen_name"`
}

// Connect checks that the key is group_id's community key, fetches the community's
// confirmation code and, when the deployment has a public URL, registers a callback server
// for message_new and message_event with the webhook secret.
func (a *Adapter) Connect(ctx context.Context, req channel.ConnectRequest) (channel.ConnectResult, error) {
	c, ok := req.Credentials.(*Credentials)
	if !ok || c == nil {
		return channel.ConnectResult{}, fmt.Errorf("vk: credentials of type %T", req.Credentials)
	}
	tok := strings.TrimSpace(c.AccessToken)
	switch {
	case tok == "":
		return channel.ConnectResult{}, &channel.CredentialsError{Field: "access_token", Message: "is required"}
	case len(tok) > 512 || strings.ContainsAny(tok, " \t\r\n"):
		return channel.ConnectResult{}, &channel.CredentialsError{Field: "access_token", Message: "is not a VK access key"}
	case c.GroupID <= 0:
		return channel.ConnectResult{}, &channel.CredentialsError{Field: "group_id", Message: "is required: the community's positive id"}
	}
	// Without group ids, groups.getById answers the key's own community; a user's key gets
	// error 100 (it must name communities).
	var got struct {
		Groups []struct {
			ID         int64  `json:"id"`
			Name       string `json:"name"`
			ScreenName string `json:"screen_name"`
		} `json:"groups"`
	}
	if err := a.call(ctx, tok, "groups.getById", url.Values{}, &got); err != nil {
		return channel.ConnectResult{}, connectError(err, notCommunityKey)
	}
	if len(got.Groups) != 1 {
		return channel.ConnectResult{}, &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: channel.VK,
			Message: notCommunityKey}
	}
	g := got.Groups[0]
	if g.ID != c.GroupID {
		return channel.ConnectResult{}, &channel.CredentialsError{Field: "group_id",
			Message: "is not the community of this access key"}
	}
	gid := strconv.FormatInt(g.ID, 10)
	var code struct {
		Code string `json:"code"`
	}
	if err := a.call(ctx, tok, "groups.getCallbackConfirmationCode", url.Values{"group_id": {gid}}, &code); err != nil {
		return channel.ConnectResult{}, connectError(err, noManageRight)
	}
	st := stored{AccessToken: tok, GroupID: g.ID, ConfirmationCode: code.Code}
	if req.WebhookURL != "" {
		id, err := a.register(ctx, tok, gid, req.WebhookURL, req.WebhookSecret)
		if err != nil {
			return channel.ConnectResult{}, err
		}
		st.ServerID = id
	}
	creds, err := json.Marshal(st)
	if err != nil {
		return channel.ConnectResult{}, err
	}
	settings, err := json.Marshal(Settings{GroupID: g.ID, Name: g.Name, ScreenName: g.ScreenName})
	if err != nil {
		return channel.ConnectResult{}, err
	}
	return channel.ConnectResult{Settings: settings, Credentials: creds, DisplayName: g.Name, LookupKey: gid}, nil
}

// register adds the callback server and subscribes it to the events the runtime handles; a
// server whose settings cannot be set is removed again.
func (a *Adapter) register(ctx context.Context, tok, gid, webhook, secret string) (int64, error) {
	var added struct {
		ServerID int64 `json:"server_id"`
	}
	err := a.call(ctx, tok, "groups.addCallbackServer", url.Values{
		"group_id": {gid}, "url": {webhook}, "title": {a.title}, "secret_key": {SecretKey(secret)},
	}, &added)
	if err != nil {
		return 0, connectError(err, noManageRight)
	}
	sid := strconv.FormatInt(added.ServerID, 10)
	err = a.call(ctx, tok, "groups.setCallbackSettings", url.Values{
		"group_id": {gid}, "server_id": {sid}, "api_version": {APIVersion},
		"message_new": {"1"}, "message_event": {"1"},
	}, nil)
	if err != nil {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		_ = a.call(cleanup, tok, "groups.deleteCallbackServer", url.Values{"group_id": {gid}, "server_id": {sid}}, nil)
		cancel()
		return 0, connectError(err, noManageRight)
	}
	return added.ServerID, nil
}

// Disconnect removes the callback server registered at Connect, so the community stops
// delivering to the channel's webhook and the server does not count against VK's limit of 10
// per community. A channel connected without a public URL has none: nothing to do.
func (a *Adapter) Disconnect(ctx context.Context, conn channel.Connection) error {
	st, err := credentials(conn)
	if err != nil {
		return err
	}
	if st.ServerID == 0 {
		return nil
	}
	err = a.call(ctx, st.AccessToken, "groups.deleteCallbackServer", url.Values{
		"group_id": {strconv.FormatInt(st.GroupID, 10)}, "server_id": {strconv.FormatInt(st.ServerID, 10)},
	}, nil)
	var ve *apiError
	if errors.As(err, &ve) && ve.Code == codeParam {
		return nil // already gone (removed in the community's settings)
	}
	return mapError(err)
}

// SecretKey is the callback server's secret key for a channel's webhook secret: VK takes at
// most 50 latin letters and digits, so the key is the first 50 hex digits of an HMAC of the
// secret (200 bits), and the webhook secret itself never travels.
func SecretKey(webhookSecret string) string {
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write([]byte("vk-callback-secret-key"))
	return hex.EncodeToString(m.Sum(nil))[:50]
}

func credentials(conn channel.Connection) (stored, error) {
	var st stored
	if err := json.Unmarshal(conn.Credentials, &st); err != nil || st.AccessToken == "" || st.GroupID <= 0 {
		return stored{}, &channel.Error{Kind: channel.ErrInvalidCredentials, Provider: channel.VK,
			Message: "the channel's stored credentials are unreadable"}
	}
	return st, nil
}

// apiError is VK's error object.
type apiError struct {
	Code int    `json:"error_code"`
	Msg  string `json:"error_msg"`
}

func (e *apiError) Error() string { return fmt.Sprintf("vk: error %d: %s", e.Code, e.Msg) }

// httpError is a failure below the API: a status other than 200.
type httpError struct {
	Status     int
	RetryAfter time.Duration
}

func (e *httpError) Error() string { return fmt.Sprintf("vk: HTTP %d", e.Status) }

// maxResponseBytes bounds an API answer read into memory.
const maxResponseBytes = 4 << 20

// call invokes method with params and decodes the "response" member into out (nil: ignore).
// The access key travels in the form body, never in the URL, so that no error (a url.Error
// names the URL) and no proxy log can carry it.
func (a *Adapter) call(ctx context.Context, token, method string, params url.Values, out any) error {
	form := url.Values{}
	for k, v := range params {
		form[k] = v
	}
	form.Set("access_token", token)
	form.Set("v", APIVersion)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/"+method, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	return a.do(req, out)
}

// do sends an API or upload request and decodes VK's answer.
func (a *Adapter) do(req *http.Request, out any) error {
	res, err := a.api.Do(req)
	if err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: redact(err)}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: redact(err)}
	}
	if res.StatusCode != http.StatusOK {
		return &httpError{Status: res.StatusCode, RetryAfter: retryAfter(res)}
	}
	var env struct {
		Response json.RawMessage `json:"response"`
		Error    *apiError       `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "the answer is not JSON"}
	}
	if env.Error != nil {
		return env.Error
	}
	if out == nil {
		return nil
	}
	if len(env.Response) == 0 {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "the answer has no response"}
	}
	if err := json.Unmarshal(env.Response, out); err != nil {
		return &channel.Error{Kind: channel.ErrUnavailable, Provider: channel.VK, Message: "unexpected answer: " + err.Error()}
	}
	return nil
}

// redact describes a transport failure without the URL (an upload URL carries VK's
// one-time upload credentials), and a timeout as just that.
func redact(err error) string {
	err = httpclient.WithoutURL(err)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return err.Error()
}

// retryAfter is the wait a non-200 answer asks for in its Retry-After header (0: none).
func retryAfter(res *http.Response) time.Duration {
	return httpclient.RetryAfter(res.Header.Get("Retry-After"), time.Now())
}
