package eventlogtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
)

// Run is the conformance suite every eventlog.Log passes. open returns the log a subtest
// uses; subtests keep apart by bot ids of their own, so open may return one log shared by
// all of them (a table in an emulator).
func Run(t *testing.T, open func(t *testing.T) eventlog.Log) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l eventlog.Log)
	}{
		{"AppendIsIdempotent", testIdempotent},
		{"RoundTrip", testRoundTrip},
		{"OrderByAtThenID", testOrder},
		{"HalfOpenRange", testHalfOpen},
		{"NameAndSubscriberFilters", testFilters},
		{"AfterID", testAfterID},
		{"Counts", testCounts},
		{"DeleteBot", testDeleteBot},
		{"DeleteSubscriber", testDeleteSubscriber},
		{"BoundsRefused", testBounds},
		{"ContextAndCallbackErrors", testErrors},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t))
		})
	}
}

// day0 is a Monday midnight, UTC; every event of the suite is on one of the days after it.
var day0 = time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)

func newBot() string { return fmt.Sprintf("bot_%016x", rand.Uint64()) }

// ev is a valid event of bot: named name, at day0 + offset, of subscriber sub.
func ev(bot, id, name, sub string, offset time.Duration) eventlog.Event {
	return eventlog.Event{ID: id, BotID: bot, SubscriberID: sub, Name: name, At: day0.Add(offset),
		Channel: "telegram", Source: eventlog.SourceCustom}
}

func scan(t *testing.T, l eventlog.Log, q eventlog.Query) []eventlog.Event {
	t.Helper()
	var out []eventlog.Event
	require.NoError(t, l.Scan(context.Background(), q, func(e eventlog.Event) error {
		out = append(out, e)
		return nil
	}))
	return out
}

func ids(events []eventlog.Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.ID)
	}
	return out
}

func all(bot string) eventlog.Query {
	return eventlog.Query{BotID: bot, From: day0.AddDate(0, 0, -1), To: day0.AddDate(0, 0, 30)}
}

func appendAll(t *testing.T, l eventlog.Log, events ...eventlog.Event) int {
	t.Helper()
	n := 0
	for len(events) > 0 {
		k := min(len(events), eventlog.MaxEventsPerAppend)
		m, err := l.Append(context.Background(), events[:k]...)
		require.NoError(t, err)
		n += m
		events = events[k:]
	}
	return n
}

func testIdempotent(t *testing.T, l eventlog.Log) {
	ctx := context.Background()
	bot := newBot()
	batch := []eventlog.Event{
		ev(bot, "a", "signup", "sub_1", time.Hour),
		ev(bot, "b", "signup", "sub_2", 2*time.Hour),
		ev(bot, "c", "purchase", "sub_1", 3*time.Hour),
	}
	n, err := l.Append(ctx, batch...)
	require.NoError(t, err)
	assert.Equal(t, 3, n)

	n, err = l.Append(ctx, batch...)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "a replay stores nothing")

	// The same id with other members is the same event: skipped, not compared.
	changed := ev(bot, "a", "purchase", "sub_9", 5*time.Hour)
	fresh := ev(bot, "d", "signup", "sub_3", 4*time.Hour)
	twice := ev(bot, "e", "signup", "sub_3", 6*time.Hour)
	added, err := eventlog.AppendNew(ctx, l, changed, fresh, twice, twice)
	require.NoError(t, err)
	assert.Equal(t, []bool{false, true, true, false}, added, "only d and e are new, e once")

	got := scan(t, l, all(bot))
	assert.Equal(t, []string{"a", "b", "c", "d", "e"}, ids(got))
	assert.Equal(t, "signup", got[0].Name, "the first append of a is kept")

	// Ids are per bot: another bot may use the same ones.
	other := newBot()
	n, err = l.Append(ctx, ev(other, "a", "signup", "sub_1", time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 1, n)

	counts, err := l.Counts(ctx, all(bot))
	require.NoError(t, err)
	assert.Equal(t, []eventlog.DayCount{
		{Day: "2026-03-02", Name: "purchase", Channel: "telegram", Count: 1},
		{Day: "2026-03-02", Name: "signup", Channel: "telegram", Count: 4},
	}, counts, "duplicates are not counted")
}

func testRoundTrip(t *testing.T, l eventlog.Log) {
	bot := newBot()
	at := time.Date(2026, 3, 2, 10, 11, 12, 345_678_901, time.FixedZone("X", 3600))
	full := eventlog.Event{
		ID: "cev_1", BotID: bot, SubscriberID: "sub_abc", Name: "order.paid-v2", At: at, Channel: "web",
		Source: eventlog.SourceCustom, ClientEventID: "order 42 ✓",
		Properties: map[string]any{"plan": "pro", "items": 3.5, "gift": true, "empty": ""},
		Revenue:    &eventlog.Revenue{Minor: 1999, Currency: "EUR"},
	}
	bare := eventlog.Event{ID: "ev_2", BotID: bot, Name: "reaction_published", At: day0.Add(time.Hour), Source: eventlog.SourceBuilder}
	refund := eventlog.Event{ID: "ev_3", BotID: bot, SubscriberID: "sub_abc", Name: "refund", At: day0.Add(2 * time.Hour),
		Source: eventlog.SourceCustom, Revenue: &eventlog.Revenue{Minor: -500, Currency: "JPY"}}
	assert.Equal(t, 3, appendAll(t, l, full, bare, refund))

	got := scan(t, l, all(bot))
	require.Len(t, got, 3)
	want := full
	want.At = time.Date(2026, 3, 2, 9, 11, 12, 345_000_000, time.UTC)
	assert.Equal(t, bare, got[0])
	assert.Equal(t, refund, got[1])
	assert.Equal(t, want, got[2], "At in UTC to the millisecond, every member kept")
	assert.Equal(t, time.UTC, got[2].At.Location())
}

func testOrder(t *testing.T, l eventlog.Log) {
	bot := newBot()
	// Appended out of order, across names, subscribers and days, with ties on At.
	events := []eventlog.Event{
		ev(bot, "m", "b", "sub_1", 25*time.Hour),
		ev(bot, "k", "a", "sub_2", time.Hour),
		ev(bot, "z", "c", "sub_1", time.Hour),
		ev(bot, "b", "a", "sub_1", time.Hour),
		ev(bot, "y", "b", "sub_2", time.Minute),
		ev(bot, "c", "c", "sub_3", 49*time.Hour),
		ev(bot, "a", "b", "sub_1", time.Hour+time.Millisecond),
	}
	appendAll(t, l, events...)
	want := []string{"y", "b", "k", "z", "a", "m", "c"}
	assert.Equal(t, want, ids(scan(t, l, all(bot))))
	q := all(bot)
	q.Names = []string{"a", "b", "c"}
	assert.Equal(t, want, ids(scan(t, l, q)), "names given, merged in the same order")
	q.Names = []string{"c", "a"}
	assert.Equal(t, []string{"b", "k", "z", "c"}, ids(scan(t, l, q)))

	// More events than a store's page, at one instant and at many.
	many := newBot()
	var batch []eventlog.Event
	var wantMany []string
	for i := range 450 {
		id := fmt.Sprintf("e%04d", i)
		offset := time.Duration(i/3) * time.Second // three events per instant
		batch = append(batch, ev(many, id, []string{"x", "y", "z"}[i%3], "sub_1", offset))
		wantMany = append(wantMany, id)
	}
	rand.Shuffle(len(batch), func(i, j int) { batch[i], batch[j] = batch[j], batch[i] })
	assert.Equal(t, 450, appendAll(t, l, batch...))
	assert.Equal(t, wantMany, ids(scan(t, l, all(many))))
	q = all(many)
	q.Names = []string{"x", "y", "z"}
	assert.Equal(t, wantMany, ids(scan(t, l, q)))
}

func testHalfOpen(t *testing.T, l eventlog.Log) {
	bot := newBot()
	appendAll(t, l,
		ev(bot, "before", "n", "sub_1", 10*time.Hour-time.Millisecond),
		ev(bot, "from", "n", "sub_1", 10*time.Hour),
		ev(bot, "inside", "n", "sub_1", 11*time.Hour),
		ev(bot, "last", "n", "sub_1", 12*time.Hour-time.Millisecond),
		ev(bot, "to", "n", "sub_1", 12*time.Hour),
	)
	q := eventlog.Query{BotID: bot, From: day0.Add(10 * time.Hour), To: day0.Add(12 * time.Hour)}
	assert.Equal(t, []string{"from", "inside", "last"}, ids(scan(t, l, q)))
	q.Names = []string{"n"}
	assert.Equal(t, []string{"from", "inside", "last"}, ids(scan(t, l, q)))
	q.To = q.From
	assert.Empty(t, scan(t, l, q), "an empty range")
	q.To = q.From.Add(-time.Hour)
	assert.Empty(t, scan(t, l, q), "a reversed range")
	assert.Empty(t, scan(t, l, eventlog.Query{BotID: newBot(), From: day0, To: day0.AddDate(0, 0, 1)}), "another bot")
}

func testFilters(t *testing.T, l eventlog.Log) {
	bot := newBot()
	appendAll(t, l,
		ev(bot, "1", "view", "sub_1", time.Hour),
		ev(bot, "2", "view", "sub_2", 2*time.Hour),
		ev(bot, "3", "buy", "sub_1", 3*time.Hour),
		ev(bot, "4", "buy", "sub_2", 4*time.Hour),
		ev(bot, "5", "refund", "sub_1", 5*time.Hour),
		ev(bot, "6", "view", "sub_1", 26*time.Hour),
	)
	for _, tc := range []struct {
		names []string
		sub   string
		want  []string
	}{
		{[]string{"view"}, "", []string{"1", "2", "6"}},
		{[]string{"buy", "view"}, "", []string{"1", "2", "3", "4", "6"}},
		{[]string{"nothing"}, "", nil},
		{nil, "sub_1", []string{"1", "3", "5", "6"}},
		{[]string{"view", "refund"}, "sub_1", []string{"1", "5", "6"}},
		{[]string{"buy"}, "sub_9", nil},
	} {
		q := all(bot)
		q.Names, q.SubscriberID = tc.names, tc.sub
		assert.Equal(t, tc.want, ids(scan(t, l, q)), "names %v, subscriber %q", tc.names, tc.sub)
	}
}

func testAfterID(t *testing.T, l eventlog.Log) {
	bot := newBot()
	appendAll(t, l,
		ev(bot, "a", "n", "sub_1", time.Hour),
		ev(bot, "b", "n", "sub_1", time.Hour),
		ev(bot, "c", "m", "sub_1", time.Hour),
		ev(bot, "d", "n", "sub_1", 2*time.Hour),
	)
	q := eventlog.Query{BotID: bot, From: day0.Add(time.Hour), To: day0.AddDate(0, 0, 1), AfterID: "a"}
	assert.Equal(t, []string{"b", "c", "d"}, ids(scan(t, l, q)))
	q.AfterID = "c"
	assert.Equal(t, []string{"d"}, ids(scan(t, l, q)))
	q.AfterID, q.Names = "a", []string{"n"}
	assert.Equal(t, []string{"b", "d"}, ids(scan(t, l, q)))
	q.Names, q.SubscriberID = nil, "sub_1"
	assert.Equal(t, []string{"b", "c", "d"}, ids(scan(t, l, q)))
}

func testCounts(t *testing.T, l eventlog.Log) {
	ctx := context.Background()
	bot := newBot()
	web := func(e eventlog.Event) eventlog.Event { e.Channel = "web"; return e }
	none := func(e eventlog.Event) eventlog.Event { e.Channel = ""; return e }
	appendAll(t, l,
		ev(bot, "1", "view", "sub_1", time.Hour),
		ev(bot, "2", "view", "sub_2", 23*time.Hour+59*time.Minute),
		web(ev(bot, "3", "view", "sub_3", 2*time.Hour)),
		ev(bot, "4", "buy", "sub_1", 3*time.Hour),
		ev(bot, "5", "view", "sub_1", 24*time.Hour),
		none(ev(bot, "6", "buy", "sub_1", 49*time.Hour)),
		ev(bot, "7", "view", "sub_1", -time.Millisecond),
	)
	counts, err := l.Counts(ctx, eventlog.Query{BotID: bot, From: day0, To: day0.AddDate(0, 0, 3)})
	require.NoError(t, err)
	assert.Equal(t, []eventlog.DayCount{
		{Day: "2026-03-02", Name: "buy", Channel: "telegram", Count: 1},
		{Day: "2026-03-02", Name: "view", Channel: "telegram", Count: 2},
		{Day: "2026-03-02", Name: "view", Channel: "web", Count: 1},
		{Day: "2026-03-03", Name: "view", Channel: "telegram", Count: 1},
		{Day: "2026-03-04", Name: "buy", Channel: "", Count: 1},
	}, counts)

	counts, err = l.Counts(ctx, eventlog.Query{BotID: bot, Names: []string{"buy"}, From: day0.AddDate(0, 0, 1), To: day0.AddDate(0, 0, 3), SubscriberID: "ignored"})
	require.NoError(t, err)
	assert.Equal(t, []eventlog.DayCount{{Day: "2026-03-04", Name: "buy", Channel: "", Count: 1}}, counts)

	counts, err = l.Counts(ctx, eventlog.Query{BotID: bot, From: day0.AddDate(0, 0, -1), To: day0})
	require.NoError(t, err)
	assert.Equal(t, []eventlog.DayCount{{Day: "2026-03-01", Name: "view", Channel: "telegram", Count: 1}}, counts)

	counts, err = l.Counts(ctx, eventlog.Query{BotID: newBot(), From: day0, To: day0.AddDate(0, 0, 3)})
	require.NoError(t, err)
	assert.Empty(t, counts)
}

func testDeleteBot(t *testing.T, l eventlog.Log) {
	ctx := context.Background()
	bot, keep := newBot(), newBot()
	var batch []eventlog.Event
	for i := range 730 {
		// Many days and names, so that every partition a store keeps is reached.
		batch = append(batch, ev(bot, fmt.Sprintf("e%d", i), fmt.Sprintf("n%d", i%7), fmt.Sprintf("sub_%d", i%5), time.Duration(i)*time.Hour))
	}
	appendAll(t, l, batch...)
	appendAll(t, l, ev(keep, "e1", "n1", "sub_1", time.Hour))

	calls := 0
	for done := false; !done; calls++ {
		require.Less(t, calls, 1000, "DeleteBot never reports done")
		var err error
		done, err = l.DeleteBot(ctx, bot)
		require.NoError(t, err)
	}
	wide := eventlog.Query{BotID: bot, From: day0.AddDate(0, 0, -1), To: day0.AddDate(0, 0, 60)}
	assert.Empty(t, scan(t, l, wide))
	counts, err := l.Counts(ctx, wide)
	require.NoError(t, err)
	assert.Empty(t, counts)
	done, err := l.DeleteBot(ctx, bot)
	require.NoError(t, err)
	assert.True(t, done, "nothing left: done at once")

	assert.Equal(t, []string{"e1"}, ids(scan(t, l, all(keep))), "another bot's events stay")

	// The bot's event ids are free again: a bot id is never reused, but the log must not
	// remember what it erased.
	n, err := l.Append(ctx, batch[0])
	require.NoError(t, err)
	assert.Equal(t, 1, n)
}

// countsOf is what Counts reports for events: per UTC day, name and channel, sorted.
func countsOf(events []eventlog.Event) []eventlog.DayCount {
	type key struct{ day, name, channel string }
	n := map[key]int64{}
	for _, e := range events {
		n[key{e.At.UTC().Format(time.DateOnly), e.Name, e.Channel}]++
	}
	out := []eventlog.DayCount{}
	for k, c := range n {
		out = append(out, eventlog.DayCount{Day: k.day, Name: k.name, Channel: k.channel, Count: c})
	}
	slices.SortFunc(out, func(a, b eventlog.DayCount) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Channel, b.Channel))
	})
	return out
}

func testDeleteSubscriber(t *testing.T, l eventlog.Log) {
	ctx := context.Background()
	bot, other := newBot(), newBot()
	wide := eventlog.Query{BotID: bot, From: day0.AddDate(0, 0, -1), To: day0.AddDate(0, 0, 60)}
	counts := func(q eventlog.Query) []eventlog.DayCount {
		t.Helper()
		c, err := l.Counts(ctx, q)
		require.NoError(t, err)
		if c == nil {
			c = []eventlog.DayCount{}
		}
		return c
	}
	// The erased subscriber's events share days, names and channels (so counters) with
	// another subscriber's and with events of no one; more of them than a store's bound.
	var gone, kept []eventlog.Event
	for i := range 700 {
		sub := []string{"sub_gone", "sub_keep", "sub_gone", ""}[i%4]
		e := ev(bot, fmt.Sprintf("e%03d", i), fmt.Sprintf("n%d", i%5), sub, time.Duration(i)*time.Hour)
		e.Channel = []string{"telegram", "web", "", "telegram", "web"}[i%5]
		if sub == "sub_gone" && i%10 == 0 {
			e.ClientEventID = fmt.Sprintf("order-%d", i)
			e.Properties = map[string]any{"email": "ann@example.com"}
			e.Revenue = &eventlog.Revenue{Minor: 1999, Currency: "EUR"}
		}
		if sub == "sub_gone" {
			gone = append(gone, e)
		} else {
			kept = append(kept, e)
		}
	}
	appendAll(t, l, append(append([]eventlog.Event{}, gone...), kept...)...)
	// The same subscriber id in another bot is another person.
	elsewhere := ev(other, "e000", "n0", "sub_gone", time.Hour)
	appendAll(t, l, elsewhere)
	require.Equal(t, countsOf(append(append([]eventlog.Event{}, gone...), kept...)), counts(wide))

	keptIDs := ids(scan(t, l, wide))
	keptIDs = slices.DeleteFunc(keptIDs, func(id string) bool {
		return slices.ContainsFunc(gone, func(e eventlog.Event) bool { return e.ID == id })
	})
	onlyGone := wide
	onlyGone.SubscriberID = "sub_gone"
	left := len(gone)
	calls := 0
	for done := false; !done; calls++ {
		require.Less(t, calls, 1000, "DeleteSubscriber never reports done")
		var err error
		done, err = l.DeleteSubscriber(ctx, bot, "sub_gone")
		require.NoError(t, err)
		// Between calls: what is left of the subscriber is still there and counted, and
		// nobody else's event has gone.
		now := scan(t, l, onlyGone)
		assert.LessOrEqual(t, len(now), left, "call %d", calls)
		left = len(now)
		if done {
			assert.Empty(t, now, "done, yet some are left")
		}
		rest := scan(t, l, wide)
		assert.Equal(t, countsOf(rest), counts(wide), "call %d: the counts follow the events", calls)
	}
	assert.Empty(t, scan(t, l, onlyGone), "Scan of the subscriber returns none")
	assert.Equal(t, keptIDs, ids(scan(t, l, wide)), "everyone else's events stay")
	assert.Equal(t, countsOf(kept), counts(wide), "the aggregates no longer count them")
	q := wide
	q.Names = []string{"n0", "n2"}
	for _, e := range scan(t, l, q) {
		assert.NotEqual(t, "sub_gone", e.SubscriberID, "a scan by name returns none of them")
	}
	assert.Equal(t, []string{"e000"}, ids(scan(t, l, all(other))), "another bot's subscriber of the same id keeps theirs")

	done, err := l.DeleteSubscriber(ctx, bot, "sub_gone")
	require.NoError(t, err)
	assert.True(t, done, "nothing left: done at once")
	done, err = l.DeleteSubscriber(ctx, newBot(), "sub_gone")
	require.NoError(t, err)
	assert.True(t, done, "a bot without events")
	done, err = l.DeleteSubscriber(ctx, bot, "sub_never")
	require.NoError(t, err)
	assert.True(t, done, "a subscriber without events")

	// The erased events' ids are forgotten: an event appended again is new and stored.
	again := gone[0]
	require.NotEmpty(t, again.ClientEventID)
	added, err := eventlog.AppendNew(ctx, l, again, kept[0])
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false}, added, "the erased event is new again; a kept one is still a duplicate")
	got := scan(t, l, onlyGone)
	require.Len(t, got, 1)
	assert.Equal(t, again.ID, got[0].ID)
	assert.Equal(t, again.Revenue, got[0].Revenue)
	assert.Equal(t, countsOf(append([]eventlog.Event{again}, kept...)), counts(wide), "and counted again")

	// An empty or malformed subscriber or bot is refused, erasing nothing.
	for _, args := range [][2]string{{bot, ""}, {"", "sub_gone"}, {bot, "sub#1"}, {"bot#1", "sub_gone"}} {
		_, err := l.DeleteSubscriber(ctx, args[0], args[1])
		assert.ErrorIs(t, err, eventlog.ErrInvalid, "%q", args)
	}
	assert.Len(t, scan(t, l, wide), len(kept)+1)
}

func testBounds(t *testing.T, l eventlog.Log) {
	ctx := context.Background()
	bot := newBot()
	good := ev(bot, "ok", "signup", "sub_1", time.Hour)
	props := func(p map[string]any) eventlog.Event { e := good; e.Properties = p; return e }
	tooMany := map[string]any{}
	for i := range eventlog.MaxProperties + 1 {
		tooMany[fmt.Sprintf("p%d", i)] = true
	}
	bad := map[string]eventlog.Event{
		"no id":             func() eventlog.Event { e := good; e.ID = ""; return e }(),
		"long id":           func() eventlog.Event { e := good; e.ID = strings.Repeat("i", eventlog.MaxIDBytes+1); return e }(),
		"id with space":     func() eventlog.Event { e := good; e.ID = "a b"; return e }(),
		"no bot":            func() eventlog.Event { e := good; e.BotID = ""; return e }(),
		"bot with #":        func() eventlog.Event { e := good; e.BotID = "bot#1"; return e }(),
		"subscriber with /": func() eventlog.Event { e := good; e.SubscriberID = "sub/1"; return e }(),
		"no name":           func() eventlog.Event { e := good; e.Name = ""; return e }(),
		"upper-case name":   func() eventlog.Event { e := good; e.Name = "SignUp"; return e }(),
		"long name":         func() eventlog.Event { e := good; e.Name = strings.Repeat("n", eventlog.MaxNameBytes+1); return e }(),
		"name with #":       func() eventlog.Event { e := good; e.Name = "a#b"; return e }(),
		"no time":           func() eventlog.Event { e := good; e.At = time.Time{}; return e }(),
		"before 1970":       func() eventlog.Event { e := good; e.At = time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC); return e }(),
		"channel":           func() eventlog.Event { e := good; e.Channel = "Tele gram"; return e }(),
		"source":            func() eventlog.Event { e := good; e.Source = "elsewhere"; return e }(),
		"client event id":   func() eventlog.Event { e := good; e.ClientEventID = "a\nb"; return e }(),
		"too many props":    props(tooMany),
		"prop key":          props(map[string]any{"a b": "x"}),
		"prop long string":  props(map[string]any{"k": strings.Repeat("v", eventlog.MaxPropertyString+1)}),
		"prop int":          props(map[string]any{"k": 3}),
		"prop nested":       props(map[string]any{"k": map[string]any{"a": 1.0}}),
		"prop control":      props(map[string]any{"k": "a\x00b"}),
		"currency":          func() eventlog.Event { e := good; e.Revenue = &eventlog.Revenue{Minor: 1, Currency: "usd"}; return e }(),
		"unknown currency":  func() eventlog.Event { e := good; e.Revenue = &eventlog.Revenue{Minor: 1, Currency: "XXX"}; return e }(),
		"huge revenue": func() eventlog.Event {
			e := good
			e.Revenue = &eventlog.Revenue{Minor: eventlog.MaxRevenueMinor + 1, Currency: "USD"}
			return e
		}(),
	}
	for name, e := range bad {
		n, err := l.Append(ctx, good, e)
		assert.ErrorIs(t, err, eventlog.ErrInvalid, name)
		assert.Zero(t, n, name)
	}
	assert.Empty(t, scan(t, l, all(bot)), "a batch with one bad event stores none")

	var tooBig []eventlog.Event
	for i := range eventlog.MaxEventsPerAppend + 1 {
		e := good
		e.ID = fmt.Sprintf("e%d", i)
		tooBig = append(tooBig, e)
	}
	_, err := l.Append(ctx, tooBig...)
	assert.ErrorIs(t, err, eventlog.ErrInvalid, "more than MaxEventsPerAppend")
	assert.Empty(t, scan(t, l, all(bot)))

	n, err := l.Append(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing to append")
}

func testErrors(t *testing.T, l eventlog.Log) {
	bot := newBot()
	appendAll(t, l, ev(bot, "a", "n", "sub_1", time.Hour), ev(bot, "b", "n", "sub_1", 2*time.Hour))

	stop := errors.New("stop")
	seen := 0
	err := l.Scan(context.Background(), all(bot), func(eventlog.Event) error { seen++; return stop })
	assert.ErrorIs(t, err, stop, "the callback's error is returned")
	assert.Equal(t, 1, seen, "and stops the scan")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = l.Append(ctx, ev(bot, "c", "n", "sub_1", time.Hour))
	assert.ErrorIs(t, err, context.Canceled)
	err = l.Scan(ctx, all(bot), func(eventlog.Event) error { return nil })
	assert.ErrorIs(t, err, context.Canceled)
	_, err = l.Counts(ctx, all(bot))
	assert.ErrorIs(t, err, context.Canceled)
	_, err = l.DeleteBot(ctx, bot)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = l.DeleteSubscriber(ctx, bot, "sub_1")
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []string{"a", "b"}, ids(scan(t, l, all(bot))), "nothing changed")
}
