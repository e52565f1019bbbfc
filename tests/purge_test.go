package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// fillBot gives a bot data of every family through the API: reactions with versions,
// labels, fields, subscribers with names, labels and field values (and so the activity
// counters), an erased subscriber, a deleted label, collections with indexed records and a
// batch, a bot API token, and the request log entries of all these calls.
func fillBot(t *testing.T, s *server, botID string) {
	t.Helper()
	tok := s.demo.Token
	bot := "/api/bots/" + botID
	for i := range 3 {
		r := createReaction(t, s, tok, botID, map[string]any{"name": fmt.Sprintf("R%d", i), "trigger": map[string]any{"type": "api"},
			"steps": []any{map[string]any{"id": "a", "type": "send_text", "text": "Hi"}}})
		require.Equal(t, http.StatusOK, s.post(tok, bot+"/reactions/"+r["id"].(string)+"/publish", map[string]any{"expected_revision": 1}).Status)
	}
	vip := mustCreate(t, s.post(tok, bot+"/labels", map[string]any{"name": "VIP"}))
	old := mustCreate(t, s.post(tok, bot+"/labels", map[string]any{"name": "Old"}))
	mustCreate(t, s.post(tok, bot+"/fields", map[string]any{"name": "plan", "type": "string"}))
	var subs []string
	for i := range 12 {
		subs = append(subs, mustCreate(t, s.post(tok, bot+"/subscribers", map[string]any{
			"channel": []string{"telegram", "whatsapp", "vk"}[i%3], "external_id": fmt.Sprintf("+49151%05d", i),
			"first_name": "Anna", "last_name": fmt.Sprintf("Jones%d", i), "fields": map[string]any{"plan": "pro"},
			"labels": []string{vip, old},
		})))
	}
	require.Equal(t, http.StatusNoContent, s.del(tok, bot+"/subscribers/"+subs[0]).Status)
	require.Equal(t, http.StatusNoContent, s.del(tok, bot+"/labels/"+old).Status)
	col := bot + "/collections/" + mustCreate(t, s.post(tok, bot+"/collections", productsBody))
	for i := range 5 {
		mustCreate(t, s.post(tok, col+"/records", map[string]any{"external_key": fmt.Sprintf("sku-%d", i),
			"values": map[string]any{"sku": fmt.Sprint(i), "in_stock": true}}))
	}
	require.Equal(t, http.StatusOK, s.post(tok, col+"/records/batch", map[string]any{"records": []any{
		map[string]any{"external_key": "b-1", "values": map[string]any{"sku": "b1"}},
		map[string]any{"external_key": "sku-1", "values": map[string]any{"in_stock": false}},
	}}).Status)
	require.Equal(t, http.StatusCreated, s.post(tok, bot+"/api-tokens", map[string]any{"name": "ci"}).Status)
	require.Equal(t, http.StatusOK, s.get(tok, bot+"/request-logs").Status)
}

// leftovers returns what the store still holds that names bot, but for its audit trail
// (kept for its retention period) and the purge's own second pass, waiting in the queue.
func leftovers(t *testing.T, st *sqlite.Store, bot string) (left []string, sweep bool) {
	t.Helper()
	items, err := st.Mentioning(t.Context(), bot)
	require.NoError(t, err)
	for _, it := range items {
		if strings.HasPrefix(it.PK, "AUDIT#") {
			continue
		}
		if it.PK == "QUEUE#jobs" {
			if kind := sweepKind(t, it); kind != "" {
				sweep = sweep || kind == purge.Job
				continue
			}
		}
		left = append(left, it.PK+" "+it.SK)
	}
	return left, sweep
}

// sweepKind is the job kind of a queued second pass due only after most of purge.SweepDelay: the bot
// purge's own, or that of a subscriber's erasure (purge.EraseJob; subscribers.erase_events
// before it), which erased what was kept about the subscriber at once and looks again later
// for late writes; run after the bot is gone, it finds nothing and ends.
func sweepKind(t *testing.T, it store.Item) string {
	t.Helper()
	var msg struct {
		Body struct {
			Kind string `json:"kind"`
		} `json:"body"`
		VisibleAt time.Time `json:"visible_at"`
	}
	require.NoError(t, json.Unmarshal(it.Data, &msg))
	if (msg.Body.Kind == purge.Job || msg.Body.Kind == purge.EraseJob || msg.Body.Kind == "subscribers.erase_events") && time.Until(msg.VisibleAt) > purge.SweepDelay/2 {
		return msg.Body.Kind
	}
	return ""
}

// settled returns what names bot once the server's buffered request log entries are written
// (it flushes every 100 ms).
func settled(t *testing.T, st *sqlite.Store, bot string) []store.Item {
	t.Helper()
	var last []store.Item
	for range 100 {
		items, err := st.Mentioning(t.Context(), bot)
		require.NoError(t, err)
		if last != nil && len(items) == len(last) {
			return items
		}
		last = items
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatal("the store keeps changing")
	return nil
}

func TestDeletedBotIsErased(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := s.demo.Token
	doomed := mustCreate(t, s.post(tok, "/api/bots", map[string]any{"name": "Doomed"}))
	fillBot(t, s, doomed)
	fillBot(t, s, s.demo.BotID) // the account's other bot keeps everything

	// Another process may open the store while the server runs (the admin CLI does).
	st, err := sqlite.Open(filepath.Join(s.dataDir, "store.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	kept := settled(t, st, s.demo.BotID)
	before, _ := leftovers(t, st, doomed)
	require.Greater(t, len(before), 80, "the bot has data in every family")

	require.Equal(t, http.StatusNoContent, s.del(tok, "/api/bots/"+doomed).Status)
	assert.Equal(t, http.StatusNotFound, s.get(tok, "/api/bots/"+doomed).Status, "gone at once")
	assert.Equal(t, http.StatusNotFound, s.get(tok, "/api/bots/"+doomed+"/subscribers").Status)

	var left []string
	sweep := false
	for deadline := time.Now().Add(30 * time.Second); ; {
		if left, sweep = leftovers(t, st, doomed); len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	assert.Empty(t, left, "everything of the deleted bot is erased")
	assert.True(t, sweep, "the second pass waits in the queue")

	events := s.get(tok, "/api/audit-events?bot_id="+doomed).JSON(t)["data"].([]any)
	assert.Equal(t, "DELETE /api/bots/{botID}", events[0].(map[string]any)["route"], "the audit trail outlives the bot")
	assert.Equal(t, kept, settled(t, st, s.demo.BotID), "the other bot keeps its data")

	found := false
	for _, l := range s.logLines() {
		if l["msg"] == "deleted bot's data erased" && l["bot_id"] == doomed {
			found = true
		}
	}
	assert.True(t, found, "the job reports its end")
}
