package subscribers

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// fillSubscribers gives f's bot data of every kind the family stores: subscribers on several
// channels with names, locales, field values and labels (records, channel index entries,
// identities, search entries, memberships, counts), an erased subscriber (tombstone), a label
// and a field whose deletion jobs have not run yet (markers, memberships, values), and a
// label whose removal finished (its lingering marker).
func fillSubscribers(t *testing.T, f *fixture) {
	t.Helper()
	ctx := t.Context()
	vip, regular, leaving, done := f.label(t, "VIP"), f.label(t, "Regular"), f.label(t, "Leaving"), f.label(t, "Done")
	city := f.field(t, "city", TypeString)
	f.field(t, "score", TypeNumber)
	plan := f.field(t, "plan", TypeString)
	channels := []string{ChannelTelegram, ChannelWhatsApp, ChannelVK}
	var subs []Subscriber
	for i := range 160 {
		first, last, locale := fmt.Sprintf("Ann%d", i), "Lee-Smith", "pt-br"
		sub, _, err := f.svc.Upsert(ctx, f.bot, channels[i%3], fmt.Sprintf("+4915%06d", i), Changes{
			FirstName: &first, LastName: &last, Locale: &locale,
			Fields:    map[string]any{"city": "Berlin", "score": i, "plan": "gold"},
			AddLabels: []string{vip.ID, regular.ID, leaving.ID, done.ID},
		})
		require.NoError(t, err)
		subs = append(subs, sub)
	}
	require.NoError(t, f.svc.Delete(ctx, f.bot, subs[0].ID, nil)) // erased: a tombstone stays
	_, err := f.svc.SetFields(ctx, f.bot, subs[1].ID, map[string]any{city.ID: "Paris"})
	require.NoError(t, err)
	require.NoError(t, f.svc.DeleteLabel(ctx, f.bot, done.ID, nil))
	f.jobs.runAll(t, f.svc) // done's removal finished; its marker lingers for an hour
	require.NoError(t, f.svc.DeleteLabel(ctx, f.bot, leaving.ID, nil))
	require.NoError(t, f.svc.DeleteField(ctx, f.bot, plan.ID)) // both jobs still queued
}

func TestPurgeStepErasesEverySubscriberLabelAndField(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	other := &fixture{svc: f.svc, store: f.store, clock: f.clock, jobs: f.jobs, bot: ids.At("bot", t0.Add(1))}
	fillSubscribers(t, other)
	fillSubscribers(t, f)
	diag := f.store.(*sqlitetest.Store)
	before, err := diag.Mentioning(t.Context(), other.bot)
	require.NoError(t, err)
	mine, err := diag.Mentioning(t.Context(), f.bot)
	require.NoError(t, err)
	require.Greater(t, len(mine), 3*purge.MaxDeletes, "enough for several steps")

	p := purge.Payload{AccountID: "acct_x", BotID: f.bot}
	require.NoError(t, purge.Run(t.Context(), PurgeStep(f.store), p))
	// The new-subscriber counters are the stats family's, erased by its own step.
	require.NoError(t, purge.Run(t.Context(), stats.PurgeStep(f.store, f.clock.Now), p))

	left, err := diag.Mentioning(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing of the bot remains")
	after, err := diag.Mentioning(t.Context(), other.bot)
	require.NoError(t, err)
	assert.Equal(t, before, after, "another bot's subscribers are untouched")

	// The deletion jobs that were still queued find nothing to do and finish.
	f.jobs.runAll(t, f.svc)
	left, err = diag.Mentioning(t.Context(), f.bot)
	require.NoError(t, err)
	for _, it := range left {
		assert.Equal(t, labelGonePartition(f.bot), it.PK, "only the marker a finished removal leaves, which expires")
		assert.False(t, it.ExpiresAt.IsZero())
	}
}
