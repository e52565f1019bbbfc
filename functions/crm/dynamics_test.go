package crm

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/subscribers"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	dynamicsfake "github.com/botplatform/api/tests/fakes/crm/dynamics"
)

// connectDynamics connects f.bot to the Dynamics fake with entities and returns its routes'
// base. The access token is one the service need not refresh: the client gets its own from
// the fake's Entra ID.
func (f *mappingFixture) connectDynamics(t *testing.T, entities Entities) string {
	t.Helper()
	c, _, err := f.svc.connect(t.Context(), f.bot, Connection{Provider: crmapi.Dynamics, Auth: crmapi.AuthOIDC,
		Account: crmapi.Account{ID: dynamicsfake.OrganizationID}, InstanceURL: f.dyn.URL(), Entities: &entities},
		crmapi.Credentials{TenantID: dynamicsfake.TenantID, ClientID: dynamicsfake.ClientID, ClientSecret: dynamicsfake.ClientSecret,
			InstanceURL: f.dyn.URL(), AccessToken: "unused", Expiry: f.clock.Now().Add(time.Hour)})
	require.NoError(t, err)
	return f.base + "/" + c.ID
}

// syncAt starts a job of kind on the connection at base and runs it to its end.
func (f *mappingFixture) syncAt(t *testing.T, base, kind string) map[string]any {
	t.Helper()
	res := f.Do(t, "POST", base+"/jobs", map[string]any{"kind": kind})
	require.Equal(t, http.StatusAccepted, res.Code, res.Body)
	f.run(t)
	res = f.Do(t, "GET", base+"/jobs/"+res.JSON["id"].(string), nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	return res.JSON
}

// A Dynamics connection whose entities.contacts is leads: its mapping of contacts (saved
// when the connection's contacts were contacts) writes subscribers as leads, not contacts,
// an incremental push updates the lead and a reconcile pulls the lead's changes; discovery
// offers leads in the place of contacts.
func TestDynamicsContactsAreLeads(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	f.catalog(t, f.bot)
	ann := f.subscriber(t, f.bot, "1", map[string]any{"email": "ann@example.com"}, false)
	f.subscriber(t, f.bot, "2", map[string]any{"email": "bob@example.com"}, false)
	objects := func(base string) []any {
		res := f.Do(t, "GET", base+"/objects", nil)
		require.Equal(t, http.StatusOK, res.Code, res.Body)
		names := []any{}
		for _, o := range res.JSON["data"].([]any) {
			names = append(names, o.(map[string]any)["name"])
		}
		return names
	}
	mapping := json.RawMessage(`{"object":"contacts","key":"emailaddress1","fields":[
		{"source":"subscriber:first_name","target":"firstname","direction":"push"},
		{"source":"subscriber:last_name","target":"lastname","direction":"both"}]}`)

	base := f.connectDynamics(t, DefaultEntities)
	assert.Equal(t, []any{"contacts", "leads", "accounts", "opportunities"}, objects(base))
	res := f.Do(t, "PUT", base+"/mapping", mapping)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	// Connected again with leads as its contacts: the same connection, its cached
	// discovery gone with the entity sets it described.
	require.Equal(t, base, f.connectDynamics(t, Entities{Contacts: "leads", Deals: "opportunities"}))
	assert.Equal(t, []any{"leads", "accounts", "opportunities"}, objects(base))
	res = f.Do(t, "PUT", base+"/mapping", json.RawMessage(`{"expected_revision":1,`+string(mapping[1:])))
	require.Equal(t, http.StatusUnprocessableEntity, res.Code, "contacts is no longer offered: %s", res.Body)
	assert.Contains(t, string(res.Body), "leads")

	job := f.syncAt(t, base, KindInitialSync)
	assert.Equal(t, JobSucceeded, job["status"], job)
	assert.Equal(t, float64(2), progress(t, job)["written"])
	assert.Equal(t, 2, f.dyn.Count("leads"))
	assert.Equal(t, 0, f.dyn.Count("contacts"), "no subscriber written as a contact")
	var record string
	for _, l := range f.dyn.Records("leads") {
		assert.Equal(t, "Ann", l.Props["firstname"])
		if l.Props["emailaddress1"] == "ann@example.com" {
			record = l.ID
		}
	}
	require.NotEmpty(t, record)

	// An incremental push updates the lead the subscriber is linked to.
	first := "Anna"
	sub, err := f.subs.Get(t.Context(), f.bot, ann)
	require.NoError(t, err)
	_, err = f.subs.Update(sqlitetest.Unrecorded(t.Context()), f.bot, ann, sub.Revision, subscribers.Changes{FirstName: &first})
	require.NoError(t, err)
	job = f.syncAt(t, base, KindInitialSync)
	assert.Equal(t, float64(1), progress(t, job)["written"], job)
	l, ok := f.dyn.Record("leads", record)
	require.True(t, ok)
	assert.Equal(t, "Anna", l.Props["firstname"])
	assert.Equal(t, 2, f.dyn.Count("leads"))

	// A change a user makes to the lead is pulled.
	f.clock.Advance(2 * time.Second)
	require.True(t, f.dyn.Change("leads", record, map[string]any{"lastname": "Smith"}))
	job = f.syncAt(t, base, KindReconcile)
	assert.Equal(t, JobSucceeded, job["status"], job)
	assert.Equal(t, float64(1), progress(t, job)["pulled"], job)
	sub, err = f.subs.Get(t.Context(), f.bot, ann)
	require.NoError(t, err)
	assert.Equal(t, "Smith", *sub.LastName)
	assert.Equal(t, 0, f.dyn.Count("contacts"))
}

// The entity set a Dynamics connection writes subscribers to (entities.contacts) is checked
// with the environment when the connection is saved, not first when a sync runs: a custom
// set the environment has and that has an email column is accepted; a set it does not have,
// or a table without an email column, is 422 invalid_entities naming entities.contacts; an
// environment that cannot be reached at the check is 503 provider_unavailable. Refused or
// failed, nothing is stored, and a connection made before keeps its entity set. contacts
// and leads still connect.
func TestConnectDynamicsChecksEntities(t *testing.T) {
	t.Parallel()
	f := newMappingFixture(t)
	path := f.base + "/dynamics"
	body := func(contacts string) map[string]any {
		b := map[string]any{"tenant_id": dynamicsfake.TenantID, "client_id": dynamicsfake.ClientID,
			"client_secret": dynamicsfake.ClientSecret, "environment_url": f.dyn.URL()}
		if contacts != "" {
			b["entities"] = map[string]any{"contacts": contacts}
		}
		return b
	}
	stored := func() string { return f.partition(t) }
	before := stored() // what is stored: a refusal leaves it as it is
	refused := func(contacts, reason string) {
		t.Helper()
		res := f.Do(t, "POST", path, body(contacts))
		require.Equal(t, http.StatusUnprocessableEntity, res.Code, "%s: %s", contacts, res.Body)
		assert.Equal(t, "invalid_entities", res.Problem())
		errs := res.JSON["errors"].([]any)
		require.Len(t, errs, 1, "%s", res.Body)
		assert.Equal(t, "entities.contacts", errs[0].(map[string]any)["field"])
		assert.Contains(t, errs[0].(map[string]any)["message"], reason)
		assert.Equal(t, before, stored(), "nothing stored for %s", contacts)
	}
	refused("new_subscriberz", `no entity set "new_subscriberz"`)
	refused("new_botevents", "no email column")

	// Dynamics goes down after the credentials were checked, as the entity set is.
	f.beforeDynamics = func(e Entities) {
		if e.Contacts == "new_subscribers" {
			f.dyn.FailNext(1, http.StatusServiceUnavailable)
		}
	}
	res := f.Do(t, "POST", path, body("new_subscribers"))
	require.Equal(t, http.StatusServiceUnavailable, res.Code, res.Body)
	assert.Equal(t, "provider_unavailable", res.Problem())
	assert.Equal(t, before, stored(), "nothing stored while Dynamics is down")
	f.beforeDynamics = nil

	res = f.Do(t, "POST", path, body("new_subscribers"))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	assert.Equal(t, map[string]any{"contacts": "new_subscribers", "deals": "opportunities"}, res.JSON["entities"])
	conn := f.base + "/" + res.JSON["id"].(string)
	objects := f.Do(t, "GET", conn+"/objects", nil)
	require.Equal(t, http.StatusOK, objects.Code, objects.Body)
	assert.Equal(t, "new_subscribers", objects.JSON["data"].([]any)[0].(map[string]any)["name"])

	// A refused set on the connection made before leaves it as it was.
	before = stored()
	refused("new_botevents", "no email column")
	res = f.Do(t, "GET", conn, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, map[string]any{"contacts": "new_subscribers", "deals": "opportunities"}, res.JSON["entities"])
	assert.Equal(t, float64(1), res.JSON["revision"])

	// leads (asked about: an environment without Dynamics 365 Sales has none) and contacts
	// (every environment's: not asked about) still connect.
	requests := f.dyn.Requests()
	res = f.Do(t, "POST", path, body("leads"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, map[string]any{"contacts": "leads", "deals": "opportunities"}, res.JSON["entities"])
	assert.Equal(t, 3+2, f.dyn.Requests()-requests, "the account's 3 requests and the entity set's 2")
	requests = f.dyn.Requests()
	res = f.Do(t, "POST", path, body(""))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, map[string]any{"contacts": "contacts", "deals": "opportunities"}, res.JSON["entities"])
	assert.Equal(t, 3, f.dyn.Requests()-requests, "contacts is not asked about")
}
