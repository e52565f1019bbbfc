package tests

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A second-generation broadcast end to end against the fake Telegram: a draft, 400 without
// confirm, 409 naming unpublished content, 422 naming a channel without content, then a
// launch that reaches every Telegram subscriber exactly once, its report and recipients, and
// the shared GET.
func TestBroadcastsSendOnce(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s, tok, bot := c.s, c.s.demo.Token, c.s.demo.BotID
	const n = 12
	for i := range n {
		r := s.post(tok, "/api/bots/"+bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": fmt.Sprint(7000 + i)})
		require.Less(t, r.Status, 300, "%s", r.Body)
	}
	r := s.post(tok, "/api/bots/"+bot+"/content", map[string]any{"type": "message", "name": "Sale", "draft": map[string]any{"text": "Spring sale, {{ subscriber.channel }}"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)

	base := "/api/bots/" + bot + "/broadcasts"
	r = s.post(tok, base, map[string]any{"name": "Spring", "channels": []string{"telegram"}, "content": map[string]any{"document_id": doc}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/bots/{botID}/broadcasts", base, r)
	id := r.JSON(t)["id"].(string)
	one := base + "/" + id

	r = s.post(tok, one+"/schedule", map[string]any{"expected_revision": 1})
	assert.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Equal(t, "confirmation_required", r.Code(t))

	r = s.post(tok, one+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "broadcast_not_ready", r.Code(t))
	assert.Contains(t, string(r.Body), "unpublished_content")

	r = s.patch(tok, one, map[string]any{"expected_revision": 1, "channels": []string{"telegram", "vk"}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.patch(tok, one, map[string]any{"expected_revision": 1, "name": "stale"})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "stale_revision", r.Code(t))

	r = s.post(tok, "/api/bots/"+bot+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.patch(tok, one, map[string]any{"expected_revision": 2, "content": map[string]any{"channels": map[string]string{"telegram": doc}}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.post(tok, one+"/schedule", map[string]any{"expected_revision": 3, "confirm": true})
	require.Equal(t, 422, r.Status, "%s", r.Body)
	assert.Equal(t, "broadcast_content_invalid", r.Code(t))
	assert.Contains(t, string(r.Body), "content.channels.vk")

	r = s.patch(tok, one, map[string]any{"expected_revision": 3, "channels": []string{"telegram"}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.post(tok, one+"/preflight", map[string]any{})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/bots/{botID}/broadcasts/{broadcastID}/preflight", one+"/preflight", r)
	assert.EqualValues(t, n, r.JSON(t)["recipients"].(map[string]any)["telegram"])
	assert.Empty(t, c.tg.AllSent(), "preflight sends nothing")

	r = s.post(tok, one+"/schedule", map[string]any{"expected_revision": 4, "confirm": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	eventually(t, 30*time.Second, "the broadcast completes", func() bool {
		r := s.get(tok, one)
		return r.Status == 200 && r.JSON(t)["status"] == "completed"
	})
	for i := range n {
		assert.Len(t, c.tg.Sent(int64(7000+i)), 1, "chat %d got the broadcast once", 7000+i)
	}
	r = s.get(tok, one+"/report")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/broadcasts/{broadcastID}/report", one+"/report", r)
	ch := r.JSON(t)["channels"].([]any)[0].(map[string]any)
	assert.EqualValues(t, n, ch["sent"])
	assert.Nil(t, ch["delivered"], "Telegram reports no delivery")

	r = s.get(tok, one+"/recipients?limit=5")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/broadcasts/{broadcastID}/recipients", one+"/recipients", r)
	assert.Len(t, r.JSON(t)["data"], 5)
	assert.NotNil(t, r.JSON(t)["next_cursor"])

	r = s.post(tok, one+"/archive", map[string]any{"expected_revision": 1})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	cur := int(s.get(tok, one).JSON(t)["revision"].(float64))
	r = s.post(tok, one+"/archive", map[string]any{"expected_revision": cur})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.get(tok, base)
	require.Equal(t, 200, r.Status)
	assert.Empty(t, r.JSON(t)["data"], "archived broadcasts are not listed by default")
	r = s.get(tok, base+"?archived=true")
	require.Equal(t, 200, r.Status)
	assert.Len(t, r.JSON(t)["data"], 1)
}

// A legacy reaction broadcast runs the reaction's published version once for every subscriber
// with one of its labels (here one of three), the shared routes find it by its id after
// looking for a second-generation one, and a paid broadcast without paid broadcasts enabled
// is 403.
func TestLegacyReactionBroadcast(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s, tok, bot := c.s, c.s.demo.Token, c.s.demo.BotID
	r := s.post(tok, "/api/bots/"+bot+"/labels", map[string]any{"name": "vip"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	vip := r.JSON(t)["id"].(string)
	for i := range 3 {
		body := map[string]any{"channel": "telegram", "external_id": fmt.Sprint(8000 + i)}
		if i == 0 {
			body["labels"] = []string{vip}
		}
		r := s.post(tok, "/api/bots/"+bot+"/subscribers", body)
		require.Less(t, r.Status, 300, "%s", r.Body)
	}
	rct := c.publish(t, `{"name":"Promo","trigger":{"type":"keyword","keywords":["promo"]},"steps":[{"id":"s","type":"send_text","text":"VIP sale"}]}`)
	start := "/api/bots/" + bot + "/reactions/" + rct + "/broadcast"

	r = s.post(tok, start, map[string]any{"paid": true, "labels": []string{vip}})
	require.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "paid_broadcasts_not_enabled", r.Code(t))

	r = s.post(tok, start, map[string]any{"paid": false, "labels": []string{vip}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	id := r.JSON(t)["id"].(string)
	one := "/api/bots/" + bot + "/broadcasts/" + id
	eventually(t, 30*time.Second, "the vip got the reaction's message", func() bool { return len(c.tg.Sent(8000)) == 1 })
	eventually(t, 30*time.Second, "the legacy broadcast completes", func() bool {
		r := s.get(tok, one)
		return r.Status == 200 && r.JSON(t)["status"] == "completed"
	})
	assert.Equal(t, []string{"VIP sale"}, texts(c.tg, 8000))
	assert.Empty(t, c.tg.Sent(8001), "no label, no message")
	assert.Empty(t, c.tg.Sent(8002), "no label, no message")
	assert.Equal(t, "reaction_broadcast", s.get(tok, one).JSON(t)["type"])

	// The shared cancel route finds the legacy broadcast (its body ignored); a completed
	// broadcast cannot be canceled.
	r = s.post(tok, one+"/cancel", map[string]any{"anything": true})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "invalid_transition", r.Code(t))
	assert.Equal(t, "completed", r.JSON(t)["state"])
}

// Broadcasts' access: another account's bot is 404, a token without broadcasts:write is
// 403, an account whose plan lacks broadcasts is 402.
func TestBroadcastsAccess(t *testing.T) {
	t.Parallel()
	s := start(t)
	other := s.newAccount("Other")
	list := "/api/bots/" + s.demo.BotID + "/broadcasts"

	r := s.get(other.Token, list)
	assert.Equal(t, 404, r.Status, "another account's bot: %s", r.Body)
	narrow := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	r = s.get(narrow, list)
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "insufficient_scope", r.Code(t))
	r = s.get(s.demo.Token, list)
	assert.Equal(t, 200, r.Status, "%s", r.Body)

	s.adminJSON("account", "plan", "--account", s.demo.AccountID, "--features", "analytics")
	eventually(t, 40*time.Second, "the narrowed plan reaches the token", func() bool { return s.get(s.demo.Token, list).Status == 402 })
	r = s.get(s.demo.Token, list)
	assert.Equal(t, "feature_not_in_plan", r.Code(t))
}
