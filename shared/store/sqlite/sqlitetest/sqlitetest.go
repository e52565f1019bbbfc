// Package sqlitetest opens the embedded store for tests: one fresh SQLite file per test,
// closed when the test ends. Every store it opens records the operations made on it, in
// this test binary's one record (Actions), so that a family's tests can check that the AWS
// role of the code they exercise grants what that code does (infra/access/accesstest).
package sqlitetest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/dynamo"
	"github.com/botplatform/api/shared/store/sqlite"
)

// Store is a store opened for a test: the SQLite store, recording its operations.
type Store struct {
	*sqlite.Store
}

// Open opens a new, empty store in tb's temporary directory, with opts (sqlite.WithClock to
// decide expiry by a test clock), and closes it when tb and its subtests have finished.
func Open(tb testing.TB, opts ...sqlite.Option) *Store {
	tb.Helper()
	st, err := sqlite.Open(filepath.Join(tb.TempDir(), "s.db"), opts...)
	if err != nil {
		tb.Fatalf("open the SQLite store: %v", err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return &Store{Store: st}
}

// record is the binary's record: per Lambda ("" for the one the binary's family runs in),
// the DynamoDB actions the operations made on every store Open returned would need on AWS,
// each with the first operation that needed it. It is process-wide on purpose: it must span
// every test of the binary.
var record = struct {
	sync.Mutex
	actions map[string]map[string]string
}{actions: map[string]map[string]string{}}

type lambdaKey struct{}

// unrecorded is the As name of operations that are not recorded.
const unrecorded = "-"

// As returns ctx for operations that, on AWS, another Lambda makes: the authentication a
// family's tests go through is the authorizer's ("authorizer"); a job step is the jobs
// Lambda's ("jobs").
func As(ctx context.Context, lambda string) context.Context {
	return context.WithValue(ctx, lambdaKey{}, lambda)
}

// Unrecorded returns ctx for a test's own setup (an account, a user, seed data written
// through another family): no Lambda of the family does that, so it is not recorded.
func Unrecorded(ctx context.Context) context.Context { return As(ctx, unrecorded) }

// Lambda returns the Lambda ctx's operations are made as ("" for the family's own, As for
// another), and false for a test's own setup (Unrecorded). The other recorders of the binary
// (secretstest) attribute what they record by it.
func Lambda(ctx context.Context) (lambda string, recorded bool) {
	lambda, _ = ctx.Value(lambdaKey{}).(string)
	return lambda, lambda != unrecorded
}

func note(ctx context.Context, method string, writes []store.Write, what string) {
	lambda, recorded := Lambda(ctx)
	if !recorded {
		return
	}
	acts := dynamo.Actions(method, writes)
	record.Lock()
	defer record.Unlock()
	m := record.actions[lambda]
	if m == nil {
		m = map[string]string{}
		record.actions[lambda] = m
	}
	for _, a := range acts {
		if _, ok := m[a]; !ok {
			m[a] = what
		}
	}
}

// Actions returns the DynamoDB actions recorded so far for each Lambda ("" for the
// family's own), each with an operation that needed it ("Transact: Add BOT#b1/#PUBLISHED").
func Actions() map[string]map[string]string {
	record.Lock()
	defer record.Unlock()
	out := make(map[string]map[string]string, len(record.actions))
	for l, m := range record.actions {
		c := make(map[string]string, len(m))
		for a, w := range m {
			c[a] = w
		}
		out[l] = c
	}
	return out
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key store.Key) (store.Item, error) {
	note(ctx, "Get", nil, "Get "+key.PK+"/"+key.SK)
	return s.Store.Get(ctx, key)
}

// GetMany implements store.Store.
func (s *Store) GetMany(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	what := "GetMany"
	if len(keys) > 0 {
		what += " " + keys[0].PK + "/" + keys[0].SK + ", ..."
	}
	note(ctx, "GetMany", nil, what)
	return s.Store.GetMany(ctx, keys)
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, item store.Item, cond store.Condition) error {
	note(ctx, "Put", nil, "Put "+item.PK+"/"+item.SK)
	return s.Store.Put(ctx, item, cond)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key store.Key, cond store.Condition) error {
	note(ctx, "Delete", nil, "Delete "+key.PK+"/"+key.SK)
	return s.Store.Delete(ctx, key, cond)
}

// Add implements store.Store.
func (s *Store) Add(ctx context.Context, key store.Key, delta int64, expiresAt time.Time) (int64, error) {
	note(ctx, "Add", nil, "Add "+key.PK+"/"+key.SK)
	return s.Store.Add(ctx, key, delta, expiresAt)
}

// Query implements store.Store.
func (s *Store) Query(ctx context.Context, q store.Query) (store.Page, error) {
	note(ctx, "Query", nil, "Query "+q.PK)
	return s.Store.Query(ctx, q)
}

// Transact implements store.Store.
func (s *Store) Transact(ctx context.Context, writes []store.Write) error {
	what := "Transact"
	for _, w := range writes {
		switch {
		case w.Add != nil:
			what += ": Add " + w.Add.Key.PK + "/" + w.Add.Key.SK
		case w.Check != nil && what == "Transact":
			what += ": Check " + w.Check.PK + "/" + w.Check.SK
		}
	}
	note(ctx, "Transact", writes, what)
	return s.Store.Transact(ctx, writes)
}
