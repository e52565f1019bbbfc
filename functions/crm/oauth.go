package crm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/salesforce"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/oauthstate"
	"github.com/botplatform/api/shared/store"
)

// MaxAccountKeyLen bounds an OAuth start's account_key (a DNS name's length).
const MaxAccountKeyLen = 253

// StartRequest is the body of POST .../crm/connections/{provider}/start.
type StartRequest struct {
	// AccountKey names the CRM account the user means to connect, host-like: the
	// Salesforce org's My Domain host (acme.my.salesforce.com), the HubSpot account's
	// domain or hub id. It is kept on the connection; it never chooses a host the platform
	// calls (the OAuth endpoints are the deployment's).
	AccountKey string `json:"account_key"`
}

// Validate checks the account key and puts it in canonical form (lower case).
func (r *StartRequest) Validate() error {
	var p httpapi.Problems
	r.AccountKey = strings.ToLower(strings.TrimSpace(r.AccountKey))
	if msg := checkHostLike(r.AccountKey, MaxAccountKeyLen); msg != "" {
		p.Add("account_key", "%s", msg)
	}
	return p.Err()
}

// checkHostLike returns why s is not host-like (dot-separated labels of a-z, 0-9 and inner
// hyphens, each 1 to 63 long, max characters in all), "" when it is.
func checkHostLike(s string, maxLen int) string {
	const want = "a host-like account identifier: letters, digits and hyphens in dot-separated labels, such as acme.my.salesforce.com"
	if s == "" {
		return "is required: " + want
	}
	if len(s) > maxLen {
		return fmt.Sprintf("at most %d characters", maxLen)
	}
	for label := range strings.SplitSeq(s, ".") {
		if !validLabel(label) {
			return "must be " + want
		}
	}
	return ""
}

// validLabel reports whether l is a lower-case DNS label.
func validLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Started is the answer of an OAuth start.
type Started struct {
	Provider string `json:"provider"`
	// RedirectURL is the provider's authorization page, to open in the user's browser; it
	// carries the single-use state and the PKCE challenge.
	RedirectURL string `json:"redirect_url"`
	// ExpiresAt is when the state stops being accepted by the callback.
	ExpiresAt time.Time `json:"expires_at"`
}

// pending is a stored OAuth start, under the hash of its state.
type pending struct {
	Provider   string `json:"provider"`
	BotID      string `json:"bot_id"`
	AccountKey string `json:"account_key"`
	// Who started it: the callback, which has no token, acts and is audited as them.
	AccountID string         `json:"account_id"`
	UserID    string         `json:"user_id"`
	TokenID   string         `json:"token_id"`
	TokenKind auth.TokenKind `json:"token_kind"`
	// SealedVerifier is the PKCE code verifier, sealed under verifierAAD.
	SealedVerifier []byte    `json:"sealed_verifier"`
	CreatedAt      time.Time `json:"created_at"`
}

// errNotConfigured is the 503 of a provider without an OAuth application here.
func errNotConfigured(provider string) error {
	return httpapi.Errorf(httpapi.KindUnavailable, "oauth_not_configured",
		"this deployment has no OAuth application for %s (its client id, client secret and redirect URL)", provider)
}

// oauthConfig is the x/oauth2 configuration of provider's app.
func (s *Service) oauthConfig(provider string) (*oauth2.Config, bool) {
	app, ok := s.settings.OAuth[provider]
	if !ok || !app.Configured() {
		return nil, false
	}
	return &oauth2.Config{ClientID: app.ClientID, ClientSecret: app.ClientSecret, RedirectURL: app.RedirectURL,
		Scopes: app.Scopes, Endpoint: oauth2.Endpoint{AuthURL: app.AuthURL, TokenURL: app.TokenURL, AuthStyle: oauth2.AuthStyleInParams}}, true
}

// Start begins connecting bot to an OAuth provider for the caller p: it keeps a single-use
// state valid for StateTTL with the sealed PKCE verifier, and answers the provider's
// authorization URL.
func (s *Service) Start(ctx context.Context, p *auth.Principal, bot, provider string, req StartRequest) (Started, error) {
	if kind, ok := crmapi.Kind(provider); !ok || kind != crmapi.AuthOAuth {
		return Started{}, httpapi.NotFound("OAuth provider")
	}
	cfg, ok := s.oauthConfig(provider)
	if !ok {
		return Started{}, errNotConfigured(provider)
	}
	if s.limiter != nil {
		if err := s.limiter.AllowSliding(ctx, StartLimit, p.AccountID); err != nil {
			return Started{}, err
		}
	}
	state := oauthstate.New()
	verifier := oauth2.GenerateVerifier()
	key := oauthstate.Key(stateFamily, state)
	sealed, err := s.sealer.Seal(ctx, []byte(verifier), verifierAAD(oauthstate.Hash(state)))
	if err != nil {
		return Started{}, fmt.Errorf("crm: seal PKCE verifier: %w", err)
	}
	now := s.now()
	b, err := store.Encode(pending{Provider: provider, BotID: bot, AccountKey: req.AccountKey, AccountID: p.AccountID,
		UserID: p.UserID, TokenID: p.TokenID, TokenKind: p.Kind, SealedVerifier: sealed, CreatedAt: now.UTC()})
	if err != nil {
		return Started{}, err
	}
	expires := store.SecondsPrecision(now.Add(StateTTL))
	if err := s.store.Put(ctx, store.Item{Key: key, Revision: 1, Data: b, ExpiresAt: expires}, store.MustNotExist); err != nil {
		return Started{}, fmt.Errorf("crm: store OAuth state: %w", err)
	}
	return Started{Provider: provider, RedirectURL: cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)), ExpiresAt: expires}, nil
}

// Actor is who an OAuth callback acts for: the start's caller, on the start's bot.
type Actor struct {
	Principal *auth.Principal
	BotID     string
}

// errInvalidState refuses a callback whose state is unknown, used, expired or another
// provider's: they are told apart in no answer (an unknown state reveals nothing).
var errInvalidState = httpapi.E(httpapi.KindInvalid, "invalid_state",
	"the state is unknown, already used, older than 5 minutes, or was issued for another provider: start the connection again")

// Callback finishes an OAuth start: it consumes the state (once), exchanges the code with
// the PKCE verifier, reads the account the tokens act as and stores the connection. The
// Actor is nil when the state did not authenticate the call; otherwise the call is the
// start's caller's, and audited as theirs.
func (s *Service) Callback(ctx context.Context, provider string, q url.Values) (Connection, bool, *Actor, error) {
	state := q.Get("state")
	pd, err := oauthstate.Consume(ctx, s.store, stateFamily, state, func(pd pending) bool {
		return pd.Provider == provider && s.now().Before(pd.CreatedAt.Add(StateTTL))
	})
	if errors.Is(err, oauthstate.ErrInvalid) {
		return Connection{}, false, nil, errInvalidState
	}
	if err != nil {
		return Connection{}, false, nil, err
	}
	actor := &Actor{BotID: pd.BotID, Principal: &auth.Principal{AccountID: pd.AccountID, UserID: pd.UserID, TokenID: pd.TokenID, Kind: pd.TokenKind}}
	if e := q.Get("error"); e != "" {
		pe := httpapi.E(httpapi.KindInvalid, "oauth_denied", "the authorization was not granted at the provider: start the connection again")
		if code := safeCode(e); code != "" {
			pe = pe.With("provider_error", code)
		}
		return Connection{}, false, actor, pe
	}
	code := q.Get("code")
	if code == "" || len(code) > 4096 {
		return Connection{}, false, actor, httpapi.InvalidParam("code", "the provider's authorization code is missing or too long")
	}
	// The bot may have been deleted, or moved out of reach, since the start.
	if _, err := s.bots.LoadBot(ctx, pd.AccountID, pd.BotID); err != nil {
		return Connection{}, false, actor, err
	}
	cfg, ok := s.oauthConfig(provider)
	if !ok {
		return Connection{}, false, actor, errNotConfigured(provider)
	}
	verifier, err := s.sealer.Open(ctx, pd.SealedVerifier, verifierAAD(oauthstate.Hash(state)))
	if err != nil {
		return Connection{}, false, actor, fmt.Errorf("crm: open PKCE verifier: %w", err)
	}
	tok, err := cfg.Exchange(s.httpContext(ctx), code, oauth2.VerifierOption(string(verifier)))
	if err != nil {
		return Connection{}, false, actor, exchangeProblem(err)
	}
	creds := crmapi.Credentials{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry.UTC()}
	if provider == crmapi.Salesforce {
		// Where the org's API is: the platform will send the token there, so it is checked.
		if creds.InstanceURL, err = s.instanceURL(tok); err != nil {
			return Connection{}, false, actor, providerProblem(err)
		}
	}
	acct, err := s.account(ctx, provider, creds)
	if err != nil {
		return Connection{}, false, actor, err
	}
	c, created, err := s.connect(ctx, pd.BotID, Connection{Provider: provider, Auth: crmapi.AuthOAuth, Account: acct,
		AccountKey: pd.AccountKey, InstanceURL: creds.InstanceURL}, creds)
	return c, created, actor, err
}

// httpContext carries the HTTP client x/oauth2 calls token endpoints with.
func (s *Service) httpContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, s.http)
}

// exchangeProblem maps a failed code exchange: the provider refused the code (used,
// expired, PKCE mismatch, another redirect URI) or could not be reached.
func exchangeProblem(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
		e := httpapi.E(httpapi.KindUnprocessable, "oauth_code_rejected",
			"the provider refused the authorization code (used, expired, or not issued for this start): start the connection again").Wrap(err)
		if code := safeCode(re.ErrorCode); code != "" {
			e = e.With("provider_code", code)
		}
		return e
	}
	return httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the provider's token endpoint could not be reached or failed; start again shortly").Wrap(err)
}

// instanceURL reads and checks the instance URL of a Salesforce token response (the code
// exchange's, a refresh's): https unless the deployment allows private addresses. A
// response without a usable one is the provider's fault, answered as unavailable.
func (s *Service) instanceURL(tok *oauth2.Token) (string, error) {
	u, err := salesforce.InstanceURL(tok, s.settings.AllowPrivate)
	if err != nil {
		return "", &crmapi.ProviderError{Status: http.StatusOK, Code: "bad_instance_url", Message: err.Error(), Temporary: true}
	}
	return u, nil
}

// tokenError turns a failed token request (a refresh, a client-credentials grant) into the
// client contract's errors: a refusal is crmapi.ErrUnauthorized, anything else temporary.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode < 500 {
		return fmt.Errorf("%w: the token endpoint answered %d %s", crmapi.ErrUnauthorized, re.Response.StatusCode, safeCode(re.ErrorCode))
	}
	return &crmapi.ProviderError{Status: 0, Code: "token_endpoint", Message: "the token endpoint could not be reached or failed", Temporary: true}
}

// account checks credentials against the provider: who they act as.
func (s *Service) account(ctx context.Context, provider string, creds crmapi.Credentials) (crmapi.Account, error) {
	cl, err := s.newClient(provider, creds, DefaultEntities)
	if err != nil {
		// The client refuses what it may not call (an instance URL that is not https, on a
		// deployment that allows only public addresses): nothing the caller can fix.
		return crmapi.Account{}, httpapi.Errorf(httpapi.KindUnavailable, "provider_unavailable", "this deployment cannot call %s at this address", provider).Wrap(err)
	}
	acct, err := cl.Account(ctx)
	if err != nil {
		return crmapi.Account{}, providerProblem(err)
	}
	return acct, nil
}

// newID mints a connection id.
func (s *Service) newID() string { return ids.At("crm", s.now()) }
