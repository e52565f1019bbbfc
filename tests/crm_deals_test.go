package tests

import (
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/tests/fakes/crm/crmfake"
)

// crmDeal is a deal as the API shows it.
type crmDeal struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Pipeline string   `json:"pipeline"`
	Stage    string   `json:"stage"`
	Status   string   `json:"status"`
	Amount   *float64 `json:"amount"`
	Currency string   `json:"currency"`
}

// The mapping's deal end to end against the Pipedrive fake (docs/crm.md, "Deals"): an
// initial sync opens one deal per subscriber, associated with their person, and writes its
// stage's label to the stage field; a second sync opens none; a reconcile takes the stages
// the CRM moved (and a won deal) into the subscribers' field; the per-subscriber routes show
// the deal and read the record's deals live, with the subscriber routes' access.
func TestCRMDeals(t *testing.T) {
	t.Parallel()
	e := startCRMSync(t, 80)
	e.field(t, "email", "string")
	e.field(t, "deal_stage", "string")
	res := e.s.do(req{Method: http.MethodPut, Path: e.conn + "/mapping", Token: e.tok, Body: map[string]any{
		"object": "persons", "key": "email",
		"fields": []any{map[string]any{"source": "subscriber:first_name", "target": "first_name", "direction": "push"}},
		"deal":   map[string]any{"pipeline": "1", "stage": "1", "stage_field": "deal_stage"}}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	// The stage field must be a text field of the bot's.
	e.field(t, "score", "number")
	for field, want := range map[string]string{"nope": "no custom field", "score": "number field"} {
		res := e.s.do(req{Method: http.MethodPut, Path: e.conn + "/mapping", Token: e.tok, Body: map[string]any{
			"expected_revision": 1, "object": "persons", "key": "email", "fields": []any{},
			"deal": map[string]any{"pipeline": "1", "stage": "1", "stage_field": field}}})
		require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		assert.Equal(t, "invalid_mapping", res.Code(t))
		assert.Contains(t, string(res.Body), "deal.stage_field")
		assert.Contains(t, string(res.Body), want)
	}

	names := []string{"Ann", "Ben", "Cat"}
	subs := make([]string, len(names))
	for i, n := range names {
		subs[i] = e.subscriber(t, map[string]any{"channel": "telegram", "external_id": strconv.Itoa(7100 + i), "first_name": n,
			"last_name": "Deal", "fields": map[string]any{"email": n + "@deals.example.org"}})
	}

	j := e.startJob(t, "initial_sync")
	j = e.finished(t, j.ID, 60*time.Second)
	assert.Equal(t, int64(3), j.Progress.Written)
	assert.Equal(t, int64(3), j.Progress.DealsOpened)
	require.Equal(t, 3, e.pd.Count("deals"))
	persons := map[string]string{} // person id -> first name
	for _, p := range e.pd.Records("persons") {
		persons[p.ID] = p.Props["first_name"].(string)
	}
	dealOf := map[string]crmfake.Record{} // first name -> deal
	for _, d := range e.pd.Records("deals") {
		assert.Equal(t, 1, d.Props["pipeline_id"])
		assert.Equal(t, 1, d.Props["stage_id"])
		assert.Equal(t, "open", d.Props["status"])
		name := persons[strconv.Itoa(d.Props["person_id"].(int))]
		require.NotEmpty(t, name, "the deal %s is associated with a synced person", d.ID)
		assert.Equal(t, name+" Deal", d.Props["title"])
		dealOf[name] = d
	}
	require.Len(t, dealOf, 3, "one deal per person")
	for _, sub := range subs {
		assert.Equal(t, "Lead in", e.subscriberField(t, sub, "deal_stage"), "the stage's label")
	}

	// A second sync finds every deal: none is opened again.
	j = e.finished(t, e.startJob(t, "initial_sync").ID, 60*time.Second)
	assert.Zero(t, j.Progress.DealsOpened)
	assert.Equal(t, int64(3), j.Progress.Unchanged)
	assert.Equal(t, 3, e.pd.Count("deals"))

	// At the CRM, Ann's deal moves on and Ben's is won: a reconcile takes both.
	id := func(r crmfake.Record) int { n, err := strconv.Atoi(r.ID); require.NoError(t, err); return n }
	time.Sleep(1100 * time.Millisecond) // Pipedrive stamps changes in whole seconds
	require.True(t, e.pd.Change("deals", id(dealOf["Ann"]), map[string]any{"stage_id": 3}))
	require.True(t, e.pd.Change("deals", id(dealOf["Ben"]), map[string]any{"status": "won"}))
	j = e.finished(t, e.startJob(t, "reconcile").ID, 60*time.Second)
	assert.Equal(t, int64(2), j.Progress.DealsPulled)
	assert.Zero(t, j.Progress.DealsOpened)
	assert.Equal(t, "Proposal", e.subscriberField(t, subs[0], "deal_stage"))
	assert.Equal(t, "won", e.subscriberField(t, subs[1], "deal_stage"))
	assert.Equal(t, "Lead in", e.subscriberField(t, subs[2], "deal_stage"))
	assert.Equal(t, 3, e.pd.Count("deals"), "a won deal stays the subscriber's: no new one")

	// The subscriber's status shows the deal as the reconcile read it.
	base := e.api + "/subscribers/" + subs[0] + "/crm"
	res = e.s.get(e.tok, base)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplSubscriberCR, base, res)
	var st struct {
		Data []struct {
			Deal *crmDeal `json:"deal"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &st))
	require.Len(t, st.Data, 1)
	require.NotNil(t, st.Data[0].Deal)
	assert.Equal(t, crmDeal{ID: dealOf["Ann"].ID, Name: "Ann Deal", Pipeline: "1", Stage: "3", Status: "open"},
		crmDeal{ID: st.Data[0].Deal.ID, Name: st.Data[0].Deal.Name, Pipeline: st.Data[0].Deal.Pipeline, Stage: st.Data[0].Deal.Stage,
			Status: st.Data[0].Deal.Status})

	// The record's deals, read from the CRM now: one a salesperson added too.
	other := e.pd.Create("deals", map[string]any{"title": "Ann upsell", "person_id": dealOf["Ann"].Props["person_id"], "pipeline_id": 2,
		"stage_id": 10, "value": 250.0, "currency": "EUR"})
	res = e.s.get(e.tok, base+"/deals")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, tmplSubscriberCR+"/deals", base+"/deals", res)
	var live struct {
		Data []struct {
			ConnectionID string    `json:"connection_id"`
			Provider     string    `json:"provider"`
			Object       string    `json:"object"`
			RecordID     string    `json:"record_id"`
			Deals        []crmDeal `json:"deals"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &live))
	require.Len(t, live.Data, 1)
	assert.Equal(t, e.id, live.Data[0].ConnectionID)
	assert.Equal(t, "persons", live.Data[0].Object)
	require.Len(t, live.Data[0].Deals, 2)
	byID := map[string]crmDeal{}
	for _, d := range live.Data[0].Deals {
		byID[d.ID] = d
	}
	assert.Equal(t, "3", byID[dealOf["Ann"].ID].Stage)
	up := byID[strconv.Itoa(other)]
	assert.Equal(t, "Ann upsell", up.Name)
	assert.Equal(t, "2", up.Pipeline)
	require.NotNil(t, up.Amount)
	assert.InDelta(t, 250.0, *up.Amount, 0.001)
	assert.Equal(t, "EUR", up.Currency)

	// A subscriber not synced yet has no record, hence no deals; the routes' access.
	fresh := e.subscriber(t, map[string]any{"channel": "telegram", "external_id": "7199", "first_name": "Dan"})
	res = e.s.get(e.tok, e.api+"/subscribers/"+fresh+"/crm/deals")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.JSONEq(t, `{"data":[]}`, string(res.Body))
	noDialogs := e.s.admin("user", "create", "--account", e.s.demo.AccountID, "--rights", "reactions")["user_id"]
	noDialogsTok := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--user", noDialogs, "--scopes", "*")["token"]
	noScope := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--scopes", "crm:read")["token"]
	outsider := e.s.newAccount("Other")
	for _, c := range []struct {
		name   string
		token  string
		path   string
		status int
		code   string
	}{
		{"without dialogs", noDialogsTok, base + "/deals", 403, "missing_right"},
		{"without subscribers:read", noScope, base + "/deals", 403, "insufficient_scope"},
		{"another account", outsider.Token, base + "/deals", 404, ""},
		{"another account's bot", e.tok, "/api/bots/" + outsider.Bot + "/subscribers/" + subs[0] + "/crm/deals", 404, ""},
		{"an unknown connection", e.tok, base + "/deals?connection_id=crm_00000000000000000000000000", 404, ""},
		{"no token", "", base + "/deals", 401, ""},
	} {
		res := e.s.get(c.token, c.path)
		assert.Equal(t, c.status, res.Status, "%s: %s", c.name, res.Body)
		if c.code != "" {
			assert.Equal(t, c.code, res.Code(t), c.name)
		}
		conforms(t, http.MethodGet, tmplSubscriberCR+"/deals", c.path, res)
	}
}

// subscriberField reads one custom field of a subscriber of the demo bot.
func (e *crmSync) subscriberField(t *testing.T, sub, name string) any {
	t.Helper()
	res := e.s.get(e.tok, e.api+"/subscribers/"+sub)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	fields, _ := res.JSON(t)["fields"].(map[string]any)
	return fields[name]
}
