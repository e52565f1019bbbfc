package crm

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/oauthstate"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	read := httpapi.Need("crm:read", auth.RightReactions).InPlan(auth.FeatureCRM)
	write := httpapi.Need("crm:write", auth.RightReactions).InPlan(auth.FeatureCRM)
	subRead := httpapi.Need("subscribers:read", auth.RightDialogs).InPlan(auth.FeatureCRM)
	subWrite := httpapi.Need("subscribers:write", auth.RightDialogs).InPlan(auth.FeatureCRM)
	const base = "/api/bots/{botID}/crm/connections"
	want := map[string]httpapi.Access{
		"GET " + base:                                                     read,
		"GET " + base + "/{connectionID}":                                 read,
		"DELETE " + base + "/{connectionID}":                              write,
		"POST " + base + "/hubspot/start":                                 write,
		"POST " + base + "/salesforce/start":                              write,
		"POST " + base + "/pipedrive":                                     write,
		"POST " + base + "/dynamics":                                      write,
		"GET /api/integrations/crm/{provider}/callback":                   httpapi.Public(),
		"GET " + base + "/{connectionID}/objects":                         read,
		"GET " + base + "/{connectionID}/objects/{object}/fields":         read,
		"GET " + base + "/{connectionID}/pipelines":                       read,
		"GET " + base + "/{connectionID}/mapping":                         read,
		"PUT " + base + "/{connectionID}/mapping":                         write,
		"GET " + base + "/{connectionID}/mapping/revisions":               read,
		"GET " + base + "/{connectionID}/mapping/revisions/{revision}":    read,
		"POST " + base + "/{connectionID}/preview":                        write,
		"POST " + base + "/{connectionID}/jobs":                           write,
		"GET " + base + "/{connectionID}/jobs":                            read,
		"GET " + base + "/{connectionID}/jobs/{jobID}":                    read,
		"GET " + base + "/{connectionID}/jobs/{jobID}/errors":             read,
		"POST " + base + "/{connectionID}/jobs/{jobID}/cancel":            write,
		"GET " + base + "/{connectionID}/conflicts":                       read,
		"GET " + base + "/{connectionID}/conflicts/{conflictID}":          read,
		"POST " + base + "/{connectionID}/conflicts/{conflictID}/resolve": write,
		// The subscriber's own actions: the subscribers scopes and the Dialogs right.
		"GET /api/bots/{botID}/subscribers/{subscriberID}/crm":        subRead,
		"GET /api/bots/{botID}/subscribers/{subscriberID}/crm/deals":  subRead,
		"POST /api/bots/{botID}/subscribers/{subscriberID}/crm/sync":  subWrite,
		"POST /api/bots/{botID}/subscribers/{subscriberID}/crm/notes": subWrite,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range f.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

// The whole OAuth flow: start, the provider's consent, the callback that exchanges the code
// with the PKCE verifier and stores the connection; then list, read, reconnect.
func TestOAuthFlow(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := f.Do(t, "POST", f.base+"/hubspot/start", `{"account_key":" Acme.Example "}`)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	redirect := res.JSON["redirect_url"].(string)
	u, err := url.Parse(redirect)
	require.NoError(t, err)
	assert.Equal(t, redirectURL, u.Query().Get("redirect_uri"))
	assert.Equal(t, "oauth crm.objects.contacts.write", u.Query().Get("scope"))
	assert.Len(t, u.Query().Get("state"), 43, "256 random bits, base64url")
	expires, err := time.Parse(time.RFC3339, res.JSON["expires_at"].(string))
	require.NoError(t, err)
	assert.Equal(t, f.clock.Now().Add(StateTTL), expires)

	// Only the state's hash is stored, and the verifier only sealed.
	state := u.Query().Get("state")
	it, err := f.raw.Get(sqlitetest.Unrecorded(t.Context()), oauthstate.Key(stateFamily, state))
	require.NoError(t, err)
	assert.NotContains(t, it.PK+string(it.Data), state)
	assert.Contains(t, string(it.Data), `"account_key":"acme.example"`)

	code, state := f.auth.authorize(t, redirect)
	res = f.callback(t, "hubspot", url.Values{"code": {code}, "state": {state}})
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	conn := res.JSON
	id := conn["id"].(string)
	assert.Equal(t, "hubspot", conn["provider"])
	assert.Equal(t, "oauth", conn["auth"])
	assert.Equal(t, "active", conn["status"])
	assert.Equal(t, "acme.example", conn["account_key"])
	assert.Equal(t, map[string]any{"id": "portal-42", "name": "acme.example"}, conn["account"])
	assert.Equal(t, "/api/bots/"+f.bot+"/crm/connections/"+id, res.Header.Get("Location"))
	for _, secret := range []string{"at-", "rt-", "token", hubspotSecret} {
		assert.NotContains(t, res.Body, secret)
	}
	assert.NotContains(t, f.partition(t), "at-", "the tokens are stored sealed")

	// The state is single-use, whoever brings it back.
	res = f.callback(t, "hubspot", url.Values{"code": {code}, "state": {state}})
	assert.Equal(t, http.StatusBadRequest, res.Code)
	assert.Equal(t, "invalid_state", res.Problem())

	// The creation is audited as the start's caller's.
	events, _, err := audit.NewLog(f.raw).List(sqlitetest.Unrecorded(t.Context()), f.Account.ID, f.bot, 50, "")
	require.NoError(t, err)
	var callbacks []audit.Event
	for _, e := range events {
		if e.Route == CallbackRoute {
			callbacks = append(callbacks, e)
		}
	}
	require.Len(t, callbacks, 1, "the refused reuse authenticated no one")
	assert.Equal(t, http.StatusCreated, callbacks[0].Status)
	assert.Equal(t, f.Owner.ID, callbacks[0].ActorUserID)
	assert.Equal(t, "pat", callbacks[0].TokenKind)

	res = f.Do(t, "GET", f.base, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	require.Len(t, res.JSON["data"], 1)
	assert.Nil(t, res.JSON["next_cursor"])
	res = f.Do(t, "GET", f.base+"/"+id, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["revision"])

	// Authorizing the same portal again reconnects the connection: same id, new revision.
	again := f.connectHubSpot(t)
	assert.Equal(t, id, again["id"])
	assert.Equal(t, float64(2), again["revision"])
	res = f.Do(t, "GET", f.base, nil)
	assert.Len(t, res.JSON["data"], 1)
}

// A callback's state must be known, unused, younger than 5 minutes and the provider's.
func TestCallbackRefusesStates(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	start := func() (string, string) {
		res := f.Do(t, "POST", f.base+"/hubspot/start", `{"account_key":"acme.example"}`)
		require.Equal(t, http.StatusOK, res.Code, res.Body)
		return f.auth.authorize(t, res.JSON["redirect_url"].(string))
	}
	for name, q := range map[string]url.Values{
		"no state":      {"code": {"c"}},
		"unknown state": {"code": {"c"}, "state": {"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
		"long state":    {"code": {"c"}, "state": {strings.Repeat("a", 200)}},
	} {
		res := f.callback(t, "hubspot", q)
		assert.Equal(t, http.StatusBadRequest, res.Code, name)
		assert.Equal(t, "invalid_state", res.Problem(), name)
	}

	code, state := start()
	res := f.callback(t, "salesforce", url.Values{"code": {code}, "state": {state}})
	assert.Equal(t, "invalid_state", res.Problem(), "another provider's state")
	res = f.callback(t, "pipedrive", url.Values{"code": {code}, "state": {state}})
	assert.Equal(t, http.StatusNotFound, res.Code, "no OAuth callback for an API-key provider")
	res = f.callback(t, "hubspot", url.Values{"code": {code}, "state": {state}})
	require.Equal(t, http.StatusCreated, res.Code, "the state refused at the wrong provider is still good at its own: %s", res.Body)

	code, state = start()
	f.clock.Advance(StateTTL)
	res = f.callback(t, "hubspot", url.Values{"code": {code}, "state": {state}})
	assert.Equal(t, "invalid_state", res.Problem(), "expired")

	_, state = start()
	res = f.callback(t, "hubspot", url.Values{"error": {"access_denied"}, "state": {state}})
	assert.Equal(t, http.StatusBadRequest, res.Code)
	assert.Equal(t, "oauth_denied", res.Problem())
	assert.Equal(t, "access_denied", res.JSON["provider_error"])

	f.clock.Advance(time.Minute) // the start limit
	_, state = start()
	res = f.callback(t, "hubspot", url.Values{"code": {"forged"}, "state": {state}})
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code)
	assert.Equal(t, "oauth_code_rejected", res.Problem())
	assert.Equal(t, "invalid_grant", res.JSON["provider_code"])
}

func TestStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := f.Do(t, "POST", f.base+"/salesforce/start", `{"account_key":"acme.my.salesforce.com"}`)
	assert.Equal(t, http.StatusServiceUnavailable, res.Code)
	assert.Equal(t, "oauth_not_configured", res.Problem())

	for body, code := range map[string]string{
		`{"account_key":"acme.example","extra":1}`: "unknown_field",
		`{}`:                                     "validation_failed",
		`{"account_key":"a b"}`:                  "validation_failed",
		`{"account_key":"-acme"}`:                "validation_failed",
		`{"account_key":"acme..x"}`:              "validation_failed",
		`{"account_key":"https://acme.example"}`: "validation_failed",
		`{"account_key":"` + strings.Repeat("a.", 130) + `a"}`: "validation_failed",
	} {
		res := f.Do(t, "POST", f.base+"/hubspot/start", body)
		assert.Equal(t, http.StatusBadRequest, res.Code, body)
		assert.Equal(t, code, res.Problem(), body)
	}

	for i := range 3 {
		res := f.Do(t, "POST", f.base+"/hubspot/start", fmt.Sprintf(`{"account_key":"acme%d.example"}`, i))
		require.Equal(t, http.StatusOK, res.Code, res.Body)
		f.clock.Advance(10 * time.Second)
	}
	res = f.Do(t, "POST", "/api/bots/"+f.otherBot+"/crm/connections/hubspot/start", `{"account_key":"acme.example"}`)
	assert.Equal(t, http.StatusTooManyRequests, res.Code, "the limit is the account's, whatever the bot")
	assert.Equal(t, "rate_limited", res.Problem())
	assert.Equal(t, "30", res.Header.Get("Retry-After"), "until the first start is a minute old")
	f.clock.Advance(30 * time.Second)
	res = f.Do(t, "POST", f.base+"/hubspot/start", `{"account_key":"acme.example"}`)
	assert.Equal(t, http.StatusOK, res.Code, res.Body)
}

func TestConnectPipedrive(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"wrong-key","company_domain":"acme"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "crm_credentials_rejected", res.Problem())
	assert.Empty(t, f.partition(t), "nothing stored for refused credentials")

	for body, code := range map[string]string{
		`{"api_key":"k","company_domain":"acme","token":"x"}`:  "unknown_field",
		`{"api_key":"","company_domain":"acme"}`:               "validation_failed",
		`{"api_key":"has space","company_domain":"acme"}`:      "validation_failed",
		`{"api_key":"k","company_domain":"acme.evil.example"}`: "validation_failed",
		`{"api_key":1,"company_domain":"acme"}`:                "invalid_body",
	} {
		res := f.Do(t, "POST", f.base+"/pipedrive", body)
		assert.Equal(t, http.StatusBadRequest, res.Code, body)
		assert.Equal(t, code, res.Problem(), body)
	}

	res = f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"`+goodAPIKey+`","company_domain":"Acme.pipedrive.com"}`)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	id := res.JSON["id"].(string)
	assert.Equal(t, "api_key", res.JSON["auth"])
	assert.Equal(t, "https://acme.pipedrive.com", res.JSON["instance_url"])
	assert.NotContains(t, res.Body, goodAPIKey)
	assert.NotContains(t, f.partition(t), goodAPIKey, "the key is stored sealed")

	res = f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"`+goodAPIKey+`","company_domain":"acme"}`)
	require.Equal(t, http.StatusOK, res.Code, "the same company and user: the connection is reconnected: %s", res.Body)
	assert.Equal(t, id, res.JSON["id"])

	// Provider errors map to documented codes.
	f.provider.fail(&crmapi.RateLimitedError{RetryAfter: 6500 * time.Millisecond})
	res = f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"`+goodAPIKey+`","company_domain":"acme"}`)
	assert.Equal(t, http.StatusServiceUnavailable, res.Code)
	assert.Equal(t, "provider_unavailable", res.Problem())
	assert.Equal(t, "7", res.Header.Get("Retry-After"))
	f.provider.fail(&crmapi.ProviderError{Status: 502, Temporary: true})
	res = f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"`+goodAPIKey+`","company_domain":"acme"}`)
	assert.Equal(t, "provider_unavailable", res.Problem())
	f.provider.fail(crmapi.ErrForbidden)
	res = f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"`+goodAPIKey+`","company_domain":"acme"}`)
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code)
	assert.Equal(t, "crm_permission_denied", res.Problem())
	f.provider.fail(&crmapi.ProviderError{Status: 404, Code: "company <not> found"})
	res = f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"`+goodAPIKey+`","company_domain":"acme"}`)
	assert.Equal(t, "crm_request_rejected", res.Problem())
	assert.Equal(t, float64(404), res.JSON["provider_status"])
	assert.NotContains(t, res.JSON, "provider_code", "a provider's text that is no code is not echoed")
}

func TestConnectDynamics(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	body := func(secret, env, login string) string {
		return fmt.Sprintf(`{"tenant_id":%q,"client_id":%q,"client_secret":%q,"environment_url":%q,"login":%q,"entities":{"contacts":"leads"}}`,
			dynamicsTenant, dynamicsClient, secret, env, login)
	}
	res := f.Do(t, "POST", f.base+"/dynamics", body("wrong", "https://acme.crm4.dynamics.com", ""))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "crm_credentials_rejected", res.Problem())

	for _, env := range []string{f.auth.URL, "https://evil.example", "https://dynamics.com", "https://acme.crm4.dynamics.com:8443", "ftp://acme.crm4.dynamics.com"} {
		res := f.Do(t, "POST", f.base+"/dynamics", body(dynamicsSecret, env, ""))
		assert.Equal(t, http.StatusBadRequest, res.Code, env)
		assert.Equal(t, "validation_failed", res.Problem(), env)
	}
	res = f.Do(t, "POST", f.base+"/dynamics", `{"tenant_id":"x","client_id":"y","client_secret":"z","environment_url":"https://acme.crm4.dynamics.com","entities":{"deals":"Opportunities!"}}`)
	require.Equal(t, http.StatusBadRequest, res.Code)
	assert.Len(t, res.JSON["errors"], 3, "tenant_id, client_id, entities.deals: %s", res.Body)
	// Deals are opportunities: another entity set is refused, not accepted and ignored.
	res = f.Do(t, "POST", f.base+"/dynamics", fmt.Sprintf(`{"tenant_id":%q,"client_id":%q,"client_secret":"s","environment_url":"https://acme.crm4.dynamics.com","entities":{"contacts":"new_subscribers","deals":"new_deals"}}`,
		dynamicsTenant, dynamicsClient))
	require.Equal(t, http.StatusBadRequest, res.Code, res.Body)
	require.Len(t, res.JSON["errors"], 1, "%s", res.Body)
	assert.Equal(t, "entities.deals", res.JSON["errors"].([]any)[0].(map[string]any)["field"], "%s", res.Body)
	assert.Contains(t, res.Body, "opportunities")

	res = f.Do(t, "POST", f.base+"/dynamics", body(dynamicsSecret, "https://acme.crm4.dynamics.com/", "someone@contoso.com"))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "crm_credentials_rejected", res.Problem(), "the credentials act as another user than login")

	res = f.Do(t, "POST", f.base+"/dynamics", body(dynamicsSecret, "https://ACME.crm4.dynamics.com/", "CRM-bot@contoso.com"))
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	assert.Equal(t, "oidc", res.JSON["auth"])
	assert.Equal(t, "https://acme.crm4.dynamics.com", res.JSON["instance_url"])
	assert.Equal(t, map[string]any{"contacts": "leads", "deals": "opportunities"}, res.JSON["entities"])
	assert.NotContains(t, res.Body, dynamicsSecret)
	assert.NotContains(t, f.partition(t), dynamicsSecret)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	conn := f.connectHubSpot(t)
	id := conn["id"].(string)
	res := f.Do(t, "DELETE", "/api/bots/"+f.otherBot+"/crm/connections/"+id, nil)
	assert.Equal(t, http.StatusNotFound, res.Code, "another bot's connection")
	res = f.Do(t, "GET", "/api/bots/"+f.otherBot+"/crm/connections/"+id, nil)
	assert.Equal(t, http.StatusNotFound, res.Code)
	res = f.Do(t, "GET", f.base+"/crm_notanid", nil)
	assert.Equal(t, http.StatusNotFound, res.Code)

	f.provider.fail(&crmapi.ProviderError{Status: 503, Temporary: true}) // revocation fails: disconnected all the same
	res = f.Do(t, "DELETE", f.base+"/"+id, nil)
	require.Equal(t, http.StatusNoContent, res.Code, res.Body)
	revoked := f.provider.revocations()
	require.Len(t, revoked, 1)
	assert.True(t, strings.HasPrefix(revoked[0].RefreshToken, "rt-"), "the provider was asked to revoke the connection's grant")
	assert.Empty(t, f.partition(t), "connection, credentials and account reservation removed")
	res = f.Do(t, "GET", f.base+"/"+id, nil)
	assert.Equal(t, http.StatusNotFound, res.Code)
	res = f.Do(t, "DELETE", f.base+"/"+id, nil)
	assert.Equal(t, http.StatusNotFound, res.Code)

	f.provider.fail(nil)
	again := f.connectHubSpot(t)
	assert.NotEqual(t, id, again["id"], "after a disconnect the account connects anew")
}

// Every route needs the Reactions right; reads crm:read, writes crm:write.
func TestRoutesAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	analyst, err := f.Auth.CreateUser(ctx, f.Account.ID, "analyst", auth.RightsOf(auth.RightAnalytics))
	require.NoError(t, err)
	res := f.DoAs(t, f.PAT(t, analyst, "crm:*"), "GET", f.base, nil)
	assert.Equal(t, http.StatusForbidden, res.Code, res.Body)
	assert.Equal(t, "missing_right", res.Problem())
	reader := f.PAT(t, f.Owner, "crm:read")
	res = f.DoAs(t, reader, "GET", f.base, nil)
	assert.Equal(t, http.StatusOK, res.Code, res.Body)
	res = f.DoAs(t, reader, "POST", f.base+"/hubspot/start", `{"account_key":"acme.example"}`)
	assert.Equal(t, http.StatusForbidden, res.Code)
	assert.Equal(t, "insufficient_scope", res.Problem())
	res = f.DoAs(t, f.PAT(t, f.Owner, "crm:write"), "GET", f.base, nil)
	assert.Equal(t, http.StatusForbidden, res.Code, "crm:write does not read")
	res = f.Do(t, "GET", "/api/bots/bot_00000000000000000000000000/crm/connections", nil)
	assert.Equal(t, http.StatusNotFound, res.Code)
	res = f.DoAs(t, "mbp_bad", "GET", f.base, nil)
	assert.Equal(t, http.StatusUnauthorized, res.Code)

	// The plan feature.
	_, err = f.Auth.SetPlan(ctx, f.Account.ID, []auth.Feature{auth.FeatureWebPush})
	require.NoError(t, err)
	res = f.DoAs(t, f.PAT(t, f.Owner), "GET", f.base, nil)
	assert.Equal(t, http.StatusPaymentRequired, res.Code)
	assert.Equal(t, "feature_not_in_plan", res.Problem())
}

// A connection's list is paged with the kernel's sealed cursors.
func TestListPages(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 3 {
		c := Connection{Provider: crmapi.Pipedrive, Auth: crmapi.AuthAPIKey, Account: crmapi.Account{ID: fmt.Sprint("company-", i)}}
		_, created, err := f.svc.connect(t.Context(), f.bot, c, crmapi.Credentials{APIKey: goodAPIKey})
		require.NoError(t, err)
		require.True(t, created)
		f.clock.Advance(time.Second)
	}
	res := f.Do(t, "GET", f.base+"?limit=2", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	page := res.JSON["data"].([]any)
	require.Len(t, page, 2)
	assert.Equal(t, "company-2", page[0].(map[string]any)["account"].(map[string]any)["id"], "newest first")
	res = f.Do(t, "GET", f.base+"?limit=2&cursor="+url.QueryEscape(res.JSON["next_cursor"].(string)), nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Len(t, res.JSON["data"], 1)
	res = f.Do(t, "GET", "/api/bots/"+f.otherBot+"/crm/connections?cursor=abc", nil)
	assert.Equal(t, "invalid_cursor", res.Problem())
}
