package experiments

import (
	"context"
	"encoding/json"
	"time"

	"github.com/botplatform/api/shared/httpapi"
)

// CohortRequest is a cohort's body: which subscribers of the current version's report
// become the segment.
type CohortRequest struct {
	Name      string  `json:"name"`
	VariantID string  `json:"variant_id"`
	Converted *bool   `json:"converted"`
	From      *string `json:"from"`
	To        *string `json:"to"`
}

// Validate checks what decoding cannot; the range is checked with the report's rules.
func (c *CohortRequest) Validate() error {
	var p httpapi.Problems
	p.Require("variant_id", c.VariantID)
	if c.Converted == nil {
		p.Add("converted", "is required: true for the variant's converted subscribers, false for the others it exposed")
	}
	return p.Err()
}

// Cohort is what the segments family is asked to save.
type Cohort struct {
	Name         string
	ExperimentID string
	// Version is the experiment version the members were computed over: the segment is
	// stale once the experiment has a newer one (CohortRevision).
	Version int64
	// Definition is what was computed, as the segment's source shows it.
	Definition json.RawMessage
	Members    []string
}

// CohortDefinition is an experiment cohort's source definition.
type CohortDefinition struct {
	Version   int64     `json:"version"`
	VariantID string    `json:"variant_id"`
	Converted bool      `json:"converted"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
}

// SavedSegment is the segment a cohort became, as the segments family shows it.
type SavedSegment struct {
	ID   string
	JSON json.RawMessage
}

// SaveCohort computes which subscribers the current version exposed to a variant in the
// range and did (or did not) convert, as a report counts them, and saves them as a segment.
func (s *Service) SaveCohort(ctx context.Context, bot, id string, req CohortRequest) (SavedSegment, error) {
	r, err := parseRange(req.From, req.To)
	if err != nil {
		return SavedSegment{}, err
	}
	if s.segments == nil {
		return SavedSegment{}, httpapi.E(httpapi.KindUnavailable, "segments_unavailable", "this deployment cannot save segments")
	}
	e, err := s.load(ctx, bot, id)
	if err != nil {
		return SavedSegment{}, err
	}
	v, err := s.reportVersion(ctx, bot, e, nil)
	if err != nil {
		return SavedSegment{}, err
	}
	if err := knownVariant(v.Definition, req.VariantID); err != nil {
		return SavedSegment{}, err
	}
	t, err := s.scan(ctx, bot, e.ID, v, r)
	if err != nil {
		return SavedSegment{}, err
	}
	_, want := v.variant(req.VariantID)
	members := []string{}
	for sub, st := range t.subs {
		if int(st>>1) == want && (st&1 == 1) == *req.Converted {
			members = append(members, sub)
		}
	}
	def, err := json.Marshal(CohortDefinition{Version: v.Number, VariantID: req.VariantID, Converted: *req.Converted, From: r.From, To: r.To})
	if err != nil {
		return SavedSegment{}, err
	}
	return s.segments.SaveCohort(ctx, bot, Cohort{Name: req.Name, ExperimentID: e.ID, Version: v.Number, Definition: def, Members: members})
}
