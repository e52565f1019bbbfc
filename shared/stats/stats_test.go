package stats

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func TestCountersAndSeries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 30, 0, 0, time.UTC)
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return now }))

	day1 := time.Date(2026, 11, 20, 9, 15, 0, 0, time.UTC)
	day2 := time.Date(2026, 11, 21, 10, 5, 0, 0, time.UTC)
	require.NoError(t, Add(ctx, st, "bot_a", "ch_tg", NewSubscribers, 2, day1))
	require.NoError(t, Add(ctx, st, "bot_a", "ch_wa", NewSubscribers, 1, day1))
	require.NoError(t, Add(ctx, st, "bot_a", "ch_tg", MessagesIn, 5, day2))
	require.NoError(t, Add(ctx, st, "bot_b", "ch_tg", MessagesIn, 100, day2)) // another bot
	// The same subscriber twice in an hour is active once.
	require.NoError(t, TouchActive(ctx, st, "bot_a", "ch_tg", "sub_1", day2))
	require.NoError(t, TouchActive(ctx, st, "bot_a", "ch_tg", "sub_1", day2.Add(10*time.Minute)))
	require.NoError(t, TouchActive(ctx, st, "bot_a", "ch_tg", "sub_2", day2))

	s, err := Query(ctx, st, "bot_a", Day, time.Date(2026, 11, 19, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	require.NoError(t, err)
	require.Len(t, s.Points, 3, "empty buckets are present")
	assert.Equal(t, int64(0), s.Points[0].Total[NewSubscribers])
	assert.Equal(t, int64(3), s.Points[1].Total[NewSubscribers])
	assert.Equal(t, int64(2), s.Points[1].Channels["ch_tg"][NewSubscribers])
	assert.Equal(t, int64(5), s.Points[2].Total[MessagesIn], "bot_b's messages are not bot_a's")
	assert.Equal(t, int64(2), s.Points[2].Total[ActiveSubscribers])
	assert.Equal(t, Counts{NewSubscribers: 3, ActiveSubscribers: 2, MessagesIn: 5, MessagesOut: 0, ReactionsStarted: 0}, s.Total)
	assert.Equal(t, "UTC", s.Timezone)

	h, err := Query(ctx, st, "bot_a", Hour, day2.Truncate(time.Hour), day2.Truncate(time.Hour).Add(2*time.Hour))
	require.NoError(t, err)
	require.Len(t, h.Points, 2)
	assert.Equal(t, int64(5), h.Points[0].Total[MessagesIn])
	assert.Equal(t, int64(2), h.Points[0].Total[ActiveSubscribers])
}

func TestCheckRange(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.NoError(t, CheckRange(Day, t0, t0.Add(MaxDayRange)))
	assert.Error(t, CheckRange(Day, t0, t0.Add(MaxDayRange+time.Second)))
	assert.NoError(t, CheckRange(Hour, t0, t0.Add(MaxHourRange)))
	assert.Error(t, CheckRange(Hour, t0, t0.Add(MaxHourRange+time.Second)))
	assert.Error(t, CheckRange(Day, t0, t0), "empty range")
	assert.Error(t, CheckRange(Day, t0.Add(time.Hour), t0), "inverted")
	assert.Error(t, CheckRange(Day, time.Time{}, t0), "missing bound")
	assert.Error(t, CheckRange("week", t0, t0.Add(time.Hour)))
}

func TestPurgeStepErasesCountersAndMarkers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 30, 0, 0, time.UTC)
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return now }))

	for _, bot := range []string{"bot_a", "bot_b"} {
		for d := 0; d < 400; d += 3 { // every metric, over more than a year of days
			at := now.Add(-time.Duration(d) * 24 * time.Hour)
			for _, m := range Metrics() {
				require.NoError(t, Add(ctx, st, bot, "telegram", m, 1, at))
			}
		}
		// Markers as old as still live (24.3 hours and two days back) and from a clock a
		// little ahead.
		for i, at := range []time.Time{now, now.Add(-20 * time.Minute), now.Add(-24*time.Hour - 20*time.Minute),
			now.Add(-48 * time.Hour), now.Add(40 * time.Minute)} {
			require.NoError(t, TouchActive(ctx, st, bot, "telegram", "sub_"+string(rune('a'+i)), at))
		}
	}
	before, err := st.Mentioning(ctx, "bot_b")
	require.NoError(t, err)

	require.NoError(t, purge.Run(ctx, PurgeStep(st, func() time.Time { return now }), purge.Payload{AccountID: "acct_a", BotID: "bot_a"}))

	left, err := st.Mentioning(ctx, "bot_a")
	require.NoError(t, err)
	assert.Empty(t, left)
	after, err := st.Mentioning(ctx, "bot_b")
	require.NoError(t, err)
	assert.Equal(t, len(before), len(after), "another bot's counters are untouched")
}

// ActiveWrites counts a subscriber active in the caller's transaction, once per bucket as
// TouchActive does; a subscriber counted between its read and the commit fails the
// transaction at a marker, which ActiveConflict recognizes.
func TestActiveWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 30, 0, 0, time.UTC)
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return now }))
	claim := store.PutOp(store.Item{Key: store.Key{PK: "C", SK: "1"}, Revision: 1}, store.MustNotExist)
	active := func(t *testing.T) int64 {
		s, err := Query(ctx, st, "bot_a", Day, now.Truncate(24*time.Hour), now.Truncate(24*time.Hour).Add(24*time.Hour))
		require.NoError(t, err)
		return s.Total[ActiveSubscribers]
	}

	w, err := ActiveWrites(ctx, st, "bot_a", "telegram", "sub_1", now, true)
	require.NoError(t, err)
	require.Len(t, w, 4, "a marker and a count per granularity")
	require.NoError(t, st.Transact(ctx, append([]store.Write{claim}, w...)))
	assert.Equal(t, int64(1), active(t))

	w, err = ActiveWrites(ctx, st, "bot_a", "telegram", "sub_1", now.Add(time.Minute), false)
	require.NoError(t, err)
	assert.Empty(t, w, "counted in both buckets already")

	// Read before another writer counts the subscriber: the transaction fails at a marker.
	w, err = ActiveWrites(ctx, st, "bot_a", "telegram", "sub_2", now, false)
	require.NoError(t, err)
	require.Len(t, w, 4)
	require.NoError(t, TouchActive(ctx, st, "bot_a", "telegram", "sub_2", now))
	claim2 := store.PutOp(store.Item{Key: store.Key{PK: "C", SK: "2"}, Revision: 1}, store.MustNotExist)
	err = st.Transact(ctx, append([]store.Write{claim2}, w...))
	assert.True(t, ActiveConflict(err, 1, w))
	assert.False(t, ActiveConflict(st.Transact(ctx, []store.Write{claim}), 1, w), "the claim's own condition")
	assert.Equal(t, int64(2), active(t))
}
