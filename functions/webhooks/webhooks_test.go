package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
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
	"github.com/botplatform/api/shared/logtest"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	tgfake "github.com/botplatform/api/tests/fakes/telegram"
	vkfake "github.com/botplatform/api/tests/fakes/vk"
	wafake "github.com/botplatform/api/tests/fakes/whatsapp"
)

// deliveries decodes what the webhooks enqueued: runtime messages only.
func (f *fixture) deliveries(t *testing.T) []channel.Delivery {
	t.Helper()
	msgs := f.q.Sent()
	for _, m := range msgs {
		require.Equal(t, channel.InboundMessage, m.Type)
	}
	return queuetest.Decode[channel.Delivery](t, msgs)
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

// memDeliveries records the statuses passed on, per bot; fail makes the next call fail.
type memDeliveries struct {
	mu    sync.Mutex
	calls int
	got   map[string][]whatsapp.MessageStatus
	fail  error
}

func (m *memDeliveries) MessageStatuses(_ context.Context, bot string, sts []whatsapp.MessageStatus) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if m.fail != nil {
		err := m.fail
		m.fail = nil
		return err
	}
	if m.got == nil {
		m.got = map[string][]whatsapp.MessageStatus{}
	}
	m.got[bot] = append(m.got[bot], sts...)
	return nil
}

func (m *memDeliveries) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls
}

func (m *memDeliveries) of(bot string) []whatsapp.MessageStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]whatsapp.MessageStatus(nil), m.got[bot]...)
}

type noAudit struct{}

func (noAudit) Publish(context.Context, audit.Event) error { return errors.New("no audit") }

type fixture struct {
	srv       *httpapitest.Server
	q         *queuetest.Sender
	chans     *memChannels
	templates *memTemplates
	delivered *memDeliveries
	log       *logtest.Buffer
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
	f := &fixture{q: &queuetest.Sender{}, templates: &memTemplates{}, delivered: &memDeliveries{}, log: &logtest.Buffer{}}
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
	s, err := New(Config{Store: st, Queue: f.q, Channels: f.chans, Templates: f.templates, Deliveries: f.delivered,
		WhatsAppVerifyToken: verifyTok, Now: time.Now, Log: log})
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
	assert.Empty(t, f.deliveries(t))
	assert.Contains(t, f.log.String(), "webhook delivery failed verification")
	assert.NotContains(t, f.log.String(), "/start")
	assert.NotContains(t, f.log.String(), "forged")

	// Unknown channel, a channel of another type, a malformed id: 404.
	for _, p := range []string{"/webhooks/telegram/" + ids.New("ch"), "/webhooks/telegram/" + f.vk.ID, "/webhooks/telegram/nope"} {
		w := f.post(t, p, update, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
		assert.Equal(t, 404, w.Code, p)
	}
	assert.Empty(t, f.deliveries(t))

	// The real thing: 200 and one message for the runtime.
	w := f.post(t, path, update, "X-Telegram-Bot-Api-Secret-Token", tgSecret)
	require.Equal(t, 200, w.Code, w.Body)
	got := f.deliveries(t)
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
	assert.Len(t, f.deliveries(t), 1)

	// The queue is down: 503 (Telegram retries), and no marker, so the retry is enqueued.
	f.q.Fail(errors.New("queue down"))
	next := tg.TextUpdate(user, "hello")
	assert.Equal(t, 503, f.post(t, path, next, "X-Telegram-Bot-Api-Secret-Token", tgSecret).Code)
	f.q.Fail(nil)
	assert.Equal(t, 200, f.post(t, path, next, "X-Telegram-Bot-Api-Secret-Token", tgSecret).Code)
	assert.Len(t, f.deliveries(t), 2)

	// An update kind the runtime ignores (an edit): 200, nothing enqueued.
	assert.Equal(t, 200, f.post(t, path, tg.EditedUpdate(user, "x"), "X-Telegram-Bot-Api-Secret-Token", tgSecret).Code)
	assert.Len(t, f.deliveries(t), 2)

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
	assert.Empty(t, f.deliveries(t))
	w = post(msg, key)
	require.Equal(t, 200, w.Code)
	assert.Equal(t, "ok", w.Body)
	w = post(msg, key) // VK's retry
	assert.Equal(t, "ok", w.Body)
	got := f.deliveries(t)
	require.Len(t, got, 1)
	assert.Equal(t, "99", got[0].Inbound.UserID)
	assert.Equal(t, msg.EventID, got[0].Inbound.UpdateID)

	// Other events are acknowledged and ignored.
	w = post(vkfake.Other(vkGroup, "group_join", map[string]any{"user_id": 1}), key)
	assert.Equal(t, "ok", w.Body)
	assert.Len(t, f.deliveries(t), 1)
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
	assert.Empty(t, f.deliveries(t))
	w = f.post(t, "/webhooks/whatsapp", body, "X-Hub-Signature-256", wafake.Sign(body))
	require.Equal(t, 200, w.Code, w.Body)
	w = f.post(t, "/webhooks/whatsapp", body, "X-Hub-Signature-256", wafake.Sign(body))
	require.Equal(t, 200, w.Code)
	got := f.deliveries(t)
	require.Len(t, got, 1)
	assert.Equal(t, f.wa.ID, got[0].ChannelID)
	assert.Equal(t, id, got[0].Inbound.UpdateID)
	assert.Equal(t, "hello", got[0].Inbound.Text)

	// A number no channel has: 404, nothing enqueued.
	other, _ := wafake.TextMessage("999", "15550001111", "Ann", "hello")
	assert.Equal(t, 404, f.post(t, "/webhooks/whatsapp", other, "X-Hub-Signature-256", wafake.Sign(other)).Code)
	assert.Len(t, f.deliveries(t), 1)

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

// The statuses of sent messages go to Deliveries with the bot of the number that sent them:
// delivered, read and failed ("sent" repeats the send's answer and is not passed on); a
// number no channel has is 404 as for messages, unless the delivery names a known one too;
// a failure of Deliveries is a 5xx, so that Meta redelivers, and the redelivery enqueues no
// message twice.
func TestWhatsAppMessageStatuses(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	post := func(body []byte) httpapitest.Reply {
		return f.post(t, "/webhooks/whatsapp", body, "X-Hub-Signature-256", wafake.Sign(body))
	}
	at := time.Unix(1750030080, 0).UTC()
	st := func(id, status string) wafake.Status {
		return wafake.Status{MessageID: id, RecipientID: "15550001111", Status: status, At: at}
	}

	w := post(wafake.StatusUpdate(waNumber, st("wamid.1", "sent"), st("wamid.1", "delivered"), st("wamid.2", "read"),
		wafake.Status{MessageID: "wamid.3", RecipientID: "15550001111", Status: "failed", At: at, ErrorCode: 131049,
			ErrorTitle: "This message was not delivered to maintain healthy ecosystem engagement."}))
	require.Equal(t, 200, w.Code, w.Body)
	assert.Equal(t, []whatsapp.MessageStatus{
		{PhoneNumberID: waNumber, MessageID: "wamid.1", Status: "delivered", At: at, RecipientID: "15550001111"},
		{PhoneNumberID: waNumber, MessageID: "wamid.2", Status: "read", At: at, RecipientID: "15550001111"},
		{PhoneNumberID: waNumber, MessageID: "wamid.3", Status: "failed", At: at, RecipientID: "15550001111", ErrorCode: "131049",
			ErrorTitle: "This message was not delivered to maintain healthy ecosystem engagement."},
	}, f.delivered.of(f.wa.BotID))
	assert.Empty(t, f.deliveries(t), "a status is not a message")

	// Only "sent": nothing to pass on, still a success.
	calls := f.delivered.count()
	w = post(wafake.StatusUpdate(waNumber, st("wamid.4", "sent")))
	require.Equal(t, 200, w.Code, w.Body)
	assert.Equal(t, calls, f.delivered.count())

	// A status without a timestamp is stamped on arrival.
	before := time.Now().Add(-time.Second)
	noTime := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages","value":{
		"metadata":{"phone_number_id":"` + waNumber + `"},"statuses":[{"id":"wamid.5","status":"delivered","recipient_id":"1"}]}}]}]}`)
	require.Equal(t, 200, post(noTime).Code)
	got := f.delivered.of(f.wa.BotID)
	assert.WithinRange(t, got[len(got)-1].At, before, time.Now().Add(time.Second))

	// Statuses of a number no channel has: 404, as its messages would be; not passed on.
	n := len(f.delivered.of(f.wa.BotID))
	w = post(wafake.StatusUpdate("999", st("wamid.6", "delivered")))
	assert.Equal(t, 404, w.Code, w.Body)
	// Beside a known number's: a success, the known number's statuses passed on.
	both := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[
		{"field":"messages","value":{"metadata":{"phone_number_id":"999"},"statuses":[{"id":"wamid.7","status":"read","timestamp":"1750030080"}]}},
		{"field":"messages","value":{"metadata":{"phone_number_id":"` + waNumber + `"},"statuses":[{"id":"wamid.8","status":"read","timestamp":"1750030080"}]}}]}]}`)
	require.Equal(t, 200, post(both).Code)
	got = f.delivered.of(f.wa.BotID)
	require.Len(t, got, n+1)
	assert.Equal(t, "wamid.8", got[n].MessageID)

	// Deliveries fails: 5xx (Meta redelivers); the message in the same delivery was
	// enqueued, and its redelivery is not enqueued again.
	msg, msgID := wafake.TextMessage(waNumber, "15550001111", "Ann", "hi")
	var batch map[string]any
	require.NoError(t, json.Unmarshal(msg, &batch))
	value := batch["entry"].([]any)[0].(map[string]any)["changes"].([]any)[0].(map[string]any)["value"].(map[string]any)
	value["statuses"] = []any{map[string]any{"id": "wamid.9", "status": "delivered", "timestamp": "1750030080", "recipient_id": "15550001111"}}
	mixed, err := json.Marshal(batch)
	require.NoError(t, err)
	f.delivered.mu.Lock()
	f.delivered.fail = errors.New("store unavailable")
	f.delivered.mu.Unlock()
	w = post(mixed)
	assert.GreaterOrEqual(t, w.Code, 500, w.Body)
	w = post(mixed)
	require.Equal(t, 200, w.Code, w.Body)
	got = f.delivered.of(f.wa.BotID)
	assert.Equal(t, "wamid.9", got[len(got)-1].MessageID)
	q := f.deliveries(t)
	require.Len(t, q, 1, "the message was enqueued once")
	assert.Equal(t, msgID, q[0].Inbound.UpdateID)
	assert.False(t, strings.Contains(f.log.String(), "15550001111"), "no phone number in the log")
}
