package tests

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	dynamicsfake "github.com/botplatform/api/tests/fakes/crm/dynamics"
)

// A Dynamics connection whose entities.contacts is leads (docs/crm.md): its mapping of
// contacts, saved while the connection's contacts were contacts, writes the subscribers to
// the fake's leads, not its contacts, once the connection is made again with leads; discovery
// then offers leads in the place of contacts. Another entity set for deals is refused, and so
// is a contacts set the environment does not have.
func TestCRMDynamicsContactsAreLeads(t *testing.T) {
	t.Parallel()
	dyn := dynamicsfake.New(t)
	env := []string{"CRM_PRIVATE_PROVIDER_ADDRESSES=allow", "CRM_DYNAMICS_LOGIN_BASE_URL=" + dyn.URL(),
		"CRM_DYNAMICS_ALLOWED_ORIGINS=" + dyn.URL()}
	e := &crmSync{dir: t.TempDir(), env: env}
	e.s = startWithEnv(t, e.dir, e.env)
	e.s.secret(dynamicsfake.ClientSecret)
	e.tok, e.api = e.s.demo.Token, "/api/bots/"+e.s.demo.BotID

	path := e.api + "/crm/connections/dynamics"
	body := func(entities map[string]any) map[string]any {
		return map[string]any{"tenant_id": dynamicsfake.TenantID, "client_id": dynamicsfake.ClientID,
			"client_secret": dynamicsfake.ClientSecret, "environment_url": dyn.URL(), "entities": entities}
	}
	res := e.s.post(e.tok, path, body(map[string]any{"contacts": "leads", "deals": "new_deals"}))
	require.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	assert.Equal(t, "validation_failed", res.Code(t))
	assert.Contains(t, string(res.Body), "entities.deals")
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/dynamics", path, res)

	// An entity set the environment does not have is refused as the connection is made,
	// not first by a sync: nothing is stored.
	res = e.s.post(e.tok, path, body(map[string]any{"contacts": "new_subscriberz"}))
	require.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "invalid_entities", res.Code(t))
	assert.Contains(t, string(res.Body), `"field":"entities.contacts"`)
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/dynamics", path, res)
	res = e.s.get(e.tok, e.api+"/crm/connections")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Empty(t, res.JSON(t)["data"], "nothing stored")

	res = e.s.post(e.tok, path, body(nil))
	c := summary(t, res, http.StatusCreated, "dynamics")
	e.id = c["id"].(string)
	e.conn = e.api + "/crm/connections/" + e.id
	e.field(t, "email", "string")
	res = e.s.do(req{Method: http.MethodPut, Path: e.conn + "/mapping", Token: e.tok,
		Body: map[string]any{"object": "contacts", "key": "emailaddress1", "fields": []any{
			map[string]any{"source": "subscriber:first_name", "target": "firstname", "direction": "push"},
			map[string]any{"source": "subscriber:last_name", "target": "lastname", "direction": "push"}}}})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)

	// The same organization again: the same connection, its contacts now leads.
	res = e.s.post(e.tok, path, body(map[string]any{"contacts": "leads"}))
	c = summary(t, res, http.StatusOK, "dynamics")
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/dynamics", path, res)
	assert.Equal(t, e.id, c["id"])
	assert.Equal(t, map[string]any{"contacts": "leads", "deals": "opportunities"}, c["entities"])

	res = e.s.get(e.tok, e.conn+"/objects")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var names []string
	for _, o := range res.JSON(t)["data"].([]any) {
		names = append(names, o.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"leads", "accounts", "opportunities"}, names)

	for i, email := range []string{"ann@example.com", "bob@example.com"} {
		e.subscriber(t, map[string]any{"channel": "telegram", "external_id": fmt.Sprint(3_000_000 + i), "first_name": "Sub",
			"last_name": fmt.Sprint(i), "fields": map[string]any{"email": email}})
	}
	j := e.startJob(t, "initial_sync")
	j = e.finished(t, j.ID, 30*time.Second)
	assert.Equal(t, int64(2), j.Progress.Written)
	assert.Equal(t, 2, dyn.Count("leads"))
	assert.Equal(t, 0, dyn.Count("contacts"), "no subscriber written as a contact")
	emails := []any{}
	for _, l := range dyn.Records("leads") {
		emails = append(emails, l.Props["emailaddress1"])
		assert.Equal(t, "Sub", l.Props["firstname"])
	}
	assert.ElementsMatch(t, []any{"ann@example.com", "bob@example.com"}, emails)
}
