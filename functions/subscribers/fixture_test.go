package subscribers

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// queuedJobs is a jobs.Starter that only records what was started, so a test can look at
// the state between a deletion and its background job, then run the job.
type queuedJobs struct {
	mu      sync.Mutex
	started []jobs.State
}

func (q *queuedJobs) Start(_ context.Context, kind string, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.started = append(q.started, jobs.State{Kind: kind, Payload: b})
	return nil
}

// runAll drives every started job to completion through a registry, as a runner would.
func (q *queuedJobs) runAll(t *testing.T, svc *Service) int {
	t.Helper()
	reg := jobs.NewRegistry()
	svc.RegisterJobs(reg)
	q.mu.Lock()
	started := q.started
	q.started = nil
	q.mu.Unlock()
	steps := 0
	for _, st := range started {
		for !st.Done {
			var err error
			st, err = reg.RunStep(t.Context(), st)
			require.NoError(t, err)
			steps++
		}
	}
	return steps
}

type fixture struct {
	svc   *Service
	store store.Store
	clock *httpapitest.Clock
	jobs  *queuedJobs
	bot   string
}

// newFixture opens a real SQLite store in a temporary directory. With queued, deletions
// only queue their background job (run it with f.jobs.runAll); without, it runs inline.
func newFixture(t *testing.T, queued bool) *fixture {
	t.Helper()
	// The clock ticks a microsecond per reading: ids minted at one instant would sort by their
	// random part, while real creations are ordered in time. Whole-second stamps stay put.
	c := httpapitest.NewClock(t0, time.Microsecond)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{store: st, clock: c, bot: ids.At("bot", t0)}
	var starter jobs.Starter
	if queued {
		f.jobs = &queuedJobs{}
		starter = f.jobs
	}
	f.svc = NewService(st, c.Now, starter)
	return f
}

func ptr[T any](v T) *T { return &v }

func (f *fixture) label(t *testing.T, name string) Label {
	t.Helper()
	l, err := f.svc.CreateLabel(t.Context(), f.bot, name)
	require.NoError(t, err)
	return l
}

func (f *fixture) field(t *testing.T, name string, typ FieldType) Field {
	t.Helper()
	fl, err := f.svc.CreateField(t.Context(), f.bot, FieldSpec{Name: name, Type: typ})
	require.NoError(t, err)
	return fl
}

// subscriber upserts a new telegram subscriber with the given external id and names.
func (f *fixture) subscriber(t *testing.T, externalID, first, last string) Subscriber {
	t.Helper()
	sub, created, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, externalID, Changes{FirstName: &first, LastName: &last})
	require.NoError(t, err)
	require.True(t, created)
	return sub
}

// partition returns the sort keys of a partition, for checks of what storage holds.
func (f *fixture) partition(t *testing.T, pk string) []string {
	t.Helper()
	items, err := f.svc.queryAll(t.Context(), store.Query{PK: pk})
	require.NoError(t, err)
	out := []string{}
	for _, it := range items {
		out = append(out, it.SK)
	}
	return out
}
