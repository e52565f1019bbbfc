package funnels

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// idPrefix prefixes funnel ids.
const idPrefix = "fnl"

// Service is the funnels of every bot.
type Service struct {
	store   store.Store
	events  eventlog.Log
	cohorts CohortSaver
	now     func() time.Time
	// maxSubscribers and maxCohort are MaxReportSubscribers and MaxCohortMembers; tests
	// lower them.
	maxSubscribers, maxCohort int
}

// NewService returns the service. cohorts may be nil where cohorts are not saved (they
// then answer 503).
func NewService(st store.Store, events eventlog.Log, cohorts CohortSaver, now func() time.Time) *Service {
	return &Service{store: st, events: events, cohorts: cohorts, now: now, maxSubscribers: MaxReportSubscribers, maxCohort: MaxCohortMembers}
}

// stamp is a resource timestamp: UTC, whole seconds.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// apply sets the members d gives on f and returns the problems of the result.
func apply(f *Funnel, d Definition, fresh bool) httpapi.Problems {
	var p httpapi.Problems
	if d.Name != nil {
		f.Name = *d.Name
	}
	if fresh || d.Name != nil {
		checkName(&p, "name", f.Name)
	}
	return append(p, applyDefinition(f, d.Steps, d.ConversionWindow, fresh)...)
}

// applyDefinition sets the steps and the window given on f (fresh: a new funnel, whose
// steps are required and whose window defaults) and returns their problems.
func applyDefinition(f *Funnel, steps *[]Step, window json.RawMessage, fresh bool) httpapi.Problems {
	var p httpapi.Problems
	if steps != nil {
		f.Steps = normalize(slices.Clone(*steps))
		checkSteps(&p, "steps", f.Steps)
	} else if fresh {
		p.Add("steps", "is required: %d to %d steps", MinSteps, MaxSteps)
	}
	if window != nil {
		w, msg := parseWindow(window)
		if msg != "" {
			p.Add("conversion_window", "%s", msg)
		}
		f.ConversionWindow = int64(w / time.Second)
	} else if fresh {
		f.ConversionWindow = int64(DefaultWindow / time.Second)
	}
	if len(p) == 0 {
		if b, err := json.Marshal(f.Steps); err == nil && len(b) > maxDefinitionBytes {
			p.Add("steps", "are %d bytes of JSON; a funnel's steps are at most %d", len(b), maxDefinitionBytes)
		}
	}
	return p
}

func (s *Service) item(bot string, f Funnel) (store.Item, error) {
	b, err := store.Encode(f)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: funnelKey(bot, f.ID), Revision: f.Revision, Data: b}, nil
}

// Create saves a new funnel.
func (s *Service) Create(ctx context.Context, bot string, d Definition) (Funnel, error) {
	at := s.now()
	now := stamp(at)
	// The id from the clock's full reading: funnels created within one second still list
	// in the order they were created.
	f := Funnel{ID: ids.At(idPrefix, at), Revision: 1, DefinitionRevision: 1, CreatedAt: now, UpdatedAt: now}
	p := apply(&f, d, true)
	if err := p.Err(); err != nil {
		return Funnel{}, err
	}
	it, err := s.item(bot, f)
	if err != nil {
		return Funnel{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot), 1, func(c store.Counter) error {
		if c.Count >= MaxFunnels {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d funnels; delete one first", MaxFunnels).
				With("limit", MaxFunnels)
		}
		return s.store.Transact(ctx, []store.Write{c.Write, store.PutOp(it, store.MustNotExist)})
	})
	if err != nil {
		return Funnel{}, fmt.Errorf("create funnel: %w", err)
	}
	return f, nil
}

// Get returns a funnel; an id that cannot exist is not looked up.
func (s *Service) Get(ctx context.Context, bot, id string) (Funnel, error) {
	if !ids.Valid(idPrefix, id) {
		return Funnel{}, httpapi.NotFound("funnel")
	}
	it, err := s.store.Get(ctx, funnelKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Funnel{}, httpapi.NotFound("funnel")
	}
	if err != nil {
		return Funnel{}, err
	}
	return store.Decode[Funnel](it)
}

// DefinitionRevision is the funnel's DefinitionRevision: what a cohort computed from it
// is compared with (a not-found error when the funnel was deleted).
func (s *Service) DefinitionRevision(ctx context.Context, bot, id string) (int64, error) {
	f, err := s.Get(ctx, bot, id)
	return f.DefinitionRevision, err
}

// List returns a page of the bot's funnels, oldest first.
func (s *Service) List(ctx context.Context, bot string, limit int, cursor string) ([]Funnel, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: funnelsPK(bot), Prefix: funnelPrefix, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Funnel, 0, len(page.Items))
	for _, it := range page.Items {
		f, err := store.Decode[Funnel](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, f)
	}
	return out, page.Next, nil
}

// Update applies d to the funnel at revision expected. A change that changes nothing makes
// no new revision; a change of the steps or the window moves DefinitionRevision too.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, d Definition) (Funnel, error) {
	old, err := s.Get(ctx, bot, id)
	if err != nil {
		return Funnel{}, err
	}
	if old.Revision != expected {
		return Funnel{}, httpapi.StaleRevision(old.Revision)
	}
	f := old
	f.Steps = slices.Clone(old.Steps)
	p := apply(&f, d, false)
	if err := p.Err(); err != nil {
		return Funnel{}, err
	}
	sameDef, err := equalJSON(struct {
		S []Step
		W int64
	}{old.Steps, old.ConversionWindow}, struct {
		S []Step
		W int64
	}{f.Steps, f.ConversionWindow})
	if err != nil {
		return Funnel{}, err
	}
	if sameDef && f.Name == old.Name {
		return old, nil
	}
	f.Revision++
	if !sameDef {
		f.DefinitionRevision = f.Revision
	}
	f.UpdatedAt = stamp(s.now())
	it, err := s.item(bot, f)
	if err != nil {
		return Funnel{}, err
	}
	err = s.store.Put(ctx, it, store.RevisionIs(expected))
	if errors.Is(err, store.ErrConditionFailed) {
		cur, gerr := s.Get(ctx, bot, id)
		if gerr != nil {
			return Funnel{}, gerr
		}
		return Funnel{}, httpapi.StaleRevision(cur.Revision)
	}
	if err != nil {
		return Funnel{}, fmt.Errorf("update funnel: %w", err)
	}
	return f, nil
}

func equalJSON(a, b any) (bool, error) {
	x, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	y, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return string(x) == string(y), nil
}

// Delete removes a funnel, at revision expected when it is given. The segments computed
// from it stay, and are stale from then on.
func (s *Service) Delete(ctx context.Context, bot, id string, expected *int64) error {
	f, err := s.Get(ctx, bot, id)
	if err != nil {
		return err
	}
	if expected != nil && f.Revision != *expected {
		return httpapi.StaleRevision(f.Revision)
	}
	err = store.Counted(ctx, s.store, countKey(bot), -1, func(c store.Counter) error {
		return s.store.Transact(ctx, []store.Write{c.Write, store.DeleteOp(funnelKey(bot, id), store.RevisionIs(f.Revision))})
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 1 {
		cur, gerr := s.Get(ctx, bot, id)
		if gerr != nil {
			return gerr
		}
		return httpapi.StaleRevision(cur.Revision)
	}
	if err != nil {
		return fmt.Errorf("delete funnel: %w", err)
	}
	return nil
}

// compute runs the engine for steps and window over r.
func (s *Service) compute(ctx context.Context, bot string, steps []Step, window time.Duration, r Range) (*engine, error) {
	if s.events == nil {
		return nil, httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "reports are not available in this process")
	}
	e := newEngine(steps, window, r.From, r.To, s.maxSubscribers)
	if err := e.run(ctx, s.events, bot); err != nil {
		return nil, fmt.Errorf("funnel report: %w", err)
	}
	return e, nil
}

func (s *Service) buildReport(ctx context.Context, bot string, steps []Step, window time.Duration, r Range, breakdown bool) (Report, error) {
	e, err := s.compute(ctx, bot, steps, window, r)
	if err != nil {
		return Report{}, err
	}
	rep := Report{From: r.From, To: r.To, ConversionWindow: int64(window / time.Second), ComputedAt: stamp(s.now())}
	rep.Steps, rep.Groups = report(e, steps, breakdown)
	if breakdown {
		b := BreakdownChannel
		rep.Breakdown = &b
	}
	return rep, nil
}

// Report computes a saved funnel's report over r.
func (s *Service) Report(ctx context.Context, bot, id string, r Range, breakdown bool) (Report, error) {
	f, err := s.Get(ctx, bot, id)
	if err != nil {
		return Report{}, err
	}
	rep, err := s.buildReport(ctx, bot, f.Steps, f.Window(), r, breakdown)
	if err != nil {
		return Report{}, err
	}
	rep.FunnelID, rep.DefinitionRevision = f.ID, f.DefinitionRevision
	return rep, nil
}

// Query computes the report of an unsaved funnel (steps and window checked as a saved
// one's) over r.
func (s *Service) Query(ctx context.Context, bot string, steps []Step, window time.Duration, r Range, breakdown bool) (Report, error) {
	return s.buildReport(ctx, bot, steps, window, r, breakdown)
}
