package funnels

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

const bot = "bot_engine"

var t0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// ev is an event of subscriber sub at t0 plus at; props are name, value pairs.
func ev(sub, name string, at time.Duration, channel string, props ...any) eventlog.Event {
	e := eventlog.Event{BotID: bot, SubscriberID: sub, Name: name, At: t0.Add(at), Channel: channel, Source: eventlog.SourceCustom}
	if len(props) > 0 {
		e.Properties = map[string]any{}
		for i := 0; i+1 < len(props); i += 2 {
			e.Properties[props[i].(string)] = props[i+1]
		}
	}
	return e
}

// runEngine appends the events to a fresh log (ids numbered in the order given, which
// orders ties) and runs the funnel over [from, to).
func runEngine(t *testing.T, steps []Step, window time.Duration, from, to time.Time, events ...eventlog.Event) *engine {
	t.Helper()
	log := eventlogtest.NewMemory()
	for i, e := range events {
		e.ID = fmt.Sprintf("e%04d", i)
		_, err := log.Append(context.Background(), e)
		require.NoError(t, err)
	}
	e := newEngine(steps, window, from, to, 1000)
	require.NoError(t, e.run(context.Background(), log, bot))
	return e
}

// depths is how deep each subscriber went.
func depths(e *engine) map[string]int {
	out := map[string]int{}
	e.each(func(r reached) { out[r.subscriber] = r.depth })
	return out
}

func steps(names ...string) []Step {
	out := make([]Step, len(names))
	for i, n := range names {
		out[i] = Step{Event: n}
	}
	return out
}

var abc = steps("a", "b", "c")

const (
	m = time.Minute
	h = time.Hour
)

// Each case is computed by hand; the window is an hour and the range ten days from t0.
func TestEngineDepths(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		steps  []Step
		events []eventlog.Event
		want   map[string]int
	}{
		{"in order", abc, []eventlog.Event{ev("s", "a", 0, ""), ev("s", "b", 10*m, ""), ev("s", "c", 20*m, "")}, map[string]int{"s": 3}},
		{"no entry, no subscriber", abc, []eventlog.Event{ev("s", "b", 0, ""), ev("s", "c", 10*m, "")}, map[string]int{}},
		{"a step before the entry does not count", abc,
			[]eventlog.Event{ev("s", "b", 0, ""), ev("s", "a", 5*m, ""), ev("s", "c", 10*m, "")}, map[string]int{"s": 1}},
		{"out of order: c before b", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "c", 5*m, ""), ev("s", "b", 10*m, "")}, map[string]int{"s": 2}},
		{"window expired before the last step", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "b", 30*m, ""), ev("s", "c", 61*m, "")}, map[string]int{"s": 2}},
		{"the window's end is inside it", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "b", 30*m, ""), ev("s", "c", h, "")}, map[string]int{"s": 3}},
		{"a later entry cannot use a step before it", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "b", 50*m, ""), ev("s", "a", 55*m, ""), ev("s", "c", 70*m, "")}, map[string]int{"s": 2}},
		{"a later entry completes where the first ran out", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "a", 40*m, ""), ev("s", "b", 70*m, ""), ev("s", "c", 90*m, "")}, map[string]int{"s": 3}},
		{"the same instant does not follow", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "b", 0, ""), ev("s", "c", 10*m, "")}, map[string]int{"s": 1}},
		{"the same instant does not follow, whatever the log order", abc,
			[]eventlog.Event{ev("s", "b", 0, ""), ev("s", "a", 0, ""), ev("s", "c", 10*m, "")}, map[string]int{"s": 1}},
		{"a new entry at the instant of a step leaves the older way going", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "b", 10*m, ""), ev("s", "a", 10*m, ""), ev("s", "c", 20*m, "")}, map[string]int{"s": 3}},
		{"a step at the instant of a new entry follows the older one", abc,
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "a", 10*m, ""), ev("s", "b", 10*m, ""), ev("s", "c", 69*m, "")}, map[string]int{"s": 2}},
		{"one event is never two steps", steps("a", "a"), []eventlog.Event{ev("s", "a", 0, "")}, map[string]int{"s": 1}},
		{"a repeated event is the next step", steps("a", "a", "a"),
			[]eventlog.Event{ev("s", "a", 0, ""), ev("s", "a", m, ""), ev("s", "a", 2*m, "")}, map[string]int{"s": 3}},
		{"subscribers are apart", abc,
			[]eventlog.Event{ev("s1", "a", 0, ""), ev("s2", "b", m, ""), ev("s1", "c", 2*m, ""), ev("s2", "a", 3*m, ""), ev("s1", "b", 4*m, ""), ev("s2", "b", 5*m, "")},
			map[string]int{"s1": 2, "s2": 2}},
		{"events of no subscriber are skipped", abc,
			[]eventlog.Event{ev("", "a", 0, ""), ev("", "b", m, ""), ev("s", "a", 2*m, "")}, map[string]int{"s": 1}},
		{"property filters", []Step{{Event: "a"}, {Event: "b", Filters: []Filter{{Property: "plan", Op: OpEq, Value: "pro"}}}},
			[]eventlog.Event{
				ev("basic", "a", 0, ""), ev("basic", "b", m, "", "plan", "basic"),
				ev("pro", "a", 0, ""), ev("pro", "b", m, "", "plan", "pro"),
				ev("none", "a", 0, ""), ev("none", "b", m, ""),
			},
			map[string]int{"basic": 1, "pro": 2, "none": 1}},
		{"a filtered first step is the only entry", []Step{{Event: "a", Filters: []Filter{{Property: "n", Op: OpGt, Value: 2.0}}}, {Event: "b"}},
			[]eventlog.Event{ev("s", "a", 0, "", "n", 1.0), ev("s", "b", m, ""), ev("t", "a", 0, "", "n", 3.0), ev("t", "b", m, "")},
			map[string]int{"t": 2}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := runEngine(t, c.steps, h, t0, t0.Add(240*h), c.events...)
			assert.Equal(t, c.want, depths(e))
		})
	}
}

// Entries are step-1 events in [from, to); the later steps may come after to, within the
// window.
func TestEngineRange(t *testing.T) {
	t.Parallel()
	from, to := t0.Add(h), t0.Add(2*h)
	e := runEngine(t, abc, h, from, to,
		ev("before", "a", 59*m, ""), ev("before", "b", 61*m, ""), // entered before the range
		ev("first", "a", h, ""), ev("first", "b", h+m, ""), // from is in
		ev("late", "a", 2*h-m, ""), ev("late", "b", 2*h+10*m, ""), ev("late", "c", 2*h+59*m, ""), // steps after to
		ev("after", "a", 2*h, ""), ev("after", "b", 2*h+m, ""), // to is out
	)
	assert.Equal(t, map[string]int{"first": 2, "late": 3}, depths(e))
}

// The way a subscriber is reported by is the latest entry that reached the deepest step:
// its times and its entry's channel.
func TestEngineReportedWay(t *testing.T) {
	t.Parallel()
	e := runEngine(t, abc, h, t0, t0.Add(240*h),
		ev("s", "a", 0, "telegram"), ev("s", "a", 40*m, "web"), ev("s", "b", 70*m, "telegram"), ev("s", "c", 90*m, "telegram"),
		// Two entries reach b through the same event: the later entry is kept (shorter time).
		ev("t", "a", 0, "telegram"), ev("t", "a", 5*m, "whatsapp"), ev("t", "b", 10*m, "web"),
	)
	got := map[string]reached{}
	e.each(func(r reached) { got[r.subscriber] = r })
	require.Len(t, got, 2)
	s := got["s"]
	assert.Equal(t, 3, s.depth)
	assert.Equal(t, "web", s.via.channel)
	assert.Equal(t, []int64{int64(40 * m), int64(70 * m), int64(90 * m)}, offsets(s.via.times()))
	tt := got["t"]
	assert.Equal(t, 2, tt.depth)
	assert.Equal(t, "whatsapp", tt.via.channel)
	assert.Equal(t, []int64{int64(5 * m), int64(10 * m)}, offsets(tt.via.times()))
}

func offsets(times []int64) []int64 {
	out := make([]int64, len(times))
	for i, t := range times {
		out[i] = t - t0.UnixNano()
	}
	return out
}

func TestEngineBoundsSubscribers(t *testing.T) {
	t.Parallel()
	log := eventlogtest.NewMemory()
	for i := range 4 {
		_, err := log.Append(context.Background(), eventlog.Event{ID: fmt.Sprint(i), BotID: bot, SubscriberID: fmt.Sprint("s", i), Name: "a", At: t0.Add(time.Duration(i) * m), Source: eventlog.SourceCustom})
		require.NoError(t, err)
	}
	e := newEngine(abc, h, t0, t0.Add(h), 3)
	err := e.run(context.Background(), log, bot)
	require.Error(t, err)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "report_too_large", he.Code)
	assert.Equal(t, 422, he.Status())

	e = newEngine(abc, h, t0, t0.Add(h), 4)
	require.NoError(t, e.run(context.Background(), log, bot))
	assert.Len(t, depths(e), 4)
}

// A report over a hand-computed data set: counts, conversions, medians and the breakdown.
func TestReportTally(t *testing.T) {
	t.Parallel()
	e := runEngine(t, abc, h, t0, t0.Add(240*h),
		// telegram: u1 converts (b after 10 m, c after 20 m), u2 reaches b (after 30 m), u3 stops at a.
		ev("u1", "a", 0, "telegram"), ev("u1", "b", 10*m, "telegram"), ev("u1", "c", 30*m, "telegram"),
		ev("u2", "a", 0, "telegram"), ev("u2", "b", 30*m, "telegram"),
		ev("u3", "a", 0, "telegram"),
		// web: u4 converts (b after 2 m, c after 4 m), u5 stops at a.
		ev("u4", "a", 0, "web"), ev("u4", "b", 2*m, "web"), ev("u4", "c", 6*m, "web"),
		ev("u5", "a", 0, "web"),
		// no channel: u6 reaches b after 1 s.
		ev("u6", "a", 0, ""), ev("u6", "b", time.Second, ""),
	)
	total, groups := report(e, abc, true)
	f := func(v float64) *float64 { return &v }
	assert.Equal(t, []StepStats{
		{Step: 1, Event: "a", Subscribers: 6, ConversionFromPrevious: 1, ConversionFromFirst: 1},
		// b: u1 600 s, u2 1800 s, u4 120 s, u6 1 s: median (120+600)/2.
		{Step: 2, Event: "b", Subscribers: 4, ConversionFromPrevious: 0.6667, ConversionFromFirst: 0.6667, MedianSecondsFromPrevious: f(360)},
		// c: u1 1200 s, u4 240 s.
		{Step: 3, Event: "c", Subscribers: 2, ConversionFromPrevious: 0.5, ConversionFromFirst: 0.3333, MedianSecondsFromPrevious: f(720)},
	}, total)
	require.Len(t, groups, 3)
	assert.Equal(t, "telegram", groups[0].Channel, "the largest group first")
	assert.Equal(t, []int64{3, 2, 1}, subscribers(groups[0].Steps))
	assert.Equal(t, f(1200), groups[0].Steps[1].MedianSecondsFromPrevious)
	assert.Equal(t, "web", groups[1].Channel, "ties by name")
	assert.Equal(t, []int64{2, 1, 1}, subscribers(groups[1].Steps))
	assert.Equal(t, UnknownChannel, groups[2].Channel)
	assert.Equal(t, []int64{1, 1, 0}, subscribers(groups[2].Steps))
	assert.Equal(t, f(1), groups[2].Steps[1].MedianSecondsFromPrevious)
	assert.Nil(t, groups[2].Steps[2].MedianSecondsFromPrevious, "nobody reached c")
	assert.Equal(t, 0.0, groups[2].Steps[2].ConversionFromPrevious)

	_, none := report(e, abc, false)
	assert.Nil(t, none)
}

func subscribers(s []StepStats) []int64 {
	out := make([]int64, len(s))
	for i, st := range s {
		out[i] = st.Subscribers
	}
	return out
}

// Nobody entered: zero counts and ratios, no medians.
func TestReportEmpty(t *testing.T) {
	t.Parallel()
	e := runEngine(t, abc, h, t0, t0.Add(h))
	total, _ := report(e, abc, true)
	for _, st := range total {
		assert.Zero(t, st.Subscribers)
		assert.Zero(t, st.ConversionFromFirst)
		assert.Nil(t, st.MedianSecondsFromPrevious)
	}
}

// Memory stays with the subscribers: a subscriber who enters a thousand times keeps one
// chain per step.
func TestEngineStateIsPerSubscriber(t *testing.T) {
	t.Parallel()
	var events []eventlog.Event
	for i := range 1000 {
		events = append(events, ev("s", "a", time.Duration(i)*time.Second, ""), ev("s", "b", time.Duration(i)*time.Second+time.Millisecond, ""))
	}
	e := runEngine(t, abc, h, t0, t0.Add(h), events...)
	require.Equal(t, []string{"s"}, e.subs)
	assert.Len(t, e.slots, 2*3, "one subscriber's chains: reached and staged, per step")
	levels, st := e.state(0)
	assert.Equal(t, []*chain{nil, nil, nil}, st, "nothing left staged")
	assert.Equal(t, 2, depth(levels))
	assert.Equal(t, int64(999*time.Second), levels[1].entry()-t0.UnixNano(), "the latest entry is kept")
}

// bruteForce is the funnel computed the slow, obvious way: for each entry of a subscriber,
// the earliest strictly later event of each next step within the window (taking the
// earliest is best for a fixed entry); the subscriber's outcome is the latest entry among
// those that went deepest.
func bruteForce(steps []Step, window time.Duration, from, to time.Time, events []eventlog.Event) map[string]reached {
	bySub := map[string][]eventlog.Event{}
	for _, e := range events { // in log order: time, then id
		bySub[e.SubscriberID] = append(bySub[e.SubscriberID], e)
	}
	matches := func(e eventlog.Event, k int) bool {
		m := compile(steps[k].Filters)
		return e.Name == steps[k].Event && (m == nil || m(e.Properties))
	}
	out := map[string]reached{}
	for sub, evs := range bySub {
		if sub == "" {
			continue
		}
		var best reached
		for i, e0 := range evs {
			if !matches(e0, 0) || e0.At.Before(from) || !e0.At.Before(to) {
				continue
			}
			times := []int64{e0.At.UnixNano()}
			cur := e0.At
			for k := 1; k < len(steps); k++ {
				found := false
				for _, e := range evs[i+1:] {
					if e.At.After(cur) && e.At.Sub(e0.At) <= window && matches(e, k) {
						times = append(times, e.At.UnixNano())
						cur, found = e.At, true
						break
					}
				}
				if !found {
					break
				}
			}
			if len(times) > best.depth || len(times) == best.depth && times[0] > best.via.entry() {
				var c *chain
				for _, at := range times {
					c = &chain{at: at, prev: c, start: times[0], channel: e0.Channel}
				}
				best = reached{subscriber: sub, depth: len(times), via: c}
			}
		}
		if best.depth > 0 {
			out[sub] = best
		}
	}
	return out
}

// Random event sets with many ties, repeats and expiries: the engine agrees with the
// brute force on every subscriber's depth, reported times and channel.
func TestEngineMatchesBruteForce(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(11, 7))
	names := []string{"a", "b", "c", "d"}
	channels := []string{"telegram", "web", ""}
	for round := range 200 {
		n := 2 + rnd.IntN(3)
		st := make([]Step, n)
		for k := range st {
			st[k] = Step{Event: names[rnd.IntN(3)]}
			if rnd.IntN(4) == 0 {
				st[k].Filters = []Filter{{Property: "x", Op: OpLt, Value: 2.0}}
			}
		}
		window := time.Duration(1+rnd.IntN(20)) * time.Millisecond
		from, to := t0.Add(5*time.Millisecond), t0.Add(time.Duration(10+rnd.IntN(30))*time.Millisecond)
		log := eventlogtest.NewMemory()
		var events []eventlog.Event
		for i := range 10 + rnd.IntN(60) {
			e := eventlog.Event{ID: fmt.Sprintf("e%04d", rnd.IntN(10000)) + fmt.Sprint(i), BotID: bot, SubscriberID: fmt.Sprint("s", rnd.IntN(4)),
				Name: names[rnd.IntN(len(names))], At: t0.Add(time.Duration(rnd.IntN(50)) * time.Millisecond),
				Channel: channels[rnd.IntN(len(channels))], Source: eventlog.SourceCustom,
				Properties: map[string]any{"x": float64(rnd.IntN(4))}}
			_, err := log.Append(context.Background(), e)
			require.NoError(t, err)
		}
		require.NoError(t, log.Scan(context.Background(), eventlog.Query{BotID: bot, From: t0, To: t0.Add(h)}, func(e eventlog.Event) error {
			events = append(events, e)
			return nil
		}))
		e := newEngine(st, window, from, to, 1000)
		require.NoError(t, e.run(context.Background(), log, bot))
		got := map[string]reached{}
		e.each(func(r reached) { got[r.subscriber] = r })
		want := bruteForce(st, window, from, to, events)
		require.Equal(t, len(want), len(got), "round %d", round)
		for sub, w := range want {
			g := got[sub]
			require.Equal(t, w.depth, g.depth, "round %d, %s", round, sub)
			require.Equal(t, w.via.times(), g.via.times(), "round %d, %s", round, sub)
			require.Equal(t, w.via.channel, g.via.channel, "round %d, %s", round, sub)
		}
	}
}
