package storelog

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func TestConformanceOnSQLiteStore(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	eventlogtest.Run(t, func(*testing.T) eventlog.Log { return New(st) })
}

// An event erased meanwhile (by another call, or one GSI1 still lists after its deletion)
// fails its condition and is left out of the transaction: the others are erased, and its
// counter is not decremented twice.
func TestEraseLeavesOutEventsGoneAlready(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := New(sqlitetest.Open(t))
	at := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	var evs []eventlog.Event
	for i := range 6 {
		evs = append(evs, eventlog.Event{ID: fmt.Sprintf("ev_%d", i), BotID: "bot_1", SubscriberID: "sub_1", Name: "view",
			At: at.Add(time.Duration(i) * time.Second), Channel: "web", Source: eventlog.SourceCustom})
	}
	n, err := l.Append(ctx, evs...)
	require.NoError(t, err)
	require.Equal(t, 6, n)
	require.NoError(t, l.erase(ctx, []eventlog.Event{evs[1], evs[4]}))
	require.NoError(t, l.erase(ctx, evs), "two of them are gone already")

	q := eventlog.Query{BotID: "bot_1", From: at.Add(-time.Hour), To: at.Add(time.Hour)}
	require.NoError(t, l.Scan(ctx, q, func(e eventlog.Event) error { return fmt.Errorf("left: %s", e.ID) }))
	counts, err := l.Counts(ctx, q)
	require.NoError(t, err)
	assert.Empty(t, counts)
	n, err = l.Append(ctx, evs...)
	require.NoError(t, err)
	assert.Equal(t, 6, n, "every id is free again")
	counts, err = l.Counts(ctx, q)
	require.NoError(t, err)
	assert.Equal(t, []eventlog.DayCount{{Day: "2026-03-02", Name: "view", Channel: "web", Count: 6}}, counts, "no counter went below what it counted")
}
