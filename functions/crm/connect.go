package crm

import (
	"context"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
)

// PipedriveRequest is the body of POST .../crm/connections/pipedrive.
type PipedriveRequest struct {
	// APIKey is the user's personal API token (Settings > Personal preferences > API).
	APIKey string `json:"api_key"`
	// CompanyDomain is the company's Pipedrive subdomain: acme for acme.pipedrive.com
	// (acme.pipedrive.com is accepted too).
	CompanyDomain string `json:"company_domain"`
}

// MaxSecretLen bounds the credentials a body gives.
const MaxSecretLen = 512

// Validate checks the fields and puts the company domain in canonical form (its label).
func (r *PipedriveRequest) Validate() error {
	var p httpapi.Problems
	checkSecret(&p, "api_key", r.APIKey)
	r.CompanyDomain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(r.CompanyDomain)), ".pipedrive.com")
	if !validLabel(r.CompanyDomain) {
		p.Add("company_domain", "must be the company's Pipedrive subdomain, such as acme for acme.pipedrive.com")
	}
	return p.Err()
}

// checkSecret requires a secret of printable ASCII without spaces, bounded.
func checkSecret(p *httpapi.Problems, field, v string) {
	switch {
	case v == "":
		p.Add(field, "is required")
	case len(v) > MaxSecretLen:
		p.Add(field, "at most %d characters", MaxSecretLen)
	case strings.IndexFunc(v, func(c rune) bool { return c <= ' ' || c > '~' }) >= 0:
		p.Add(field, "must be printable ASCII without spaces")
	}
}

// ConnectPipedrive connects bot to a Pipedrive company with an API key, once Pipedrive has
// accepted it. created is false when the bot had a connection to that company and user,
// which now has the new key.
func (s *Service) ConnectPipedrive(ctx context.Context, bot string, req PipedriveRequest) (Connection, bool, error) {
	creds := crmapi.Credentials{APIKey: req.APIKey, InstanceURL: "https://" + req.CompanyDomain + ".pipedrive.com"}
	if s.settings.PipedriveURL != "" {
		creds.InstanceURL = s.settings.PipedriveURL
	}
	acct, err := s.account(ctx, crmapi.Pipedrive, creds)
	if err != nil {
		return Connection{}, false, err
	}
	return s.connect(ctx, bot, Connection{Provider: crmapi.Pipedrive, Auth: crmapi.AuthAPIKey, Account: acct, InstanceURL: creds.InstanceURL}, creds)
}

// DynamicsRequest is the body of POST .../crm/connections/dynamics: a Microsoft Entra ID
// application (tenant, client id and secret) registered as an application user of the
// Dataverse environment.
type DynamicsRequest struct {
	// TenantID is the Entra ID tenant: its id (a GUID) or a verified domain.
	TenantID     string `json:"tenant_id"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	// EnvironmentURL is the Dataverse environment, such as https://acme.crm4.dynamics.com.
	EnvironmentURL string `json:"environment_url"`
	// Login is the application user's name (UPN) in the environment; when given, the
	// credentials must act as it.
	Login string `json:"login"`
	// Entities are the entity sets of contacts (where subscriber records are written) and
	// deals; members left out are the defaults (contacts, opportunities). Deals can only be
	// opportunities.
	Entities *Entities `json:"entities"`
}

var (
	guidRe   = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
	entityRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
)

// Validate checks the fields and puts them in canonical form; the environment URL's host
// is checked against the deployment's settings by the service.
func (r *DynamicsRequest) Validate() error {
	var p httpapi.Problems
	r.TenantID = strings.ToLower(strings.TrimSpace(r.TenantID))
	if !guidRe.MatchString(r.TenantID) && (checkHostLike(r.TenantID, MaxAccountKeyLen) != "" || !strings.Contains(r.TenantID, ".")) {
		p.Add("tenant_id", "must be the Entra ID tenant's id (a GUID) or one of its verified domains (contoso.onmicrosoft.com)")
	}
	r.ClientID = strings.ToLower(strings.TrimSpace(r.ClientID))
	if !guidRe.MatchString(r.ClientID) {
		p.Add("client_id", "must be the application (client) id: a GUID")
	}
	checkSecret(&p, "client_secret", r.ClientSecret)
	r.EnvironmentURL = strings.TrimRight(strings.TrimSpace(r.EnvironmentURL), "/")
	if u, err := url.Parse(r.EnvironmentURL); err != nil || u.Host == "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.Fragment != "" ||
		(u.Scheme != "https" && u.Scheme != "http") {
		p.Add("environment_url", "must be the environment's URL, such as https://acme.crm4.dynamics.com")
	} else {
		r.EnvironmentURL = u.Scheme + "://" + strings.ToLower(u.Host)
	}
	r.Login = strings.TrimSpace(r.Login)
	if len(r.Login) > 256 || strings.ContainsAny(r.Login, " <>\"") {
		p.Add("login", "must be a user name (UPN) such as crm-bot@contoso.com, at most 256 characters")
	}
	e := DefaultEntities
	if r.Entities != nil {
		e.Contacts = cmpOr(r.Entities.Contacts, e.Contacts)
		e.Deals = cmpOr(r.Entities.Deals, e.Deals)
	}
	if !entityRe.MatchString(e.Contacts) {
		p.Add("entities.contacts", "must be a Dataverse entity set name (lower case, such as contacts or leads)")
	}
	// Deals are opportunities: the client reads their salesstage, statecode and
	// parentcontactid, which another entity set does not have. Refused rather than
	// accepted and ignored.
	if e.Deals != DefaultEntities.Deals {
		p.Add("entities.deals", "must be opportunities (or left out): deals are Dataverse opportunities; another entity set is not supported")
	}
	r.Entities = &e
	return p.Err()
}

func cmpOr(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// environmentAllowed reports whether the platform may call env: https on a host of the
// allowed suffixes, or one of the allowed origins exactly.
func (s *Service) environmentAllowed(env string) bool {
	if slices.Contains(s.settings.DynamicsOrigins, env) {
		return true
	}
	u, err := url.Parse(env)
	if err != nil || u.Scheme != "https" || u.Port() != "" {
		return false
	}
	for _, suffix := range s.settings.DynamicsHostSuffixes {
		if strings.HasSuffix(u.Hostname(), suffix) && len(u.Hostname()) > len(suffix) {
			return true
		}
	}
	return false
}

// clientCredentials is the OIDC client-credentials grant of a Dataverse connection: a token
// for the environment from the tenant's Entra ID.
func (s *Service) clientCredentials(creds crmapi.Credentials) *clientcredentials.Config {
	return &clientcredentials.Config{ClientID: creds.ClientID, ClientSecret: creds.ClientSecret,
		TokenURL: strings.TrimRight(s.settings.DynamicsLoginURL, "/") + "/" + url.PathEscape(creds.TenantID) + "/oauth2/v2.0/token",
		Scopes:   []string{creds.InstanceURL + "/.default"}, AuthStyle: oauth2.AuthStyleInParams}
}

// ConnectDynamics connects bot to a Dataverse environment with OIDC client credentials: it
// gets a token from Entra ID (which checks the secret) and reads who it acts as from the
// environment (which checks the application user) before storing anything.
func (s *Service) ConnectDynamics(ctx context.Context, bot string, req DynamicsRequest) (Connection, bool, error) {
	if !s.environmentAllowed(req.EnvironmentURL) {
		var p httpapi.Problems
		p.Add("environment_url", "must be an https URL of a Dataverse environment (a host under %s)", strings.Join(s.settings.DynamicsHostSuffixes, ", "))
		return Connection{}, false, p.Err()
	}
	creds := crmapi.Credentials{TenantID: req.TenantID, ClientID: req.ClientID, ClientSecret: req.ClientSecret, InstanceURL: req.EnvironmentURL}
	tok, err := s.clientCredentials(creds).Token(s.httpContext(ctx))
	if err != nil {
		return Connection{}, false, providerProblem(tokenError(err))
	}
	creds.AccessToken, creds.Expiry = tok.AccessToken, tok.Expiry.UTC()
	acct, err := s.account(ctx, crmapi.Dynamics, creds)
	if err != nil {
		return Connection{}, false, err
	}
	if req.Login != "" && acct.User != "" && !strings.EqualFold(req.Login, acct.User) {
		return Connection{}, false, httpapi.Errorf(httpapi.KindUnprocessable, "crm_credentials_rejected",
			"the credentials act as %s in the environment, not as login %s", acct.User, req.Login)
	}
	if err := s.checkEntities(ctx, creds, *req.Entities); err != nil {
		return Connection{}, false, err
	}
	return s.connect(ctx, bot, Connection{Provider: crmapi.Dynamics, Auth: crmapi.AuthOIDC, Account: acct, InstanceURL: req.EnvironmentURL,
		Login: req.Login, Entities: req.Entities}, creds)
}

// contactsChecker is a client that can ask its CRM, before a connection is saved, whether
// the object the connection's settings name as where subscriber records go can hold them
// (the Dynamics client: entities.contacts).
type contactsChecker interface {
	CheckContacts(ctx context.Context) error
}

// checkEntities asks the environment whether entities.contacts is an entity set subscriber
// records can be written to, with the credentials just proven: 422 invalid_entities naming
// entities.contacts when the environment does not have it or it cannot hold them, 503
// provider_unavailable when the environment cannot be reached, and the usual refusals
// (crm_permission_denied for an application user that may not read the metadata).
func (s *Service) checkEntities(ctx context.Context, creds crmapi.Credentials, e Entities) error {
	cl, err := s.newClient(crmapi.Dynamics, creds, e)
	if err != nil {
		return httpapi.Errorf(httpapi.KindUnavailable, "provider_unavailable", "this deployment cannot call %s at this address", crmapi.Dynamics).Wrap(err)
	}
	ch, ok := cl.(contactsChecker)
	if !ok {
		return nil
	}
	err = ch.CheckContacts(ctx)
	var ue *crmapi.UnusableObjectError
	if errors.As(err, &ue) {
		var p httpapi.Problems
		p.Add("entities.contacts", "%s", ue.Reason)
		return p.Unprocessable("invalid_entities")
	}
	return providerProblem(err)
}
