package ratelimit_test

import (
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
