// Package segments serves saved segments: sets of a bot's subscribers computed once from a
// report (a funnel's cohort, an experiment's variant) and kept with the definition they were
// computed from, so that whoever uses one (a broadcast audience) can tell when that
// definition has changed since (stale).
//
// Other families save and read segments through Service (Save, Get, Resolve, Members),
// composed in their wiring; no family package imports this one.
package segments

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Source kinds: what computed a segment's members.
const (
	KindFunnelCohort     = "funnel_cohort"
	KindExperimentCohort = "experiment_cohort"
)

// Bounds of a segment.
const (
	// MaxMembers bounds one segment (422 cohort_too_large beyond): a broadcast audience of
	// more is a filter over subscribers, not a saved list.
	MaxMembers = 100_000
	// MaxSegments bounds how many segments one bot keeps (409 limit_reached beyond).
	MaxSegments = 500
	// MaxNameLen bounds a segment's name, in characters.
	MaxNameLen = 200
	// MaxMemberIDBytes bounds one member id (the event log's bound on ids).
	MaxMemberIDBytes = 128
	// MaxSourceIDBytes bounds a source's id.
	MaxSourceIDBytes = 128
	// MaxDefinitionBytes bounds a source's definition (what was computed), as JSON.
	MaxDefinitionBytes = 4 << 10
	// ChunkSize is how many member ids one stored item holds (keys.go).
	ChunkSize = 1000
)

// Source is what computed a segment's members.
type Source struct {
	// Kind is KindFunnelCohort or KindExperimentCohort.
	Kind string `json:"kind"`
	// ID is the funnel's or the experiment's id.
	ID string `json:"id"`
	// Revision is the revision of the source's definition the members were computed from:
	// the segment is stale once the definition's current revision differs.
	Revision int64 `json:"revision"`
	// Definition is what was computed, a JSON object the source chooses (a funnel cohort's
	// range, step and breakdown; an experiment cohort's variant and range).
	Definition json.RawMessage `json:"definition"`
}

// Segment is a saved segment. Its members are read with Members.
type Segment struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Source      Source    `json:"source"`
	MemberCount int64     `json:"member_count"`
	ComputedAt  time.Time `json:"computed_at"`
	// Stale is computed on every read: the source's definition changed (or was deleted)
	// since the members were computed. It is never stored.
	Stale bool `json:"stale"`
}

// New is a segment to save.
type New struct {
	Name   string
	Source Source
	// Members are subscriber ids; duplicates are kept once, order does not matter.
	Members []string
}

// RevisionFunc tells the current revision of a source's definition. It returns an error
// matching ErrSourceGone (or an httpapi not-found error) when the definition no longer
// exists: the segment is then stale.
type RevisionFunc func(ctx context.Context, bot, id string) (revision int64, err error)

// ErrStale matches the error Resolve returns for a stale segment. That error is also a 409
// segment_stale problem, so a route may return it as it is.
var ErrStale = errors.New("segments: the segment's source definition changed since its members were computed")

// ErrSourceGone is what a RevisionFunc returns for a source definition that was deleted.
var ErrSourceGone = errors.New("segments: the segment's source no longer exists")

// Config is what the service is built on.
type Config struct {
	Store store.Store
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Sources looks up each source kind's current revision. A segment whose kind has no
	// lookup here is reported stale: nothing can vouch for it.
	Sources map[string]func(ctx context.Context, bot, id string) (revision int64, err error)
}

// Service is the segments of every bot.
type Service struct {
	store   store.Store
	now     func() time.Time
	sources map[string]func(ctx context.Context, bot, id string) (int64, error)
}

// NewService returns the service.
func NewService(c Config) *Service {
	now := c.Now
	if now == nil {
		now = time.Now
	}
	return &Service{store: c.Store, now: now, sources: c.Sources}
}

// Save computes nothing: it stores n's members (deduplicated, at most MaxMembers: 422
// cohort_too_large beyond) as a new segment and returns it. A bad name or source is a 400
// validation_failed; a bot at MaxSegments is a 409 limit_reached.
func (s *Service) Save(ctx context.Context, bot string, n New) (Segment, error) {
	return s.save(ctx, bot, n)
}

// Get returns a segment with its staleness; 404 not_found when it does not exist.
func (s *Service) Get(ctx context.Context, bot, id string) (Segment, error) {
	seg, err := s.load(ctx, bot, id)
	if err != nil {
		return Segment{}, err
	}
	return s.withStale(ctx, bot, seg, nil)
}

// Resolve returns a segment that is not stale, for a use of its members (a broadcast's
// audience): a stale one is an error matching ErrStale (a 409 segment_stale problem).
func (s *Service) Resolve(ctx context.Context, bot, id string) (Segment, error) {
	seg, err := s.Get(ctx, bot, id)
	if err != nil {
		return Segment{}, err
	}
	if seg.Stale {
		return Segment{}, httpapi.Errorf(httpapi.KindConflict, "segment_stale",
			"segment %s is stale: its %s %s changed since its members were computed; compute the cohort again", seg.ID, seg.Source.Kind, seg.Source.ID).
			With("segment_id", seg.ID).Wrap(ErrStale)
	}
	return seg, nil
}

// Members returns up to limit (1..store.MaxQueryLimit) member ids of a segment in
// ascending order from cursor ("" for the first page), and the cursor of the next page
// ("" after the last). A cursor is only valid for the segment that returned it.
func (s *Service) Members(ctx context.Context, bot, id, cursor string, limit int) ([]string, string, error) {
	return s.members(ctx, bot, id, cursor, limit)
}

// List returns a page of the bot's segments, oldest first, with their staleness.
func (s *Service) List(ctx context.Context, bot string, limit int, cursor string) ([]Segment, string, error) {
	return s.list(ctx, bot, limit, cursor)
}

// Delete removes a segment and its members; 404 when it does not exist.
func (s *Service) Delete(ctx context.Context, bot, id string) error {
	return s.delete(ctx, bot, id)
}
