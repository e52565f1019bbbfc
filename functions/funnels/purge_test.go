package funnels

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// A deleted bot's funnels and their counter go; another bot's stay.
func TestPurgeStepErasesEveryFunnel(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	def := Definition{Name: ptr("F"), Steps: &[]Step{{Event: "a"}, {Event: "b"}}}
	for range 3 {
		_, err := s.svc.Create(ctx, s.bot, def)
		require.NoError(t, err)
	}
	otherBot := ids.New("bot")
	kept, err := s.svc.Create(ctx, otherBot, def)
	require.NoError(t, err)

	require.NoError(t, purge.Run(ctx, PurgeStep(s.raw), purge.Payload{AccountID: "acct_x", BotID: s.bot}))
	page, err := s.raw.Query(sqlitetest.Unrecorded(ctx), store.Query{PK: funnelsPK(s.bot)})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	got, err := s.svc.Get(ctx, otherBot, kept.ID)
	require.NoError(t, err)
	assert.Equal(t, kept.ID, got.ID)
}
