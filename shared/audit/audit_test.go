package audit_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func newLog(t *testing.T) (*audit.Log, *sqlite.Store, *clock) {
	t.Helper()
	c := &clock{now: t0}
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(c.Now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return audit.NewLog(s), s, c
}

func event(account, bot string, at time.Time) audit.Event {
	return audit.Event{
		ID: ids.At("evt", at), Time: at, AccountID: account, ActorUserID: "usr_1", TokenID: "pat_1", TokenKind: "pat",
		BotID: bot, Method: "PATCH", Route: "PATCH /api/bots/{botID}", Status: 200, RequestID: "req_" + at.Format("150405"),
	}
}

func eventIDs(events []audit.Event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.ID
	}
	return out
}

func TestPublishAndListNewestFirst(t *testing.T) {
	t.Parallel()
	log, _, _ := newLog(t)
	ctx := t.Context()
	bot1, bot2 := ids.At("bot", t0), ids.At("bot", t0.Add(time.Second))
	// Published out of order: the trail orders by event time, not by arrival.
	for _, i := range []int{3, 0, 4, 1, 5, 2} {
		bot := []string{bot1, bot2, ""}[i%3]
		at := t0.Add(time.Duration(i) * time.Minute)
		require.NoError(t, log.Publish(ctx, event("acct_A", bot, at)))
		require.NoError(t, log.Publish(ctx, event("acct_B", bot, at)))
	}
	events, next, err := log.List(ctx, "acct_A", "", 50, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, events, 6)
	var of1 []string
	for i, e := range events {
		assert.Equal(t, "acct_A", e.AccountID)
		assert.Equal(t, t0.Add(time.Duration(5-i)*time.Minute), e.Time, "newest first")
		if e.BotID == bot1 {
			of1 = append(of1, e.ID)
		}
	}
	require.Len(t, of1, 2)

	// The bot filter reads the per-bot index: only that bot's events, newest first.
	events, _, err = log.List(ctx, "acct_A", bot1, 50, "")
	require.NoError(t, err)
	assert.Equal(t, of1, eventIDs(events))

	// Another account's trail is separate, even for the same bot id.
	events, _, err = log.List(ctx, "acct_B", bot1, 50, "")
	require.NoError(t, err)
	require.Len(t, events, 2)
	for _, e := range events {
		assert.Equal(t, "acct_B", e.AccountID)
	}
	events, _, err = log.List(ctx, "acct_C", "", 50, "")
	require.NoError(t, err)
	assert.Empty(t, events)
	assert.NotNil(t, events, "an empty page is an empty list, not null")
}

func TestListPages(t *testing.T) {
	t.Parallel()
	log, _, _ := newLog(t)
	ctx := t.Context()
	bot := ids.At("bot", t0)
	const n = 7
	var want, wantBot []string // newest first
	for i := n - 1; i >= 0; i-- {
		b := ""
		if i%2 == 0 {
			b = bot
		}
		e := event("acct_A", b, t0.Add(time.Duration(i)*time.Second))
		want = append(want, e.ID)
		if b != "" {
			wantBot = append(wantBot, e.ID)
		}
		require.NoError(t, log.Publish(ctx, e))
	}

	for _, tt := range []struct {
		bot  string
		want []string
	}{{"", want}, {bot, wantBot}} {
		t.Run(fmt.Sprintf("bot=%q", tt.bot), func(t *testing.T) {
			var got []string
			cursor := ""
			for pages := 0; ; pages++ {
				require.Less(t, pages, n+1, "paging terminates")
				events, next, err := log.List(ctx, "acct_A", tt.bot, 2, cursor)
				require.NoError(t, err)
				require.LessOrEqual(t, len(events), 2)
				got = append(got, eventIDs(events)...)
				if next == "" {
					break
				}
				cursor = next
			}
			assert.Equal(t, tt.want, got, "every event once, newest first")
		})
	}
}

func TestRetention(t *testing.T) {
	t.Parallel()
	log, s, c := newLog(t)
	ctx := t.Context()
	bot := ids.At("bot", t0)
	e := event("acct_A", bot, t0)
	require.NoError(t, log.Publish(ctx, e))

	it, err := s.Get(ctx, store.Key{PK: "AUDIT#acct_A", SK: e.ID})
	require.NoError(t, err)
	assert.Equal(t, t0.Add(audit.Retention), it.ExpiresAt.UTC())

	c.Set(t0.Add(audit.Retention - time.Second))
	events, _, err := log.List(ctx, "acct_A", "", 50, "")
	require.NoError(t, err)
	assert.Len(t, events, 1, "kept for the whole retention period")

	c.Set(t0.Add(audit.Retention))
	for _, b := range []string{"", bot} {
		events, _, err = log.List(ctx, "acct_A", b, 50, "")
		require.NoError(t, err)
		assert.Empty(t, events, "gone after the retention period (bot=%q)", b)
	}
}

func TestRedeliveryOverwrites(t *testing.T) {
	t.Parallel()
	log, _, _ := newLog(t)
	ctx := t.Context()
	bot := ids.At("bot", t0)
	e := event("acct_A", bot, t0)
	require.NoError(t, log.Publish(ctx, e))
	require.NoError(t, log.Publish(ctx, e), "at-least-once delivery: the same event again is fine")
	e.Status = 500 // a redelivery carries the same id; the last write wins
	require.NoError(t, log.Publish(ctx, e))

	for _, b := range []string{"", bot} {
		events, _, err := log.List(ctx, "acct_A", b, 50, "")
		require.NoError(t, err)
		require.Len(t, events, 1, "one event, however often delivered (bot=%q)", b)
		assert.Equal(t, e, events[0])
	}
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	log, _, _ := newLog(t)
	ctx := t.Context()
	e := event("acct_A", "", t0.Add(123*time.Millisecond))
	e.ActorUserID = "" // bot tokens have no user
	e.TokenKind = "bot"
	require.NoError(t, log.Publish(ctx, e))
	events, _, err := log.List(ctx, "acct_A", "", 50, "")
	require.NoError(t, err)
	require.Len(t, events, 1)
	assert.Equal(t, e, events[0], "every field survives storage, sub-second time included")
}
