package webhooks

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/telegram"
	"github.com/botplatform/api/shared/channel/vk"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	tgfake "github.com/botplatform/api/tests/fakes/telegram"
	vkfake "github.com/botplatform/api/tests/fakes/vk"
	wafake "github.com/botplatform/api/tests/fakes/whatsapp"
)

type memQueue struct {
	mu   sync.Mutex
	msgs []queue.Message
	fail error
}

func (q *memQueue) Send(_ context.Context, msgs ...queue.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.fail != nil {
		return q.fail
	}
	q.msgs = append(q.msgs, msgs...)
	return nil
}

func (q *memQueue) deliveries(t *testing.T) []channel.Delivery {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	out := []channel.Delivery{}
	for _, m := range q.msgs {
		require.Equal(t, channel.InboundMessage, m.Type)
		var d channel.Delivery
		require.NoError(t, m.Decode(&d))
		out = append(out, d)
	}
	return out
}

type memChannels struct {
	byID     map[string]Channel
	byKey    map[string]Channel
	adapters map[channel.Kind]channel.Adapter
}

func (c *memChannels) Resolve(_ context.Context, id string) (Channel, error) {
	ch, ok := c.byID[id]
	if !ok {
		return Channel{}, ErrUnknownChannel
	}
	return ch, nil
}

func (c *memChannels) ResolveKey(_ context.Context, k channel.Kind, key string) (Channel, error) {
	ch, ok := c.byKey[string(k)+"/"+key]
	if !ok {
		return Channel{}, ErrUnknownChannel
	}
	return ch, nil
}

func (c *memChannels) Adapter(k channel.Kind) (channel.Adapter, bool) {
	a, ok := c.adapters[k]
	return a, ok
}

type memTemplates struct {
	mu  sync.Mutex
	got []whatsapp.TemplateStatus
}

func (m *memTemplates) TemplateStatus(_ context.Context, s whatsapp.TemplateStatus) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, s)
	return nil
}

type noAudit struct{}

func (noAudit) Publish(context.Context, audit.Event) error { return errors.New("no audit") }

// logBuffer collects the log for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type fixture struct {
	srv       *httpapitest.Server
	q         *memQueue
	chans     *memChannels
	templates *memTemplates
	log       *logBuffer
	tg        Channel
	vk        Channel
	wa        Channel
}

const (
	vkGroup   = int64(7001)
	vkCode    = "c0nf1rm"
	waNumber  = wafake.PhoneNumberID
	tgSecret  = "tg-secret-0123456789abcdefghijklmnopqrstuvwxyz"
	vkSecret  = "vk-secret-0123456789abcdefghijklmnopqrstuvwxyz"
	verifyTok = "verify-me"
)

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st := sqlitetest.Open(t)
	f := &fixture{q: &memQueue{}, templates: &memTemplates{}, log: &logBuffer{}}
	bot := ids.New("bot")
	f.tg = Channel{ID: ids.New("ch"), BotID: bot, AccountID: "acct_1", Kind: channel.Telegram,
		Conn: channel.Connection{WebhookSecret: tgSecret, Credentials: []byte(`{"token":"123:abc"}`)}}
	f.vk = Channel{ID: ids.New("ch"), BotID: bot, AccountID: "acct_1", Kind: channel.VK,
		Conn: channel.Connection{WebhookSecret: vkSecret, Credentials: []byte(`{"access_token":"vk1.a.x","group_id":7001,"confirmation_code":"c0nf1rm"}`)}}
	f.wa = Channel{ID: ids.New("ch"), BotID: bot, AccountID: "acct_1", Kind: channel.WhatsApp}
	f.chans = &memChannels{
		byID:  map[string]Channel{f.tg.ID: f.tg, f.vk.ID: f.vk, f.wa.ID: f.wa},
		byKey: map[string]Channel{"whatsapp/" + waNumber: f.wa},
		adapters: map[channel.Kind]channel.Adapter{
			channel.Telegram: telegram.New(telegram.Config{}),
			channel.VK:       vk.New(vk.Config{}),
			channel.WhatsApp: whatsapp.New(whatsapp.Config{AppSecret: wafake.AppSecret}),
		},
	}
	log := slog.New(slog.NewJSONHandler(f.log, nil))
	s, err := New(Config{Store: st, Queue: f.q, Channels: f.chans, Templates: f.templates, WhatsAppVerifyToken: verifyTok, Now: time.Now, Log: log})
	require.NoError(t, err)
	// The webhook routes are public: they audit nothing (noAudit fails) and know no bots.
	f.srv = httpapitest.New(t, httpapitest.Config{Now: time.Now, Store: st, Audit: noAudit{}, Log: log})
	Routes(f.srv.Mux, s)
	return f
}

// post delivers a JSON body to a webhook route, without credentials.
func (f *fixture) post(t *testing.T, path string, body []byte, header ...string) httpapitest.Reply {
	t.Helper()
	return f.srv.DoAs(t, "", http.MethodPost, path, body, append([]string{"Content-Type", "application/json"}, header...)...)
}

// code is the code of a problem reply; it fails the test for any other reply.
func code(t *testing.T, r httpapitest.Reply) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), r.Body)
	return r.Problem()
}

func TestTelegramWebhook(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tg := tgfake.New(t)
	user := tgfake.User{ID: 4242, FirstName: "Ann", LanguageCode: "en"}
	update := tg.TextUpdate(user, "/start")
	path := "/webhooks/telegram/" + f.tg.ID

	// A forged or missing secret: 401, nothing enqueued, a warning without the body.
	for _, secret := range []string{"", "forged"} {
		w := f.post(t, path, update, "X-Telegram-Bot-Api-Secret-Token", secret)
		assert.Equal(t, 401, w.Code)
		assert.Equal(t, "unauthentic_webhook", code(t, w))
	}
	assert.Empty(t, f.q.deliveries(t))
	assert.Contains(t, f.log.String(), "webhook delivery failed verification")
	assert.NotContains(t, f.log.String(), "/start")
	assert.NotContains(t, f.log.String(), "forged")

	// Unknown channel, a channel of another type, a malformed id: 404.
	for _, p := range []string{"/webhooks/telegram/" + ids.New("ch"), "/webhooks/telegram/" + f.vk.ID, "/webhooks/telegram/nope"} {
		w := f.post(t, p, update, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
		assert.Equal(t, 404, w.Code, p)
	}
	assert.Empty(t, f.q.deliveries(t))

	// The real thing: 200 and one message for the runtime.
	w := f.post(t, path, update, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
	require.Equal(t, 200, w.Code, w.Body)
	got := f.q.deliveries(t)
	require.Len(t, got, 1)
	d := got[0]
	assert.Equal(t, f.tg.ID, d.ChannelID)
	assert.Equal(t, f.tg.BotID, d.BotID)
	assert.Equal(t, "acct_1", d.AccountID)
	assert.Equal(t, channel.Telegram, d.Kind)
	assert.Equal(t, "4242", d.Inbound.UserID)
	assert.Equal(t, "/start", d.Inbound.Text)
	assert.NotEmpty(t, d.Inbound.UpdateID)
	assert.WithinDuration(t, time.Now(), d.ReceivedAt, 5*time.Second)

	// Telegram redelivers: answered 200, not enqueued again.
	w = f.post(t, path, update, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
	assert.Equal(t, 200, w.Code)
	assert.Len(t, f.q.deliveries(t), 1)

	// The queue is down: 503 (Telegram retries), and no marker, so the retry is enqueued.
	f.q.fail = errors.New("queue down")
	next := tg.TextUpdate(user, "hello")
	assert.Equal(t, 503, f.post(t, path, next, "X-Telegram-Bot-Api-Secret-Token", tgSecret).Code)
	f.q.fail = nil
	assert.Equal(t, 200, f.post(t, path, next, "X-Telegram-Bot-Api-Secret-Token", tgSecret).Code)
	assert.Len(t, f.q.deliveries(t), 2)

	// An update kind the runtime ignores (an edit): 200, nothing enqueued.
	assert.Equal(t, 200, f.post(t, path, tg.EditedUpdate(user, "x"), "X-Telegram-Bot-Api-Secret-Token", tgSecret).Code)
	assert.Len(t, f.q.deliveries(t), 2)

	// Too large: 413; not JSON: 400.
	big := append([]byte(`{"update_id":1,"x":"`), bytes.Repeat([]byte("a"), MaxBodyBytes)...)
	assert.Equal(t, 413, f.post(t, path, big, "X-Telegram-Bot-Api-Secret-Token", tgSecret).Code)
	w = f.post(t, path, []byte("not json"), "X-Telegram-Bot-Api-Secret-Token", tgSecret)
	assert.Equal(t, 400, w.Code)
	assert.Equal(t, "invalid_body", code(t, w))
}

// A body nested deeper than the platform reads is refused before any parser or signature
// check walks it, for every provider's webhook; what users typed (even bytes that are not
// UTF-8) is not the webhook's to refuse.
func TestWebhooksRefuseDeepBodies(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	deep := []byte(`{"type":"confirmation","object":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + `}`)
	for _, path := range []string{"/webhooks/telegram/" + f.tg.ID, "/webhooks/vk/" + f.vk.ID, "/webhooks/whatsapp"} {
		w := f.post(t, path, deep, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
		assert.Equal(t, 400, w.Code, path)
		assert.Equal(t, "invalid_body", code(t, w), path)
		assert.Contains(t, w.Body, "64 levels", path)
	}
}

func TestVKWebhook(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := "/webhooks/vk/" + f.vk.ID
	key := vk.SecretKey(vkSecret)
	post := func(e vkfake.Event, secret string) httpapitest.Reply {
		e.Secret = secret
		return f.post(t, path, e.JSON())
	}

	w := post(vkfake.Confirmation(vkGroup), key)
	require.Equal(t, 200, w.Code)
	assert.Equal(t, vkCode, w.Body)
	assert.Equal(t, "text/plain; charset=utf-8", w.Header.Get("Content-Type"))
	assert.Equal(t, 401, post(vkfake.Confirmation(vkGroup), "wrong").Code, "a forged confirmation learns no code")
	assert.Equal(t, 401, post(vkfake.Confirmation(vkGroup+1), key).Code)

	msg := vkfake.NewMessage(vkGroup, vkfake.InMessage{FromID: 99, ID: 5, Text: "hi"})
	assert.Equal(t, 401, post(msg, "wrong").Code)
	assert.Empty(t, f.q.deliveries(t))
	w = post(msg, key)
	require.Equal(t, 200, w.Code)
	assert.Equal(t, "ok", w.Body)
	w = post(msg, key) // VK's retry
	assert.Equal(t, "ok", w.Body)
	got := f.q.deliveries(t)
	require.Len(t, got, 1)
	assert.Equal(t, "99", got[0].Inbound.UserID)
	assert.Equal(t, msg.EventID, got[0].Inbound.UpdateID)

	// Other events are acknowledged and ignored.
	w = post(vkfake.Other(vkGroup, "group_join", map[string]any{"user_id": 1}), key)
	assert.Equal(t, "ok", w.Body)
	assert.Len(t, f.q.deliveries(t), 1)
}

func TestWhatsAppWebhook(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	get := func(q string) httpapitest.Reply {
		return f.srv.DoAs(t, "", http.MethodGet, "/webhooks/whatsapp?"+q, nil)
	}
	w := get("hub.mode=subscribe&hub.verify_token=" + verifyTok + "&hub.challenge=12345")
	require.Equal(t, 200, w.Code)
	assert.Equal(t, "12345", w.Body)
	w = get("hub.mode=subscribe&hub.verify_token=wrong&hub.challenge=12345")
	assert.Equal(t, 403, w.Code)
	assert.Equal(t, "verification_failed", code(t, w))

	body, id := wafake.TextMessage(waNumber, "15550001111", "Ann", "hello")
	w = f.post(t, "/webhooks/whatsapp", body, "X-Hub-Signature-256", "sha256=00")
	assert.Equal(t, 401, w.Code)
	assert.Empty(t, f.q.deliveries(t))
	w = f.post(t, "/webhooks/whatsapp", body, "X-Hub-Signature-256", wafake.Sign(body))
	require.Equal(t, 200, w.Code, w.Body)
	w = f.post(t, "/webhooks/whatsapp", body, "X-Hub-Signature-256", wafake.Sign(body))
	require.Equal(t, 200, w.Code)
	got := f.q.deliveries(t)
	require.Len(t, got, 1)
	assert.Equal(t, f.wa.ID, got[0].ChannelID)
	assert.Equal(t, id, got[0].Inbound.UpdateID)
	assert.Equal(t, "hello", got[0].Inbound.Text)

	// A number no channel has: 404, nothing enqueued.
	other, _ := wafake.TextMessage("999", "15550001111", "Ann", "hello")
	assert.Equal(t, 404, f.post(t, "/webhooks/whatsapp", other, "X-Hub-Signature-256", wafake.Sign(other)).Code)
	assert.Len(t, f.q.deliveries(t), 1)

	// Template review outcomes go to the template catalog.
	wa := wafake.New(t)
	wa.AddTemplate("welcome", "en_US", "UTILITY", "APPROVED", `[{"type":"BODY","text":"Hi"}]`)
	status, err := wa.TemplateStatusUpdate("welcome", "en_US")
	require.NoError(t, err)
	w = f.post(t, "/webhooks/whatsapp", status, "X-Hub-Signature-256", wafake.Sign(status))
	require.Equal(t, 200, w.Code)
	require.Len(t, f.templates.got, 1)
	assert.Equal(t, "APPROVED", f.templates.got[0].Status)
	assert.Equal(t, "welcome", f.templates.got[0].Name)
	assert.False(t, strings.Contains(f.log.String(), "15550001111"), "no phone number in the log")
}
