package tests

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// Erasing a subscriber erases their events from the event log (a background job, started
// by the erasure's transaction): the list of their events empties, the counts stop counting
// them, and another subscriber's events stay.
func TestEraseSubscriberErasesTheirEvents(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/events"
	ann := newSubscriber(t, s, tok, bot, "9101")
	bob := newSubscriber(t, s, tok, bot, "9102")

	var batch []any
	for i := range 6 {
		sub, name := ann, "gift_card"
		if i%2 == 1 {
			sub, name = bob, "purchase"
		}
		batch = append(batch, map[string]any{"event_id": fmt.Sprintf("order-%d", i), "subscriber_id": sub, "name": name,
			"properties": map[string]any{"email": "someone@example.com"}, "revenue": map[string]any{"minor": 1999, "currency": "EUR"}})
	}
	r := s.post(tok, base, map[string]any{"events": batch})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Equal(t, float64(6), r.JSON(t)["created"])

	eventsOf := func(sub string) []any {
		t.Helper()
		r := s.get(tok, base+"?limit=200&subscriber_id="+sub)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		return r.JSON(t)["data"].([]any)
	}
	total := func(name string) float64 {
		t.Helper()
		r := s.get(tok, base+"/counts?name="+name)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		for _, x := range r.JSON(t)["totals"].([]any) {
			if m := x.(map[string]any); m["name"] == name {
				return m["count"].(float64)
			}
		}
		return 0
	}
	// Each has their three custom events, and the platform's subscriber_created.
	require.GreaterOrEqual(t, len(eventsOf(ann)), 3)
	bobs := eventsOf(bob)
	require.GreaterOrEqual(t, len(bobs), 3)
	require.Equal(t, float64(3), total("gift_card"))

	r = s.del(tok, "/api/bots/"+bot+"/subscribers/"+ann)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)

	eventually(t, 20*time.Second, "the erased subscriber's events are erased", func() bool { return len(eventsOf(ann)) == 0 })
	assert.Equal(t, bobs, eventsOf(bob), "another subscriber's events stay")
	assert.Equal(t, float64(0), total("gift_card"), "the counts no longer count them")
	assert.Equal(t, float64(3), total("purchase"))
	r = s.get(tok, base+"?limit=200")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	for _, e := range r.JSON(t)["data"].([]any) {
		assert.NotEqual(t, ann, e.(map[string]any)["subscriber_id"], "the unfiltered list holds none of theirs either")
	}
}

// Erasing a subscriber erases their runs too (the erasure job's runtime step): the trace of
// a run of theirs answers 404 soon after, another subscriber's stays.
func TestEraseSubscriberErasesTheirRuns(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	c.publish(t, `{"name":"Ping","trigger":{"type":"keyword","keywords":["ping"]},"steps":[{"id":"p","type":"send_text","text":"pong"}]}`)
	ann := fake.User{ID: 6001, FirstName: "Ann", LastName: "Lee", LanguageCode: "en"}
	bob := fake.User{ID: 6002, FirstName: "Bob", LastName: "Ray", LanguageCode: "en"}
	runOf := func(u fake.User) (string, string) {
		c.deliver(t, c.tg.TextUpdate(u, "ping"))
		sub := ""
		eventually(t, 10*time.Second, "the run completes", func() bool {
			r := c.s.get(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/subscribers?channel=telegram&external_id="+fmt.Sprint(u.ID))
			if data, _ := r.JSON(t)["data"].([]any); len(data) == 1 {
				sub = data[0].(map[string]any)["id"].(string)
			}
			return sub != "" && len(c.executions(t, sub)) == 1 && c.executions(t, sub)[0].Status == "completed"
		})
		return sub, c.executions(t, sub)[0].ID
	}
	annSub, annRun := runOf(ann)
	_, bobRun := runOf(bob)
	trace := func(id string) int {
		return c.s.get(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/executions/"+id).Status
	}
	require.Equal(t, http.StatusOK, trace(annRun))

	r := c.s.del(c.s.demo.Token, "/api/bots/"+c.s.demo.BotID+"/subscribers/"+annSub)
	require.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
	eventually(t, 20*time.Second, "the erased subscriber's run is erased", func() bool { return trace(annRun) == http.StatusNotFound })
	assert.Equal(t, http.StatusOK, trace(bobRun), "another subscriber's run stays")
}
