package flowintel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/flowstats"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// JobReaggregate is the job kind that rebuilds a bot's flow counters from its traces.
const JobReaggregate = "flowintel.reaggregate"

// Limits of reaggregation.
const (
	// MaxJobsPerDay bounds the jobs a bot starts per UTC day (429 rate_limited beyond).
	MaxJobsPerDay = 10
	// MaxRebuildRuns bounds the runs one job reads; a bot with more runs in its traces
	// fails the job (too_many_runs).
	MaxRebuildRuns = 20000
	// rebuildAttempts bounds how often a day whose counters moved during the recount is
	// recounted before it is skipped (busy).
	rebuildAttempts = 3
	// StallAfter is how long a running job may go without saving before a new start takes
	// its place (its steps failed for good).
	StallAfter = 30 * time.Minute
	// jobLease is how long a step holds a job.
	jobLease = 10 * time.Minute
)

// The states of a job and of a day.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"

	DayRebuilt   = "rebuilt"   // corrected: some counters differed from the traces
	DayUnchanged = "unchanged" // the counters already equalled the traces
	DaySkipped   = "skipped"   // see Reason
)

// Why a day was skipped.
const (
	SkipExpired = "traces_expired" // older than the traces' retention: nothing to rebuild from
	SkipFuture  = "future"         // after today
	SkipBusy    = "busy"           // live runs kept changing its counters during the recount
)

// DayResult is what a job did to one UTC day.
type DayResult struct {
	Day    string `json:"day"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Corrected counts the counters changed.
	Corrected int `json:"corrected"`
}

// JobProblem is why a job failed.
type JobProblem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Job is a reaggregation job.
type Job struct {
	ID          string      `json:"id"`
	Status      string      `json:"status"`
	From        time.Time   `json:"from"`
	To          time.Time   `json:"to"`
	RunsScanned int         `json:"runs_scanned"`
	Days        []DayResult `json:"days"`
	Error       *JobProblem `json:"error"`
	CreatedAt   time.Time   `json:"created_at"`
	UpdatedAt   time.Time   `json:"updated_at"`
	FinishedAt  *time.Time  `json:"finished_at"`

	LeaseUntil time.Time `json:"lease_until,omitzero"`
	rev        int64
}

// view is the job as a client reads it.
func (j Job) view() Job { j.LeaseUntil = time.Time{}; return j }

// ReaggregationRequest is the body of POST .../reaggregations.
type ReaggregationRequest struct {
	From *string `json:"from"`
	To   *string `json:"to"`
}

type jobPayload struct {
	Bot string `json:"bot_id"`
	Job string `json:"job_id"`
}

func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// StartReaggregation starts a job rebuilding the counters of the days of [from, to): 400
// range_too_long beyond 366 days, 409 job_running while another job of the bot runs, 429
// rate_limited past MaxJobsPerDay (retry_after_seconds: until the next UTC day), 503
// jobs_unavailable in a process that runs no jobs.
func (s *Service) StartReaggregation(ctx context.Context, bot string, req ReaggregationRequest) (Job, error) {
	var p httpapi.Problems
	var rg Range
	for _, f := range []struct {
		name string
		v    *string
		t    *time.Time
	}{{"from", req.From, &rg.From}, {"to", req.To, &rg.To}} {
		if f.v == nil {
			p.Add(f.name, "is required (RFC 3339, e.g. 2026-01-01T00:00:00Z)")
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, *f.v)
		if err != nil {
			p.Add(f.name, "%q is not an RFC 3339 time such as 2026-01-01T00:00:00Z", *f.v)
			continue
		}
		*f.t = t.UTC()
	}
	if len(p) == 0 {
		switch {
		case !rg.To.After(rg.From):
			p.Add("to", "must be after from")
		case rg.To.Sub(rg.From) > MaxRange:
			return Job{}, httpapi.RangeTooLong(rg.To.Sub(rg.From), int(MaxRange/(24*time.Hour)))
		}
	}
	if err := p.Err(); err != nil {
		return Job{}, err
	}
	if s.jobs == nil {
		return Job{}, httpapi.E(httpapi.KindUnavailable, "jobs_unavailable", "this process runs no background jobs")
	}
	now := s.now()
	day := flowstats.Day(now)
	starts, err := store.ReadCounter(ctx, s.store, startsKey(bot, day.Format("2006-01-02")), 1)
	if err != nil {
		return Job{}, err
	}
	if starts.Count >= MaxJobsPerDay {
		wait := int64(day.Add(24*time.Hour).Sub(now)/time.Second) + 1
		return Job{}, httpapi.Errorf(httpapi.KindTooManyRequests, "rate_limited",
			"a bot starts at most %d reaggregations a UTC day", MaxJobsPerDay).With("retry_after_seconds", wait)
	}
	job := Job{ID: ids.At("job", now), Status: JobQueued, From: rg.From, To: rg.To, Days: []DayResult{},
		CreatedAt: stamp(now), UpdatedAt: stamp(now), rev: 1}
	data, err := store.Encode(job)
	if err != nil {
		return Job{}, err
	}
	active, err := store.Encode(jobPayload{Bot: bot, Job: job.ID})
	if err != nil {
		return Job{}, err
	}
	// The day's count expires with the day (and a day's margin for clocks).
	cw := starts.Write
	cw.Put.ExpiresAt = day.Add(48 * time.Hour)
	writes := []store.Write{
		store.PutOp(store.Item{Key: jobKey(bot, job.ID), Revision: 1, Data: data, ExpiresAt: now.Add(jobRetention)}, store.MustNotExist),
		store.PutOp(store.Item{Key: activeKey(bot), Revision: 1, Data: active}, store.MustNotExist),
		cw,
	}
	err = s.store.Transact(ctx, writes)
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 1 && s.releaseStalled(ctx, bot) {
		err = s.store.Transact(ctx, writes)
	}
	if errors.As(err, &ce) {
		if ce.Index == 1 {
			running := ""
			if it, gerr := s.store.Get(ctx, activeKey(bot)); gerr == nil {
				if a, derr := store.Decode[jobPayload](it); derr == nil {
					running = a.Job
				}
			}
			return Job{}, httpapi.E(httpapi.KindConflict, "job_running", "a reaggregation of this bot is running; wait for it to finish").
				With("job_id", running)
		}
		return Job{}, httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "another start of this bot's reaggregation raced this one; retry").With("retry_after_seconds", int64(1))
	}
	if err != nil {
		return Job{}, err
	}
	if err := s.jobs.Start(ctx, JobReaggregate, jobPayload{Bot: bot, Job: job.ID}); err != nil {
		// Nothing will run it: take it back rather than leave a job queued for ever.
		_ = s.store.Transact(context.WithoutCancel(ctx), []store.Write{
			store.DeleteOp(jobKey(bot, job.ID), store.Always), store.DeleteOp(activeKey(bot), store.Always)})
		return Job{}, fmt.Errorf("flowintel: start job: %w", err)
	}
	return job.view(), nil
}

// jobRetention is how long a job is kept after it was created.
const jobRetention = 30 * 24 * time.Hour

// releaseStalled fails the bot's active job when it made no progress for StallAfter and
// frees the bot for a new one; it reports whether it did.
func (s *Service) releaseStalled(ctx context.Context, bot string) bool {
	it, err := s.store.Get(ctx, activeKey(bot))
	if err != nil {
		return false
	}
	a, err := store.Decode[jobPayload](it)
	if err != nil {
		return false
	}
	job, err := s.loadJob(ctx, bot, a.Job)
	if err == nil && !terminal(job.Status) && s.now().Sub(job.UpdatedAt) < StallAfter {
		return false
	}
	if err == nil && !terminal(job.Status) {
		job.Status, job.Error = JobFailed, &JobProblem{Code: "job_stalled", Message: "the job made no progress for 30 minutes; a new job took its place"}
		if err := s.saveJob(ctx, bot, &job, true); err != nil {
			return false
		}
		return true
	}
	return s.store.Delete(ctx, activeKey(bot), store.RevisionIs(it.Revision)) == nil
}

func terminal(status string) bool { return status == JobSucceeded || status == JobFailed }

func (s *Service) loadJob(ctx context.Context, bot, id string) (Job, error) {
	if !ids.Valid("job", id) {
		return Job{}, httpapi.NotFound("reaggregation")
	}
	it, err := s.store.Get(ctx, jobKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Job{}, httpapi.NotFound("reaggregation")
	}
	if err != nil {
		return Job{}, err
	}
	j, err := store.Decode[Job](it)
	j.rev = it.Revision
	return j, err
}

// saveJob writes j's next revision; a finished job also frees the bot (release).
func (s *Service) saveJob(ctx context.Context, bot string, j *Job, release bool) error {
	now := s.now()
	j.UpdatedAt = stamp(now)
	if terminal(j.Status) {
		t := stamp(now)
		j.FinishedAt, j.LeaseUntil = &t, time.Time{}
	}
	data, err := store.Encode(j)
	if err != nil {
		return err
	}
	writes := []store.Write{store.PutOp(store.Item{Key: jobKey(bot, j.ID), Revision: j.rev + 1, Data: data,
		ExpiresAt: j.CreatedAt.Add(jobRetention)}, store.RevisionIs(j.rev))}
	if release {
		writes = append(writes, store.DeleteOp(activeKey(bot), store.Always))
	}
	if err := s.store.Transact(ctx, writes); err != nil {
		return err
	}
	j.rev++
	return nil
}

// Reaggregation returns one of the bot's jobs.
func (s *Service) Reaggregation(ctx context.Context, bot, id string) (Job, error) {
	j, err := s.loadJob(ctx, bot, id)
	return j.view(), err
}

// Reaggregations lists the bot's jobs, newest first.
func (s *Service) Reaggregations(ctx context.Context, bot string, limit int, cursor string) ([]Job, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: botPK(bot), Prefix: jobPrefix, Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Job, 0, len(page.Items))
	for _, it := range page.Items {
		j, err := store.Decode[Job](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, j.view())
	}
	return out, page.Next, nil
}

// Step runs a reaggregation job: one step does the whole (bounded) rebuild.
func (s *Service) Step(ctx context.Context, payload json.RawMessage, _ string) (string, bool, error) {
	var p jobPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", false, err
	}
	job, err := s.loadJob(ctx, p.Bot, p.Job)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return "", true, nil // expired or purged with its bot
	}
	if err != nil {
		return "", false, err
	}
	if terminal(job.Status) {
		return "", true, nil
	}
	now := s.now()
	if job.Status == JobRunning && job.LeaseUntil.After(now) {
		return "", false, errors.New("flowintel: the job is being run by another step")
	}
	job.Status, job.LeaseUntil = JobRunning, now.Add(jobLease)
	if err := s.saveJob(ctx, p.Bot, &job, false); err != nil {
		return "", false, err
	}
	days, scanned, err := s.rebuild(ctx, p.Bot, job.From, job.To)
	job.RunsScanned = scanned
	switch {
	case errors.Is(err, errTooManyRuns):
		job.Status, job.Error = JobFailed, &JobProblem{Code: "too_many_runs",
			Message: fmt.Sprintf("the bot's traces hold more than %d runs, the most one reaggregation reads", MaxRebuildRuns)}
	case err != nil:
		return "", false, err // retried by the runner; the rebuild is idempotent
	default:
		job.Status, job.Days = JobSucceeded, days
	}
	if err := s.saveJob(ctx, p.Bot, &job, true); err != nil {
		return "", false, err
	}
	return "", true, nil
}

var errTooManyRuns = errors.New("flowintel: too many runs to rebuild")

// rebuild brings the counters of the days of [from, to) to what the retained traces count
// (docs/flowintel.md, "Reaggregation"). For each day it reads the counters (C1), recounts
// every run of the traces (T), reads the counters again (C2): when C1 equals C2, no stored
// transition touched the day while the traces were read, so T and C2 describe the same
// runs, and the differences T - C2 are applied as increments, which keep whatever live runs
// add afterwards. A day whose counters moved is recounted, up to rebuildAttempts times.
func (s *Service) rebuild(ctx context.Context, bot string, from, to time.Time) ([]DayResult, int, error) {
	now := s.now()
	today := flowstats.Day(now)
	var results []DayResult
	var todo []time.Time
	index := map[string]int{}
	for _, d := range flowstats.Days(from, to) {
		r := DayResult{Day: d.Format("2006-01-02")}
		switch {
		case d.After(today):
			r.Status, r.Reason = DaySkipped, SkipFuture
		case !d.Add(s.retention).After(now):
			// A run with an entry on day d was last written on or after d, so it is
			// kept until at least d + retention: only then are all of d's runs there.
			r.Status, r.Reason = DaySkipped, SkipExpired
		default:
			index[r.Day] = len(results)
			todo = append(todo, d)
		}
		results = append(results, r)
	}
	scanned := 0
	for attempt := 0; attempt < rebuildAttempts && len(todo) > 0; attempt++ {
		before, err := s.snapshot(ctx, bot, todo)
		if err != nil {
			return nil, scanned, err
		}
		recount, n, err := s.recount(ctx, bot, todo)
		scanned = max(scanned, n)
		if err != nil {
			return nil, scanned, err
		}
		after, err := s.snapshot(ctx, bot, todo)
		if err != nil {
			return nil, scanned, err
		}
		var busy []time.Time
		for i, d := range todo {
			if !flowstats.Equal(before[i], after[i]) {
				busy = append(busy, d)
				continue
			}
			fix := flowstats.Corrections(after[i], recount[i], d)
			for len(fix) > 0 {
				n := min(len(fix), store.MaxTransactWrites)
				if err := s.store.Transact(ctx, fix[:n]); err != nil {
					return nil, scanned, err
				}
				fix = fix[n:]
			}
			r := &results[index[d.Format("2006-01-02")]]
			r.Corrected = len(flowstats.Corrections(after[i], recount[i], d))
			r.Status = DayUnchanged
			if r.Corrected > 0 {
				r.Status = DayRebuilt
			}
		}
		todo = busy
	}
	for _, d := range todo {
		r := &results[index[d.Format("2006-01-02")]]
		r.Status, r.Reason = DaySkipped, SkipBusy
	}
	return results, scanned, nil
}

func (s *Service) snapshot(ctx context.Context, bot string, days []time.Time) ([]flowstats.Tally, error) {
	out := make([]flowstats.Tally, len(days))
	for i, d := range days {
		t, err := flowstats.DayCounters(ctx, s.store, bot, d)
		if err != nil {
			return nil, err
		}
		out[i] = t
	}
	return out, nil
}

// recount sums what every retained run counted on each of days.
func (s *Service) recount(ctx context.Context, bot string, days []time.Time) ([]flowstats.Tally, int, error) {
	out := make([]flowstats.Tally, len(days))
	at := map[string]int{}
	for i, d := range days {
		out[i] = flowstats.Tally{}
		at[flowstats.Partition(bot, d)] = i
	}
	scanned := 0
	err := s.runs.Recent(ctx, bot, MaxRebuildRuns+1, func(r Run) (bool, error) {
		scanned++
		if scanned > MaxRebuildRuns {
			return false, errTooManyRuns
		}
		d, err := r.Load(ctx)
		if err != nil {
			return false, err
		}
		for _, w := range d.Counters {
			if w.Add == nil {
				continue
			}
			if i, ok := at[w.Add.Key.PK]; ok {
				out[i][w.Add.Key] += w.Add.Delta
			}
		}
		return true, nil
	})
	return out, min(scanned, MaxRebuildRuns), err
}
