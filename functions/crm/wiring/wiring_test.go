package wiring

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/crm"
	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/secrets/keyfile"
	dynamicsfake "github.com/botplatform/api/tests/fakes/crm/dynamics"
	hubspotfake "github.com/botplatform/api/tests/fakes/crm/hubspot"
	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
	salesforcefake "github.com/botplatform/api/tests/fakes/crm/salesforce"
)

// The store operations these tests make must be granted to the crm Lambda (infra/access),
// and so must exactly the uses of the secrets key they make (accesstest.KMSComplete).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "crm", accesstest.KMSComplete())) }

func TestConfigFromEnv(t *testing.T) {
	t.Parallel()
	none := ConfigFromEnv(func(string) string { return "" }, "")
	for _, p := range []string{crmapi.HubSpot, crmapi.Salesforce} {
		assert.False(t, none.Settings.OAuth[p].Configured(), "no app without its client id and secret: %s", p)
	}
	assert.Equal(t, "https://app.hubspot.com/oauth/authorize", none.Settings.OAuth[crmapi.HubSpot].AuthURL)
	assert.Equal(t, "https://api.hubapi.com/oauth/v1/token", none.Settings.OAuth[crmapi.HubSpot].TokenURL)
	assert.Equal(t, "https://login.salesforce.com/services/oauth2/token", none.Settings.OAuth[crmapi.Salesforce].TokenURL)
	assert.Equal(t, "https://login.microsoftonline.com", none.Settings.DynamicsLoginURL)

	env := map[string]string{
		EnvSalesforceClientID: "sf-id", EnvSalesforceClientSecret: "sf-secret", EnvSalesforceLoginBaseURL: "http://127.0.0.1:9/",
		EnvHubSpotClientID: "hs-id", EnvHubSpotClientSecret: "hs-secret", EnvHubSpotRedirectURL: "https://cb.example/hs",
		EnvDynamicsHostSuffixes: ".dynamics.com, .crm.microsoftdynamics.de", EnvDynamicsAllowedOrigins: "http://127.0.0.1:7",
	}
	cfg := ConfigFromEnv(func(k string) string { return env[k] }, "https://api.example/")
	sf := cfg.Settings.OAuth[crmapi.Salesforce]
	assert.True(t, sf.Configured())
	assert.Equal(t, "https://api.example/api/integrations/crm/salesforce/callback", sf.RedirectURL, "the public URL's callback by default")
	assert.Equal(t, "http://127.0.0.1:9/services/oauth2/authorize", sf.AuthURL)
	assert.Equal(t, "https://cb.example/hs", cfg.Settings.OAuth[crmapi.HubSpot].RedirectURL)
	assert.Equal(t, []string{".dynamics.com", ".crm.microsoftdynamics.de"}, cfg.Settings.DynamicsHostSuffixes)
	assert.Equal(t, []string{"http://127.0.0.1:7"}, cfg.Settings.DynamicsOrigins)
}

// Clients builds each provider's real client with the configured base URLs: each answers
// who its credentials act as from its fake. Private addresses (the fakes') are refused
// unless the switch allows them.
func TestClients(t *testing.T) {
	t.Parallel()
	hs, sf, pd, dyn := hubspotfake.New(t), salesforcefake.New(t), pipedrivefake.New(t), dynamicsfake.New(t)
	env := map[string]string{EnvHubSpotAPIBaseURL: hs.URL(), EnvSalesforceLoginBaseURL: sf.URL(), EnvPipedriveAPIBaseURL: pd.URL(),
		EnvDynamicsLoginBaseURL: dyn.URL(), EnvPrivateAddresses: "allow"}
	cfg := ConfigFromEnv(func(k string) string { return env[k] }, "")
	require.True(t, cfg.Settings.AllowPrivate)
	hsAccess, _ := hs.IssueToken()
	sfAccess, _ := sf.IssueToken()
	creds := map[string]crmapi.Credentials{
		crmapi.HubSpot:    {AccessToken: hsAccess},
		crmapi.Salesforce: {AccessToken: sfAccess, InstanceURL: sf.URL()},
		crmapi.Pipedrive:  {APIKey: pipedrivefake.APIToken, InstanceURL: pd.URL()},
		crmapi.Dynamics: {TenantID: dynamicsfake.TenantID, ClientID: dynamicsfake.ClientID, ClientSecret: dynamicsfake.ClientSecret,
			InstanceURL: dyn.URL()},
	}
	want := map[string]string{crmapi.HubSpot: fmt.Sprint(hubspotfake.PortalID), crmapi.Salesforce: salesforcefake.OrgID,
		crmapi.Pipedrive: fmt.Sprint(pipedrivefake.CompanyID), crmapi.Dynamics: dynamicsfake.OrganizationID}
	newClient := Clients(cfg, nil)
	for provider, c := range creds {
		cl, err := newClient(provider, c, crm.DefaultEntities)
		require.NoError(t, err, provider)
		acct, err := cl.Account(t.Context())
		require.NoError(t, err, provider)
		assert.Equal(t, want[provider], acct.ID, provider)
	}
	_, err := newClient("zoho", crmapi.Credentials{}, crm.DefaultEntities)
	assert.Error(t, err)

	// By default only public https addresses: a fake's http://127.0.0.1 is refused, before
	// any request (an instance URL) or at the dial (a base URL).
	strict := cfg
	strict.Settings.AllowPrivate = false
	_, err = Clients(strict, nil)(crmapi.Pipedrive, creds[crmapi.Pipedrive], crm.DefaultEntities)
	assert.Error(t, err, "a plain-http instance URL")
	cl, err := Clients(strict, nil)(crmapi.HubSpot, creds[crmapi.HubSpot], crm.DefaultEntities)
	require.NoError(t, err)
	before := hs.Requests()
	_, err = cl.Account(t.Context())
	assert.Error(t, err, "a loopback API base URL is not dialed")
	assert.Equal(t, before, hs.Requests())
	assert.False(t, ConfigFromEnv(func(k string) string { return map[string]string{EnvPrivateAddresses: "yes"}[k] }, "").Settings.AllowPrivate,
		"only allow allows")
}

// The wired service connects through the real clients: a Pipedrive key is checked at
// Pipedrive before anything is stored.
func TestServiceConnects(t *testing.T) {
	t.Parallel()
	pd := pipedrivefake.New(t)
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	env := familytest.Env(t, family.Deps{CRMSecrets: key})
	vars := map[string]string{EnvPipedriveAPIBaseURL: pd.URL(), EnvPrivateAddresses: "allow"}
	svc := Service(env, ConfigFromEnv(func(k string) string { return vars[k] }, ""))
	_, _, err = svc.ConnectPipedrive(t.Context(), "bot_1", crm.PipedriveRequest{APIKey: "wrong-key", CompanyDomain: "acme"})
	assert.Equal(t, "crm_credentials_rejected", httpapitest.AsError(t, err).Code)
	c, created, err := svc.ConnectPipedrive(t.Context(), "bot_1", crm.PipedriveRequest{APIKey: pipedrivefake.APIToken, CompanyDomain: "acme"})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, fmt.Sprint(pipedrivefake.CompanyID), c.Account.ID)
	assert.Equal(t, pd.URL(), c.InstanceURL)

	// Without the switch the fake's loopback address is not called.
	strict := Service(env, ConfigFromEnv(func(k string) string { return map[string]string{EnvPipedriveAPIBaseURL: pd.URL()}[k] }, ""))
	before := pd.Requests()
	_, _, err = strict.ConnectPipedrive(t.Context(), "bot_1", crm.PipedriveRequest{APIKey: pipedrivefake.APIToken, CompanyDomain: "acme"})
	assert.Equal(t, "provider_unavailable", httpapitest.AsError(t, err).Code)
	assert.Equal(t, before, pd.Requests())
	require.NotNil(t, Family().Build(env).Purge, "the family erases a deleted bot's connections")
}

// recordingSealer is a sealer that records the aad of each Seal and Open it serves, over a
// real one.
type recordingSealer struct {
	secrets.Sealer
	mu           sync.Mutex
	seals, opens []string
}

func (r *recordingSealer) Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error) {
	r.mu.Lock()
	r.seals = append(r.seals, string(aad))
	r.mu.Unlock()
	return r.Sealer.Seal(ctx, plaintext, aad)
}

func (r *recordingSealer) Open(ctx context.Context, sealed, aad []byte) ([]byte, error) {
	r.mu.Lock()
	r.opens = append(r.opens, string(aad))
	r.mu.Unlock()
	return r.Sealer.Open(ctx, sealed, aad)
}

func (r *recordingSealer) calls() (seals, opens []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seals), slices.Clone(r.opens)
}

// The family seals and opens CRM credentials with family.Env.CRMSecrets (on AWS the key
// under the CRM encryption context, the only one the crm and MCP Lambdas are granted it
// under) and never with Env.Secrets, the channels' sealer: a connection is sealed and its
// credentials opened for a discovery through the CRM sealer alone. A process with only the
// channels' sealer connects nothing (503), rather than sealing CRM credentials under the
// default context.
func TestFamilySealsWithTheCRMSealer(t *testing.T) {
	t.Parallel()
	pd := pipedrivefake.New(t)
	crmKey, err := keyfile.New(bytes.Repeat([]byte{1}, 32))
	require.NoError(t, err)
	channelKey, err := keyfile.New(bytes.Repeat([]byte{2}, 32))
	require.NoError(t, err)
	crmSealer, channelSealer := &recordingSealer{Sealer: crmKey}, &recordingSealer{Sealer: channelKey}
	vars := map[string]string{EnvPipedriveAPIBaseURL: pd.URL(), EnvPrivateAddresses: "allow"}
	getenv := func(k string) string { return vars[k] }

	env := familytest.Env(t, family.Deps{Secrets: channelSealer, CRMSecrets: crmSealer})
	svc := Service(env, configOf(env, getenv))
	c, _, err := svc.ConnectPipedrive(t.Context(), "bot_1", crm.PipedriveRequest{APIKey: pipedrivefake.APIToken, CompanyDomain: "acme"})
	require.NoError(t, err)
	seals, _ := crmSealer.calls()
	require.NotEmpty(t, seals, "the connection's credentials are sealed with the CRM sealer")
	for _, aad := range seals {
		assert.Contains(t, aad, c.ID, "each sealed value is bound to its connection")
	}
	fields, err := svc.Fields(t.Context(), "bot_1", c.ID, "persons", true)
	require.NoError(t, err)
	assert.NotEmpty(t, fields.Data, "the CRM answered with the opened key")
	_, opens := crmSealer.calls()
	assert.NotEmpty(t, opens, "the credentials are opened with the CRM sealer")
	chSeals, chOpens := channelSealer.calls()
	assert.Empty(t, chSeals, "nothing sealed with the channels' sealer")
	assert.Empty(t, chOpens, "nothing opened with the channels' sealer")

	// Only the channels' sealer: no CRM credentials are sealed with it.
	channelsOnly := familytest.Env(t, family.Deps{Secrets: channelSealer})
	_, _, err = Service(channelsOnly, configOf(channelsOnly, getenv)).
		ConnectPipedrive(t.Context(), "bot_2", crm.PipedriveRequest{APIKey: pipedrivefake.APIToken, CompanyDomain: "acme"})
	assert.Equal(t, "secrets_unavailable", httpapitest.AsError(t, err).Code)
	chSeals, _ = channelSealer.calls()
	assert.Empty(t, chSeals)
}

// The client secrets the platform hands over (family.Env.CRMClientSecrets, from SSM on AWS)
// become the OAuth applications' secrets, in place of CRM_*_CLIENT_SECRET, without changing
// the configuration they are applied to.
func TestWithClientSecrets(t *testing.T) {
	t.Parallel()
	env := map[string]string{EnvHubSpotClientID: "hs-id", EnvSalesforceClientID: "sf-id"}
	cfg := ConfigFromEnv(func(k string) string { return env[k] }, "https://api.example")
	require.False(t, cfg.Settings.OAuth[crmapi.HubSpot].Configured(), "a client id alone")

	got := cfg.WithClientSecrets(map[string]string{crmapi.HubSpot: "hs-from-ssm", "zoho": "ignored"})
	hs := got.Settings.OAuth[crmapi.HubSpot]
	assert.True(t, hs.Configured())
	assert.Equal(t, "hs-from-ssm", hs.ClientSecret)
	assert.Equal(t, "hs-id", hs.ClientID)
	assert.Equal(t, "https://api.example/api/integrations/crm/hubspot/callback", hs.RedirectURL)
	assert.False(t, got.Settings.OAuth[crmapi.Salesforce].Configured(), "no secret handed for Salesforce")
	assert.NotContains(t, got.Settings.OAuth, "zoho", "no application appears for a secret")
	assert.Empty(t, cfg.Settings.OAuth[crmapi.HubSpot].ClientSecret, "the configuration applied to is unchanged")
	assert.Equal(t, cfg, cfg.WithClientSecrets(nil))

	// A handed secret takes the place of the variable's (the platform refuses both at once).
	env[EnvSalesforceClientSecret] = "sf-from-env"
	cfg = ConfigFromEnv(func(k string) string { return env[k] }, "")
	assert.Equal(t, "sf-from-ssm", cfg.WithClientSecrets(map[string]string{crmapi.Salesforce: "sf-from-ssm"}).Settings.OAuth[crmapi.Salesforce].ClientSecret)
}

// anyBot is a tenancy check every bot passes.
type anyBot struct{}

func (anyBot) LoadBot(context.Context, string, string) (any, error) { return struct{}{}, nil }

// The family, built on an environment whose client secret the platform handed over (as on
// AWS: the client id a variable, the secret from SSM), connects HubSpot over OAuth: the fake
// checks the secret at the code exchange. Without the secret starts answer 503, and with a
// wrong one the exchange is refused.
func TestFamilyUsesTheClientSecretFromThePlatform(t *testing.T) {
	t.Parallel()
	hs := hubspotfake.New(t)
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	vars := map[string]string{EnvHubSpotClientID: hubspotfake.ClientID, EnvHubSpotRedirectURL: hubspotfake.RedirectURI,
		EnvHubSpotAuthBaseURL: hs.URL(), EnvHubSpotAPIBaseURL: hs.URL(), EnvPrivateAddresses: "allow"}
	service := func(secrets map[string]string) *crm.Service {
		env := familytest.Env(t, family.Deps{CRMSecrets: key, CRMClientSecrets: secrets,
			Tenancy: func(*family.Env) httpapi.BotLoader { return anyBot{} }})
		return Service(env, configOf(env, func(k string) string { return vars[k] }))
	}
	p := &auth.Principal{AccountID: "acc_1", UserID: "usr_1", TokenID: "pat_1", Kind: auth.KindPAT}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	connect := func(svc *crm.Service) (crm.Connection, error) {
		started, err := svc.Start(t.Context(), p, "bot_1", crmapi.HubSpot, crm.StartRequest{})
		require.NoError(t, err)
		res, err := noRedirects.Get(started.RedirectURL)
		require.NoError(t, err)
		res.Body.Close()
		require.Equal(t, http.StatusFound, res.StatusCode)
		back, err := url.Parse(res.Header.Get("Location"))
		require.NoError(t, err)
		require.NotEmpty(t, back.Query().Get("code"), "the fake authorized the start")
		c, _, _, err := svc.Callback(t.Context(), crmapi.HubSpot, back.Query())
		return c, err
	}

	c, err := connect(service(map[string]string{crmapi.HubSpot: hubspotfake.ClientSecret}))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(hubspotfake.PortalID), c.Account.ID)
	assert.Equal(t, 1, hs.TokenRequests())

	_, err = service(nil).Start(t.Context(), p, "bot_1", crmapi.HubSpot, crm.StartRequest{})
	assert.Equal(t, "oauth_not_configured", httpapitest.AsError(t, err).Code, "a client id without its secret")

	_, err = connect(service(map[string]string{crmapi.HubSpot: "not-the-secret"}))
	pe := httpapitest.AsError(t, err)
	assert.Equal(t, "oauth_code_rejected", pe.Code, "the exchange authenticates with the handed secret")
	assert.Equal(t, 2, hs.TokenRequests(), "the exchange was made, and refused")
}
