package flowintel

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/flowstats"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

type fakeFlows struct{ flow Flow }

func (f fakeFlows) Flow(_ context.Context, _, reaction string, n int64) (Flow, error) {
	if reaction != f.flow.ReactionID || (n != 0 && n != f.flow.Version) {
		return Flow{}, httpapi.NotFound("reaction")
	}
	return f.flow, nil
}

// fakeRuns serves scripted runs; during serves the scan calls it (a live write racing the
// recount).
type fakeRuns struct {
	runs   []Run
	during func()
}

func (f *fakeRuns) Recent(_ context.Context, _ string, max int, fn func(Run) (bool, error)) error {
	for i, r := range f.runs {
		if i >= max {
			return nil
		}
		if f.during != nil {
			f.during()
		}
		if more, err := fn(r); err != nil || !more {
			return err
		}
	}
	return nil
}

type nopJobs struct{ started int }

func (j *nopJobs) Start(context.Context, string, any) error { j.started++; return nil }

type world struct {
	st   store.Store
	svc  *Service
	runs *fakeRuns
	jobs *nopJobs
	now  time.Time
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{st: sqlitetest.Open(t), runs: &fakeRuns{}, jobs: &nopJobs{}, now: flowstats.Day(time.Now()).Add(12 * time.Hour)}
	flow := Flow{ReactionID: "rct_1", Version: 1, Steps: []FlowStep{{"a", "send_text"}, {"b", "buttons"}, {"c", "end"}}}
	w.svc = NewService(Config{Store: w.st, Flows: fakeFlows{flow}, Runs: w.runs, Jobs: w.jobs, Now: func() time.Time { return w.now }})
	return w
}

// run scripts one run through steps (entered at start, one second apart; failed: the last
// step failed; ended: a normal end after the last), writes its live counters and serves it.
func (w *world) run(t *testing.T, start time.Time, steps []string, failed, ended bool) {
	t.Helper()
	var writes []store.Write
	var prev *flowstats.Mark
	var entries []Entry
	for i, s := range steps {
		m := flowstats.Mark{Bot: "bot_1", Reaction: "rct_1", Version: 1, StepID: s, At: start.Add(time.Duration(i) * time.Second)}
		writes = append(writes, flowstats.EntryWrites(m, failed && i == len(steps)-1, prev)...)
		prev = &m
		e := Entry{Seq: i + 1, StepID: s, At: m.At, Outcome: map[string]any{"message_id": "m1"}}
		entries = append(entries, e)
	}
	if ended {
		writes = append(writes, flowstats.EndWrites(*prev, prev.At.Add(time.Second))...)
	}
	for _, ws := range writes {
		require.NoError(t, w.st.Transact(t.Context(), []store.Write{ws}))
	}
	trig, _ := json.Marshal(map[string]any{"type": "start", "update_id": "77", "keyword": "hi"})
	d := RunDetail{Steps: entries, Counters: writes}
	w.runs.runs = append([]Run{{ID: "exe_x", ReactionID: "rct_1", Version: 1, Channel: "telegram", Status: "completed", StartedAt: start,
		Trigger: trig, Load: func(context.Context) (RunDetail, error) { return d, nil }}}, w.runs.runs...)
}

func TestOverlayNumbers(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	day := w.now.Add(-24 * time.Hour)
	w.run(t, day, []string{"a", "b", "c"}, false, true)
	w.run(t, day, []string{"a", "b"}, false, false)
	w.run(t, day, []string{"a"}, true, false)
	o, err := w.svc.Overlay(t.Context(), "bot_1", "rct_1", 0, Range{From: w.now.Add(-DefaultRange), To: w.now})
	require.NoError(t, err)
	require.Len(t, o.Steps, 3)
	a, b, c := o.Steps[0], o.Steps[1], o.Steps[2]
	assert.Equal(t, StepStats{StepID: "a", Type: "send_text", Entered: 3, Completed: 2, Continued: 2, Errors: 1}, withoutMedian(a))
	assert.Equal(t, int64(1), b.Dropped)
	assert.Equal(t, int64(1), c.Continued)
	require.NotNil(t, a.MedianMS)
	assert.True(t, *a.MedianLowMS <= 1000 && 1000 < *a.MedianHighMS, "a took a second")
	assert.Equal(t, Totals{Entered: 6, Completed: 5, Continued: 4, Dropped: 1, Errors: 1}, o.Totals)
	assert.Equal(t, 31, o.Days)

	_, err = w.svc.Overlay(t.Context(), "bot_1", "rct_2", 0, Range{From: day, To: w.now})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
	_, err = w.svc.Overlay(t.Context(), "bot_1", "rct_1", 9, Range{From: day, To: w.now})
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))
}

func withoutMedian(s StepStats) StepStats {
	s.MedianMS, s.MedianLowMS, s.MedianHighMS = nil, nil, nil
	return s
}

func TestParseRange(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC)
	rg, err := parseRange(map[string][]string{}, now)
	require.NoError(t, err)
	assert.Equal(t, Range{From: now.Add(-DefaultRange), To: now}, rg)
	_, err = parseRange(map[string][]string{"from": {"2025-01-01T00:00:00Z"}}, now)
	var he *httpapi.Error
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "range_too_long", he.Code)
	_, err = parseRange(map[string][]string{"from": {"2026-03-11T00:00:00Z"}}, now)
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "invalid_parameter", he.Code)
}

func TestPolicyRevisions(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	p, err := w.svc.Policy(t.Context(), "acct_1")
	require.NoError(t, err)
	assert.Equal(t, DefaultPolicy(), p)
	on, off, yes, d7 := SamplingEnabled, SamplingDisabled, true, 7
	p, err = w.svc.SetPolicy(t.Context(), "acct_1", PolicyRequest{Sampling: &off, SampleTriggerDetails: &yes, RetentionDays: &d7})
	require.NoError(t, err)
	assert.Equal(t, int64(1), p.Revision)
	// Without expected_revision while one is stored, or with an old one: stale.
	for _, rev := range []*int64{nil, ptr(int64(5))} {
		_, err = w.svc.SetPolicy(t.Context(), "acct_1", PolicyRequest{Sampling: &on, SampleTriggerDetails: &yes, RetentionDays: &d7, ExpectedRevision: rev})
		var he *httpapi.Error
		require.ErrorAs(t, err, &he)
		assert.Equal(t, "stale_revision", he.Code)
		assert.Equal(t, int64(1), he.Extensions["current_revision"])
	}
	p, err = w.svc.SetPolicy(t.Context(), "acct_1", PolicyRequest{Sampling: &on, SampleTriggerDetails: &yes, RetentionDays: &d7, ExpectedRevision: ptr(int64(1))})
	require.NoError(t, err)
	assert.Equal(t, int64(2), p.Revision)
	got, err := w.svc.Policy(t.Context(), "acct_1")
	require.NoError(t, err)
	assert.Equal(t, p.Revision, got.Revision)
	assert.Equal(t, 7, got.RetentionDays)
	other, err := w.svc.Policy(t.Context(), "acct_2")
	require.NoError(t, err)
	assert.Equal(t, int64(0), other.Revision, "another account's policy is its own")

	bad := 31
	assert.Error(t, (&PolicyRequest{Sampling: &on, SampleTriggerDetails: &yes, RetentionDays: &bad}).Validate())
	assert.Error(t, (&PolicyRequest{}).Validate())
}

func ptr[T any](v T) *T { return &v }

func TestSamplesAreRedactedAndFollowThePolicy(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.run(t, w.now.Add(-40*24*time.Hour), []string{"a", "b"}, false, false) // past retention
	w.run(t, w.now.Add(-time.Hour), []string{"a", "b"}, false, false)
	w.run(t, w.now.Add(-time.Minute), []string{"a"}, true, false)
	s, err := w.svc.Samples(t.Context(), "acct_1", "bot_1", "rct_1", "b", 0, 5)
	require.NoError(t, err)
	require.Len(t, s.Data, 1)
	b, _ := json.Marshal(s)
	assert.NotContains(t, string(b), "m1", "no provider message id")
	assert.NotContains(t, string(b), "77", "no update id")
	assert.NotContains(t, string(b), "exe_x", "no run id")
	assert.NotContains(t, string(b), "keyword", "trigger details are off by default")
	assert.Equal(t, true, s.Data[0].Steps[0].Outcome["message_sent"])
	assert.Equal(t, 3, s.RunsScanned, "stops at the first run past the retention")

	on, off, yes, d30 := SamplingEnabled, SamplingDisabled, true, 30
	_, err = w.svc.SetPolicy(t.Context(), "acct_1", PolicyRequest{Sampling: &on, SampleTriggerDetails: &yes, RetentionDays: &d30})
	require.NoError(t, err)
	s, err = w.svc.Samples(t.Context(), "acct_1", "bot_1", "rct_1", "a", 0, 20)
	require.NoError(t, err)
	assert.Len(t, s.Data, 2)
	assert.Equal(t, "hi", s.Data[0].Trigger["keyword"])
	assert.NotContains(t, s.Data[0].Trigger, "update_id")

	_, err = w.svc.SetPolicy(t.Context(), "acct_1", PolicyRequest{Sampling: &off, SampleTriggerDetails: &yes, RetentionDays: &d30, ExpectedRevision: ptr(int64(1))})
	require.NoError(t, err)
	_, err = w.svc.Samples(t.Context(), "acct_1", "bot_1", "rct_1", "a", 0, 20)
	var he *httpapi.Error
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "sampling_disabled", he.Code)
}

// A rebuild brings damaged counters back to what live counting wrote for the same runs,
// changes nothing the second time, skips days older than the traces and days after today.
func TestReaggregationEqualsLiveCounting(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	yesterday := w.now.Add(-24 * time.Hour)
	w.run(t, yesterday, []string{"a", "b", "c"}, false, true)
	w.run(t, w.now.Add(-time.Hour), []string{"a", "b"}, false, false)
	w.run(t, yesterday.Add(time.Hour), []string{"a"}, true, false)
	rg := Range{From: w.now.Add(-DefaultRange), To: w.now}
	live, err := w.svc.Overlay(t.Context(), "bot_1", "rct_1", 0, rg)
	require.NoError(t, err)

	// Damage: a lost increment, a stray counter of a step that does not exist.
	m := flowstats.Mark{Bot: "bot_1", Reaction: "rct_1", Version: 1, StepID: "a", At: yesterday}
	require.NoError(t, w.st.Transact(t.Context(), []store.Write{store.AddOp(store.Key{PK: flowstats.Partition("bot_1", yesterday), SK: "rct_1#0000000001#a#entered"}, -1, time.Time{})}))
	require.NoError(t, w.st.Transact(t.Context(), flowstats.EntryWrites(flowstats.Mark{Bot: m.Bot, Reaction: m.Reaction, Version: 1, StepID: "zz", At: m.At}, false, nil)))
	damaged, err := w.svc.Overlay(t.Context(), "bot_1", "rct_1", 0, rg)
	require.NoError(t, err)
	assert.NotEqual(t, live, damaged)

	days, scanned, err := w.svc.rebuild(t.Context(), "bot_1", w.now.Add(-40*24*time.Hour), w.now.Add(48*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, 3, scanned)
	status := map[string]DayResult{}
	for _, d := range days {
		status[d.Day] = d
	}
	assert.Equal(t, DayRebuilt, status[yesterday.Format("2006-01-02")].Status)
	assert.Equal(t, 3, status[yesterday.Format("2006-01-02")].Corrected, "a's entered, the stray step's two")
	assert.Equal(t, DayUnchanged, status[w.now.Format("2006-01-02")].Status)
	assert.Equal(t, SkipExpired, status[w.now.Add(-35*24*time.Hour).Format("2006-01-02")].Reason)
	assert.Equal(t, SkipFuture, status[w.now.Add(24*time.Hour).Format("2006-01-02")].Reason)
	rebuilt, err := w.svc.Overlay(t.Context(), "bot_1", "rct_1", 0, rg)
	require.NoError(t, err)
	assert.Equal(t, live, rebuilt)

	days, _, err = w.svc.rebuild(t.Context(), "bot_1", yesterday, w.now)
	require.NoError(t, err)
	for _, d := range days {
		assert.Equal(t, DayUnchanged, d.Status, d.Day)
	}

	// A live write during every recount: the day is left alone (busy), never half-corrected.
	w.runs.during = func() {
		require.NoError(t, w.st.Transact(context.Background(), flowstats.EntryWrites(flowstats.Mark{Bot: "bot_1", Reaction: "rct_1", Version: 1, StepID: "a", At: w.now}, false, nil)))
	}
	days, _, err = w.svc.rebuild(t.Context(), "bot_1", w.now.Add(-time.Hour), w.now)
	require.NoError(t, err)
	require.Len(t, days, 1)
	assert.Equal(t, DaySkipped, days[0].Status)
	assert.Equal(t, SkipBusy, days[0].Reason)
}

func TestReaggregationJobLimits(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	from, to := w.now.Add(-48*time.Hour).Format(time.RFC3339), w.now.Format(time.RFC3339)
	j, err := w.svc.StartReaggregation(t.Context(), "bot_1", ReaggregationRequest{From: &from, To: &to})
	require.NoError(t, err)
	assert.Equal(t, JobQueued, j.Status)
	_, err = w.svc.StartReaggregation(t.Context(), "bot_1", ReaggregationRequest{From: &from, To: &to})
	var he *httpapi.Error
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "job_running", he.Code)
	assert.Equal(t, j.ID, he.Extensions["job_id"])

	raw, _ := json.Marshal(jobPayload{Bot: "bot_1", Job: j.ID})
	_, done, err := w.svc.Step(t.Context(), raw, "")
	require.NoError(t, err)
	assert.True(t, done)
	got, err := w.svc.Reaggregation(t.Context(), "bot_1", j.ID)
	require.NoError(t, err)
	assert.Equal(t, JobSucceeded, got.Status)
	assert.Len(t, got.Days, 3)
	_, done, err = w.svc.Step(t.Context(), raw, "")
	require.NoError(t, err)
	assert.True(t, done, "a duplicate step of a finished job does nothing")

	for i := 1; i < MaxJobsPerDay; i++ {
		j, err := w.svc.StartReaggregation(t.Context(), "bot_1", ReaggregationRequest{From: &from, To: &to})
		require.NoError(t, err, "job %d", i)
		raw, _ := json.Marshal(jobPayload{Bot: "bot_1", Job: j.ID})
		_, _, err = w.svc.Step(t.Context(), raw, "")
		require.NoError(t, err)
	}
	_, err = w.svc.StartReaggregation(t.Context(), "bot_1", ReaggregationRequest{From: &from, To: &to})
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "rate_limited", he.Code)
	assert.Equal(t, int64(12*3600+1), he.Extensions["retry_after_seconds"])
	list, _, err := w.svc.Reaggregations(t.Context(), "bot_1", 50, "")
	require.NoError(t, err)
	assert.Len(t, list, MaxJobsPerDay)

	long := w.now.Add(-400 * 24 * time.Hour).Format(time.RFC3339)
	_, err = w.svc.StartReaggregation(t.Context(), "bot_2", ReaggregationRequest{From: &long, To: &to})
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "range_too_long", he.Code)
	_, err = w.svc.StartReaggregation(t.Context(), "bot_2", ReaggregationRequest{From: &to})
	require.ErrorAs(t, err, &he)
	assert.Equal(t, "validation_failed", he.Code)
}
