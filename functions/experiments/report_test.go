package experiments

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
)

func TestRevenueSumsPerCurrency(t *testing.T) {
	t.Parallel()
	r := Revenue{}
	require.NoError(t, r.Add("USD", 1999))
	require.NoError(t, r.Add("EUR", 500))
	require.NoError(t, r.Add("USD", 1))
	require.NoError(t, r.Add("JPY", -300), "refunds subtract")
	assert.Equal(t, Revenue{"USD": {2000}, "EUR": {500}, "JPY": {-300}}, r)

	big := Revenue{"USD": {math.MaxInt64 - 10}}
	require.NoError(t, big.Add("USD", 10))
	assert.ErrorIs(t, big.Add("USD", 1), errOverflow, "beyond int64 is refused")
	assert.Equal(t, int64(math.MaxInt64), big["USD"].Minor, "and nothing is added")
	low := Revenue{"USD": {math.MinInt64 + 1}}
	assert.ErrorIs(t, low.Add("USD", -2), errOverflow)
	require.NoError(t, low.Add("EUR", math.MaxInt64), "currencies never mix")
}

// The overflow of a report's sum is a 422 naming the currency and the variant.
func TestTallyOverflow(t *testing.T) {
	t.Parallel()
	def := Definition{Variants: []Variant{{ID: "a", Weight: 1}, {ID: "b", Weight: 1}}, ControlVariantID: "a", Goal: Goal{Event: "purchase"}}
	tl := newTally("exp_1", Version{Number: 1, Definition: def})
	require.NoError(t, tl.add(eventlog.Event{Name: ExposureEvent, SubscriberID: "s1", Properties: map[string]any{"experiment_id": "exp_1", "version": 1.0, "variant_id": "b"}}))
	tl.revenue[1]["USD"] = Amount{Minor: math.MaxInt64}
	err := tl.add(eventlog.Event{Name: "purchase", SubscriberID: "s1", Revenue: &eventlog.Revenue{Minor: 1, Currency: "USD"}})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "revenue_overflow", he.Code)
	assert.Equal(t, 422, he.Status())
	assert.Equal(t, "USD", he.Extensions["currency"])
	assert.Equal(t, "b", he.Extensions["variant_id"])
}

// A known data set, counted exactly: conversions after the exposure only, each subscriber
// converted once however many goal events, revenue summed per currency over every goal
// event after the exposure, filters applied, other experiments, versions and the range's
// outside ignored.
func TestReportCountsExactly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	in := f.definition()
	in.Goal = &Goal{Event: "purchase", Filters: []Filter{{Property: "plan", Op: OpNeq, Value: "free"}}}
	e := f.create(t, in)
	e, err := f.svc.Transition(ctx, f.bot, e.ID, e.Revision, ActionStart)
	require.NoError(t, err)
	other := f.running(t)
	from := f.clock.Now()

	// Subscribers 1..12, each assigned once (twice for a few: still one exposure).
	variant := map[string]string{}
	var subs []string
	for i := 1; i <= 12; i++ {
		sub := f.subscriber(i)
		subs = append(subs, sub)
		if i == 3 {
			f.goal(t, sub, "purchase", &eventlog.Revenue{Minor: 999, Currency: "USD"}, nil) // before the exposure
		}
		f.clock.Advance(time.Second)
		a, err := f.svc.Assign(ctx, f.bot, e.ID, sub)
		require.NoError(t, err)
		variant[sub] = a.VariantID
		if i%4 == 0 {
			again, err := f.svc.Assign(ctx, f.bot, e.ID, sub)
			require.NoError(t, err)
			require.Equal(t, a.VariantID, again.VariantID)
		}
		_, err = f.svc.Assign(ctx, f.bot, other.ID, sub) // another experiment's exposure
		require.NoError(t, err)
	}
	f.clock.Advance(time.Second)
	type want struct {
		converted map[string]bool
		revenue   Revenue
	}
	wants := map[string]*want{"a": {map[string]bool{}, Revenue{}}, "b": {map[string]bool{}, Revenue{}}}
	buy := func(sub string, minor int64, currency string, props map[string]any) {
		f.goal(t, sub, "purchase", &eventlog.Revenue{Minor: minor, Currency: currency}, props)
		if props["plan"] == "free" {
			return
		}
		w := wants[variant[sub]]
		w.converted[sub] = true
		require.NoError(t, w.revenue.Add(currency, minor))
	}
	buy(subs[0], 1000, "USD", nil)
	buy(subs[0], 250, "EUR", map[string]any{"plan": "pro"})
	buy(subs[1], 1999, "USD", nil)
	buy(subs[2], 500, "USD", map[string]any{"plan": "free"}) // filtered out
	buy(subs[4], 700, "JPY", nil)
	buy(subs[5], 1, "USD", nil)
	buy(subs[5], 2, "USD", nil)
	f.goal(t, subs[6], "signup", nil, nil)                                                     // not the goal
	f.goal(t, f.subscriber(99), "purchase", &eventlog.Revenue{Minor: 5, Currency: "USD"}, nil) // never exposed
	to := f.clock.Now().Add(time.Second)
	f.clock.Advance(time.Hour)
	buy2 := f.clock.Now()
	f.goal(t, subs[7], "purchase", &eventlog.Revenue{Minor: 5, Currency: "USD"}, nil) // after the range

	rep, err := f.svc.Report(ctx, f.bot, e.ID, ReportRequest{From: ptr(from.Format(time.RFC3339)), To: ptr(to.Format(time.RFC3339))})
	require.NoError(t, err)
	assert.Equal(t, e.ID, rep.ExperimentID)
	assert.Equal(t, int64(1), rep.Version)
	assert.Equal(t, "a", rep.ControlVariantID)
	assert.Equal(t, TestName, rep.Test)
	require.Len(t, rep.Variants, 2)
	exposed := map[string]int64{}
	for _, v := range variant {
		exposed[v]++
	}
	for _, vr := range rep.Variants {
		w := wants[vr.VariantID]
		assert.Equal(t, exposed[vr.VariantID], vr.Exposed, vr.VariantID)
		assert.Equal(t, int64(len(w.converted)), vr.Converted, vr.VariantID)
		assert.Equal(t, w.revenue, vr.Revenue, vr.VariantID)
		if vr.Exposed > 0 {
			assert.InDelta(t, float64(vr.Converted)/float64(vr.Exposed), vr.ConversionRate, 1e-15)
		}
		assert.Equal(t, vr.VariantID == "a", vr.Control)
		if vr.Control {
			assert.Nil(t, vr.Significance)
		} else {
			require.NotNil(t, vr.Significance)
			assert.Equal(t, InsufficientSample, vr.Significance.Status, "12 subscribers are far below the minimum")
			assert.Nil(t, vr.Significance.PValue)
		}
	}
	var total int64
	for _, vr := range rep.Variants {
		total += vr.Exposed
	}
	assert.Equal(t, int64(12), total)

	// The range bounds the exposures too: from after every exposure counts no one.
	rep, err = f.svc.Report(ctx, f.bot, e.ID, ReportRequest{From: ptr(to.Format(time.RFC3339)), To: ptr(buy2.Add(time.Second).Format(time.RFC3339))})
	require.NoError(t, err)
	for _, vr := range rep.Variants {
		assert.Zero(t, vr.Exposed)
		assert.Zero(t, vr.Converted)
		assert.Equal(t, Revenue{}, vr.Revenue)
	}
}

// Versions are reported apart: exposures of version 1 are not version 2's.
func TestReportVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	e := f.running(t)
	from := f.clock.Now()
	sub := f.subscriber(1)
	_, err := f.svc.Assign(ctx, f.bot, e.ID, sub)
	require.NoError(t, err)
	e, err = f.svc.Update(ctx, f.bot, e.ID, e.Revision, Patch{Salt: ptr("new-salt")})
	require.NoError(t, err)
	require.Equal(t, int64(2), e.Version)
	f.clock.Advance(time.Second)
	a, err := f.svc.Assign(ctx, f.bot, e.ID, sub)
	require.NoError(t, err)
	assert.True(t, a.FirstExposure, "a new version exposes again")
	assert.Equal(t, int64(2), a.Version)
	f.subscriber(2)
	_, err = f.svc.Assign(ctx, f.bot, e.ID, f.subscriber(2))
	require.NoError(t, err)
	f.clock.Advance(time.Second)
	r := ReportRequest{From: ptr(from.Format(time.RFC3339)), To: ptr(f.clock.Now().Add(time.Second).Format(time.RFC3339))}

	sum := func(rep Report) (n int64) {
		for _, v := range rep.Variants {
			n += v.Exposed
		}
		return n
	}
	rep, err := f.svc.Report(ctx, f.bot, e.ID, r)
	require.NoError(t, err)
	assert.Equal(t, int64(2), rep.Version, "the current version by default")
	assert.Equal(t, int64(2), sum(rep))
	r.Version = ptr(int64(1))
	rep, err = f.svc.Report(ctx, f.bot, e.ID, r)
	require.NoError(t, err)
	assert.Equal(t, int64(1), rep.Version)
	assert.Equal(t, int64(1), sum(rep))

	for _, n := range []int64{0, 3, 99} {
		r.Version = ptr(n)
		_, err = f.svc.Report(ctx, f.bot, e.ID, r)
		assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "version %d", n)
	}
	draft := f.create(t, f.definition())
	r.Version = nil
	_, err = f.svc.Report(ctx, f.bot, draft.ID, r)
	assert.Equal(t, "experiment_not_started", httpapitest.AsError(t, err).Code)
	r.Version = ptr(int64(1))
	_, err = f.svc.Report(ctx, f.bot, draft.ID, r)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "a draft has no version 1")
}

// Enough subscribers for a test: the report's significance is the statistics of its counts.
func TestReportSignificance(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	e := f.running(t)
	from := f.clock.Now()
	var events []eventlog.Event
	counts := map[string]*Proportion{"a": {}, "b": {}}
	for i := range 600 {
		sub := f.subscriber(i)
		a, err := f.svc.Assign(ctx, f.bot, e.ID, sub)
		require.NoError(t, err)
		p := counts[a.VariantID]
		p.N++
		// b converts every third subscriber, a every sixth.
		if a.VariantID == "b" && i%3 == 0 || a.VariantID == "a" && i%6 == 0 {
			p.X++
			events = append(events, eventlog.Event{ID: ids.New("evt"), BotID: f.bot, SubscriberID: sub, Name: "purchase",
				At: f.clock.Now().Add(time.Second), Source: eventlog.SourceCustom})
		}
	}
	for len(events) > 0 {
		n := min(len(events), eventlog.MaxEventsPerAppend)
		_, err := f.events.Append(ctx, events[:n]...)
		require.NoError(t, err)
		events = events[n:]
	}
	rep, err := f.svc.Report(ctx, f.bot, e.ID, ReportRequest{From: ptr(from.Format(time.RFC3339)), To: ptr(from.Add(time.Hour).Format(time.RFC3339))})
	require.NoError(t, err)
	b := rep.Variants[1]
	assert.Equal(t, counts["b"].N, b.Exposed)
	assert.Equal(t, counts["b"].X, b.Converted)
	assert.Equal(t, Compare(*counts["a"], *counts["b"]), *b.Significance)
	assert.Equal(t, Significant, b.Significance.Status, "1/3 against 1/6 over 300 each")
}

func TestReportRange(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e := f.running(t)
	tests := []struct {
		name     string
		from, to *string
		code     string
		fields   []string
	}{
		{"missing", nil, nil, "validation_failed", []string{"from", "to"}},
		{"not RFC 3339", ptr("2026-03-01"), ptr("yesterday"), "validation_failed", []string{"from", "to"}},
		{"to before from", ptr("2026-03-02T00:00:00Z"), ptr("2026-03-01T00:00:00Z"), "validation_failed", []string{"to"}},
		{"empty", ptr("2026-03-01T00:00:00Z"), ptr("2026-03-01T00:00:00Z"), "validation_failed", []string{"to"}},
		{"367 days", ptr("2025-03-01T00:00:00Z"), ptr("2026-03-03T00:00:00Z"), "range_too_long", nil},
		{"366 days and a second", ptr("2025-03-01T00:00:00Z"), ptr("2026-03-02T00:00:01Z"), "range_too_long", nil},
		{"366 days", ptr("2025-03-01T00:00:00Z"), ptr("2026-03-02T00:00:00Z"), "", nil},
		{"offsets are kept as UTC", ptr("2025-03-01T02:00:00+02:00"), ptr("2026-03-02T02:00:00+02:00"), "", nil},
	}
	for _, tc := range tests {
		rep, err := f.svc.Report(t.Context(), f.bot, e.ID, ReportRequest{From: tc.from, To: tc.to})
		if tc.code == "" {
			require.NoError(t, err, tc.name)
			assert.Equal(t, time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), rep.From, tc.name)
			continue
		}
		he := httpapitest.AsError(t, err)
		assert.Equal(t, tc.code, he.Code, tc.name)
		assert.Equal(t, 400, he.Status(), tc.name)
		if tc.fields != nil {
			assert.Equal(t, tc.fields, httpapitest.InvalidFields(t, err), tc.name)
		}
	}
}

// A cohort is the report's subscribers of one variant who did (or did not) convert, saved
// with the version it was computed over.
func TestSaveCohort(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	e := f.running(t)
	from := f.clock.Now()
	byVariant := map[string][]string{}
	converted := map[string]bool{}
	for i := range 20 {
		sub := f.subscriber(i)
		a, err := f.svc.Assign(ctx, f.bot, e.ID, sub)
		require.NoError(t, err)
		byVariant[a.VariantID] = append(byVariant[a.VariantID], sub)
		if i%2 == 0 {
			f.clock.Advance(time.Second)
			f.goal(t, sub, "purchase", nil, nil)
			converted[sub] = true
		}
	}
	require.NotEmpty(t, byVariant["b"])
	r := CohortRequest{Name: "Converted on b", VariantID: "b", Converted: ptr(true), From: ptr(from.Format(time.RFC3339)), To: ptr(from.Add(time.Hour).Format(time.RFC3339))}
	seg, err := f.svc.SaveCohort(ctx, f.bot, e.ID, r)
	require.NoError(t, err)
	assert.Equal(t, "seg_1", seg.ID)
	var wantYes, wantNo []string
	for _, sub := range byVariant["b"] {
		if converted[sub] {
			wantYes = append(wantYes, sub)
		} else {
			wantNo = append(wantNo, sub)
		}
	}
	r.Converted = ptr(false)
	_, err = f.svc.SaveCohort(ctx, f.bot, e.ID, r)
	require.NoError(t, err)
	require.Len(t, f.segments.saved, 2)
	got := f.segments.saved[0]
	assert.ElementsMatch(t, wantYes, got.Members)
	assert.ElementsMatch(t, wantNo, f.segments.saved[1].Members)
	assert.Equal(t, e.ID, got.ExperimentID)
	assert.Equal(t, int64(1), got.Version)
	assert.JSONEq(t, `{"version":1,"variant_id":"b","converted":true,"from":"`+from.Format(time.RFC3339)+`","to":"`+from.Add(time.Hour).Format(time.RFC3339)+`"}`, string(got.Definition))

	r.VariantID = "zz"
	_, err = f.svc.SaveCohort(ctx, f.bot, e.ID, r)
	assert.Equal(t, "unknown_variant", httpapitest.AsError(t, err).Code)
	draft := f.create(t, f.definition())
	r.VariantID = "a"
	_, err = f.svc.SaveCohort(ctx, f.bot, draft.ID, r)
	assert.Equal(t, "experiment_not_started", httpapitest.AsError(t, err).Code)
	r.To = ptr(from.AddDate(2, 0, 0).Format(time.RFC3339))
	_, err = f.svc.SaveCohort(ctx, f.bot, e.ID, r)
	assert.Equal(t, "range_too_long", httpapitest.AsError(t, err).Code)

	f.segments.err = errBoom
	r.To = ptr(from.Add(time.Hour).Format(time.RFC3339))
	_, err = f.svc.SaveCohort(ctx, f.bot, e.ID, r)
	assert.ErrorIs(t, err, errBoom)
	noSegments := NewService(Deps{Store: f.raw, Events: f.events, Subjects: f.subjects, Subscribers: f.subs, Now: f.clock.Now})
	_, err = noSegments.SaveCohort(ctx, f.bot, e.ID, r)
	assert.Equal(t, "segments_unavailable", httpapitest.AsError(t, err).Code)
}
