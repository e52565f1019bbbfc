package whatsapp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	fake "github.com/botplatform/api/tests/fakes/whatsapp"
)

func newAdapter(t *testing.T) (*whatsapp.Adapter, *fake.Server) {
	t.Helper()
	f := fake.New(t)
	return whatsapp.New(whatsapp.Config{BaseURL: f.URL(), AppID: fake.AppID, AppSecret: fake.AppSecret}), f
}

func goodCreds() *whatsapp.Credentials {
	return &whatsapp.Credentials{AccessToken: fake.AccessToken, PhoneNumberID: fake.PhoneNumberID, BusinessAccountID: fake.BusinessAccountID}
}

// conn is a connected channel as the channels service would resolve it.
func conn(t *testing.T, c *whatsapp.Credentials) channel.Connection {
	t.Helper()
	b, err := json.Marshal(c)
	require.NoError(t, err)
	return channel.Connection{ChannelID: "ch_test", BotID: "bot_test", Credentials: b}
}

func providerCode(err error) string {
	var e *channel.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func TestConnect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, f := newAdapter(t)

	res, err := a.Connect(ctx, channel.ConnectRequest{ChannelID: "ch_1", Credentials: goodCreds()})
	require.NoError(t, err)
	assert.JSONEq(t, `{"phone_number_id":"`+fake.PhoneNumberID+`","display_phone_number":"`+fake.DisplayPhoneNumber+
		`","verified_name":"`+fake.VerifiedName+`","business_account_id":"`+fake.BusinessAccountID+`"}`, string(res.Settings))
	assert.Equal(t, fake.PhoneNumberID, res.LookupKey)
	assert.Equal(t, fake.DisplayPhoneNumber, res.DisplayName)
	assert.NotContains(t, string(res.Settings), fake.AccessToken, "settings are public")
	var stored whatsapp.Credentials
	require.NoError(t, json.Unmarshal(res.Credentials, &stored))
	assert.Equal(t, *goodCreds(), stored)
	assert.Empty(t, f.Subscriptions(), "no public URL: the app is not subscribed")

	// With a public URL the app is subscribed to the account's webhooks (idempotently).
	_, err = a.Connect(ctx, channel.ConnectRequest{ChannelID: "ch_2", Credentials: *goodCreds(), WebhookURL: "https://api.example.com/webhooks/whatsapp"})
	require.NoError(t, err)
	assert.Equal(t, []string{fake.BusinessAccountID}, f.Subscriptions())
	for _, r := range f.Requests() {
		assert.NotContains(t, r, fake.AccessToken, "the token never travels in a URL")
	}
}

func TestConnectRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, f := newAdapter(t)
	// Another business with its number, visible to the same token.
	f.AddNumber("555000111222333", "777000111222333", "+1 555-010-0777", "Other")
	f.AddToken(fake.AccessToken, fake.BusinessAccountID, "555000111222333")

	cases := map[string]struct {
		creds *whatsapp.Credentials
		kind  error
		code  string
	}{
		"unknown token":           {&whatsapp.Credentials{AccessToken: "EAAJnope", PhoneNumberID: fake.PhoneNumberID, BusinessAccountID: fake.BusinessAccountID}, channel.ErrInvalidCredentials, "190"},
		"unknown phone number":    {&whatsapp.Credentials{AccessToken: fake.AccessToken, PhoneNumberID: "123456789", BusinessAccountID: fake.BusinessAccountID}, channel.ErrInvalidCredentials, "100/33"},
		"number of another WABA":  {&whatsapp.Credentials{AccessToken: fake.AccessToken, PhoneNumberID: "777000111222333", BusinessAccountID: fake.BusinessAccountID}, channel.ErrInvalidCredentials, "phone_number_not_in_account"},
		"unknown business":        {&whatsapp.Credentials{AccessToken: fake.AccessToken, PhoneNumberID: fake.PhoneNumberID, BusinessAccountID: "999"}, channel.ErrInvalidCredentials, "100/33"},
		"business of another key": {&whatsapp.Credentials{AccessToken: fake.AccessToken, PhoneNumberID: fake.PhoneNumberID, BusinessAccountID: "555000111222333"}, channel.ErrInvalidCredentials, "phone_number_not_in_account"},
	}
	for name, tc := range cases {
		_, err := a.Connect(ctx, channel.ConnectRequest{Credentials: tc.creds})
		assert.ErrorIs(t, err, tc.kind, name)
		assert.Equal(t, tc.code, providerCode(err), name)
		assert.NotContains(t, err.Error(), tc.creds.AccessToken, name)
	}

	// Malformed members are refused before any call, all at once.
	before := len(f.Requests())
	_, err := a.Connect(ctx, channel.ConnectRequest{Credentials: &whatsapp.Credentials{PhoneNumberID: "12/../34", BusinessAccountID: ""}})
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *channel.CredentialsError
		require.ErrorAs(t, e, &ce)
		fields = append(fields, ce.Field)
	}
	assert.ElementsMatch(t, []string{"access_token", "phone_number_id", "business_account_id"}, fields)
	assert.Len(t, f.Requests(), before, "nothing sent")

	f.Fail(1)
	_, err = a.Connect(ctx, channel.ConnectRequest{Credentials: goodCreds()})
	assert.ErrorIs(t, err, channel.ErrUnavailable)
}

func TestSend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, f := newAdapter(t)
	c := conn(t, goodCreds())
	f.AddTemplate("order_update", "en_US", "UTILITY", "APPROVED", `[{"type":"BODY","text":"Hi {{1}}, order {{2}} ships today."}]`)

	cases := []struct {
		name string
		msg  channel.Message
		typ  string
		want string // JSON the request body must contain
	}{
		{"text", channel.Message{Text: "hello"}, "text", `{"text":{"body":"hello","preview_url":false}}`},
		{"reply buttons", channel.Message{Text: "Pick", Buttons: []channel.Button{{Title: "Yes", Payload: "yes"}, {Title: "No", Payload: "no"}}}, "interactive",
			`{"interactive":{"type":"button","body":{"text":"Pick"},"action":{"buttons":[{"type":"reply","reply":{"id":"yes","title":"Yes"}},{"type":"reply","reply":{"id":"no","title":"No"}}]}}}`},
		{"quick replies are reply buttons", channel.Message{Text: "Pick", QuickReplies: true, Key: "exe_1/1/a", Buttons: []channel.Button{{Title: "Yes", Payload: "yes"}}}, "interactive",
			`{"interactive":{"type":"button","body":{"text":"Pick"},"action":{"buttons":[{"type":"reply","reply":{"id":"yes","title":"Yes"}}]}}}`},
		{"quick replies as a list", channel.Message{Text: "Pick", QuickReplies: true, Buttons: []channel.Button{{Title: "A", Payload: "a"}, {Title: "B", Payload: "b"}, {Title: "C", Payload: "c"}, {Title: "D", Payload: "d"}}}, "interactive",
			`{"interactive":{"type":"list","body":{"text":"Pick"},"action":{"button":"Choose","sections":[{"rows":[{"id":"a","title":"A"},{"id":"b","title":"B"},{"id":"c","title":"C"},{"id":"d","title":"D"}]}]}}}`},
		{"list", channel.Message{Text: "Pick", Buttons: []channel.Button{{Title: "A"}, {Title: "B"}, {Title: "C"}, {Title: "D", Payload: "d"}}}, "interactive",
			`{"interactive":{"type":"list","body":{"text":"Pick"},"action":{"button":"Choose","sections":[{"rows":[{"id":"A","title":"A"},{"id":"B","title":"B"},{"id":"C","title":"C"},{"id":"d","title":"D"}]}]}}}`},
		{"link button", channel.Message{Text: "Track", Buttons: []channel.Button{{Title: "Open", URL: "https://example.com/t/1"}}}, "interactive",
			`{"interactive":{"type":"cta_url","body":{"text":"Track"},"action":{"name":"cta_url","parameters":{"display_text":"Open","url":"https://example.com/t/1"}}}}`},
		{"image", channel.Message{Media: &channel.Media{Type: channel.Image, URL: "https://cdn.example.com/a.png", Caption: "A"}}, "image", `{"image":{"link":"https://cdn.example.com/a.png","caption":"A"}}`},
		{"video", channel.Message{Media: &channel.Media{Type: channel.Video, URL: "https://cdn.example.com/a.mp4"}}, "video", `{"video":{"link":"https://cdn.example.com/a.mp4"}}`},
		{"audio", channel.Message{Media: &channel.Media{Type: channel.Audio, URL: "https://cdn.example.com/a.ogg"}}, "audio", `{"audio":{"link":"https://cdn.example.com/a.ogg"}}`},
		{"document", channel.Message{Media: &channel.Media{Type: channel.Document, URL: "https://cdn.example.com/docs/invoice.pdf", Caption: "Invoice"}}, "document",
			`{"document":{"link":"https://cdn.example.com/docs/invoice.pdf","caption":"Invoice","filename":"invoice.pdf"}}`},
		{"template", channel.Message{Template: &channel.Template{Name: "order_update", Language: "en_US", Params: []string{"Ann", "#42"}}}, "template",
			`{"template":{"name":"order_update","language":{"code":"en_US"},"components":[{"type":"body","parameters":[{"type":"text","text":"Ann"},{"type":"text","text":"#42"}]}]}}`},
	}
	for i, tc := range cases {
		id, err := a.Send(ctx, c, "4915112345678", tc.msg)
		require.NoError(t, err, tc.name)
		assert.True(t, strings.HasPrefix(id, "wamid."), tc.name)
		sent := f.Messages()
		require.Len(t, sent, i+1, tc.name)
		got := sent[i]
		assert.Equal(t, id, got.ID, tc.name)
		assert.Equal(t, tc.typ, got.Type, tc.name)
		assert.Equal(t, "4915112345678", got.To, tc.name)
		var body map[string]any
		require.NoError(t, json.Unmarshal(got.Body, &body))
		assert.Equal(t, "whatsapp", body["messaging_product"], tc.name)
		var want map[string]any
		require.NoError(t, json.Unmarshal([]byte(tc.want), &want))
		for k, v := range want {
			assert.Equal(t, v, body[k], "%s: %s", tc.name, k)
		}
	}
}

func TestSendRefusedBeforeTheProvider(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, f := newAdapter(t)
	c := conn(t, goodCreds())
	long := strings.Repeat("x", 4097)
	for name, m := range map[string]channel.Message{
		"empty":              {},
		"two bodies":         {Text: "a", Media: &channel.Media{Type: channel.Image, URL: "https://x/a.png"}},
		"text too long":      {Text: long},
		"buttons text long":  {Text: strings.Repeat("x", 1025), Buttons: []channel.Button{{Title: "A"}}},
		"title too long":     {Text: "t", Buttons: []channel.Button{{Title: strings.Repeat("y", 21)}}},
		"eleven buttons":     {Text: "t", Buttons: make([]channel.Button, 11)},
		"link and reply":     {Text: "t", Buttons: []channel.Button{{Title: "A", URL: "https://x"}, {Title: "B"}}},
		"quick reply link":   {Text: "t", QuickReplies: true, Buttons: []channel.Button{{Title: "A", URL: "https://x.example"}}},
		"duplicate payloads": {Text: "t", Buttons: []channel.Button{{Title: "A", Payload: "p"}, {Title: "B", Payload: "p"}}},
		"audio caption":      {Media: &channel.Media{Type: channel.Audio, URL: "https://x/a.ogg", Caption: "no"}},
		"media not a URL":    {Media: &channel.Media{Type: channel.Image, URL: "file:///etc/passwd"}},
		"sticker":            {Media: &channel.Media{Type: "sticker", URL: "https://x/a.webp"}},
		"template no lang":   {Template: &channel.Template{Name: "x"}},
		"template empty":     {Template: &channel.Template{Name: "x", Language: "en", Params: []string{"a", " "}}},
		"template new line":  {Template: &channel.Template{Name: "x", Language: "en", Params: []string{"a\nb"}}},
		"template spaces":    {Template: &channel.Template{Name: "x", Language: "en", Params: []string{"a     b"}}},
	} {
		_, err := a.Send(ctx, c, "4915112345678", m)
		assert.ErrorIs(t, err, channel.ErrRejected, name)
		assert.False(t, channel.Retryable(err), name)
	}
	_, err := a.Send(ctx, c, "not-a-number", channel.Message{Text: "x"})
	assert.ErrorIs(t, err, channel.ErrRejected)
	assert.Empty(t, f.Messages(), "nothing reached the provider")
}

// Each provider failure maps to the kind the runtime decides retries with.
func TestSendErrorMapping(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	user := "4915112345678"
	cases := []struct {
		name       string
		setup      func(f *fake.Server)
		msg        channel.Message
		kind       error
		code       string
		retryAfter time.Duration
	}{
		{"throttled", func(f *fake.Server) { f.Throttle(1) }, channel.Message{Text: "x"}, channel.ErrRateLimited, "130429", 0},
		{"throttled with Retry-After", func(f *fake.Server) {
			f.FailWith(1, 400, 80007, 0, "(#80007) Rate limit issues", "30")
		}, channel.Message{Text: "x"}, channel.ErrRateLimited, "80007", 30 * time.Second},
		{"app throttled", func(f *fake.Server) { f.FailWith(1, 400, 4, 0, "(#4) Application request limit reached", "") }, channel.Message{Text: "x"}, channel.ErrRateLimited, "4", 0},
		{"pair rate", func(f *fake.Server) { f.FailWith(1, 400, 131056, 0, "(#131056) Pair rate limit hit", "") }, channel.Message{Text: "x"}, channel.ErrRateLimited, "131056", 6 * time.Second},
		{"5xx", func(f *fake.Server) { f.Fail(1) }, channel.Message{Text: "x"}, channel.ErrUnavailable, "2", 0},
		{"unknown error", func(f *fake.Server) { f.FailWith(1, 400, 1, 0, "An unknown error occurred", "") }, channel.Message{Text: "x"}, channel.ErrUnavailable, "1", 0},
		{"token revoked", func(f *fake.Server) { f.RejectToken(fake.AccessToken) }, channel.Message{Text: "x"}, channel.ErrInvalidCredentials, "190/463", 0},
		{"permission", func(f *fake.Server) {
			f.FailWith(1, 403, 10, 0, "(#10) Application does not have permission for this action", "")
		}, channel.Message{Text: "x"}, channel.ErrInvalidCredentials, "10", 0},
		{"undeliverable", func(f *fake.Server) { f.BlockUser(user) }, channel.Message{Text: "x"}, channel.ErrBlocked, "131026", 0},
		{"outside window", func(f *fake.Server) { f.CloseWindow(user) }, channel.Message{Text: "x"}, channel.ErrOutsideWindow, "131047", 0},
		{"unsupported", func(f *fake.Server) { f.FailWith(1, 400, 131051, 0, "Unsupported message type", "") }, channel.Message{Text: "x"}, channel.ErrRejected, "131051", 0},
		{"template not approved", func(f *fake.Server) {
			f.AddTemplate("promo", "en", "MARKETING", "PENDING", `[{"type":"BODY","text":"Sale"}]`)
		}, channel.Message{Template: &channel.Template{Name: "promo", Language: "en"}}, channel.ErrRejected, "132001", 0},
		{"template parameter count", func(f *fake.Server) {
			f.AddTemplate("promo", "en", "MARKETING", "APPROVED", `[{"type":"BODY","text":"Sale {{1}}"}]`)
		}, channel.Message{Template: &channel.Template{Name: "promo", Language: "en"}}, channel.ErrRejected, "132000", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, f := newAdapter(t)
			tc.setup(f)
			_, err := a.Send(ctx, conn(t, goodCreds()), user, tc.msg)
			require.ErrorIs(t, err, tc.kind)
			var ce *channel.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, channel.WhatsApp, ce.Provider)
			assert.Equal(t, tc.code, ce.Code)
			assert.Equal(t, tc.retryAfter, ce.RetryAfter)
			assert.NotContains(t, err.Error(), fake.AccessToken)
		})
	}

	// Outside the window a template still goes through.
	a, f := newAdapter(t)
	f.CloseWindow(user)
	f.AddTemplate("hello", "en", "UTILITY", "APPROVED", `[{"type":"BODY","text":"Hello"}]`)
	_, err := a.Send(ctx, conn(t, goodCreds()), user, channel.Message{Template: &channel.Template{Name: "hello", Language: "en"}})
	require.NoError(t, err)
}

// A provider message that echoes the token is scrubbed; an unreachable provider is
// unavailable, not a credentials problem.
func TestErrorsNeverCarryTheToken(t *testing.T) {
	t.Parallel()
	a, f := newAdapter(t)
	f.FailWith(1, 400, 100, 0, "Invalid parameter near "+fake.AccessToken, "")
	_, err := a.Send(context.Background(), conn(t, goodCreds()), "4915112345678", channel.Message{Text: "x"})
	require.ErrorIs(t, err, channel.ErrRejected)
	assert.NotContains(t, err.Error(), fake.AccessToken)
	assert.Contains(t, err.Error(), "[redacted]")

	down := whatsapp.New(whatsapp.Config{BaseURL: "http://127.0.0.1:1/v21.0"})
	_, err = down.Send(context.Background(), conn(t, goodCreds()), "4915112345678", channel.Message{Text: "x"})
	assert.ErrorIs(t, err, channel.ErrUnavailable)
	assert.True(t, channel.Retryable(err))
}

func TestVerify(t *testing.T) {
	t.Parallel()
	a, _ := newAdapter(t)
	body := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
	req := func(sig string) *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/webhooks/whatsapp", bytes.NewReader(body))
		if sig != "" {
			r.Header.Set("X-Hub-Signature-256", sig)
		}
		return r
	}
	require.NoError(t, a.Verify(req(fake.Sign(body)), body, channel.Connection{}))
	assert.Equal(t, fake.Sign(body), whatsapp.Sign([]byte(fake.AppSecret), body), "the fake and the adapter sign alike")
	forged := whatsapp.Sign([]byte("another secret"), body)
	for name, sig := range map[string]string{
		"forged":       forged,
		"missing":      "",
		"no prefix":    strings.TrimPrefix(fake.Sign(body), "sha256="),
		"sha1":         "sha1=" + strings.TrimPrefix(fake.Sign(body), "sha256="),
		"not hex":      "sha256=zz",
		"truncated":    fake.Sign(body)[:20],
		"other body":   fake.Sign([]byte(`{}`)),
		"upper prefix": "SHA256=" + strings.TrimPrefix(fake.Sign(body), "sha256="),
	} {
		err := a.Verify(req(sig), body, channel.Connection{})
		assert.ErrorIs(t, err, channel.ErrUnauthenticWebhook, name)
	}
	noSecret := whatsapp.New(whatsapp.Config{})
	err := noSecret.Verify(req(whatsapp.Sign(nil, body)), body, channel.Connection{})
	assert.ErrorIs(t, err, channel.ErrUnauthenticWebhook, "no app secret: nothing verifies")
	assert.ErrorIs(t, err, whatsapp.ErrNotConfigured)
}

func TestVerifyChallenge(t *testing.T) {
	t.Parallel()
	q := func(mode, tok, challenge string) url.Values {
		return url.Values{"hub.mode": {mode}, "hub.verify_token": {tok}, "hub.challenge": {challenge}}
	}
	c, ok := whatsapp.VerifyChallenge(q("subscribe", "s3cret", "1158201444"), "s3cret")
	assert.True(t, ok)
	assert.Equal(t, "1158201444", c)
	for name, v := range map[string]url.Values{
		"wrong token":     q("subscribe", "nope", "1"),
		"wrong mode":      q("unsubscribe", "s3cret", "1"),
		"no challenge":    q("subscribe", "s3cret", ""),
		"nothing":         {},
		"token prefix":    q("subscribe", "s3cre", "1"),
		"token in suffix": q("subscribe", "s3crett", "1"),
	} {
		_, ok := whatsapp.VerifyChallenge(v, "s3cret")
		assert.False(t, ok, name)
	}
	_, ok = whatsapp.VerifyChallenge(q("subscribe", "", "1"), "")
	assert.False(t, ok, "an unconfigured verify token never matches")
}

func TestParseEnvelope(t *testing.T) {
	t.Parallel()
	text, id := fake.TextMessage(fake.PhoneNumberID, "4915112345678", "Ann Lee", "/start")
	env, err := whatsapp.ParseEnvelope(text)
	require.NoError(t, err)
	assert.Empty(t, env.TemplateStatuses)
	assert.Empty(t, env.MessageStatuses)
	require.Len(t, env.Updates, 1)
	u := env.Updates[0]
	assert.Equal(t, fake.PhoneNumberID, u.PhoneNumberID)
	assert.Equal(t, id, u.Inbound.UpdateID)
	assert.Equal(t, "4915112345678", u.Inbound.UserID)
	assert.Equal(t, "Ann Lee", u.Inbound.FirstName)
	assert.Equal(t, "/start", u.Inbound.Text)
	assert.WithinDuration(t, time.Now(), u.Inbound.At, time.Minute)

	press, _ := fake.ButtonReply(fake.PhoneNumberID, "4915112345678", "Ann", "yes", "Yes")
	env, err = whatsapp.ParseEnvelope(press)
	require.NoError(t, err)
	require.Len(t, env.Updates, 1)
	assert.Equal(t, "yes", env.Updates[0].Inbound.Payload)
	assert.Empty(t, env.Updates[0].Inbound.Text)

	// A list choice, a template quick reply, media and a delivery status in one delivery.
	mixed := `{"object":"whatsapp_business_account","entry":[{"id":"` + fake.BusinessAccountID + `","changes":[{"field":"messages","value":{
		"messaging_product":"whatsapp","metadata":{"display_phone_number":"15550100199","phone_number_id":"42"},
		"contacts":[{"profile":{"name":"Bo"},"wa_id":"4411"}],
		"messages":[
			{"from":"4411","id":"wamid.1","timestamp":"1700000000","type":"interactive","interactive":{"type":"list_reply","list_reply":{"id":"row_2","title":"Two"}}},
			{"from":"4411","id":"wamid.2","timestamp":"1700000001","type":"button","button":{"payload":"STOP","text":"Stop promotions"}},
			{"from":"4411","id":"wamid.3","timestamp":"1700000002","type":"image","image":{"id":"9","mime_type":"image/jpeg"}}],
		"statuses":[{"id":"wamid.0","status":"delivered","timestamp":"1700000003","recipient_id":"4411"}]}}]}]}`
	env, err = whatsapp.ParseEnvelope([]byte(mixed))
	require.NoError(t, err)
	updates := env.Updates
	require.Len(t, updates, 2, "the image yields nothing; the status is not a message")
	assert.Equal(t, "row_2", updates[0].Inbound.Payload)
	assert.Equal(t, "STOP", updates[1].Inbound.Payload)
	assert.Equal(t, "42", updates[1].PhoneNumberID)
	assert.Equal(t, time.Unix(1700000001, 0).UTC(), updates[1].Inbound.At)
	assert.Equal(t, []whatsapp.MessageStatus{{PhoneNumberID: "42", MessageID: "wamid.0", Status: "delivered",
		At: time.Unix(1700000003, 0).UTC(), RecipientID: "4411"}}, env.MessageStatuses, "the status comes separately")

	status := `{"object":"whatsapp_business_account","entry":[{"id":"102290129340398","time":1700000000,"changes":[{"field":"message_template_status_update","value":{
		"event":"REJECTED","message_template_id":1234567890123456,"message_template_name":"order_update","message_template_language":"en_US","reason":"INVALID_FORMAT"}}]}]}`
	env, err = whatsapp.ParseEnvelope([]byte(status))
	require.NoError(t, err)
	assert.Empty(t, env.Updates)
	assert.Empty(t, env.MessageStatuses)
	require.Len(t, env.TemplateStatuses, 1)
	assert.Equal(t, whatsapp.TemplateStatus{BusinessAccountID: "102290129340398", ID: "1234567890123456", Name: "order_update",
		Language: "en_US", Status: "REJECTED", Reason: "INVALID_FORMAT", At: time.Unix(1700000000, 0).UTC()}, env.TemplateStatuses[0])

	_, err = whatsapp.ParseEnvelope([]byte(`{"object":"page","entry":[]}`))
	assert.Error(t, err)
	_, err = whatsapp.ParseEnvelope([]byte(`{`))
	assert.Error(t, err)

	// Parse (the Adapter method) returns the inbound messages only.
	a := whatsapp.New(whatsapp.Config{})
	in, err := a.Parse([]byte(mixed))
	require.NoError(t, err)
	assert.Len(t, in, 2)
	in, err = a.Parse([]byte(status))
	require.NoError(t, err)
	assert.Empty(t, in)
}

// The statuses of sent messages, in the shapes of Meta's documented examples (the status
// messages webhook reference): a delivery receipt with its conversation and pricing, a read
// receipt, a failure with its error, in one batch of one number, and the odd shapes that
// must not cost the batch.
func TestParseMessageStatuses(t *testing.T) {
	t.Parallel()
	body := `{
  "object": "whatsapp_business_account",
  "entry": [
    {
      "id": "102290129340398",
      "changes": [
        {
          "value": {
            "messaging_product": "whatsapp",
            "metadata": {
              "display_phone_number": "15550783881",
              "phone_number_id": "106540352242922"
            },
            "statuses": [
              {
                "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA",
                "status": "delivered",
                "timestamp": "1750030073",
                "recipient_id": "16505551234",
                "conversation": {
                  "id": "3e4ba4ac6d5b6c12d2b2a4bc5c8e1c3b",
                  "expiration_timestamp": "1750116473",
                  "origin": {
                    "type": "marketing"
                  }
                },
                "pricing": {
                  "billable": true,
                  "pricing_model": "CBP",
                  "category": "marketing"
                }
              },
              {
                "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3NTlCNDgzNTY5QkI0RTFBQzAA",
                "status": "read",
                "timestamp": "1750030080",
                "recipient_id": "16505551234"
              },
              {
                "id": "wamid.HBgLMTIxMTU1NTc5NDcVAgARGBIyRkQxREUxRDJFQUJGMkQ3NDIZ",
                "status": "failed",
                "timestamp": "1674864408",
                "recipient_id": "12115557947",
                "errors": [
                  {
                    "code": 131050,
                    "title": "Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business",
                    "message": "Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business",
                    "error_data": {
                      "details": "Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business"
                    },
                    "href": "https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/"
                  }
                ]
              },
              {
                "id": "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI5QkYxRDAwRjY2NDk4MkI2RkIA",
                "status": "sent",
                "timestamp": "1750030071",
                "recipient_id": "16505551234",
                "conversation": {
                  "id": "3e4ba4ac6d5b6c12d2b2a4bc5c8e1c3b",
                  "expiration_timestamp": 1750116473,
                  "origin": {
                    "type": "marketing"
                  }
                },
                "pricing": {
                  "billable": true,
                  "pricing_model": "CBP",
                  "category": "marketing"
                }
              }
            ]
          },
          "field": "messages"
        }
      ]
    }
  ]
}`
	env, err := whatsapp.ParseEnvelope([]byte(body))
	require.NoError(t, err)
	assert.Empty(t, env.Updates)
	assert.Empty(t, env.TemplateStatuses)
	const number = "106540352242922"
	assert.Equal(t, []whatsapp.MessageStatus{
		{PhoneNumberID: number, MessageID: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBJDQjZCMzlEQUE4OTJBMTE4RTUA", Status: "delivered",
			At: time.Unix(1750030073, 0).UTC(), RecipientID: "16505551234"},
		{PhoneNumberID: number, MessageID: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI3NTlCNDgzNTY5QkI0RTFBQzAA", Status: "read",
			At: time.Unix(1750030080, 0).UTC(), RecipientID: "16505551234"},
		{PhoneNumberID: number, MessageID: "wamid.HBgLMTIxMTU1NTc5NDcVAgARGBIyRkQxREUxRDJFQUJGMkQ3NDIZ", Status: "failed",
			At: time.Unix(1674864408, 0).UTC(), RecipientID: "12115557947", ErrorCode: "131050",
			ErrorTitle: "Unable to deliver the message. This recipient has chosen to stop receiving marketing messages on WhatsApp from your business"},
		{PhoneNumberID: number, MessageID: "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI5QkYxRDAwRjY2NDk4MkI2RkIA", Status: "sent",
			At: time.Unix(1750030071, 0).UTC(), RecipientID: "16505551234"},
	}, env.MessageStatuses)

	// Two numbers in one delivery (two entries), odd shapes: a status without an id or a
	// status is dropped; a numeric timestamp and a string error code read as well; a
	// timestamp that is not one leaves At zero; upper case is normalized. None costs the batch.
	odd := `{"object":"whatsapp_business_account","entry":[
		{"id":"waba1","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"pn1"},"statuses":[
			{"id":"wamid.A","status":"READ","timestamp":1750030080,"recipient_id":"1"},
			{"status":"delivered","timestamp":"1750030080"},
			{"id":"wamid.B","timestamp":"1750030080"},
			{"id":"wamid.C","status":"failed","timestamp":{"x":1},"errors":[{"code":"131026","title":"Message undeliverable"},{"code":1}]}]}}]},
		{"id":"waba2","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"pn2"},"statuses":[
			{"id":"wamid.D","status":"delivered","timestamp":"-5","errors":[{"code":null}]}]}}]}]}`
	env, err = whatsapp.ParseEnvelope([]byte(odd))
	require.NoError(t, err)
	assert.Equal(t, []whatsapp.MessageStatus{
		{PhoneNumberID: "pn1", MessageID: "wamid.A", Status: "read", At: time.Unix(1750030080, 0).UTC(), RecipientID: "1"},
		{PhoneNumberID: "pn1", MessageID: "wamid.C", Status: "failed", ErrorCode: "131026", ErrorTitle: "Message undeliverable"},
		{PhoneNumberID: "pn2", MessageID: "wamid.D", Status: "delivered"},
	}, env.MessageStatuses)

	// A statuses value that is not an array is not a notification this webhook understands.
	_, err = whatsapp.ParseEnvelope([]byte(`{"object":"whatsapp_business_account","entry":[{"changes":[{"field":"messages","value":{"statuses":{"id":"x"}}}]}]}`))
	assert.Error(t, err)

	// Parse (the Adapter method) returns no message for statuses.
	in, err := whatsapp.New(whatsapp.Config{}).Parse([]byte(body))
	require.NoError(t, err)
	assert.Empty(t, in)

	// What the fake delivers (it shares no code with this package) reads the same.
	at := time.Unix(1750030090, 0).UTC()
	env, err = whatsapp.ParseEnvelope(fake.StatusUpdate(fake.PhoneNumberID,
		fake.Status{MessageID: "wamid.E", RecipientID: "4915", Status: "delivered", At: at},
		fake.Status{MessageID: "wamid.F", RecipientID: "4916", Status: "failed", At: at}))
	require.NoError(t, err)
	assert.Equal(t, []whatsapp.MessageStatus{
		{PhoneNumberID: fake.PhoneNumberID, MessageID: "wamid.E", Status: whatsapp.StatusDelivered, At: at, RecipientID: "4915"},
		{PhoneNumberID: fake.PhoneNumberID, MessageID: "wamid.F", Status: whatsapp.StatusFailed, At: at, RecipientID: "4916",
			ErrorCode: "131026", ErrorTitle: "Message undeliverable."},
	}, env.MessageStatuses)
}

func TestCapabilities(t *testing.T) {
	t.Parallel()
	c := whatsapp.New(whatsapp.Config{}).Capabilities()
	assert.Equal(t, channel.WhatsApp, c.Kind)
	assert.True(t, c.ConnectableOverREST)
	assert.Equal(t, 4096, c.MaxTextLength)
	assert.Equal(t, 86400, c.SessionWindowSeconds)
	assert.True(t, c.TemplateOutsideWindow)
	assert.Equal(t, []string{"text", "media", "buttons", "quick_replies", "template"}, c.MessageKinds)
	assert.Equal(t, []channel.MediaLimit{
		{Type: channel.Image, MaxBytes: 5 << 20, MimeTypes: []string{"image/jpeg", "image/png"}},
		{Type: channel.Video, MaxBytes: 16 << 20, MimeTypes: []string{"video/mp4"}},
		{Type: channel.Document, MaxBytes: 100 << 20, MimeTypes: []string{"application/pdf"}},
	}, c.TemplateHeaderMedia)
	// The declaration is a copy: a caller cannot change the adapter's limits.
	c.Media[0].MaxBytes = 1
	assert.Equal(t, int64(5<<20), whatsapp.New(whatsapp.Config{}).Capabilities().Media[0].MaxBytes)
}
