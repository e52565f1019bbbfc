package sqlite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

func TestMentioning(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s, _ := openTemp(t, WithClock(func() time.Time { return now }))
	defer s.Close()
	ctx := t.Context()
	for _, it := range []store.Item{
		{Key: store.Key{PK: "BOT#bot_a#X", SK: "1"}},
		{Key: store.Key{PK: "P", SK: "bot_a#2"}},
		{Key: store.Key{PK: "CH#1", SK: "C"}, GSI1: store.IndexKey{PK: "BOT#bot_a#CH", SK: "1"}},
		{Key: store.Key{PK: "CH#2", SK: "C"}, GSI2: store.IndexKey{PK: "G", SK: "bot_a"}},
		{Key: store.Key{PK: "KEY#1", SK: "K"}, Data: []byte(`{"bot_id":"bot_a"}`)},
		{Key: store.Key{PK: "BOT#bot_b#X", SK: "1"}, Data: []byte(`{"ch":"ch_1"}`)},
		{Key: store.Key{PK: "BOT#bot_a#OLD", SK: "1"}, ExpiresAt: now},
	} {
		require.NoError(t, s.Put(ctx, it, store.Always))
	}
	keys := func(items []store.Item) []string {
		var out []string
		for _, it := range items {
			out = append(out, it.PK+"/"+it.SK)
		}
		return out
	}

	got, err := s.Mentioning(ctx, "bot_a")
	require.NoError(t, err)
	assert.Equal(t, []string{"BOT#bot_a#X/1", "CH#1/C", "CH#2/C", "KEY#1/K", "P/bot_a#2"}, keys(got),
		"in key order, found by key, index keys and data; never an expired item")

	got, err = s.Mentioning(ctx, "nobody", "ch_1")
	require.NoError(t, err)
	assert.Equal(t, []string{"BOT#bot_b#X/1"}, keys(got), "any of several needles")

	got, err = s.Mentioning(ctx)
	require.NoError(t, err)
	assert.Len(t, got, 6, "no needle: every live item")
}
