package segments

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// A deleted bot's segments, their member chunks (a left-over one too) and the counter go;
// another bot's stay.
func TestPurgeStepErasesEverySegment(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	f.save(t, cohort("Big", members(ChunkSize+5)...))
	f.save(t, cohort("Small", "a"))
	require.NoError(t, f.raw.Put(ctx, store.Item{Key: chunkKey(f.bot, "seg_halfsaved", 0), Revision: 1, Data: []byte(`["x"]`)}, store.Always))
	otherBot := ids.New("bot")
	kept, err := f.svc.Save(ctx, otherBot, cohort("Kept", "b"))
	require.NoError(t, err)

	require.NoError(t, purge.Run(ctx, PurgeStep(f.raw), purge.Payload{AccountID: "acct_x", BotID: f.bot}))
	read := sqlitetest.Unrecorded(ctx)
	for _, pk := range []string{segmentsPK(f.bot), membersPK(f.bot)} {
		page, err := f.raw.Query(read, store.Query{PK: pk})
		require.NoError(t, err)
		assert.Empty(t, page.Items, pk)
	}
	got, err := f.svc.Get(ctx, otherBot, kept.ID)
	require.NoError(t, err)
	assert.Equal(t, kept.ID, got.ID)
	ms, _, err := f.svc.Members(ctx, otherBot, kept.ID, "", 10)
	require.NoError(t, err)
	assert.Equal(t, []string{"b"}, ms)
}
