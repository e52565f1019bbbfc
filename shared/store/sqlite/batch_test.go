package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// Writes that queue while the writer is busy are committed together, and each one's outcome
// is its own: a failed condition, or a write that fails outright, undoes that write alone;
// the others in its batch commit.
func TestBatchedWritesFailAlone(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t)
	ctx := context.Background()
	k := func(sk string) store.Key { return store.Key{PK: "P", SK: sk} }
	require.NoError(t, s.Put(ctx, store.Item{Key: k("taken"), Data: []byte(`{}`), Revision: 1}, store.Always))

	// Hold the writer so that the writes below queue behind it.
	release, held := holdWriter(t, s)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	results := make([]error, 4)
	writes := []func() error{
		func() error {
			return s.Put(ctx, store.Item{Key: k("a"), Data: []byte(`{}`), Revision: 1}, store.MustNotExist)
		},
		func() error {
			return s.Put(ctx, store.Item{Key: k("taken"), Data: []byte(`{"x":1}`), Revision: 2}, store.MustNotExist)
		},
		func() error {
			return s.writer.Submit(ctx, func(ctx context.Context, tx *sql.Tx) error {
				// Writes, then fails: its write must not survive.
				if _, err := tx.StmtContext(ctx, s.delAlways).ExecContext(ctx, "P", "taken"); err != nil {
					return err
				}
				return boom
			})
		},
		func() error {
			return s.Transact(ctx, []store.Write{store.PutOp(store.Item{Key: k("b"), Data: []byte(`{}`), Revision: 1}, store.MustNotExist)})
		},
	}
	for i, w := range writes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = w()
		}()
	}
	// Let all four queue, then free the writer.
	require.Eventually(t, func() bool { return s.writer.waiting() == len(writes) }, 5*time.Second, time.Millisecond)
	release()
	wg.Wait()
	require.NoError(t, <-held)

	assert.NoError(t, results[0])
	assert.ErrorIs(t, results[1], store.ErrConditionFailed)
	assert.ErrorIs(t, results[2], boom)
	assert.NoError(t, results[3])
	for _, sk := range []string{"a", "b", "taken"} {
		_, err := s.Get(ctx, k(sk))
		assert.NoError(t, err, "%s is there", sk)
	}
	got, err := s.Get(ctx, k("taken"))
	require.NoError(t, err)
	assert.Equal(t, int64(1), got.Revision, "the failed writes changed nothing")
}

// Close commits what was queued before it and refuses what comes after.
func TestCloseDrainsTheWriter(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	ctx := context.Background()
	require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: "P", SK: "1"}, Data: []byte(`{}`), Revision: 1}, store.Always))
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Put(ctx, store.Item{Key: store.Key{PK: "P", SK: "2"}, Data: []byte(`{}`), Revision: 1}, store.Always), errClosed)
	s2, err := Open(path)
	require.NoError(t, err)
	defer s2.Close()
	_, err = s2.Get(ctx, store.Key{PK: "P", SK: "1"})
	assert.NoError(t, err)
}

// waiting is how many writes wait for a leader to take them.
func (w *Writer) waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue)
}

// Writes queued behind a busy leader, more than one batch of them, are all committed, each
// once: the lead passes from batch to batch. Close, called while they wait, returns only once
// every one of them has committed, and refuses what comes after.
func TestTheLeadPassesOnAndCloseWaitsForIt(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t)
	ctx := context.Background()
	release, held := holdWriter(t, s)
	const n = 3*maxBatch + 5
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Add(ctx, store.Key{PK: "P", SK: "count"}, 1, time.Time{})
		}()
	}
	require.Eventually(t, func() bool { return s.writer.waiting() == n }, 5*time.Second, time.Millisecond)
	closed := make(chan struct{})
	go func() {
		s.writer.Close()
		close(closed)
	}()
	release()
	<-closed
	got, err := s.Get(ctx, store.Key{PK: "P", SK: "count"})
	require.NoError(t, err)
	assert.Equal(t, int64(n), got.Count, "Close returned once every write had committed, each once")
	wg.Wait()
	require.NoError(t, <-held)
	for i, err := range errs {
		require.NoError(t, err, "write %d", i)
	}
	assert.ErrorIs(t, s.Put(ctx, store.Item{Key: store.Key{PK: "P", SK: "late"}, Data: []byte(`{}`), Revision: 1}, store.Always), errClosed)
	require.NoError(t, s.Close())
	s2, err := Open(path)
	require.NoError(t, err)
	defer s2.Close()
	got, err = s2.Get(ctx, store.Key{PK: "P", SK: "count"})
	require.NoError(t, err)
	assert.Equal(t, int64(n), got.Count, "and durably")
}

// A write that panics takes its batch down with it, not the writer: the write committed
// beside it is refused (neither is kept), the panic reaches the goroutine of the write that
// panicked whether or not it led the batch, and the next write commits.
func TestAPanickingWriteFailsItsBatchAndTheWriterGoesOn(t *testing.T) {
	for _, panicFirst := range []bool{true, false} {
		t.Run(fmt.Sprintf("panicking write leads: %v", panicFirst), func(t *testing.T) {
			t.Parallel()
			s, _ := openTemp(t)
			ctx := context.Background()
			release, held := holdWriter(t, s)
			panicked := make(chan any, 1)
			beside := make(chan error, 1)
			queue := []func(){
				func() {
					defer func() { panicked <- recover() }()
					_ = s.writer.Submit(ctx, func(context.Context, *sql.Tx) error { panic("boom") })
				},
				func() {
					beside <- s.Put(ctx, store.Item{Key: store.Key{PK: "P", SK: "beside"}, Data: []byte(`{}`), Revision: 1}, store.Always)
				},
			}
			if !panicFirst {
				queue[0], queue[1] = queue[1], queue[0]
			}
			for i, write := range queue {
				go write()
				require.Eventually(t, func() bool { return s.writer.waiting() == i+1 }, 5*time.Second, time.Millisecond)
			}
			release()
			require.NoError(t, <-held)
			assert.Equal(t, "boom", <-panicked)
			assert.ErrorContains(t, <-beside, "panicked")
			_, err := s.Get(ctx, store.Key{PK: "P", SK: "beside"})
			assert.ErrorIs(t, err, store.ErrNotFound, "the batch was rolled back")
			require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: "P", SK: "after"}, Data: []byte(`{}`), Revision: 1}, store.Always))
			_, err = s.Get(ctx, store.Key{PK: "P", SK: "after"})
			assert.NoError(t, err)
		})
	}
}

// holdWriter has a write of s's lead and wait, so that the writes made meanwhile queue
// behind it; release lets it commit, and held gets its outcome.
func holdWriter(t *testing.T, s *Store) (release func(), held <-chan error) {
	t.Helper()
	busy, free := make(chan struct{}), make(chan struct{})
	out := make(chan error, 1)
	go func() {
		out <- s.writer.Submit(context.Background(), func(context.Context, *sql.Tx) error {
			close(busy)
			<-free
			return nil
		})
	}()
	<-busy
	return func() { close(free) }, out
}
