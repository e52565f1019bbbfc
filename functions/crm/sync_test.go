package crm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/subscribers"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// starts is a jobs.Starter that keeps what it was asked to start: the test runs the steps.
type starts struct {
	mu   sync.Mutex
	list []started
}

type started struct {
	kind    string
	payload json.RawMessage
}

func (s *starts) Start(_ context.Context, kind string, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.list = append(s.list, started{kind, b})
	return nil
}

func (s *starts) last(t *testing.T) started {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	require.NotEmpty(t, s.list)
	return s.list[len(s.list)-1]
}

// run drives the last started job's steps to the end, as a runner would, and returns the
// number of steps.
func (f *mappingFixture) run(t *testing.T) int {
	t.Helper()
	j := f.jobs.last(t)
	require.Equal(t, JobSync, j.kind)
	cursor := ""
	for n := 1; ; n++ {
		require.Less(t, n, 1000, "the job never finishes")
		next, done, err := f.svc.SyncStep(t.Context(), j.payload, cursor)
		require.NoError(t, err)
		if done {
			return n
		}
		cursor = next
	}
}

// sync starts a job of kind on the HubSpot connection, runs it and returns it as the API
// shows it.
func (f *mappingFixture) sync(t *testing.T, kind string) map[string]any {
	t.Helper()
	res := f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": kind})
	require.Equal(t, http.StatusAccepted, res.Code, res.Body)
	id := res.JSON["id"].(string)
	assert.Equal(t, f.hsURL+"/jobs/"+id, res.Header.Get("Location"))
	assert.Equal(t, JobQueued, res.JSON["status"])
	f.run(t)
	res = f.Do(t, "GET", f.hsURL+"/jobs/"+id, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	return res.JSON
}

func progress(t *testing.T, job map[string]any) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for k, v := range job["progress"].(map[string]any) {
		out[k] = v.(float64)
	}
	return out
}

// An initial sync writes every subscriber with a key value once; a second one finds them
// unchanged and sends nothing; a changed subscriber is written again, to the same record.
func TestInitialSync(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	ann := f.subscriber(t, f.bot, "1", map[string]any{"email": "ann@example.com", "orders": 3}, true)
	f.subscriber(t, f.bot, "2", map[string]any{"email": "bob@example.com"}, false)
	f.subscriber(t, f.bot, "3", nil, false) // no email: skipped
	res := f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindInitialSync})
	require.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "mapping_required", res.JSON["code"])
	res = f.Do(t, "PUT", f.hsURL+"/mapping", json.RawMessage(hubspotMapping))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)

	job := f.sync(t, KindInitialSync)
	assert.Equal(t, JobSucceeded, job["status"])
	assert.Equal(t, map[string]float64{"processed": 3, "written": 2, "unchanged": 0, "skipped": 1, "failed": 0, "pulled": 0, "conflicts": 0, "deals_opened": 2, "deals_pulled": 0},
		progress(t, job))
	require.Equal(t, 2, f.hs.Count("contacts"))
	require.Equal(t, 2, f.hs.Count("deals"), "the mapping's deal, one per new record")
	for _, d := range f.hs.Records("deals") {
		assert.Equal(t, "default", d.Props["pipeline"])
		assert.Equal(t, "appointmentscheduled", d.Props["dealstage"])
		assert.Len(t, f.hs.Associated(d.ID, "contacts"), 1)
	}
	records := map[string]map[string]any{}
	for _, r := range f.hs.Records("contacts") {
		records[r.Props["email"].(string)] = r.Props
	}
	assert.Equal(t, "Ann", records["ann@example.com"]["firstname"])
	assert.Equal(t, "3", records["ann@example.com"]["bot_conversations"])

	before := f.hs.Requests()
	job = f.sync(t, KindInitialSync)
	assert.Equal(t, float64(2), progress(t, job)["unchanged"])
	assert.Equal(t, before, f.hs.Requests(), "nothing changed: no call to the CRM")

	_, err := f.subs.SetFields(sqlitetest.Unrecorded(t.Context()), f.bot, ann, map[string]any{"orders": 4})
	require.NoError(t, err)
	job = f.sync(t, KindInitialSync)
	p := progress(t, job)
	assert.Equal(t, float64(1), p["written"])
	assert.Equal(t, float64(1), p["unchanged"])
	assert.Equal(t, 2, f.hs.Count("contacts"), "the changed subscriber's record, not a second one")

	// A new email is written to the record the subscriber was linked to, by its id: the
	// record's key changes with it, and no second record is created.
	_, err = f.subs.SetFields(sqlitetest.Unrecorded(t.Context()), f.bot, ann, map[string]any{"email": "ann.lee@example.com"})
	require.NoError(t, err)
	job = f.sync(t, KindInitialSync)
	assert.Equal(t, float64(1), progress(t, job)["written"])
	emails := []string{}
	for _, r := range f.hs.Records("contacts") {
		emails = append(emails, r.Props["email"].(string))
	}
	assert.ElementsMatch(t, []string{"ann.lee@example.com", "bob@example.com"}, emails)

	res = f.Do(t, "GET", "/api/bots/"+f.bot+"/subscribers/"+ann+"/crm", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	st := res.JSON["data"].([]any)
	require.Len(t, st, 2) // the HubSpot and the Pipedrive connection
	for _, x := range st {
		m := x.(map[string]any)
		if m["connection_id"] == f.hsID {
			assert.Equal(t, SubscriberSynced, m["status"])
			assert.NotEmpty(t, m["record_id"])
		} else {
			assert.Equal(t, SubscriberNotSynced, m["status"])
		}
	}
	res = f.Do(t, "GET", f.hsURL+"/jobs", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Len(t, res.JSON["data"], 4)
}

// One job at a time per connection; a cancelled job stops at its next step.
func TestJobRunningAndCancel(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	res := f.Do(t, "PUT", f.hsURL+"/mapping", json.RawMessage(hubspotMapping))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindInitialSync})
	require.Equal(t, http.StatusAccepted, res.Code, res.Body)
	id := res.JSON["id"].(string)
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindReconcile})
	require.Equal(t, http.StatusConflict, res.Code, res.Body)
	assert.Equal(t, "job_running", res.JSON["code"])
	assert.Equal(t, id, res.JSON["job_id"])
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": "everything"})
	assert.Equal(t, http.StatusBadRequest, res.Code, res.Body)

	res = f.Do(t, "POST", f.hsURL+"/jobs/"+id+"/cancel", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, JobCancelled, res.JSON["status"])
	assert.Equal(t, 1, f.run(t), "the cancelled job's step stops at once")
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindReconcile})
	assert.Equal(t, http.StatusAccepted, res.Code, "the connection is free again: %s", res.Body)
	res = f.Do(t, "GET", f.hsURL+"/jobs/job_00000000000000000000000000", nil)
	assert.Equal(t, http.StatusNotFound, res.Code, res.Body)
}

// Both sides changed a field mapped both ways: a reconcile opens a conflict and writes
// neither side; resolving it with the CRM's value writes the subscriber, and the field syncs
// again. A change on the CRM side only is pulled.
func TestReconcileConflict(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	ann := f.subscriber(t, f.bot, "1", map[string]any{"email": "ann@example.com"}, false)
	res := f.Do(t, "PUT", f.hsURL+"/mapping", json.RawMessage(hubspotMapping))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	f.sync(t, KindInitialSync)
	require.Len(t, f.hs.Records("contacts"), 1)
	record := f.hs.Records("contacts")[0].ID

	// lastname is mapped both ways.
	require.True(t, f.hs.Change("contacts", record, map[string]string{"lastname": "Smith"}))
	last := "Jones"
	sub, err := f.subs.Get(t.Context(), f.bot, ann)
	require.NoError(t, err)
	_, err = f.subs.Update(sqlitetest.Unrecorded(t.Context()), f.bot, ann, sub.Revision, subscribers.Changes{LastName: &last})
	require.NoError(t, err)

	job := f.sync(t, KindReconcile)
	assert.Equal(t, JobSucceeded, job["status"], job)
	assert.Equal(t, float64(1), progress(t, job)["conflicts"])
	assert.Equal(t, "Smith", f.hs.Records("contacts")[0].Props["lastname"], "a field in conflict is not pushed")

	res = f.Do(t, "GET", f.hsURL+"/conflicts?status=open", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	list := res.JSON["data"].([]any)
	require.Len(t, list, 1)
	c := list[0].(map[string]any)
	assert.Equal(t, "lastname", c["target"])
	assert.Equal(t, "Jones", c["platform_value"])
	assert.Equal(t, "Smith", c["crm_value"])
	assert.Equal(t, "Lee", c["base_value"])
	id := c["id"].(string)

	res = f.Do(t, "POST", f.hsURL+"/conflicts/"+id+"/resolve", map[string]any{"expected_revision": 7, "choose": "crm"})
	require.Equal(t, http.StatusConflict, res.Code, res.Body)
	assert.Equal(t, "stale_revision", res.JSON["code"])
	res = f.Do(t, "POST", f.hsURL+"/conflicts/"+id+"/resolve", map[string]any{"expected_revision": 1, "choose": "crm"})
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, ConflictResolved, res.JSON["status"])
	assert.Equal(t, "Smith", res.JSON["resolved_value"])
	sub, err = f.subs.Get(t.Context(), f.bot, ann)
	require.NoError(t, err)
	assert.Equal(t, "Smith", *sub.LastName)
	res = f.Do(t, "POST", f.hsURL+"/conflicts/"+id+"/resolve", map[string]any{"expected_revision": 2, "choose": "platform"})
	assert.Equal(t, http.StatusConflict, res.Code, res.Body)
	assert.Equal(t, "conflict_resolved", res.JSON["code"])

	// A change on the CRM side only is pulled, with no conflict.
	require.True(t, f.hs.Change("contacts", record, map[string]string{"lastname": "Smythe"}))
	job = f.sync(t, KindReconcile)
	assert.Equal(t, float64(1), progress(t, job)["pulled"], job)
	assert.Equal(t, float64(0), progress(t, job)["conflicts"])
	sub, err = f.subs.Get(t.Context(), f.bot, ann)
	require.NoError(t, err)
	assert.Equal(t, "Smythe", *sub.LastName)
}

// A job longer than one run's steps continues as new runs, each from the step the last one
// saved, and still writes every subscriber once.
func TestSyncContinuesAsNewRuns(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	for i := range 7 {
		f.subscriber(t, f.bot, fmt.Sprint(100+i), map[string]any{"email": fmt.Sprintf("p%d@example.com", i)}, false)
	}
	res := f.Do(t, "PUT", f.hsURL+"/mapping", json.RawMessage(hubspotMapping))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	// Pages of 2, runs of 2 steps, and a clock that moves on every reading: a step's time is
	// up after a page or two.
	f.svc.pageSize, f.svc.runSteps, f.svc.stepDuration = 2, 2, 5*time.Second
	var mu sync.Mutex
	f.svc.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		f.clock.Advance(2 * time.Second)
		return f.clock.Now()
	}
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindInitialSync})
	require.Equal(t, http.StatusAccepted, res.Code, res.Body)
	id := res.JSON["id"].(string)
	runs := 0
	for i := 0; i < len(f.jobs.list); i++ {
		require.Less(t, i, 50, "the job never finishes")
		f.jobs.mu.Lock()
		j := f.jobs.list[i]
		f.jobs.mu.Unlock()
		runs++
		cursor := ""
		for {
			next, done, err := f.svc.SyncStep(t.Context(), j.payload, cursor)
			require.NoError(t, err)
			if done {
				break
			}
			cursor = next
		}
	}
	assert.Greater(t, runs, 1, "the job continued as new runs")
	res = f.Do(t, "GET", f.hsURL+"/jobs/"+id, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, JobSucceeded, res.JSON["status"])
	assert.Equal(t, float64(7), progress(t, res.JSON)["written"])
	assert.Equal(t, 7, f.hs.Count("contacts"))
}

// A job whose steps failed for good holds the connection only until StallAfter: the next
// start fails it (job_stalled) and takes its place.
func TestStalledJobGivesWay(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	res := f.Do(t, "PUT", f.hsURL+"/mapping", json.RawMessage(hubspotMapping))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindInitialSync})
	require.Equal(t, http.StatusAccepted, res.Code, res.Body)
	first := res.JSON["id"].(string)
	f.clock.Advance(StallAfter - time.Minute)
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindInitialSync})
	require.Equal(t, http.StatusConflict, res.Code, "not stalled yet: %s", res.Body)
	f.clock.Advance(2 * time.Minute)
	res = f.Do(t, "POST", f.hsURL+"/jobs", map[string]any{"kind": KindInitialSync})
	require.Equal(t, http.StatusAccepted, res.Code, res.Body)
	res = f.Do(t, "GET", f.hsURL+"/jobs/"+first, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, JobFailed, res.JSON["status"])
	assert.Equal(t, "job_stalled", res.JSON["error"].(map[string]any)["code"])
}

// Limits of more calls than a pacer keeps are paced as their rate in a shorter window.
func TestRateNormalized(t *testing.T) {
	t.Parallel()
	s := &Service{settings: Settings{Rates: map[string]Rate{crmapi.Pipedrive: {N: 600, Window: 2 * time.Second}}}}
	assert.Equal(t, Rate{N: 100, Window: 5 * time.Second}, s.rate(crmapi.Dynamics), "6,000 in 5 minutes")
	assert.Equal(t, Rate{N: 100, Window: 10 * time.Second}, s.rate(crmapi.HubSpot))
	assert.Equal(t, Rate{N: 100, Window: 2 * time.Second / 6}, s.rate(crmapi.Pipedrive))
}

// A deal is opened once per linked record: a step that opened it and died before saving the
// link finds it at the next sync (through the contact's associations) instead of opening a
// second; a record that has an open deal in the pipeline already gets none; a reconcile takes
// the stage the CRM moved the deal to into the stage field, and "won" once it is won.
func TestDeals(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	_, err := f.subs.CreateField(sqlitetest.Unrecorded(t.Context()), f.bot, subscribers.FieldSpec{Name: "deal_stage", Type: subscribers.TypeString})
	require.NoError(t, err)
	mapping := `{"object":"contacts","key":"email","fields":[{"source":"subscriber:first_name","target":"firstname","direction":"push"}],
		"deal":{"pipeline":"default","stage":"appointmentscheduled","stage_field":"deal_stage"}}`
	res := f.Do(t, "PUT", f.hsURL+"/mapping", json.RawMessage(mapping))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	ann := f.subscriber(t, f.bot, "1", map[string]any{"email": "ann@example.com"}, false)
	bob := f.subscriber(t, f.bot, "2", map[string]any{"email": "bob@example.com"}, false)
	// Bob's contact exists with an open deal in the pipeline: it becomes his.
	bobContact := f.hs.Create("contacts", map[string]string{"email": "bob@example.com"})
	bobDeal := f.hs.CreateDeal(bobContact, map[string]string{"dealname": "Bob's", "pipeline": "default", "dealstage": "appointmentscheduled"})

	job := f.sync(t, KindInitialSync)
	p := progress(t, job)
	assert.Equal(t, float64(1), p["deals_opened"], "Bob had one")
	require.Equal(t, 2, f.hs.Count("deals"))
	field := func(sub string) any {
		t.Helper()
		s, err := f.subs.Get(t.Context(), f.bot, sub)
		require.NoError(t, err)
		return s.Fields["deal_stage"]
	}
	assert.Equal(t, "Appointment Scheduled", field(ann))
	assert.Equal(t, "Appointment Scheduled", field(bob))

	// Ann's step "died" after opening her deal: her link does not have it.
	key := linkKey(f.bot, f.hsID, ann)
	it, err := f.raw.Get(t.Context(), key)
	require.NoError(t, err)
	l, err := store.Decode[link](it)
	require.NoError(t, err)
	annDeal := l.Deal.ID
	l.Deal = nil
	lost, err := item(key, it.Revision+1, l)
	require.NoError(t, err)
	require.NoError(t, f.raw.Put(t.Context(), lost, store.RevisionIs(it.Revision)))
	job = f.sync(t, KindInitialSync)
	assert.Equal(t, float64(0), progress(t, job)["deals_opened"])
	assert.Equal(t, 2, f.hs.Count("deals"), "the deal opened before is found, not opened again")
	res = f.Do(t, "POST", "/api/bots/"+f.bot+"/subscribers/"+ann+"/crm/sync", map[string]any{"connection_id": f.hsID})
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	got := res.JSON["data"].([]any)[0].(map[string]any)
	assert.Equal(t, annDeal, got["deal_id"])
	assert.Nil(t, got["deal_opened"])

	// The CRM moves Ann's deal and wins Bob's: a reconcile takes both.
	require.True(t, f.hs.Change("deals", annDeal, map[string]string{"dealstage": "qualifiedtobuy"}))
	require.True(t, f.hs.Change("deals", bobDeal, map[string]string{"dealstage": "closedwon"}))
	job = f.sync(t, KindReconcile)
	p = progress(t, job)
	assert.Equal(t, float64(2), p["deals_pulled"])
	assert.Equal(t, "Qualified To Buy", field(ann))
	assert.Equal(t, "won", field(bob))
	res = f.Do(t, "GET", "/api/bots/"+f.bot+"/subscribers/"+bob+"/crm", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	for _, x := range res.JSON["data"].([]any) {
		if m := x.(map[string]any); m["connection_id"] == f.hsID {
			assert.Equal(t, bobDeal, m["deal"].(map[string]any)["id"])
			assert.Equal(t, crmapi.DealWon, m["deal"].(map[string]any)["status"])
		}
	}
	// A second reconcile finds nothing new.
	job = f.sync(t, KindReconcile)
	assert.Equal(t, float64(0), progress(t, job)["deals_pulled"])
	assert.Equal(t, 2, f.hs.Count("deals"), "a won deal stays the subscriber's")
}
