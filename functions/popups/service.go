package popups

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store"
)

// Fields tells which custom subscriber fields a bot has: a popup's form writes to them.
type Fields interface {
	FieldNames(ctx context.Context, bot string) ([]string, error)
}

// FieldWriter writes the values a visitor entered in a popup's form to the subscriber the
// visitor is (or becomes), and finds the subscriber a visitor is.
type FieldWriter interface {
	// WriteFields writes values to the visitor's web subscriber, creating it, and returns
	// its id.
	WriteFields(ctx context.Context, bot, visitorID string, values map[string]string) (string, error)
	// Subscriber returns the id of the visitor's web subscriber, "" when there is none yet.
	Subscriber(ctx context.Context, bot, visitorID string) (string, error)
}

// EventLimit is how many events one website (origin) may post to one bot: a page that
// loops, or a script someone copied, must not run up the counters or the table's bill.
var EventLimit = ratelimit.Limit{Name: "popup events", Max: 600, Window: time.Minute}

// Service is the popups of every bot.
type Service struct {
	store   store.Store
	fields  Fields
	writer  FieldWriter
	limiter *ratelimit.Limiter
	limit   ratelimit.Limit
	events  eventlog.Log
	now     func() time.Time
	log     *slog.Logger
}

// WithEvents makes the service append its public events (shown, closed, submitted) to l.
func (s *Service) WithEvents(l eventlog.Log) *Service { s.events = l; return s }

// NewService returns the service. writer may be nil: the fields of conversions are then
// checked but written nowhere. limiter may be nil only where events are not served (nil
// counts no limit). log may be nil (discard).
func NewService(st store.Store, fields Fields, writer FieldWriter, limiter *ratelimit.Limiter, now func() time.Time, log *slog.Logger) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{store: st, fields: fields, writer: writer, limiter: limiter, limit: EventLimit, now: now, log: log}
}

// stamp is a resource timestamp: UTC, whole seconds (docs/conventions.md).
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

func (s *Service) item(bot string, p Popup) (store.Item, error) {
	b, err := store.Encode(p)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:      popupKey(bot, p.ID),
		GSI1:     store.IndexKey{PK: byStatusPK(bot, p.Status), SK: p.ID},
		Revision: p.Revision,
		Data:     b,
	}, nil
}

// apply sets the members d gives on p. A variant change (keys or shares) restarts the
// experiment's results; a content-only change does not.
func apply(p *Popup, d Definition, now time.Time) {
	if d.Name != nil {
		p.Name = *d.Name
	}
	if d.Status != nil {
		p.Status = *d.Status
	}
	if d.Content != nil {
		p.Content = *d.Content
	}
	if d.Targeting != nil {
		p.Targeting = *d.Targeting
	}
	if d.Frequency != nil {
		p.Frequency = *d.Frequency
	}
	if d.Schedule != nil {
		p.Schedule = d.Schedule
		if emptySchedule(d.Schedule) {
			p.Schedule = nil
		}
	}
	if d.Experiment != nil {
		switch {
		case len(d.Experiment.Variants) == 0:
			p.Experiment = nil
		case p.Experiment == nil || !sameSplit(p.Experiment.Variants, d.Experiment.Variants):
			p.Experiment = &Experiment{Variants: d.Experiment.Variants, StartedAt: now}
		default:
			p.Experiment = &Experiment{Variants: d.Experiment.Variants, StartedAt: p.Experiment.StartedAt}
		}
	}
	if d.AllowedOrigins != nil {
		p.AllowedOrigins = *d.AllowedOrigins
	}
	normalize(p)
}

// sameSplit reports whether two experiments split visitors alike.
func sameSplit(a, b []Variant) bool {
	return slices.EqualFunc(a, b, func(x, y Variant) bool { return x.Key == y.Key && x.Share == y.Share })
}

// normalize spells empty lists as [] (never null) and fills defaults.
func normalize(p *Popup) {
	if p.Content.Fields == nil {
		p.Content.Fields = []Field{}
	}
	t := &p.Targeting
	if t.URLRules == nil {
		t.URLRules = []URLRule{}
	}
	if t.ExcludeURLRules == nil {
		t.ExcludeURLRules = []URLRule{}
	}
	if t.Devices == nil {
		t.Devices = []Device{}
	}
	if t.Visitors == "" {
		t.Visitors = VisitorsAll
	}
	if p.Schedule != nil && p.Schedule.DaysOfWeek == nil {
		p.Schedule.DaysOfWeek = []string{}
	}
	if p.AllowedOrigins == nil {
		p.AllowedOrigins = []string{}
	}
}

// newPopup is what a create would store for d, before any check.
func newPopup(d Definition, now time.Time) Popup {
	p := Popup{ID: ids.At("pop", now), Status: StatusPaused, Revision: 1, Frequency: defaultFrequency, CreatedAt: now, UpdatedAt: now}
	apply(&p, d, now)
	return p
}

// check returns the problems and warnings of pop, which d made (fresh: a new popup, which
// needs content). The checks against the world (the bot's custom fields, the clock) apply
// to the members d gives: a popup whose schedule has ended can still be paused, and one
// whose form field was deleted since can still be renamed.
func (s *Service) check(ctx context.Context, bot string, d Definition, pop *Popup, fresh bool, now time.Time) (problems, warnings httpapi.Problems, err error) {
	if fresh && d.Content == nil {
		// One problem rather than one per member of the absent content.
		problems.Add("content", "is required")
		checkShape(&problems, pop, false)
	} else {
		checkShape(&problems, pop, true)
	}
	if d.Content != nil && len(pop.Content.Fields) > 0 {
		if s.fields == nil {
			return nil, nil, errors.New("popups: no catalog of custom fields to check forms against")
		}
		names, err := s.fields.FieldNames(ctx, bot)
		if err != nil {
			return nil, nil, fmt.Errorf("read the bot's custom fields: %w", err)
		}
		for i, f := range pop.Content.Fields {
			if fieldName.MatchString(f.Name) && !slices.Contains(names, f.Name) {
				problems.Add(fmt.Sprintf("content.fields[%d].name", i), "%q is not a custom field of this bot; create it first (subscriber custom fields)", f.Name)
			}
		}
	}
	if d.Schedule != nil && pop.Schedule != nil && pop.Schedule.EndsAt != nil {
		if end, err := time.Parse(time.RFC3339, *pop.Schedule.EndsAt); err == nil && !end.After(now) {
			problems.Add("schedule.ends_at", "has passed: the popup would never show")
		}
	}
	if pop.Status == StatusActive && len(pop.Targeting.URLRules) == 0 {
		warnings.Add("targeting.url_rules", "is empty: the active popup shows on every page of the allowed origins")
	}
	if pop.Targeting.DelaySeconds > 0 && pop.Targeting.ExitIntent {
		warnings.Add("targeting.delay_seconds", "is set with exit_intent: the popup shows on exit intent only after the delay, so visitors who leave earlier never see it")
	}
	return problems, warnings, nil
}

// Create makes a popup (paused unless status says otherwise). Every problem, shape and
// preflight alike, is a 400 validation_failed listing them all.
func (s *Service) Create(ctx context.Context, bot string, d Definition) (Popup, error) {
	now := stamp(s.now())
	pop := newPopup(d, now)
	problems, _, err := s.check(ctx, bot, d, &pop, true, now)
	if err != nil {
		return Popup{}, err
	}
	if err := problems.Err(); err != nil {
		return Popup{}, err
	}
	it, err := s.item(bot, pop)
	if err != nil {
		return Popup{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot), 1, func(c store.Counter) error {
		// Count is the count read, before this creation.
		if c.Count >= MaxPopups {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d popups; delete one first", MaxPopups).
				With("limit", MaxPopups)
		}
		writes := []store.Write{c.Write, store.PutOp(it, store.MustNotExist)}
		for _, o := range pop.AllowedOrigins {
			writes = append(writes, store.PutOp(store.Item{Key: originKey(bot, o, pop.ID), Revision: 1}, store.Always))
		}
		return s.store.Transact(ctx, writes)
	})
	if err != nil {
		return Popup{}, fmt.Errorf("create popup: %w", err)
	}
	return pop, nil
}

// Preflight is preflight's answer: the problems that would refuse the definition as a new
// popup, and the warnings about what it would do.
type Preflight struct {
	OK       bool                 `json:"ok"`
	Problems []httpapi.FieldError `json:"problems"`
	Warnings []httpapi.FieldError `json:"warnings"`
}

// Preflight checks d as Create would, and also warns; it writes nothing.
func (s *Service) Preflight(ctx context.Context, bot string, d Definition) (Preflight, error) {
	now := stamp(s.now())
	pop := newPopup(d, now)
	problems, warnings, err := s.check(ctx, bot, d, &pop, true, now)
	if err != nil {
		return Preflight{}, err
	}
	return Preflight{OK: len(problems) == 0, Problems: nonNil(problems), Warnings: nonNil(warnings)}, nil
}

func nonNil(p httpapi.Problems) []httpapi.FieldError {
	if p == nil {
		return []httpapi.FieldError{}
	}
	return p
}

// load reads a stored popup; an id that cannot exist is not looked up.
func (s *Service) load(ctx context.Context, bot, id string) (Popup, error) {
	if !ids.Valid("pop", id) {
		return Popup{}, httpapi.NotFound("popup")
	}
	it, err := s.store.Get(ctx, popupKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Popup{}, httpapi.NotFound("popup")
	}
	if err != nil {
		return Popup{}, err
	}
	return store.Decode[Popup](it)
}

// Get returns a popup.
func (s *Service) Get(ctx context.Context, bot, id string) (Popup, error) {
	return s.load(ctx, bot, id)
}

// List returns a page of the bot's popups, oldest first; status "" lists every one.
func (s *Service) List(ctx context.Context, bot string, status Status, limit int, cursor string) ([]Popup, string, error) {
	q := store.Query{PK: popupsPK(bot), Prefix: popupPrefix, Limit: limit, Cursor: cursor}
	if status != "" {
		q = store.Query{Index: store.GSI1, PK: byStatusPK(bot, status), Limit: limit, Cursor: cursor}
	}
	page, err := s.store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Popup, 0, len(page.Items))
	for _, it := range page.Items {
		p, err := store.Decode[Popup](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, p)
	}
	return out, page.Next, nil
}

// Update applies d to the popup at revision expected. A change that changes nothing makes
// no new revision.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, d Definition) (Popup, error) {
	old, err := s.load(ctx, bot, id)
	if err != nil {
		return Popup{}, err
	}
	if old.Revision != expected {
		return Popup{}, httpapi.StaleRevision(old.Revision)
	}
	now := stamp(s.now())
	pop := old
	apply(&pop, d, now)
	problems, _, err := s.check(ctx, bot, d, &pop, false, now)
	if err != nil {
		return Popup{}, err
	}
	if err := problems.Err(); err != nil {
		return Popup{}, err
	}
	if same, err := equalJSON(old, pop); err != nil || same {
		return old, err
	}
	pop.Revision++
	pop.UpdatedAt = now
	it, err := s.item(bot, pop)
	if err != nil {
		return Popup{}, err
	}
	writes := []store.Write{store.PutOp(it, store.RevisionIs(expected))}
	writes = append(writes, originWrites(bot, id, old.AllowedOrigins, pop.AllowedOrigins)...)
	err = s.store.Transact(ctx, writes)
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 0 {
		return Popup{}, s.stale(ctx, bot, id)
	}
	if err != nil {
		return Popup{}, fmt.Errorf("update popup: %w", err)
	}
	return pop, nil
}

// originWrites moves the popup's origin items from the origins before to the ones after.
func originWrites(bot, id string, before, after []string) []store.Write {
	var out []store.Write
	for _, o := range before {
		if !slices.Contains(after, o) {
			out = append(out, store.DeleteOp(originKey(bot, o, id), store.Always))
		}
	}
	for _, o := range after {
		if !slices.Contains(before, o) {
			out = append(out, store.PutOp(store.Item{Key: originKey(bot, o, id), Revision: 1}, store.Always))
		}
	}
	return out
}

func equalJSON(a, b Popup) (bool, error) {
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

// stale is the 409 for a write that lost a race: with the revision that won, or 404 when
// the popup was deleted meanwhile.
func (s *Service) stale(ctx context.Context, bot, id string) error {
	p, err := s.load(ctx, bot, id)
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(p.Revision)
}

// deleteAttempts bounds how often Delete reads the popup again after a concurrent edit
// changed it (and perhaps its origins) between the read and the delete.
const deleteAttempts = 4

// Delete removes a popup, at revision expected when it is given. Its counters stay until
// they expire (or the bot is purged): a deleted popup's id never comes back.
func (s *Service) Delete(ctx context.Context, bot, id string, expected *int64) error {
	for range deleteAttempts {
		pop, err := s.load(ctx, bot, id)
		if err != nil {
			return err
		}
		if expected != nil && pop.Revision != *expected {
			return httpapi.StaleRevision(pop.Revision)
		}
		err = store.Counted(ctx, s.store, countKey(bot), -1, func(c store.Counter) error {
			writes := []store.Write{c.Write, store.DeleteOp(popupKey(bot, id), store.RevisionIs(pop.Revision))}
			writes = append(writes, originWrites(bot, id, pop.AllowedOrigins, nil)...)
			return s.store.Transact(ctx, writes)
		})
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index == 1 {
			continue // changed or deleted meanwhile: read it again
		}
		if err != nil {
			return fmt.Errorf("delete popup: %w", err)
		}
		return nil
	}
	return fmt.Errorf("delete popup %s: it keeps changing: %w", id, store.ErrUnavailable)
}
