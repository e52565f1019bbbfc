package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/sqlitelog"
)

// newSubscriber creates a telegram subscriber of the bot over the API and returns its id.
func newSubscriber(t *testing.T, s *server, tok, bot, externalID string) string {
	t.Helper()
	r := s.post(tok, "/api/bots/"+bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": externalID})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	return r.JSON(t)["id"].(string)
}

// eventProblemFields are the fields a problem's errors name.
func eventProblemFields(t *testing.T, r resp) []string {
	t.Helper()
	var out []string
	for _, p := range problems(t, r) {
		field, _, _ := strings.Cut(p, ": ")
		out = append(out, field)
	}
	return out
}

// Custom events over HTTP: posted, replayed without storing twice, refused whole when one
// is wrong, listed in stable pages, counted per day.
func TestEvents(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/events"
	ann := newSubscriber(t, s, tok, bot, "7001")
	bob := newSubscriber(t, s, tok, bot, "7002")
	now := time.Now().UTC()
	at := now.Add(-time.Hour).Truncate(time.Second).Format(time.RFC3339)

	body := map[string]any{"events": []any{
		map[string]any{"event_id": "order-1", "subscriber_id": ann, "name": "purchase", "at": at,
			"properties": map[string]any{"plan": "pro", "items": 2}, "revenue": map[string]any{"minor": 1999, "currency": "EUR"}},
		map[string]any{"event_id": "signup-1", "subscriber_id": bob, "name": "signup"},
	}}
	r := s.post(tok, base, body)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/events", base, r)
	assert.Equal(t, float64(2), r.JSON(t)["created"])

	// A replay stores nothing and says so, event by event.
	r = s.post(tok, base, body)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	res := r.JSON(t)
	assert.Equal(t, float64(0), res["created"])
	assert.Equal(t, float64(2), res["duplicates"])
	for _, d := range res["data"].([]any) {
		assert.Equal(t, "duplicate", d.(map[string]any)["status"])
	}

	// 422: a currency ISO 4217 does not list, a subscriber the bot does not have; the batch
	// is refused whole.
	r = s.post(tok, base, map[string]any{"events": []any{
		map[string]any{"event_id": "order-2", "subscriber_id": ann, "name": "purchase", "revenue": map[string]any{"minor": 500, "currency": "ABC"}},
		map[string]any{"event_id": "order-3", "subscriber_id": "sub_01jdx8k6m0f1xq5c6y0v2hn9bz", "name": "purchase"},
		map[string]any{"event_id": "order-4", "subscriber_id": ann, "name": "email_opened"},
	}})
	require.Equal(t, 422, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/events", base, r)
	assert.Equal(t, "events_rejected", r.Code(t))
	assert.ElementsMatch(t, []string{"events[0].revenue.currency", "events[1].subscriber_id", "events[2].name"}, eventProblemFields(t, r))
	// 400: a malformed currency, an event without an id.
	r = s.post(tok, base, map[string]any{"events": []any{
		map[string]any{"event_id": "order-5", "subscriber_id": ann, "name": "purchase", "revenue": map[string]any{"minor": 500, "currency": "eur"}},
		map[string]any{"subscriber_id": ann, "name": "purchase"},
	}})
	require.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Equal(t, "validation_failed", r.Code(t))
	assert.ElementsMatch(t, []string{"events[0].revenue.currency", "events[1].event_id"}, eventProblemFields(t, r))

	// The list shows what was stored, the platform's events beside the custom ones.
	r = s.get(tok, base+"?name=purchase")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/events", base, r)
	data := r.JSON(t)["data"].([]any)
	require.Len(t, data, 1, "%s", r.Body)
	got := data[0].(map[string]any)
	assert.Equal(t, "order-1", got["event_id"])
	assert.Equal(t, "telegram", got["channel"], "the subscriber's channel")
	assert.Equal(t, at, got["at"])
	assert.Equal(t, map[string]any{"minor": float64(1999), "currency": "EUR"}, got["revenue"])

	// Pages are stable: 25 events at one instant, paged by 4, are each read once, in order.
	var batch []any
	same := now.Add(-30 * time.Minute).Format(time.RFC3339)
	for i := range 25 {
		batch = append(batch, map[string]any{"event_id": fmt.Sprintf("view-%02d", i), "subscriber_id": []string{ann, bob}[i%2], "name": "view", "at": same})
	}
	r = s.post(tok, base, map[string]any{"events": batch})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	var ids []string
	next := ""
	for page := 0; ; page++ {
		require.Less(t, page, 20)
		path := base + "?name=view&limit=4"
		if next != "" {
			path += "&cursor=" + url.QueryEscape(next)
		}
		r = s.get(tok, path)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		for _, d := range r.JSON(t)["data"].([]any) {
			ids = append(ids, d.(map[string]any)["id"].(string))
		}
		if page == 2 {
			// Events appended meanwhile do not shift the pages still to read.
			r2 := s.post(tok, base, map[string]any{"events": []any{map[string]any{"event_id": "late", "subscriber_id": ann, "name": "view"}}})
			require.Equal(t, 200, r2.Status, "%s", r2.Body)
		}
		c, ok := r.JSON(t)["next_cursor"].(string)
		if !ok {
			break
		}
		next = c
	}
	require.Len(t, ids, 26, "the 25 and the late one")
	seen := map[string]bool{}
	for i, id := range ids[:25] {
		assert.False(t, seen[id], "read twice: %s", id)
		seen[id] = true
		if i > 0 {
			assert.Less(t, ids[i-1], id, "ties on the time in id order")
		}
	}
	r = s.get(tok, base+"?subscriber_id="+ann+"&limit=200")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	// Ann's purchase, her 13 views, the late one, and the subscriber_created the platform
	// appended when she was created.
	assert.Len(t, r.JSON(t)["data"], 1+13+1+1)

	// 367 days is 400 range_too_long; 366 is fine.
	r = s.get(tok, base+"?from="+now.AddDate(0, 0, -367).Format(time.RFC3339)+"&to="+now.Format(time.RFC3339))
	require.Equal(t, 400, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/events", base, r)
	assert.Equal(t, "range_too_long", r.Code(t))
	assert.Equal(t, float64(366), r.JSON(t)["max_days"])
	r = s.get(tok, base+"?from="+now.AddDate(0, 0, -366).Format(time.RFC3339)+"&to="+now.Format(time.RFC3339))
	assert.Equal(t, 200, r.Status, "%s", r.Body)

	// The counts match what was posted.
	today := now.Format(time.DateOnly)
	r = s.get(tok, base+"/counts?name=purchase&name=signup&name=view")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/events/counts", base+"/counts", r)
	totals := map[string]float64{}
	for _, x := range r.JSON(t)["totals"].([]any) {
		m := x.(map[string]any)
		totals[m["name"].(string)] = m["count"].(float64)
	}
	// Events an hour ago may fall on yesterday (UTC); the counts cover the last 30 days.
	assert.Equal(t, map[string]float64{"purchase": 1, "signup": 1, "view": 26}, totals)
	assert.Equal(t, today, r.JSON(t)["to"])
	r = s.get(tok, base+"/counts?from="+now.AddDate(0, 0, -366).Format(time.DateOnly)+"&to="+today)
	require.Equal(t, 400, r.Status, "367 days: %s", r.Body)
	assert.Equal(t, "range_too_long", r.Code(t))
}

// Who may use the event routes: a token with the scope, of a user with the bot's Analytics
// right, in an account whose plan has analytics, on a bot of that account.
func TestEventsAccess(t *testing.T) {
	t.Parallel()
	s := start(t)
	acct, bot := s.demo.AccountID, s.demo.BotID
	base := "/api/bots/" + bot + "/events"
	one := map[string]any{"events": []any{map[string]any{"event_id": "e1", "subscriber_id": "sub_01jdx8k6m0f1xq5c6y0v2hn9bz", "name": "purchase"}}}

	r := s.do(req{Method: "GET", Path: base})
	assert.Equal(t, http.StatusUnauthorized, r.Status, "%s", r.Body)

	readOnly := s.admin("pat", "create", "--account", acct, "--scopes", "analytics:read")["token"]
	r = s.post(readOnly, base, one)
	assert.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
	assert.Equal(t, "insufficient_scope", r.Code(t))
	conforms(t, "POST", "/api/bots/{botID}/events", base, r)
	assert.Equal(t, http.StatusOK, s.get(readOnly, base).Status, "reading needs only analytics:read")

	reactionsOnly := s.admin("user", "create", "--account", acct, "--rights", "reactions")["user_id"]
	noRight := s.admin("pat", "create", "--account", acct, "--user", reactionsOnly, "--scopes", "*")["token"]
	for _, rq := range []req{{Method: "GET", Path: base}, {Method: "GET", Path: base + "/counts"}, {Method: "POST", Path: base, Body: one}} {
		rq.Token = noRight
		r = s.do(rq)
		assert.Equal(t, http.StatusForbidden, r.Status, "%s %s: %s", rq.Method, rq.Path, r.Body)
		assert.Equal(t, "missing_right", r.Code(t))
		assert.Equal(t, []any{"analytics"}, r.JSON(t)["missing_rights"])
	}

	other := s.newAccount("Other")
	for _, path := range []string{"/api/bots/" + other.Bot + "/events", "/api/bots/" + other.Bot + "/events/counts"} {
		r = s.get(s.demo.Token, path)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)
	}
	r = s.post(s.demo.Token, "/api/bots/"+other.Bot+"/events", one)
	assert.Equal(t, http.StatusNotFound, r.Status, "%s", r.Body)

	// The other account's plan lacks analytics: 402 on its own bot.
	s.adminJSON("account", "plan", "--account", other.ID, "--features", "popups")
	fresh := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]
	for _, rq := range []req{{Method: "GET", Path: "/api/bots/" + other.Bot + "/events"}, {Method: "POST", Path: "/api/bots/" + other.Bot + "/events", Body: one}} {
		rq.Token = fresh
		r = s.do(rq)
		assert.Equal(t, http.StatusPaymentRequired, r.Status, "%s", r.Body)
		assert.Equal(t, "feature_not_in_plan", r.Code(t))
		assert.Equal(t, "analytics", r.JSON(t)["feature"])
	}
}

// A deleted bot's events are erased by the purge job, its aggregates with them.
func TestEventsPurgedWithTheBot(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := s.demo.Token
	bot := s.admin("bot", "create", "--account", s.demo.AccountID, "--name", "Doomed")["bot_id"]
	sub := newSubscriber(t, s, tok, bot, "9001")
	r := s.post(tok, "/api/bots/"+bot+"/events", map[string]any{"events": []any{
		map[string]any{"event_id": "e1", "subscriber_id": sub, "name": "purchase"},
		map[string]any{"event_id": "e2", "subscriber_id": sub, "name": "signup"},
	}})
	require.Equal(t, 200, r.Status, "%s", r.Body)

	log, err := sqlitelog.Open(filepath.Join(s.dataDir, "events.db"))
	require.NoError(t, err)
	defer log.Close()
	q := eventlog.Query{BotID: bot, From: time.Now().AddDate(0, 0, -1), To: time.Now().AddDate(0, 0, 1)}
	left := func() int {
		n := 0
		require.NoError(t, log.Scan(context.Background(), q, func(eventlog.Event) error { n++; return nil }))
		counts, err := log.Counts(context.Background(), q)
		require.NoError(t, err)
		return n + len(counts)
	}
	require.Equal(t, 3+3, left(), "two events and the subscriber's creation, a counter each")

	require.Equal(t, http.StatusNoContent, s.del(tok, "/api/bots/"+bot).Status)
	eventually(t, 30*time.Second, "the deleted bot's events are erased", func() bool { return left() == 0 })
}
