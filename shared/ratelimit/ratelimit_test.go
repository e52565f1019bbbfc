package ratelimit_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func TestAllow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 10, 0, 40, 0, time.UTC)
	clock := func() time.Time { return now }
	st := sqlitetest.Open(t, sqlite.WithClock(clock))
	lim := ratelimit.New(st, clock)
	l := ratelimit.Limit{Name: "test sends", Max: 3, Window: time.Minute}
	ctx := t.Context()
	for range 3 {
		require.NoError(t, lim.Allow(ctx, l, "bot_a"))
	}
	err := lim.Allow(ctx, l, "bot_a")
	require.Error(t, err)
	var he *httpapi.Error
	require.ErrorAs(t, err, &he)
	assert.Equal(t, httpapi.KindTooManyRequests, he.Kind)
	assert.Equal(t, "rate_limited", he.Code)
	assert.Equal(t, int64(20), he.Extensions["retry_after_seconds"], "the seconds left in the window")
	require.NoError(t, lim.Allow(ctx, l, "bot_b"), "keys are counted apart")

	now = now.Add(20 * time.Second)
	require.NoError(t, lim.Allow(ctx, l, "bot_a"), "a new window starts afresh")
}

// A sliding limit counts the last window, wherever calendar windows end: three calls at the
// end of one minute leave no room at the start of the next.
func TestAllowSliding(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 5, 1, 10, 0, 50, 0, time.UTC)
	clock := func() time.Time { return now }
	st := sqlitetest.Open(t, sqlite.WithClock(clock))
	lim := ratelimit.New(st, clock)
	l := ratelimit.Limit{Name: "starts", Max: 3, Window: time.Minute}
	ctx := t.Context()
	for range 3 {
		require.NoError(t, lim.AllowSliding(ctx, l, "acct_a"))
		now = now.Add(2 * time.Second)
	}
	// 10:00:56; the calls were at :50, :52, :54. At 10:01:05 a fixed window would be new.
	now = time.Date(2026, 5, 1, 10, 1, 5, 0, time.UTC)
	err := lim.AllowSliding(ctx, l, "acct_a")
	var he *httpapi.Error
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "rate_limited", he.Code)
	assert.Equal(t, int64(45), he.Extensions["retry_after_seconds"], "until the call of 10:00:50 is a minute old")
	require.NoError(t, lim.AllowSliding(ctx, l, "acct_b"), "keys are counted apart")

	now = time.Date(2026, 5, 1, 10, 1, 50, 0, time.UTC)
	require.NoError(t, lim.AllowSliding(ctx, l, "acct_a"), "the oldest call has left the window")
	require.Error(t, lim.AllowSliding(ctx, l, "acct_a"), "the calls of :52 and :54 and the new one fill it again")
}

// Concurrent calls are each counted once: exactly Max of many succeed.
func TestAllowSlidingConcurrent(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	lim := ratelimit.New(st, time.Now)
	l := ratelimit.Limit{Name: "starts", Max: 3, Window: time.Minute}
	var ok atomic.Int64
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			if lim.AllowSliding(t.Context(), l, "acct_a") == nil {
				ok.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(3), ok.Load())
}
