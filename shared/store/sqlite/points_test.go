package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// pointsOn returns a points of n connections on the store file at path.
func pointsOn(t *testing.T, path string, n int) *points {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path, time.Second, Normal, true))
	require.NoError(t, err)
	return newPoints(db, n)
}

func pointArgs(k store.Key) []driver.NamedValue {
	return []driver.NamedValue{{Ordinal: 1, Value: k.PK}, {Ordinal: 2, Value: k.SK}, {Ordinal: 3, Value: time.Now().Unix()}}
}

// Many more readers than connections: each waits its turn, every read answers right, and
// no more connections open than allowed.
func TestPointsShareFewConnections(t *testing.T) {
	s, path := openTemp(t)
	defer s.Close()
	ctx := t.Context()
	for i := range 20 {
		require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: "p", SK: fmt.Sprint(i)}, Revision: int64(i + 1), Data: []byte(fmt.Sprint(i))}, store.Always))
	}
	p := pointsOn(t, path, 2)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 20 {
				k := store.Key{PK: "p", SK: fmt.Sprint((g + i) % 20)}
				var it store.Item
				found, err := p.get(ctx, pointArgs(k), func(row []driver.Value) error { return scanPoint(row, &it) })
				if err == nil && (!found || string(it.Data) != k.SK || it.Revision != int64((g+i)%20+1)) {
					err = fmt.Errorf("%s: found %v, %q at revision %d", k.SK, found, it.Data, it.Revision)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.LessOrEqual(t, p.db.Stats().OpenConnections, 2)
	require.NoError(t, p.close())
	assert.Zero(t, p.db.Stats().OpenConnections, "close closed every connection")
	_, err := p.get(ctx, pointArgs(store.Key{PK: "p", SK: "1"}), func([]driver.Value) error { return nil })
	assert.ErrorIs(t, err, errPointsClosed)
}

// A reader that finds every connection busy waits for one, as long as its context lets it.
func TestPointsWaitWithinTheContext(t *testing.T) {
	s, path := openTemp(t)
	defer s.Close()
	p := pointsOn(t, path, 1)
	defer p.close()
	held, err := p.take(t.Context())
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = p.get(ctx, pointArgs(store.Key{PK: "p", SK: "x"}), func([]driver.Value) error { return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)

	p.give(held, false)
	found, err := p.get(t.Context(), pointArgs(store.Key{PK: "p", SK: "x"}), func([]driver.Value) error { return nil })
	require.NoError(t, err)
	assert.False(t, found)
}

// A row the statement cannot have produced is an error, not a zero item.
func TestScanPointRefusesOtherTypes(t *testing.T) {
	row := []driver.Value{int64(1), []byte("d"), int64(0), int64(1700000000), "g1", "s1", nil, nil}
	var it store.Item
	require.NoError(t, scanPoint(row, &it))
	assert.Equal(t, store.Item{Revision: 1, Data: []byte("d"), ExpiresAt: time.Unix(1700000000, 0).UTC(),
		GSI1: store.IndexKey{PK: "g1", SK: "s1"}}, it)
	for _, bad := range []struct {
		col int
		v   driver.Value
	}{{0, "1"}, {1, "text, not a blob"}, {2, 1.5}, {3, nil}, {4, int64(4)}} {
		r := append([]driver.Value(nil), row...)
		r[bad.col] = bad.v
		assert.Error(t, scanPoint(r, &store.Item{}), "column %d as %T", bad.col, bad.v)
	}
}
