package vk_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/vk"
	fakevk "github.com/botplatform/api/tests/fakes/vk"
)

const secret = "wh-secret_of-the-channel-0123456789abcdefghij"

func newAdapter(t *testing.T) (*vk.Adapter, *fakevk.Server) {
	t.Helper()
	f := fakevk.New(t)
	a := vk.New(vk.Config{BaseURL: f.BaseURL(), HTTPClient: &http.Client{Timeout: 5 * time.Second},
		AllowPrivateDownloads: true, Now: func() time.Time { return time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC) }})
	return a, f
}

func connect(t *testing.T, a *vk.Adapter, webhook string) channel.Connection {
	t.Helper()
	res, err := a.Connect(context.Background(), channel.ConnectRequest{ChannelID: "ch_1",
		Credentials: &vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID},
		WebhookURL:  webhook, WebhookSecret: secret})
	require.NoError(t, err)
	return channel.Connection{ChannelID: "ch_1", BotID: "bot_1", Settings: res.Settings, Credentials: res.Credentials, WebhookSecret: secret}
}

func kindOf(err error) error {
	for _, k := range []error{channel.ErrRateLimited, channel.ErrBlocked, channel.ErrInvalidCredentials,
		channel.ErrOutsideWindow, channel.ErrRejected, channel.ErrUnavailable, channel.ErrUnauthenticWebhook} {
		if errors.Is(err, k) {
			return k
		}
	}
	return err
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	a, _ := newAdapter(t)
	c := a.Capabilities()
	assert.Equal(t, channel.VK, a.Kind())
	assert.Equal(t, channel.VK, c.Kind)
	assert.True(t, c.ConnectableOverREST)
	assert.Equal(t, 4096, c.MaxTextLength)
	assert.Equal(t, channel.ButtonLimits{Max: 10, MaxTitleLength: 40, URLButtons: true, URLButtonAlone: false}, c.Buttons)
	assert.Zero(t, c.SessionWindowSeconds)
	assert.False(t, c.TemplateOutsideWindow)
	require.Len(t, c.Media, 2)
	assert.Equal(t, channel.Image, c.Media[0].Type)
	assert.Equal(t, int64(50<<20), c.Media[0].MaxBytes)
	assert.IsType(t, &vk.Credentials{}, a.Credentials())
	assert.Equal(t, []string{"text", "media", "buttons", "quick_replies"}, c.MessageKinds)
}

func TestConnectWithoutPublicURL(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	res, err := a.Connect(context.Background(), channel.ConnectRequest{ChannelID: "ch_1",
		Credentials: &vk.Credentials{AccessToken: " " + fakevk.Token + " ", GroupID: fakevk.GroupID}, WebhookSecret: secret})
	require.NoError(t, err)
	assert.JSONEq(t, `{"group_id":229000111,"name":"Demo Coffee","screen_name":"democoffee"}`, string(res.Settings))
	assert.Equal(t, "Demo Coffee", res.DisplayName)
	assert.Equal(t, "229000111", res.LookupKey, "one bot per community")
	var creds map[string]any
	require.NoError(t, json.Unmarshal(res.Credentials, &creds))
	assert.Equal(t, fakevk.Token, creds["access_token"], "trimmed")
	assert.Equal(t, fakevk.ConfirmationCode, creds["confirmation_code"])
	assert.NotContains(t, string(res.Settings), fakevk.Token)
	assert.Empty(t, f.CallbackServers(fakevk.GroupID), "nothing registered without a public URL")
	for _, c := range f.Calls() {
		assert.Equal(t, vk.APIVersion, c.Params.Get("v"))
	}
}

func TestConnectRegistersCallbackServer(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	conn := connect(t, a, "https://api.example.com/webhooks/vk/ch_1")
	servers := f.CallbackServers(fakevk.GroupID)
	require.Len(t, servers, 1)
	s := servers[0]
	assert.Equal(t, "https://api.example.com/webhooks/vk/ch_1", s.URL)
	assert.Equal(t, vk.DefaultWebhookTitle, s.Title)
	assert.Equal(t, vk.SecretKey(secret), s.SecretKey)
	assert.Len(t, s.SecretKey, 50)
	assert.NotContains(t, s.SecretKey, secret, "the webhook secret itself never travels")
	assert.Equal(t, map[string]string{"api_version": "5.199", "message_new": "1", "message_event": "1"}, s.Settings)

	// Disconnect removes the server; a second time finds it gone and is fine.
	require.NoError(t, a.Disconnect(context.Background(), conn))
	assert.Empty(t, f.CallbackServers(fakevk.GroupID))
	require.NoError(t, a.Disconnect(context.Background(), conn))
}

func TestDisconnectWithoutServer(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	conn := connect(t, a, "")
	require.NoError(t, a.Disconnect(context.Background(), conn))
	assert.Empty(t, f.CallsOf("groups.deleteCallbackServer"))
}

func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	other := fakevk.Group{ID: 1234, Name: "Other", ScreenName: "other", Token: "vk1.a.other-community-key", ConfirmationCode: "c0de"}
	tests := []struct {
		name    string
		creds   vk.Credentials
		webhook string
		setup   func(f *fakevk.Server)
		field   string // a CredentialsError on this field
		kind    error
	}{
		{name: "no key", creds: vk.Credentials{GroupID: fakevk.GroupID}, field: "access_token"},
		{name: "key with spaces", creds: vk.Credentials{AccessToken: "a b", GroupID: fakevk.GroupID}, field: "access_token"},
		{name: "no group", creds: vk.Credentials{AccessToken: fakevk.Token}, field: "group_id"},
		{name: "negative group", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: -5}, field: "group_id"},
		{name: "unknown key (5)", creds: vk.Credentials{AccessToken: "vk1.a.nope", GroupID: fakevk.GroupID}, kind: channel.ErrInvalidCredentials},
		{name: "a user's key (100)", creds: vk.Credentials{AccessToken: fakevk.UserToken, GroupID: fakevk.GroupID}, kind: channel.ErrInvalidCredentials},
		{name: "another community's key", creds: vk.Credentials{AccessToken: other.Token, GroupID: fakevk.GroupID},
			setup: func(f *fakevk.Server) { f.AddGroup(other) }, field: "group_id"},
		{name: "no manage right (15)", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID},
			setup: func(f *fakevk.Server) { f.FailNext("groups.getCallbackConfirmationCode", fakevk.ErrAccessDenied, "") }, kind: channel.ErrInvalidCredentials},
		{name: "group auth failed (27)", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID},
			setup: func(f *fakevk.Server) { f.FailNext("groups.getById", fakevk.ErrGroupAuth, "") }, kind: channel.ErrInvalidCredentials},
		{name: "rate limited (6)", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID},
			setup: func(f *fakevk.Server) { f.RateLimit(1) }, kind: channel.ErrRateLimited},
		{name: "VK down (HTTP 502)", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID},
			setup: func(f *fakevk.Server) { f.Unavailable(1) }, kind: channel.ErrUnavailable},
		{name: "internal error (10)", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID},
			setup: func(f *fakevk.Server) { f.FailNext("groups.getById", fakevk.ErrInternal, "") }, kind: channel.ErrUnavailable},
		{name: "too many servers (2000)", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID}, webhook: "https://x.example/webhooks/vk/ch_1",
			setup: func(f *fakevk.Server) { f.FailNext("groups.addCallbackServer", fakevk.ErrServersLimit, "") }, kind: channel.ErrRejected},
		{name: "settings refused", creds: vk.Credentials{AccessToken: fakevk.Token, GroupID: fakevk.GroupID}, webhook: "https://x.example/webhooks/vk/ch_1",
			setup: func(f *fakevk.Server) { f.FailNext("groups.setCallbackSettings", fakevk.ErrAccessDenied, "") }, kind: channel.ErrInvalidCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, f := newAdapter(t)
			if tt.setup != nil {
				tt.setup(f)
			}
			creds := tt.creds
			_, err := a.Connect(context.Background(), channel.ConnectRequest{ChannelID: "ch_1", Credentials: &creds,
				WebhookURL: tt.webhook, WebhookSecret: secret})
			require.Error(t, err)
			if tt.field != "" {
				var ce *channel.CredentialsError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tt.field, ce.Field)
			} else {
				assert.Equal(t, tt.kind, kindOf(err), "%v", err)
			}
			for _, tok := range []string{fakevk.Token, fakevk.UserToken, other.Token, secret} {
				assert.NotContains(t, err.Error(), tok, "no credential in an error")
			}
			assert.Empty(t, f.CallbackServers(fakevk.GroupID), "no callback server left behind")
		})
	}
}

func TestSendText(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	conn := connect(t, a, "")
	id, err := a.Send(context.Background(), conn, "777", channel.Message{Text: "Привет!"})
	require.NoError(t, err)
	id2, err := a.Send(context.Background(), conn, "777", channel.Message{Text: "Привет!"})
	require.NoError(t, err)
	assert.NotEqual(t, id, id2, "two sends are two messages")
	msgs := f.Messages()
	require.Len(t, msgs, 2)
	assert.Equal(t, id, "1001")
	assert.Equal(t, int64(777), msgs[0].PeerID)
	assert.Equal(t, "Привет!", msgs[0].Text)
	assert.Nil(t, msgs[0].Keyboard)
	assert.NotZero(t, msgs[0].RandomID)
	assert.NotEqual(t, msgs[0].RandomID, msgs[1].RandomID)

	// 4096 characters (not bytes) pass; one more is refused before calling VK.
	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: strings.Repeat("я", 4096)})
	require.NoError(t, err)
	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: strings.Repeat("я", 4097)})
	assert.ErrorIs(t, err, channel.ErrRejected)
	assert.Len(t, f.Messages(), 3)
}

func TestSendButtons(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	conn := connect(t, a, "")
	_, err := a.Send(context.Background(), conn, "777", channel.Message{Text: "Pick one", Buttons: []channel.Button{
		{Title: "Espresso", Payload: "buy:espresso"},
		{Title: strings.Repeat("Long title ", 6), Payload: "long"},
		{Title: "Menu", URL: "https://example.com/menu"},
	}})
	require.NoError(t, err)
	msgs := f.Messages()
	require.Len(t, msgs, 1)
	var kb struct {
		Inline  bool `json:"inline"`
		Buttons [][]struct {
			Action map[string]string `json:"action"`
			Color  string            `json:"color"`
		} `json:"buttons"`
	}
	require.NoError(t, json.Unmarshal(msgs[0].Keyboard, &kb))
	assert.True(t, kb.Inline)
	require.Len(t, kb.Buttons, 3, "one button per row up to six")
	assert.Equal(t, map[string]string{"type": "text", "label": "Espresso", "payload": `{"p":"buy:espresso"}`}, kb.Buttons[0][0].Action)
	assert.Len(t, []rune(kb.Buttons[1][0].Action["label"]), 40, "shortened to VK's 40 characters")
	assert.True(t, strings.HasSuffix(kb.Buttons[1][0].Action["label"], "…"))
	assert.Equal(t, map[string]string{"type": "open_link", "label": "Menu", "link": "https://example.com/menu"}, kb.Buttons[2][0].Action)

	// Ten buttons fit in VK's six rows, two to a row; eleven do not.
	var ten []channel.Button
	for i := range 10 {
		ten = append(ten, channel.Button{Title: "B", Payload: string(rune('a' + i))})
	}
	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: "Ten", Buttons: ten})
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(f.Messages()[1].Keyboard, &kb))
	assert.Len(t, kb.Buttons, 5)
	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: "Eleven", Buttons: append(ten, channel.Button{Title: "X", Payload: "x"})})
	assert.ErrorIs(t, err, channel.ErrRejected)
	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: "Bad", Buttons: []channel.Button{{Title: "X"}}})
	assert.ErrorIs(t, err, channel.ErrRejected)
	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: "Bad", Buttons: []channel.Button{{Title: "X", URL: "javascript:alert(1)"}}})
	assert.ErrorIs(t, err, channel.ErrRejected)
	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: "Bad", Buttons: []channel.Button{{Title: "X", Payload: strings.Repeat("x", 250)}}})
	assert.ErrorIs(t, err, channel.ErrRejected)
	assert.Len(t, f.Messages(), 2)
}

// Quick replies are a one-time keyboard under the input field (not inline), one button per
// row; they carry no links.
func TestSendQuickReplies(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	conn := connect(t, a, "")
	var ten []channel.Button
	for i := range 10 {
		ten = append(ten, channel.Button{Title: "B", Payload: string(rune('a' + i))})
	}
	_, err := a.Send(context.Background(), conn, "777", channel.Message{Text: "Pick", QuickReplies: true, Buttons: ten})
	require.NoError(t, err)
	msgs := f.Messages()
	require.Len(t, msgs, 1)
	var kb struct {
		OneTime *bool `json:"one_time"`
		Inline  *bool `json:"inline"`
		Buttons [][]struct {
			Action map[string]string `json:"action"`
		} `json:"buttons"`
	}
	require.NoError(t, json.Unmarshal(msgs[0].Keyboard, &kb))
	require.NotNil(t, kb.OneTime)
	require.NotNil(t, kb.Inline)
	assert.True(t, *kb.OneTime)
	assert.False(t, *kb.Inline)
	require.Len(t, kb.Buttons, 10, "one per row: a keyboard has 10 rows")
	assert.Equal(t, map[string]string{"type": "text", "label": "B", "payload": `{"p":"a"}`}, kb.Buttons[0][0].Action)

	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: "Pick", QuickReplies: true,
		Buttons: []channel.Button{{Title: "Menu", URL: "https://example.com/menu"}}})
	assert.ErrorIs(t, err, channel.ErrRejected, "quick replies cannot open links")
	assert.Len(t, f.Messages(), 1)
}

// A send with a key has a random_id derived from the channel and the key: retried after its
// answer was lost, it is delivered once (VK de-duplicates the random_id), and the retry gets
// the first message's id. Another key, or another channel, is another random_id.
func TestSendWithKeyIsDeliveredOnce(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	conn := connect(t, a, "")
	m := channel.Message{Text: "once", Key: "exe_01/2/hi"}
	f.LoseAnswers("messages.send", 1)
	_, err := a.Send(context.Background(), conn, "777", m)
	require.Error(t, err)
	assert.True(t, channel.Retryable(err), "a lost answer is worth retrying: %v", err)
	require.Len(t, f.Messages(), 1, "VK acted before the answer was lost")

	id, err := a.Send(context.Background(), conn, "777", m)
	require.NoError(t, err)
	msgs := f.Messages()
	require.Len(t, msgs, 1, "the retry is not delivered again")
	assert.Equal(t, "1001", id, "the first message's id")
	calls := f.CallsOf("messages.send")
	require.Len(t, calls, 2)
	assert.Equal(t, calls[0].Params.Get("random_id"), calls[1].Params.Get("random_id"))
	rid := vk.RandomID(conn.ChannelID, m.Key)
	assert.Equal(t, rid, msgs[0].RandomID)
	assert.Positive(t, rid)

	_, err = a.Send(context.Background(), conn, "777", channel.Message{Text: "once", Key: "exe_01/3/hi"})
	require.NoError(t, err)
	assert.Len(t, f.Messages(), 2, "another key is another message")
	assert.NotEqual(t, rid, vk.RandomID("ch_other", m.Key), "the channel is part of it")
	assert.NotEqual(t, rid, vk.RandomID(conn.ChannelID, "exe_01/3/hi"))
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(f *fakevk.Server)
		user  string
		kind  error
		code  string
		after time.Duration
	}{
		{"too many requests (6)", func(f *fakevk.Server) { f.RateLimit(1) }, "777", channel.ErrRateLimited, "6", time.Second},
		{"flood control (9)", func(f *fakevk.Server) { f.FailNext("messages.send", fakevk.ErrFlood, "") }, "777", channel.ErrRateLimited, "9", time.Minute},
		{"not allowed by the user (901)", func(f *fakevk.Server) { f.Block(777, false) }, "777", channel.ErrBlocked, "901", 0},
		{"privacy settings (902)", func(f *fakevk.Server) { f.Block(777, true) }, "777", channel.ErrBlocked, "902", 0},
		{"revoked key (5)", func(f *fakevk.Server) { f.RevokeToken(fakevk.Token) }, "777", channel.ErrInvalidCredentials, "5", 0},
		{"group auth failed (27)", func(f *fakevk.Server) { f.FailNext("messages.send", fakevk.ErrGroupAuth, "") }, "777", channel.ErrInvalidCredentials, "27", 0},
		{"access denied (15)", func(f *fakevk.Server) { f.FailNext("messages.send", fakevk.ErrAccessDenied, "") }, "777", channel.ErrInvalidCredentials, "15", 0},
		{"invalid parameter (100)", func(f *fakevk.Server) { f.FailNext("messages.send", fakevk.ErrParam, "") }, "777", channel.ErrRejected, "100", 0},
		{"too long (914)", func(f *fakevk.Server) { f.FailNext("messages.send", fakevk.ErrTooLong, "") }, "777", channel.ErrRejected, "914", 0},
		{"internal (10)", func(f *fakevk.Server) { f.FailNext("messages.send", fakevk.ErrInternal, "") }, "777", channel.ErrUnavailable, "10", 0},
		{"unknown (1)", func(f *fakevk.Server) { f.FailNext("messages.send", fakevk.ErrUnknown, "") }, "777", channel.ErrUnavailable, "1", 0},
		{"HTTP 502", func(f *fakevk.Server) { f.Unavailable(1) }, "777", channel.ErrUnavailable, "HTTP 502", 0},
		{"not a user id", nil, "@durov", channel.ErrRejected, "", 0},
		{"a community id", nil, "-5", channel.ErrRejected, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, f := newAdapter(t)
			conn := connect(t, a, "")
			if tt.setup != nil {
				tt.setup(f)
			}
			_, err := a.Send(context.Background(), conn, tt.user, channel.Message{Text: "hi"})
			require.Error(t, err)
			assert.Equal(t, tt.kind, kindOf(err), "%v", err)
			var ce *channel.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, channel.VK, ce.Provider)
			assert.Equal(t, tt.code, ce.Code)
			assert.Equal(t, tt.after, ce.RetryAfter)
			assert.Equal(t, tt.kind == channel.ErrRateLimited || tt.kind == channel.ErrUnavailable, channel.Retryable(err))
			assert.NotContains(t, err.Error(), fakevk.Token)
			assert.Empty(t, f.Messages())
		})
	}
}

func TestSendHTTPRateLimitWithRetryAfter(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	t.Cleanup(srv.Close)
	a := vk.New(vk.Config{BaseURL: srv.URL + "/method"})
	creds, _ := json.Marshal(map[string]any{"access_token": "k", "group_id": 1})
	_, err := a.Send(context.Background(), channel.Connection{Credentials: creds}, "1", channel.Message{Text: "x"})
	var ce *channel.Error
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, channel.ErrRateLimited)
	assert.Equal(t, 7*time.Second, ce.RetryAfter)
}

func TestSendUnreadableCredentials(t *testing.T) {
	t.Parallel()
	a, _ := newAdapter(t)
	_, err := a.Send(context.Background(), channel.Connection{Credentials: json.RawMessage(`{}`)}, "1", channel.Message{Text: "x"})
	assert.ErrorIs(t, err, channel.ErrInvalidCredentials)
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// mediaServer serves files by path: /cat.png (a PNG without a content type), /doc.pdf, /fake.png
// (text), /big.png (too large), /missing (404), /down (503).
func mediaServer(t *testing.T) *httptest.Server {
	t.Helper()
	img := pngBytes(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cat.png":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(img)
		case "/doc.pdf":
			w.Header().Set("Content-Type", "application/pdf")
			io.WriteString(w, "%PDF-1.4\n%fake\n")
		case "/fake.png":
			w.Header().Set("Content-Type", "text/plain")
			io.WriteString(w, "not an image")
		case "/big.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(append(img, make([]byte, 2048)...))
		case "/down":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSendPhoto(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	media := mediaServer(t)
	conn := connect(t, a, "")
	_, err := a.Send(context.Background(), conn, "777", channel.Message{Media: &channel.Media{Type: channel.Image, URL: media.URL + "/cat.png", Caption: "Our cat"}})
	require.NoError(t, err)
	msgs := f.Messages()
	require.Len(t, msgs, 1)
	assert.Equal(t, "Our cat", msgs[0].Text)
	assert.Regexp(t, `^photo-229000111_\d+_[0-9a-f]+$`, msgs[0].Attachment)
	ups := f.Uploads()
	require.Len(t, ups, 1)
	assert.Equal(t, "photo", ups[0].Kind)
	assert.Equal(t, "cat.png", ups[0].Filename)
	assert.Equal(t, "image/png", ups[0].ContentType, "sniffed from the bytes")
	assert.Equal(t, pngBytes(t), ups[0].Bytes)
	upload := f.CallsOf("photos.getMessagesUploadServer")
	require.Len(t, upload, 1)
	assert.Equal(t, "777", upload[0].Params.Get("peer_id"))
}

func TestSendDocument(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	media := mediaServer(t)
	conn := connect(t, a, "")
	_, err := a.Send(context.Background(), conn, "777", channel.Message{Media: &channel.Media{Type: channel.Document, URL: media.URL + "/doc.pdf"}})
	require.NoError(t, err)
	msgs := f.Messages()
	require.Len(t, msgs, 1)
	assert.Empty(t, msgs[0].Text)
	assert.Regexp(t, `^doc-229000111_\d+$`, msgs[0].Attachment)
	saves := f.CallsOf("docs.save")
	require.Len(t, saves, 1)
	assert.Equal(t, "doc.pdf", saves[0].Params.Get("title"))
}

func TestSendMediaRefusals(t *testing.T) {
	t.Parallel()
	media := mediaServer(t)
	tests := []struct {
		name string
		m    channel.Message
		cfg  func(*vk.Config)
		kind error
	}{
		{"not an image", channel.Message{Media: &channel.Media{Type: channel.Image, URL: media.URL + "/fake.png"}}, nil, channel.ErrRejected},
		{"too large", channel.Message{Media: &channel.Media{Type: channel.Image, URL: media.URL + "/big.png"}},
			func(c *vk.Config) { c.MaxDownloadBytes = 1024 }, channel.ErrRejected},
		{"404", channel.Message{Media: &channel.Media{Type: channel.Image, URL: media.URL + "/missing"}}, nil, channel.ErrRejected},
		{"503", channel.Message{Media: &channel.Media{Type: channel.Document, URL: media.URL + "/down"}}, nil, channel.ErrUnavailable},
		{"private address", channel.Message{Media: &channel.Media{Type: channel.Image, URL: media.URL + "/cat.png"}},
			func(c *vk.Config) { c.AllowPrivateDownloads = false }, channel.ErrRejected},
		{"not http", channel.Message{Media: &channel.Media{Type: channel.Image, URL: "file:///etc/passwd"}}, nil, channel.ErrRejected},
		{"video", channel.Message{Media: &channel.Media{Type: channel.Video, URL: media.URL + "/v.mp4"}}, nil, channel.ErrRejected},
		{"audio", channel.Message{Media: &channel.Media{Type: channel.Audio, URL: media.URL + "/a.mp3"}}, nil, channel.ErrRejected},
		{"media with text", channel.Message{Text: "x", Media: &channel.Media{Type: channel.Image, URL: media.URL + "/cat.png"}}, nil, channel.ErrRejected},
		{"template", channel.Message{Template: &channel.Template{Name: "hello", Language: "en"}}, nil, channel.ErrRejected},
		{"empty", channel.Message{}, nil, channel.ErrRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := fakevk.New(t)
			cfg := vk.Config{BaseURL: f.BaseURL(), AllowPrivateDownloads: true}
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			a := vk.New(cfg)
			conn := connect(t, a, "")
			_, err := a.Send(context.Background(), conn, "777", tt.m)
			assert.Equal(t, tt.kind, kindOf(err), "%v", err)
			assert.Empty(t, f.Messages())
		})
	}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	a, _ := newAdapter(t)
	conn := connect(t, a, "https://api.example.com/webhooks/vk/ch_1")
	good := fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, ID: 5, Text: "hi"})
	sign := func(e fakevk.Event, s string) []byte { e.Secret = s; return e.JSON() }
	r := httptest.NewRequest(http.MethodPost, "/webhooks/vk/ch_1", nil)

	require.NoError(t, a.Verify(r, sign(good, vk.SecretKey(secret)), conn))
	for name, body := range map[string][]byte{
		"forged secret":       sign(good, vk.SecretKey("another-secret")),
		"the raw secret":      sign(good, secret),
		"no secret":           good.JSON(),
		"another community":   sign(fakevk.NewMessage(1234, fakevk.InMessage{FromID: 777, Text: "hi"}), vk.SecretKey(secret)),
		"not JSON":            []byte("type=message_new"),
		"not an event":        []byte(`{"a":1}`),
		"secret of a prefix":  sign(good, vk.SecretKey(secret)[:10]),
		"secret with a tail":  sign(good, vk.SecretKey(secret)+"0"),
		"confirmation forged": sign(fakevk.Confirmation(fakevk.GroupID), "nope"),
	} {
		err := a.Verify(r, body, conn)
		assert.ErrorIs(t, err, channel.ErrUnauthenticWebhook, name)
	}
	noSecret := conn
	noSecret.WebhookSecret = ""
	assert.ErrorIs(t, a.Verify(r, sign(good, vk.SecretKey("")), noSecret), channel.ErrUnauthenticWebhook)
}

func TestConfirmationResponse(t *testing.T) {
	t.Parallel()
	a, _ := newAdapter(t)
	conn := connect(t, a, "https://api.example.com/webhooks/vk/ch_1")
	conf := fakevk.Confirmation(fakevk.GroupID)
	conf.Secret = vk.SecretKey(secret)
	code, is, err := vk.ConfirmationResponse(conf.JSON(), conn)
	require.NoError(t, err)
	assert.True(t, is)
	assert.Equal(t, fakevk.ConfirmationCode, code)

	conf.Secret = "forged"
	code, is, err = vk.ConfirmationResponse(conf.JSON(), conn)
	assert.True(t, is)
	assert.Empty(t, code)
	assert.ErrorIs(t, err, channel.ErrUnauthenticWebhook)

	other := fakevk.Confirmation(99)
	other.Secret = vk.SecretKey(secret)
	_, is, err = vk.ConfirmationResponse(other.JSON(), conn)
	assert.True(t, is)
	assert.ErrorIs(t, err, channel.ErrUnauthenticWebhook)

	msg := fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, Text: "hi"})
	code, is, err = vk.ConfirmationResponse(msg.JSON(), conn)
	assert.NoError(t, err)
	assert.False(t, is)
	assert.Empty(t, code)
}

func TestParse(t *testing.T) {
	t.Parallel()
	a, _ := newAdapter(t)
	at := time.Date(2026, 11, 20, 9, 30, 0, 0, time.UTC)

	text := fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, ID: 5, Text: "Hello", Date: at, LangID: 3})
	got, err := a.Parse(text.JSON())
	require.NoError(t, err)
	assert.Equal(t, []channel.Inbound{{UpdateID: text.EventID, UserID: "777", Locale: "en", Text: "Hello", At: at}}, got)
	again, err := a.Parse(text.JSON())
	require.NoError(t, err)
	assert.Equal(t, got[0].UpdateID, again[0].UpdateID, "a redelivery has the same update id")

	pressed := fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, ID: 6, Text: "Espresso", Payload: `{"p":"buy:espresso"}`, Date: at})
	got, err = a.Parse(pressed.JSON())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "buy:espresso", got[0].Payload)
	assert.Empty(t, got[0].Text, "a press is a payload, not a text")
	assert.Equal(t, "ru", got[0].Locale)

	start := fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, ID: 1, Text: "Начать", Payload: `{"command":"start"}`, Date: at})
	got, err = a.Parse(start.JSON())
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "/start", got[0].Text)
	assert.Empty(t, got[0].Payload)

	cb := fakevk.ButtonEvent(fakevk.GroupID, 777, `{"p":"menu"}`)
	got, err = a.Parse(cb.JSON())
	require.NoError(t, err)
	assert.Equal(t, []channel.Inbound{{UpdateID: cb.EventID, UserID: "777", Payload: "menu",
		At: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}}, got)

	// Nothing for the runtime: chats, communities, other events, confirmation, empty messages.
	chat := fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, Text: "in a chat"})
	var obj map[string]map[string]any
	require.NoError(t, json.Unmarshal(chat.Object, &obj))
	obj["message"]["peer_id"] = 2000000001
	chat.Object, _ = json.Marshal(obj)
	for name, e := range map[string]fakevk.Event{
		"group chat":      chat,
		"a community":     fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: -5, Text: "hi"}),
		"group_join":      fakevk.Other(fakevk.GroupID, "group_join", map[string]any{"user_id": 777, "join_type": "join"}),
		"message_reply":   fakevk.Other(fakevk.GroupID, "message_reply", map[string]any{"id": 9, "text": "our own"}),
		"confirmation":    fakevk.Confirmation(fakevk.GroupID),
		"sticker":         fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777}),
		"foreign payload": fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, Payload: `{"button":"1"}`}),
	} {
		got, err := a.Parse(e.JSON())
		assert.NoError(t, err, name)
		assert.Empty(t, got, name)
	}
	_, err = a.Parse([]byte("nope"))
	assert.Error(t, err)
	_, err = a.Parse([]byte(`{"type":"message_new","group_id":1,"object":{"id":5,"text":"pre-5.103 shape"}}`))
	assert.Error(t, err, "an old API version's shape is an error, not silence")
}

// TestCallbackRoundTrip plays VK's side with the fake: it confirms the callback server
// registered at connect (answered with ConfirmationResponse) and delivers a message, which a
// webhook built on Verify and Parse accepts; a forged delivery is refused.
func TestCallbackRoundTrip(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	var conn channel.Connection
	var updates []channel.Inbound
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if code, ok, err := vk.ConfirmationResponse(body, conn); ok {
			if err != nil {
				http.Error(w, "unauthentic", http.StatusUnauthorized)
				return
			}
			io.WriteString(w, code)
			return
		}
		if err := a.Verify(r, body, conn); err != nil {
			http.Error(w, "unauthentic", http.StatusUnauthorized)
			return
		}
		in, err := a.Parse(body)
		if err != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		updates = append(updates, in...)
		io.WriteString(w, vk.Acknowledgement)
	}))
	t.Cleanup(hook.Close)
	conn = connect(t, a, hook.URL+"/webhooks/vk/ch_1")

	servers := f.CallbackServers(fakevk.GroupID)
	require.Len(t, servers, 1)
	ans, err := f.Confirm(fakevk.GroupID, servers[0].ID)
	require.NoError(t, err)
	assert.Equal(t, fakevk.ConfirmationCode, ans.Body)
	assert.Equal(t, "ok", f.CallbackServers(fakevk.GroupID)[0].Status)

	answers, err := f.Deliver(fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, ID: 3, Text: "hi"}))
	require.NoError(t, err)
	require.Len(t, answers, 1)
	assert.Equal(t, fakevk.Answer{Status: 200, Body: "ok"}, answers[0])
	require.Len(t, updates, 1)
	assert.Equal(t, "hi", updates[0].Text)

	forged, err := fakevk.Post(hook.URL+"/webhooks/vk/ch_1", "guessed", fakevk.NewMessage(fakevk.GroupID, fakevk.InMessage{FromID: 777, Text: "x"}), 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusUnauthorized, forged.Status)
	assert.Len(t, updates, 1)
}

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	a := vk.New(vk.Config{BaseURL: srv.URL + "/method", HTTPClient: &http.Client{Timeout: time.Second}})
	creds, _ := json.Marshal(map[string]any{"access_token": fakevk.Token, "group_id": fakevk.GroupID})
	_, err := a.Send(context.Background(), channel.Connection{Credentials: creds}, "1", channel.Message{Text: "x"})
	assert.ErrorIs(t, err, channel.ErrUnavailable)
	assert.True(t, channel.Retryable(err))
	assert.NotContains(t, err.Error(), fakevk.Token)
	assert.NotContains(t, err.Error(), srv.URL, "no URL in the error: upload URLs carry VK's credentials")

	_, err = a.Connect(context.Background(), channel.ConnectRequest{Credentials: &vk.Credentials{AccessToken: fakevk.Token, GroupID: 1}})
	assert.ErrorIs(t, err, channel.ErrUnavailable)
}

func TestSlowVKTimesOut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(time.Second):
		}
	}))
	t.Cleanup(srv.Close)
	a := vk.New(vk.Config{BaseURL: srv.URL + "/method", HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}})
	creds, _ := json.Marshal(map[string]any{"access_token": "k", "group_id": 1})
	_, err := a.Send(context.Background(), channel.Connection{Credentials: creds}, "1", channel.Message{Text: "x"})
	assert.ErrorIs(t, err, channel.ErrUnavailable)
	assert.Contains(t, err.Error(), "timeout")
}

func TestCheckBaseURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"https://api.vk.com/method", "http://127.0.0.1:8081/method"} {
		assert.NoError(t, vk.CheckBaseURL(ok), ok)
	}
	for _, bad := range []string{"", "api.vk.com/method", "ftp://x/method", "https://u:p@x/method", "https://x/method?v=1", "https://x/method#f"} {
		assert.Error(t, vk.CheckBaseURL(bad), bad)
	}
}
