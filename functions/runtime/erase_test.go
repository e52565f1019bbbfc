package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// An erased subscriber's runs go, heads and entries (what they sent, the steps' inputs);
// another subscriber's stay; a second pass finds nothing.
func TestEraseStepErasesTheSubscribersRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"W","trigger":{"type":"keyword","keywords":["go"]},"steps":[{"id":"a","type":"send_text","text":"x"}]}`)
	require.NoError(t, f.deliver(f.inboundFrom("43", "1", "go", "")))
	kept := f.subs.only(t).ID
	require.NoError(t, f.deliver(f.inboundFrom("42", "2", "go", "")))
	require.NoError(t, f.deliver(f.inboundFrom("42", "3", "go", "")))
	var gone string
	f.subs.mu.Lock()
	for id := range f.subs.byID {
		if id != kept {
			gone = id
		}
	}
	f.subs.mu.Unlock()
	require.Len(t, f.runs(gone), 2)
	require.Len(t, f.runs(kept), 1)
	exe := f.runs(gone)[0].ID

	for range 2 {
		require.NoError(t, purge.Run(t.Context(), EraseStep(f.st), purge.Erasure{BotID: f.bot, SubscriberID: gone}))
	}
	assert.Empty(t, f.runs(gone))
	page, err := f.st.Query(t.Context(), store.Query{PK: exePK(f.bot, exe)})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "the run's head and entries are gone")
	assert.Len(t, f.runs(kept), 1, "another subscriber's runs stay")
}
