package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/storetest"
)

func openTemp(t testing.TB, opts ...Option) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "store.db")
	s, err := Open(path, opts...)
	require.NoError(t, err)
	return s, path
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		s, _ := openTemp(t, WithClock(now))
		return s
	})
}

// TestConformanceSharedFile opens every subtest's store on one file, as stores on a shared
// server would be: only the suite's key prefixes keep the subtests apart, and the parallel
// subtests' Stores contend for one file's lock.
func TestConformanceSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shared.db")
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		s, err := Open(path, WithClock(now))
		require.NoError(t, err)
		return s
	})
}

func TestOpenRefusesNonFilePaths(t *testing.T) {
	for _, p := range []string{"", ":memory:", "file:x.db", "x.db?mode=ro", "x#y"} {
		_, err := Open(p)
		assert.Error(t, err, "%q", p)
	}
}

func TestPragmas(t *testing.T) {
	s, path := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	for _, db := range []*sql.DB{s.read, s.write} {
		var mode string
		var busy, sync, version int
		require.NoError(t, db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode))
		require.NoError(t, db.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy))
		require.NoError(t, db.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync))
		require.NoError(t, db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version))
		assert.Equal(t, "wal", mode)
		assert.Equal(t, 5000, busy)
		if db == s.write {
			assert.Equal(t, 1, sync, "NORMAL: under full durability the store syncs the WAL itself")
		} else {
			assert.Equal(t, 2, sync)
		}
		assert.Equal(t, len(migrations()), version)
	}
	assert.NotNil(t, s.wal, "full, the default: an acknowledged write survives a power loss")
	_, err := s.read.ExecContext(ctx, `DELETE FROM items`)
	assert.Error(t, err, "the read pool is query_only")
	require.NoError(t, s.Close())

	// Reopening runs no migration twice; a newer schema is refused.
	s2, err := Open(path)
	require.NoError(t, err)
	_, err = s2.write.ExecContext(ctx, `PRAGMA user_version = 99`)
	require.NoError(t, err)
	require.NoError(t, s2.Close())
	_, err = Open(path)
	assert.ErrorContains(t, err, "newer")
}

// Under full durability every write is synced before it returns, unless it was made under
// an open store.Deferral, which then holds its sync until Settle.
func TestFullDurabilitySyncsEachWriteOrDefersIt(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	item := store.Item{Key: store.Key{PK: "P", SK: "1"}, Data: []byte(`{}`)}
	writes := []func(context.Context) error{
		func(ctx context.Context) error { return s.Put(ctx, item, store.Condition{}) },
		func(ctx context.Context) error {
			_, err := s.Add(ctx, store.Key{PK: "P", SK: "n"}, 1, time.Time{})
			return err
		},
		func(ctx context.Context) error {
			return s.Transact(ctx, []store.Write{store.PutOp(item, store.Condition{})})
		},
		func(ctx context.Context) error { return s.Delete(ctx, item.Key, store.Condition{}) },
	}
	for i, write := range writes {
		require.NoError(t, write(ctx))
		assert.Zero(t, s.wal.Unsynced(), "write %d synced before it returned", i)
	}

	dctx, d := store.DeferSync(ctx)
	for _, write := range writes {
		require.NoError(t, write(dctx))
	}
	assert.Equal(t, uint64(len(writes)), s.wal.Unsynced(), "deferred: no sync yet")
	require.NoError(t, d.Sync(ctx))
	assert.Zero(t, s.wal.Unsynced(), "Sync flushes what was deferred so far")
	require.NoError(t, writes[0](dctx))
	assert.Equal(t, uint64(1), s.wal.Unsynced(), "the deferral stays open after Sync")
	require.NoError(t, d.Settle(ctx))
	assert.Zero(t, s.wal.Unsynced(), "one flush covers them all")

	// A failed condition commits nothing and so has nothing to sync.
	var ce *store.ConditionError
	require.ErrorAs(t, s.Put(dctx, item, store.Condition{Kind: store.CondMustNotExist}), &ce)
	assert.Zero(t, s.wal.Unsynced())
}

func TestDurabilityNormal(t *testing.T) {
	s, _ := openTemp(t, WithDurability(Normal))
	defer s.Close()
	assert.Nil(t, s.wal)
	for _, db := range []*sql.DB{s.read, s.write} {
		var sync int
		require.NoError(t, db.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&sync))
		assert.Equal(t, 1, sync, "NORMAL")
	}
	for _, name := range []string{"full", "normal"} {
		d, err := ParseDurability(name)
		require.NoError(t, err)
		assert.Equal(t, name, d.String())
	}
	_, err := ParseDurability("off")
	assert.Error(t, err)
	_, err = Open(filepath.Join(t.TempDir(), "x.db"), WithDurability(Durability(7)))
	assert.Error(t, err)
}

// The store holds account data: the file and SQLite's -wal and -shm beside it are the
// owner's alone, whatever the umask.
func TestFilesPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	s, path := openTemp(t)
	defer s.Close()
	_, err := s.Add(t.Context(), store.Key{PK: "p", SK: "s"}, 1, time.Time{})
	require.NoError(t, err)
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		st, err := os.Stat(p)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), p)
	}
}

// TestQueryPlans guards the access paths: every query must seek an index (no full scan)
// and read rows already in order (no temporary sort).
func TestQueryPlans(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	_, err := s.Add(ctx, store.Key{PK: "p", SK: "s"}, 1, time.Time{})
	require.NoError(t, err)
	queries := []store.Query{}
	for _, idx := range []store.Index{store.Primary, store.GSI1, store.GSI2} {
		for _, rev := range []bool{false, true} {
			queries = append(queries,
				store.Query{Index: idx, PK: "p", Reverse: rev},
				store.Query{Index: idx, PK: "p", Reverse: rev, Prefix: "a"},
				store.Query{Index: idx, PK: "p", Reverse: rev, From: "a", To: "b"},
			)
		}
	}
	for _, q := range queries {
		_, err := s.Query(ctx, q) // fills the statement cache
		require.NoError(t, err)
		pos := []string{"a"}
		if q.Index != store.Primary {
			pos = []string{"a", "p", "a"}
		}
		q.Cursor = store.EncodeCursor(queryShape(q), pos)
		_, err = s.Query(ctx, q)
		require.NoError(t, err)
	}
	for _, n := range []int{1, 3, store.MaxGetMany} { // GetMany's statements too
		_, err := s.GetMany(ctx, make([]store.Key, n))
		require.Error(t, err, "invalid keys")
		keys := make([]store.Key, n)
		for i := range keys {
			keys[i] = store.Key{PK: "p", SK: fmt.Sprint(i)}
		}
		_, err = s.GetMany(ctx, keys)
		require.NoError(t, err)
	}
	// Ask SQLite directly for the plan of every cached statement.
	s.mu.Lock()
	texts := make([]string, 0, len(s.queries))
	for k := range s.queries {
		texts = append(texts, k)
	}
	s.mu.Unlock()
	require.NotEmpty(t, texts)
	texts = append(texts, pointSQL) // Get's, prepared on its own connections
	for _, text := range texts {
		n := strings.Count(text, "?")
		args := make([]any, n)
		for i := range args {
			args[i] = "x"
		}
		rows, err := s.read.QueryContext(ctx, "EXPLAIN QUERY PLAN "+text, args...)
		require.NoError(t, err)
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			require.NoError(t, rows.Scan(&id, &parent, &notused, &detail))
			plan = append(plan, detail)
		}
		require.NoError(t, rows.Err())
		rows.Close()
		joined := strings.Join(plan, "; ")
		// SQLite plans a bound LIMIT with its value and so re-plans it at every bind.
		assert.NotRegexp(t, `LIMIT \?`, text, "a bound LIMIT makes every run parse and plan again")
		assert.NotContains(t, joined, "TEMP B-TREE", text)
		assert.Regexp(t, `SEARCH items USING (PRIMARY KEY|INDEX items_gsi[12]) \(`, joined, text)
		if strings.Contains(text, "gsi") && strings.Contains(text, ", pk, sk) ") {
			assert.Regexp(t, `\(gsi[12]sk,pk,sk\)[<>]\(`, joined, "the cursor is a seek: %s", text)
		}
		if strings.Contains(text, "gsi1pk =") {
			assert.Contains(t, joined, "items_gsi1", text)
		}
		if strings.Contains(text, "gsi2pk =") {
			assert.Contains(t, joined, "items_gsi2", text)
		}
		t.Logf("%s\n  -> %s", text, joined)
	}
}

// TestForgedCursorStaysInRange checks that a cursor pointing outside the query's range (a
// client cannot make one, but its shape hash is not a secret) never widens the range.
func TestForgedCursorStaysInRange(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	for _, sk := range []string{"a", "b1", "b2", "c"} {
		require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: "p", SK: sk}}, store.Always))
	}
	cases := []struct {
		q    store.Query
		at   string
		want []string
	}{
		{store.Query{Prefix: "b"}, "a", []string{"b1", "b2"}},
		{store.Query{Prefix: "b"}, "z", nil},
		{store.Query{Prefix: "b", Reverse: true}, "z", []string{"b2", "b1"}},
		{store.Query{Prefix: "b", Reverse: true}, "a", nil},
		{store.Query{From: "b", To: "b2"}, "a", []string{"b1", "b2"}},
		{store.Query{From: "b", To: "b2", Reverse: true}, "c", []string{"b2", "b1"}},
		{store.Query{From: "b", To: "b2", Reverse: true}, "b2", []string{"b1"}},
		{store.Query{From: "b1", To: "b2"}, "b1", []string{"b2"}},
	}
	for _, tc := range cases {
		q := tc.q
		q.PK = "p"
		q.Cursor = store.EncodeCursor(queryShape(q), []string{tc.at})
		page, err := s.Query(ctx, q)
		require.NoError(t, err)
		var got []string
		for _, it := range page.Items {
			got = append(got, it.SK)
		}
		assert.Equal(t, tc.want, got, "%+v", q)
	}
}

func TestDeleteExpired(t *testing.T) {
	now := time.Unix(1_900_000_000, 0)
	s, _ := openTemp(t, WithClock(func() time.Time { return now }))
	defer s.Close()
	ctx := t.Context()
	for i := range 5 {
		require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: "p", SK: fmt.Sprint(i)}, ExpiresAt: now.Add(-time.Second)}, store.Always))
	}
	require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: "p", SK: "live"}, ExpiresAt: now.Add(time.Second)}, store.Always))
	require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: "p", SK: "forever"}}, store.Always))
	n, err := s.DeleteExpired(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n)
	n, err = s.DeleteExpired(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	n, err = s.DeleteExpired(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
	var rows int
	require.NoError(t, s.read.QueryRowContext(ctx, `SELECT count(*) FROM items`).Scan(&rows))
	assert.Equal(t, 2, rows)
}

func TestAddOverflowFails(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	k := store.Key{PK: "p", SK: "c"}
	_, err := s.Add(t.Context(), k, 1<<62, time.Time{})
	require.NoError(t, err)
	_, err = s.Add(t.Context(), k, 1<<62, time.Time{})
	require.Error(t, err, "STRICT refuses the REAL that int64 overflow produces")
	it, err := s.Get(t.Context(), k)
	require.NoError(t, err)
	assert.Equal(t, int64(1<<62), it.Count)
}

// TestLockTimeoutIsUnavailable holds the write lock from one Store, as a long admin
// command in another process would, and checks that a writer that waits out its busy
// timeout reports store.ErrUnavailable while readers carry on.
func TestLockTimeoutIsUnavailable(t *testing.T) {
	holder, path := openTemp(t)
	defer holder.Close()
	waiter, err := Open(path, WithBusyTimeout(50*time.Millisecond))
	require.NoError(t, err)
	defer waiter.Close()
	ctx := t.Context()
	k := store.Key{PK: "p", SK: "s"}
	require.NoError(t, waiter.Put(ctx, store.Item{Key: k, Revision: 1}, store.Always))

	tx, err := holder.write.BeginTx(ctx, nil) // BEGIN IMMEDIATE: takes the write lock
	require.NoError(t, err)
	defer tx.Rollback()

	started := time.Now()
	err = waiter.Put(ctx, store.Item{Key: k, Revision: 2}, store.RevisionIs(1))
	assert.ErrorIs(t, err, store.ErrUnavailable)
	assert.NotErrorIs(t, err, store.ErrConditionFailed)
	assert.GreaterOrEqual(t, time.Since(started), 40*time.Millisecond, "waited for the lock first")
	_, err = waiter.Add(ctx, k, 1, time.Time{})
	assert.ErrorIs(t, err, store.ErrUnavailable)
	err = waiter.Transact(ctx, []store.Write{store.CheckOp(k, store.MustExist)})
	assert.ErrorIs(t, err, store.ErrUnavailable)

	it, err := waiter.Get(ctx, k)
	require.NoError(t, err, "WAL readers are not blocked by a writer")
	assert.Equal(t, int64(1), it.Revision)

	require.NoError(t, tx.Rollback())
	require.NoError(t, waiter.Put(ctx, store.Item{Key: k, Revision: 2}, store.RevisionIs(1)), "works once the lock is free")
}

// TestTwoStoresOneFile stands for the server and the admin CLI with the file open at once:
// both write concurrently, including to the same keys, without errors or lost updates.
func TestTwoStoresOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.db")
	// Both open a file that does not exist yet: creation and migration race too.
	stores := make([]*Store, 2)
	var wg sync.WaitGroup
	openErrs := make([]error, 2)
	for i := range stores {
		wg.Go(func() { stores[i], openErrs[i] = Open(path) })
	}
	wg.Wait()
	for i, s := range stores {
		require.NoError(t, openErrs[i])
		defer s.Close()
	}
	errs := hammer(t.Context(), stores, "inproc", "parent", 4, 100)
	require.NoError(t, errors.Join(errs...))
	checkHammer(t, stores[0], "inproc", 2*4*100)
}

// hammer runs workers on each store: shared counter increments, read-modify-write loops on
// a shared document with RevisionIs retries, and transactions.
func hammer(ctx context.Context, stores []*Store, tag, origin string, workers, rounds int) []error {
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for si, s := range stores {
		for w := range workers {
			wg.Go(func() {
				for r := range rounds {
					if _, err := s.Add(ctx, store.Key{PK: tag, SK: "counter"}, 1, time.Time{}); err != nil {
						fail(fmt.Errorf("store %d worker %d add: %w", si, w, err))
						return
					}
					if err := bump(ctx, s, store.Key{PK: tag, SK: "doc"}); err != nil {
						fail(fmt.Errorf("store %d worker %d bump: %w", si, w, err))
						return
					}
					err := s.Transact(ctx, []store.Write{
						store.PutOp(store.Item{Key: store.Key{PK: tag + "/items", SK: fmt.Sprintf("%s-%d-%d-%d", origin, si, w, r)}}, store.MustNotExist),
						store.AddOp(store.Key{PK: tag, SK: "tx-counter"}, 1, time.Time{}),
					})
					if err != nil {
						fail(fmt.Errorf("store %d worker %d transact: %w", si, w, err))
						return
					}
					if _, err := s.Query(ctx, store.Query{PK: tag + "/items", Limit: 10}); err != nil {
						fail(fmt.Errorf("store %d worker %d query: %w", si, w, err))
						return
					}
				}
			})
		}
	}
	wg.Wait()
	return errs
}

// bump increments a document's revision the way a route does: read, then write under
// RevisionIs, retrying when someone else won.
func bump(ctx context.Context, s *Store, k store.Key) error {
	for {
		cur, err := s.Get(ctx, k)
		cond := store.RevisionIs(cur.Revision)
		if errors.Is(err, store.ErrNotFound) {
			cond = store.MustNotExist
		} else if err != nil {
			return err
		}
		err = s.Put(ctx, store.Item{Key: k, Revision: cur.Revision + 1}, cond)
		if !errors.Is(err, store.ErrConditionFailed) {
			return err
		}
	}
}

func checkHammer(t *testing.T, s *Store, tag string, total int64) {
	t.Helper()
	ctx := t.Context()
	for _, sk := range []string{"counter", "tx-counter"} {
		it, err := s.Get(ctx, store.Key{PK: tag, SK: sk})
		require.NoError(t, err)
		assert.Equal(t, total, it.Count, sk)
	}
	doc, err := s.Get(ctx, store.Key{PK: tag, SK: "doc"})
	require.NoError(t, err)
	assert.Equal(t, total, doc.Revision, "no lost read-modify-write")
	page, err := s.Query(ctx, store.Query{PK: tag + "/items"})
	require.NoError(t, err)
	assert.Len(t, page.Items, int(total))
}

const helperEnv = "STORE_SQLITE_HELPER"

// TestTwoProcesses is TestTwoStoresOneFile with a real second process (this test binary
// re-executed), since SQLite's locking between processes goes through the OS, not through
// state shared inside one process.
func TestTwoProcesses(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		return // we are the helper
	}
	s, path := openTemp(t)
	defer s.Close()
	const workers, rounds = 3, 60
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+path, "STORE_SQLITE_HELPER_N="+strconv.Itoa(workers)+","+strconv.Itoa(rounds))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	errs := hammer(t.Context(), []*Store{s}, "proc", "parent", workers, rounds)
	waitErr := cmd.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, waitErr, "helper process:\n%s", out.String())
	checkHammer(t, s, "proc", 2*workers*rounds)
}

// TestHelperProcess is the second process of TestTwoProcesses; it does nothing when run
// normally.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		t.Skip("helper for TestTwoProcesses")
	}
	var workers, rounds int
	_, err := fmt.Sscanf(os.Getenv("STORE_SQLITE_HELPER_N"), "%d,%d", &workers, &rounds)
	require.NoError(t, err)
	s, err := Open(path)
	require.NoError(t, err)
	defer s.Close()
	require.NoError(t, errors.Join(hammer(t.Context(), []*Store{s}, "proc", "child", workers, rounds)...))
}

func BenchmarkGet(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ctx := b.Context()
	const n = 10_000
	writes := make([]store.Write, 0, store.MaxTransactWrites)
	for i := range n {
		writes = append(writes, store.PutOp(store.Item{
			Key: store.Key{PK: "bots/bot_1/users", SK: fmt.Sprintf("user_%06d", i)}, Revision: 1,
			Data: []byte(`{"name":"Ada Lovelace","email":"ada@example.com","tags":["a","b"],"n":42}`),
		}, store.Always))
		if len(writes) == cap(writes) {
			require.NoError(b, s.Transact(ctx, writes))
			writes = writes[:0]
		}
	}
	// The baseline is the bare driver doing the same point read on the same file, so the
	// ratio shows what the store layer adds.
	b.Run("baseline-raw-sql", func(b *testing.B) {
		st, err := s.read.PrepareContext(ctx, `SELECT data FROM items WHERE pk = ? AND sk = ?`)
		require.NoError(b, err)
		defer st.Close()
		i := 0
		var data []byte
		for b.Loop() {
			if err := st.QueryRowContext(ctx, "bots/bot_1/users", fmt.Sprintf("user_%06d", i%n)).Scan(&data); err != nil {
				b.Fatal(err)
			}
			i += 7919
		}
	})
	b.Run("serial", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if _, err := s.Get(ctx, store.Key{PK: "bots/bot_1/users", SK: fmt.Sprintf("user_%06d", i%n)}); err != nil {
				b.Fatal(err)
			}
			i += 7919
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				if _, err := s.Get(ctx, store.Key{PK: "bots/bot_1/users", SK: fmt.Sprintf("user_%06d", i%n)}); err != nil {
					b.Error(err)
					return
				}
				i += 7919
			}
		})
	})
}

func BenchmarkConditionalPut(b *testing.B) {
	s, _ := openTemp(b)
	defer s.Close()
	ctx := b.Context()
	data := []byte(`{"name":"Ada Lovelace","email":"ada@example.com","tags":["a","b"],"n":42}`)
	// The baseline is the bare driver doing an unconditional one-row UPDATE on the same file.
	b.Run("baseline-raw-sql", func(b *testing.B) {
		k := store.Key{PK: "bots/bot_1/users", SK: "user_raw"}
		require.NoError(b, s.Put(ctx, store.Item{Key: k, Data: data}, store.Always))
		st, err := s.write.PrepareContext(ctx, `UPDATE items SET revision = ?, data = ? WHERE pk = ? AND sk = ?`)
		require.NoError(b, err)
		defer st.Close()
		rev := int64(0)
		for b.Loop() {
			rev++
			if _, err := st.ExecContext(ctx, rev, data, k.PK, k.SK); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("RevisionIs", func(b *testing.B) {
		k := store.Key{PK: "bots/bot_1/users", SK: "user_rev"}
		require.NoError(b, s.Put(ctx, store.Item{Key: k, Data: data}, store.Always))
		rev := int64(0)
		for b.Loop() {
			if err := s.Put(ctx, store.Item{Key: k, Revision: rev + 1, Data: data}, store.RevisionIs(rev)); err != nil {
				b.Fatal(err)
			}
			rev++
		}
	})
	i := 0 // outside: -count reruns the sub-benchmark on the same store
	b.Run("MustNotExist", func(b *testing.B) {
		for b.Loop() {
			k := store.Key{PK: "bots/bot_1/users", SK: fmt.Sprintf("new_%09d", i)}
			if err := s.Put(ctx, store.Item{Key: k, Revision: 1, Data: data}, store.MustNotExist); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("RevisionIs/parallel", func(b *testing.B) {
		// Separate keys per goroutine: measures write throughput through the single
		// writer connection, not contention on one key.
		var next sync.Mutex
		g := 0
		b.RunParallel(func(pb *testing.PB) {
			next.Lock()
			k := store.Key{PK: "bots/bot_1/users", SK: fmt.Sprintf("par_%d", g)}
			g++
			next.Unlock()
			if err := s.Put(ctx, store.Item{Key: k, Data: data}, store.Always); err != nil {
				b.Error(err)
				return
			}
			rev := int64(0)
			for pb.Next() {
				if err := s.Put(ctx, store.Item{Key: k, Revision: rev + 1, Data: data}, store.RevisionIs(rev)); err != nil {
					b.Error(err)
					return
				}
				rev++
			}
		})
	})
}

// BenchmarkCounterAdds is a transaction of 10 adds to live counters, as a conversation's
// transactions carry (stats and flow counters), under Normal durability so that the disk
// sync does not drown the statements' cost.
func BenchmarkCounterAdds(b *testing.B) {
	s, _ := openTemp(b, WithDurability(Normal))
	defer s.Close()
	ctx := b.Context()
	exp := time.Now().Add(time.Hour).Truncate(time.Second)
	writes := make([]store.Write, 10)
	for i := range writes {
		writes[i] = store.AddOp(store.Key{PK: "STATS#bot_1#hour", SK: fmt.Sprintf("2026-11-27T15#metric_%d#telegram", i)}, 1, exp)
	}
	for b.Loop() {
		if err := s.Transact(ctx, writes); err != nil {
			b.Fatal(err)
		}
	}
}
