package sqlite

import (
	"context"
	"database/sql"
	"errors"
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
	busy, release := make(chan struct{}), make(chan struct{})
	held := make(chan error, 1)
	go func() {
		held <- s.writer.Submit(ctx, func(context.Context, *sql.Tx) error {
			close(busy)
			<-release
			return nil
		})
	}()
	<-busy
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
	require.Eventually(t, func() bool { return len(s.writer.ops) == len(writes) }, 5*time.Second, time.Millisecond)
	close(release)
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
