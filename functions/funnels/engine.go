package funnels

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// MaxReportSubscribers bounds the subscribers one report follows (422 report_too_large
// beyond): the engine keeps a little state for each, never for each event.
const MaxReportSubscribers = 2_000_000

// The funnel engine. It reads the events of a funnel's step names once, in time order
// (eventlog.Log.Scan), and keeps per subscriber who entered only the best way found so far
// to reach each step; its memory grows with the subscribers, not the events.
//
// The rules (docs/funnels.md says them for customers):
//
//   - A subscriber enters at any step-1 event in [from, to). Later steps may happen after
//     to, within the conversion window of the entry.
//   - Steps happen in order: step k's event is strictly later than the event that reached
//     step k-1 on the same way through, and at most window after the entry (inclusive).
//     Two events at the same instant are not ordered, so one never follows the other.
//   - A subscriber counts once, at the deepest step any of their entries reached; a later
//     entry may go deeper than an earlier one that ran out of window.
//   - The way through that a subscriber is reported by (its times between steps, its
//     channel) is the one with the latest entry among those that reached the deepest step;
//     among ways with the same entry, the one that reached each step first.
//
// Keeping only the latest entry at each step is exact for the deepest step: any way that
// could still go further from step k has an entry no later than the latest entry that
// reached step k, so the latest one has at least as much of its window left, and it reached
// step k no later than the current instant. Updates of one instant are staged and applied
// when a later instant comes, so that events at the same instant all see the state from
// before it.

// chain is one way through the first steps, as a list from its last step back to its
// entry: when the step was reached (Unix nanoseconds), the chain it went on from (nil at the
// entry), the entry's time and the channel of the entry event. Chains are never changed, so
// a chain that goes one step further is one new node pointing at the one before: one small
// allocation, no copy.
type chain struct {
	at      int64
	prev    *chain
	start   int64
	channel string
}

func (c *chain) entry() int64 { return c.start }

// times are the times of the chain's steps, from the entry on.
func (c *chain) times() []int64 {
	n := 0
	for x := c; x != nil; x = x.prev {
		n++
	}
	out := make([]int64, n)
	for x := c; x != nil; x = x.prev {
		n--
		out[n] = x.at
	}
	return out
}

// A subscriber's state is 2 × steps chain pointers in the engine's slab (slots): first the
// best chain that reached each step (nil: none yet), then the chain each step is to take
// when the instant being read is over (staged). Slabs indexed by a small integer, rather
// than a struct and slices per subscriber, keep a report over millions of subscribers to a
// few allocations and few cache misses per event.

// stage records that c reaches its step at the instant being read; of two at one instant,
// the later entry (on a tie the first, which reached the step no later).
func stage(st []*chain, level int, c *chain) {
	if cur := st[level]; cur == nil || c.entry() > cur.entry() {
		st[level] = c
	}
}

// commit applies the staged chains: one replaces the chain at its step when its entry is
// later (on a tie the one there reached the step no later, which is as good or better).
func commit(levels, st []*chain) {
	for k, c := range st {
		if c == nil {
			continue
		}
		if cur := levels[k]; cur == nil || c.entry() > cur.entry() {
			levels[k] = c
		}
		st[k] = nil
	}
}

// depth is how many steps a subscriber reached (0: never entered; such subscribers have no
// state).
func depth(levels []*chain) int {
	for i := len(levels) - 1; i >= 0; i-- {
		if levels[i] != nil {
			return i + 1
		}
	}
	return 0
}

// stepMatch is a step an event of one name may be.
type stepMatch struct {
	index int
	match matcher // nil: no filters
}

// named are the steps of one event name.
type named struct {
	name  string
	steps []stepMatch
}

// engine computes one funnel over one range.
type engine struct {
	steps int
	// byName is a list, not a map: a funnel has at most 10 names, and comparing a few
	// short strings is cheaper than hashing one for every event read.
	byName   []named
	window   int64
	from, to int64
	max      int

	index map[string]int32 // subscriber id → its place in the slabs
	subs  []string         // subscriber ids by place
	at    []int64          // the instant each subscriber's staged chains are of
	dirty []bool           // whether a subscriber has staged chains
	slots []*chain         // 2 × steps per subscriber: reached, then staged
}

// errTooManySubscribers is the engine's stop when a report would follow more subscribers
// than MaxReportSubscribers.
var errTooManySubscribers = errors.New("funnels: too many subscribers for one report")

func newEngine(steps []Step, window time.Duration, from, to time.Time, maxSubscribers int) *engine {
	e := &engine{
		steps:  len(steps),
		window: int64(window),
		from:   from.UnixNano(),
		to:     to.UnixNano(),
		max:    maxSubscribers,
		index:  map[string]int32{},
	}
	for i, s := range steps {
		j := slices.IndexFunc(e.byName, func(n named) bool { return n.name == s.Event })
		if j < 0 {
			e.byName = append(e.byName, named{name: s.Event})
			j = len(e.byName) - 1
		}
		e.byName[j].steps = append(e.byName[j].steps, stepMatch{index: i, match: compile(s.Filters)})
	}
	return e
}

// candidates are the steps an event of this name may be.
func (e *engine) candidates(name string) []stepMatch {
	for _, n := range e.byName {
		if n.name == name {
			return n.steps
		}
	}
	return nil
}

// names are the event names the engine reads, for the scan's query.
func (e *engine) names() []string {
	out := make([]string, 0, len(e.byName))
	for _, n := range e.byName {
		out = append(out, n.name)
	}
	slices.Sort(out)
	return out
}

// state returns a subscriber's reached and staged chains.
func (e *engine) state(i int32) (levels, st []*chain) {
	base := int(i) * 2 * e.steps
	return e.slots[base : base+e.steps : base+e.steps], e.slots[base+e.steps : base+2*e.steps : base+2*e.steps]
}

// add reads one event. Events come in time order.
func (e *engine) add(ev eventlog.Event) error {
	cands := e.candidates(ev.Name)
	if len(cands) == 0 || ev.SubscriberID == "" { // an event of no subscriber (a publication) is no one's step
		return nil
	}
	t := ev.At.UnixNano()
	i, ok := e.index[ev.SubscriberID]
	if !ok {
		// Only an entry gives a subscriber state: the first step, in range, passing its
		// filters.
		if cands[0].index != 0 || t < e.from || t >= e.to || (cands[0].match != nil && !cands[0].match(ev.Properties)) {
			return nil
		}
		if len(e.subs) >= e.max {
			return errTooManySubscribers
		}
		i = int32(len(e.subs))
		e.index[ev.SubscriberID] = i
		e.subs = append(e.subs, ev.SubscriberID)
		e.at = append(e.at, t)
		e.dirty = append(e.dirty, false)
		e.slots = append(e.slots, make([]*chain, 2*e.steps)...)
	}
	levels, st := e.state(i)
	if e.at[i] != t {
		if e.dirty[i] {
			commit(levels, st)
			e.dirty[i] = false
		}
		e.at[i] = t
	}
	for _, c := range cands {
		if c.match != nil && !c.match(ev.Properties) {
			continue
		}
		if c.index == 0 {
			if t >= e.from && t < e.to {
				stage(st, 0, &chain{at: t, start: t, channel: ev.Channel})
				e.dirty[i] = true
			}
			continue
		}
		prev := levels[c.index-1] // reached before this instant
		if prev == nil || t-prev.entry() > e.window {
			continue
		}
		stage(st, c.index, &chain{at: t, prev: prev, start: prev.start, channel: prev.channel})
		e.dirty[i] = true
	}
	return nil
}

// finish applies what the last instants staged.
func (e *engine) finish() {
	for i, d := range e.dirty {
		if d {
			commit(e.state(int32(i)))
			e.dirty[i] = false
		}
	}
}

// run scans the log for the engine's events over [from, to + window) and finishes.
func (e *engine) run(ctx context.Context, log eventlog.Log, bot string) error {
	q := eventlog.Query{BotID: bot, Names: e.names(), From: time.Unix(0, e.from).UTC(), To: time.Unix(0, e.to+e.window).UTC()}
	err := log.Scan(ctx, q, e.add)
	if errors.Is(err, errTooManySubscribers) {
		return httpapi.Errorf(httpapi.KindUnprocessable, "report_too_large",
			"more than %d subscribers entered this funnel in the range; report over a shorter range", e.max).
			With("max_subscribers", e.max)
	}
	if err != nil {
		return err
	}
	e.finish()
	return nil
}

// reached is one subscriber's outcome: how deep they went and by which way.
type reached struct {
	subscriber string
	depth      int
	via        *chain
}

// each calls fn for every subscriber who entered, in the order they entered.
func (e *engine) each(fn func(reached)) {
	for i, id := range e.subs {
		levels, _ := e.state(int32(i))
		d := depth(levels)
		fn(reached{subscriber: id, depth: d, via: levels[d-1]})
	}
}
