package wiring

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/crm"
	"github.com/botplatform/api/infra/access/accesstest"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/secrets/keyfile"
)

func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "crm")) }

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

// Until the provider packages are linked, every provider answers ErrNotLinked, and a
// connect says the deployment cannot reach the CRM.
func TestClientsNotLinked(t *testing.T) {
	t.Parallel()
	_, err := Clients(Config{}, nil)(crmapi.Pipedrive, crmapi.Credentials{})
	assert.ErrorIs(t, err, ErrNotLinked)

	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	env := familytest.Env(t, family.Deps{Secrets: key})
	svc := Service(env, ConfigFromEnv(func(string) string { return "" }, ""))
	_, _, err = svc.ConnectPipedrive(t.Context(), "bot_1", crm.PipedriveRequest{APIKey: "k", CompanyDomain: "acme"})
	assert.Equal(t, "provider_unavailable", httpapitest.AsError(t, err).Code)
	assert.ErrorIs(t, err, ErrNotLinked)
	require.NotNil(t, Family().Build(env).Purge, "the family erases a deleted bot's connections")
}
