package collections

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// fillCollections gives f's bot data of every kind the family stores: collections (names,
// counts) with records, external key claims and index entries; a committed batch; a batch
// that died after staging (its status, pending versions, staged entries and claims); an
// indexed field removed and a collection deleted whose purges have not run (their index
// partition, the tombstone and every partition it names).
func fillCollections(t *testing.T, f *fixture) {
	t.Helper()
	ctx := t.Context()
	c := f.products(t)
	for i := range 140 {
		_, err := f.svc.CreateRecord(ctx, f.bot, c.ID, ptr(fmt.Sprintf("ext-%d", i)),
			vals(t, "sku", fmt.Sprintf("SKU-%d", i), "price", i, "in_stock", i%2 == 0, "tags", []string{"a", "b"}))
		require.NoError(t, err)
	}
	var entries []BatchEntry
	for i := range 30 {
		entries = append(entries, BatchEntry{ExternalKey: ptr(fmt.Sprintf("batch-%d", i)), Values: vals(t, "sku", fmt.Sprintf("B-%d", i), "price", i)})
	}
	_, err := f.svc.Batch(ctx, f.bot, c.ID, entries[:15])
	require.NoError(t, err)
	// The second batch's process dies after staging: its commit and its abort both fail.
	f.store.set(func(_ int64, ws []store.Write) bool {
		if ws[0].Put != nil && ws[0].Put.PK == batchPK(f.bot, c.ID) {
			f.store.failPuts.Store(true)
			return true
		}
		return false
	}, nil)
	_, err = f.svc.Batch(ctx, f.bot, c.ID, entries[15:])
	require.Error(t, err)
	f.store.set(nil, nil)
	f.store.failPuts.Store(false)
	require.Positive(t, f.items(t, batchPK(f.bot, c.ID)), "a pending status is left")

	// Remove the indexed field price: its entries wait for a purge job that never runs.
	_, err = f.svc.UpdateCollection(ctx, f.bot, c.ID, c.Revision, nil, &[]FieldInput{
		{Name: ptr("sku")}, {Name: ptr("in_stock")}, {Name: ptr("launched_at")}, {Name: ptr("tags")},
	})
	require.NoError(t, err)

	gone, err := f.svc.CreateCollection(ctx, f.bot, "Orders", []FieldInput{field("ref", "string", true, true)})
	require.NoError(t, err)
	for i := range 20 {
		_, err := f.svc.CreateRecord(ctx, f.bot, gone.ID, ptr(fmt.Sprintf("o-%d", i)), vals(t, "ref", fmt.Sprintf("R-%d", i)))
		require.NoError(t, err)
	}
	require.NoError(t, f.svc.DeleteCollection(ctx, f.bot, gone.ID, nil, true))
	require.Positive(t, f.items(t, recordsPK(f.bot, gone.ID)), "its records wait for the purge")

	_, err = f.svc.CreateCollection(ctx, f.bot, "Empty", []FieldInput{field("x", "number", false, true)})
	require.NoError(t, err)
}

func TestPurgeBotStepErasesEveryCollection(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := &fixture{svc: NewService(f.store, f.jobs, f.clock.Now, slog.New(slog.DiscardHandler)), store: f.store, raw: f.raw,
		jobs: f.jobs, clock: f.clock, bot: ids.At("bot", t0.Add(1))}
	fillCollections(t, other)
	fillCollections(t, f)
	diag := f.raw.(*sqlitetest.Store)
	before, err := diag.Mentioning(t.Context(), other.bot)
	require.NoError(t, err)
	mine, err := diag.Mentioning(t.Context(), f.bot)
	require.NoError(t, err)
	require.Greater(t, len(mine), 2*purge.MaxDeletes, "enough for several steps")

	require.NoError(t, purge.Run(t.Context(), PurgeBotStep(f.raw), purge.Payload{AccountID: "acct_x", BotID: f.bot}))

	left, err := diag.Mentioning(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing of the bot remains")
	after, err := diag.Mentioning(t.Context(), other.bot)
	require.NoError(t, err)
	assert.Equal(t, before, after, "another bot's collections are untouched")

	// The collection purges that were started still finish, finding nothing.
	for _, p := range f.jobs.jobs() {
		next, done := "", false
		for !done {
			next, done, err = f.svc.PurgeStep(t.Context(), p, next)
			require.NoError(t, err)
		}
	}
}
