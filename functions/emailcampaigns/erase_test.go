package emailcampaigns

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// An erased subscriber's rows lose the address in every campaign of the bot (a sent one and
// one not yet scheduled, which has none), with the address's claim; the report counts the
// same, the other recipients keep theirs, and the step is safe to run again.
func TestEraseStepRemovesTheAddress(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	sent := f.schedule(t, f.create(t))
	f.drain(t)
	f.create(t) // a draft: no rows
	before := f.assertCounts(t, sent.ID)
	gone := f.aud.people[1]

	step := EraseStep(f.st)
	for range 2 { // a repeated step changes nothing more
		require.NoError(t, purge.Run(jobCtx(t), step, purge.Erasure{BotID: f.bot, SubscriberID: gone.SubscriberID}))
	}

	assert.Equal(t, before, f.assertCounts(t, sent.ID), "the report counts the same")
	for _, r := range f.rows(t, sent.ID) {
		if r.SubscriberID == gone.SubscriberID {
			assert.True(t, r.Erased)
			assert.Empty(t, r.Address)
			assert.Equal(t, RowSent, r.State)
			assert.NotEmpty(t, r.MessageID, "the event pointer still finds the row")
		} else {
			assert.False(t, r.Erased)
			assert.NotEmpty(t, r.Address)
		}
	}
	_, err := f.st.Get(t.Context(), addressKey(f.bot, sent.ID, strings.ToLower(gone.Email)))
	assert.ErrorIs(t, err, store.ErrNotFound, "the address's claim is gone")
	_, err = f.st.Get(t.Context(), addressKey(f.bot, sent.ID, strings.ToLower(f.aud.people[0].Email)))
	assert.NoError(t, err, "the others' claims stay")

	page, _, err := f.svc.Recipients(t.Context(), f.bot, sent.ID, "", 10, "")
	require.NoError(t, err)
	b, err := json.Marshal(page)
	require.NoError(t, err)
	assert.NotContains(t, string(b), gone.Email, "the recipients list does not show it")
	assert.Contains(t, string(b), `"erased":true`)

	_, _, err = EraseStep(f.st)(t.Context(), json.RawMessage(`{"bot_id":"`+f.bot+`"}`), "")
	assert.Error(t, err, "a payload without the subscriber names no one")
}
