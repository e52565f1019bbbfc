package events

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/storelog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// fakeSubscribers knows the subscribers of the test's bot and their channels.
type fakeSubscribers map[string]string

func (f fakeSubscribers) Channel(_ context.Context, _, id string) (string, error) {
	if ch, ok := f[id]; ok {
		return ch, nil
	}
	return "", httpapi.NotFound("subscriber")
}

type server struct {
	*httpapitest.Server
	clock *httpapitest.Clock
	bot   string
	log   eventlog.Log
	base  string
}

// newServer serves the routes over the log the Lambda runs (storelog over the table), on
// the recording store, so that the IAM row is held to what they do.
func newServer(t *testing.T) *server {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	bot := ids.At("bot", t0)
	s := httpapitest.New(t, httpapitest.Config{Now: c.Now, Store: st, BotIDs: []string{bot}})
	log := storelog.New(st)
	Routes(s.Mux, NewService(log, fakeSubscribers{"sub_ann": "telegram", "sub_bob": "web"}, c.Now), s.Cursors)
	return &server{Server: s, clock: c, bot: bot, log: log, base: "/api/bots/" + bot + "/events"}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("analytics:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	write := httpapi.Need("analytics:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	want := map[string]httpapi.Access{
		"POST /api/bots/{botID}/events":       write,
		"GET /api/bots/{botID}/events":        read,
		"GET /api/bots/{botID}/events/counts": read,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func post(events ...string) string { return `{"events":[` + strings.Join(events, ",") + `]}` }

func TestPost200CreatedThenDuplicate(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	body := post(
		`{"event_id":"order-1","subscriber_id":"sub_ann","name":"purchase","at":"2026-03-10T11:00:00+01:00",
		  "properties":{"plan":"pro","items":2,"gift":false},"revenue":{"minor":1999,"currency":"EUR"}}`,
		`{"event_id":"signup-1","subscriber_id":"sub_bob","name":"signup"}`,
	)
	res := s.Do(t, "POST", s.base, body)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["created"])
	assert.Equal(t, float64(0), res.JSON["duplicates"])
	data := res.JSON["data"].([]any)
	first := data[0].(map[string]any)
	assert.Equal(t, "order-1", first["event_id"])
	assert.Equal(t, EventID(s.bot, "order-1"), first["id"])
	assert.Equal(t, "created", first["status"])

	// A replay, with one new event and one repeated within the request.
	res = s.Do(t, "POST", s.base, post(
		`{"event_id":"order-1","subscriber_id":"sub_ann","name":"purchase"}`,
		`{"event_id":"order-2","subscriber_id":"sub_ann","name":"purchase"}`,
		`{"event_id":"order-2","subscriber_id":"sub_ann","name":"purchase"}`,
	))
	require.Equal(t, 200, res.Code, res.Body)
	var statuses []string
	for _, d := range res.JSON["data"].([]any) {
		statuses = append(statuses, d.(map[string]any)["status"].(string))
	}
	assert.Equal(t, []string{"duplicate", "created", "duplicate"}, statuses)
	assert.Equal(t, float64(1), res.JSON["created"])
	assert.Equal(t, float64(2), res.JSON["duplicates"])

	res = s.Do(t, "GET", s.base+"?from=2026-03-01T00:00:00Z", nil)
	require.Equal(t, 200, res.Code, res.Body)
	list := res.JSON["data"].([]any)
	require.Len(t, list, 3)
	got := list[0].(map[string]any)
	assert.Equal(t, map[string]any{
		"id": EventID(s.bot, "order-1"), "event_id": "order-1", "name": "purchase", "subscriber_id": "sub_ann",
		"channel": "telegram", "source": "custom", "at": "2026-03-10T10:00:00Z",
		"properties": map[string]any{"plan": "pro", "items": float64(2), "gift": false},
		"revenue":    map[string]any{"minor": float64(1999), "currency": "EUR"},
	}, got, "the time in UTC, the channel the subscriber's")
	second := list[1].(map[string]any)
	assert.Equal(t, "2026-03-10T12:00:00Z", second["at"], "at defaults to the server's clock")
	assert.Equal(t, map[string]any{}, second["properties"])
	assert.Nil(t, second["revenue"])
}

func TestPost400(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ok := `"event_id":"e1","subscriber_id":"sub_ann","name":"purchase"`
	var hundredOne []string
	for i := range 101 {
		hundredOne = append(hundredOne, fmt.Sprintf(`{"event_id":"e%d","subscriber_id":"sub_ann","name":"x"}`, i))
	}
	for _, tc := range []struct {
		body, code, field string
	}{
		{`{"events":[]}`, "validation_failed", "events"},
		{`{}`, "validation_failed", "events"},
		{post(hundredOne...), "validation_failed", "events"},
		{post(`{"subscriber_id":"sub_ann","name":"x"}`), "validation_failed", "events[0].event_id"},
		{post(`{"event_id":"a\u0000b","subscriber_id":"sub_ann","name":"x"}`), "validation_failed", "events[0].event_id"},
		{post(`{"event_id":"` + strings.Repeat("x", 129) + `","subscriber_id":"sub_ann","name":"x"}`), "validation_failed", "events[0].event_id"},
		{post(`{"event_id":"e","name":"x"}`), "validation_failed", "events[0].subscriber_id"},
		{post(`{"event_id":"e","subscriber_id":"sub_ann","name":"Purchase Made"}`), "validation_failed", "events[0].name"},
		{post(`{` + ok + `,"properties":{"nested":{"a":1}}}`), "validation_failed", "events[0].properties.nested"},
		{post(`{` + ok + `,"properties":{"bad key":1}}`), "validation_failed", "events[0].properties"},
		{post(`{` + ok + `,"revenue":{"currency":"USD"}}`), "validation_failed", "events[0].revenue.minor"},
		{post(`{` + ok + `,"revenue":{"minor":100,"currency":"usd"}}`), "validation_failed", "events[0].revenue.currency"},
		{post(`{` + ok + `,"revenue":{"minor":1000000000001,"currency":"USD"}}`), "validation_failed", "events[0].revenue.minor"},
		{post(`{` + ok + `,"revenue":{"minor":1.5,"currency":"USD"}}`), "invalid_body", ""},
		{post(`{` + ok + `,"at":"yesterday"}`), "invalid_body", ""},
		{post(`{` + ok + `,"channel":"web"}`), "unknown_field", ""},
	} {
		res := s.Do(t, "POST", s.base, tc.body)
		require.Equal(t, 400, res.Code, "%s: %s", tc.body, res.Body)
		assert.Equal(t, tc.code, res.Problem(), tc.body)
		if tc.field != "" {
			assert.Contains(t, res.Body, `"field":"`+tc.field+`"`, tc.body)
		}
	}
	assert.Empty(t, scanAll(t, s), "nothing stored")
}

func TestPost422RejectsTheBatch(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	good := `{"event_id":"good","subscriber_id":"sub_ann","name":"purchase"}`
	for _, tc := range []struct{ event, field string }{
		{`{"event_id":"e","subscriber_id":"sub_nobody","name":"purchase"}`, "events[1].subscriber_id"},
		{`{"event_id":"e","subscriber_id":"sub_ann","name":"email_opened"}`, "events[1].name"},
		{`{"event_id":"e","subscriber_id":"sub_ann","name":"platform.thing"}`, "events[1].name"},
		{`{"event_id":"e","subscriber_id":"sub_ann","name":"purchase","revenue":{"minor":5,"currency":"ABC"}}`, "events[1].revenue.currency"},
		{`{"event_id":"e","subscriber_id":"sub_ann","name":"purchase","revenue":{"minor":5,"currency":"XAU"}}`, "events[1].revenue.currency"},
		{`{"event_id":"e","subscriber_id":"sub_ann","name":"purchase","at":"2026-03-10T12:05:01Z"}`, "events[1].at"},
		{`{"event_id":"e","subscriber_id":"sub_ann","name":"purchase","at":"2025-03-08T12:00:00Z"}`, "events[1].at"},
	} {
		res := s.Do(t, "POST", s.base, post(good, tc.event))
		require.Equal(t, 422, res.Code, "%s: %s", tc.event, res.Body)
		assert.Equal(t, "events_rejected", res.Problem())
		assert.Contains(t, res.Body, `"field":"`+tc.field+`"`, tc.event)
	}
	assert.Empty(t, scanAll(t, s), "a rejected batch stores none of its events")

	// At the bounds: five minutes ahead, 366 days back.
	res := s.Do(t, "POST", s.base, post(
		`{"event_id":"a","subscriber_id":"sub_ann","name":"purchase","at":"2026-03-10T12:05:00Z"}`,
		`{"event_id":"b","subscriber_id":"sub_ann","name":"purchase","at":"2025-03-09T12:00:00Z"}`))
	require.Equal(t, 200, res.Code, res.Body)
}

func scanAll(t *testing.T, s *server) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	require.NoError(t, s.log.Scan(t.Context(), eventlog.Query{BotID: s.bot, From: t0.AddDate(-2, 0, 0), To: t0.AddDate(1, 0, 0)},
		func(e eventlog.Event) error { out = append(out, e); return nil }))
	return out
}

// seed appends n events of the bot, a second apart from an hour before t0, three of them at
// each instant, alternating names and subscribers.
func seed(t *testing.T, s *server, n int) {
	t.Helper()
	var batch []eventlog.Event
	for i := range n {
		batch = append(batch, eventlog.Event{ID: fmt.Sprintf("ev_%03d", i), BotID: s.bot, SubscriberID: []string{"sub_ann", "sub_bob"}[i%2],
			Name: []string{"view", "buy"}[i%3/2], At: t0.Add(-time.Hour + time.Duration(i/3)*time.Second), Channel: "telegram",
			Source: eventlog.SourceRuntime})
		if len(batch) == eventlog.MaxEventsPerAppend || i == n-1 {
			_, err := s.log.Append(t.Context(), batch...)
			require.NoError(t, err)
			batch = nil
		}
	}
}

func pages(t *testing.T, s *server, query string) []string {
	t.Helper()
	var ids []string
	next := ""
	for range 100 {
		q := query
		if next != "" {
			q += "&cursor=" + url.QueryEscape(next)
		}
		res := s.Do(t, "GET", s.base+"?"+q, nil)
		require.Equal(t, 200, res.Code, res.Body)
		for _, d := range res.JSON["data"].([]any) {
			ids = append(ids, d.(map[string]any)["id"].(string))
		}
		if res.JSON["next_cursor"] == nil {
			return ids
		}
		next = res.JSON["next_cursor"].(string)
	}
	t.Fatal("the list never ended")
	return nil
}

func TestList200PagesAreStable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	seed(t, s, 40)
	all := pages(t, s, "limit=200")
	require.Len(t, all, 40)
	for i := 1; i < len(all); i++ {
		assert.Less(t, all[i-1], all[i], "oldest first, ties by id")
	}
	assert.Equal(t, all, pages(t, s, "limit=2"), "pages of 2, with ties on the time across pages")
	assert.Equal(t, all, pages(t, s, "limit=7"))

	buys := pages(t, s, "name=buy&limit=3")
	assert.Len(t, buys, 13)
	ann := pages(t, s, "subscriber_id=sub_ann&limit=4")
	assert.Len(t, ann, 20)
	both := pages(t, s, "subscriber_id=sub_ann&name=buy&limit=5")
	assert.Len(t, both, 7)
	narrow := pages(t, s, "from=2026-03-10T11:00:05Z&to=2026-03-10T11:00:07Z")
	assert.Equal(t, all[15:21], narrow, "[from, to)")
}

func TestList400(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	seed(t, s, 10)
	res := s.Do(t, "GET", s.base+"?limit=2", nil)
	require.Equal(t, 200, res.Code)
	cursor := res.JSON["next_cursor"].(string)
	for _, tc := range []struct{ query, code, param string }{
		{"from=2025-03-01T00:00:00Z&to=2026-03-03T00:00:00Z", "range_too_long", ""},
		{"from=2026-03-10T00:00:00Z&to=2026-03-09T00:00:00Z", "invalid_parameter", "to"},
		{"from=yesterday", "invalid_parameter", "from"},
		{"to=2026-03-10", "invalid_parameter", "to"},
		{"name=Big%20Spender", "invalid_parameter", "name"},
		{"subscriber_id=sub%2F1", "invalid_parameter", "subscriber_id"},
		{"limit=201", "invalid_parameter", "limit"},
		{"cursor=" + cursor + "x", "invalid_cursor", ""},
		{"name=view&cursor=" + cursor, "invalid_cursor", ""},
	} {
		res := s.Do(t, "GET", s.base+"?"+tc.query, nil)
		require.Equal(t, 400, res.Code, "%s: %s", tc.query, res.Body)
		assert.Equal(t, tc.code, res.Problem(), tc.query)
		if tc.param != "" {
			assert.Equal(t, tc.param, res.JSON["parameter"], tc.query)
		}
		if tc.code == "range_too_long" {
			assert.Equal(t, float64(366), res.JSON["max_days"])
		}
	}
	res = s.Do(t, "GET", s.base+"?from=2025-03-09T00:00:00Z&to=2026-03-10T00:00:00Z", nil)
	assert.Equal(t, 200, res.Code, "366 days is allowed: %s", res.Body)
}

func TestCounts(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	seed(t, s, 40)
	web := eventlog.Event{ID: "ev_web", BotID: s.bot, SubscriberID: "sub_bob", Name: "view", At: t0.AddDate(0, 0, -2), Channel: "web", Source: eventlog.SourceRuntime}
	_, err := s.log.Append(t.Context(), web)
	require.NoError(t, err)

	res := s.Do(t, "GET", s.base+"/counts", nil)
	require.Equal(t, 200, res.Code, res.Body)
	var got Counts
	require.NoError(t, json.Unmarshal([]byte(res.Body), &got))
	telegram, webCh := "telegram", "web"
	assert.Equal(t, Counts{From: "2026-02-09", To: "2026-03-10",
		Totals: []NameTotal{{Name: "buy", Count: 13}, {Name: "view", Count: 28}},
		Days: []DayCount{
			{Date: "2026-03-08", Name: "view", Channel: &webCh, Count: 1},
			{Date: "2026-03-10", Name: "buy", Channel: &telegram, Count: 13},
			{Date: "2026-03-10", Name: "view", Channel: &telegram, Count: 27},
		}}, got)

	res = s.Do(t, "GET", s.base+"/counts?from=2026-03-08&to=2026-03-09&name=view&name=buy", nil)
	require.Equal(t, 200, res.Code, res.Body)
	require.NoError(t, json.Unmarshal([]byte(res.Body), &got))
	assert.Equal(t, []NameTotal{{Name: "view", Count: 1}}, got.Totals)

	for _, tc := range []struct{ query, code string }{
		{"from=2025-03-09&to=2026-03-10", "range_too_long"},
		{"from=2026-03-10&to=2026-03-09", "invalid_parameter"},
		{"from=2026-03-10T00:00:00Z", "invalid_parameter"},
		{"name=A", "invalid_parameter"},
		{"name=" + strings.Repeat("a&name=", 21) + "a", "invalid_parameter"},
	} {
		res := s.Do(t, "GET", s.base+"/counts?"+tc.query, nil)
		require.Equal(t, 400, res.Code, "%s: %s", tc.query, res.Body)
		assert.Equal(t, tc.code, res.Problem(), tc.query)
	}
	res = s.Do(t, "GET", s.base+"/counts?from=2025-03-10&to=2026-03-10", nil)
	assert.Equal(t, 200, res.Code, "366 days: %s", res.Body)
}

// The purge step erases the bot's events in bounded steps, and only the bot's.
func TestPurgeStep(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	seed(t, s, 400)
	other := eventlog.Event{ID: "ev_1", BotID: "bot_other", Name: "view", At: t0, Source: eventlog.SourceRuntime}
	_, err := s.log.Append(t.Context(), other)
	require.NoError(t, err)
	step := PurgeStep(s.log)
	payload, err := json.Marshal(purge.Payload{AccountID: s.Account.ID, BotID: s.bot})
	require.NoError(t, err)
	ctx := sqlitetest.As(t.Context(), "jobs")
	steps := 0
	for cursor, done := "", false; !done; steps++ {
		require.Less(t, steps, 100)
		cursor, done, err = step(ctx, payload, cursor)
		require.NoError(t, err)
	}
	assert.Greater(t, steps, 1, "more than one step's worth")
	assert.Empty(t, scanAll(t, s))
	n := 0
	require.NoError(t, s.log.Scan(t.Context(), eventlog.Query{BotID: "bot_other", From: t0, To: t0.Add(time.Second)}, func(eventlog.Event) error { n++; return nil }))
	assert.Equal(t, 1, n)
	_, _, err = step(ctx, []byte(`{}`), "")
	assert.Error(t, err, "a payload without a bot")
}
