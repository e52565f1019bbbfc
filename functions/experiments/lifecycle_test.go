package experiments

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

// Every action from every status: the documented table (lifecycle.go, docs/experiments.md)
// and nothing else.
func TestLifecycleTable(t *testing.T) {
	t.Parallel()
	allowed := map[Action]map[Status]Status{
		ActionStart:    {Draft: Running},
		ActionPause:    {Running: Paused},
		ActionResume:   {Paused: Running},
		ActionComplete: {Running: Completed, Paused: Completed},
		ActionWinner:   {Running: Completed, Paused: Completed},
	}
	f := newFixture(t)
	ctx := t.Context()
	// reach makes an experiment in status s.
	reach := func(s Status) Experiment {
		e := f.create(t, f.definition())
		path := map[Status][]Action{Draft: nil, Running: {ActionStart}, Paused: {ActionStart, ActionPause}, Completed: {ActionStart, ActionComplete}}[s]
		for _, a := range path {
			var err error
			e, err = f.svc.Transition(ctx, f.bot, e.ID, e.Revision, a)
			require.NoError(t, err)
		}
		require.Equal(t, s, e.Status)
		return e
	}
	for action, table := range allowed {
		for _, s := range Statuses() {
			e := reach(s)
			var got Experiment
			var err error
			if action == ActionWinner {
				got, err = f.svc.Winner(ctx, f.bot, e.ID, e.Revision, "b")
			} else {
				got, err = f.svc.Transition(ctx, f.bot, e.ID, e.Revision, action)
			}
			want, ok := table[s]
			if !ok {
				he := httpapitest.AsError(t, err)
				assert.Equal(t, "invalid_transition", he.Code, "%s from %s", action, s)
				assert.Equal(t, s, he.Extensions["state"])
				continue
			}
			require.NoError(t, err, "%s from %s", action, s)
			assert.Equal(t, want, got.Status, "%s from %s", action, s)
			assert.Equal(t, e.Revision+1, got.Revision)
			stored, err := f.svc.Get(ctx, f.bot, e.ID)
			require.NoError(t, err)
			assert.Equal(t, got, stored)
		}
	}
	// Delete: draft and completed only.
	for _, s := range Statuses() {
		e := reach(s)
		err := f.svc.Delete(ctx, f.bot, e.ID, nil)
		if s == Draft || s == Completed {
			assert.NoError(t, err, s)
			continue
		}
		assert.Equal(t, "invalid_transition", httpapitest.AsError(t, err).Code, s)
	}
}

func TestTransitionsTakeTheRevision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	e := f.create(t, f.definition())
	_, err := f.svc.Transition(ctx, f.bot, e.ID, e.Revision+1, ActionStart)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "stale_revision", he.Code)
	assert.Equal(t, int64(1), he.Extensions["current_revision"])

	e, err = f.svc.Transition(ctx, f.bot, e.ID, e.Revision, ActionStart)
	require.NoError(t, err)
	assert.Equal(t, int64(1), e.Version, "starting freezes version 1")
	require.NotNil(t, e.StartedAt)
	assert.Equal(t, f.clock.Now(), *e.StartedAt)
	v, err := f.svc.Version(ctx, f.bot, e.ID, 1)
	require.NoError(t, err)
	assert.Equal(t, e.Definition, v.Definition)
	assert.Equal(t, e.Revision, v.Revision)

	// A stale revision is reported before the status: the client's view is old.
	_, err = f.svc.Transition(ctx, f.bot, e.ID, 1, ActionStart)
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)
}

// Winner: once, from running or paused; again is 409 winner_already_selected (with the
// current revision) or stale_revision (with the one read before); an unknown variant 422.
func TestWinner(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	e := f.running(t)
	_, err := f.svc.Winner(ctx, f.bot, e.ID, e.Revision, "zz")
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "unknown_variant", he.Code)
	assert.Equal(t, 422, he.Status())

	won, err := f.svc.Winner(ctx, f.bot, e.ID, e.Revision, "b")
	require.NoError(t, err)
	assert.Equal(t, Completed, won.Status)
	require.NotNil(t, won.WinnerVariantID)
	assert.Equal(t, "b", *won.WinnerVariantID)
	require.NotNil(t, won.CompletedAt)

	_, err = f.svc.Winner(ctx, f.bot, e.ID, won.Revision, "a")
	he = httpapitest.AsError(t, err)
	assert.Equal(t, "winner_already_selected", he.Code)
	assert.Equal(t, 409, he.Status())
	assert.Equal(t, "b", he.Extensions["winner_variant_id"])
	_, err = f.svc.Winner(ctx, f.bot, e.ID, e.Revision, "a")
	assert.Equal(t, "stale_revision", httpapitest.AsError(t, err).Code)

	draft := f.create(t, f.definition())
	_, err = f.svc.Winner(ctx, f.bot, draft.ID, draft.Revision, "a")
	assert.Equal(t, "invalid_transition", httpapitest.AsError(t, err).Code, "a draft has no results to choose from")
}

// Starting checks the subjects again: one deleted since the draft was written is a 422.
func TestStartChecksSubjects(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := f.create(t, f.definition())
	f.subjects.remove(f.popB)
	_, err := f.svc.Transition(t.Context(), f.bot, e.ID, e.Revision, ActionStart)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "unknown_subject", he.Code)
	assert.Equal(t, 422, he.Status())
	stored, err := f.svc.Get(t.Context(), f.bot, e.ID)
	require.NoError(t, err)
	assert.Equal(t, Draft, stored.Status, "nothing changed")

	f.subjects.err = errBoom
	_, err = f.svc.Transition(t.Context(), f.bot, e.ID, e.Revision, ActionStart)
	assert.ErrorIs(t, err, errBoom)
}
