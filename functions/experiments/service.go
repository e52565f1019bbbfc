package experiments

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Subjects tells whether what a variant shows exists in the bot: reactions, content
// documents and popups belong to other families, which the wiring asks.
type Subjects interface {
	// Check returns "" when the subject exists in the bot, else why it cannot be shown
	// (for the client: "no popup pop_... in this bot").
	Check(ctx context.Context, bot string, s Subject) (problem string, err error)
}

// Subscribers tells whether a subscriber exists, and on which channel: assignment is for
// the bot's subscribers only.
type Subscribers interface {
	// Channel returns the subscriber's channel type, or a 404 httpapi error when the bot
	// has no such subscriber.
	Channel(ctx context.Context, bot, id string) (string, error)
}

// Segments saves a cohort as a segment (the segments family).
type Segments interface {
	SaveCohort(ctx context.Context, bot string, c Cohort) (SavedSegment, error)
}

// Deps is what the service is built on. Segments may be nil: cohorts then answer 503.
type Deps struct {
	Store       store.Store
	Events      eventlog.Log
	Subjects    Subjects
	Subscribers Subscribers
	Segments    Segments
	Now         func() time.Time
}

// Service is the experiments of every bot.
type Service struct {
	store       store.Store
	events      eventlog.Log
	subjects    Subjects
	subscribers Subscribers
	segments    Segments
	now         func() time.Time
}

// NewService returns the service.
func NewService(d Deps) *Service {
	return &Service{store: d.Store, events: d.Events, subjects: d.Subjects, subscribers: d.Subscribers, segments: d.Segments, now: d.Now}
}

// stamp is a resource timestamp: UTC, whole seconds (docs/conventions.md).
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

func item(bot string, e Experiment) (store.Item, error) {
	b, err := store.Encode(e)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:      experimentKey(bot, e.ID),
		GSI1:     store.IndexKey{PK: byStatusPK(bot, e.Status), SK: e.ID},
		Revision: e.Revision,
		Data:     b,
	}, nil
}

// freeze returns the write that stores e's definition as its version e.Version.
func freeze(bot string, e Experiment, now time.Time) (store.Write, error) {
	v := Version{ExperimentID: e.ID, Number: e.Version, Definition: e.Definition, Revision: e.Revision, CreatedAt: now}
	b, err := store.Encode(v)
	if err != nil {
		return store.Write{}, err
	}
	return store.PutOp(store.Item{Key: versionKey(bot, e.ID, e.Version), Revision: 1, Data: b}, store.MustNotExist), nil
}

// NewExperiment is a create request.
type NewExperiment struct {
	Name       string    `json:"name"`
	Hypothesis *string   `json:"hypothesis"`
	Variants   []Variant `json:"variants"`
	// ControlVariantID defaults to the first variant.
	ControlVariantID *string `json:"control_variant_id"`
	Goal             *Goal   `json:"goal"`
	// Salt defaults to a random one.
	Salt *string `json:"salt"`
}

// newSalt is a random assignment salt.
func newSalt() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (Go 1.24+ crashes instead)
	return hex.EncodeToString(b[:])
}

// normalize spells empty lists as [] (never null).
func normalize(e *Experiment) {
	if e.Variants == nil {
		e.Variants = []Variant{}
	}
	if e.Goal.Filters == nil {
		e.Goal.Filters = []Filter{}
	}
	if e.Hypothesis != nil && *e.Hypothesis == "" {
		e.Hypothesis = nil
	}
}

// Create makes a draft experiment. Shape problems are a 400 validation_failed listing them
// all; subjects missing from the bot are a 422 unknown_subject.
func (s *Service) Create(ctx context.Context, bot string, in NewExperiment) (Experiment, error) {
	now := stamp(s.now())
	e := Experiment{ID: ids.At("exp", now), Name: in.Name, Hypothesis: in.Hypothesis, Status: Draft, Revision: 1,
		Definition: Definition{Variants: in.Variants, Salt: newSalt()}, CreatedAt: now, UpdatedAt: now}
	if in.ControlVariantID != nil {
		e.ControlVariantID = *in.ControlVariantID
	} else if len(in.Variants) > 0 {
		e.ControlVariantID = in.Variants[0].ID
	}
	if in.Salt != nil {
		e.Salt = *in.Salt
	}
	var p httpapi.Problems
	checkName(&p, e.Name)
	if e.Hypothesis != nil {
		checkHypothesis(&p, *e.Hypothesis)
	}
	if in.Goal == nil {
		p.Add("goal", "is required: the event that counts as a conversion")
	} else {
		e.Goal = *in.Goal
	}
	normalize(&e)
	checkDefinition(&p, e.Definition)
	if err := p.Err(); err != nil {
		return Experiment{}, err
	}
	if err := s.checkSubjects(ctx, bot, e.Definition); err != nil {
		return Experiment{}, err
	}
	it, err := item(bot, e)
	if err != nil {
		return Experiment{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot), 1, func(c store.Counter) error {
		if c.Count >= MaxExperiments {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d experiments; delete a draft or completed one first", MaxExperiments).
				With("limit", MaxExperiments)
		}
		return s.store.Transact(ctx, []store.Write{c.Write, store.PutOp(it, store.MustNotExist)})
	})
	if err != nil {
		return Experiment{}, fmt.Errorf("create experiment: %w", err)
	}
	return e, nil
}

// checkSubjects asks whether every variant's subject exists in the bot: 422 unknown_subject
// listing those that do not.
func (s *Service) checkSubjects(ctx context.Context, bot string, d Definition) error {
	var p httpapi.Problems
	for i, v := range d.Variants {
		why, err := s.subjects.Check(ctx, bot, v.Subject)
		if err != nil {
			return fmt.Errorf("check the subject of variant %s: %w", v.ID, err)
		}
		if why != "" {
			p.Add(fmt.Sprintf("variants[%d].subject", i), "%s", why)
		}
	}
	return p.Unprocessable("unknown_subject")
}

// load reads a stored experiment; an id that cannot exist is not looked up.
func (s *Service) load(ctx context.Context, bot, id string) (Experiment, error) {
	if !ids.Valid("exp", id) {
		return Experiment{}, httpapi.NotFound("experiment")
	}
	it, err := s.store.Get(ctx, experimentKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Experiment{}, httpapi.NotFound("experiment")
	}
	if err != nil {
		return Experiment{}, err
	}
	return store.Decode[Experiment](it)
}

// Get returns an experiment.
func (s *Service) Get(ctx context.Context, bot, id string) (Experiment, error) {
	return s.load(ctx, bot, id)
}

// List returns a page of the bot's experiments, oldest first; status "" lists every one.
func (s *Service) List(ctx context.Context, bot string, status Status, limit int, cursor string) ([]Experiment, string, error) {
	q := store.Query{PK: experimentsPK(bot), Prefix: experimentPrefix, Limit: limit, Cursor: cursor}
	if status != "" {
		q = store.Query{Index: store.GSI1, PK: byStatusPK(bot, status), Limit: limit, Cursor: cursor}
	}
	page, err := s.store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Experiment, 0, len(page.Items))
	for _, it := range page.Items {
		e, err := store.Decode[Experiment](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, e)
	}
	return out, page.Next, nil
}

// Patch is the members a PATCH changes; an absent (or null) member is not changed, a given
// one replaces the whole member. An empty hypothesis removes it.
type Patch struct {
	Name             *string    `json:"name"`
	Hypothesis       *string    `json:"hypothesis"`
	Variants         *[]Variant `json:"variants"`
	ControlVariantID *string    `json:"control_variant_id"`
	Goal             *Goal      `json:"goal"`
	Salt             *string    `json:"salt"`
}

// changesDefinition reports whether the patch gives a member of the versioned definition.
func (p Patch) changesDefinition() bool {
	return p.Variants != nil || p.ControlVariantID != nil || p.Goal != nil || p.Salt != nil
}

// Update applies p to the experiment at revision expected. A draft changes in place; a
// change to the definition of a running or paused experiment freezes it as the next
// version (reports and assignments then use it); a completed experiment does not change
// (409 experiment_not_editable). A change that changes nothing makes no new revision.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, p Patch) (Experiment, error) {
	old, err := s.load(ctx, bot, id)
	if err != nil {
		return Experiment{}, err
	}
	if old.Revision != expected {
		return Experiment{}, httpapi.StaleRevision(old.Revision)
	}
	if old.Status == Completed {
		return Experiment{}, httpapi.E(httpapi.KindConflict, "experiment_not_editable", "a completed experiment does not change; create a new one").
			With("state", old.Status)
	}
	e := old
	var problems httpapi.Problems
	if p.Name != nil {
		e.Name = *p.Name
		checkName(&problems, e.Name)
	}
	if p.Hypothesis != nil {
		e.Hypothesis = p.Hypothesis
		checkHypothesis(&problems, *p.Hypothesis)
	}
	if p.Variants != nil {
		e.Variants = *p.Variants
	}
	if p.ControlVariantID != nil {
		e.ControlVariantID = *p.ControlVariantID
	}
	if p.Goal != nil {
		e.Goal = *p.Goal
	}
	if p.Salt != nil {
		e.Salt = *p.Salt
	}
	normalize(&e)
	if p.changesDefinition() {
		checkDefinition(&problems, e.Definition)
	}
	if err := problems.Err(); err != nil {
		return Experiment{}, err
	}
	if p.Variants != nil {
		if err := s.checkSubjects(ctx, bot, e.Definition); err != nil {
			return Experiment{}, err
		}
	}
	if same, err := equalJSON(old, e); err != nil || same {
		return old, err
	}
	now := stamp(s.now())
	e.Revision++
	e.UpdatedAt = now
	var extra []store.Write
	if e.Status != Draft {
		same, err := equalJSON(old.Definition, e.Definition)
		if err != nil {
			return Experiment{}, err
		}
		if !same {
			if e.Version >= MaxVersions {
				return Experiment{}, httpapi.Errorf(httpapi.KindConflict, "limit_reached", "an experiment has at most %d versions; complete it and create a new one", MaxVersions).
					With("limit", MaxVersions)
			}
			e.Version++
			w, err := freeze(bot, e, now)
			if err != nil {
				return Experiment{}, err
			}
			extra = append(extra, w)
		}
	}
	if err := s.put(ctx, bot, e, expected, extra...); err != nil {
		return Experiment{}, err
	}
	return e, nil
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

// put writes e over the revision expected, with extra writes in the same transaction. A
// write that lost a race is the 409 of the revision that won.
func (s *Service) put(ctx context.Context, bot string, e Experiment, expected int64, extra ...store.Write) error {
	it, err := item(bot, e)
	if err != nil {
		return err
	}
	err = s.store.Transact(ctx, append([]store.Write{store.PutOp(it, store.RevisionIs(expected))}, extra...))
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		return s.stale(ctx, bot, e.ID)
	}
	if err != nil {
		return fmt.Errorf("write experiment: %w", err)
	}
	return nil
}

// stale is the 409 for a write that lost a race: with the revision that won, or 404 when
// the experiment was deleted meanwhile.
func (s *Service) stale(ctx context.Context, bot, id string) error {
	e, err := s.load(ctx, bot, id)
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(e.Revision)
}

// transit loads an experiment for action under expected_revision: 404, 409 stale_revision
// and 409 invalid_transition (or winner_already_selected) in that order.
func (s *Service) transit(ctx context.Context, bot, id string, expected int64, action Action) (Experiment, error) {
	e, err := s.load(ctx, bot, id)
	if err != nil {
		return Experiment{}, err
	}
	if e.Revision != expected {
		return Experiment{}, httpapi.StaleRevision(e.Revision)
	}
	return e, can(action, e)
}

// Transition starts, pauses, resumes or completes an experiment at revision expected.
// Starting checks the subjects again (422 unknown_subject: one may have been deleted since
// the draft was written) and freezes version 1.
func (s *Service) Transition(ctx context.Context, bot, id string, expected int64, action Action) (Experiment, error) {
	if _, ok := to[action]; !ok || action == ActionWinner {
		return Experiment{}, fmt.Errorf("experiments: %q is not a transition of Transition", action)
	}
	e, err := s.transit(ctx, bot, id, expected, action)
	if err != nil {
		return Experiment{}, err
	}
	now := stamp(s.now())
	e.Status = to[action]
	e.Revision++
	e.UpdatedAt = now
	var extra []store.Write
	switch action {
	case ActionStart:
		if err := s.checkSubjects(ctx, bot, e.Definition); err != nil {
			return Experiment{}, err
		}
		e.Version = 1
		e.StartedAt = &now
		w, err := freeze(bot, e, now)
		if err != nil {
			return Experiment{}, err
		}
		extra = append(extra, w)
	case ActionComplete:
		e.CompletedAt = &now
	}
	if err := s.put(ctx, bot, e, expected, extra...); err != nil {
		return Experiment{}, err
	}
	return e, nil
}

// Winner records variant as the winner of a running or paused experiment at revision
// expected, and completes it. A variant the current version lacks is a 422 unknown_variant.
func (s *Service) Winner(ctx context.Context, bot, id string, expected int64, variant string) (Experiment, error) {
	e, err := s.transit(ctx, bot, id, expected, ActionWinner)
	if err != nil {
		return Experiment{}, err
	}
	if err := knownVariant(e.Definition, variant); err != nil {
		return Experiment{}, err
	}
	now := stamp(s.now())
	e.Status = Completed
	e.WinnerVariantID = &variant
	e.CompletedAt = &now
	e.Revision++
	e.UpdatedAt = now
	if err := s.put(ctx, bot, e, expected); err != nil {
		return Experiment{}, err
	}
	return e, nil
}

// knownVariant is nil when d has the variant, else a 422 unknown_variant.
func knownVariant(d Definition, variant string) error {
	if _, i := d.variant(variant); i >= 0 {
		return nil
	}
	var p httpapi.Problems
	p.Add("variant_id", "%q is not a variant of the experiment's version", variant)
	return p.Unprocessable("unknown_variant")
}

// Delete removes a draft or completed experiment (409 invalid_transition for a running or
// paused one: complete it first), at revision expected when it is given, with its versions.
// The exposures it recorded stay in the event log until the bot is deleted.
func (s *Service) Delete(ctx context.Context, bot, id string, expected *int64) error {
	e, err := s.load(ctx, bot, id)
	if err != nil {
		return err
	}
	if expected != nil && e.Revision != *expected {
		return httpapi.StaleRevision(e.Revision)
	}
	if err := can(ActionDelete, e); err != nil {
		return err
	}
	err = store.Counted(ctx, s.store, countKey(bot), -1, func(c store.Counter) error {
		writes := []store.Write{c.Write, store.DeleteOp(experimentKey(bot, id), store.RevisionIs(e.Revision))}
		for n := int64(1); n <= e.Version; n++ {
			writes = append(writes, store.DeleteOp(versionKey(bot, id, n), store.Always))
		}
		return s.store.Transact(ctx, writes)
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 1 {
		return s.stale(ctx, bot, id)
	}
	if err != nil {
		return fmt.Errorf("delete experiment: %w", err)
	}
	return nil
}

// Versions returns a page of an experiment's versions, newest first.
func (s *Service) Versions(ctx context.Context, bot, id string, limit int, cursor string) ([]Version, string, error) {
	if _, err := s.load(ctx, bot, id); err != nil {
		return nil, "", err
	}
	page, err := s.store.Query(ctx, store.Query{PK: experimentsPK(bot), Prefix: versionPrefix(id), Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Version, 0, len(page.Items))
	for _, it := range page.Items {
		v, err := store.Decode[Version](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, v)
	}
	return out, page.Next, nil
}

// Version returns version n of an experiment: 404 when the experiment has no such version.
func (s *Service) Version(ctx context.Context, bot, id string, n int64) (Version, error) {
	e, err := s.load(ctx, bot, id)
	if err != nil {
		return Version{}, err
	}
	return s.version(ctx, bot, e, n)
}

func (s *Service) version(ctx context.Context, bot string, e Experiment, n int64) (Version, error) {
	if n < 1 || n > e.Version {
		return Version{}, httpapi.NotFound("experiment version")
	}
	it, err := s.store.Get(ctx, versionKey(bot, e.ID, n))
	if errors.Is(err, store.ErrNotFound) {
		return Version{}, httpapi.NotFound("experiment version")
	}
	if err != nil {
		return Version{}, err
	}
	return store.Decode[Version](it)
}

// CohortRevision is the segments family's look-up of an experiment cohort's source: the
// experiment's current version. A cohort is computed over the current version, so it is
// stale once the experiment has a newer one, or is deleted (404).
func CohortRevision(st store.Store) func(ctx context.Context, bot, id string) (int64, error) {
	s := &Service{store: st}
	return func(ctx context.Context, bot, id string) (int64, error) {
		e, err := s.load(ctx, bot, id)
		if err != nil {
			return 0, err
		}
		return e.Version, nil
	}
}
