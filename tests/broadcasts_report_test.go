package tests

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

// What a second-generation broadcast's report says after the send: WhatsApp's delivery and
// read receipts (its signed statuses webhook), failures the provider reports later, and the
// clicks on tracked link buttons, each counted once per recipient.

// startMixed is startConversation (a Telegram channel, a public URL) with a WhatsApp channel
// connected too, over the API, against a fake Graph API that signs its webhooks with the
// Meta app's secret the process holds.
func startMixed(t *testing.T) (*conversation, *fakewhatsapp.Server) {
	t.Helper()
	tg := fake.New(t)
	wa := fakewhatsapp.New(t)
	bot := tg.AddBot("shop_bot")
	port := freePort(t)
	c := &conversation{tg: tg, bot: bot, dir: t.TempDir(),
		args: []string{"--addr", "127.0.0.1:" + port, "--public-url", "http://127.0.0.1:" + port, "--telegram-base-url", tg.URL,
			"--whatsapp-base-url", wa.URL(), "--whatsapp-app-id", fakewhatsapp.AppID}}
	c.s = startWithEnv(t, c.dir, []string{"WHATSAPP_APP_SECRET=" + fakewhatsapp.AppSecret, "WHATSAPP_VERIFY_TOKEN=" + whatsappVerifyToken}, c.args...)
	c.s.secret(bot.Token)
	c.s.mu.Lock()
	c.s.secrets[fakewhatsapp.AccessToken] = 1 // the client sends it: its one showing
	c.s.mu.Unlock()
	c.s.admin("channel", "connect", "--bot", c.s.demo.BotID, "--type", "telegram", "--token", bot.Token, "--base-url", tg.URL)
	var ok bool
	c.hook, ok = tg.Webhook(bot)
	require.True(t, ok, "the channel registered its webhook")
	r := c.s.post(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/channels", map[string]any{"type": "whatsapp", "credentials": wa.Credentials()})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	return c, wa
}

// reportRecipient is a row of GET .../recipients with the engagement times.
type reportRecipient struct {
	SubscriberID string     `json:"subscriber_id"`
	Channel      string     `json:"channel"`
	State        string     `json:"state"`
	Reason       string     `json:"reason"`
	MessageID    string     `json:"message_id"`
	DeliveredAt  *time.Time `json:"delivered_at"`
	ReadAt       *time.Time `json:"read_at"`
	ClickedAt    *time.Time `json:"clicked_at"`
}

// reportChannel is one channel of GET .../report; the pointers are the counts that may be
// null.
type reportChannel struct {
	Channel   string           `json:"channel"`
	Planned   int64            `json:"planned"`
	Sent      int64            `json:"sent"`
	Delivered *int64           `json:"delivered"`
	Read      *int64           `json:"read"`
	Clicked   *int64           `json:"clicked"`
	Failed    map[string]int64 `json:"failed"`
}

// broadcastReport reads the report (checked against the OpenAPI document), by channel.
func broadcastReport(t *testing.T, s *server, one string) map[string]reportChannel {
	t.Helper()
	r := s.get(s.demo.Token, one+"/report")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/broadcasts/{broadcastID}/report", one+"/report", r)
	var rep struct {
		Channels []reportChannel `json:"channels"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	out := map[string]reportChannel{}
	for _, c := range rep.Channels {
		out[c.Channel] = c
	}
	return out
}

// broadcastRecipients reads the broadcast's rows (one page: the tests' broadcasts are small),
// by subscriber.
func broadcastRecipients(t *testing.T, s *server, one string) map[string]reportRecipient {
	t.Helper()
	r := s.get(s.demo.Token, one+"/recipients?limit=100")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/broadcasts/{broadcastID}/recipients", one+"/recipients", r)
	var page struct {
		Data       []reportRecipient `json:"data"`
		NextCursor *string           `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &page))
	require.Nil(t, page.NextCursor, "one page")
	out := map[string]reportRecipient{}
	for _, row := range page.Data {
		out[row.SubscriberID] = row
	}
	return out
}

// sendBroadcast publishes a message document with draft as its body, broadcasts it to every
// subscriber over channels, and waits until the broadcast completes; it returns its path.
func sendBroadcast(t *testing.T, s *server, name string, draft map[string]any, channels ...string) string {
	t.Helper()
	api := "/api/bots/" + s.demo.BotID
	r := s.post(s.demo.Token, api+"/content", map[string]any{"type": "message", "name": name, "draft": draft})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)
	r = s.post(s.demo.Token, api+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = s.post(s.demo.Token, api+"/broadcasts", map[string]any{"name": name, "channels": channels, "content": map[string]any{"document_id": doc}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	one := api + "/broadcasts/" + r.JSON(t)["id"].(string)
	r = s.post(s.demo.Token, one+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	eventually(t, 60*time.Second, "the broadcast completes", func() bool {
		r := s.get(s.demo.Token, one)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		st := r.JSON(t)["status"]
		require.NotContains(t, []any{"failed", "canceled", "paused"}, st, "the broadcast stopped: %s", r.Body)
		return st == "completed"
	})
	return one
}

// A broadcast on WhatsApp and Telegram to subscribers who wrote within the last 24 hours:
// WhatsApp's statuses, delivered by its signed webhook in the order and with the
// repetitions Meta allows (sent first, a duplicate, a read before its delivered, a failure
// after the send was accepted), are counted once per recipient: the report's whatsapp
// delivered and read are exact, the failure moves its recipient from sent to failed
// (undeliverable), and Telegram, whose provider reports neither, shows null for both. The
// rows carry delivered_at and read_at.
func TestBroadcastReportWhatsAppDeliveries(t *testing.T) {
	t.Parallel()
	c, wa := startMixed(t)
	s, tok := c.s, c.s.demo.Token
	api := "/api/bots/" + s.demo.BotID
	seen := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	waIDs := []string{"4915110000001", "4915110000002", "4915110000003", "4915110000004", "4915110000005"}
	subOf := map[string]string{} // wa_id -> subscriber id
	for _, id := range waIDs {
		r := s.post(tok, api+"/subscribers", map[string]any{"channel": "whatsapp", "external_id": id, "last_seen_at": seen})
		require.Less(t, r.Status, 300, "%s", r.Body)
		subOf[id] = r.JSON(t)["id"].(string)
	}
	var tgSubs []string
	for i := range 2 {
		r := s.post(tok, api+"/subscribers", map[string]any{"channel": "telegram", "external_id": fmt.Sprint(9100 + i), "last_seen_at": seen})
		require.Less(t, r.Status, 300, "%s", r.Body)
		tgSubs = append(tgSubs, r.JSON(t)["id"].(string))
	}

	one := sendBroadcast(t, s, "Spring", map[string]any{"text": "Spring sale starts today"}, "whatsapp", "telegram")
	sent := wa.Messages()
	require.Len(t, sent, len(waIDs), "one WhatsApp message per subscriber")
	msg := map[string]string{} // wa_id -> wamid
	for _, m := range sent {
		assert.Equal(t, "text", m.Type, "inside the window: the message itself, not a template")
		msg[m.To] = m.ID
	}
	require.Len(t, msg, len(waIDs))
	assert.Len(t, c.tg.AllSent(), 2)

	before := broadcastReport(t, s, one)
	assert.EqualValues(t, 5, before["whatsapp"].Sent)
	require.NotNil(t, before["whatsapp"].Delivered, "WhatsApp reports deliveries")
	require.NotNil(t, before["whatsapp"].Read, "WhatsApp reports reads")
	assert.Zero(t, *before["whatsapp"].Delivered)
	assert.Zero(t, *before["whatsapp"].Read)

	hook := s.base + "/webhooks/whatsapp"
	deliver := func(status string, ids ...string) {
		t.Helper()
		var wamids []string
		for _, id := range ids {
			wamids = append(wamids, msg[id])
		}
		code, err := wa.DeliverStatus(hook, status, wamids...)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code, "%s of %v", status, ids)
	}
	ann, bob, cat, dan, eve := waIDs[0], waIDs[1], waIDs[2], waIDs[3], waIDs[4]
	deliver("sent", waIDs...) // says nothing the send's answer did not
	after := broadcastReport(t, s, one)
	assert.Zero(t, *after["whatsapp"].Delivered, "sent is not delivered")

	deliver("delivered", ann, bob, cat)
	deliver("read", ann, bob)
	deliver("delivered", cat) // a duplicate, in another batch
	body, err := wa.MessageStatus("delivered", msg[cat])
	require.NoError(t, err)
	for range 2 { // Meta redelivers a batch it thinks failed
		code, err := wa.Deliver(hook, body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	deliver("read", dan) // read before delivered: Meta skips delivered when both happen at once
	deliver("delivered", dan)
	deliver("failed", eve)
	deliver("delivered", ann) // late, after the read: changes nothing

	rep := broadcastReport(t, s, one)
	w := rep["whatsapp"]
	assert.EqualValues(t, 5, w.Planned)
	assert.EqualValues(t, 4, w.Sent, "the failed message's recipient left sent")
	require.NotNil(t, w.Delivered)
	require.NotNil(t, w.Read)
	assert.EqualValues(t, 4, *w.Delivered, "ann, bob, cat and dan: each once")
	assert.EqualValues(t, 3, *w.Read, "ann, bob and dan")
	assert.Equal(t, map[string]int64{"undeliverable": 1}, w.Failed)
	tgr := rep["telegram"]
	assert.EqualValues(t, 2, tgr.Sent)
	assert.Nil(t, tgr.Delivered, "Telegram reports no delivery")
	assert.Nil(t, tgr.Read, "Telegram reports no read")
	require.NotNil(t, tgr.Clicked, "links are tracked in this deployment")
	assert.Zero(t, *tgr.Clicked)

	rows := broadcastRecipients(t, s, one)
	require.Len(t, rows, 7)
	for _, id := range []string{ann, bob, cat, dan} {
		row := rows[subOf[id]]
		assert.Equal(t, "sent", row.State, id)
		assert.Equal(t, msg[id], row.MessageID, "the row names the message the provider answered")
		assert.NotNil(t, row.DeliveredAt, "%s delivered", id)
	}
	for _, id := range []string{ann, bob, dan} {
		row := rows[subOf[id]]
		if assert.NotNil(t, row.ReadAt, "%s read", id) && row.DeliveredAt != nil {
			assert.False(t, row.DeliveredAt.After(*row.ReadAt), "%s: delivered no later than read", id)
		}
	}
	assert.Nil(t, rows[subOf[cat]].ReadAt, "cat did not read")
	failed := rows[subOf[eve]]
	assert.Equal(t, "failed", failed.State)
	assert.Equal(t, "undeliverable", failed.Reason)
	assert.Nil(t, failed.DeliveredAt)
	for _, sub := range tgSubs {
		row := rows[sub]
		assert.Equal(t, "sent", row.State)
		assert.Nil(t, row.DeliveredAt, "Telegram rows carry no delivery")
		assert.Nil(t, row.ReadAt)
	}

	// A status of a message no broadcast sent (a conversation's reply) changes nothing;
	// statuses of a number this platform does not serve are refused, as its messages are.
	code, err := wa.Deliver(hook, fakewhatsapp.StatusUpdate(fakewhatsapp.PhoneNumberID,
		fakewhatsapp.Status{MessageID: "wamid.HBgLnotabroadcast", RecipientID: ann, Status: "read"}))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, code)
	code, err = wa.Deliver(hook, fakewhatsapp.StatusUpdate("999000111", fakewhatsapp.Status{MessageID: msg[cat], RecipientID: cat, Status: "read"}))
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, code)
	// A forged status is refused before anything is read.
	forged := fakewhatsapp.StatusUpdate(fakewhatsapp.PhoneNumberID, fakewhatsapp.Status{MessageID: msg[cat], RecipientID: cat, Status: "read"})
	r := s.do(req{Method: http.MethodPost, Path: "/webhooks/whatsapp", Body: forged, Headers: map[string]string{"X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}})
	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)
	assert.Equal(t, rep, broadcastReport(t, s, one), "nothing changed")
}

// A link button of a second-generation broadcast goes out as a tracked URL on the
// deployment's public address; a click redirects (302) to the button's own URL and counts
// the recipient once however often they click, on whichever of the message's links; a
// tampered token is 404; the report counts recipients who clicked.
func TestBroadcastReportClicks(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s, tok := c.s, c.s.demo.Token
	api := "/api/bots/" + s.demo.BotID
	chats := []int64{9200, 9201}
	var subs []string
	for _, chat := range chats {
		r := s.post(tok, api+"/subscribers", map[string]any{"channel": "telegram", "external_id": fmt.Sprint(chat)})
		require.Less(t, r.Status, 300, "%s", r.Body)
		subs = append(subs, r.JSON(t)["id"].(string))
	}
	const shop, terms = "https://shop.example/spring?utm_source=bot&x=1", "https://shop.example/terms#returns"
	one := sendBroadcast(t, s, "Links", map[string]any{"text": "Spring sale", "buttons": []any{
		map[string]any{"title": "Shop now", "url": shop},
		map[string]any{"title": "Not now", "payload": "LATER"},
		map[string]any{"title": "Terms", "url": terms},
	}}, "telegram")

	base := c.args[slices.Index(c.args, "--public-url")+1]
	public := base + "/b/c/"
	links := func(chat int64) (shopURL, termsURL string) {
		t.Helper()
		sent := c.tg.Sent(chat)
		require.Len(t, sent, 1)
		var urls []string
		for _, row := range sent[0].Buttons {
			for _, b := range row {
				switch {
				case b.URL != "":
					urls = append(urls, b.URL)
				default:
					assert.Equal(t, "LATER", b.CallbackData, "a reply button is not a link")
				}
			}
		}
		require.Len(t, urls, 2, "%+v", sent[0].Buttons)
		for _, u := range urls {
			require.True(t, strings.HasPrefix(u, public), "%s is a tracked link on the public URL", u)
		}
		return urls[0], urls[1]
	}
	shopA, termsA := links(chats[0])
	shopB, _ := links(chats[1])
	assert.NotEqual(t, shopA, shopB, "each recipient's link is their own")

	noRedirect := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	click := func(link string) resp {
		t.Helper()
		res, err := noRedirect.Get(link)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return resp{Status: res.StatusCode, Header: res.Header, Body: b}
	}
	path := func(link string) string { return strings.TrimPrefix(link, base) }

	for range 2 {
		r := click(shopA)
		require.Equal(t, http.StatusFound, r.Status, "%s", r.Body)
		assert.Equal(t, shop, r.Header.Get("Location"))
		conforms(t, http.MethodGet, "/b/c/{token}", path(shopA), r)
	}
	r := click(termsA)
	require.Equal(t, http.StatusFound, r.Status, "%s", r.Body)
	assert.Equal(t, terms, r.Header.Get("Location"), "the token's link, not the first")

	// Tampered: a changed character of the signed part, and the link index rewritten
	// without the signature that covers it.
	token := strings.TrimPrefix(shopA, public)
	flipped := []byte(token)
	flipped[0] = map[bool]byte{true: 'B', false: 'A'}[flipped[0] == 'A']
	payload, sig, ok := strings.Cut(token, ".")
	require.True(t, ok, "token %s", token)
	raw, err := base64.RawURLEncoding.DecodeString(payload)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(raw), ".0"), "the shop button is link 0: %q", raw)
	relinked := base64.RawURLEncoding.EncodeToString([]byte(strings.TrimSuffix(string(raw), ".0")+".1")) + "." + sig
	for name, tampered := range map[string]string{"flipped": string(flipped), "relinked": relinked, "unsigned": payload} {
		r := click(public + tampered)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s: %s", name, r.Body)
		assert.Empty(t, r.Header.Get("Location"), name)
		conforms(t, http.MethodGet, "/b/c/{token}", path(public+tampered), r)
	}

	rep := broadcastReport(t, s, one)["telegram"]
	require.NotNil(t, rep.Clicked, "links are tracked in this deployment")
	assert.EqualValues(t, 1, *rep.Clicked, "one recipient clicked, however often")
	assert.Nil(t, rep.Delivered)
	rows := broadcastRecipients(t, s, one)
	assert.NotNil(t, rows[subs[0]].ClickedAt, "the clicker")
	assert.Nil(t, rows[subs[1]].ClickedAt, "the other recipient did not click")

	// The other recipient's click counts them too.
	r = click(shopB)
	require.Equal(t, http.StatusFound, r.Status, "%s", r.Body)
	assert.Equal(t, shop, r.Header.Get("Location"))
	assert.EqualValues(t, 2, *broadcastReport(t, s, one)["telegram"].Clicked)
}
