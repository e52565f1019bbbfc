package sqlite

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// Get answers from its cache while the file is unchanged, and any commit to the file, by
// this store or another one on it (another process: the admin commands), empties it.
func TestReadCacheFollowsEveryCommit(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	a, path := openTemp(t, WithClock(clock))
	defer a.Close()
	b, err := Open(path, WithClock(clock))
	require.NoError(t, err)
	defer b.Close()
	if runtime.GOOS == "linux" {
		require.NotNil(t, a.cache.shm, "the wal-index header is mapped")
	}
	if a.cache.shm == nil {
		t.Skip("no mapped wal-index header on this platform: Get reads every time")
	}
	k := store.Key{PK: "p", SK: "bot"}
	require.NoError(t, a.Put(ctx, store.Item{Key: k, Revision: 1, Data: []byte(`{"v":1}`)}, store.Always))
	it, err := a.Get(ctx, k)
	require.NoError(t, err)
	v, ok := a.cache.header()
	require.True(t, ok)
	cached, hit := a.cache.get(k, v, now)
	require.True(t, hit, "the read is cached")
	assert.Equal(t, it, cached)

	it.Data[0] = 'X' // the caller's copy
	again, err := a.Get(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, `{"v":1}`, string(again.Data))

	// Another store on the file writes: the next read sees it.
	require.NoError(t, b.Put(ctx, store.Item{Key: k, Revision: 2, Data: []byte(`{"v":2}`)}, store.RevisionIs(1)))
	it, err = a.Get(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, int64(2), it.Revision)
	// A write elsewhere in the file empties the cache too.
	require.NoError(t, b.Put(ctx, store.Item{Key: store.Key{PK: "p", SK: "other"}}, store.Always))
	v2, ok := a.cache.header()
	require.True(t, ok)
	assert.NotEqual(t, v, v2)
	_, hit = a.cache.get(k, v2, now)
	assert.False(t, hit)
	require.NoError(t, b.Delete(ctx, k, store.Always))
	_, err = a.Get(ctx, k)
	assert.ErrorIs(t, err, store.ErrNotFound)

	// A cached item that expires is gone without a write.
	exp := store.Key{PK: "p", SK: "exp"}
	require.NoError(t, a.Put(ctx, store.Item{Key: exp, ExpiresAt: now.Add(time.Second)}, store.Always))
	_, err = a.Get(ctx, exp)
	require.NoError(t, err)
	now = now.Add(time.Second)
	_, err = a.Get(ctx, exp)
	assert.ErrorIs(t, err, store.ErrNotFound)

	// Large items are read every time; the cache's bytes stay bounded.
	big := store.Key{PK: "p", SK: "big"}
	require.NoError(t, a.Put(ctx, store.Item{Key: big, Data: make([]byte, maxCachedItem+1)}, store.Always))
	_, err = a.Get(ctx, big)
	require.NoError(t, err)
	v, _ = a.cache.header()
	_, hit = a.cache.get(big, v, now)
	assert.False(t, hit)
	for i := range maxCachedBytes/maxCachedItem + 2 {
		a.cache.put(store.Key{PK: "p", SK: fmt.Sprint(i)}, store.Item{Data: make([]byte, maxCachedItem)}, v)
		assert.LessOrEqual(t, a.cache.bytes, maxCachedBytes)
	}

	require.NoError(t, a.Close())
	_, err = a.Get(ctx, k)
	assert.Error(t, err, "a closed store reads nothing, from the cache neither")
}
