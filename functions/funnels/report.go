package funnels

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/botplatform/api/shared/httpapi"
)

// MaxRange bounds a report's range.
const MaxRange = 366 * 24 * time.Hour

// BreakdownChannel is the one breakdown reports take.
const BreakdownChannel = "channel"

// UnknownChannel is the breakdown group of subscribers whose entry event named no channel.
const UnknownChannel = "unknown"

// Range is a report's or a cohort's [from, to), read from RFC 3339 strings.
type Range struct{ From, To time.Time }

// parseRange checks from and to (RFC 3339; to after from); a range over MaxRange is a 400
// range_too_long rather than a field problem, so that clients can branch on it.
func parseRange(p *httpapi.Problems, from, to *string) (Range, error) {
	var r Range
	ok := true
	for _, f := range []struct {
		name string
		v    *string
		t    *time.Time
	}{{"from", from, &r.From}, {"to", to, &r.To}} {
		if f.v == nil {
			p.Add(f.name, "is required (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
			ok = false
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, *f.v)
		if err != nil {
			p.Add(f.name, "%q is not an RFC 3339 time such as 2026-01-01T00:00:00Z", *f.v)
			ok = false
			continue
		}
		*f.t = t.UTC()
	}
	if !ok {
		return r, nil
	}
	switch {
	case !r.To.After(r.From):
		p.Add("to", "must be after from")
	case r.To.Sub(r.From) > MaxRange:
		return r, httpapi.RangeTooLong(r.To.Sub(r.From), int(MaxRange/(24*time.Hour)))
	}
	return r, nil
}

// StepStats is one step of a report.
type StepStats struct {
	Step  int    `json:"step"`
	Event string `json:"event"`
	// Subscribers is how many subscribers reached the step (each once, however often).
	Subscribers int64 `json:"subscribers"`
	// ConversionFromPrevious and ConversionFromFirst are ratios (0..1, 4 decimals); step 1
	// converts 1 from itself when anyone entered.
	ConversionFromPrevious float64 `json:"conversion_from_previous"`
	ConversionFromFirst    float64 `json:"conversion_from_first"`
	// MedianSecondsFromPrevious is the median time from the previous step to this one
	// (milliseconds precision); null for step 1 and for a step nobody reached.
	MedianSecondsFromPrevious *float64 `json:"median_seconds_from_previous"`
}

// Group is the report of one breakdown group.
type Group struct {
	Channel string      `json:"channel"`
	Steps   []StepStats `json:"steps"`
}

// Report is a funnel's report over a range.
type Report struct {
	// FunnelID and DefinitionRevision name the saved funnel reported on; left out for an
	// ad-hoc query.
	FunnelID           string      `json:"funnel_id,omitempty"`
	DefinitionRevision int64       `json:"definition_revision,omitempty"`
	From               time.Time   `json:"from"`
	To                 time.Time   `json:"to"`
	ConversionWindow   int64       `json:"conversion_window"`
	Steps              []StepStats `json:"steps"`
	// Breakdown is "channel" or null; Groups are then the channels, the largest first.
	Breakdown  *string   `json:"breakdown"`
	Groups     []Group   `json:"groups,omitempty"`
	ComputedAt time.Time `json:"computed_at"`
}

// tally accumulates the outcomes of one group of subscribers.
type tally struct {
	reached []int64   // reached[k]: subscribers whose depth is at least k+1
	deltas  [][]int64 // deltas[k]: for k ≥ 1, nanoseconds from step k to step k+1 of each
}

func newTally(n int) *tally {
	return &tally{reached: make([]int64, n), deltas: make([][]int64, n)}
}

func (t *tally) add(r reached) {
	// Walk the chain back from the deepest step: step k+1's time minus step k's.
	k := r.depth - 1
	for c := r.via; c != nil; c, k = c.prev, k-1 {
		t.reached[k]++
		if c.prev != nil {
			t.deltas[k] = append(t.deltas[k], c.at-c.prev.at)
		}
	}
}

func (t *tally) stats(steps []Step) []StepStats {
	out := make([]StepStats, len(steps))
	for k, s := range steps {
		st := StepStats{Step: k + 1, Event: s.Event, Subscribers: t.reached[k]}
		if k == 0 {
			st.ConversionFromPrevious = ratio(t.reached[0], t.reached[0])
		} else {
			st.ConversionFromPrevious = ratio(t.reached[k], t.reached[k-1])
			st.MedianSecondsFromPrevious = median(t.deltas[k])
		}
		st.ConversionFromFirst = ratio(t.reached[k], t.reached[0])
		out[k] = st
	}
	return out
}

// ratio is a/b rounded to 4 decimals, 0 when b is.
func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(float64(a)/float64(b)*10000) / 10000
}

// median is the median of nanosecond durations in seconds, rounded to milliseconds; nil
// without any. It sorts ds.
func median(ds []int64) *float64 {
	if len(ds) == 0 {
		return nil
	}
	slices.Sort(ds)
	m := float64(ds[len(ds)/2])
	if len(ds)%2 == 0 {
		m = (float64(ds[len(ds)/2-1]) + m) / 2
	}
	s := math.Round(m/1e6) / 1e3
	return &s
}

// channelOf is the breakdown group of a way through: its entry event's channel.
func channelOf(c *chain) string {
	if c.channel == "" {
		return UnknownChannel
	}
	return c.channel
}

// report tallies a finished engine.
func report(e *engine, steps []Step, breakdown bool) ([]StepStats, []Group) {
	total := newTally(len(steps))
	groups := map[string]*tally{}
	e.each(func(r reached) {
		total.add(r)
		if breakdown {
			ch := channelOf(r.via)
			g := groups[ch]
			if g == nil {
				g = newTally(len(steps))
				groups[ch] = g
			}
			g.add(r)
		}
	})
	var out []Group
	if breakdown {
		out = make([]Group, 0, len(groups))
		for ch, g := range groups {
			out = append(out, Group{Channel: ch, Steps: g.stats(steps)})
		}
		slices.SortFunc(out, func(a, b Group) int {
			return cmp.Or(cmp.Compare(b.Steps[0].Subscribers, a.Steps[0].Subscribers), cmp.Compare(a.Channel, b.Channel))
		})
	}
	return total.stats(steps), out
}
