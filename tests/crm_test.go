package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	dynamicsfake "github.com/botplatform/api/tests/fakes/crm/dynamics"
	hubspotfake "github.com/botplatform/api/tests/fakes/crm/hubspot"
	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
	salesforcefake "github.com/botplatform/api/tests/fakes/crm/salesforce"
)

// The CRM connection routes of a deployment without OAuth applications (the default), by
// status class: what needs no CRM to answer.
func TestCRMConnections(t *testing.T) {
	t.Parallel()
	s := start(t)
	base := "/api/bots/" + s.demo.BotID + "/crm/connections"

	t.Run("200", func(t *testing.T) {
		res := s.get(s.demo.Token, base)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		assert.Equal(t, []any{}, res.JSON(t)["data"])
		assert.Nil(t, res.JSON(t)["next_cursor"])
	})
	t.Run("503 oauth_not_configured", func(t *testing.T) {
		for _, provider := range []string{"hubspot", "salesforce"} {
			res := s.post(s.demo.Token, base+"/"+provider+"/start", map[string]any{"account_key": "acme.example"})
			assert.Equal(t, http.StatusServiceUnavailable, res.Status, provider)
			assert.Equal(t, "oauth_not_configured", res.Code(t), provider)
		}
	})
	t.Run("400", func(t *testing.T) {
		res := s.post(s.demo.Token, base+"/hubspot/start", map[string]any{"account_key": "acme.example", "redirect": "https://evil.example"})
		assert.Equal(t, http.StatusBadRequest, res.Status)
		assert.Equal(t, "unknown_field", res.Code(t))
		res = s.post(s.demo.Token, base+"/pipedrive", `{"api_key":"k","company_domain":"acme"}}`)
		assert.Equal(t, http.StatusBadRequest, res.Status, "trailing data")
		assert.Equal(t, "invalid_body", res.Code(t))
		res = s.post(s.demo.Token, base+"/dynamics", map[string]any{"tenant_id": "t", "client_id": "c", "client_secret": "s",
			"environment_url": "http://169.254.169.254"})
		assert.Equal(t, http.StatusBadRequest, res.Status)
		assert.Equal(t, "validation_failed", res.Code(t))
		// The public callback: no token, and a state nobody issued.
		res = s.get("", "/api/integrations/crm/hubspot/callback?"+url.Values{"state": {"forged"}, "code": {"c"}}.Encode())
		assert.Equal(t, http.StatusBadRequest, res.Status)
		assert.Equal(t, "invalid_state", res.Code(t))
	})
	t.Run("401", func(t *testing.T) {
		res := s.get("mbp_notatoken", base)
		assert.Equal(t, http.StatusUnauthorized, res.Status)
		res = s.post("", base+"/hubspot/start", map[string]any{"account_key": "acme.example"})
		assert.Equal(t, http.StatusUnauthorized, res.Status)
		assert.Equal(t, "missing_credentials", res.Code(t))
	})
	t.Run("403", func(t *testing.T) {
		reader := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "crm:read")["token"]
		res := s.get(reader, base)
		assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = s.post(reader, base+"/hubspot/start", map[string]any{"account_key": "acme.example"})
		assert.Equal(t, http.StatusForbidden, res.Status)
		assert.Equal(t, "insufficient_scope", res.Code(t))
		res = s.del(reader, base+"/crm_1h1kjx5t2b0qg7m1r9c8f3e4dz")
		assert.Equal(t, http.StatusForbidden, res.Status)
		integrations := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "integrations:*")["token"]
		res = s.get(integrations, base)
		assert.Equal(t, http.StatusForbidden, res.Status, "crm:* is separate from integrations:*")
	})
	t.Run("404", func(t *testing.T) {
		other := s.newAccount("Other")
		res := s.get(other.Token, base)
		assert.Equal(t, http.StatusNotFound, res.Status, "another account's bot")
		res = s.post(other.Token, base+"/pipedrive", map[string]any{"api_key": "k", "company_domain": "acme"})
		assert.Equal(t, http.StatusNotFound, res.Status)
		res = s.get(s.demo.Token, base+"/crm_1h1kjx5t2b0qg7m1r9c8f3e4dz")
		assert.Equal(t, http.StatusNotFound, res.Status)
		res = s.del(s.demo.Token, base+"/not-an-id")
		assert.Equal(t, http.StatusNotFound, res.Status)
	})
}

// With HubSpot's OAuth app configured (from the environment: the client secret is never a
// flag), a start answers HubSpot's authorization URL, and the fourth start of an account
// within a minute is refused whatever its bot.
func TestCRMStartLimit(t *testing.T) {
	t.Parallel()
	const secret = "hs-client-secret-e2e-0123456789"
	pd := pipedrivefake.New(t)
	s := startWithEnv(t, t.TempDir(), []string{
		"CRM_HUBSPOT_CLIENT_ID=hs-client-e2e",
		"CRM_HUBSPOT_CLIENT_SECRET=" + secret,
		"CRM_HUBSPOT_REDIRECT_URL=https://api.example/api/integrations/crm/hubspot/callback",
		"CRM_PIPEDRIVE_API_BASE_URL=" + pd.URL(),
	})
	base := "/api/bots/" + s.demo.BotID + "/crm/connections"

	// Without CRM_PRIVATE_PROVIDER_ADDRESSES=allow, a provider on a loopback address is not
	// called: an instance URL must be public https.
	res := s.post(s.demo.Token, base+"/pipedrive", map[string]any{"api_key": pipedrivefake.APIToken, "company_domain": "demo-shop"})
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	assert.Equal(t, "provider_unavailable", res.Code(t))
	assert.Zero(t, pd.Requests())

	states := map[string]bool{}
	for range 3 {
		res := s.post(s.demo.Token, base+"/hubspot/start", map[string]any{"account_key": "acme.example"})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		u, err := url.Parse(res.JSON(t)["redirect_url"].(string))
		require.NoError(t, err)
		assert.Equal(t, "https://app.hubspot.com/oauth/authorize", u.Scheme+"://"+u.Host+u.Path)
		q := u.Query()
		assert.Equal(t, "hs-client-e2e", q.Get("client_id"))
		assert.Equal(t, "https://api.example/api/integrations/crm/hubspot/callback", q.Get("redirect_uri"))
		assert.Equal(t, "S256", q.Get("code_challenge_method"))
		assert.NotEmpty(t, q.Get("code_challenge"))
		states[q.Get("state")] = true
		assert.NotContains(t, string(res.Body), secret)
	}
	assert.Len(t, states, 3, "a new state per start")

	bot := s.admin("bot", "create", "--account", s.demo.AccountID, "--name", "second")["bot_id"]
	res = s.post(s.demo.Token, "/api/bots/"+bot+"/crm/connections/hubspot/start", map[string]any{"account_key": "acme.example"})
	assert.Equal(t, http.StatusTooManyRequests, res.Status, "%s", res.Body)
	assert.Equal(t, "rate_limited", res.Code(t))
	assert.NotEmpty(t, res.Header.Get("Retry-After"))

	res = s.post(s.demo.Token, base+"/salesforce/start", map[string]any{"account_key": "acme.my.salesforce.com"})
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "Salesforce has no app here")
	assert.Equal(t, "oauth_not_configured", res.Code(t))

	// A state is bound to its provider: HubSpot's is refused at Salesforce's callback.
	for state := range states {
		res = s.get("", "/api/integrations/crm/salesforce/callback?"+url.Values{"state": {state}, "code": {"c"}}.Encode())
		assert.Equal(t, "invalid_state", res.Code(t))
		break
	}
	for _, line := range s.logLines() {
		for _, v := range line {
			if str, ok := v.(string); ok {
				assert.False(t, strings.Contains(str, secret), "the client secret reached the log")
			}
		}
	}
}

// crmEnv is the local process configured (CRM_* environment) to use the four fake CRMs on
// 127.0.0.1, which it may call only because CRM_PRIVATE_PROVIDER_ADDRESSES allows it.
type crmEnv struct {
	s    *server
	hs   *hubspotfake.Server
	sf   *salesforcefake.Server
	pd   *pipedrivefake.Server
	dyn  *dynamicsfake.Server
	base string
}

// Wrong credentials a customer might type; like the right ones, never in an answer or the log.
const (
	wrongPipedriveKey = "ffffffffffffffffffffffffffffffffffffffff"
	wrongDynamicsKey  = "wrong~dynamics~client~secret"
)

func startCRM(t *testing.T) *crmEnv {
	t.Helper()
	e := &crmEnv{hs: hubspotfake.New(t), sf: salesforcefake.New(t), pd: pipedrivefake.New(t), dyn: dynamicsfake.New(t)}
	e.s = startWithEnv(t, t.TempDir(), []string{
		"CRM_PRIVATE_PROVIDER_ADDRESSES=allow",
		"CRM_HUBSPOT_CLIENT_ID=" + hubspotfake.ClientID,
		"CRM_HUBSPOT_CLIENT_SECRET=" + hubspotfake.ClientSecret,
		"CRM_HUBSPOT_REDIRECT_URL=" + hubspotfake.RedirectURI,
		"CRM_HUBSPOT_AUTH_BASE_URL=" + e.hs.URL(),
		"CRM_HUBSPOT_API_BASE_URL=" + e.hs.URL(),
		"CRM_SALESFORCE_CLIENT_ID=" + salesforcefake.ClientID,
		"CRM_SALESFORCE_CLIENT_SECRET=" + salesforcefake.ClientSecret,
		"CRM_SALESFORCE_REDIRECT_URL=" + salesforcefake.RedirectURI,
		"CRM_SALESFORCE_LOGIN_BASE_URL=" + e.sf.URL(),
		"CRM_PIPEDRIVE_API_BASE_URL=" + e.pd.URL(),
		"CRM_DYNAMICS_LOGIN_BASE_URL=" + e.dyn.URL(),
		"CRM_DYNAMICS_ALLOWED_ORIGINS=" + e.dyn.URL(),
	})
	// The harness fails the test at the process's stop if any of these is in a response or
	// in the log.
	for _, secret := range []string{hubspotfake.ClientSecret, salesforcefake.ClientSecret, pipedrivefake.APIToken,
		dynamicsfake.ClientSecret, wrongPipedriveKey, wrongDynamicsKey} {
		e.s.secret(secret)
	}
	e.base = "/api/bots/" + e.s.demo.BotID + "/crm/connections"
	return e
}

// start begins an OAuth connection and checks the authorization URL: the fake's page, the
// deployment's app and registered redirect URI, a state and a PKCE S256 challenge.
func (e *crmEnv) start(t *testing.T, provider string) string {
	t.Helper()
	path := e.base + "/" + provider + "/start"
	res := e.s.post(e.s.demo.Token, path, map[string]any{"account_key": "demo-shop.example"})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/"+provider+"/start", path, res)
	redirect := res.JSON(t)["redirect_url"].(string)
	u, err := url.Parse(redirect)
	require.NoError(t, err)
	q := u.Query()
	switch provider {
	case "hubspot":
		assert.Equal(t, e.hs.URL()+"/oauth/authorize", u.Scheme+"://"+u.Host+u.Path)
		assert.Equal(t, hubspotfake.ClientID, q.Get("client_id"))
		assert.Equal(t, hubspotfake.RedirectURI, q.Get("redirect_uri"))
		assert.Contains(t, strings.Fields(q.Get("scope")), "crm.objects.contacts.write")
	case "salesforce":
		assert.Equal(t, e.sf.URL()+"/services/oauth2/authorize", u.Scheme+"://"+u.Host+u.Path)
		assert.Equal(t, salesforcefake.ClientID, q.Get("client_id"))
		assert.Equal(t, salesforcefake.RedirectURI, q.Get("redirect_uri"))
		assert.Equal(t, "api refresh_token", q.Get("scope"))
	}
	assert.Equal(t, "code", q.Get("response_type"))
	assert.Equal(t, "S256", q.Get("code_challenge_method"))
	assert.Len(t, q.Get("code_challenge"), 43)
	assert.Len(t, q.Get("state"), 43)
	return redirect
}

// consent is the user approving at the provider: the fake answers the redirect to the
// registered redirect URI with a code and the state. The registered URI's host stands for
// this process, whose callback the browser then calls (callback).
func consent(t *testing.T, redirect string) url.Values {
	t.Helper()
	q, err := crmfake.Consent(redirect)
	require.NoError(t, err)
	require.NotEmpty(t, q.Get("code"), "consent answered %v", q)
	require.NotEmpty(t, q.Get("state"))
	return q
}

// callback is the browser arriving at the process's callback: no token.
func (e *crmEnv) callback(t *testing.T, provider string, q url.Values) resp {
	t.Helper()
	res := e.s.get("", "/api/integrations/crm/"+provider+"/callback?"+q.Encode())
	conforms(t, http.MethodGet, "/api/integrations/crm/{provider}/callback", "/api/integrations/crm/"+provider+"/callback", res)
	return res
}

// summary checks a connection's answer: its safe summary, with no credential in it.
func summary(t *testing.T, res resp, status int, provider string) map[string]any {
	t.Helper()
	require.Equal(t, status, res.Status, "%s", res.Body)
	c := res.JSON(t)
	assert.Equal(t, provider, c["provider"])
	assert.Equal(t, "active", c["status"])
	for _, word := range []string{"token", "secret", "password"} {
		assert.NotContains(t, strings.ToLower(string(res.Body)), word, "a summary holds no credential")
	}
	return c
}

// The four providers through the real process and the real clients, against fakes that
// check what the CRMs check: OAuth with PKCE for HubSpot and Salesforce (callback, single
// use state, provider-bound state, revocation at disconnect), an API key for Pipedrive,
// client credentials for Dynamics; refused credentials are 422 and nothing holds a secret.
func TestCRMProviders(t *testing.T) {
	t.Parallel()
	e := startCRM(t)
	s := e.s
	var codes []string

	// HubSpot: start, consent, callback.
	q := consent(t, e.start(t, "hubspot"))
	codes = append(codes, q.Get("code"), q.Get("state"))
	res := e.callback(t, "hubspot", q)
	hs := summary(t, res, http.StatusCreated, "hubspot")
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	assert.Equal(t, "oauth", hs["auth"])
	assert.Equal(t, "demo-shop.example", hs["account_key"])
	assert.Equal(t, fmt.Sprint(hubspotfake.PortalID), hs["account"].(map[string]any)["id"])
	hsID := hs["id"].(string)
	assert.Equal(t, e.base+"/"+hsID, res.Header.Get("Location"))

	res = e.callback(t, "hubspot", q)
	assert.Equal(t, http.StatusBadRequest, res.Status, "the state is single-use")
	assert.Equal(t, "invalid_state", res.Code(t))

	res = s.get(s.demo.Token, e.base+"/"+hsID)
	summary(t, res, http.StatusOK, "hubspot")
	conforms(t, http.MethodGet, "/api/bots/{botID}/crm/connections/{connectionID}", e.base+"/"+hsID, res)

	// A HubSpot state at Salesforce's callback is refused, and stays good at HubSpot's: the
	// same portal authorized again reconnects the connection.
	q = consent(t, e.start(t, "hubspot"))
	codes = append(codes, q.Get("code"), q.Get("state"))
	res = e.callback(t, "salesforce", q)
	assert.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
	assert.Equal(t, "invalid_state", res.Code(t))
	res = e.callback(t, "hubspot", q)
	again := summary(t, res, http.StatusOK, "hubspot")
	assert.Equal(t, hsID, again["id"])
	assert.Equal(t, float64(2), again["revision"])

	// Salesforce: the instance URL comes from the token response.
	q = consent(t, e.start(t, "salesforce"))
	codes = append(codes, q.Get("code"), q.Get("state"))
	res = e.callback(t, "salesforce", q)
	sf := summary(t, res, http.StatusCreated, "salesforce")
	assert.Equal(t, e.sf.URL(), sf["instance_url"])
	assert.Equal(t, map[string]any{"id": salesforcefake.OrgID, "name": salesforcefake.OrgName, "user": salesforcefake.Username}, sf["account"])
	sfID := sf["id"].(string)

	// Pipedrive: the key is checked at Pipedrive first.
	res = s.post(s.demo.Token, e.base+"/pipedrive", map[string]any{"api_key": wrongPipedriveKey, "company_domain": "demo-shop"})
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "crm_credentials_rejected", res.Code(t))
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/pipedrive", e.base+"/pipedrive", res)
	res = s.post(s.demo.Token, e.base+"/pipedrive", map[string]any{"api_key": pipedrivefake.APIToken, "company_domain": "demo-shop"})
	pd := summary(t, res, http.StatusCreated, "pipedrive")
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/pipedrive", e.base+"/pipedrive", res)
	assert.Equal(t, map[string]any{"id": fmt.Sprint(pipedrivefake.CompanyID), "name": pipedrivefake.CompanyName, "user": pipedrivefake.UserEmail},
		pd["account"])
	assert.Equal(t, e.pd.URL(), pd["instance_url"])
	for _, u := range e.pd.RequestURIs() {
		assert.NotContains(t, u, pipedrivefake.APIToken, "the key travels in a header, never a URL")
	}

	// Dynamics: a token from Entra ID, then WhoAmI at the environment.
	dyn := func(secret string, login ...string) resp {
		body := map[string]any{"tenant_id": dynamicsfake.TenantID, "client_id": dynamicsfake.ClientID,
			"client_secret": secret, "environment_url": e.dyn.URL()}
		if len(login) > 0 {
			body["login"] = login[0]
		}
		return s.post(s.demo.Token, e.base+"/dynamics", body)
	}
	// A login names the application user the credentials must act as (its domainname).
	res = dyn(dynamicsfake.ClientSecret, "someone-else@demoshop.onmicrosoft.com")
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	res = dyn(wrongDynamicsKey)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "crm_credentials_rejected", res.Code(t))
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/dynamics", e.base+"/dynamics", res)
	res = dyn(dynamicsfake.ClientSecret, dynamicsfake.AppUserName)
	d := summary(t, res, http.StatusCreated, "dynamics")
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/dynamics", e.base+"/dynamics", res)
	assert.Equal(t, "oidc", d["auth"])
	assert.Equal(t, dynamicsfake.OrganizationID, d["account"].(map[string]any)["id"])
	assert.Equal(t, map[string]any{"contacts": "contacts", "deals": "opportunities"}, d["entities"])

	res = s.get(s.demo.Token, e.base)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/crm/connections", e.base, res)
	var providers []string
	for _, c := range res.JSON(t)["data"].([]any) {
		providers = append(providers, c.(map[string]any)["provider"].(string))
	}
	assert.ElementsMatch(t, []string{"hubspot", "salesforce", "pipedrive", "dynamics"}, providers)

	// Disconnecting revokes the grant at the provider.
	for _, c := range []struct {
		id      string
		revoked func() int
	}{{hsID, e.hs.Revocations}, {sfID, e.sf.Revocations}} {
		res = s.del(s.demo.Token, e.base+"/"+c.id)
		require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
		conforms(t, http.MethodDelete, "/api/bots/{botID}/crm/connections/{connectionID}", e.base+"/"+c.id, res)
		assert.Equal(t, 1, c.revoked(), "the provider revoked the grant")
		assert.Equal(t, http.StatusNotFound, s.get(s.demo.Token, e.base+"/"+c.id).Status)
	}

	// The callbacks the states authenticated are audited as the starter's, without a code,
	// a state or a secret; the refused ones authenticated no one.
	res = s.get(s.demo.Token, "/api/audit-events?bot_id="+s.demo.BotID+"&limit=200")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	var callbacks []float64
	for _, ev := range res.JSON(t)["data"].([]any) {
		ev := ev.(map[string]any)
		if ev["route"] == "GET /api/integrations/crm/{provider}/callback" {
			callbacks = append(callbacks, ev["status"].(float64))
			assert.Equal(t, s.demo.UserID, ev["actor_user_id"])
			assert.Equal(t, s.demo.TokenID, ev["token_id"])
		}
	}
	assert.ElementsMatch(t, []float64{201, 200, 201}, callbacks)
	logs := s.stderr.String()
	for _, v := range codes {
		assert.NotContains(t, string(res.Body), v, "no code or state in the audit trail")
		assert.NotContains(t, logs, v, "no code or state in the log")
	}
}

// Discovery, a mapping revision and a preview through the process against the Pipedrive
// fake: the preview reads the CRM and writes nothing to it.
func TestCRMMappingAndPreview(t *testing.T) {
	t.Parallel()
	e := startCRM(t)
	s, tok := e.s, e.s.demo.Token
	api := "/api/bots/" + s.demo.BotID

	res := s.post(tok, e.base+"/pipedrive", map[string]any{"api_key": pipedrivefake.APIToken, "company_domain": "acme"})
	id := summary(t, res, http.StatusCreated, "pipedrive")["id"].(string)
	conn := e.base + "/" + id

	res = s.get(tok, conn+"/objects/persons/fields")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/crm/connections/{connectionID}/objects/{object}/fields", conn+"/objects/persons/fields", res)
	res = s.get(tok, conn+"/pipelines")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	for _, f := range []map[string]any{{"name": "email", "type": "string"}, {"name": "orders", "type": "number"}} {
		r := s.post(tok, api+"/fields", f)
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	}
	r := s.post(tok, api+"/subscribers", map[string]any{"channel": "telegram", "external_id": "6001", "first_name": "Ann",
		"fields": map[string]any{"email": "ann@example.com", "orders": 7}})
	require.Less(t, r.Status, 300, "%s", r.Body)
	sub := r.JSON(t)["id"].(string)

	mapping := map[string]any{"object": "persons", "key": "email", "fields": []any{
		map[string]any{"source": "subscriber:first_name", "target": "name", "direction": "push"},
		map[string]any{"source": "field:orders", "target": pipedrivefake.KeyConversations, "direction": "push"},
	}}
	res = s.do(req{Method: http.MethodPut, Path: conn + "/mapping", Token: tok, Body: mapping})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	conforms(t, http.MethodPut, "/api/bots/{botID}/crm/connections/{connectionID}/mapping", conn+"/mapping", res)
	// A stale revision is 409; an unknown CRM field 422.
	mapping["expected_revision"] = 7
	res = s.do(req{Method: http.MethodPut, Path: conn + "/mapping", Token: tok, Body: mapping})
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	mapping["expected_revision"] = 1
	mapping["fields"] = []any{map[string]any{"source": "field:orders", "target": "no_such_field", "direction": "push"}}
	res = s.do(req{Method: http.MethodPut, Path: conn + "/mapping", Token: tok, Body: mapping})
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "invalid_mapping", res.Code(t))

	res = s.post(tok, conn+"/preview", map[string]any{"subscriber_id": sub})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, "/api/bots/{botID}/crm/connections/{connectionID}/preview", conn+"/preview", res)
	p := res.JSON(t)
	assert.Equal(t, "create", p["action"])
	assert.Equal(t, map[string]any{"name": "Ann", pipedrivefake.KeyConversations: float64(7)}, p["properties"])
	assert.Empty(t, e.pd.Records("persons"), "a preview writes nothing to the CRM")
}
