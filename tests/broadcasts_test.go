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
