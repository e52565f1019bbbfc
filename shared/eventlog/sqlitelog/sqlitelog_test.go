package sqlitelog

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

func open(t testing.TB) *Log {
	t.Helper()
	l, err := Open(filepath.Join(t.TempDir(), "events.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestConformance(t *testing.T) {
	t.Parallel()
	l := open(t)
	eventlogtest.Run(t, func(*testing.T) eventlog.Log { return l })
}

// The log is as durable as the store, in WAL mode: under full durability (the default) the
// log syncs its WAL itself, after each append or, under an open store.Deferral, at the
// deferral's Settle; under normal it leaves the syncs to SQLite's checkpoints.
func TestDurabilityMatchesTheStore(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opts []Option
		full bool
	}{{nil, true}, {[]Option{WithDurability(sqlite.Normal)}, false}} {
		l, err := Open(filepath.Join(t.TempDir(), "events.db"), tc.opts...)
		require.NoError(t, err)
		var sync int
		var mode string
		require.NoError(t, l.write.QueryRow(`PRAGMA synchronous`).Scan(&sync))
		require.NoError(t, l.write.QueryRow(`PRAGMA journal_mode`).Scan(&mode))
		assert.Equal(t, 1, sync, "NORMAL: the log syncs the WAL itself")
		assert.Equal(t, "wal", mode)
		assert.Equal(t, tc.full, l.wal != nil)

		e := eventlog.Event{BotID: "bot_1", SubscriberID: "sub_1", Name: "signup", At: time.Now(), Source: eventlog.SourceCustom}
		e.ID = "ev_1"
		_, err = l.Append(t.Context(), e)
		require.NoError(t, err)
		assert.Zero(t, l.wal.Unsynced(), "synced before Append returned")
		ctx, d := store.DeferSync(t.Context())
		e.ID = "ev_2"
		_, err = l.Append(ctx, e)
		require.NoError(t, err)
		if tc.full {
			assert.Equal(t, uint64(1), l.wal.Unsynced(), "deferred")
		}
		require.NoError(t, d.Settle(t.Context()))
		assert.Zero(t, l.wal.Unsynced(), "settled")
		require.NoError(t, l.Close())
	}
}

// What was appended is there after the file is opened again, and a second Log may open the
// file the first holds (the admin CLI beside the server).
func TestReopen(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "events.db")
	l, err := Open(path)
	require.NoError(t, err)
	e := eventlog.Event{ID: "ev_1", BotID: "bot_1", SubscriberID: "sub_1", Name: "signup", At: time.Now(), Source: eventlog.SourceCustom,
		Properties: map[string]any{"a": "b"}, Revenue: &eventlog.Revenue{Minor: 5, Currency: "KWD"}, ClientEventID: "c-1"}
	n, err := l.Append(context.Background(), e)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	second, err := Open(path)
	require.NoError(t, err)
	require.NoError(t, second.Close())
	require.NoError(t, l.Close())

	l, err = Open(path)
	require.NoError(t, err)
	defer l.Close()
	var got []eventlog.Event
	require.NoError(t, l.Scan(context.Background(), eventlog.Query{BotID: "bot_1", From: e.At.Add(-time.Hour), To: e.At.Add(time.Hour)},
		func(e eventlog.Event) error { got = append(got, e); return nil }))
	e.At = e.At.UTC().Truncate(eventlog.Precision)
	assert.Equal(t, []eventlog.Event{e}, got)
}

func TestMetaRefusesMalformed(t *testing.T) {
	t.Parallel()
	for _, b := range [][]byte{nil, {0}, {99, 0}, {0, metaClientID}, {0, metaClientID, 5, 'a'}, {0, metaProps, 1, '{'}, {0, metaRevenue, 2, 'U', 'S'}} {
		var e eventlog.Event
		assert.Error(t, decodeMeta(b, &e), "%v", b)
	}
}
