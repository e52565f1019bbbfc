package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/bots"
	crmwiring "github.com/botplatform/api/functions/crm/wiring"
	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/mcptool"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	hubspotfake "github.com/botplatform/api/tests/fakes/crm/hubspot"
	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
)

// The CRM read tools, as the MCP Lambda composes them: with the CRM credentials' sealer
// alone (family.Deps.CRMSecrets: on AWS the key under the CRM encryption context, the only
// one the Lambda is granted it under; no sealer of channel credentials) and the OAuth
// applications' client secrets handed over as the platform reads them from SSM
// (family.Deps.CRMClientSecrets), against the HubSpot and Pipedrive fakes. Each answers
// what its REST route (the crm family's, recorded as the crm Lambda's) answers; a HubSpot
// token about to expire is refreshed by the tool, once, and stored; a key the CRM refuses
// marks the connection; nothing is audited; and every store operation stays within the mcp
// row of infra/access (TestMain).
//
// Not parallel: the family reads its configuration (the fakes' URLs) from the environment.
func TestCRMToolsInTheLambda(t *testing.T) {
	hs, pd := hubspotfake.New(t), pipedrivefake.New(t)
	for k, v := range map[string]string{
		crmwiring.EnvPrivateAddresses: "allow", crmwiring.EnvHubSpotClientID: hubspotfake.ClientID,
		crmwiring.EnvHubSpotRedirectURL: hubspotfake.RedirectURI, crmwiring.EnvHubSpotAuthBaseURL: hs.URL(),
		crmwiring.EnvHubSpotAPIBaseURL: hs.URL(), crmwiring.EnvPipedriveAPIBaseURL: pd.URL(),
	} {
		t.Setenv(k, v)
	}
	// A clock the test moves, past the HubSpot token's expiry.
	var skew atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	key, err := keyfile.New(bytes.Repeat([]byte{5}, 32))
	require.NoError(t, err)
	secrets := map[string]string{crmapi.HubSpot: hubspotfake.ClientSecret}
	st := sqlitetest.Open(t, sqlite.WithClock(now))
	out := &captured{}
	env := familytest.Env(t, family.Deps{Store: st, Now: now, Tenancy: bots.Tenancy, Audit: out, Queue: out, CRMSecrets: key, CRMClientSecrets: secrets})
	require.Nil(t, env.Secrets, "the Lambda opens no channel credentials")
	tools := lambdaTools(env)

	// Setup: an account, a bot with an email field.
	setup := sqlitetest.Unrecorded(t.Context())
	acct, owner, err := env.Auth.CreateAccount(setup, "Acme")
	require.NoError(t, err)
	bot, err := bots.NewService(env.Store, env.Auth, env.Now).Create(setup, acct.ID, "Shop", nil)
	require.NoError(t, err)
	_, err = subscribers.NewService(env.Store, env.Now, nil).CreateField(setup, bot.ID, subscribers.FieldSpec{Name: "email", Type: subscribers.TypeString})
	require.NoError(t, err)
	p := &auth.Principal{AccountID: acct.ID, UserID: owner.ID, TokenID: "pat_x", Kind: auth.KindPAT, Scopes: auth.Scopes{auth.Full}, Role: auth.RoleOwner}

	// The REST routes, served by the crm family as its Lambda does (recorded as the crm
	// Lambda's), on the same store and CRM key; the channels' key is another, so that what
	// the tools open is what the routes sealed with the CRM sealer.
	channelKey, err := keyfile.New(bytes.Repeat([]byte{6}, 32))
	require.NoError(t, err)
	rest := familytest.Env(t, family.Deps{Store: st, Now: now, Tenancy: bots.Tenancy, Secrets: channelKey, CRMSecrets: key, CRMClientSecrets: secrets})
	mux, err := family.Compose(rest, families.All()...).Mux(func(*http.Request) (*auth.Principal, error) { return p, nil })
	require.NoError(t, err)
	do := func(method, path, body string, want int) string {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r := httptest.NewRequestWithContext(sqlitetest.As(context.Background(), "crm"), method, path, rd)
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		require.Equal(t, want, rec.Code, "%s %s: %s", method, path, rec.Body)
		return rec.Body.String()
	}
	base := "/api/bots/" + bot.ID + "/crm/connections"
	pdID := mustJSON(t, do("POST", base+"/pipedrive", `{"api_key":"`+pipedrivefake.APIToken+`","company_domain":"acme"}`, 201))["id"].(string)
	started := mustJSON(t, do("POST", base+"/hubspot/start", `{"account_key":"acme.example"}`, 200))
	q, err := crmfake.Consent(started["redirect_url"].(string))
	require.NoError(t, err)
	hsID := mustJSON(t, do("GET", "/api/integrations/crm/hubspot/callback?"+url.Values{"code": {q.Get("code")}, "state": {q.Get("state")}}.Encode(), "", 201))["id"].(string)
	do("PUT", base+"/"+pdID+"/mapping", `{"object":"persons","key":"email","fields":[{"source":"subscriber:first_name","target":"name","direction":"push"}]}`, 201)

	ctx := auth.NewContext(t.Context(), p)
	d := mcptool.Deps{Bots: env.Tenancy, Audit: env.Audit, Log: env.Log, Now: env.Now}
	call := func(tool string, args map[string]any) mcptool.Result {
		t.Helper()
		tl, ok := tools[tool]
		require.True(t, ok, "the Lambda serves %s", tool)
		b, err := json.Marshal(args)
		require.NoError(t, err)
		return tl.Call(ctx, d, b)
	}
	answer := func(res mcptool.Result) string {
		t.Helper()
		require.Nil(t, res.Err, "%v", res.Err)
		b, err := json.Marshal(res.Value)
		require.NoError(t, err)
		return string(b)
	}
	botArg := func(more ...any) map[string]any {
		m := map[string]any{"bot_id": bot.ID}
		for i := 0; i+1 < len(more); i += 2 {
			m[more[i].(string)] = more[i+1]
		}
		return m
	}

	var listed map[string]any
	require.NoError(t, json.Unmarshal([]byte(answer(call("list_crm_connections", botArg()))), &listed))
	assert.Equal(t, mustJSON(t, do("GET", base, "", 200))["data"], listed["data"])
	assert.Len(t, listed["data"], 2)

	// Fields from the CRM (the tool fills the cache the route then serves).
	fields := answer(call("get_crm_fields", botArg("connection_id", pdID, "object", "persons")))
	assert.JSONEq(t, do("GET", base+"/"+pdID+"/objects/persons/fields", "", 200), fields)
	assert.Contains(t, fields, pipedrivefake.KeySubscribed)

	// An hour on, the HubSpot token has expired: the tool refreshes it once and stores it.
	skew.Store(int64(time.Hour))
	exchanges := hs.TokenRequests()
	pipelines := answer(call("list_crm_pipelines", botArg("connection_id", hsID)))
	assert.Equal(t, exchanges+1, hs.TokenRequests(), "one refresh")
	assert.JSONEq(t, do("GET", base+"/"+hsID+"/pipelines", "", 200), pipelines)
	// Back to the real time, in which the new token is fresh: it is used as stored.
	skew.Store(0)
	answer(call("get_crm_fields", botArg("connection_id", hsID, "object", "contacts", "refresh", true)))
	assert.Equal(t, exchanges+1, hs.TokenRequests(), "the refreshed token was stored and is used")

	// The mapping, current and by revision.
	assert.JSONEq(t, do("GET", base+"/"+pdID+"/mapping", "", 200), answer(call("get_crm_mapping", botArg("connection_id", pdID))))
	assert.JSONEq(t, do("GET", base+"/"+pdID+"/mapping/revisions/1", "", 200), answer(call("get_crm_mapping", botArg("connection_id", pdID, "revision", 1))))

	// A key the CRM refuses: 422, and the connection is marked for reconnection.
	pd.RevokeToken(pipedrivefake.APIToken)
	res := call("list_crm_pipelines", botArg("connection_id", pdID, "refresh", true))
	require.NotNil(t, res.Err)
	assert.Equal(t, "crm_credentials_rejected", res.Err.Code)
	assert.Equal(t, "reconnect_required", mustJSON(t, do("GET", base+"/"+pdID, "", 200))["status"])

	out.mu.Lock()
	defer out.mu.Unlock()
	for _, e := range out.events {
		assert.False(t, strings.HasPrefix(e.Route, "POST /mcp/tools/"), "a read tool was audited: %s", e.Route)
	}
}
