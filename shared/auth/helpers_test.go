package auth

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// t0 is the fixed start of every test clock.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// fakeClock is a clock tests move by hand; the store and the service share it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// countingStore counts reads and single writes, so tests can tell a cache hit from a
// lookup and a bookkeeping write from none. afterGet, when set, runs after each Get
// returns and before its caller sees the result.
type countingStore struct {
	store.Store
	gets, puts atomic.Int64
	afterGet   atomic.Pointer[func(store.Key)]
}

func (s *countingStore) Get(ctx context.Context, key store.Key) (store.Item, error) {
	s.gets.Add(1)
	it, err := s.Store.Get(ctx, key)
	if f := s.afterGet.Load(); f != nil {
		(*f)(key)
	}
	return it, err
}

func (s *countingStore) Put(ctx context.Context, it store.Item, cond store.Condition) error {
	s.puts.Add(1)
	return s.Store.Put(ctx, it, cond)
}

// reset zeroes the counters.
func (s *countingStore) reset() {
	s.gets.Store(0)
	s.puts.Store(0)
}

type fixture struct {
	svc   *Service
	store *countingStore
	raw   *sqlite.Store
	clock *fakeClock
	acct  Account
	owner User
}

// newFixture opens a fresh SQLite store on a fake clock and creates one account.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	clock := newClock()
	raw, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(clock.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	cs := &countingStore{Store: raw}
	svc := NewService(cs, clock.Now, nil)
	acct, owner, err := svc.CreateAccount(t.Context(), "Acme")
	require.NoError(t, err)
	return &fixture{svc: svc, store: cs, raw: raw, clock: clock, acct: acct, owner: owner}
}

// pat issues a PAT for the owner with the given scopes, valid for 30 days.
func (f *fixture) pat(t testing.TB, scopes ...Scope) (PAT, string) {
	t.Helper()
	if len(scopes) == 0 {
		scopes = Scopes{Full}
	}
	p, tok, err := f.svc.IssuePAT(t.Context(), f.acct.ID, f.owner.ID, "test", scopes, f.clock.Now().Add(30*24*time.Hour))
	require.NoError(t, err)
	return p, tok
}

func bearer(tok string) string { return "Bearer " + tok }
