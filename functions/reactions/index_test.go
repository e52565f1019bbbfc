package reactions

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// accountBots is a directory of accounts' bots.
type accountBots map[string][]string

func (a accountBots) Owns(_ context.Context, account, bot string) (bool, error) {
	return slices.Contains(a[account], bot), nil
}

func (a accountBots) BotIDs(_ context.Context, account string) ([]string, error) {
	return a[account], nil
}

func TestBotOf(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	other := ids.At("bot", t0.Add(5))
	dir := accountBots{"acct_a": {other, f.bot}, "acct_b": {ids.At("bot", t0.Add(9))}}
	r := f.create(t, `{"name":"R","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)

	bot, err := f.svc.BotOf(ctx, dir, "acct_a", r.ID)
	require.NoError(t, err)
	assert.Equal(t, f.bot, bot)

	// Another account, a malformed id, an unknown one: not found.
	for _, c := range []struct{ account, id string }{{"acct_b", r.ID}, {"acct_a", "rct_nope"}, {"acct_a", ids.At("rct", t0)}} {
		_, err := f.svc.BotOf(ctx, dir, c.account, c.id)
		assert.Equal(t, 404, httpapi.AsError(err).Status(), "%v", c)
	}

	// A reaction created before the index: found by scanning the account's bots, and the
	// entry written.
	require.NoError(t, f.store.Delete(ctx, indexKey(r.ID), store.Always))
	_, err = f.svc.BotOf(ctx, dir, "acct_b", r.ID)
	assert.Equal(t, 404, httpapi.AsError(err).Status(), "the scan stays within the account")
	bot, err = f.svc.BotOf(ctx, dir, "acct_a", r.ID)
	require.NoError(t, err)
	assert.Equal(t, f.bot, bot)
	_, err = f.store.Get(ctx, indexKey(r.ID))
	require.NoError(t, err, "the fallback wrote the entry")

	// Deleting the reaction deletes its entry.
	require.NoError(t, f.svc.Delete(ctx, f.bot, r.ID, nil))
	_, err = f.store.Get(ctx, indexKey(r.ID))
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = f.svc.BotOf(ctx, dir, "acct_a", r.ID)
	assert.Equal(t, 404, httpapi.AsError(err).Status())
}

func TestImportIndexesCreatedReactions(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	ctx := t.Context()
	src.create(t, `{"name":"R","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	b, err := src.svc.Export(ctx, src.bot, nil)
	require.NoError(t, err)

	dst := newFixture(t)
	rep, err := dst.svc.Import(ctx, dst.bot, ImportCreate, b)
	require.NoError(t, err)
	require.Len(t, rep.Reactions, 1)
	bot, err := dst.svc.BotOf(ctx, accountBots{"acct": {dst.bot}}, "acct", *rep.Reactions[0].ReactionID)
	require.NoError(t, err)
	assert.Equal(t, dst.bot, bot)
	_, err = dst.store.Get(ctx, indexKey(*rep.Reactions[0].ReactionID))
	require.NoError(t, err)
}

// Problems is what publishing refuses, without publishing.
func TestProblems(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	r := f.create(t, `{"name":"R","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	c := content(t, `{"name":"R","trigger":{"type":"api"},"steps":[{"id":"a","type":"add_label","label_id":"lbl_missing"}]}`)
	problems, err := f.svc.Problems(ctx, f.bot, r.ID, &c)
	require.NoError(t, err)
	require.Len(t, problems, 1)
	assert.Equal(t, "steps[0].label_id", problems[0].Field)

	c = content(t, `{"name":"R","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	problems, err = f.svc.Problems(ctx, f.bot, r.ID, &c)
	require.NoError(t, err)
	assert.Empty(t, problems)

	c = content(t, `{"name":"R","trigger":{"type":"api"},"steps":[{"id":"a","type":"send_text"}]}`)
	assert.NotEmpty(t, CheckShape(&c, r.ID))
}
