package experiments

import (
	"math"
)

// The significance test of reports: a two-sided, pooled two-proportion z-test of each
// variant's conversion rate against the control's, at a 95% confidence level. The normal
// approximation it rests on needs enough of both outcomes, so a comparison is only tested
// when the variant and the control each have at least MinExposed exposed subscribers, and
// at least MinConversions converted and MinConversions not converted; below that it says
// insufficient_sample and gives no p-value.
const (
	TestName        = "two_proportion_z_test"
	ConfidenceLevel = 0.95
	MinExposed      = 100
	MinConversions  = 5
)

// zCritical is the two-sided critical value of the standard normal at ConfidenceLevel:
// Φ⁻¹(0.975).
const zCritical = 1.959963984540054

// The outcomes of a comparison.
const (
	Significant        = "significant"
	NotSignificant     = "not_significant"
	InsufficientSample = "insufficient_sample"
)

// Significance is a variant's comparison with the control.
type Significance struct {
	// Status is significant (p < 1 - ConfidenceLevel), not_significant or insufficient_sample.
	Status string `json:"status"`
	// Z and PValue are the test's statistic and two-sided p-value; null below the minimum
	// sample.
	Z      *float64 `json:"z"`
	PValue *float64 `json:"p_value"`
	// Difference is the variant's conversion rate minus the control's, and
	// ConfidenceInterval its 95% interval (unpooled standard error); null below the minimum
	// sample.
	Difference         float64    `json:"difference"`
	ConfidenceInterval *[]float64 `json:"confidence_interval"`
	// Lift is Difference relative to the control's rate; null when the control converted no one.
	Lift *float64 `json:"lift"`
}

// Proportion is a count of successes out of trials.
type Proportion struct{ X, N int64 }

func (p Proportion) rate() float64 {
	if p.N == 0 {
		return 0
	}
	return float64(p.X) / float64(p.N)
}

// enough reports whether p may take part in the test.
func (p Proportion) enough() bool {
	return p.N >= MinExposed && p.X >= MinConversions && p.N-p.X >= MinConversions
}

// ZTest is the pooled two-proportion z statistic of b against a and its two-sided p-value:
// z = (p_b − p_a) / √(p̂(1−p̂)(1/n_a + 1/n_b)) with p̂ = (x_a + x_b)/(n_a + n_b), and
// p = 2(1 − Φ(|z|)) = erfc(|z|/√2). ok is false when the test is undefined: no trials on a
// side, or every trial (or none) a success on both, which leaves no variance.
func ZTest(a, b Proportion) (z, p float64, ok bool) {
	if a.N <= 0 || b.N <= 0 {
		return 0, 0, false
	}
	pooled := float64(a.X+b.X) / float64(a.N+b.N)
	se := math.Sqrt(pooled * (1 - pooled) * (1/float64(a.N) + 1/float64(b.N)))
	if se == 0 || math.IsNaN(se) {
		return 0, 0, false
	}
	z = (b.rate() - a.rate()) / se
	return z, math.Erfc(math.Abs(z) / math.Sqrt2), true
}

// Compare is variant's Significance against control.
func Compare(control, variant Proportion) Significance {
	diff := variant.rate() - control.rate()
	s := Significance{Status: InsufficientSample, Difference: diff}
	if control.X > 0 {
		lift := diff / control.rate()
		s.Lift = &lift
	}
	if !control.enough() || !variant.enough() {
		return s
	}
	z, p, ok := ZTest(control, variant)
	if !ok {
		return s
	}
	s.Z, s.PValue = &z, &p
	s.Status = NotSignificant
	if p < 1-ConfidenceLevel {
		s.Status = Significant
	}
	pc, pv := control.rate(), variant.rate()
	se := math.Sqrt(pc*(1-pc)/float64(control.N) + pv*(1-pv)/float64(variant.N))
	ci := []float64{diff - zCritical*se, diff + zCritical*se}
	s.ConfidenceInterval = &ci
	return s
}
