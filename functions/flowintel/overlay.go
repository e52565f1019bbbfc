package flowintel

import (
	"context"
	"net/url"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/flowstats"
	"github.com/botplatform/api/shared/httpapi"
)

// Range bounds of the overlay: 30 days unless asked, at most 366.
const (
	DefaultRange = 30 * 24 * time.Hour
	MaxRange     = flowstats.MaxRange
)

// StepStats are one step's numbers over the range.
type StepStats struct {
	StepID string `json:"step_id"`
	Type   string `json:"type"`
	// Entered counts the visits of the step (a button press resuming a buttons step is not
	// a second visit); Completed those it executed without error; Errors those where it
	// failed the run; Continued the completed visits after which the run went on to another
	// step or ended normally (end step, last step, goto); Dropped = Completed - Continued:
	// the visits after which the run went no further: still waiting there (a wait or
	// buttons step), abandoned (a buttons wait ended by a reply, another button's reaction,
	// a newer wait, or expiry), or stopped without a step (its reaction or subscriber gone).
	Entered   int64 `json:"entered"`
	Completed int64 `json:"completed"`
	Continued int64 `json:"continued"`
	Dropped   int64 `json:"dropped"`
	Errors    int64 `json:"errors"`
	// MedianMS estimates the median time from entering the step to the run's next step (or
	// normal end) over the continued visits, from a histogram of power-of-two buckets from
	// 10 ms: the bucket's geometric middle, so the true median lies within a factor sqrt 2
	// of it, in [MedianLowMS, MedianHighMS). Nil without continued visits; MedianHighMS nil
	// when the median is past 31 days.
	MedianMS     *float64 `json:"median_ms"`
	MedianLowMS  *float64 `json:"median_low_ms"`
	MedianHighMS *float64 `json:"median_high_ms"`
}

// Totals sum the steps' numbers.
type Totals struct {
	Entered   int64 `json:"entered"`
	Completed int64 `json:"completed"`
	Continued int64 `json:"continued"`
	Dropped   int64 `json:"dropped"`
	Errors    int64 `json:"errors"`
}

// Overlay is a reaction version's steps with their numbers over a range.
type Overlay struct {
	ReactionID string `json:"reaction_id"`
	Version    int64  `json:"version"`
	// From and To are the range asked; Days the UTC days it counts (every day holding part
	// of it: counters are per UTC day).
	From     time.Time   `json:"from"`
	To       time.Time   `json:"to"`
	Timezone string      `json:"timezone"`
	Days     int         `json:"days"`
	Steps    []StepStats `json:"steps"`
	Totals   Totals      `json:"totals"`
}

// Range is a time range.
type Range struct{ From, To time.Time }

// parseRange reads ?from= and ?to= (RFC 3339): to defaults to now, from to 30 days before
// to; from must be before to, and the range at most 366 days (400 range_too_long).
func parseRange(q url.Values, now time.Time) (Range, error) {
	rg := Range{To: now.UTC()}
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"to", &rg.To}, {"from", &rg.From}} {
		s := q.Get(f.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return Range{}, httpapi.InvalidParam(f.name, f.name+" must be an RFC 3339 time such as 2026-01-01T00:00:00Z")
		}
		*f.t = t.UTC()
	}
	if rg.From.IsZero() {
		rg.From = rg.To.Add(-DefaultRange)
	}
	switch {
	case !rg.From.Before(rg.To):
		return Range{}, httpapi.InvalidParam("from", "from must be before to")
	case rg.To.Sub(rg.From) > MaxRange:
		return Range{}, httpapi.RangeTooLong(rg.To.Sub(rg.From), int(MaxRange/(24*time.Hour)))
	}
	return rg, nil
}

// parseVersion reads ?version= (0 when absent: the newest published).
func parseVersion(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 {
		return 0, httpapi.InvalidParam("version", "version must be a version number of at least 1")
	}
	return n, nil
}

// Overlay returns the numbers of a reaction version's steps over rg.
func (s *Service) Overlay(ctx context.Context, bot, reaction string, version int64, rg Range) (Overlay, error) {
	flow, err := s.flows.Flow(ctx, bot, reaction, version)
	if err != nil {
		return Overlay{}, err
	}
	counts, err := flowstats.Query(ctx, s.store, bot, flow.ReactionID, flow.Version, rg.From, rg.To)
	if err != nil {
		return Overlay{}, err
	}
	out := Overlay{ReactionID: flow.ReactionID, Version: flow.Version, From: rg.From, To: rg.To, Timezone: "UTC",
		Days: len(flowstats.Days(rg.From, rg.To)), Steps: make([]StepStats, 0, len(flow.Steps))}
	for _, st := range flow.Steps {
		ss := StepStats{StepID: st.ID, Type: st.Type}
		if c := counts[st.ID]; c != nil {
			ss.Entered, ss.Completed, ss.Continued, ss.Errors = c.Entered, c.Completed, c.Continued, c.Errors
			ss.Dropped = max(c.Completed-c.Continued, 0)
			if m, ok := flowstats.EstimateMedian(c.Times); ok {
				ms, low := m.MS, m.Low
				ss.MedianMS, ss.MedianLowMS, ss.MedianHighMS = &ms, &low, m.High
			}
		}
		out.Totals.Entered += ss.Entered
		out.Totals.Completed += ss.Completed
		out.Totals.Continued += ss.Continued
		out.Totals.Dropped += ss.Dropped
		out.Totals.Errors += ss.Errors
		out.Steps = append(out.Steps, ss)
	}
	return out, nil
}
