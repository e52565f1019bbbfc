package subscribers

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// countingStore counts the queries of one partition.
type countingStore struct {
	store.Store
	pk      string
	queries atomic.Int64
}

func (c *countingStore) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if q.PK == c.pk {
		c.queries.Add(1)
	}
	return c.Store.Query(ctx, q)
}

// A Reader's GetMany answers what Get answers for each id (values of a deleted field
// hidden) and leaves out the ids that name no subscriber of the bot.
func TestReaderGetMany(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.field(t, "email", TypeString)
	old := f.field(t, "old", TypeString)
	lbl := f.label(t, "vip")
	var want []Subscriber
	for i, ext := range []string{"1", "2", "3", "4"} {
		sub, _, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, ext, Changes{FirstName: ptr("P" + ext),
			Fields: map[string]any{"email": "p" + ext + "@mail.example", "old": "x"}, AddLabels: []string{lbl.ID}})
		require.NoError(t, err)
		if i == 3 {
			require.NoError(t, f.svc.Delete(t.Context(), f.bot, sub.ID, nil))
			continue
		}
		want = append(want, sub)
	}
	plain := f.subscriber(t, "5", "No", "Fields")
	want = append(want, plain)
	require.NoError(t, f.svc.DeleteField(t.Context(), f.bot, old.ID)) // its values are no longer shown

	asked := []string{ids.At("sub", t0), "not-an-id"} // never created; malformed
	for _, s := range want {
		asked = append(asked, s.ID)
	}
	gone := f.partition(t, botPrefix(f.bot)+"#GONE")
	require.Len(t, gone, 1)
	asked = append(asked, gone[0]) // erased

	r, err := f.svc.Reader(t.Context(), f.bot)
	require.NoError(t, err)
	got, err := r.GetMany(t.Context(), asked)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for _, s := range want {
		one, err := f.svc.Get(t.Context(), f.bot, s.ID)
		require.NoError(t, err)
		assert.Equal(t, one, got[s.ID])
		assert.NotContains(t, got[s.ID].Fields, "old")
	}
	assert.Equal(t, "p1@mail.example", got[want[0].ID].Fields["email"])

	other, err := f.svc.Reader(t.Context(), "bot_other")
	require.NoError(t, err)
	none, err := other.GetMany(t.Context(), asked)
	require.NoError(t, err)
	assert.Empty(t, none, "another bot's subscribers are not found")
	empty, err := r.GetMany(t.Context(), nil)
	require.NoError(t, err)
	assert.Empty(t, empty)
}

// A Reader reads the field catalog once, when it is made, and then only subscribers; it
// answers what Get answers.
func TestReader(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	f.field(t, "email", TypeString)
	var subs []string
	for _, ext := range []string{"1", "2", "3"} {
		sub, _, err := f.svc.Upsert(t.Context(), f.bot, ChannelTelegram, ext, Changes{Fields: map[string]any{"email": "p" + ext + "@mail.example"}})
		require.NoError(t, err)
		subs = append(subs, sub.ID)
	}
	cs := &countingStore{Store: f.store, pk: fieldsPartition(f.bot)}
	r, err := NewService(cs, f.clock.Now, nil).Reader(t.Context(), f.bot)
	require.NoError(t, err)
	for range 3 {
		got, err := r.GetMany(t.Context(), append([]string{"sub_gone"}, subs...))
		require.NoError(t, err)
		require.Len(t, got, 3)
		for _, id := range subs {
			one, err := f.svc.Get(t.Context(), f.bot, id)
			require.NoError(t, err)
			assert.Equal(t, one, got[id])
		}
	}
	assert.Equal(t, int64(1), cs.queries.Load(), "the field catalog is read once, by Reader")
}
