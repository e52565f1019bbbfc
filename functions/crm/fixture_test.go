package crm

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/audit"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The store operations these tests make must be granted to the crm Lambda (infra/access),
// and so must exactly the uses of the secrets key they make (accesstest.KMSComplete).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "crm", accesstest.KMSComplete())) }

// The credentials the fakes accept.
const (
	goodAPIKey      = "pd-good-key-0123456789abcdef"
	dynamicsSecret  = "dyn-secret~value"
	dynamicsClient  = "11111111-2222-3333-4444-555555555555"
	dynamicsTenant  = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
	dynamicsUser    = "crm-bot@contoso.com"
	hubspotClientID = "hs-client"
	hubspotSecret   = "hs-client-secret"
	redirectURL     = "https://api.example/api/integrations/crm/hubspot/callback"
)

// provider plays the CRMs behind the clients the service builds: which credentials work,
// what fails, what was revoked.
type provider struct {
	mu      sync.Mutex
	err     error // what Account answers when set
	revoked []crmapi.Credentials
	built   []crmapi.Credentials
}

func (p *provider) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = err
}

func (p *provider) revocations() []crmapi.Credentials {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.revoked)
}

func (p *provider) newClient(name string, creds crmapi.Credentials, _ Entities) (crmapi.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.built = append(p.built, creds)
	return &fakeClient{p: p, provider: name, creds: creds}, nil
}

// fakeClient is a test double of one connection's client.
type fakeClient struct {
	p        *provider
	provider string
	creds    crmapi.Credentials
}

func (c *fakeClient) Account(context.Context) (crmapi.Account, error) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	if c.p.err != nil {
		return crmapi.Account{}, c.p.err
	}
	switch {
	case c.provider == crmapi.Pipedrive && c.creds.APIKey == goodAPIKey:
		return crmapi.Account{ID: "pd-company-7", Name: "Acme", User: "ann@acme.example"}, nil
	case c.provider == crmapi.HubSpot && strings.HasPrefix(c.creds.AccessToken, "at-"):
		return crmapi.Account{ID: "portal-42", Name: "acme.example"}, nil
	case c.provider == crmapi.Dynamics && strings.HasPrefix(c.creds.AccessToken, "dyn-at-"):
		return crmapi.Account{ID: "org-9", Name: "Acme Sales", User: dynamicsUser}, nil
	}
	return crmapi.Account{}, crmapi.ErrUnauthorized
}

func (c *fakeClient) Revoke(context.Context) error {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	c.p.revoked = append(c.p.revoked, c.creds)
	return c.p.err
}

var errUnused = errors.New("not used by the connection routes")

func (*fakeClient) Objects(context.Context) ([]crmapi.Object, error)       { return nil, errUnused }
func (*fakeClient) Fields(context.Context, string) ([]crmapi.Field, error) { return nil, errUnused }
func (*fakeClient) Pipelines(context.Context) ([]crmapi.Pipeline, error)   { return nil, errUnused }
func (*fakeClient) AddNote(context.Context, string, string, string) error  { return errUnused }
func (*fakeClient) Get(context.Context, string, string, []string) (crmapi.Record, error) {
	return crmapi.Record{}, errUnused
}

func (*fakeClient) Upsert(context.Context, string, string, string, map[string]any) (crmapi.Record, error) {
	return crmapi.Record{}, errUnused
}

func (*fakeClient) Update(context.Context, string, string, map[string]any) (crmapi.Record, error) {
	return crmapi.Record{}, errUnused
}

func (*fakeClient) Find(context.Context, string, string, string, []string) (crmapi.Record, error) {
	return crmapi.Record{}, errUnused
}

func (*fakeClient) ChangedSince(context.Context, string, time.Time, []string, string) ([]crmapi.Record, string, error) {
	return nil, "", errUnused
}

func (*fakeClient) OpenDeal(context.Context, string, string, crmapi.DealInput) (crmapi.Deal, bool, error) {
	return crmapi.Deal{}, false, errUnused
}

func (*fakeClient) Deals(context.Context, string, string) ([]crmapi.Deal, error) {
	return nil, errUnused
}

func (*fakeClient) DealsChangedSince(context.Context, time.Time, string) ([]crmapi.Deal, string, error) {
	return nil, "", errUnused
}

// authServer is an OAuth 2.0 authorization server on 127.0.0.1 that checks what a real one
// checks: the client, the redirect URI, single-use codes and PKCE (S256) at the exchange,
// refresh tokens that rotate (only the newest refreshes), and the client secret of the
// client-credentials grant (Entra ID's path, /<tenant>/oauth2/v2.0/token).
type authServer struct {
	*httptest.Server
	mu        sync.Mutex
	codes     map[string]grant
	refresh   string // the refresh token that works now
	n         int
	refreshes int
	gate      chan struct{} // when set, refreshes wait for it to close
	arrived   chan struct{} // when set, each refresh signals it first
	expiresIn int
}

type grant struct{ challenge, redirect string }

func newAuthServer(t *testing.T) *authServer {
	t.Helper()
	a := &authServer{codes: map[string]grant{}, expiresIn: 3600}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

// authorize is the user approving at the provider: it checks the authorization URL and
// returns the code and state the browser brings back.
func (a *authServer) authorize(t *testing.T, redirect string) (code, state string) {
	t.Helper()
	u, err := url.Parse(redirect)
	require.NoError(t, err)
	q := u.Query()
	require.Equal(t, a.URL+"/authorize", u.Scheme+"://"+u.Host+u.Path)
	require.Equal(t, hubspotClientID, q.Get("client_id"))
	require.Equal(t, "code", q.Get("response_type"))
	require.Equal(t, "S256", q.Get("code_challenge_method"))
	require.NotEmpty(t, q.Get("code_challenge"))
	require.NotEmpty(t, q.Get("redirect_uri"))
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
	code = fmt.Sprintf("code-%d", a.n)
	a.codes[code] = grant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri")}
	return code, q.Get("state")
}

func (a *authServer) refreshCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refreshes
}

func (a *authServer) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	fail := func(status int, code string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
	}
	f := r.PostForm
	if strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token") {
		if f.Get("grant_type") != "client_credentials" || f.Get("client_id") != dynamicsClient || f.Get("client_secret") != dynamicsSecret ||
			r.URL.Path != "/"+dynamicsTenant+"/oauth2/v2.0/token" || f.Get("scope") != "https://acme.crm4.dynamics.com/.default" {
			fail(http.StatusUnauthorized, "invalid_client")
			return
		}
		a.mu.Lock()
		a.n++
		n := a.n
		a.mu.Unlock()
		a.token(w, map[string]any{"access_token": fmt.Sprintf("dyn-at-%d", n)})
		return
	}
	if r.URL.Path != "/token" || f.Get("client_id") != hubspotClientID || f.Get("client_secret") != hubspotSecret {
		fail(http.StatusUnauthorized, "invalid_client")
		return
	}
	switch f.Get("grant_type") {
	case "authorization_code":
		a.mu.Lock()
		g, ok := a.codes[f.Get("code")]
		delete(a.codes, f.Get("code"))
		sum := sha256.Sum256([]byte(f.Get("code_verifier")))
		if !ok || g.redirect != f.Get("redirect_uri") || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge {
			a.mu.Unlock()
			fail(http.StatusBadRequest, "invalid_grant")
			return
		}
		a.n++
		n := a.n
		a.refresh = fmt.Sprintf("rt-%d", n)
		a.mu.Unlock()
		a.token(w, map[string]any{"access_token": fmt.Sprintf("at-%d", n), "refresh_token": fmt.Sprintf("rt-%d", n)})
	case "refresh_token":
		a.mu.Lock()
		gate, arrived := a.gate, a.arrived
		a.mu.Unlock()
		if arrived != nil {
			arrived <- struct{}{}
		}
		if gate != nil {
			<-gate
		}
		a.mu.Lock()
		if f.Get("refresh_token") != a.refresh || a.refresh == "" {
			a.mu.Unlock()
			fail(http.StatusBadRequest, "invalid_grant")
			return
		}
		a.refreshes++
		a.n++
		n := a.n
		a.refresh = fmt.Sprintf("rt-%d", n) // rotated: the old one no longer refreshes
		a.mu.Unlock()
		a.token(w, map[string]any{"access_token": fmt.Sprintf("at-%d", n), "refresh_token": fmt.Sprintf("rt-%d", n)})
	default:
		fail(http.StatusBadRequest, "unsupported_grant_type")
	}
}

func (a *authServer) token(w http.ResponseWriter, body map[string]any) {
	a.mu.Lock()
	body["expires_in"] = a.expiresIn
	a.mu.Unlock()
	body["token_type"] = "bearer"
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}

// bots is the tenancy check: the listed bots are the account's.
type bots struct {
	account string
	ids     []string
}

func (b bots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account != b.account || !slices.Contains(b.ids, bot) {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

// sink stores audit events as the audit sink Lambda does on AWS.
type sink struct{ log *audit.Log }

func (s sink) Publish(ctx context.Context, e audit.Event) error {
	return s.log.Publish(sqlitetest.As(ctx, "auditsink"), e)
}

type fixture struct {
	*httpapitest.Server
	svc      *Service
	raw      *sqlitetest.Store
	clock    *httpapitest.Clock
	bot      string
	otherBot string
	provider *provider
	auth     *authServer
	base     string
}

// settings configure HubSpot's app on the fixture's authorization server, and no Salesforce
// app.
func settings(a *authServer) Settings {
	return Settings{
		OAuth: map[string]OAuthApp{crmapi.HubSpot: {ClientID: hubspotClientID, ClientSecret: hubspotSecret, RedirectURL: redirectURL,
			AuthURL: a.URL + "/authorize", TokenURL: a.URL + "/token", Scopes: []string{"oauth", "crm.objects.contacts.write"}}},
		DynamicsLoginURL: a.URL,
	}
}

// newFixture serves the family on a clock near the real one: x/oauth2 stamps token expiries
// with the real clock.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	t0 := time.Now().UTC().Truncate(time.Second)
	c := httpapitest.NewClock(t0, 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	f := &fixture{raw: raw, clock: c, bot: ids.At("bot", t0), otherBot: ids.At("bot", t0), provider: &provider{}, auth: newAuthServer(t)}
	f.Server = httpapitest.New(t, httpapitest.Config{Now: c.Now, Store: raw, BotIDs: []string{f.bot, f.otherBot}})
	f.svc = f.service(t, raw)
	Routes(f.Mux, f.svc, f.Cursors)
	f.base = "/api/bots/" + f.bot + "/crm/connections"
	return f
}

// service builds a Service over st (another process, when st is shared).
func (f *fixture) service(t *testing.T, st store.Store) *Service {
	t.Helper()
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	svc, err := New(Config{Store: st, Sealer: secretstest.Wrap(key, kms.PurposeCRMCredentials), Bots: bots{account: f.Account.ID, ids: []string{f.bot, f.otherBot}},
		Audit: sink{audit.NewLog(st)}, Limiter: ratelimit.New(st, f.clock.Now), NewClient: f.provider.newClient,
		HTTPClient: f.auth.Client(), Settings: settings(f.auth), Log: slog.New(slog.DiscardHandler), Now: f.clock.Now})
	require.NoError(t, err)
	return svc
}

// connectHubSpot runs the OAuth flow to its end and returns the connection.
func (f *fixture) connectHubSpot(t *testing.T) map[string]any {
	t.Helper()
	res := f.Do(t, "POST", f.base+"/hubspot/start", `{"account_key":"acme.example"}`)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	code, state := f.auth.authorize(t, res.JSON["redirect_url"].(string))
	res = f.callback(t, "hubspot", url.Values{"code": {code}, "state": {state}})
	require.Contains(t, []int{http.StatusCreated, http.StatusOK}, res.Code, res.Body)
	return res.JSON
}

// callback is the browser coming back from the provider: no token.
func (f *fixture) callback(t *testing.T, provider string, q url.Values) httpapitest.Reply {
	t.Helper()
	return f.DoAs(t, "", "GET", "/api/integrations/crm/"+provider+"/callback?"+q.Encode(), nil)
}

// partition returns every stored item of the bot's CRM partition, raw.
func (f *fixture) partition(t *testing.T) string {
	t.Helper()
	page, err := f.raw.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: crmPK(f.bot)})
	require.NoError(t, err)
	var b strings.Builder
	for _, it := range page.Items {
		b.Write(it.Data)
	}
	return b.String()
}
