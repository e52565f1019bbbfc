package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

type flushes struct {
	marks []uint64
	err   error
}

func (f *flushes) Flush(_ context.Context, mark uint64) error {
	f.marks = append(f.marks, mark)
	return f.err
}

func TestDeferral(t *testing.T) {
	t.Parallel()
	assert.Nil(t, store.DeferralOf(context.Background()))
	assert.False(t, store.DeferralOf(context.Background()).Defer(&flushes{}, 1), "no deferral: the store syncs itself")

	ctx, d := store.DeferSync(context.Background())
	require.Same(t, d, store.DeferralOf(ctx))
	a, b := &flushes{}, &flushes{err: errors.New("disk gone")}
	assert.True(t, d.Defer(a, 5))
	assert.True(t, d.Defer(b, 2))
	assert.True(t, d.Defer(a, 3), "an older mark does not lower the flush")
	d.Close()
	assert.False(t, d.Defer(a, 9), "closed: later writes sync on their own")
	err := d.Settle(ctx)
	assert.ErrorContains(t, err, "disk gone")
	assert.Equal(t, []uint64{5}, a.marks)
	assert.Equal(t, []uint64{2}, b.marks)
	require.NoError(t, d.Settle(ctx), "settled once")
	assert.Len(t, a.marks, 1)
}

// Sync flushes what was deferred so far and leaves the deferral open; Settle flushes again
// what came after (a store's flush of a mark it already synced is free).
func TestDeferralSync(t *testing.T) {
	t.Parallel()
	require.NoError(t, (*store.Deferral)(nil).Sync(context.Background()))
	ctx, d := store.DeferSync(context.Background())
	a, b := &flushes{}, &flushes{}
	require.NoError(t, d.Sync(ctx), "nothing deferred: nothing to flush")
	assert.True(t, d.Defer(a, 1))
	assert.True(t, d.Defer(b, 4))
	require.NoError(t, d.Sync(ctx))
	assert.Equal(t, []uint64{1}, a.marks)
	assert.Equal(t, []uint64{4}, b.marks)
	assert.True(t, d.Defer(a, 2), "still open")
	require.NoError(t, d.Settle(ctx))
	assert.Equal(t, []uint64{1, 2}, a.marks)
	assert.Equal(t, []uint64{4, 4}, b.marks)
}
