package funnels

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// MaxCohortMembers bounds a cohort (the segments family's bound: 422 cohort_too_large
// beyond); checked before the members are gathered.
const MaxCohortMembers = 100_000

// CohortDefinition is what a cohort was computed as: it is kept with the segment.
type CohortDefinition struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Step is the deepest step the members reached (1-based); Converted is true when it is
	// the last one.
	Step      int              `json:"step"`
	Converted bool             `json:"converted"`
	Breakdown *CohortBreakdown `json:"breakdown"`
}

// CohortBreakdown narrows a cohort to one breakdown group.
type CohortBreakdown struct {
	Channel string `json:"channel"`
}

// Cohort is a computed cohort for the segments family to save.
type Cohort struct {
	Name               string
	FunnelID           string
	DefinitionRevision int64
	Definition         CohortDefinition
	Members            []string
}

// CohortSaver saves a cohort as a segment (the segments family, composed in wiring). It
// returns the saved segment, as the response shows it, and its id.
type CohortSaver interface {
	SaveCohort(ctx context.Context, bot string, c Cohort) (segment any, id string, err error)
}

// CohortRequest is the body of POST .../cohorts.
type CohortRequest struct {
	Name *string `json:"name"`
	From *string `json:"from"`
	To   *string `json:"to"`
	// Step is a step number (1-based: reached it but not the next) or "converted" (reached
	// the last).
	Step      json.RawMessage `json:"step"`
	Breakdown *struct {
		Channel *string `json:"channel"`
	} `json:"breakdown"`
}

// parseStep reads a cohort's step against a funnel of n steps; 0 with a problem when it is
// not one.
func parseStep(p *httpapi.Problems, raw json.RawMessage, n int) int {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		p.Add("step", `is required: a step number from 1 to %d, or "converted"`, n)
		return 0
	}
	if string(raw) == `"converted"` {
		return n
	}
	i, err := strconv.Atoi(string(raw))
	if err != nil || i < 1 || i > n {
		p.Add("step", `must be a step number from 1 to %d (those who reached it but not the next), or "converted"`, n)
		return 0
	}
	return i
}

// Cohort computes who of the funnel's report over the request's range stopped at its step
// (in its channel when given), and saves them as a segment.
func (s *Service) Cohort(ctx context.Context, bot, id string, req CohortRequest) (any, string, error) {
	f, err := s.Get(ctx, bot, id)
	if err != nil {
		return nil, "", err
	}
	var p httpapi.Problems
	name := ""
	if req.Name == nil {
		p.Add("name", "is required")
	} else {
		name = *req.Name
		checkName(&p, "name", name)
	}
	r, err := parseRange(&p, req.From, req.To)
	if err != nil {
		return nil, "", err
	}
	step := parseStep(&p, req.Step, len(f.Steps))
	var channel *string
	if req.Breakdown != nil {
		switch c := req.Breakdown.Channel; {
		case c == nil || *c == "":
			p.Add("breakdown.channel", "is required in a breakdown: a channel of the report's groups")
		case len(*c) > eventlog.MaxChannelBytes:
			p.Add("breakdown.channel", "is %d bytes; a channel is at most %d", len(*c), eventlog.MaxChannelBytes)
		default:
			channel = c
		}
	}
	if err := p.Err(); err != nil {
		return nil, "", err
	}
	if s.cohorts == nil {
		return nil, "", httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "cohorts cannot be saved in this process")
	}
	e, err := s.compute(ctx, bot, f.Steps, f.Window(), r)
	if err != nil {
		return nil, "", err
	}
	in := func(x reached) bool { return x.depth == step && (channel == nil || channelOf(x.via) == *channel) }
	n := 0
	e.each(func(x reached) {
		if in(x) {
			n++
		}
	})
	if n > s.maxCohort {
		return nil, "", httpapi.Errorf(httpapi.KindUnprocessable, "cohort_too_large",
			"the cohort has %d members; a segment holds at most %d: narrow the range or the breakdown", n, s.maxCohort).
			With("member_count", n).With("max_members", s.maxCohort)
	}
	members := make([]string, 0, n)
	e.each(func(x reached) {
		if in(x) {
			members = append(members, x.subscriber)
		}
	})
	def := CohortDefinition{From: r.From, To: r.To, Step: step, Converted: step == len(f.Steps)}
	if channel != nil {
		def.Breakdown = &CohortBreakdown{Channel: *channel}
	}
	return s.cohorts.SaveCohort(ctx, bot, Cohort{Name: name, FunnelID: f.ID, DefinitionRevision: f.DefinitionRevision, Definition: def, Members: members})
}
