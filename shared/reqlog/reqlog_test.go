package reqlog

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func openLog(t *testing.T, now time.Time) *Log {
	t.Helper()
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return now }))
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

// The buffered recorder's batches become blocks (a block per route and status class of a
// batch); every listing, filtered or not and at any page size, returns each entry once,
// newest batch first and newest first within a batch.
func TestBlocksPageExactlyOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return t0.Add(time.Hour) }))
	l := NewLog(st)
	routes := []string{"GET /api/bots/{botID}", "PATCH /api/bots/{botID}", "GET /api/bots/{botID}/subscribers"}
	statuses := []int{200, 201, 404, 500, 200}
	var batches [][]Entry
	n := 0
	for size := range 12 { // batches of 1 to 12 entries
		var batch []Entry
		for range size + 1 {
			batch = append(batch, FromRecord(record(n, "bot_a", routes[n%3], statuses[n%5], t0.Add(time.Duration(n)*time.Millisecond))))
			n++
		}
		require.NoError(t, l.Write(ctx, batch...))
		batches = append(batches, batch)
	}
	groups := 0
	for _, b := range batches {
		seen := map[string]bool{}
		for _, e := range b {
			seen[e.Route+StatusClass(e.Status)] = true
		}
		groups += len(seen)
	}
	blocks, err := st.Query(ctx, store.Query{PK: partition("bot_a")})
	require.NoError(t, err)
	assert.Len(t, blocks.Items, groups, "a block per route and class of a batch, not an item per entry")
	assert.Less(t, groups, n)

	want := func(f Filter) []string { // newest batch first, newest first within it
		var ids []string
		for i := len(batches) - 1; i >= 0; i-- {
			var in []string
			for _, e := range batches[i] {
				if (f.Route == "" || e.Route == f.Route) && (f.StatusClass == "" || StatusClass(e.Status) == f.StatusClass) {
					in = append(in, e.ID)
				}
			}
			slices.Sort(in)
			slices.Reverse(in)
			ids = append(ids, in...)
		}
		return ids
	}
	for _, f := range []Filter{{}, {StatusClass: "2xx"}, {Route: routes[1]}, {Route: routes[0], StatusClass: "5xx"}} {
		for _, limit := range []int{1, 2, 5, 7, 100} {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, 200, "the cursor advances")
				page, next, err := l.List(ctx, "bot_a", f, limit, cursor)
				require.NoError(t, err)
				assert.LessOrEqual(t, len(page), limit)
				for _, e := range page {
					got = append(got, e.ID)
					assert.Equal(t, "bot_a", e.BotID)
					assert.Equal(t, 1.5, e.LatencyMS)
				}
				if next == "" {
					break
				}
				cursor = next
			}
			assert.Equal(t, want(f), got, "filter %+v, limit %d", f, limit)
		}
	}
	_, _, err = l.List(ctx, "bot_a", Filter{}, 10, "not-a-cursor")
	assert.Equal(t, "invalid_cursor", httpapi.AsError(err).Code)
}

// A page of a filter with few matches stops after maxScans store pages, at a batch, with
// next set, and the listing goes on from there.
func TestSparseFilterPagesOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st := sqlitetest.Open(t, sqlite.WithDurability(sqlite.Normal), sqlite.WithClock(func() time.Time { return t0.Add(time.Hour) }))
	l := NewLog(st)
	const route = "GET /api/bots/{botID}"
	require.NoError(t, l.RecordRequest(ctx, record(0, "bot_a", route, 503, t0)))
	for i := 1; i <= maxScans*scanBlocks+20; i++ { // more blocks than one page reads
		require.NoError(t, l.RecordRequest(ctx, record(i, "bot_a", route, 200, t0.Add(time.Duration(i)*time.Millisecond))))
	}
	page, next, err := l.List(ctx, "bot_a", Filter{Route: route, StatusClass: "5xx"}, 10, "")
	require.NoError(t, err)
	assert.Empty(t, page, "ten store pages of 2xx")
	require.NotEmpty(t, next)
	page, next, err = l.List(ctx, "bot_a", Filter{Route: route, StatusClass: "5xx"}, 10, next)
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, "req-0", page[0].RequestID)
	assert.Empty(t, next)
}

// A block takes entries while its row stays small enough for SQLite to keep it in its
// B-tree page (maxRow), so that one busy route's batch is many small rows, all listed.
func TestBlocksStaySmall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	l := openLog(t, t0.Add(time.Hour))
	var batch []Entry
	for i := range maxBatch {
		batch = append(batch, FromRecord(record(i, "bot_a", "GET /api/bots/{botID}", 200, t0.Add(time.Duration(i)*time.Millisecond))))
	}
	require.NoError(t, l.Write(ctx, batch...))
	items := 0
	for cursor := ""; ; {
		page, err := l.store.Query(ctx, store.Query{PK: partition("bot_a"), Cursor: cursor})
		require.NoError(t, err)
		for _, it := range page.Items {
			items++
			row := len(it.PK) + len(it.SK) + len(it.GSI1.PK) + len(it.GSI1.SK) + len(it.GSI2.PK) + len(it.GSI2.SK) + len(it.Data)
			assert.LessOrEqual(t, row, maxRow, it.SK)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	assert.Less(t, items, maxBatch/4, "several entries a block")
	var n int
	for cursor := ""; ; {
		page, next, err := l.List(ctx, "bot_a", Filter{}, 1000, cursor)
		require.NoError(t, err)
		n += len(page)
		if cursor = next; cursor == "" {
			break
		}
	}
	assert.Equal(t, maxBatch, n)
}

func TestEntriesExpireAfterRetention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return t0.Add(Retention + time.Second) }))
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
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return t0.Add(time.Hour) }))
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

// emptyPages is a store whose first queries of the log answer pages without items but with
// a next cursor, as DynamoDB does when a page's items have all expired (the store filters
// them out after the read): the listing must carry on from the store's cursor.
type emptyPages struct {
	store.Store
	left int // empty pages still to answer
}

const emptyCursor = "empty|"

func (e *emptyPages) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if e.left > 0 && (q.Cursor == "" || strings.HasPrefix(q.Cursor, emptyCursor)) {
		e.left--
		return store.Page{Next: emptyCursor + strconv.Itoa(e.left)}, nil
	}
	if strings.HasPrefix(q.Cursor, emptyCursor) {
		q.Cursor = "" // past the expired items: the live ones from the start
	}
	return e.Store.Query(ctx, q)
}

// A page that sees no block in maxScans store pages stops with a store cursor, and the next
// page goes on from it: every entry comes back once.
func TestEmptyStorePagesPageOn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t0 := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st := &emptyPages{Store: sqlitetest.Open(t, sqlite.WithDurability(sqlite.Normal), sqlite.WithClock(func() time.Time { return t0.Add(time.Hour) })),
		left: maxScans + 3}
	l := NewLog(st)
	for i := range 5 {
		require.NoError(t, l.RecordRequest(ctx, record(i, "bot_a", "GET /api/bots/{botID}", 200, t0.Add(time.Duration(i)*time.Millisecond))))
	}
	page, next, err := l.List(ctx, "bot_a", Filter{}, 10, "")
	require.NoError(t, err)
	assert.Empty(t, page, "maxScans pages without items")
	require.True(t, strings.HasPrefix(next, storeCursor), "a store cursor: %q", next)
	// The next pages read the three empty pages left, then the entries, two at a time.
	var ids []string
	for next != "" {
		page, next, err = l.List(ctx, "bot_a", Filter{}, 2, next)
		require.NoError(t, err)
		for _, e := range page {
			ids = append(ids, e.RequestID)
		}
	}
	assert.Equal(t, []string{"req-4", "req-3", "req-2", "req-1", "req-0"}, ids)
}
