package reactions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// versionsStuck fails the deletion of versions while stuck is set, as a crash would.
type versionsStuck struct {
	store.Store
	stuck atomic.Bool
}

func (s *versionsStuck) Transact(ctx context.Context, writes []store.Write) error {
	if s.stuck.Load() && writes[0].Delete != nil && strings.HasPrefix(writes[0].Delete.SK, "V#") {
		return errors.New("the process died")
	}
	return s.Store.Transact(ctx, writes)
}

// fillReactions gives the fixture's bot reactions of every kind the family stores: drafts, published
// versions, the registry and publication counter, a deleted reaction (its versions gone),
// and a deleted reaction whose versions could not be deleted (its tombstone and versions).
func fillReactions(t *testing.T, f *fixture, stuck *versionsStuck) {
	t.Helper()
	ctx := t.Context()
	var last Reaction
	for i := range 12 {
		r := f.create(t, fmt.Sprintf(`{"name":"R%d","trigger":{"type":"api"},"steps":[{"id":"a","type":"send_text","text":"v1"}]}`, i))
		if i%3 != 0 {
			p, err := f.svc.Publish(ctx, f.bot, r.ID, 1)
			require.NoError(t, err)
			s := steps(t, `[{"id":"a","type":"send_text","text":"v2"}]`)
			u, err := f.svc.Update(ctx, f.bot, r.ID, p.Revision, Patch{Steps: &s})
			require.NoError(t, err)
			r, err = f.svc.Publish(ctx, f.bot, r.ID, u.Revision)
			require.NoError(t, err)
		}
		last = r
	}
	require.NoError(t, f.svc.Delete(ctx, f.bot, last.ID, nil))
	stuck.stuck.Store(true)
	gone := f.create(t, `{"name":"Gone","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	_, err := f.svc.Publish(ctx, f.bot, gone.ID, 1)
	require.NoError(t, err)
	require.NoError(t, f.svc.Delete(ctx, f.bot, gone.ID, nil), "the versions' failure is only logged")
	stuck.stuck.Store(false)
	_, err = f.store.Get(ctx, versionKey(f.bot, gone.ID, 1))
	require.NoError(t, err, "left behind, unreachable through the API")
}

func TestPurgeStepErasesEveryReaction(t *testing.T) {
	t.Parallel()
	c := newClock()
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	stuck := &versionsStuck{Store: raw}

	f := newFixtureOn(t, stuck, c)
	other := newFixtureOn(t, stuck, c)
	other.bot = ids.At("bot", t0.Add(1))
	fillReactions(t, f, stuck)
	fillReactions(t, other, stuck)
	before, err := raw.Mentioning(t.Context(), other.bot)
	require.NoError(t, err)
	mine, err := raw.Mentioning(t.Context(), f.bot)
	require.NoError(t, err)
	require.Greater(t, len(mine), 25)

	require.NoError(t, purge.Run(t.Context(), PurgeStep(raw), purge.Payload{AccountID: "acct_x", BotID: f.bot}))

	left, err := raw.Mentioning(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Empty(t, left, "nothing of the bot remains")
	after, err := raw.Mentioning(t.Context(), other.bot)
	require.NoError(t, err)
	assert.Equal(t, before, after, "another bot's reactions are untouched")
}

func TestDeleteRemovesTheTombstoneWithTheVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	r := f.create(t, `{"name":"R","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	_, err := f.svc.Publish(ctx, f.bot, r.ID, 1)
	require.NoError(t, err)
	require.NoError(t, f.svc.Delete(ctx, f.bot, r.ID, nil))
	_, err = f.store.Get(ctx, goneKey(f.bot, r.ID))
	assert.ErrorIs(t, err, store.ErrNotFound)
	page, err := f.store.Query(ctx, store.Query{PK: versionsPK(f.bot, r.ID)})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
}
