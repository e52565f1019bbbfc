package experiments

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The reference values were computed independently at 40 significant digits (mpmath:
// erfc, erfinv), from the same formulas: pooled z, two-sided p, unpooled 95% interval.
func TestZTestKnownValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		control, variant   Proportion
		z, p, diff, lo, hi float64
		lift               float64
		status             string
	}{
		{Proportion{200, 1000}, Proportion{250, 1000}, 2.677397763008329543, 0.0074196492610256749006, 0.05, 0.013463621687539844906, 0.086536378312460155094, 0.25, Significant},
		{Proportion{50, 1000}, Proportion{52, 1000}, 0.20328100706668628165, 0.83891539977015826035, 0.002, -0.017283097469232182882, 0.021283097469232182882, 0.04, NotSignificant},
		{Proportion{30, 120}, Proportion{10, 130}, -3.7293386857413517796, 0.00019198296495668049757, -0.17307692307692307692, -0.26307959952209858439, -0.083074246631747569458, -0.69230769230769230769, Significant},
		{Proportion{1000, 10000}, Proportion{1100, 10000}, 2.3066347738170117331, 0.021075189273797753813, 0.01, 0.0015040591315121179948, 0.018495940868487882005, 0.1, Significant},
	}
	for _, tc := range tests {
		z, p, ok := ZTest(tc.control, tc.variant)
		require.True(t, ok)
		assert.InDelta(t, tc.z, z, 1e-12, "z of %v", tc)
		assert.InEpsilon(t, tc.p, p, 1e-10, "p of %v", tc)

		s := Compare(tc.control, tc.variant)
		assert.Equal(t, tc.status, s.Status)
		require.NotNil(t, s.Z)
		require.NotNil(t, s.PValue)
		require.NotNil(t, s.ConfidenceInterval)
		require.NotNil(t, s.Lift)
		assert.InDelta(t, tc.z, *s.Z, 1e-12)
		assert.InEpsilon(t, tc.p, *s.PValue, 1e-10)
		assert.InDelta(t, tc.diff, s.Difference, 1e-15)
		assert.InDelta(t, tc.lo, (*s.ConfidenceInterval)[0], 1e-12)
		assert.InDelta(t, tc.hi, (*s.ConfidenceInterval)[1], 1e-12)
		assert.InDelta(t, tc.lift, *s.Lift, 1e-12)
	}
	assert.InDelta(t, 1.9599639845400542355, zCritical, 1e-15, "Φ⁻¹(0.975)")
}

// Below the minimum sample there is no p-value; the rates and the lift are still there.
func TestCompareMinimumSample(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		control, variant Proportion
		status           string
	}{
		{"enough", Proportion{5, 100}, Proportion{10, 100}, NotSignificant},
		{"control exposed 99", Proportion{5, 99}, Proportion{10, 100}, InsufficientSample},
		{"variant exposed 99", Proportion{5, 100}, Proportion{10, 99}, InsufficientSample},
		{"4 conversions", Proportion{4, 100}, Proportion{10, 100}, InsufficientSample},
		{"4 non-conversions", Proportion{5, 100}, Proportion{96, 100}, InsufficientSample},
		{"nothing at all", Proportion{0, 0}, Proportion{0, 0}, InsufficientSample},
	}
	for _, tc := range tests {
		s := Compare(tc.control, tc.variant)
		assert.Equal(t, tc.status, s.Status, tc.name)
		if tc.status == InsufficientSample {
			assert.Nil(t, s.PValue, tc.name)
			assert.Nil(t, s.Z, tc.name)
			assert.Nil(t, s.ConfidenceInterval, tc.name)
		} else {
			assert.NotNil(t, s.PValue, tc.name)
		}
	}
	s := Compare(Proportion{4, 100}, Proportion{10, 100})
	require.NotNil(t, s.Lift)
	assert.InDelta(t, 1.5, *s.Lift, 1e-12)
	assert.InDelta(t, 0.06, s.Difference, 1e-15)
	assert.Nil(t, Compare(Proportion{0, 100}, Proportion{3, 100}).Lift, "no lift over a control that converted no one")
}

// The test is undefined without variance or without trials: ok is false, never NaN.
func TestZTestUndefined(t *testing.T) {
	t.Parallel()
	for _, c := range [][2]Proportion{{{0, 0}, {1, 10}}, {{0, 100}, {0, 100}}, {{100, 100}, {50, 50}}} {
		z, p, ok := ZTest(c[0], c[1])
		assert.False(t, ok, "%v", c)
		assert.False(t, math.IsNaN(z) || math.IsNaN(p))
	}
}
