package collections

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
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

// faultyStore fails or intercepts transactions: fail decides per transaction (numbered from
// 1) whether it fails with an error the store could really return; before runs ahead of
// each transaction, to interleave other writers at exact points.
type faultyStore struct {
	store.Store
	n      atomic.Int64
	mu     sync.Mutex
	fail   func(n int64, writes []store.Write) bool
	before func(n int64, writes []store.Write)
	// failPuts makes single Puts fail too (a process that lost the store entirely).
	failPuts atomic.Bool
}

var errInjected = errors.New("injected failure: " + store.ErrUnavailable.Error())

func (f *faultyStore) Transact(ctx context.Context, writes []store.Write) error {
	n := f.n.Add(1)
	f.mu.Lock()
	fail, before := f.fail, f.before
	f.mu.Unlock()
	if before != nil {
		before(n, writes)
	}
	if fail != nil && fail(n, writes) {
		return errInjected
	}
	return f.Store.Transact(ctx, writes)
}

func (f *faultyStore) Put(ctx context.Context, it store.Item, cond store.Condition) error {
	if f.failPuts.Load() {
		return errInjected
	}
	return f.Store.Put(ctx, it, cond)
}

// set installs the hooks and restarts the transaction count.
func (f *faultyStore) set(fail func(int64, []store.Write) bool, before func(int64, []store.Write)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.before = fail, before
	f.n.Store(0)
}

// starter records the jobs a service starts.
type starter struct {
	mu      sync.Mutex
	started []json.RawMessage
}

func (s *starter) Start(_ context.Context, kind string, payload any) error {
	if kind != PurgeJob {
		return errors.New("unknown kind " + kind)
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = append(s.started, b)
	return nil
}

func (s *starter) jobs() []json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]json.RawMessage(nil), s.started...)
}

var _ jobs.Starter = (*starter)(nil)

type fixture struct {
	svc   *Service
	store *faultyStore
	raw   store.Store
	jobs  *starter
	clock *httpapitest.Clock
	bot   string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	fs := &faultyStore{Store: raw}
	j := &starter{}
	return &fixture{svc: NewService(fs, j, c.Now, slog.New(slog.DiscardHandler)), store: fs, raw: raw, jobs: j, clock: c, bot: ids.At("bot", t0)}
}

func ptr[T any](v T) *T { return &v }

func field(name, typ string, required, indexed bool) FieldInput {
	return FieldInput{Name: ptr(name), Type: ptr(typ), Required: ptr(required), Indexed: ptr(indexed)}
}

// products is a collection with every type, two indexed fields and a required one.
func (f *fixture) products(t *testing.T) Collection {
	t.Helper()
	c, err := f.svc.CreateCollection(t.Context(), f.bot, "Products", []FieldInput{
		field("sku", "string", true, true),
		field("price", "number", false, true),
		field("in_stock", "boolean", false, true),
		field("launched_at", "datetime", false, false),
		field("tags", "string_list", false, false),
	})
	require.NoError(t, err)
	return c
}

// vals builds a values map from Go values.
func vals(t *testing.T, kv ...any) map[string]json.RawMessage {
	t.Helper()
	out := map[string]json.RawMessage{}
	for i := 0; i < len(kv); i += 2 {
		b, err := json.Marshal(kv[i+1])
		require.NoError(t, err)
		out[kv[i].(string)] = b
	}
	return out
}

// list returns every record id of the collection that matches filters, walking all pages.
func (f *fixture) list(t *testing.T, col string, filters ...Filter) []Record {
	t.Helper()
	var out []Record
	cursor := ""
	for {
		page, next, err := f.svc.ListRecords(t.Context(), f.bot, col, filters, 3, cursor)
		require.NoError(t, err)
		out = append(out, page...)
		if next == "" {
			return out
		}
		cursor = next
	}
}

func recordIDs(rs []Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

// items counts the live items of a partition.
func (f *fixture) items(t *testing.T, pk string) int {
	t.Helper()
	page, err := f.raw.Query(t.Context(), store.Query{PK: pk})
	require.NoError(t, err)
	return len(page.Items)
}
