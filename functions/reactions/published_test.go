package reactions

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
)

// countingStore counts the queries that reach the store.
type countingStore struct {
	store.Store
	queries atomic.Int64
}

func (c *countingStore) Query(ctx context.Context, q store.Query) (store.Page, error) {
	c.queries.Add(1)
	return c.Store.Query(ctx, q)
}

func triggerTypes(list []Published) []TriggerType {
	out := []TriggerType{}
	for _, p := range list {
		out = append(out, p.Trigger.Type)
	}
	return out
}

// Another process (a second Service over the same store) sees every change of what is
// published at its next call, and reads the reactions again only after such a change.
func TestPublishedFollowsEveryPublication(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	counted := &countingStore{Store: f.store}
	runtime := NewService(counted, f.vocab, f.clock.Now, slog.New(slog.DiscardHandler))

	list, err := runtime.Published(ctx, f.bot)
	require.NoError(t, err)
	assert.Empty(t, list)

	a := f.create(t, `{"name":"A","trigger":{"type":"start"},"steps":[{"id":"s","type":"send_text","text":"a1"}]}`)
	b := f.create(t, `{"name":"B","trigger":{"type":"keyword","keywords":["price"]},"steps":[{"id":"s","type":"send_text","text":"b1"}]}`)
	list, err = runtime.Published(ctx, f.bot)
	require.NoError(t, err)
	assert.Empty(t, list, "drafts do not run")

	_, err = f.svc.Publish(ctx, f.bot, b.ID, 1)
	require.NoError(t, err)
	_, err = f.svc.Publish(ctx, f.bot, a.ID, 1)
	require.NoError(t, err)
	list, err = runtime.Published(ctx, f.bot)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, a.ID, list[0].ReactionID, "oldest first")
	assert.Equal(t, []TriggerType{TriggerStart, TriggerKeyword}, triggerTypes(list))
	assert.Equal(t, int64(1), list[1].Version)

	// Unchanged: served from the cache, without reading the reactions.
	before := counted.queries.Load()
	_, err = runtime.Published(ctx, f.bot)
	require.NoError(t, err)
	assert.Equal(t, before, counted.queries.Load())

	// A draft edit publishes nothing: the published trigger stays, read from the version.
	trig := Trigger{Type: TriggerKeyword, Keywords: []string{"cost"}}
	_, err = f.svc.Update(ctx, f.bot, b.ID, 2, Patch{Trigger: &trig})
	require.NoError(t, err)
	fresh := NewService(f.store, f.vocab, f.clock.Now, slog.New(slog.DiscardHandler))
	list, err = fresh.Published(ctx, f.bot)
	require.NoError(t, err)
	assert.Equal(t, []string{"price"}, list[1].Trigger.Keywords, "the published version's trigger, not the draft's")

	// Publishing the edit is seen at once by the other process.
	_, err = f.svc.Publish(ctx, f.bot, b.ID, 3)
	require.NoError(t, err)
	list, err = runtime.Published(ctx, f.bot)
	require.NoError(t, err)
	assert.Equal(t, []string{"cost"}, list[1].Trigger.Keywords)
	assert.Equal(t, int64(2), list[1].Version)

	v, err := runtime.PublishedVersion(ctx, f.bot, b.ID, 2)
	require.NoError(t, err)
	assert.Equal(t, "b1", v.Steps[0].Text)

	// Deleting a published reaction removes it, and its versions stop being served.
	require.NoError(t, f.svc.Delete(ctx, f.bot, a.ID, nil))
	list, err = runtime.Published(ctx, f.bot)
	require.NoError(t, err)
	assert.Equal(t, []TriggerType{TriggerKeyword}, triggerTypes(list))
	_, err = runtime.PublishedVersion(ctx, f.bot, a.ID, 1)
	assert.Equal(t, 404, httpapitest.AsError(t, err).Status())
}

func TestImportThatPublishesMovesTheCounter(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	list, err := f.svc.Published(ctx, f.bot)
	require.NoError(t, err)
	require.Empty(t, list)

	pub := content(t, `{"name":"Imported","trigger":{"type":"button","payload":"go"},"steps":[{"id":"s","type":"send_text","text":"x"}]}`)
	b := Bundle{FormatVersion: 1, Reactions: []BundleReaction{{Key: "r", Draft: pub, Published: &pub}}}
	rep, err := f.svc.Import(ctx, f.bot, ImportCreate, b)
	require.NoError(t, err)
	require.True(t, rep.Applied)

	list, err = f.svc.Published(ctx, f.bot)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, "go", list[0].Trigger.Payload)
}
