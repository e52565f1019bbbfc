package telegram_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/telegram"
	fake "github.com/botplatform/api/tests/fakes/telegram"
)

var fixedNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func newAdapter(t *testing.T) (*telegram.Adapter, *fake.Server, fake.Bot) {
	t.Helper()
	f := fake.New(t)
	bot := f.AddBot("demo_bot")
	a := telegram.New(telegram.Config{BaseURL: f.URL, HTTPClient: &http.Client{Timeout: 2 * time.Second},
		Now: func() time.Time { return fixedNow }})
	return a, f, bot
}

func conn(t *testing.T, token, base string) channel.Connection {
	t.Helper()
	creds, err := json.Marshal(telegram.Credentials{Token: token, APIBaseURL: base})
	require.NoError(t, err)
	return channel.Connection{ChannelID: "ch_test", BotID: "bot_test", Credentials: creds, WebhookSecret: "s3cret_-token"}
}

// noToken fails when err's text holds the bot token.
func noToken(t *testing.T, err error, token string) {
	t.Helper()
	if err != nil {
		assert.NotContains(t, err.Error(), token)
		assert.NotContains(t, err.Error(), strings.SplitN(token, ":", 2)[1])
	}
}

func kindOf(err error) error {
	var e *channel.Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return nil
}

func TestConnectChecksTokenAndRegistersWebhook(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	res, err := a.Connect(context.Background(), channel.ConnectRequest{ChannelID: "ch_1",
		Credentials: &telegram.Credentials{Token: bot.Token}, WebhookURL: "https://api.example.com/webhooks/telegram/ch_1",
		WebhookSecret: "abcDEF012_-xyz"})
	require.NoError(t, err)
	assert.Equal(t, "@demo_bot", res.DisplayName)
	assert.JSONEq(t, `{"bot_id":`+jsonInt(bot.ID)+`,"username":"demo_bot"}`, string(res.Settings))
	assert.Equal(t, jsonInt(bot.ID), res.LookupKey)
	var stored telegram.Credentials
	require.NoError(t, json.Unmarshal(res.Credentials, &stored))
	assert.Equal(t, bot.Token, stored.Token)
	assert.NotContains(t, string(res.Settings), bot.Token)

	w, ok := f.Webhook(bot)
	require.True(t, ok)
	assert.Equal(t, "https://api.example.com/webhooks/telegram/ch_1", w.URL)
	assert.Equal(t, "abcDEF012_-xyz", w.SecretToken)
	assert.Equal(t, []string{"message", "callback_query"}, w.AllowedUpdates)
	assert.False(t, w.DropPendingUpdates)
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestConnectWithoutWebhookURLRegistersNothing(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	_, err := a.Connect(context.Background(), channel.ConnectRequest{Credentials: &telegram.Credentials{Token: bot.Token}, WebhookSecret: "x"})
	require.NoError(t, err)
	_, ok := f.Webhook(bot)
	assert.False(t, ok)
	for _, c := range f.Calls() {
		assert.NotEqual(t, "setWebhook", c.Method)
	}
}

func TestConnectUsesTheChannelsOwnBaseURL(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	bot := f.AddBot("own_base_bot")
	// The deployment's default points nowhere; the channel names the fake.
	a := telegram.New(telegram.Config{BaseURL: "http://127.0.0.1:1"})
	res, err := a.Connect(context.Background(), channel.ConnectRequest{Credentials: &telegram.Credentials{Token: bot.Token, APIBaseURL: f.URL + "/"}})
	require.NoError(t, err)
	assert.Equal(t, "@own_base_bot", res.DisplayName)
	id, err := a.Send(context.Background(), channel.Connection{Credentials: res.Credentials}, "42", channel.Message{Text: "hi"})
	require.NoError(t, err)
	assert.Equal(t, "1", id)
	assert.Len(t, f.Sent(42), 1)
}

func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	revoked := f.AddBot("gone_bot")
	f.RevokeToken(revoked.Token)
	unknown := "123456:" + strings.Repeat("A", 35)
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		creds telegram.Credentials
		field string
	}{
		{"missing token", telegram.Credentials{}, "token"},
		{"short token", telegram.Credentials{Token: "123:abc"}, "token"},
		{"no digits", telegram.Credentials{Token: "abc:" + strings.Repeat("A", 35)}, "token"},
		{"bad character", telegram.Credentials{Token: "123:" + strings.Repeat("A", 34) + "!"}, "token"},
		{"base not a URL", telegram.Credentials{Token: bot.Token, APIBaseURL: "api.telegram.org"}, "api_base_url"},
		{"base ftp", telegram.Credentials{Token: bot.Token, APIBaseURL: "ftp://example.com"}, "api_base_url"},
		{"base with query", telegram.Credentials{Token: bot.Token, APIBaseURL: "https://example.com/?a=1"}, "api_base_url"},
	} {
		_, err := a.Connect(ctx, channel.ConnectRequest{Credentials: &tc.creds})
		var ce *channel.CredentialsError
		require.ErrorAs(t, err, &ce, tc.name)
		assert.Equal(t, tc.field, ce.Field, tc.name)
		if tc.creds.Token != "" {
			assert.NotContains(t, err.Error(), tc.creds.Token, tc.name)
		}
	}

	for _, tok := range []string{unknown, revoked.Token} {
		_, err := a.Connect(ctx, channel.ConnectRequest{Credentials: &telegram.Credentials{Token: tok}})
		require.ErrorIs(t, err, channel.ErrInvalidCredentials)
		noToken(t, err, tok)
	}

	// api.telegram.org refuses a plain http webhook: 400, the message is rejected.
	f.RequireHTTPS(true)
	_, err := a.Connect(ctx, channel.ConnectRequest{Credentials: &telegram.Credentials{Token: bot.Token},
		WebhookURL: "http://127.0.0.1:8080/webhooks/telegram/ch_1", WebhookSecret: "abc"})
	require.ErrorIs(t, err, channel.ErrRejected)
	assert.Contains(t, err.Error(), "HTTPS URL must be provided")

	// An empty webhook secret would leave the webhook open: refused before any call.
	_, err = a.Connect(ctx, channel.ConnectRequest{Credentials: &telegram.Credentials{Token: bot.Token},
		WebhookURL: "https://example.com/webhooks/telegram/ch_1"})
	require.Error(t, err)
	_, ok := f.Webhook(bot)
	assert.False(t, ok)

	_, err = a.Connect(ctx, channel.ConnectRequest{Credentials: map[string]string{"token": bot.Token}})
	require.Error(t, err)
}

func TestSendText(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	c := conn(t, bot.Token, "")
	// Markup characters are sent as written: no parse_mode, so they neither format nor break.
	text := "Hello <b>Ann</b> *bold* _x_ [link](http://e.com) & more 👋"
	id, err := a.Send(context.Background(), c, "1001", channel.Message{Text: text})
	require.NoError(t, err)
	assert.Equal(t, "1", id)
	id, err = a.Send(context.Background(), c, "1001", channel.Message{Text: "second"})
	require.NoError(t, err)
	assert.Equal(t, "2", id)

	sent := f.Sent(1001)
	require.Len(t, sent, 2)
	assert.Equal(t, "sendMessage", sent[0].Method)
	assert.Equal(t, text, sent[0].Text)
	assert.Equal(t, bot.ID, sent[0].BotID)
	assert.NotContains(t, sent[0].Params, "parse_mode")
	assert.NotContains(t, sent[0].Params, "reply_markup")
}

func TestSendButtons(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	_, err := a.Send(context.Background(), conn(t, bot.Token, ""), "1001", channel.Message{Text: "Pick one",
		Buttons: []channel.Button{
			{Title: "Yes", Payload: "answer:yes"},
			{Title: "No", Payload: strings.Repeat("n", 64)},
			{Title: "Docs", URL: "https://example.com/docs"},
		}})
	require.NoError(t, err)
	sent := f.Sent(1001)
	require.Len(t, sent, 1)
	assert.Equal(t, [][]fake.Button{
		{{Text: "Yes", CallbackData: "answer:yes"}},
		{{Text: "No", CallbackData: strings.Repeat("n", 64)}},
		{{Text: "Docs", URL: "https://example.com/docs"}},
	}, sent[0].Buttons)
}

// Quick replies are a one-time reply keyboard: buttons that send their title as a message.
// The payload is not sent (a reply keyboard button has none); a link is refused.
func TestSendQuickReplies(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	c := conn(t, bot.Token, "")
	_, err := a.Send(context.Background(), c, "1001", channel.Message{Text: "Pick one", QuickReplies: true,
		Buttons: []channel.Button{{Title: "Yes", Payload: "answer:yes"}, {Title: "No", Payload: strings.Repeat("n", 80)}}})
	require.NoError(t, err)
	sent := f.Sent(1001)
	require.Len(t, sent, 1)
	assert.Nil(t, sent[0].Buttons, "no inline keyboard")
	require.NotNil(t, sent[0].Keyboard)
	assert.Equal(t, fake.ReplyKeyboard{Buttons: [][]string{{"Yes"}, {"No"}}, OneTimeKeyboard: true, ResizeKeyboard: true}, *sent[0].Keyboard)
	assert.NotContains(t, string(mustJSON(t, sent[0].Params)), "answer:yes", "the payload stays with the platform")

	// With media too.
	_, err = a.Send(context.Background(), c, "1001", channel.Message{QuickReplies: true,
		Media: &channel.Media{Type: channel.Image, URL: "https://cdn.example.com/a.png"}, Buttons: []channel.Button{{Title: "More", Payload: "more"}}})
	require.NoError(t, err)
	assert.Equal(t, [][]string{{"More"}}, f.Sent(1001)[1].Keyboard.Buttons)

	_, err = a.Send(context.Background(), c, "1001", channel.Message{Text: "x", QuickReplies: true,
		Buttons: []channel.Button{{Title: "Docs", URL: "https://example.com/docs"}}})
	assert.ErrorIs(t, err, channel.ErrRejected, "quick replies cannot open links")
	assert.Len(t, f.Sent(1001), 2)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestSendMedia(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	c := conn(t, bot.Token, "")
	for _, tc := range []struct {
		typ    channel.MediaType
		method string
		field  string
	}{
		{channel.Image, "sendPhoto", "photo"},
		{channel.Video, "sendVideo", "video"},
		{channel.Audio, "sendAudio", "audio"},
		{channel.Document, "sendDocument", "document"},
	} {
		url := "https://cdn.example.com/file-" + tc.field
		_, err := a.Send(context.Background(), c, "77", channel.Message{
			Media:   &channel.Media{Type: tc.typ, URL: url, Caption: "caption " + tc.field},
			Buttons: []channel.Button{{Title: "More", Payload: "more"}}})
		require.NoError(t, err, tc.typ)
		sent := f.Sent(77)
		last := sent[len(sent)-1]
		assert.Equal(t, tc.method, last.Method)
		assert.Equal(t, tc.field, last.MediaType)
		assert.Equal(t, url, last.MediaURL)
		assert.Equal(t, "caption "+tc.field, last.Caption)
		assert.Len(t, last.Buttons, 1)
	}
	_, err := a.Send(context.Background(), c, "77", channel.Message{Media: &channel.Media{Type: channel.Image, URL: "https://cdn.example.com/a.png"}})
	require.NoError(t, err)
	sent := f.Sent(77)
	assert.NotContains(t, sent[len(sent)-1].Params, "caption")
}

// Messages Telegram would refuse fail with ErrRejected before any call.
func TestSendRefusesWhatTelegramWould(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	c := conn(t, bot.Token, "")
	many := make([]channel.Button, 101)
	for i := range many {
		many[i] = channel.Button{Title: "b", Payload: "p"}
	}
	for name, tc := range map[string]struct {
		user string
		m    channel.Message
	}{
		"empty text":              {"1", channel.Message{}},
		"text too long":           {"1", channel.Message{Text: strings.Repeat("a", 4097)}},
		"emoji count twice":       {"1", channel.Message{Text: strings.Repeat("👋", 2049)}},
		"invalid UTF-8":           {"1", channel.Message{Text: "a\xffb"}},
		"caption too long":        {"1", channel.Message{Media: &channel.Media{Type: channel.Image, URL: "https://e.com/a.png", Caption: strings.Repeat("c", 1025)}}},
		"text and media":          {"1", channel.Message{Text: "x", Media: &channel.Media{Type: channel.Image, URL: "https://e.com/a.png"}}},
		"unknown media type":      {"1", channel.Message{Media: &channel.Media{Type: "sticker", URL: "https://e.com/a.webp"}}},
		"media URL not http":      {"1", channel.Message{Media: &channel.Media{Type: channel.Image, URL: "file:///etc/passwd"}}},
		"payload over 64 bytes":   {"1", channel.Message{Text: "x", Buttons: []channel.Button{{Title: "b", Payload: strings.Repeat("é", 33)}}}},
		"button without action":   {"1", channel.Message{Text: "x", Buttons: []channel.Button{{Title: "b"}}}},
		"button with both":        {"1", channel.Message{Text: "x", Buttons: []channel.Button{{Title: "b", Payload: "p", URL: "https://e.com"}}}},
		"button without title":    {"1", channel.Message{Text: "x", Buttons: []channel.Button{{Payload: "p"}}}},
		"button URL javascript":   {"1", channel.Message{Text: "x", Buttons: []channel.Button{{Title: "b", URL: "javascript:alert(1)"}}}},
		"too many buttons":        {"1", channel.Message{Text: "x", Buttons: many}},
		"template":                {"1", channel.Message{Template: &channel.Template{Name: "t", Language: "en"}}},
		"user id not a number":    {"@someone", channel.Message{Text: "x"}},
		"user id not positive":    {"-100123", channel.Message{Text: "x"}},
		"title over 64":           {"1", channel.Message{Text: "x", Buttons: []channel.Button{{Title: strings.Repeat("t", 65), Payload: "p"}}}},
		"caption emoji too long":  {"1", channel.Message{Media: &channel.Media{Type: channel.Video, URL: "https://e.com/v.mp4", Caption: strings.Repeat("😀", 513)}}},
		"document by relative ur": {"1", channel.Message{Media: &channel.Media{Type: channel.Document, URL: "/a.pdf"}}},
	} {
		_, err := a.Send(context.Background(), c, tc.user, tc.m)
		assert.ErrorIs(t, err, channel.ErrRejected, name)
		assert.False(t, channel.Retryable(err), name)
	}
	assert.Empty(t, f.Calls(), "nothing reached Telegram")

	// At the limits exactly, Telegram takes them.
	_, err := a.Send(context.Background(), c, "1", channel.Message{Text: strings.Repeat("👋", 2048)})
	require.NoError(t, err)
	_, err = a.Send(context.Background(), c, "1", channel.Message{Text: strings.Repeat("a", 4096), Buttons: many[:100]})
	require.NoError(t, err)
	_, err = a.Send(context.Background(), c, "1", channel.Message{Text: "x", Buttons: []channel.Button{{Title: strings.Repeat("👋", 64), Payload: "p"}}})
	require.NoError(t, err, "titles count characters")
}

func TestSendErrorMapping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("rate limited", func(t *testing.T) {
		t.Parallel()
		a, f, bot := newAdapter(t)
		f.RateLimit(7)
		_, err := a.Send(ctx, conn(t, bot.Token, ""), "5", channel.Message{Text: "x"})
		require.ErrorIs(t, err, channel.ErrRateLimited)
		var e *channel.Error
		require.ErrorAs(t, err, &e)
		assert.Equal(t, 7*time.Second, e.RetryAfter)
		assert.Equal(t, "429", e.Code)
		assert.True(t, channel.Retryable(err))
		f.RateLimit(0)
		_, err = a.Send(ctx, conn(t, bot.Token, ""), "5", channel.Message{Text: "x"})
		require.NoError(t, err)
	})
	t.Run("blocked and deactivated", func(t *testing.T) {
		t.Parallel()
		a, f, bot := newAdapter(t)
		f.Block(5)
		f.Deactivate(6)
		for _, chat := range []string{"5", "6"} {
			_, err := a.Send(ctx, conn(t, bot.Token, ""), chat, channel.Message{Text: "x"})
			require.ErrorIs(t, err, channel.ErrBlocked)
			assert.False(t, channel.Retryable(err))
		}
		_, err := a.Send(ctx, conn(t, bot.Token, ""), "7", channel.Message{Text: "x"})
		require.NoError(t, err)
	})
	t.Run("revoked token", func(t *testing.T) {
		t.Parallel()
		a, f, bot := newAdapter(t)
		f.RevokeToken(bot.Token)
		_, err := a.Send(ctx, conn(t, bot.Token, ""), "5", channel.Message{Text: "x"})
		require.ErrorIs(t, err, channel.ErrInvalidCredentials)
		assert.Equal(t, "401", err.(*channel.Error).Code)
		noToken(t, err, bot.Token)
	})
	t.Run("server errors", func(t *testing.T) {
		t.Parallel()
		a, f, bot := newAdapter(t)
		for _, status := range []int{500, 502, 503, 504} {
			f.Fail(status)
			_, err := a.Send(ctx, conn(t, bot.Token, ""), "5", channel.Message{Text: "x"})
			require.ErrorIs(t, err, channel.ErrUnavailable, status)
			assert.True(t, channel.Retryable(err))
			noToken(t, err, bot.Token)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		f := fake.New(t)
		bot := f.AddBot("slow_bot")
		f.Delay(2 * time.Second)
		a := telegram.New(telegram.Config{BaseURL: f.URL, HTTPClient: &http.Client{Timeout: 100 * time.Millisecond}})
		_, err := a.Send(ctx, conn(t, bot.Token, ""), "5", channel.Message{Text: "x"})
		require.ErrorIs(t, err, channel.ErrUnavailable)
		noToken(t, err, bot.Token)
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		srv := httptest.NewServer(http.NotFoundHandler())
		base := srv.URL
		srv.Close()
		a := telegram.New(telegram.Config{})
		tok := "42:" + strings.Repeat("Z", 35)
		_, err := a.Send(ctx, conn(t, tok, base), "5", channel.Message{Text: "x"})
		require.ErrorIs(t, err, channel.ErrUnavailable)
		noToken(t, err, tok)
	})
	// Bot API answers the fake does not produce for these sends, served verbatim.
	for _, tc := range []struct {
		status int
		body   string
		kind   error
	}{
		{400, `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`, channel.ErrRejected},
		{404, `{"ok":false,"error_code":404,"description":"Not Found"}`, channel.ErrInvalidCredentials},
		{403, `{"ok":false,"error_code":403,"description":"Forbidden: bot can't initiate conversation with a user"}`, channel.ErrBlocked},
		{409, `{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request"}`, channel.ErrRejected},
		{429, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3"}`, channel.ErrRateLimited},
		{200, `<html>maintenance</html>`, channel.ErrUnavailable},
		{200, `{"ok":true,"result":"not a message"}`, channel.ErrUnavailable},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		a := telegram.New(telegram.Config{BaseURL: srv.URL})
		_, err := a.Send(ctx, conn(t, "42:"+strings.Repeat("Z", 35), ""), "5", channel.Message{Text: "x"})
		assert.Equal(t, tc.kind, kindOf(err), "%d %s", tc.status, tc.body)
		if tc.kind == channel.ErrRateLimited {
			assert.Equal(t, 3*time.Second, err.(*channel.Error).RetryAfter)
		}
		srv.Close()
	}
}

func TestSendNeedsReadableCredentials(t *testing.T) {
	t.Parallel()
	a, _, _ := newAdapter(t)
	_, err := a.Send(context.Background(), channel.Connection{ChannelID: "ch_x", Credentials: json.RawMessage(`{"token":"nope"}`)}, "1", channel.Message{Text: "x"})
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "nope")
	_, err = a.Send(context.Background(), channel.Connection{ChannelID: "ch_x", Credentials: json.RawMessage(`[`)}, "1", channel.Message{Text: "x"})
	require.Error(t, err)
}

func TestVerify(t *testing.T) {
	t.Parallel()
	a, _, _ := newAdapter(t)
	c := channel.Connection{WebhookSecret: "the-right-secret"}
	req := func(secret string, set bool) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/telegram/ch_1", strings.NewReader("{}"))
		if set {
			r.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
		}
		return r
	}
	require.NoError(t, a.Verify(req("the-right-secret", true), nil, c))
	for name, r := range map[string]*http.Request{
		"forged":  req("the-wrong-secret", true),
		"prefix":  req("the-right-secre", true),
		"longer":  req("the-right-secret!", true),
		"missing": req("", false),
		"empty":   req("", true),
	} {
		err := a.Verify(r, nil, c)
		assert.ErrorIs(t, err, channel.ErrUnauthenticWebhook, name)
		assert.NotContains(t, err.Error(), "the-right-secret", name)
	}
	// A channel without a secret accepts nothing, not everything.
	assert.ErrorIs(t, a.Verify(req("", false), nil, channel.Connection{}), channel.ErrUnauthenticWebhook)
	assert.ErrorIs(t, a.Verify(req("", true), nil, channel.Connection{}), channel.ErrUnauthenticWebhook)
}

func TestParse(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	ann := fake.User{ID: 1001, FirstName: "Ann", LastName: "Lee", Username: "ann", LanguageCode: "pt-BR"}

	got, err := a.Parse(f.TextUpdate(ann, "/start promo42"))
	require.NoError(t, err)
	require.Len(t, got, 1)
	in := got[0]
	assert.NotEmpty(t, in.UpdateID)
	assert.Equal(t, "1001", in.UserID)
	assert.Equal(t, "Ann", in.FirstName)
	assert.Equal(t, "Lee", in.LastName)
	assert.Equal(t, "pt-BR", in.Locale)
	assert.Equal(t, "/start promo42", in.Text)
	assert.Empty(t, in.Payload)
	assert.Empty(t, in.CallbackID)
	assert.WithinDuration(t, time.Now(), in.At, time.Minute)

	got2, err := a.Parse(f.TextUpdate(ann, "hello"))
	require.NoError(t, err)
	assert.NotEqual(t, in.UpdateID, got2[0].UpdateID)
	assert.Equal(t, "hello", got2[0].Text)

	body, cbID := f.CallbackUpdate(bot, ann, "answer:yes")
	got, err = a.Parse(body)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "answer:yes", got[0].Payload)
	assert.Empty(t, got[0].Text)
	assert.Equal(t, cbID, got[0].CallbackID)
	assert.Equal(t, "1001", got[0].UserID)
	assert.Equal(t, fixedNow, got[0].At)

	// A photo with a caption is read as its caption.
	got, err = a.Parse([]byte(`{"update_id":5,"message":{"message_id":9,"date":1790000000,"chat":{"id":1001,"type":"private"},
		"from":{"id":1001,"is_bot":false,"first_name":"Ann"},"photo":[{"file_id":"x","file_unique_id":"y","width":1,"height":1}],"caption":"look"}}`))
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, "look", got[0].Text)
	assert.Equal(t, time.Unix(1790000000, 0).UTC(), got[0].At)

	for name, body := range map[string][]byte{
		"edited message": f.EditedUpdate(ann, "hello again"),
		"member update": f.RawUpdate(map[string]any{"my_chat_member": map[string]any{"chat": map[string]any{"id": 1001, "type": "private"},
			"from": map[string]any{"id": 1001, "is_bot": false, "first_name": "Ann"}, "date": 1}}),
		"channel post": f.RawUpdate(map[string]any{"channel_post": map[string]any{"message_id": 1, "date": 1, "chat": map[string]any{"id": -100, "type": "channel"}, "text": "x"}}),
		"group message": f.RawUpdate(map[string]any{"message": map[string]any{"message_id": 1, "date": 1, "text": "hi",
			"chat": map[string]any{"id": -42, "type": "group"}, "from": map[string]any{"id": 1001, "is_bot": false, "first_name": "Ann"}}}),
		"sticker": f.RawUpdate(map[string]any{"message": map[string]any{"message_id": 1, "date": 1,
			"chat": map[string]any{"id": 1001, "type": "private"}, "from": map[string]any{"id": 1001, "is_bot": false, "first_name": "Ann"},
			"sticker": map[string]any{"file_id": "x"}}}),
		"game callback": f.RawUpdate(map[string]any{"callback_query": map[string]any{"id": "1", "chat_instance": "1",
			"from": map[string]any{"id": 1001, "is_bot": false, "first_name": "Ann"}, "game_short_name": "g"}}),
	} {
		got, err := a.Parse(body)
		require.NoError(t, err, name)
		assert.Empty(t, got, name)
	}

	for name, body := range map[string]string{
		"not JSON":     `{"update_id":`,
		"no update_id": `{"message":{"text":"x"}}`,
		"array":        `[]`,
	} {
		_, err := a.Parse([]byte(body))
		assert.Error(t, err, name)
	}
}

func TestAnswerCallback(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	c := conn(t, bot.Token, "")
	_, id := f.CallbackUpdate(bot, fake.User{ID: 5, FirstName: "Bo"}, "p")
	require.NoError(t, a.AnswerCallback(context.Background(), c, id))
	assert.Equal(t, []fake.Answer{{BotID: bot.ID, CallbackQueryID: id}}, f.Answers())
	// Telegram accepts one answer per query.
	assert.ErrorIs(t, a.AnswerCallback(context.Background(), c, id), channel.ErrRejected)
	assert.ErrorIs(t, a.AnswerCallback(context.Background(), c, ""), channel.ErrRejected)
}

func TestDisconnect(t *testing.T) {
	t.Parallel()
	a, f, bot := newAdapter(t)
	ctx := context.Background()
	connect := func(id string) {
		_, err := a.Connect(ctx, channel.ConnectRequest{ChannelID: id, Credentials: &telegram.Credentials{Token: bot.Token},
			WebhookURL: "https://example.com/webhooks/telegram/" + id, WebhookSecret: "abc"})
		require.NoError(t, err)
	}
	connect("ch_1")
	connect("ch_2") // the Telegram bot moved on to another channel

	c := conn(t, bot.Token, "")
	c.ChannelID = "ch_1"
	require.NoError(t, a.Disconnect(ctx, c))
	w, ok := f.Webhook(bot)
	require.True(t, ok, "another channel's webhook is left alone")
	assert.Equal(t, "https://example.com/webhooks/telegram/ch_2", w.URL)

	c.ChannelID = "ch_2"
	require.NoError(t, a.Disconnect(ctx, c))
	_, ok = f.Webhook(bot)
	assert.False(t, ok)
	require.NoError(t, a.Disconnect(ctx, c), "nothing left to delete")

	f.RevokeToken(bot.Token)
	assert.ErrorIs(t, a.Disconnect(ctx, c), channel.ErrInvalidCredentials)
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	c := telegram.New(telegram.Config{}).Capabilities()
	assert.Equal(t, channel.Telegram, c.Kind)
	assert.False(t, c.ConnectableOverREST)
	assert.Equal(t, 4096, c.MaxTextLength)
	assert.Equal(t, 1024, c.MaxCaptionLength)
	assert.Equal(t, 0, c.SessionWindowSeconds)
	assert.False(t, c.TemplateOutsideWindow)
	assert.True(t, c.Buttons.URLButtons)
	assert.ElementsMatch(t, []string{"text", "media", "buttons", "quick_replies"}, c.MessageKinds)
	assert.True(t, c.Sends(channel.MessageKindQuickReplies))
	sizes := map[channel.MediaType]int64{}
	for _, m := range c.Media {
		sizes[m.Type] = m.MaxBytes
		assert.NotEmpty(t, m.MimeTypes)
	}
	assert.Equal(t, map[channel.MediaType]int64{channel.Image: 5 << 20, channel.Video: 20 << 20, channel.Audio: 20 << 20, channel.Document: 20 << 20}, sizes)
	assert.Greater(t, c.MessagesPerSecond, 0.0)
}
