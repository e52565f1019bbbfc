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

// chain is one way through the first steps: when each step was reached (Unix nanoseconds;
// times[0] is the entry) and the channel of the entry event.
type chain struct {
	times   []int64
	channel string
}

func (c *chain) entry() int64 { return c.times[0] }

// staged is an update of the instant being read: the chain that now reaches a step.
type staged struct {
	level int
	c     *chain
}

// path is a subscriber's state: the best chain that reached each step (nil: none yet).
type path struct {
	levels   []*chain
	stagedAt int64
	staged   []staged
}

// commit applies the staged updates: a chain replaces the one at its step when its entry
// is later (on a tie the one there reached the step no later, which is as good or better).
func (p *path) commit() {
	for _, s := range p.staged {
		if cur := p.levels[s.level]; cur == nil || s.c.entry() > cur.entry() {
			p.levels[s.level] = s.c
		}
	}
	clear(p.staged)
	p.staged = p.staged[:0]
}

// depth is how many steps the path reached (0: it entered at no step-1 event in range;
// such paths are never created).
func (p *path) depth() int {
	for i := len(p.levels) - 1; i >= 0; i-- {
		if p.levels[i] != nil {
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

// engine computes one funnel over one range.
type engine struct {
	steps    int
	byName   map[string][]stepMatch
	window   int64
	from, to int64
	max      int
	paths    map[string]*path
}

// errTooManySubscribers is the engine's stop when a report would follow more subscribers
// than MaxReportSubscribers.
var errTooManySubscribers = errors.New("funnels: too many subscribers for one report")

func newEngine(steps []Step, window time.Duration, from, to time.Time, maxSubscribers int) *engine {
	e := &engine{
		steps:  len(steps),
		byName: map[string][]stepMatch{},
		window: int64(window),
		from:   from.UnixNano(),
		to:     to.UnixNano(),
		max:    maxSubscribers,
		paths:  map[string]*path{},
	}
	for i, s := range steps {
		e.byName[s.Event] = append(e.byName[s.Event], stepMatch{index: i, match: compile(s.Filters)})
	}
	return e
}

// names are the event names the engine reads, for the scan's query.
func (e *engine) names() []string {
	out := make([]string, 0, len(e.byName))
	for n := range e.byName {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// add reads one event. Events come in time order.
func (e *engine) add(ev eventlog.Event) error {
	cands := e.byName[ev.Name]
	if len(cands) == 0 || ev.SubscriberID == "" { // an event of no subscriber (a publication) is no one's step
		return nil
	}
	t := ev.At.UnixNano()
	p := e.paths[ev.SubscriberID]
	if p == nil {
		// Only an entry starts a path: the first step, in range, passing its filters.
		if cands[0].index != 0 || t < e.from || t >= e.to || (cands[0].match != nil && !cands[0].match(ev.Properties)) {
			return nil
		}
		if len(e.paths) >= e.max {
			return errTooManySubscribers
		}
		p = &path{levels: make([]*chain, e.steps), stagedAt: t}
		e.paths[ev.SubscriberID] = p
	}
	if p.stagedAt != t {
		p.commit()
		p.stagedAt = t
	}
	for _, c := range cands {
		if c.match != nil && !c.match(ev.Properties) {
			continue
		}
		if c.index == 0 {
			if t >= e.from && t < e.to {
				p.staged = append(p.staged, staged{level: 0, c: &chain{times: []int64{t}, channel: ev.Channel}})
			}
			continue
		}
		prev := p.levels[c.index-1] // committed: reached before this instant
		if prev == nil || t-prev.entry() > e.window {
			continue
		}
		times := make([]int64, c.index+1)
		copy(times, prev.times)
		times[c.index] = t
		p.staged = append(p.staged, staged{level: c.index, c: &chain{times: times, channel: prev.channel}})
	}
	return nil
}

// finish applies what the last instants staged.
func (e *engine) finish() {
	for _, p := range e.paths {
		p.commit()
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

// each calls fn for every subscriber who entered, in no particular order.
func (e *engine) each(fn func(reached)) {
	for id, p := range e.paths {
		d := p.depth()
		fn(reached{subscriber: id, depth: d, via: p.levels[d-1]})
	}
}
