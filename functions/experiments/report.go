package experiments

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// MaxRangeDays bounds a report's range (400 range_too_long beyond).
const MaxRangeDays = 366

// Range is a report's time range, [From, To).
type Range struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// parseRange reads a range: both ends RFC 3339 (any offset, kept as UTC), to after from,
// at most MaxRangeDays apart.
func parseRange(from, to *string) (Range, error) {
	var p httpapi.Problems
	var r Range
	parse := func(field string, v *string) time.Time {
		if v == nil {
			p.Add(field, "is required: an RFC 3339 time")
			return time.Time{}
		}
		t, err := time.Parse(time.RFC3339, *v)
		if err != nil {
			p.Add(field, "must be an RFC 3339 time such as 2026-03-01T00:00:00Z")
		}
		return t.UTC()
	}
	r.From, r.To = parse("from", from), parse("to", to)
	if err := p.Err(); err != nil {
		return Range{}, err
	}
	if !r.To.After(r.From) {
		p.Add("to", "must be after from")
		return Range{}, p.Err()
	}
	if r.To.Sub(r.From) > MaxRangeDays*24*time.Hour {
		return Range{}, httpapi.RangeTooLong(r.To.Sub(r.From), MaxRangeDays)
	}
	return r, nil
}

// Amount is a sum of money in a currency's minor unit: an integer, never a float.
type Amount struct {
	Minor int64 `json:"minor"`
}

// Revenue is money per currency (ISO 4217 code → amount). Amounts in different currencies
// are never added together.
type Revenue map[string]Amount

// errOverflow is a sum beyond int64.
var errOverflow = fmt.Errorf("experiments: revenue sum overflows int64")

// Add adds minor units of currency, refusing a sum beyond int64 (nothing is added then).
func (r Revenue) Add(currency string, minor int64) error {
	cur := r[currency].Minor
	if minor > 0 && cur > math.MaxInt64-minor || minor < 0 && cur < math.MinInt64-minor {
		return errOverflow
	}
	r[currency] = Amount{Minor: cur + minor}
	return nil
}

// ReportRequest is a report's body: the range and the version (the current one when absent).
type ReportRequest struct {
	From    *string `json:"from"`
	To      *string `json:"to"`
	Version *int64  `json:"version"`
}

// Report is an experiment's results over a range, for one version.
type Report struct {
	ExperimentID     string          `json:"experiment_id"`
	Version          int64           `json:"version"`
	From             time.Time       `json:"from"`
	To               time.Time       `json:"to"`
	Goal             Goal            `json:"goal"`
	ControlVariantID string          `json:"control_variant_id"`
	Test             string          `json:"test"`
	ConfidenceLevel  float64         `json:"confidence_level"`
	MinimumSample    MinimumSample   `json:"minimum_sample"`
	Variants         []VariantReport `json:"variants"`
}

// MinimumSample is what a variant and the control each need for a p-value.
type MinimumSample struct {
	Exposed        int64 `json:"exposed"`
	Conversions    int64 `json:"conversions"`
	NonConversions int64 `json:"non_conversions"`
}

// VariantReport is one variant's results.
type VariantReport struct {
	VariantID string `json:"variant_id"`
	Name      string `json:"name"`
	Control   bool   `json:"control"`
	Weight    int    `json:"weight"`
	// Exposed counts the subscribers first exposed to the version in the range with this
	// variant; Converted those of them with a goal event after their exposure, in the range.
	Exposed        int64   `json:"exposed"`
	Converted      int64   `json:"converted"`
	ConversionRate float64 `json:"conversion_rate"`
	// Revenue sums the revenue of every goal event of the exposed subscribers after their
	// exposure, in the range, per currency.
	Revenue Revenue `json:"revenue"`
	// Significance compares the variant with the control; null for the control.
	Significance *Significance `json:"significance"`
}

// tally streams a version's exposures and goal events, keeping per subscriber only the
// variant they were exposed to and whether they converted.
type tally struct {
	experiment string
	version    int64
	def        Definition
	// subs maps an exposed subscriber to variant index << 1 | converted.
	subs      map[string]uint32
	exposed   []int64
	converted []int64
	revenue   []Revenue
}

func newTally(experiment string, v Version) *tally {
	n := len(v.Variants)
	t := &tally{experiment: experiment, version: v.Number, def: v.Definition, subs: map[string]uint32{},
		exposed: make([]int64, n), converted: make([]int64, n), revenue: make([]Revenue, n)}
	for i := range t.revenue {
		t.revenue[i] = Revenue{}
	}
	return t
}

// number reads a numeric property, whichever numeric type the log decoded it as.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// add takes the next event of the scan (in the log's order: time, then id).
func (t *tally) add(e eventlog.Event) error {
	if e.Name == ExposureEvent {
		if e.Properties["experiment_id"] != t.experiment {
			return nil
		}
		if n, ok := number(e.Properties["version"]); !ok || n != float64(t.version) {
			return nil
		}
		id, _ := e.Properties["variant_id"].(string)
		_, i := t.def.variant(id)
		if _, seen := t.subs[e.SubscriberID]; i < 0 || seen {
			return nil
		}
		t.subs[e.SubscriberID] = uint32(i) << 1
		t.exposed[i]++
		return nil
	}
	if e.Name != t.def.Goal.Event || !matches(t.def.Goal.Filters, e.Properties) {
		return nil
	}
	st, ok := t.subs[e.SubscriberID]
	if !ok {
		return nil // not exposed (yet): a conversion before the exposure is not the variant's
	}
	i := st >> 1
	if st&1 == 0 {
		t.subs[e.SubscriberID] = st | 1
		t.converted[i]++
	}
	if e.Revenue != nil {
		if err := t.revenue[i].Add(e.Revenue.Currency, e.Revenue.Minor); err != nil {
			return httpapi.Errorf(httpapi.KindUnprocessable, "revenue_overflow",
				"the %s revenue of variant %q does not fit in a 64-bit integer of minor units; report over a shorter range", e.Revenue.Currency, t.def.Variants[i].ID).
				With("currency", e.Revenue.Currency).With("variant_id", t.def.Variants[i].ID)
		}
	}
	return nil
}

// scan streams the range of the bot's log through a tally of version v.
func (s *Service) scan(ctx context.Context, bot, experiment string, v Version, r Range) (*tally, error) {
	t := newTally(experiment, v)
	q := eventlog.Query{BotID: bot, Names: []string{ExposureEvent, v.Goal.Event}, From: r.From, To: r.To}
	if err := s.events.Scan(ctx, q, t.add); err != nil {
		return nil, err
	}
	return t, nil
}

// reportVersion is the version a report or cohort is over: the one asked for (404 when the
// experiment has no such version), else the current one (409 experiment_not_started for a
// draft, which has none).
func (s *Service) reportVersion(ctx context.Context, bot string, e Experiment, n *int64) (Version, error) {
	if n != nil {
		return s.version(ctx, bot, e, *n)
	}
	if e.Version == 0 {
		return Version{}, httpapi.E(httpapi.KindConflict, "experiment_not_started", "a draft experiment has no results: start it first").
			With("state", e.Status)
	}
	return s.version(ctx, bot, e, e.Version)
}

// Report counts a version's exposures, conversions and revenue per variant over a range,
// and tests each variant against the control.
func (s *Service) Report(ctx context.Context, bot, id string, req ReportRequest) (Report, error) {
	r, err := parseRange(req.From, req.To)
	if err != nil {
		return Report{}, err
	}
	e, err := s.load(ctx, bot, id)
	if err != nil {
		return Report{}, err
	}
	v, err := s.reportVersion(ctx, bot, e, req.Version)
	if err != nil {
		return Report{}, err
	}
	t, err := s.scan(ctx, bot, e.ID, v, r)
	if err != nil {
		return Report{}, err
	}
	_, ci := v.variant(v.ControlVariantID)
	control := Proportion{X: t.converted[ci], N: t.exposed[ci]}
	out := Report{ExperimentID: e.ID, Version: v.Number, From: r.From, To: r.To, Goal: v.Goal, ControlVariantID: v.ControlVariantID,
		Test: TestName, ConfidenceLevel: ConfidenceLevel,
		MinimumSample: MinimumSample{Exposed: MinExposed, Conversions: MinConversions, NonConversions: MinConversions},
		Variants:      make([]VariantReport, 0, len(v.Variants))}
	for i, va := range v.Variants {
		p := Proportion{X: t.converted[i], N: t.exposed[i]}
		vr := VariantReport{VariantID: va.ID, Name: va.Name, Control: i == ci, Weight: va.Weight,
			Exposed: p.N, Converted: p.X, ConversionRate: p.rate(), Revenue: t.revenue[i]}
		if i != ci {
			sig := Compare(control, p)
			vr.Significance = &sig
		}
		out.Variants = append(out.Variants, vr)
	}
	return out, nil
}
