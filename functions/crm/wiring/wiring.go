// Package wiring composes the CRM family with the process: the deployment's OAuth
// applications and provider base URLs (from the environment; on AWS the client secrets
// from SSM, through family.Env.CRMClientSecrets), its sealer (family.Env.CRMSecrets: on AWS
// the credentials key under the CRM encryption context, not the channels' one), the tenancy
// check and the provider clients.
package wiring

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/functions/crm"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
	"github.com/botplatform/api/shared/crm/dynamics"
	"github.com/botplatform/api/shared/crm/hubspot"
	"github.com/botplatform/api/shared/crm/pipedrive"
	"github.com/botplatform/api/shared/crm/salesforce"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the crm family: the token API's CRM connection routes, the OAuth callback and
// the MCP tools of its reads.
func Family() family.Family {
	return family.Family{Name: "crm", Build: func(env *family.Env) family.Parts {
		svc := Service(env, configOf(env, os.Getenv))
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { crm.Routes(mux, svc, env.Cursors) },
			Jobs:   svc.Steps(),
			Purge:  crm.PurgeStep(env.Store),
			Erase:  crm.EraseStep(env.Store),
			Tools:  crm.Tools(svc, env.Cursors),
		}
	}}
}

// configOf is the family's configuration in env's process: getenv's (os.Getenv), with the
// client secrets the platform read for it (env.CRMClientSecrets: from SSM on AWS, where a
// secret is never a Lambda variable).
func configOf(env *family.Env, getenv func(string) string) Config {
	return ConfigFromEnv(getenv, env.PublicURL).WithClientSecrets(env.CRMClientSecrets)
}

// The environment variables of the family's configuration. The client secrets are secrets:
// the local process reads them from the environment only (never flags, which show in ps);
// on AWS they are never variables: the platform reads them from SSM
// (CRM_*_CLIENT_SECRET_PARAMETER name the parameters) and hands them over in
// family.Env.CRMClientSecrets.
const (
	EnvHubSpotClientID        = "CRM_HUBSPOT_CLIENT_ID"
	EnvHubSpotClientSecret    = "CRM_HUBSPOT_CLIENT_SECRET"
	EnvHubSpotRedirectURL     = "CRM_HUBSPOT_REDIRECT_URL"
	EnvHubSpotAuthBaseURL     = "CRM_HUBSPOT_AUTH_BASE_URL"
	EnvHubSpotAPIBaseURL      = "CRM_HUBSPOT_API_BASE_URL"
	EnvSalesforceClientID     = "CRM_SALESFORCE_CLIENT_ID"
	EnvSalesforceClientSecret = "CRM_SALESFORCE_CLIENT_SECRET"
	EnvSalesforceRedirectURL  = "CRM_SALESFORCE_REDIRECT_URL"
	EnvSalesforceLoginBaseURL = "CRM_SALESFORCE_LOGIN_BASE_URL"
	EnvPipedriveAPIBaseURL    = "CRM_PIPEDRIVE_API_BASE_URL"
	EnvDynamicsLoginBaseURL   = "CRM_DYNAMICS_LOGIN_BASE_URL"
	EnvDynamicsHostSuffixes   = "CRM_DYNAMICS_HOST_SUFFIXES"
	EnvDynamicsAllowedOrigins = "CRM_DYNAMICS_ALLOWED_ORIGINS"
	// EnvPrivateAddresses set to "allow" lets the platform call providers on private and
	// loopback addresses, over plain http: the fakes of local tests and the demo. Without
	// it only public https addresses are called, because instance URLs are customer-given
	// (a Dataverse environment, a Pipedrive domain) or provider-given (Salesforce's
	// instance_url), and must not reach the deployment's own network.
	EnvPrivateAddresses = "CRM_PRIVATE_PROVIDER_ADDRESSES"
	// EnvRateLimits overrides the providers' rate limits syncs pace under (crm.DefaultRates):
	// "pipedrive=80/2s,hubspot=150/10s", each a provider, a number of calls and a window.
	// An entry that does not parse is ignored: that provider keeps its default.
	EnvRateLimits = "CRM_RATE_LIMITS"
)

// tokenTimeout bounds one call of a provider's token endpoint (a code exchange, a
// refresh): well within the refresh lease (functions/crm's leaseTTL).
const tokenTimeout = 15 * time.Second

// Config is the family's deployment configuration.
type Config struct {
	// Settings are the service's (OAuth applications, Dataverse host rules, the Pipedrive
	// API root override, whether private addresses may be called).
	Settings crm.Settings
	// HubSpotAPIBaseURL is where the HubSpot client calls; SalesforceLoginBaseURL is where
	// Salesforce's OAuth endpoints are (its API is each org's instance URL, from its token
	// response).
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
	// The endpoints and scopes are the client packages': one definition of each provider.
	hsAPI := strings.TrimRight(get(EnvHubSpotAPIBaseURL, hubspot.DefaultBaseURL), "/")
	hs := hubspot.Endpoint(get(EnvHubSpotAuthBaseURL, hubspot.DefaultAuthBaseURL), hsAPI)
	sfLogin := strings.TrimRight(get(EnvSalesforceLoginBaseURL, salesforce.DefaultLoginURL), "/")
	sf := salesforce.Endpoint(sfLogin)
	return Config{
		HubSpotAPIBaseURL:      hsAPI,
		SalesforceLoginBaseURL: sfLogin,
		Settings: crm.Settings{
			OAuth: map[string]crm.OAuthApp{
				crmapi.HubSpot: {ClientID: get(EnvHubSpotClientID, ""), ClientSecret: get(EnvHubSpotClientSecret, ""),
					RedirectURL: get(EnvHubSpotRedirectURL, callback(crmapi.HubSpot)),
					AuthURL:     hs.AuthURL, TokenURL: hs.TokenURL, Scopes: hubspot.Scopes()},
				crmapi.Salesforce: {ClientID: get(EnvSalesforceClientID, ""), ClientSecret: get(EnvSalesforceClientSecret, ""),
					RedirectURL: get(EnvSalesforceRedirectURL, callback(crmapi.Salesforce)),
					AuthURL:     sf.AuthURL, TokenURL: sf.TokenURL, Scopes: salesforce.Scopes()},
			},
			DynamicsLoginURL:     strings.TrimRight(get(EnvDynamicsLoginBaseURL, dynamics.DefaultLoginURL), "/"),
			DynamicsHostSuffixes: list(getenv(EnvDynamicsHostSuffixes)),
			DynamicsOrigins:      list(getenv(EnvDynamicsAllowedOrigins)),
			PipedriveURL:         strings.TrimRight(get(EnvPipedriveAPIBaseURL, ""), "/"),
			AllowPrivate:         strings.TrimSpace(getenv(EnvPrivateAddresses)) == "allow",
			Rates:                rates(getenv(EnvRateLimits)),
		},
	}
}

// WithClientSecrets returns c with secrets (by provider: crmapi.HubSpot, crmapi.Salesforce)
// as its OAuth applications' client secrets, in place of the CRM_*_CLIENT_SECRET variables:
// what the platform read from SSM on AWS (family.Env.CRMClientSecrets; it refuses a secret
// variable beside its parameter). c itself is left as it was. A provider without an OAuth
// application here is ignored: no application takes a secret it was not configured for.
func (c Config) WithClientSecrets(secrets map[string]string) Config {
	if len(secrets) == 0 {
		return c
	}
	oauth := maps.Clone(c.Settings.OAuth)
	for provider, secret := range secrets {
		if app, ok := oauth[provider]; ok {
			app.ClientSecret = secret
			oauth[provider] = app
		}
	}
	c.Settings.OAuth = oauth
	return c
}

// maxRateCalls bounds a limit's calls in EnvRateLimits (beyond a million calls in a window,
// a typo is likelier than a plan).
const maxRateCalls = 1_000_000

// rates parses EnvRateLimits.
func rates(s string) map[string]crm.Rate {
	out := map[string]crm.Rate{}
	for _, entry := range list(s) {
		provider, limit, ok1 := strings.Cut(entry, "=")
		n, window, ok2 := strings.Cut(limit, "/")
		count, err1 := strconv.Atoi(strings.TrimSpace(n))
		d, err2 := time.ParseDuration(strings.TrimSpace(window))
		if _, known := crmapi.Kind(strings.TrimSpace(provider)); !ok1 || !ok2 || !known || err1 != nil || err2 != nil || count <= 0 || count > maxRateCalls || d <= 0 {
			continue
		}
		out[strings.TrimSpace(provider)] = crm.Rate{N: count, Window: d}
	}
	return out
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

// Service builds the CRM service on env with cfg. Credentials are sealed and opened with
// env.CRMSecrets, never env.Secrets: the Lambdas that serve CRM are granted the key only
// under the CRM encryption context (infra/access), and CRM values sealed under the default
// one would be what a channel-only grant could open.
func Service(env *family.Env, cfg Config) *crm.Service {
	sealer := env.CRMSecrets
	if sealer == nil {
		sealer = noSealer{}
	}
	// One HTTP client for the provider APIs and their token endpoints: bounded, no
	// redirects followed (a token endpoint never redirects, and a redirect must not carry a
	// client secret, a code or a token elsewhere), public addresses only unless allowed.
	httpClient := crmhttp.NewHTTPClient(cfg.Settings.AllowPrivate)
	// x/oauth2's token calls have only the request's context: bound them here (the API
	// clients bound each call themselves).
	tokenClient := *httpClient
	tokenClient.Timeout = tokenTimeout
	subs := subscribers.NewService(env.Store, env.Now, env.Jobs).WithEvents(env.Events, env.Log)
	svc, err := crm.New(crm.Config{
		Store:     env.Store,
		Sealer:    sealer,
		Bots:      env.Tenancy,
		Audit:     env.Audit,
		Limiter:   ratelimit.New(env.Store, env.Now),
		NewClient: Clients(cfg, httpClient),
		// Pulls write subscribers as any other writer does: their events recorded.
		Subscribers: crm.SubscribersOf(subs),
		Transcripts: transcripts{runtime.NewTraces(env.Store, traceSubscribers{subs}, env.Now)},
		// Syncs run long (paced to the provider): the state machine on AWS.
		Jobs:       env.LongJobs,
		HTTPClient: &tokenClient,
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

// Clients builds a connection's provider client (shared/crm/hubspot, salesforce, pipedrive,
// dynamics) with cfg's base URLs and httpClient (nil: each client's default). The
// credentials carry the per-connection instance URL (Salesforce's org, the Pipedrive
// company or cfg's Pipedrive override, the Dataverse environment); each client checks it,
// https unless cfg allows private addresses.
func Clients(cfg Config, httpClient *http.Client) crm.NewClient {
	allow := cfg.Settings.AllowPrivate
	return func(provider string, creds crmapi.Credentials, entities crm.Entities) (crmapi.Client, error) {
		var (
			c   crmapi.Client
			err error
		)
		switch provider {
		case crmapi.HubSpot:
			c, err = hubspot.New(hubspot.Config{BaseURL: cfg.HubSpotAPIBaseURL, HTTPClient: httpClient, AllowPrivate: allow}, creds)
		case crmapi.Salesforce:
			c, err = salesforce.New(salesforce.Config{HTTPClient: httpClient, AllowPrivate: allow}, creds)
		case crmapi.Pipedrive:
			c, err = pipedrive.New(pipedrive.Config{BaseURL: cfg.Settings.PipedriveURL, HTTPClient: httpClient, AllowPrivate: allow}, creds)
		case crmapi.Dynamics:
			c, err = dynamics.New(dynamics.Config{LoginURL: cfg.Settings.DynamicsLoginURL, HTTPClient: httpClient, AllowPrivate: allow,
				Contacts: entities.Contacts}, creds)
		default:
			return nil, fmt.Errorf("crm wiring: unknown provider %q", provider)
		}
		if err != nil {
			// A typed nil must not pass for a client.
			return nil, err
		}
		return c, nil
	}
}

// noSealer stands in for a process without a credentials key: nothing can be connected.
type noSealer struct{}

var errNoSealer = httpapi.E(httpapi.KindUnavailable, "secrets_unavailable", "this deployment holds no key to seal CRM credentials with (SECRETS_KEY_ID on AWS)")

func (noSealer) Seal(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
func (noSealer) Open(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
