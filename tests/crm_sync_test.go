package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// The CRM sync end to end (issue 14, docs/crm.md): sync jobs paced to the Pipedrive fake's
// rate limit, resumed after a crash; conflicts; the job routes; the per-subscriber actions.

// crmSync is a local process whose demo bot has a Pipedrive connection to the fake.
type crmSync struct {
	s    *server
	pd   *pipedrivefake.Server
	dir  string
	env  []string
	args []string
	tok  string
	api  string // /api/bots/{botID}
	id   string // the connection's id
	conn string // the connection's path
}

// pipedriveEnv is the environment that points the process at the fake and paces syncs at
// rate calls per 2 seconds (what the fake is set to allow, when it limits).
func pipedriveEnv(pd *pipedrivefake.Server, rate int) []string {
	return []string{
		"CRM_PRIVATE_PROVIDER_ADDRESSES=allow",
		"CRM_PIPEDRIVE_API_BASE_URL=" + pd.URL(),
		fmt.Sprintf("CRM_RATE_LIMITS=pipedrive=%d/2s", rate),
	}
}

// startCRMSync starts a process paced at rate calls per 2 s and connects its demo bot to the
// Pipedrive fake.
func startCRMSync(t *testing.T, rate int) *crmSync {
	t.Helper()
	pd := pipedrivefake.New(t)
	e := &crmSync{pd: pd, dir: t.TempDir(), env: pipedriveEnv(pd, rate)}
	e.s = startWithEnv(t, e.dir, e.env)
	e.s.secret(pipedrivefake.APIToken)
	e.tok, e.api = e.s.demo.Token, "/api/bots/"+e.s.demo.BotID
	e.connect(t)
	return e
}

// connect connects the bot to the fake with the right key.
func (e *crmSync) connect(t *testing.T) {
	t.Helper()
	res := e.s.post(e.tok, e.api+"/crm/connections/pipedrive", map[string]any{"api_key": pipedrivefake.APIToken, "company_domain": "demo-shop"})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	e.id = res.JSON(t)["id"].(string)
	e.conn = e.api + "/crm/connections/" + e.id
}

// crash kills the process (-9) and starts another on the same data and environment.
func (e *crmSync) crash(t *testing.T) {
	t.Helper()
	e.s.kill()
	e.s = startWithEnv(t, e.dir, e.env, e.args...)
	e.s.secret(pipedrivefake.APIToken)
}

// field creates a custom field of the bot.
func (e *crmSync) field(t *testing.T, name, typ string) {
	t.Helper()
	res := e.s.post(e.tok, e.api+"/fields", map[string]any{"name": name, "type": typ})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

// subscriber creates a Telegram subscriber with body's members; it returns its id.
func (e *crmSync) subscriber(t *testing.T, body map[string]any) string {
	t.Helper()
	res := e.s.post(e.tok, e.api+"/subscribers", body)
	require.Less(t, res.Status, 300, "%s", res.Body)
	return res.JSON(t)["id"].(string)
}

// mapping saves the connection's first mapping.
func (e *crmSync) mapping(t *testing.T, fields ...map[string]any) {
	t.Helper()
	list := make([]any, len(fields))
	for i, f := range fields {
		list[i] = f
	}
	res := e.s.do(req{Method: http.MethodPut, Path: e.conn + "/mapping", Token: e.tok,
		Body: map[string]any{"object": "persons", "key": "email", "fields": list}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
}

// The route templates of the sync surface, for conforms.
const (
	tmplConn         = "/api/bots/{botID}/crm/connections/{connectionID}"
	tmplJobs         = tmplConn + "/jobs"
	tmplJob          = tmplJobs + "/{jobID}"
	tmplConflicts    = tmplConn + "/conflicts"
	tmplConflict     = tmplConflicts + "/{conflictID}"
	tmplSubscriberCR = "/api/bots/{botID}/subscribers/{subscriberID}/crm"
)

// syncJob is a job as GET .../jobs/{jobID} answers it.
type syncJob struct {
	ID             string `json:"id"`
	ConnectionID   string `json:"connection_id"`
	Kind           string `json:"kind"`
	Status         string `json:"status"`
	Phase          string `json:"phase"`
	ErrorsRecorded int    `json:"errors_recorded"`
	Progress       struct {
		Processed   int64 `json:"processed"`
		Written     int64 `json:"written"`
		Unchanged   int64 `json:"unchanged"`
		Skipped     int64 `json:"skipped"`
		Failed      int64 `json:"failed"`
		Pulled      int64 `json:"pulled"`
		Conflicts   int64 `json:"conflicts"`
		DealsOpened int64 `json:"deals_opened"`
		DealsPulled int64 `json:"deals_pulled"`
	} `json:"progress"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func decodeJob(t *testing.T, res resp) syncJob {
	t.Helper()
	var j syncJob
	require.NoError(t, json.Unmarshal(res.Body, &j), "%s", res.Body)
	return j
}

// startJob starts a job of kind: 202 with the job and its Location.
func (e *crmSync) startJob(t *testing.T, kind string) syncJob {
	t.Helper()
	res := e.s.post(e.tok, e.conn+"/jobs", map[string]any{"kind": kind})
	require.Equal(t, http.StatusAccepted, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, tmplJobs, e.conn+"/jobs", res)
	j := decodeJob(t, res)
	assert.Equal(t, e.conn+"/jobs/"+j.ID, res.Header.Get("Location"))
	assert.Equal(t, kind, j.Kind)
	assert.Equal(t, e.id, j.ConnectionID)
	assert.Contains(t, []string{"queued", "running"}, j.Status)
	return j
}

// job reads a job.
func (e *crmSync) job(t *testing.T, id string) syncJob {
	t.Helper()
	res := e.s.get(e.tok, e.conn+"/jobs/"+id)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	return decodeJob(t, res)
}

// finished waits for a job to succeed, failing at once if it ends otherwise.
func (e *crmSync) finished(t *testing.T, id string, within time.Duration) syncJob {
	t.Helper()
	var j syncJob
	eventually(t, within, "sync job "+id+" succeeds", func() bool {
		j = e.job(t, id)
		require.NotContains(t, []string{"failed", "cancelled"}, j.Status, "the job ended: %+v", j)
		return j.Status == "succeeded"
	})
	res := e.s.get(e.tok, e.conn+"/jobs/"+id)
	conforms(t, http.MethodGet, tmplJob, e.conn+"/jobs/"+id, res)
	return j
}

// createSubscribers creates n Telegram subscribers over the API, each with an email, conc
// requests at a time (there is no bulk subscriber route). It returns the emails.
func (e *crmSync) createSubscribers(t *testing.T, n, conc int) []string {
	t.Helper()
	client := &http.Client{Timeout: 60 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}}
	defer client.CloseIdleConnections()
	emails := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				emails[i] = fmt.Sprintf("p%05d@example.org", i)
				body, _ := json.Marshal(map[string]any{"channel": "telegram", "external_id": fmt.Sprint(2_000_000 + i),
					"first_name": "Sub", "last_name": fmt.Sprint(i), "fields": map[string]any{"email": emails[i]}})
				hr, _ := http.NewRequest(http.MethodPost, e.s.base+e.api+"/subscribers", bytes.NewReader(body))
				hr.Header.Set("Authorization", "Bearer "+e.tok)
				hr.Header.Set("Content-Type", "application/json")
				res, err := client.Do(hr)
				if err == nil {
					res.Body.Close()
					if res.StatusCode >= 300 {
						err = fmt.Errorf("status %d", res.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("subscriber %d: %v", i, err))
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	require.Empty(t, failures)
	return emails
}

// personEmails counts the fake's persons by (primary) email.
func personEmails(pd *pipedrivefake.Server) map[string]int {
	out := map[string]int{}
	for _, r := range pd.Records("persons") {
		list, _ := r.Props["email"].([]any)
		for _, e := range list {
			if m, ok := e.(map[string]any); ok && m["primary"] == true {
				out[fmt.Sprint(m["value"])]++
			}
		}
	}
	return out
}

// crmResumeRate is the fake's limit (and the sync's pace) in TestCRMInitialSyncResumesAfterKill,
// calls per 2 seconds. Pipedrive's own is 80 (Essential plan): at 2 calls a new record (a
// search, a create), 10,000 records would take over 8 minutes at it, so the fake allows
// 600, which keeps the sync near a minute on a 2-core machine while the limit still binds
// (the platform makes ~1,000 calls a second there: tests/bench -crm).
const crmResumeRate = 600

// An initial sync of 10,000 subscribers, paced to the fake's rate limit, killed (-9) once
// ~2,000 are through and resumed by a new process on the same data: the CRM ends with
// exactly one person per subscriber, and the pacing kept the 429s few.
func TestCRMInitialSyncResumesAfterKill(t *testing.T) {
	t.Parallel()
	const n = 10_000
	e := startCRMSync(t, crmResumeRate)
	e.pd.SetRateLimit(crmResumeRate, 2*time.Second)
	e.field(t, "email", "string")
	began := time.Now()
	emails := e.createSubscribers(t, n, 8)
	t.Logf("%d subscribers created over the API in %s", n, time.Since(began).Round(time.Second))
	e.mapping(t, map[string]any{"source": "subscriber:first_name", "target": "first_name", "direction": "push"})

	began = time.Now()
	j := e.startJob(t, "initial_sync")
	// Killed mid-page: past 2,000 saved, with records of the next page already written, which
	// the resumed job writes again and must match by email instead of creating anew.
	eventually(t, 3*time.Minute, "2,000 subscribers synced and the next page under way", func() bool {
		j = e.job(t, j.ID)
		// Queued until the local queue hands the first step to a worker.
		require.Contains(t, []string{"queued", "running"}, j.Status, "the job finished before the kill: %+v", j)
		return j.Progress.Processed >= 2000 && int64(e.pd.Count("persons")) > j.Progress.Processed
	})
	e.crash(t)
	// The new process waits for the killed step's lease: what the fake holds now is what
	// the killed process wrote, some of it after the progress it saved last.
	atKill := e.pd.Count("persons")
	require.Less(t, atKill, n, "killed mid-sync")
	t.Logf("killed at %d processed, %d persons in the CRM, after %s", j.Progress.Processed, atKill, time.Since(began).Round(time.Second))
	// The step the killed process ran is redelivered once its lease (the local queue's
	// visibility timeout) runs out.
	restarted, killedAt := time.Now(), j.Progress.Processed
	eventually(t, 3*time.Minute, "the job goes on after the restart", func() bool {
		j = e.job(t, j.ID)
		return j.Status == "succeeded" || j.Progress.Processed > killedAt
	})
	t.Logf("the job went on %s after the restart", time.Since(restarted).Round(time.Second))

	j = e.finished(t, j.ID, 8*time.Minute)
	took := time.Since(began)
	t.Logf("synced in %s: %+v; %d requests to the fake, %d refused with 429", took.Round(time.Second), j.Progress,
		e.pd.Requests(), e.pd.Limited())

	assert.GreaterOrEqual(t, j.Progress.Processed, int64(n), "every subscriber was processed")
	assert.Zero(t, j.Progress.Failed)
	assert.Equal(t, n, e.pd.Count("persons"), "one person per subscriber")
	seen := personEmails(e.pd)
	assert.Len(t, seen, n)
	for _, email := range emails {
		assert.Equal(t, 1, seen[email], "%s is in the CRM %d times", email, seen[email])
	}
	// The pace keeps under the limit: what 429s there are come from the crash (the new
	// process does not know the calls the killed one made after its last saved page).
	assert.LessOrEqual(t, e.pd.Limited(), crmResumeRate, "the sync is paced under the fake's limit")

	res := e.s.get(e.tok, e.conn+"/jobs")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplJobs, e.conn+"/jobs", res)
}

// conflict is a conflict as the API answers it.
type conflict struct {
	ID            string `json:"id"`
	SubscriberID  string `json:"subscriber_id"`
	RecordID      string `json:"record_id"`
	Source        string `json:"source"`
	Target        string `json:"target"`
	PlatformValue any    `json:"platform_value"`
	CRMValue      any    `json:"crm_value"`
	BaseValue     any    `json:"base_value"`
	Status        string `json:"status"`
	Resolution    string `json:"resolution"`
	ResolvedValue any    `json:"resolved_value"`
	Revision      int64  `json:"revision"`
}

// conflicts lists the connection's conflicts (status "" for all).
func (e *crmSync) conflicts(t *testing.T, status string) []conflict {
	t.Helper()
	path := e.conn + "/conflicts"
	if status != "" {
		path += "?status=" + status
	}
	res := e.s.get(e.tok, path)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplConflicts, path, res)
	var list struct {
		Data []conflict `json:"data"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &list))
	return list.Data
}

// A field mapped both ways, changed in the CRM and on the subscriber between two syncs: the
// reconcile opens one conflict with both values; it is resolved at its revision only, once;
// the subscriber takes the CRM's value; a later CRM-only change is pulled without conflict.
func TestCRMConflictResolved(t *testing.T) {
	t.Parallel()
	e := startCRMSync(t, 80)
	e.field(t, "email", "string")
	sub := e.subscriber(t, map[string]any{"channel": "telegram", "external_id": "7001", "first_name": "Ann",
		"fields": map[string]any{"email": "ann@example.org"}})
	e.mapping(t, map[string]any{"source": "subscriber:first_name", "target": "first_name", "direction": "both"})

	j := e.finished(t, e.startJob(t, "initial_sync").ID, 2*time.Minute)
	assert.Equal(t, int64(1), j.Progress.Written)
	require.Equal(t, 1, e.pd.Count("persons"))
	person := e.pd.Records("persons")[0]
	assert.Equal(t, "Ann", person.Props["first_name"])
	var personID int
	_, err := fmt.Sscan(person.ID, &personID)
	require.NoError(t, err)

	// Both sides change the field.
	require.True(t, e.pd.Change("persons", personID, map[string]any{"first_name": "Annie"}))
	res := e.s.get(e.tok, e.api+"/subscribers/"+sub)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.s.patch(e.tok, e.api+"/subscribers/"+sub, map[string]any{"expected_revision": res.JSON(t)["revision"], "first_name": "Anna"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	j = e.finished(t, e.startJob(t, "reconcile").ID, 2*time.Minute)
	assert.Equal(t, int64(1), j.Progress.Conflicts, "%+v", j.Progress)
	assert.Zero(t, j.Progress.Pulled)
	open := e.conflicts(t, "open")
	require.Len(t, open, 1)
	c := open[0]
	assert.Equal(t, sub, c.SubscriberID)
	assert.Equal(t, person.ID, c.RecordID)
	assert.Equal(t, "subscriber:first_name", c.Source)
	assert.Equal(t, "first_name", c.Target)
	assert.Equal(t, "Anna", c.PlatformValue)
	assert.Equal(t, "Annie", c.CRMValue)
	assert.Equal(t, "Ann", c.BaseValue)
	assert.Equal(t, "open", c.Status)
	assert.Empty(t, e.conflicts(t, "resolved"))
	// While it is open, neither side is written.
	got, _ := e.pd.Record("persons", personID)
	assert.Equal(t, "Annie", got.Props["first_name"])
	assert.Equal(t, "Anna", e.s.get(e.tok, e.api+"/subscribers/"+sub).JSON(t)["first_name"])

	one := e.conn + "/conflicts/" + c.ID
	res = e.s.get(e.tok, one)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplConflict, one, res)
	res = e.s.get(e.tok, e.conn+"/conflicts/cfl_00000000000000000000000000")
	assert.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplConflict, e.conn+"/conflicts/cfl_00000000000000000000000000", res)
	res = e.s.get(e.tok, e.conn+"/conflicts?status=closed")
	assert.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)

	// A stale revision is refused and changes nothing; the right one resolves it.
	res = e.s.post(e.tok, one+"/resolve", map[string]any{"expected_revision": c.Revision + 1, "choose": "crm"})
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "stale_revision", res.Code(t))
	conforms(t, http.MethodPost, tmplConflict+"/resolve", one+"/resolve", res)
	res = e.s.post(e.tok, one+"/resolve", map[string]any{"expected_revision": c.Revision, "choose": "crm", "value": "x"})
	assert.Equal(t, http.StatusBadRequest, res.Status, "a value only goes with choose=value: %s", res.Body)
	res = e.s.post(e.tok, one+"/resolve", map[string]any{"expected_revision": c.Revision, "choose": "crm"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, tmplConflict+"/resolve", one+"/resolve", res)
	var resolved conflict
	require.NoError(t, json.Unmarshal(res.Body, &resolved))
	assert.Equal(t, "resolved", resolved.Status)
	assert.Equal(t, "crm", resolved.Resolution)
	assert.Equal(t, "Annie", resolved.ResolvedValue)
	assert.Equal(t, c.Revision+1, resolved.Revision)
	assert.Equal(t, "Annie", e.s.get(e.tok, e.api+"/subscribers/"+sub).JSON(t)["first_name"], "the subscriber took the CRM's value")
	got, _ = e.pd.Record("persons", personID)
	assert.Equal(t, "Annie", got.Props["first_name"])
	assert.Empty(t, e.conflicts(t, "open"))
	assert.Len(t, e.conflicts(t, "resolved"), 1)

	// Resolved once: again at its new revision is conflict_resolved, at the old one stale.
	res = e.s.post(e.tok, one+"/resolve", map[string]any{"expected_revision": resolved.Revision, "choose": "platform"})
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "conflict_resolved", res.Code(t))
	conforms(t, http.MethodPost, tmplConflict+"/resolve", one+"/resolve", res)
	res = e.s.post(e.tok, one+"/resolve", map[string]any{"expected_revision": c.Revision, "choose": "crm"})
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "stale_revision", res.Code(t))

	// A change in the CRM only is pulled into the subscriber, with no conflict.
	require.True(t, e.pd.Change("persons", personID, map[string]any{"first_name": "Hannah"}))
	j = e.finished(t, e.startJob(t, "reconcile").ID, 2*time.Minute)
	assert.Equal(t, int64(1), j.Progress.Pulled, "%+v", j.Progress)
	assert.Zero(t, j.Progress.Conflicts)
	assert.Equal(t, "Hannah", e.s.get(e.tok, e.api+"/subscribers/"+sub).JSON(t)["first_name"])
	assert.Empty(t, e.conflicts(t, "open"))
	assert.Len(t, e.conflicts(t, ""), 1)
	persons := e.pd.Count("persons")
	assert.Equal(t, 1, persons, "no sync made a second record")
}

// The job routes: 422 without a mapping, per-record errors, 409 while a job runs, cancel,
// the list newest first, 404s, and 409 reconnect_required once the CRM refused the key.
func TestCRMSyncJobs(t *testing.T) {
	t.Parallel()
	e := startCRMSync(t, 80)
	e.pd.SetRateLimit(80, 2*time.Second)
	e.field(t, "email", "string")

	res := e.s.post(e.tok, e.conn+"/jobs", map[string]any{"kind": "initial_sync"})
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "mapping_required", res.Code(t))
	conforms(t, http.MethodPost, tmplJobs, e.conn+"/jobs", res)
	res = e.s.post(e.tok, e.conn+"/jobs", map[string]any{"kind": "everything"})
	assert.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, tmplJobs, e.conn+"/jobs", res)

	const first = 30
	for i := range first {
		e.subscriber(t, map[string]any{"channel": "telegram", "external_id": fmt.Sprint(8000 + i), "first_name": "Sub",
			"fields": map[string]any{"email": fmt.Sprintf("j%03d@example.org", i)}})
	}
	e.mapping(t, map[string]any{"source": "subscriber:first_name", "target": "first_name", "direction": "push"})
	// The discovery the job reads is cached by the mapping's save: the job's first call at
	// the fake is a subscriber's search, which the fake refuses once. Pipedrive has no
	// per-record failure to inject, so the fake's FailNext stands for a record it refuses.
	e.pd.FailNext(1, http.StatusBadRequest)
	j := e.finished(t, e.startJob(t, "initial_sync").ID, 2*time.Minute)
	assert.Equal(t, int64(first), j.Progress.Processed)
	assert.Equal(t, int64(first-1), j.Progress.Written)
	assert.Equal(t, int64(1), j.Progress.Failed)
	assert.Equal(t, 1, j.ErrorsRecorded)
	assert.Equal(t, first-1, e.pd.Count("persons"))
	res = e.s.get(e.tok, e.conn+"/jobs/"+j.ID+"/errors")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplJob+"/errors", e.conn+"/jobs/"+j.ID+"/errors", res)
	var errs struct {
		Data []struct {
			SubscriberID   string `json:"subscriber_id"`
			Code           string `json:"code"`
			ProviderStatus int    `json:"provider_status"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &errs))
	require.Len(t, errs.Data, 1, "%s", res.Body)
	assert.NotEmpty(t, errs.Data[0].SubscriberID)
	assert.Equal(t, "crm_request_rejected", errs.Data[0].Code)
	assert.Equal(t, http.StatusBadRequest, errs.Data[0].ProviderStatus)
	// The failed subscriber's status says so.
	res = e.s.get(e.tok, e.api+"/subscribers/"+errs.Data[0].SubscriberID+"/crm")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Contains(t, string(res.Body), `"status":"failed"`)

	// Enough new subscribers for a job that runs a while at 40 calls a second.
	const more = 300
	for i := range more {
		e.subscriber(t, map[string]any{"channel": "telegram", "external_id": fmt.Sprint(9000 + i), "first_name": "More",
			"fields": map[string]any{"email": fmt.Sprintf("m%03d@example.org", i)}})
	}
	long := e.startJob(t, "initial_sync")
	res = e.s.post(e.tok, e.conn+"/jobs", map[string]any{"kind": "reconcile"})
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "job_running", res.Code(t))
	assert.Equal(t, long.ID, res.JSON(t)["job_id"])
	conforms(t, http.MethodPost, tmplJobs, e.conn+"/jobs", res)

	res = e.s.post(e.tok, e.conn+"/jobs/"+long.ID+"/cancel", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, tmplJob+"/cancel", e.conn+"/jobs/"+long.ID+"/cancel", res)
	assert.Equal(t, "cancelled", decodeJob(t, res).Status)
	// The step in flight stops at its page's end: the fake stops hearing from the job.
	var calls int
	eventually(t, time.Minute, "the cancelled job stops calling the CRM", func() bool {
		before := e.pd.Requests()
		time.Sleep(2 * time.Second)
		calls = e.pd.Requests()
		return calls == before
	})
	stopped := e.job(t, long.ID)
	assert.Equal(t, "cancelled", stopped.Status)
	assert.Less(t, e.pd.Count("persons"), first+more, "cancelled before the end")
	res = e.s.post(e.tok, e.conn+"/jobs/"+long.ID+"/cancel", nil)
	assert.Equal(t, http.StatusOK, res.Status, "cancelling a finished job answers it as it is: %s", res.Body)
	assert.Equal(t, "cancelled", decodeJob(t, res).Status)

	// Another job finishes what the cancelled one left, matching the records it wrote.
	last := e.finished(t, e.startJob(t, "initial_sync").ID, 3*time.Minute)
	assert.Zero(t, last.Progress.Failed)
	assert.Equal(t, first+more, e.pd.Count("persons"))
	for email, k := range personEmails(e.pd) {
		assert.Equal(t, 1, k, email)
	}

	res = e.s.get(e.tok, e.conn+"/jobs")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplJobs, e.conn+"/jobs", res)
	var list struct {
		Data []syncJob `json:"data"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &list))
	var order []string
	for _, x := range list.Data {
		order = append(order, x.ID)
	}
	assert.Equal(t, []string{last.ID, long.ID, j.ID}, order, "newest first")

	for _, path := range []string{e.conn + "/jobs/job_00000000000000000000000000", e.conn + "/jobs/nope/errors"} {
		res = e.s.get(e.tok, path)
		assert.Equal(t, http.StatusNotFound, res.Status, "%s: %s", path, res.Body)
	}
	res = e.s.post(e.tok, e.conn+"/jobs/job_00000000000000000000000000/cancel", nil)
	assert.Equal(t, http.StatusNotFound, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, tmplJob+"/cancel", e.conn+"/jobs/job_00000000000000000000000000/cancel", res)
	other := e.s.newAccount("Other")
	res = e.s.get(other.Token, e.conn+"/jobs")
	assert.Equal(t, http.StatusNotFound, res.Status, "another account's bot")
	reader := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--scopes", "crm:read")["token"]
	res = e.s.get(reader, e.conn+"/jobs/"+j.ID)
	assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.s.post(reader, e.conn+"/jobs", map[string]any{"kind": "reconcile"})
	assert.Equal(t, http.StatusForbidden, res.Status, "%s", res.Body)
	assert.Equal(t, "insufficient_scope", res.Code(t))

	// The CRM refuses the key: the connection needs reconnecting before any job.
	e.pd.RevokeToken(pipedrivefake.APIToken)
	res = e.s.get(e.tok, e.conn+"/objects/persons/fields?refresh=true")
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "crm_credentials_rejected", res.Code(t))
	res = e.s.post(e.tok, e.conn+"/jobs", map[string]any{"kind": "reconcile"})
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "reconnect_required", res.Code(t))
	conforms(t, http.MethodPost, tmplJobs, e.conn+"/jobs", res)
}

// The per-subscriber actions: status before and after a manual sync, the Dialogs right and
// the subscribers scopes, another account's subscriber, and a conversation note with the
// bot's side of the conversation only.
func TestCRMSubscriberActions(t *testing.T) {
	t.Parallel()
	pd := pipedrivefake.New(t)
	f := startFanout(t, pipedriveEnv(pd, 80)...)
	e := &crmSync{s: f.s, pd: pd, dir: f.dir, env: f.env, args: f.args, tok: f.tok, api: f.api}
	e.s.secret(pipedrivefake.APIToken)
	e.connect(t)
	e.field(t, "email", "string")
	e.mapping(t, map[string]any{"source": "subscriber:first_name", "target": "first_name", "direction": "push"})

	sub := e.subscriber(t, map[string]any{"channel": "telegram", "external_id": "6100", "first_name": "Ben",
		"fields": map[string]any{"email": "ben@example.org"}})
	base := e.api + "/subscribers/" + sub + "/crm"

	res := e.s.get(e.tok, base)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplSubscriberCR, base, res)
	var st struct {
		Data []struct {
			ConnectionID  string `json:"connection_id"`
			Provider      string `json:"provider"`
			Status        string `json:"status"`
			RecordID      string `json:"record_id"`
			OpenConflicts []any  `json:"open_conflicts"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &st))
	require.Len(t, st.Data, 1)
	assert.Equal(t, e.id, st.Data[0].ConnectionID)
	assert.Equal(t, "pipedrive", st.Data[0].Provider)
	assert.Equal(t, "not_synced", st.Data[0].Status)
	assert.Empty(t, st.Data[0].RecordID)
	assert.Zero(t, pd.Count("persons"))

	res = e.s.post(e.tok, base+"/sync", map[string]any{"connection_id": e.id})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, tmplSubscriberCR+"/sync", base+"/sync", res)
	var synced struct {
		Data []struct {
			ConnectionID string `json:"connection_id"`
			Outcome      string `json:"outcome"`
			RecordID     string `json:"record_id"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &synced))
	require.Len(t, synced.Data, 1)
	assert.Equal(t, e.id, synced.Data[0].ConnectionID)
	assert.Equal(t, "written", synced.Data[0].Outcome)
	require.Equal(t, 1, pd.Count("persons"))
	assert.Equal(t, pd.Records("persons")[0].ID, synced.Data[0].RecordID)

	res = e.s.get(e.tok, base)
	require.NoError(t, json.Unmarshal(res.Body, &st))
	require.Len(t, st.Data, 1)
	assert.Equal(t, "synced", st.Data[0].Status)
	assert.Equal(t, synced.Data[0].RecordID, st.Data[0].RecordID)
	res = e.s.post(e.tok, base+"/sync", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	require.NoError(t, json.Unmarshal(res.Body, &synced))
	require.Len(t, synced.Data, 1, "every connection with a mapping")
	assert.Equal(t, "unchanged", synced.Data[0].Outcome)
	assert.Equal(t, 1, pd.Count("persons"))

	// Without the Dialogs right, or subscribers:write, or outside the account: refused.
	noDialogs := e.s.admin("user", "create", "--account", e.s.demo.AccountID, "--rights", "reactions")["user_id"]
	noDialogsTok := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--user", noDialogs, "--scopes", "*")["token"]
	readOnly := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--scopes", "subscribers:read")["token"]
	other := e.s.newAccount("Other")
	note := map[string]any{"connection_id": e.id}
	for _, c := range []struct {
		name   string
		token  string
		method string
		route  string // after .../crm
		path   string
		body   any
		status int
		code   string
	}{
		{"status without dialogs", noDialogsTok, http.MethodGet, "", base, nil, 403, "missing_right"},
		{"sync without dialogs", noDialogsTok, http.MethodPost, "/sync", base + "/sync", nil, 403, "missing_right"},
		{"notes without dialogs", noDialogsTok, http.MethodPost, "/notes", base + "/notes", note, 403, "missing_right"},
		{"sync without subscribers:write", readOnly, http.MethodPost, "/sync", base + "/sync", nil, 403, "insufficient_scope"},
		{"notes without subscribers:write", readOnly, http.MethodPost, "/notes", base + "/notes", note, 403, "insufficient_scope"},
		{"status of another account's bot", other.Token, http.MethodGet, "", base, nil, 404, ""},
		{"sync of another account's bot", other.Token, http.MethodPost, "/sync", base + "/sync", nil, 404, ""},
		{"this subscriber under another account's bot", e.tok, http.MethodGet, "", "/api/bots/" + other.Bot + "/subscribers/" + sub + "/crm", nil, 404, ""},
		{"an unknown subscriber", e.tok, http.MethodPost, "/notes", e.api + "/subscribers/sub_00000000000000000000000000/crm/notes", note, 404, ""},
	} {
		res := e.s.do(req{Method: c.method, Path: c.path, Token: c.token, Body: c.body})
		assert.Equal(t, c.status, res.Status, "%s: %s", c.name, res.Body)
		if c.code != "" {
			assert.Equal(t, c.code, res.Code(t), c.name)
		}
		conforms(t, c.method, tmplSubscriberCR+c.route, c.path, res)
	}
	res = e.s.get(readOnly, base)
	assert.Equal(t, http.StatusOK, res.Status, "subscribers:read reads the status: %s", res.Body)

	// No conversation yet: nothing to export.
	res = e.s.post(e.tok, base+"/notes", note)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "no_conversation", res.Code(t))
	conforms(t, http.MethodPost, tmplSubscriberCR+"/notes", base+"/notes", res)
	assert.Empty(t, pd.Notes())

	// A conversation: the bot answers /start and a message it recognizes by a pattern.
	f.publish(t, `{"name":"Welcome","trigger":{"type":"start"},"steps":[{"id":"hi","type":"send_text","text":"Welcome to Demo Shop!"}]}`)
	f.publish(t, `{"name":"Orders","trigger":{"type":"keyword","pattern":"order"},"steps":[{"id":"o","type":"send_text","text":"Your order ships tomorrow."}]}`)
	carl := fake.User{ID: 6200, FirstName: "Carl", LastName: "Diaz", LanguageCode: "en"}
	const private = "where is my order 4711-SECRET"
	f.deliver(t, f.tg.TextUpdate(carl, "/start"))
	eventually(t, 20*time.Second, "the welcome", func() bool { return len(f.tg.Sent(carl.ID)) >= 1 })
	f.deliver(t, f.tg.TextUpdate(carl, private))
	eventually(t, 20*time.Second, "the order answer", func() bool { return len(f.tg.Sent(carl.ID)) >= 2 })
	talker := f.subscriber(t, carl)
	eventually(t, 20*time.Second, "both runs are recorded", func() bool {
		runs := f.executions(t, talker)
		return len(runs) == 2 && runs[0].Status == "completed" && runs[1].Status == "completed"
	})
	// The record is matched by email: the subscriber needs one.
	tp := e.api + "/subscribers/" + talker
	res = e.s.get(e.tok, tp)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.s.patch(e.tok, tp, map[string]any{"expected_revision": res.JSON(t)["revision"], "fields": map[string]any{"email": "carl@example.org"}})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	res = e.s.post(e.tok, tp+"/crm/notes", note)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, tmplSubscriberCR+"/notes", tp+"/crm/notes", res)
	n := res.JSON(t)
	assert.Equal(t, e.id, n["connection_id"])
	assert.Equal(t, "persons", n["object"])
	assert.Equal(t, float64(2), n["runs"])
	require.Equal(t, 2, pd.Count("persons"), "the subscriber was synced first: the CRM had no record")
	notes := pd.Notes()
	require.Len(t, notes, 1)
	assert.Equal(t, "persons", notes[0].Object)
	assert.Equal(t, n["record_id"], fmt.Sprint(notes[0].RecordID))
	assert.Contains(t, notes[0].Content, "Welcome to Demo Shop!")
	assert.Contains(t, notes[0].Content, "Your order ships tomorrow.")
	for _, theirs := range []string{"4711", "SECRET", "where is my", "/start"} {
		assert.NotContains(t, notes[0].Content, theirs, "the note holds nothing the subscriber wrote")
	}
	t.Logf("note: %q", notes[0].Content)
}
