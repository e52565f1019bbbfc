package runtime

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Runs pages through the bot's run index newest first, filters while scanning, and goes on
// from the last run read whatever the store's own pages.
func TestRunsPagesAndFilters(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	st := sqlitetest.Open(t, sqlite.WithClock(func() time.Time { return at }))
	ctx := t.Context()
	bot := ids.At("bot", at)
	var all []string // oldest first
	for i := range 7 {
		rec := newRun(bot, Subscriber{ID: "sub_1"}, startSpec{ExecutionID: ids.At("exe", at.Add(time.Duration(i)*time.Second)),
			ReactionID: fmt.Sprint("rct_", i%2), Version: 1}, at)
		if i%3 == 0 {
			rec.Status = StatusCompleted
		}
		head, err := rec.headWrite(at)
		require.NoError(t, err)
		idx := store.PutOp(store.Item{Key: store.Key{PK: runsPK(bot), SK: rec.ID}, Revision: 1}, store.Always)
		require.NoError(t, st.Transact(ctx, []store.Write{head, idx}))
		all = append(all, rec.ID)
	}
	// An index item whose run expired is read and skipped.
	gone := ids.At("exe", at.Add(time.Minute))
	require.NoError(t, st.Put(ctx, store.Item{Key: store.Key{PK: runsPK(bot), SK: gone}, Revision: 1}, store.Always))
	tr := NewTraces(st, nil, func() time.Time { return at })

	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		list, next, err := tr.Runs(ctx, bot, RunFilter{}, 3, cursor)
		require.NoError(t, err)
		for _, e := range list {
			got = append(got, e.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	want := []string{}
	for i := len(all) - 1; i >= 0; i-- {
		want = append(want, all[i])
	}
	assert.Equal(t, want, got, "every run once, newest first")

	list, _, err := tr.Runs(ctx, bot, RunFilter{ReactionID: "rct_0", Status: StatusCompleted}, 50, "")
	require.NoError(t, err)
	require.Len(t, list, 2) // runs 0 and 6
	assert.Equal(t, []string{all[6], all[0]}, []string{list[0].ID, list[1].ID})
}
