// Package wiring composes the CRM family with the process: the deployment's OAuth
// applications and provider base URLs (from the environment), its sealer, the tenancy
// check and the provider clients.
package wiring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/botplatform/api/functions/crm"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the crm family: the token API's CRM connection routes and the OAuth callback.
func Family() family.Family {
	return family.Family{Name: "crm", Build: func(env *family.Env) family.Parts {
		svc := Service(env, ConfigFromEnv(os.Getenv, env.PublicURL))
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { crm.Routes(mux, svc, env.Cursors) },
			Purge:  crm.PurgeStep(env.Store),
		}
	}}
}

// The environment variables of the family's configuration. The client secrets are secrets:
// the local process reads them from the environment only (never flags, which show in ps).
const (
	EnvHubSpotClientID         = "CRM_HUBSPOT_CLIENT_ID"
	EnvHubSpotClientSecret     = "CRM_HUBSPOT_CLIENT_SECRET"
	EnvHubSpotRedirectURL      = "CRM_HUBSPOT_REDIRECT_URL"
	EnvHubSpotAuthBaseURL      = "CRM_HUBSPOT_AUTH_BASE_URL"
	EnvHubSpotAPIBaseURL       = "CRM_HUBSPOT_API_BASE_URL"
	EnvSalesforceClientID      = "CRM_SALESFORCE_CLIENT_ID"
	EnvSalesforceClientSecret  = "CRM_SALESFORCE_CLIENT_SECRET"
	EnvSalesforceRedirectURL   = "CRM_SALESFORCE_REDIRECT_URL"
	EnvSalesforceLoginBaseURL  = "CRM_SALESFORCE_LOGIN_BASE_URL"
	EnvPipedriveAPIBaseURL     = "CRM_PIPEDRIVE_API_BASE_URL"
	EnvDynamicsLoginBaseURL    = "CRM_DYNAMICS_LOGIN_BASE_URL"
	EnvDynamicsHostSuffixes    = "CRM_DYNAMICS_HOST_SUFFIXES"
	EnvDynamicsAllowedOrigins  = "CRM_DYNAMICS_ALLOWED_ORIGINS"
	defaultHubSpotAuthBaseURL  = "https://app.hubspot.com"
	defaultHubSpotAPIBaseURL   = "https://api.hubapi.com"
	defaultSalesforceLoginBase = "https://login.salesforce.com"
	defaultDynamicsLoginBase   = "https://login.microsoftonline.com"
)

// The scopes the platform asks for: read and write contacts and deals and read their
// schemas (field discovery). Salesforce's refresh_token scope is what makes it issue one.
var (
	hubSpotScopes = []string{"oauth", "crm.objects.contacts.read", "crm.objects.contacts.write", "crm.objects.deals.read",
		"crm.objects.deals.write", "crm.schemas.contacts.read", "crm.schemas.deals.read"}
	salesforceScopes = []string{"api", "refresh_token"}
)

// Config is the family's deployment configuration.
type Config struct {
	// Settings are the service's (OAuth applications, Dataverse host rules).
	Settings crm.Settings
	// HubSpotAPIBaseURL and SalesforceLoginBaseURL are where the provider clients call
	// (Salesforce's API is each org's instance URL, from its token response).
	HubSpotAPIBaseURL      string
	SalesforceLoginBaseURL string
}

// ConfigFromEnv reads the configuration from getenv (os.Getenv in production). A
// provider's OAuth application is configured by its client id and secret; its redirect URL
// defaults to publicURL's callback for it.
func ConfigFromEnv(getenv func(string) string, publicURL string) Config {
	get := func(name, def string) string {
		if v := strings.TrimSpace(getenv(name)); v != "" {
			return v
		}
		return def
	}
	callback := func(provider string) string {
		if publicURL == "" {
			return ""
		}
		return strings.TrimRight(publicURL, "/") + "/api/integrations/crm/" + provider + "/callback"
	}
	hsAuth := strings.TrimRight(get(EnvHubSpotAuthBaseURL, defaultHubSpotAuthBaseURL), "/")
	hsAPI := strings.TrimRight(get(EnvHubSpotAPIBaseURL, defaultHubSpotAPIBaseURL), "/")
	sfLogin := strings.TrimRight(get(EnvSalesforceLoginBaseURL, defaultSalesforceLoginBase), "/")
	return Config{
		HubSpotAPIBaseURL:      hsAPI,
		SalesforceLoginBaseURL: sfLogin,
		Settings: crm.Settings{
			OAuth: map[string]crm.OAuthApp{
				crmapi.HubSpot: {ClientID: get(EnvHubSpotClientID, ""), ClientSecret: get(EnvHubSpotClientSecret, ""),
					RedirectURL: get(EnvHubSpotRedirectURL, callback(crmapi.HubSpot)),
					AuthURL:     hsAuth + "/oauth/authorize", TokenURL: hsAPI + "/oauth/v1/token", Scopes: hubSpotScopes},
				crmapi.Salesforce: {ClientID: get(EnvSalesforceClientID, ""), ClientSecret: get(EnvSalesforceClientSecret, ""),
					RedirectURL: get(EnvSalesforceRedirectURL, callback(crmapi.Salesforce)),
					AuthURL:     sfLogin + "/services/oauth2/authorize", TokenURL: sfLogin + "/services/oauth2/token", Scopes: salesforceScopes},
			},
			DynamicsLoginURL:     strings.TrimRight(get(EnvDynamicsLoginBaseURL, defaultDynamicsLoginBase), "/"),
			DynamicsHostSuffixes: list(getenv(EnvDynamicsHostSuffixes)),
			DynamicsOrigins:      list(getenv(EnvDynamicsAllowedOrigins)),
			PipedriveURL:         strings.TrimRight(get(EnvPipedriveAPIBaseURL, ""), "/"),
		},
	}
}

func list(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Service builds the CRM service on env with cfg.
func Service(env *family.Env, cfg Config) *crm.Service {
	sealer := env.Secrets
	if sealer == nil {
		sealer = noSealer{}
	}
	httpClient := providerHTTPClient()
	svc, err := crm.New(crm.Config{
		Store:      env.Store,
		Sealer:     sealer,
		Bots:       env.Tenancy,
		Audit:      env.Audit,
		Limiter:    ratelimit.New(env.Store, env.Now),
		NewClient:  Clients(cfg, httpClient),
		HTTPClient: httpClient,
		Settings:   cfg.Settings,
		Log:        env.Log,
		Now:        env.Now,
	})
	if err != nil {
		// Every field New checks is set above; a failure here is a programming error.
		panic(err)
	}
	return svc
}

// ErrNotLinked is what Clients answers for a provider whose client package this build
// does not link.
var ErrNotLinked = errors.New("provider clients not linked")

// Clients is the seam of the provider clients (shared/crm/hubspot, salesforce, pipedrive,
// dynamics): each is built with cfg's base URL for it and httpClient. Until they are
// linked, every provider answers ErrNotLinked, which connecting turns into 503
// provider_unavailable.
func Clients(cfg Config, httpClient *http.Client) crm.NewClient {
	_, _ = cfg, httpClient // the provider clients' configuration, once they are linked
	return func(provider string, _ crmapi.Credentials) (crmapi.Client, error) {
		return nil, fmt.Errorf("crm wiring: %s: %w", provider, ErrNotLinked)
	}
}

// providerHTTPClient calls the providers' token endpoints: every call bounded, no
// redirects followed (a token endpoint never redirects, and a redirect must not carry a
// client secret or a code elsewhere).
func providerHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: 10 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// noSealer stands in for a process without a credentials key: nothing can be connected.
type noSealer struct{}

var errNoSealer = httpapi.E(httpapi.KindUnavailable, "secrets_unavailable", "this deployment holds no key to seal CRM credentials with (SECRETS_KEY_ID on AWS)")

func (noSealer) Seal(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
func (noSealer) Open(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
