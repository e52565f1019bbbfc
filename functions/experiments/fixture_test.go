package experiments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeSubjects holds the subjects that exist: popup and document ids, and reaction
// versions as "rct_...#n".
type fakeSubjects struct {
	mu    sync.Mutex
	known map[string]bool
	err   error
}

func (f *fakeSubjects) key(s Subject) string {
	switch s.Type {
	case SubjectReactionVersion:
		return fmt.Sprintf("%s#%d", *s.ReactionID, *s.Version)
	case SubjectContent:
		return *s.DocumentID
	}
	return *s.PopupID
}

func (f *fakeSubjects) Check(_ context.Context, _ string, s Subject) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	if !f.known[f.key(s)] {
		return "no such " + string(s.Type), nil
	}
	return "", nil
}

func (f *fakeSubjects) remove(k string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.known, k)
}

// fakeSubscribers knows the bot's subscribers and their channels.
type fakeSubscribers map[string]string

func (f fakeSubscribers) Channel(_ context.Context, _, id string) (string, error) {
	c, ok := f[id]
	if !ok {
		return "", httpapi.NotFound("subscriber")
	}
	return c, nil
}

// fakeSegments records the cohorts it is asked to save.
type fakeSegments struct {
	mu    sync.Mutex
	saved []Cohort
	err   error
}

func (f *fakeSegments) SaveCohort(_ context.Context, _ string, c Cohort) (SavedSegment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return SavedSegment{}, f.err
	}
	slices.Sort(c.Members)
	f.saved = append(f.saved, c)
	id := fmt.Sprintf("seg_%d", len(f.saved))
	b, _ := json.Marshal(map[string]any{"id": id, "name": c.Name, "member_count": len(c.Members)})
	return SavedSegment{ID: id, JSON: b}, nil
}

type fixture struct {
	svc      *Service
	raw      *sqlitetest.Store
	clock    *httpapitest.Clock
	events   *eventlogtest.Memory
	subjects *fakeSubjects
	subs     fakeSubscribers
	segments *fakeSegments
	bot      string
	popA     string
	popB     string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{raw: raw, clock: c, events: eventlogtest.NewMemory(), bot: ids.At("bot", t0),
		popA: ids.At("pop", t0), popB: ids.At("pop", t0.Add(time.Second)), subs: fakeSubscribers{}, segments: &fakeSegments{}}
	f.subjects = &fakeSubjects{known: map[string]bool{f.popA: true, f.popB: true}}
	f.svc = NewService(Deps{Store: raw, Events: f.events, Subjects: f.subjects, Subscribers: f.subs, Segments: f.segments, Now: c.Now})
	return f
}

func ptr[T any](v T) *T { return &v }

// definition is a valid experiment over the fixture's two popups, split evenly.
func (f *fixture) definition() NewExperiment {
	return NewExperiment{
		Name: "Signup popup copy",
		Variants: []Variant{
			{ID: "a", Name: "Control", Weight: 50, Subject: Subject{Type: SubjectPopup, PopupID: ptr(f.popA)}},
			{ID: "b", Name: "Shorter copy", Weight: 50, Subject: Subject{Type: SubjectPopup, PopupID: ptr(f.popB)}},
		},
		Goal: &Goal{Event: "purchase"},
		Salt: ptr("salt1"),
	}
}

func (f *fixture) create(t *testing.T, in NewExperiment) Experiment {
	t.Helper()
	e, err := f.svc.Create(t.Context(), f.bot, in)
	require.NoError(t, err)
	f.clock.Advance(time.Second) // ids sort by creation time
	return e
}

// running creates and starts an experiment.
func (f *fixture) running(t *testing.T) Experiment {
	t.Helper()
	e := f.create(t, f.definition())
	e, err := f.svc.Transition(t.Context(), f.bot, e.ID, e.Revision, ActionStart)
	require.NoError(t, err)
	return e
}

// subscriber adds a subscriber to the bot.
func (f *fixture) subscriber(i int) string {
	id := fmt.Sprintf("sub_%026d", i)
	f.subs[id] = "telegram"
	return id
}

// goal appends a goal event of a subscriber at the clock's time.
func (f *fixture) goal(t *testing.T, sub, name string, rev *eventlog.Revenue, props map[string]any) {
	t.Helper()
	_, err := f.events.Append(t.Context(), eventlog.Event{ID: ids.New("evt"), BotID: f.bot, SubscriberID: sub, Name: name,
		At: f.clock.Now(), Source: eventlog.SourceCustom, Revenue: rev, Properties: props})
	require.NoError(t, err)
}

var errBoom = errors.New("boom")
