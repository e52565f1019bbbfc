package experiments

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// A deleted bot's experiments, their versions, the status index and the counter go; another
// bot's stay.
func TestPurgeStepErasesEveryExperiment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.create(t, f.definition())
	e := f.running(t)
	_, err := f.svc.Update(ctx, f.bot, e.ID, e.Revision, Patch{Salt: ptr("v2")})
	require.NoError(t, err)
	otherBot := ids.New("bot")
	kept, err := f.svc.Create(ctx, otherBot, f.definition())
	require.NoError(t, err)

	require.NoError(t, purge.Run(ctx, PurgeStep(f.raw), purge.Payload{AccountID: "acct_x", BotID: f.bot}))
	read := sqlitetest.Unrecorded(ctx)
	page, err := f.raw.Query(read, store.Query{PK: experimentsPK(f.bot)})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	for _, s := range Statuses() {
		page, err := f.raw.Query(read, store.Query{Index: store.GSI1, PK: byStatusPK(f.bot, s)})
		require.NoError(t, err)
		assert.Empty(t, page.Items, s)
	}
	got, err := f.svc.Get(ctx, otherBot, kept.ID)
	require.NoError(t, err)
	assert.Equal(t, kept.ID, got.ID)
}
