package experiments

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

// The bucket is the documented hash, so that anyone can recompute an assignment: the
// values were computed with Python's hashlib.
func TestBucketIsTheDocumentedHash(t *testing.T) {
	t.Parallel()
	assert.Equal(t, 1025, bucket("exp_1", "salt1", "sub_1"))
	assert.Equal(t, 7734, bucket("exp_01abc", "s", "sub_x"))
}

func variantsOf(weights ...int) []Variant {
	out := make([]Variant, len(weights))
	for i, w := range weights {
		out[i] = Variant{ID: fmt.Sprintf("v%d", i), Weight: w}
	}
	return out
}

func TestPickBoundaries(t *testing.T) {
	t.Parallel()
	v := variantsOf(1, 0, 3)
	assert.Equal(t, 0, pick(v, 0))
	assert.Equal(t, 0, pick(v, 2499))
	assert.Equal(t, 2, pick(v, 2500), "a weight of 0 holds no bucket")
	assert.Equal(t, 2, pick(v, Buckets-1))
	assert.Equal(t, 1, pick(variantsOf(0, 5), 0))
}

// Over 100,000 subscribers the shares are the weights' within a tolerance far wider than
// the sampling error (the largest standard error here is 0.0015), the same subscriber
// always gets the same variant, and another salt reshuffles them.
func TestAssignDistributionAndDeterminism(t *testing.T) {
	t.Parallel()
	const n = 100_000
	d := Definition{Variants: variantsOf(1, 2, 7, 0), Salt: "s1"}
	counts := make([]int, len(d.Variants))
	moved := 0
	for i := range n {
		sub := fmt.Sprintf("sub_%026d", i)
		v := Assign("exp_x", d, sub)
		require.Equal(t, v, Assign("exp_x", d, sub), "the same subscriber, the same variant")
		_, idx := d.variant(v.ID)
		counts[idx]++
		if Assign("exp_x", Definition{Variants: d.Variants, Salt: "s2"}, sub).ID != v.ID {
			moved++
		}
	}
	for i, want := range []float64{0.1, 0.2, 0.7, 0} {
		assert.InDelta(t, want, float64(counts[i])/n, 0.01, "variant %d: %d of %d", i, counts[i], n)
	}
	// With shares .1/.2/.7 an independent reshuffle keeps 1 - (.01+.04+.49) = 54% in place.
	assert.InDelta(t, 0.46, float64(moved)/n, 0.02, "a new salt reshuffles")
}

// Raising one weight moves only the subscribers whose buckets change hands: from 50/50 to
// 50/60, a tenth of the buckets move from a to b, and no subscriber of b moves to a.
func TestAssignWeightChangeMovesFew(t *testing.T) {
	t.Parallel()
	before := Definition{Variants: variantsOf(50, 50), Salt: "s"}
	after := Definition{Variants: variantsOf(50, 60), Salt: "s"}
	moved := 0
	const n = 20_000
	for i := range n {
		sub := fmt.Sprintf("sub_%d", i)
		a, b := Assign("exp_x", before, sub), Assign("exp_x", after, sub)
		if a.ID != b.ID {
			moved++
			assert.Equal(t, "v0", a.ID)
		}
	}
	// Boundary from 5000 to 4545: 455 of 10000 buckets.
	assert.InDelta(t, 0.0455, float64(moved)/n, 0.01)
}

func TestAssignRecordsTheExposureOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := f.running(t)
	sub := f.subscriber(1)
	a, err := f.svc.Assign(t.Context(), f.bot, e.ID, sub)
	require.NoError(t, err)
	assert.True(t, a.FirstExposure)
	assert.Equal(t, int64(1), a.Version)
	assert.Equal(t, Assign(e.ID, e.Definition, sub).ID, a.VariantID)
	again, err := f.svc.Assign(t.Context(), f.bot, e.ID, sub)
	require.NoError(t, err)
	assert.False(t, again.FirstExposure)
	assert.Equal(t, a.VariantID, again.VariantID)

	var got []eventlog.Event
	require.NoError(t, f.events.Scan(t.Context(), eventlog.Query{BotID: f.bot, From: t0.Add(-1), To: t0.AddDate(1, 0, 0)}, func(e eventlog.Event) error {
		got = append(got, e)
		return nil
	}))
	require.Len(t, got, 1, "recorded once")
	assert.Equal(t, ExposureEvent, got[0].Name)
	assert.Equal(t, "telegram", got[0].Channel)
	assert.Equal(t, sub, got[0].SubscriberID)
	assert.Equal(t, map[string]any{"experiment_id": e.ID, "variant_id": a.VariantID, "version": float64(1)}, got[0].Properties)
}

func TestAssignRefusals(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	draft := f.create(t, f.definition())
	sub := f.subscriber(1)
	_, err := f.svc.Assign(t.Context(), f.bot, draft.ID, sub)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "experiment_not_running", he.Code)
	assert.Equal(t, Draft, he.Extensions["state"])

	e := f.running(t)
	_, err = f.svc.Assign(t.Context(), f.bot, e.ID, "sub_00000000000000000000000000")
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "a subscriber the bot lacks")
	_, err = f.svc.Assign(t.Context(), f.bot, "exp_nope", sub)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	e, err = f.svc.Transition(t.Context(), f.bot, e.ID, e.Revision, ActionPause)
	require.NoError(t, err)
	_, err = f.svc.Assign(t.Context(), f.bot, e.ID, sub)
	assert.Equal(t, "experiment_not_running", httpapitest.AsError(t, err).Code)
}
