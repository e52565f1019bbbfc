package crm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/pace"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// JobSync is the job kind that runs a connection's sync jobs, one step at a time: the jobs
// runner's queue locally, the jobs state machine (Step Functions) on AWS.
const JobSync = "crm.sync"

// The kinds of sync job.
const (
	// KindInitialSync writes every subscriber with a key value to the CRM.
	KindInitialSync = "initial_sync"
	// KindReconcile reads the records the CRM changed since the last reconcile (pulling
	// values and opening conflicts), then the deals it changed (a mapping with a deal), then
	// pushes what changed on the platform.
	KindReconcile = "reconcile"
)

// The states of a job.
const (
	JobQueued    = "queued"
	JobRunning   = "running"
	JobSucceeded = "succeeded"
	JobFailed    = "failed"
	JobCancelled = "cancelled"
)

// The phases of a reconcile.
const (
	PhasePull  = "pull"
	PhaseDeals = "deals"
	PhasePush  = "push"
)

// MaxJobErrors bounds the per-record errors a job keeps: beyond it they are counted only.
const MaxJobErrors = 1000

// syncPage is how many subscribers a job reads at once.
const syncPage = 100

// syncWorkers is how many subscribers a step syncs at once: enough to use a provider's rate
// limit whatever its round trip, which the pacer keeps the calls under.
const syncWorkers = 8

// reconcileOverlap is how far before the last reconcile's start the next one reads the
// CRM's changes: providers stamp changes with their own clocks, in whole seconds.
const reconcileOverlap = time.Minute

// Progress counts what a job did.
type Progress struct {
	// Processed counts the subscribers synced and the CRM records read.
	Processed int64 `json:"processed"`
	Written   int64 `json:"written"`
	Unchanged int64 `json:"unchanged"`
	Skipped   int64 `json:"skipped"`
	Failed    int64 `json:"failed"`
	// Pulled counts the subscribers who took CRM values; Conflicts the conflicts opened.
	Pulled    int64 `json:"pulled"`
	Conflicts int64 `json:"conflicts"`
	// DealsOpened counts the deals the job created; DealsPulled the deals whose change at
	// the CRM a reconcile took.
	DealsOpened int64 `json:"deals_opened"`
	DealsPulled int64 `json:"deals_pulled"`
}

// JobProblem is why a job failed.
type JobProblem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Job is a sync job of a connection.
type Job struct {
	ID              string   `json:"id"`
	ConnectionID    string   `json:"connection_id"`
	Kind            string   `json:"kind"`
	Status          string   `json:"status"`
	Phase           string   `json:"phase,omitempty"`
	MappingRevision int64    `json:"mapping_revision"`
	Progress        Progress `json:"progress"`
	// ErrorsRecorded is how many per-record errors GET .../errors lists (at most
	// MaxJobErrors; Progress.Failed counts them all).
	ErrorsRecorded int         `json:"errors_recorded"`
	Error          *JobProblem `json:"error,omitempty"`
	CreatedAt      time.Time   `json:"created_at"`
	UpdatedAt      time.Time   `json:"updated_at"`
	StartedAt      *time.Time  `json:"started_at,omitempty"`
	FinishedAt     *time.Time  `json:"finished_at,omitempty"`
	Revision       int64       `json:"revision"`
}

// jobRecord is a job as stored, with where it goes on.
type jobRecord struct {
	Job
	BotID string `json:"bot_id"`
	// Cursor is where the job goes on: the subscribers' page, or the CRM's changes'.
	Cursor string `json:"cursor,omitempty"`
	// Since is where a reconcile reads the CRM's changes from; Began when it began (the
	// next one's watermark).
	Since time.Time `json:"since,omitzero"`
	Began time.Time `json:"began,omitzero"`
	// Step is the number of the step that may run next: a duplicate delivery of a step that
	// ran already finds another number and stops.
	Step int64 `json:"step"`
	// Pace is the provider calls' answers of the last rate window, for the next step's pacer.
	Pace pace.Log `json:"pace,omitzero"`
}

func terminal(status string) bool {
	return status == JobSucceeded || status == JobFailed || status == JobCancelled
}

// JobError is one per-record error of a job.
type JobError struct {
	SubscriberID string `json:"subscriber_id,omitempty"`
	RecordID     string `json:"record_id,omitempty"`
	RecordError
	At time.Time `json:"at"`
}

// jobPayload names the job a step runs, and the step its run begins at (a run that
// continues an earlier one: see stepsPerRun).
type jobPayload struct {
	Bot  string `json:"bot_id"`
	Conn string `json:"connection_id"`
	Job  string `json:"job_id"`
	From int64  `json:"from_step,omitempty"`
}

// stepsPerRun bounds the steps of one run of a job (one Step Functions execution, one
// chain of queue messages): a Standard execution ends at 25,000 history events, some 9 a
// step, so a sync longer than that continues as a new run (at 20 seconds a step, every 11
// hours).
const stepsPerRun = 2000

// Rate is a provider's API rate limit: N calls in any Window.
type Rate struct {
	N      int
	Window time.Duration
}

// DefaultRates are the providers' documented limits for one account, which syncs pace
// their calls under: HubSpot's 100 per 10 seconds (apps on Free and Starter accounts),
// Pipedrive's 80 per 2 seconds (Essential plan), Dataverse's 6,000 per 5 minutes per user,
// and for Salesforce, whose limit is per day, 25 a second.
var DefaultRates = map[string]Rate{
	crmapi.HubSpot:    {N: 100, Window: 10 * time.Second},
	crmapi.Pipedrive:  {N: 80, Window: 2 * time.Second},
	crmapi.Dynamics:   {N: 6000, Window: 5 * time.Minute},
	crmapi.Salesforce: {N: 25, Window: time.Second},
}

// maxPaceCalls bounds the calls of a pacer's window, and so the answers a job keeps
// between steps (its Pace).
const maxPaceCalls = 100

// rate is the limit the deployment paces provider's calls under. A limit of more than
// maxPaceCalls calls is paced as maxPaceCalls in the proportional part of its window
// (Dataverse's 6,000 in 5 minutes as 100 in 5 seconds): the same rate, and stricter, since
// every window of the original holds no more calls than that.
func (s *Service) rate(provider string) Rate {
	r, ok := s.settings.Rates[provider]
	if !ok || r.N <= 0 || r.Window <= 0 {
		r = DefaultRates[provider]
	}
	if r.N > maxPaceCalls {
		r = Rate{N: maxPaceCalls, Window: time.Duration(int64(r.Window) * maxPaceCalls / int64(r.N))}
	}
	return r
}

// StartJobRequest is the body of POST .../jobs.
type StartJobRequest struct {
	Kind string `json:"kind"`
}

// Validate checks the request's form.
func (r *StartJobRequest) Validate() error {
	var p httpapi.Problems
	if r.Kind != KindInitialSync && r.Kind != KindReconcile {
		p.Add("kind", "must be initial_sync or reconcile")
	}
	return p.Err()
}

// StartJob starts a sync job of the connection with its current mapping: 409 job_running
// while another job of the connection runs, 409 reconnect_required for a connection whose
// credentials were refused, 422 mapping_required without a mapping, 503 jobs_unavailable in
// a process that runs no jobs.
func (s *Service) StartJob(ctx context.Context, bot, conn string, req StartJobRequest) (Job, error) {
	c, err := s.load(ctx, bot, conn)
	if err != nil {
		return Job{}, err
	}
	if c.Status != StatusActive {
		return Job{}, httpapi.E(httpapi.KindConflict, "reconnect_required",
			"the CRM refused this connection's credentials: connect the account again, then sync")
	}
	m, found, err := s.currentMapping(ctx, bot, conn)
	if err != nil {
		return Job{}, err
	}
	if !found {
		return Job{}, httpapi.E(httpapi.KindUnprocessable, "mapping_required", "save the connection's mapping (PUT .../mapping) before syncing")
	}
	if s.jobs == nil {
		return Job{}, httpapi.E(httpapi.KindUnavailable, "jobs_unavailable", "this process runs no background jobs")
	}
	now := stamp(s.now())
	rec := jobRecord{Job: Job{ID: ids.New("job"), ConnectionID: conn, Kind: req.Kind, Status: JobQueued,
		MappingRevision: m.Revision, Progress: Progress{}, CreatedAt: now, UpdatedAt: now, Revision: 1}, BotID: bot}
	if req.Kind == KindReconcile {
		rec.Phase = PhasePull
		if wm, err := s.store.Get(ctx, watermarkKey(bot, conn)); err == nil {
			w, err := store.Decode[watermark](wm)
			if err != nil {
				return Job{}, err
			}
			rec.Since = w.Since
		} else if !errors.Is(err, store.ErrNotFound) {
			return Job{}, err
		}
	}
	it, err := item(jobKey(bot, conn, rec.ID), 1, rec)
	if err != nil {
		return Job{}, err
	}
	active, err := item(activeKey(bot, conn), 1, activeJob{JobID: rec.ID})
	if err != nil {
		return Job{}, err
	}
	err = s.store.Transact(ctx, []store.Write{store.PutOp(it, store.MustNotExist), store.PutOp(active, store.MustNotExist)})
	if errors.Is(err, store.ErrConditionFailed) {
		running, stalled := s.activeJob(ctx, bot, conn)
		if stalled {
			// The running job made no progress for StallAfter: its steps failed for good (a
			// dead-lettered message, a failed execution). It is failed, and this one starts.
			err = s.store.Transact(ctx, []store.Write{store.PutOp(it, store.MustNotExist), store.PutOp(active, store.MustNotExist)})
		}
		if errors.Is(err, store.ErrConditionFailed) {
			return Job{}, httpapi.E(httpapi.KindConflict, "job_running", "a sync job of this connection is running; wait for it or cancel it").
				With("job_id", running)
		}
	}
	if err != nil {
		return Job{}, err
	}
	if err := s.jobs.Start(ctx, JobSync, jobPayload{Bot: bot, Conn: conn, Job: rec.ID}); err != nil {
		// Nothing will run it: take it back rather than leave a job queued for ever.
		_ = s.store.Transact(context.WithoutCancel(ctx), []store.Write{
			store.DeleteOp(jobKey(bot, conn, rec.ID), store.Always), store.DeleteOp(activeKey(bot, conn), store.Always)})
		return Job{}, fmt.Errorf("crm: start sync job: %w", err)
	}
	return rec.Job, nil
}

type activeJob struct {
	JobID string `json:"job_id"`
}

// StallAfter is how long a queued or running job may go without saving progress before a
// new start takes its place: a step saves after every page, so only a job whose steps
// failed for good (retries exhausted, an execution failed) is that quiet.
const StallAfter = 15 * time.Minute

// activeJob returns the connection's running job and, when it stalled, fails it (code
// job_stalled) and releases the connection.
func (s *Service) activeJob(ctx context.Context, bot, conn string) (id string, released bool) {
	a, err := s.store.Get(ctx, activeKey(bot, conn))
	if err != nil {
		return "", false
	}
	aj, err := store.Decode[activeJob](a)
	if err != nil {
		return "", false
	}
	rec, err := s.loadJob(ctx, bot, conn, aj.JobID)
	if err != nil || terminal(rec.Status) || s.now().Sub(rec.UpdatedAt) < StallAfter {
		return aj.JobID, false
	}
	err = s.finish(ctx, &rec, JobFailed, &JobProblem{Code: "job_stalled",
		Message: "the job made no progress for 15 minutes: its steps failed after their retries; a new job took its place"})
	return aj.JobID, err == nil
}

type watermark struct {
	Since time.Time `json:"since"`
}

func (s *Service) loadJob(ctx context.Context, bot, conn, id string) (jobRecord, error) {
	if !ids.Valid("job", id) {
		return jobRecord{}, httpapi.NotFound("sync job")
	}
	it, err := s.store.Get(ctx, jobKey(bot, conn, id))
	if errors.Is(err, store.ErrNotFound) {
		return jobRecord{}, httpapi.NotFound("sync job")
	}
	if err != nil {
		return jobRecord{}, err
	}
	rec, err := store.Decode[jobRecord](it)
	rec.Revision = it.Revision
	return rec, err
}

// GetJob returns a job of the connection.
func (s *Service) GetJob(ctx context.Context, bot, conn, id string) (Job, error) {
	if _, err := s.load(ctx, bot, conn); err != nil {
		return Job{}, err
	}
	rec, err := s.loadJob(ctx, bot, conn, id)
	return rec.Job, err
}

// Jobs lists the connection's jobs, newest first.
func (s *Service) Jobs(ctx context.Context, bot, conn string, limit int, cursor string) ([]Job, string, error) {
	if _, err := s.load(ctx, bot, conn); err != nil {
		return nil, "", err
	}
	page, err := s.store.Query(ctx, store.Query{PK: syncPK(bot, conn), Prefix: jobPrefix, Limit: limit, Cursor: cursor, Reverse: true})
	if err != nil {
		return nil, "", err
	}
	out := make([]Job, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[jobRecord](it)
		if err != nil {
			return nil, "", err
		}
		rec.Revision = it.Revision
		out = append(out, rec.Job)
	}
	return out, page.Next, nil
}

// JobErrors lists a job's per-record errors, in the order they happened.
func (s *Service) JobErrors(ctx context.Context, bot, conn, id string, limit int, cursor string) ([]JobError, string, error) {
	if _, err := s.GetJob(ctx, bot, conn, id); err != nil {
		return nil, "", err
	}
	page, err := s.store.Query(ctx, store.Query{PK: syncPK(bot, conn), Prefix: jobErrorPrefix(id), Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]JobError, 0, len(page.Items))
	for _, it := range page.Items {
		e, err := store.Decode[JobError](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, e)
	}
	return out, page.Next, nil
}

// CancelJob stops a queued or running job at its next page: what it wrote stays written.
// Cancelling a finished job changes nothing and answers it as it is.
func (s *Service) CancelJob(ctx context.Context, bot, conn, id string) (Job, error) {
	for {
		if _, err := s.load(ctx, bot, conn); err != nil {
			return Job{}, err
		}
		rec, err := s.loadJob(ctx, bot, conn, id)
		if err != nil || terminal(rec.Status) {
			return rec.Job, err
		}
		err = s.finish(ctx, &rec, JobCancelled, nil)
		if errors.Is(err, store.ErrConditionFailed) {
			continue // a step saved progress meanwhile
		}
		return rec.Job, err
	}
}

// save writes rec's progress at its revision; store.ErrConditionFailed when the job changed
// meanwhile (cancelled, or another delivery of the step).
func (s *Service) save(ctx context.Context, rec *jobRecord, extra ...store.Write) error {
	rec.UpdatedAt = stamp(s.now())
	it, err := item(jobKey(rec.BotID, rec.ConnectionID, rec.ID), rec.Revision+1, rec)
	if err != nil {
		return err
	}
	if err := s.store.Transact(ctx, append([]store.Write{store.PutOp(it, store.RevisionIs(rec.Revision))}, extra...)); err != nil {
		return err
	}
	rec.Revision++
	return nil
}

// finish ends rec with status and releases the connection for the next job.
func (s *Service) finish(ctx context.Context, rec *jobRecord, status string, problem *JobProblem, extra ...store.Write) error {
	now := stamp(s.now())
	rec.Status, rec.Error, rec.FinishedAt, rec.Cursor = status, problem, &now, ""
	return s.save(ctx, rec, append(extra, store.DeleteOp(activeKey(rec.BotID, rec.ConnectionID), store.Always))...)
}

// JobErase is the job kind that erases a disconnected connection's sync state (its links,
// jobs and conflicts): too many items for the DELETE request itself.
const JobErase = "crm.erase"

// Steps returns the family's job kinds.
func (s *Service) Steps() map[string]jobs.Step {
	return map[string]jobs.Step{JobSync: s.SyncStep, JobErase: s.EraseStep}
}

// eraseItemsPerStep bounds one erase step: a few hundred deletes.
const eraseItemsPerStep = 300

// EraseStep erases a page of a disconnected connection's sync partition; done when empty.
func (s *Service) EraseStep(ctx context.Context, payload json.RawMessage, _ string) (string, bool, error) {
	var p jobPayload
	if err := json.Unmarshal(payload, &p); err != nil || p.Bot == "" || p.Conn == "" {
		return "", true, fmt.Errorf("crm: erase job payload %s", payload)
	}
	for range eraseItemsPerStep / store.MaxTransactWrites {
		done, err := s.erase(ctx, syncPK(p.Bot, p.Conn), "")
		if err != nil || done {
			return "", done, err
		}
	}
	return "", false, nil
}

// eraseSync erases a deleted connection's sync state: by a job where the process runs
// them, else here (a process without jobs syncs nothing, so has little to erase).
func (s *Service) eraseSync(ctx context.Context, bot, conn string) {
	ctx = context.WithoutCancel(ctx)
	if s.jobs != nil {
		err := s.jobs.Start(ctx, JobErase, jobPayload{Bot: bot, Conn: conn})
		if err == nil {
			return
		}
		s.log.WarnContext(ctx, "crm: start erase job; erasing inline", "connection", conn, "error", err)
	}
	for {
		done, err := s.erase(ctx, syncPK(bot, conn), "")
		if err != nil {
			s.log.WarnContext(ctx, "crm: erase sync state", "connection", conn, "error", err)
			return
		}
		if done {
			return
		}
	}
}

// SyncStep runs one step of a sync job: pages of subscribers (or of the CRM's changes)
// until the step's time is up, each page's results saved with the cursor after it, so that
// a step repeated after a crash goes on from the last page saved and repeats at most one
// page (whose writes the CRM matches by key: no duplicate record).
func (s *Service) SyncStep(ctx context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
	var p jobPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", true, fmt.Errorf("crm: sync job payload: %w", err)
	}
	n, err := jobs.StepNumber(cursor, p.From)
	if err != nil {
		return "", true, fmt.Errorf("crm: sync job: %w", err)
	}
	rec, err := s.loadJob(ctx, p.Bot, p.Conn, p.Job)
	if isNotFound(err) {
		return "", true, nil // the connection, and its jobs with it, are gone
	}
	if err != nil {
		return "", false, err
	}
	if !terminal(rec.Status) && rec.Step == n+1 && rec.Step-p.From >= s.runSteps {
		// The last step of this run ran but its hand-over did not start the next run.
		return "", true, s.handOver(ctx, p, rec.Step)
	}
	if terminal(rec.Status) || rec.Step != n {
		return "", true, nil // finished, or a duplicate delivery of a step that ran
	}
	c, err := s.load(ctx, p.Bot, p.Conn)
	if isNotFound(err) {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	done, err := s.runStep(ctx, c, &rec)
	if errors.Is(err, store.ErrConditionFailed) {
		return "", true, nil // cancelled, or another delivery took the job over
	}
	if err != nil {
		return "", false, err
	}
	if done {
		return "", true, nil
	}
	rec.Step++
	if err := s.save(ctx, &rec); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return "", true, nil
		}
		return "", false, err
	}
	if rec.Step-p.From >= s.runSteps {
		if err := s.handOver(ctx, p, rec.Step); err != nil {
			return "", false, err // the retry of this step hands over again (above)
		}
		return "", true, nil
	}
	return strconv.FormatInt(rec.Step, 10), false, nil
}

// handOver ends a run of a job that has run stepsPerRun steps: a new run goes on from step
// next. Two hand-overs of one step (a retry after a start that did succeed) start two runs,
// of which the second finds the step taken and stops.
func (s *Service) handOver(ctx context.Context, p jobPayload, next int64) error {
	p.From = next
	if err := s.jobs.Start(ctx, JobSync, p); err != nil {
		return fmt.Errorf("crm: continue sync job %s as a new run: %w", p.Job, err)
	}
	return nil
}

// runStep runs pages until the step's time is up; done when the job finished.
func (s *Service) runStep(ctx context.Context, c Connection, rec *jobRecord) (bool, error) {
	m, err := s.mappingAt(ctx, rec.BotID, c.ID, rec.MappingRevision)
	if err != nil {
		return false, err
	}
	y, err := s.newSyncer(ctx, rec.BotID, c, m)
	if err != nil {
		if problem := jobProblem(err); problem != nil {
			return true, s.finish(ctx, rec, JobFailed, problem)
		}
		return false, err
	}
	start := s.now()
	if rec.Status == JobQueued {
		t := stamp(start)
		rec.Status, rec.StartedAt, rec.Began = JobRunning, &t, start
		if err := s.save(ctx, rec); err != nil {
			return false, err
		}
	}
	r := s.rate(c.Provider)
	// The pacer counts on the real clock, as the provider does (crmhttp paces with it).
	pc := crmhttp.NewPace(pace.New(r.N, r.Window, time.Now(), rec.Pace.Times()))
	ctx = crmhttp.WithPace(ctx, pc)
	deadline := start.Add(s.stepDuration)
	// A page may take longer than the queue's lease (a hundred subscribers at a slow rate,
	// a rate limit waited out): before each, the lease is extended past what the page can
	// take, so that no second delivery runs the step beside this one. Step Functions has
	// no lease (ErrNotHandling).
	pageBudget := time.Duration(int64(s.pageSize)*3)*r.Window/time.Duration(r.N) + maxRateWait
	for s.now().Before(deadline) {
		if err := queue.ExtendVisibility(ctx, deadline.Sub(s.now())+pageBudget); err != nil && !errors.Is(err, queue.ErrNotHandling) {
			s.log.WarnContext(ctx, "crm: could not extend the sync step's lease", "job", rec.ID, "error", err)
		}
		var (
			errs []JobError
			fail error
			last bool
		)
		switch {
		case rec.Kind == KindReconcile && rec.Phase == PhasePull:
			errs, last, fail = s.pullPage(ctx, y, rec)
			if last && fail == nil {
				rec.Phase, rec.Cursor, last = PhasePush, "", false
				if m.Deal != nil {
					rec.Phase = PhaseDeals
				}
			}
		case rec.Kind == KindReconcile && rec.Phase == PhaseDeals:
			errs, last, fail = s.dealsPage(ctx, y, rec)
			if last && fail == nil {
				rec.Phase, rec.Cursor, last = PhasePush, "", false
			}
		default:
			errs, last, fail = s.pushPage(ctx, y, rec)
		}
		if fail != nil {
			if errors.Is(fail, crmapi.ErrUnauthorized) {
				s.markReconnect(context.WithoutCancel(ctx), rec.BotID, c.ID)
			}
			if problem := jobProblem(fail); problem != nil {
				return true, s.finish(ctx, rec, JobFailed, problem)
			}
			return false, fail
		}
		rec.Pace = pace.NewLog(pc.Recent(time.Now()))
		// The page's errors go first, in transactions of their own (a page of failures is
		// more than one transaction holds), numbered from the count the job saved: a page
		// repeated after a crash writes the same items again.
		errWrites, err := s.errorWrites(rec, errs)
		if err != nil {
			return false, err
		}
		for chunk := range slices.Chunk(errWrites, store.MaxTransactWrites) {
			if err := s.store.Transact(ctx, chunk); err != nil {
				return false, err
			}
		}
		var extra []store.Write
		if last {
			if rec.Kind == KindReconcile {
				wm, err := item(watermarkKey(rec.BotID, rec.ConnectionID), 0, watermark{Since: rec.Began.Add(-reconcileOverlap)})
				if err != nil {
					return false, err
				}
				extra = append(extra, store.PutOp(wm, store.Always))
			}
			return true, s.finish(ctx, rec, JobSucceeded, nil, extra...)
		}
		if err := s.save(ctx, rec, extra...); err != nil {
			return false, err
		}
	}
	return false, nil
}

// errorWrites are the items of errs, numbered after the job's recorded ones, up to
// MaxJobErrors.
func (s *Service) errorWrites(rec *jobRecord, errs []JobError) ([]store.Write, error) {
	var out []store.Write
	for _, e := range errs {
		if rec.ErrorsRecorded >= MaxJobErrors {
			break
		}
		rec.ErrorsRecorded++
		it, err := item(jobErrorKey(rec.BotID, rec.ConnectionID, rec.ID, rec.ErrorsRecorded), 1, e)
		if err != nil {
			return nil, err
		}
		out = append(out, store.PutOp(it, store.Always))
	}
	return out, nil
}

// jobProblem is the failure that ends a job for err, or nil when err is worth retrying
// (the runner repeats the step).
func jobProblem(err error) *JobProblem {
	var rl *crmapi.RateLimitedError
	var he *httpapi.Error
	switch {
	case errors.Is(err, crmapi.ErrUnauthorized):
		return &JobProblem{Code: "crm_credentials_rejected", Message: "the CRM refused the connection's credentials: connect the account again"}
	case errors.Is(err, crmapi.ErrForbidden):
		return &JobProblem{Code: "crm_permission_denied", Message: "the credentials lack a permission the sync needs at the CRM"}
	case errors.As(err, &rl):
		return nil // the next step waits it out
	case errors.As(err, &he) && he.Status() >= 400 && he.Status() < 500:
		return &JobProblem{Code: he.Code, Message: he.Detail}
	}
	return nil
}

// pushPage syncs the next page of subscribers, syncWorkers at a time.
func (s *Service) pushPage(ctx context.Context, y *syncer, rec *jobRecord) ([]JobError, bool, error) {
	people, next, err := s.subscribers.Page(ctx, rec.BotID, s.pageSize, rec.Cursor)
	if err != nil {
		return nil, false, err
	}
	results := make([]pushResult, len(people))
	var wg sync.WaitGroup
	work := make(chan int)
	for range min(syncWorkers, len(people)) {
		wg.Go(func() {
			for i := range work {
				results[i] = y.push(ctx, people[i])
			}
		})
	}
	for i := range people {
		work <- i
	}
	close(work)
	wg.Wait()
	var errs []JobError
	for i, r := range results {
		if r.fatal != nil {
			return nil, false, r.fatal // the page is repeated: what it wrote is matched by key
		}
		rec.Progress.Processed++
		switch r.Outcome {
		case OutcomeWritten:
			rec.Progress.Written++
			if r.DealOpened {
				rec.Progress.DealsOpened++
			}
		case OutcomeUnchanged:
			rec.Progress.Unchanged++
		case OutcomeSkipped:
			rec.Progress.Skipped++
		case OutcomeFailed:
			rec.Progress.Failed++
			errs = append(errs, JobError{SubscriberID: people[i].ID, RecordError: *r.Error, At: stamp(s.now())})
		}
	}
	rec.Cursor = next
	return errs, next == "", nil
}

// pullPage reads the next page of the CRM's changed records and pulls each.
func (s *Service) pullPage(ctx context.Context, y *syncer, rec *jobRecord) ([]JobError, bool, error) {
	var fields []string
	for _, f := range y.m.Fields {
		if f.Direction != DirectionPush {
			fields = append(fields, f.Target)
		}
	}
	if len(fields) == 0 {
		return nil, true, nil // nothing is pulled: the push pass is the reconcile
	}
	var records []crmapi.Record
	var next string
	err := retryCall(ctx, func() error {
		var err error
		records, next, err = y.cl.ChangedSince(ctx, y.m.Object, rec.Since, fields, rec.Cursor)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	for _, r := range records {
		outcome, opened, err := y.pull(ctx, r)
		if err != nil {
			return nil, false, err
		}
		rec.Progress.Processed++
		switch outcome {
		case pullWritten:
			rec.Progress.Pulled++
		case pullConflict:
			rec.Progress.Conflicts += int64(opened)
		default:
			rec.Progress.Unchanged++
		}
	}
	rec.Cursor = next
	return nil, next == "", nil
}

// dealsPage reads the next page of the CRM's changed deals and pulls each.
func (s *Service) dealsPage(ctx context.Context, y *syncer, rec *jobRecord) ([]JobError, bool, error) {
	var deals []crmapi.Deal
	var next string
	err := retryCall(ctx, func() error {
		var err error
		deals, next, err = y.cl.DealsChangedSince(ctx, rec.Since, rec.Cursor)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	for _, d := range deals {
		changed, err := y.pullDeal(ctx, d)
		if err != nil {
			return nil, false, err
		}
		rec.Progress.Processed++
		if changed {
			rec.Progress.DealsPulled++
		} else {
			rec.Progress.Unchanged++
		}
	}
	rec.Cursor = next
	return nil, next == "", nil
}

// mappingAt reads revision rev of a connection's mapping: a job syncs with the revision it
// started with.
func (s *Service) mappingAt(ctx context.Context, bot, conn string, rev int64) (Mapping, error) {
	it, err := s.store.Get(ctx, revisionKey(bot, conn, rev))
	if errors.Is(err, store.ErrNotFound) {
		return Mapping{}, httpapi.NotFound("CRM mapping revision")
	}
	if err != nil {
		return Mapping{}, err
	}
	return store.Decode[Mapping](it)
}
