package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	s := startWithEnv(t, t.TempDir(), []string{
		"CRM_HUBSPOT_CLIENT_ID=hs-client-e2e",
		"CRM_HUBSPOT_CLIENT_SECRET=" + secret,
		"CRM_HUBSPOT_REDIRECT_URL=https://api.example/api/integrations/crm/hubspot/callback",
	})
	base := "/api/bots/" + s.demo.BotID + "/crm/connections"
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
	res := s.post(s.demo.Token, "/api/bots/"+bot+"/crm/connections/hubspot/start", map[string]any{"account_key": "acme.example"})
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
