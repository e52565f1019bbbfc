// Package crm serves a bot's CRM connections (spec 4.2): connecting a CRM account by OAuth 2.0
// with PKCE (HubSpot, Salesforce), by API key (Pipedrive) or by OIDC client credentials
// (Microsoft Dynamics 365 / Dataverse), listing, reading and disconnecting them, and the
// race-free token refresh the sync code calls through Service.client. The providers' wire
// formats are the clients' (shared/crm and its provider packages), built by an injected
// constructor; this package holds the connections, their sealed credentials and the OAuth
// handshake. docs/crm.md holds the decisions.
package crm

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/botplatform/api/shared/audit"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store"
)

// StartLimit bounds the OAuth starts of an account (spec 8): each one is a pending
// authorization the platform keeps for 5 minutes. It is a sliding window: at most 3 in any
// minute.
var StartLimit = ratelimit.Limit{Name: "CRM OAuth starts", Max: 3, Window: time.Minute}

// StateTTL is how long an OAuth start's state is accepted by the callback (spec 8).
const StateTTL = 5 * time.Minute

// refreshBefore is how long before its expiry an access token is refreshed: a token that
// expires within it could expire during the calls it is taken for.
const refreshBefore = time.Minute

// NewClient builds the client of one connection: the provider package's, with the
// deployment's base URLs. entities are the connection's Dataverse entity sets (Dynamics;
// DefaultEntities for the other providers and for a connection that has none): the
// Dynamics client writes subscriber records to entities.Contacts.
type NewClient func(provider string, creds crmapi.Credentials, entities Entities) (crmapi.Client, error)

// OAuthApp is the deployment's OAuth application at one provider: without its client id,
// secret and redirect URL, starts answer 503 oauth_not_configured.
type OAuthApp struct {
	ClientID     string
	ClientSecret string
	// RedirectURL is this deployment's callback for the provider
	// (<public URL>/api/integrations/crm/<provider>/callback), registered with the app.
	RedirectURL string
	// AuthURL and TokenURL are the provider's authorization and token endpoints.
	AuthURL  string
	TokenURL string
	Scopes   []string
}

// Configured reports whether starts can be made with the app.
func (a OAuthApp) Configured() bool {
	return a.ClientID != "" && a.ClientSecret != "" && a.RedirectURL != "" && a.AuthURL != "" && a.TokenURL != ""
}

// Settings are the deployment's CRM settings (wiring reads them from the environment).
type Settings struct {
	// OAuth holds the OAuth application of each OAuth provider (crmapi.HubSpot,
	// crmapi.Salesforce).
	OAuth map[string]OAuthApp
	// DynamicsLoginURL is Microsoft Entra ID's login root: a Dataverse connection's tokens
	// come from <DynamicsLoginURL>/<tenant>/oauth2/v2.0/token.
	DynamicsLoginURL string
	// DynamicsHostSuffixes are the host suffixes a Dataverse environment URL may have
	// (https only): the platform calls that URL, so it may not be any host a caller names.
	DynamicsHostSuffixes []string
	// DynamicsOrigins are further origins accepted as environment URLs exactly (a local
	// fake's http://127.0.0.1:port).
	DynamicsOrigins []string
	// PipedriveURL is the Pipedrive API root of every company ("" is
	// https://<company_domain>.pipedrive.com, Pipedrive's own).
	PipedriveURL string
	// AllowPrivate lets instance URLs be plain http on private and loopback addresses (the
	// fakes of local tests and the demo); otherwise an instance URL a provider names
	// (Salesforce's instance_url) must be https.
	AllowPrivate bool
	// Rates override DefaultRates by provider: the limit of the accounts' plan.
	Rates map[string]Rate
}

// Config is the family's dependencies. Store, Sealer, Bots, Audit, NewClient, Log and Now
// are required.
type Config struct {
	Store store.Store
	// Sealer seals the connections' credentials and the pending starts' PKCE verifiers.
	Sealer secrets.Sealer
	// Bots is the tenancy check, which the public callback repeats for the bot its state
	// names (the bot may have been deleted since the start).
	Bots httpapi.BotLoader
	// Audit receives the callback's audit event (the kernel audits authenticated routes).
	Audit audit.Publisher
	// Limiter counts OAuth starts; nil counts none.
	Limiter   *ratelimit.Limiter
	NewClient NewClient
	// Subscribers reads the bot's subscriber fields, labels and subscribers for mappings
	// and previews; nil answers those 503 subscribers_unavailable.
	Subscribers Subscribers
	// Transcripts reads conversations for notes; nil answers notes 503.
	Transcripts Transcripts
	// Jobs starts sync jobs (the job kind JobSync); nil answers starts 503 jobs_unavailable.
	Jobs jobs.Starter
	// StepDuration is how long one step of a sync job runs (default DefaultStepDuration).
	StepDuration time.Duration
	// HTTPClient calls the providers' token endpoints; nil is http.DefaultClient.
	HTTPClient *http.Client
	Settings   Settings
	Log        *slog.Logger
	Now        func() time.Time
}

// Validate reports every missing dependency at once.
func (c Config) Validate() error {
	var errs []error
	for _, m := range []struct {
		name    string
		missing bool
	}{
		{"Store", c.Store == nil}, {"Sealer", c.Sealer == nil}, {"Bots", c.Bots == nil}, {"Audit", c.Audit == nil},
		{"NewClient", c.NewClient == nil}, {"Log", c.Log == nil}, {"Now", c.Now == nil},
	} {
		if m.missing {
			errs = append(errs, errors.New(m.name+" is required"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("crm: %w", err)
	}
	return nil
}

// Service is the CRM connections of every bot.
type Service struct {
	store     store.Store
	sealer    secrets.Sealer
	bots      httpapi.BotLoader
	audit     audit.Publisher
	limiter   *ratelimit.Limiter
	newClient NewClient
	http      *http.Client
	settings  Settings
	log       *slog.Logger
	now       func() time.Time

	// subscribers may be nil (Config.Subscribers).
	subscribers Subscribers
	// transcripts and jobs may be nil (Config).
	transcripts Transcripts
	// pageSize and runSteps are syncPage and stepsPerRun, which tests make small.
	pageSize     int
	runSteps     int64
	jobs         jobs.Starter
	stepDuration time.Duration
}

// DefaultStepDuration is how long a sync job's step runs: well within a queue message's
// visibility and a Lambda's timeout, long enough to use a provider's rate window.
const DefaultStepDuration = 20 * time.Second

// New returns the Service, or the problems of cfg.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{store: cfg.Store, sealer: cfg.Sealer, bots: cfg.Bots, audit: cfg.Audit, limiter: cfg.Limiter,
		newClient: cfg.NewClient, subscribers: cfg.Subscribers, http: cfg.HTTPClient, settings: cfg.Settings, log: cfg.Log, now: cfg.Now,
		transcripts: cfg.Transcripts, jobs: cfg.Jobs, stepDuration: cfg.StepDuration}
	s.pageSize, s.runSteps = syncPage, stepsPerRun
	if s.stepDuration <= 0 {
		s.stepDuration = DefaultStepDuration
	}
	if s.http == nil {
		s.http = http.DefaultClient
	}
	if s.settings.DynamicsLoginURL == "" {
		s.settings.DynamicsLoginURL = "https://login.microsoftonline.com"
	}
	if len(s.settings.DynamicsHostSuffixes) == 0 {
		s.settings.DynamicsHostSuffixes = []string{".dynamics.com"}
	}
	return s, nil
}

// stamp is a resource timestamp: UTC, whole seconds (docs/conventions.md).
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// The states of a connection.
const (
	// StatusActive: the credentials worked when last used.
	StatusActive = "active"
	// StatusReconnectRequired: the provider refused the credentials (a revoked app, a
	// rotated key, a refresh token that no longer refreshes). Connecting the same CRM
	// account again replaces them.
	StatusReconnectRequired = "reconnect_required"
)

// Connection is a CRM connection as the API shows it: never a credential.
type Connection struct {
	ID       string          `json:"id"`
	BotID    string          `json:"bot_id"`
	Provider string          `json:"provider"`
	Auth     crmapi.AuthKind `json:"auth"`
	Status   string          `json:"status"`
	// Account is who the credentials act as, as the provider said when connecting.
	Account crmapi.Account `json:"account"`
	// AccountKey is what the OAuth start was given ("" for the other providers).
	AccountKey string `json:"account_key,omitempty"`
	// InstanceURL is where the account's API is when the provider says so per account
	// (Salesforce's instance, Pipedrive's company domain, the Dataverse environment).
	InstanceURL string `json:"instance_url,omitempty"`
	// Login is the Dataverse user the connection writes as (Dynamics only).
	Login string `json:"login,omitempty"`
	// Entities are the Dataverse entity sets of contacts and deals (Dynamics only).
	Entities  *Entities `json:"entities,omitempty"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Entities are the Dataverse entity sets (plural logical names, as the Web API addresses
// them) the platform writes subscribers and deals to. Contacts is where a Dynamics
// connection's subscriber records are searched, written and pulled from (the mapping's
// object contacts addresses it); Deals is always opportunities (DynamicsRequest.Validate).
type Entities struct {
	Contacts string `json:"contacts"`
	Deals    string `json:"deals"`
}

// DefaultEntities are Dynamics 365 Sales' own: contacts and opportunities.
var DefaultEntities = Entities{Contacts: "contacts", Deals: "opportunities"}

// entities returns the connection's entity sets, DefaultEntities when it has none (every
// provider but Dynamics).
func (c Connection) entities() Entities {
	if c.Entities == nil {
		return DefaultEntities
	}
	return *c.Entities
}

// credRecord is a connection's stored credentials item.
type credRecord struct {
	// Sealed is the JSON of crmapi.Credentials, sealed under credAAD.
	Sealed []byte `json:"sealed"`
	// Expiry is the access token's (zero for none, or one that does not expire): kept
	// beside the sealed value so that a fresh token is used without a refresh decision.
	Expiry time.Time `json:"expiry,omitzero"`
	// LeaseUntil is set while one process refreshes the token: the others wait for its
	// result instead of refreshing too (providers rotate refresh tokens).
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// providerProblem maps a provider client's error to the problem the API answers
// (docs/crm.md, "Provider errors"); other errors pass through.
func providerProblem(err error) error {
	var rl *crmapi.RateLimitedError
	var pe *crmapi.ProviderError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, crmapi.ErrUnauthorized):
		return httpapi.E(httpapi.KindUnprocessable, "crm_credentials_rejected",
			"the CRM refused these credentials: wrong, expired or revoked; check them (or authorize again) and retry").Wrap(err)
	case errors.Is(err, crmapi.ErrForbidden):
		return httpapi.E(httpapi.KindUnprocessable, "crm_permission_denied",
			"the credentials are valid but lack a permission the platform needs at the CRM (its API access, or a scope)").Wrap(err)
	case errors.As(err, &rl):
		return &delayed{problem: httpapi.E(httpapi.KindUnavailable, "provider_unavailable",
			"the CRM is rate limiting this account; retry after the time Retry-After says").Wrap(err), after: rl.RetryAfter}
	case errors.As(err, &pe) && pe.Temporary:
		return httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the CRM could not be reached or failed; retry shortly").Wrap(err)
	case errors.As(err, &pe):
		e := httpapi.Errorf(httpapi.KindUnprocessable, "crm_request_rejected", "the CRM refused the request (HTTP %d)", pe.Status).
			With("provider_status", pe.Status).Wrap(err)
		if code := safeCode(pe.Code); code != "" {
			e = e.With("provider_code", code)
		}
		return e
	}
	return err
}

// delayed is a problem with the wait the provider asked for, which the handlers send as
// Retry-After (the kernel's 503 default is 1 s).
type delayed struct {
	problem *httpapi.Error
	after   time.Duration
}

func (d *delayed) Error() string { return d.problem.Error() }
func (d *delayed) Unwrap() error { return d.problem }

// safeCode returns a provider's error code when it looks like one (short, no spaces or
// markup), "" otherwise: it is echoed to the client.
func safeCode(s string) string {
	if len(s) == 0 || len(s) > 64 {
		return ""
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/') {
			return ""
		}
	}
	return s
}
