package flowstats_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/flowstats"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// A scripted sequence of step visits gives the counters the package documents: entered,
// completed or errors on the day of the entry, continued and the time bucket when the run
// goes on or ends normally, nothing for a visit the run left there.
func TestCountersFromAScriptedRun(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	day := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	mk := func(step string, at time.Time) flowstats.Mark {
		return flowstats.Mark{Bot: "bot_1", Reaction: "rct_1", Version: 2, StepID: step, At: at}
	}
	a := mk("a", day)
	b := mk("b", day.Add(1500*time.Millisecond))
	c := mk("c", day.Add(2*time.Minute)) // the next UTC day
	w := mk("w", day.Add(3*time.Minute))
	var script [][]store.Write
	script = append(script,
		flowstats.EntryWrites(a, false, nil),
		flowstats.EntryWrites(b, false, &a),
		flowstats.EntryWrites(c, false, &b),
		flowstats.EndWrites(c, c.At.Add(5*time.Millisecond)),
		// A second run: a, then b fails.
		flowstats.EntryWrites(a, false, nil),
		flowstats.EntryWrites(b, true, &a),
		// A third: w entered and left waiting.
		flowstats.EntryWrites(w, false, nil),
	)
	for _, ws := range script {
		require.NoError(t, st.Transact(t.Context(), ws))
	}
	got, err := flowstats.Query(t.Context(), st, "bot_1", "rct_1", 2, day.Add(-time.Hour), day.Add(30*time.Second))
	require.NoError(t, err)
	require.Contains(t, got, "a")
	assert.Equal(t, int64(2), got["a"].Entered)
	assert.Equal(t, int64(2), got["a"].Completed)
	assert.Equal(t, int64(2), got["a"].Continued)
	assert.Equal(t, int64(2), got["a"].Times[flowstats.Bucket(1500*time.Millisecond)])
	assert.Equal(t, int64(2), got["b"].Entered)
	assert.Equal(t, int64(1), got["b"].Completed)
	assert.Equal(t, int64(1), got["b"].Errors)
	assert.Equal(t, int64(1), got["b"].Continued, "counted on b's day although c is on the next")
	assert.NotContains(t, got, "c", "c was entered the next day")

	next, err := flowstats.Query(t.Context(), st, "bot_1", "rct_1", 2, day.Add(time.Hour), day.Add(25*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, int64(1), next["c"].Continued)
	assert.Equal(t, int64(1), next["c"].Times[0], "5 ms is bucket 0")
	assert.Equal(t, int64(1), next["w"].Completed)
	assert.Equal(t, int64(0), next["w"].Continued, "still waiting: dropped")

	other, err := flowstats.Query(t.Context(), st, "bot_1", "rct_1", 1, day.Add(-time.Hour), day.Add(25*time.Hour))
	require.NoError(t, err)
	assert.Empty(t, other, "another version's counters are its own")

	_, err = flowstats.Query(t.Context(), st, "bot_1", "rct_1", 2, day, day.Add(367*24*time.Hour))
	assert.Error(t, err)
}

func TestMergeFoldsOneCounter(t *testing.T) {
	t.Parallel()
	m := flowstats.Mark{Bot: "b", Reaction: "r", Version: 1, StepID: "s", At: time.Unix(0, 0)}
	ws := flowstats.Merge(append(flowstats.ContinueWrites(m, m.At), flowstats.ContinueWrites(m, m.At)...))
	require.Len(t, ws, 2)
	assert.Equal(t, int64(2), ws[0].Add.Delta)
	require.NoError(t, store.ValidateTransaction(ws))
}

func TestBuckets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0}, {0, 0}, {9 * time.Millisecond, 0}, {10 * time.Millisecond, 1}, {19 * time.Millisecond, 1},
		{20 * time.Millisecond, 2}, {time.Second, 7}, {time.Hour, 19}, {30 * 24 * time.Hour, 28}, {40 * 24 * time.Hour, 29},
	} {
		assert.Equal(t, tc.want, flowstats.Bucket(tc.d), tc.d)
		low, high := flowstats.BucketBounds(tc.want)
		ms := float64(max(tc.d, 0) / time.Millisecond)
		assert.True(t, ms >= low && ms < high, "%s in [%v, %v)", tc.d, low, high)
	}
}

// The median estimate is the geometric middle of the bucket holding the (lower) median;
// the true median is within its bounds, a factor sqrt 2 either way.
func TestEstimateMedian(t *testing.T) {
	t.Parallel()
	_, ok := flowstats.EstimateMedian([flowstats.Buckets]int64{})
	assert.False(t, ok)

	times := []time.Duration{3 * time.Second, 4 * time.Second, 5 * time.Second, 50 * time.Second, time.Hour}
	var h [flowstats.Buckets]int64
	for _, d := range times {
		h[flowstats.Bucket(d)]++
	}
	m, ok := flowstats.EstimateMedian(h)
	require.True(t, ok)
	truth := 5000.0
	assert.True(t, truth >= m.Low && truth < *m.High)
	assert.InDelta(t, m.Low*math.Sqrt2, m.MS, 0.1)
	assert.LessOrEqual(t, math.Max(m.MS/truth, truth/m.MS), math.Sqrt2+1e-9)

	// Even count: the lower median.
	var even [flowstats.Buckets]int64
	even[0], even[10] = 1, 1
	m, _ = flowstats.EstimateMedian(even)
	assert.Equal(t, 5.0, m.MS)
	assert.Equal(t, 0.0, m.Low)

	var open [flowstats.Buckets]int64
	open[flowstats.Buckets-1] = 3
	m, _ = flowstats.EstimateMedian(open)
	assert.Nil(t, m.High, "the last bucket is open")
	assert.Equal(t, m.Low, m.MS)
}

// Corrections bring one day's counters to a recount as increments; applying them twice
// changes nothing more once the counters agree.
func TestCorrections(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	day := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	a := flowstats.Mark{Bot: "bot_1", Reaction: "rct_1", Version: 1, StepID: "a", At: day}
	stray := flowstats.Mark{Bot: "bot_1", Reaction: "rct_1", Version: 1, StepID: "gone", At: day}
	require.NoError(t, st.Transact(t.Context(), append(flowstats.EntryWrites(stray, false, nil), flowstats.EntryWrites(a, false, nil)...)))
	want := flowstats.Tally{}
	want.Add(flowstats.EntryWrites(a, false, nil))
	want.Add(flowstats.EntryWrites(a, true, nil))
	for range 2 {
		have, err := flowstats.DayCounters(t.Context(), st, "bot_1", day)
		require.NoError(t, err)
		if fix := flowstats.Corrections(have, want, day); len(fix) > 0 {
			require.NoError(t, st.Transact(t.Context(), fix))
		}
	}
	have, err := flowstats.DayCounters(t.Context(), st, "bot_1", day)
	require.NoError(t, err)
	assert.True(t, flowstats.Equal(have, want))
	for k := range want {
		assert.True(t, flowstats.OnDay(k, "bot_1", day))
	}
}
