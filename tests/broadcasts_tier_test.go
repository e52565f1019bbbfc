package tests

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

// A WhatsApp broadcast to people outside their service window goes out as the approved
// template, no further than the number's messaging tier allows in 24 hours (the fake's
// number is at TIER_50): fifty templates, then the rest wait, planned, in a running
// broadcast; nothing is failed or lost. Someone without a template outside the window
// would be failed outside_window instead (TestBroadcastsSendOnce covers the other channels).
func TestBroadcastWhatsAppTierCap(t *testing.T) {
	t.Parallel()
	s, wa := startWhatsApp(t)
	tok, bot := s.demo.Token, s.demo.BotID
	api := "/api/bots/" + bot
	r := s.post(tok, api+"/channels", map[string]any{"type": "whatsapp", "credentials": wa.Credentials()})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	templates := api + "/channels/" + r.JSON(t)["id"].(string) + "/templates"
	r = s.post(tok, templates, map[string]any{"name": "spring_sale", "language": "en_US", "category": "marketing", "components": []any{
		map[string]any{"type": "BODY", "text": "Our spring sale starts today."},
	}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.NoError(t, wa.Approve("spring_sale", "en_US"))
	require.Equal(t, http.StatusOK, s.post(tok, templates+"/sync", nil).Status)
	wa.SetMessagingTier(fakewhatsapp.PhoneNumberID, "TIER_50")

	const n = 60
	for i := range n {
		r := s.post(tok, api+"/subscribers", map[string]any{"channel": "whatsapp", "external_id": fmt.Sprint(4915100000000 + i)})
		require.Less(t, r.Status, 300, "%s", r.Body)
	}
	r = s.post(tok, api+"/content", map[string]any{"type": "message", "name": "Sale", "draft": map[string]any{"text": "Spring sale"}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)
	require.Equal(t, http.StatusOK, s.post(tok, api+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1}).Status)
	r = s.post(tok, api+"/broadcasts", map[string]any{"name": "Spring", "channels": []string{"whatsapp"}, "content": map[string]any{"document_id": doc},
		"whatsapp_template": map[string]any{"name": "spring_sale", "language": "en_US"}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	one := api + "/broadcasts/" + r.JSON(t)["id"].(string)
	require.Equal(t, http.StatusOK, s.post(tok, one+"/schedule", map[string]any{"expected_revision": 1, "confirm": true}).Status)

	templatesSent := func() int {
		c := 0
		for _, m := range wa.Messages() {
			if m.Type == "template" {
				c++
			}
		}
		return c
	}
	eventually(t, 60*time.Second, "the tier's fifty templates", func() bool { return templatesSent() >= 50 })
	// The next steps find no room: they send nothing. Two steps' time (5 s each) is the
	// only way to see that nothing more happens.
	time.Sleep(12 * time.Second)
	assert.Equal(t, 50, templatesSent(), "no more than the tier allows")

	r = s.get(tok, one+"/report")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	ch := r.JSON(t)["channels"].([]any)[0].(map[string]any)
	assert.EqualValues(t, n, ch["planned"])
	assert.EqualValues(t, 50, ch["sent"])
	assert.EqualValues(t, 10, ch["pending"], "the rest wait for room")
	assert.Empty(t, ch["failed"])
	assert.Equal(t, "running", s.get(tok, one).JSON(t)["status"])
}
