package reqlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store/sqlite"
)

func openLog(t *testing.T, now time.Time) *Log {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(func() time.Time { return now }))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return NewLog(st)
}

func record(i int, bot, route string, status int, at time.Time) httpapi.RequestRecord {
	return httpapi.RequestRecord{Time: at, BotID: bot, Method: "GET", Route: route, Status: status,
		Latency: 1500 * time.Microsecond, TokenID: "pat_x", TokenKind: "pat", RequestID: fmt.Sprintf("req-%d", i)}
}

func TestListFiltersAndOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	l := openLog(t, t0.Add(time.Hour))
	routes := []string{"GET /api/bots/{botID}", "PATCH /api/bots/{botID}"}
	statuses := []int{200, 404, 409, 500}
	for i := 0; i < 40; i++ {
		require.NoError(t, l.RecordRequest(ctx, record(i, "bot_a", routes[i%2], statuses[i%4], t0.Add(time.Duration(i)*time.Second))))
	}
	require.NoError(t, l.RecordRequest(ctx, record(99, "bot_b", routes[0], 200, t0)))

	all, next, err := l.List(ctx, "bot_a", Filter{}, 50, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, all, 40, "bot_b's entry is not bot_a's")
	assert.Equal(t, "req-39", all[0].RequestID, "newest first")
	assert.Equal(t, 1.5, all[0].LatencyMS)

	fourxx, _, err := l.List(ctx, "bot_a", Filter{StatusClass: "4xx"}, 50, "")
	require.NoError(t, err)
	assert.Len(t, fourxx, 20)
	patches, _, err := l.List(ctx, "bot_a", Filter{Route: routes[1]}, 50, "")
	require.NoError(t, err)
	assert.Len(t, patches, 20)
	both, _, err := l.List(ctx, "bot_a", Filter{Route: routes[1], StatusClass: "4xx"}, 50, "")
	require.NoError(t, err)
	assert.Len(t, both, 10) // the PATCHes are the odd i, answered 404 (i%4 == 1) or 500 (i%4 == 3)
	for _, e := range both {
		assert.Equal(t, 404, e.Status)
	}

	// Paging with both filters returns every match exactly once.
	seen := map[string]bool{}
	cursor := ""
	for range 20 {
		page, next, err := l.List(ctx, "bot_a", Filter{Route: routes[1], StatusClass: "4xx"}, 3, cursor)
		require.NoError(t, err)
		for _, e := range page {
			assert.False(t, seen[e.ID])
			seen[e.ID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Len(t, seen, 10)
}

func TestEntriesExpireAfterRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(func() time.Time { return t0.Add(Retention + time.Second) }))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	l := NewLog(st)
	require.NoError(t, l.RecordRequest(ctx, record(1, "bot_a", "GET /x", 200, t0)))
	got, _, err := l.List(ctx, "bot_a", Filter{}, 10, "")
	require.NoError(t, err)
	assert.Empty(t, got, "older than 30 days")
}

func TestBufferedFlushesEverything(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	l := openLog(t, t0)
	b := NewBuffered(l, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour) // only size or Close flush
	for i := 0; i < 250; i++ {
		require.NoError(t, b.RecordRequest(ctx, record(i, "bot_a", "GET /x", 200, t0.Add(time.Duration(i)*time.Millisecond))))
	}
	require.NoError(t, b.Close(ctx))
	var n int
	cursor := ""
	for {
		page, next, err := l.List(ctx, "bot_a", Filter{}, 200, cursor)
		require.NoError(t, err)
		n += len(page)
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, 250, n, "nothing lost")
	assert.NoError(t, b.Close(ctx), "closing twice is harmless")
}

func TestPurgeStepErasesTheBotsLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(func() time.Time { return t0.Add(time.Hour) }))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	l := NewLog(st)
	routes := []string{"GET /api/bots/{botID}", "PATCH /api/bots/{botID}", "POST /api/bots/{botID}/subscribers"}
	for i := range 450 {
		require.NoError(t, l.RecordRequest(ctx, record(i, "bot_a", routes[i%3], []int{200, 404, 500}[i%3], t0.Add(time.Duration(i)*time.Second))))
	}
	require.NoError(t, l.RecordRequest(ctx, record(999, "bot_b", routes[0], 200, t0)))

	require.NoError(t, purge.Run(ctx, PurgeStep(st), purge.Payload{AccountID: "acct_a", BotID: "bot_a"}))

	left, err := st.Mentioning(ctx, "bot_a")
	require.NoError(t, err)
	assert.Empty(t, left, "entries and their index entries")
	kept, _, err := l.List(ctx, "bot_b", Filter{}, 50, "")
	require.NoError(t, err)
	assert.Len(t, kept, 1, "another bot's log is untouched")
}
