package auth

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFeatures(t *testing.T) {
	t.Parallel()
	got, err := ParseFeatures(" popups,broadcasts,,popups ", PlanFeatures)
	require.NoError(t, err)
	assert.Equal(t, []Feature{FeatureBroadcasts, FeaturePopups}, got, "trimmed, deduplicated, sorted")

	got, err = ParseFeatures("", PlanFeatures)
	require.NoError(t, err)
	assert.Empty(t, got, "an empty list is a plan without features")
	assert.NotNil(t, got, "and not the standard plan")

	_, err = ParseFeatures("copilot", PlanFeatures)
	require.ErrorIs(t, err, ErrInvalidRequest, "a rollout feature is not a plan feature")
	assert.Contains(t, err.Error(), "broadcasts", "the error lists the catalog")
}

func TestEntitlementsDefaults(t *testing.T) {
	t.Parallel()
	var e Entitlements
	for _, f := range PlanFeatures {
		assert.True(t, e.InPlan(f), "the standard plan has %s", f)
	}
	for _, f := range RolloutFeatures {
		assert.False(t, e.Enabled(f), "rollout feature %s is off until enabled", f)
	}
	assert.False(t, e.PaidBroadcasts("bot_1"))
	e.Plan = []Feature{}
	assert.False(t, e.InPlan(FeatureBroadcasts), "an explicit empty plan has nothing")
}

// An entitlement change reaches a token in use once its cache entry lapses.
func TestEntitlementsReachPrincipal(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	_, tok := f.pat(t)
	p, err := f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.True(t, p.Entitlements.InPlan(FeaturePopups))

	_, err = f.svc.SetPlan(ctx, f.acct.ID, []Feature{FeatureBroadcasts})
	require.NoError(t, err)
	_, err = f.svc.SetRollout(ctx, f.acct.ID, []Feature{RolloutCopilot, RolloutReplay}, nil)
	require.NoError(t, err)
	acct, err := f.svc.SetRollout(ctx, f.acct.ID, nil, []Feature{RolloutReplay})
	require.NoError(t, err)
	assert.Equal(t, []Feature{RolloutCopilot}, acct.Entitlements.Rollout)
	_, err = f.svc.SetPaidBroadcasts(ctx, f.acct.ID, "bot_b", true)
	require.NoError(t, err)

	f.clock.Advance(CacheTTL)
	p, err = f.svc.Authenticate(ctx, bearer(tok))
	require.NoError(t, err)
	assert.False(t, p.Entitlements.InPlan(FeaturePopups))
	assert.True(t, p.Entitlements.InPlan(FeatureBroadcasts))
	assert.True(t, p.Entitlements.Enabled(RolloutCopilot))
	assert.False(t, p.Entitlements.Enabled(RolloutReplay))
	assert.True(t, p.Entitlements.PaidBroadcasts("bot_b"))

	_, err = f.svc.SetPaidBroadcasts(ctx, f.acct.ID, "bot_b", false)
	require.NoError(t, err)
	_, err = f.svc.SetPlan(ctx, "acct_missing", nil)
	assert.ErrorIs(t, err, ErrNotFound)
}
