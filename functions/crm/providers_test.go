package crm

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
	"github.com/botplatform/api/shared/crm/hubspot"
	"github.com/botplatform/api/shared/crm/salesforce"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	hubspotfake "github.com/botplatform/api/tests/fakes/crm/hubspot"
	salesforcefake "github.com/botplatform/api/tests/fakes/crm/salesforce"
)

// realProviders are the HubSpot and Salesforce fakes with the deployment's apps on them and
// the real clients: what the wiring builds, without importing it (it imports this package).
type realProviders struct {
	hs *hubspotfake.Server
	sf *salesforcefake.Server
}

func newRealProviders(t *testing.T) realProviders {
	t.Helper()
	return realProviders{hs: hubspotfake.New(t), sf: salesforcefake.New(t)}
}

func (p realProviders) settings(allowPrivate bool) Settings {
	hs := hubspot.Endpoint(p.hs.URL(), p.hs.URL())
	sf := salesforce.Endpoint(p.sf.URL())
	return Settings{
		OAuth: map[string]OAuthApp{
			crmapi.HubSpot: {ClientID: hubspotfake.ClientID, ClientSecret: hubspotfake.ClientSecret, RedirectURL: hubspotfake.RedirectURI,
				AuthURL: hs.AuthURL, TokenURL: hs.TokenURL, Scopes: hubspot.Scopes()},
			crmapi.Salesforce: {ClientID: salesforcefake.ClientID, ClientSecret: salesforcefake.ClientSecret, RedirectURL: salesforcefake.RedirectURI,
				AuthURL: sf.AuthURL, TokenURL: sf.TokenURL, Scopes: salesforce.Scopes()},
		},
		AllowPrivate: allowPrivate,
	}
}

func (p realProviders) newClient(provider string, creds crmapi.Credentials, _ Entities) (crmapi.Client, error) {
	switch provider {
	case crmapi.HubSpot:
		return hubspot.New(hubspot.Config{BaseURL: p.hs.URL(), AllowPrivate: true}, creds)
	case crmapi.Salesforce:
		return salesforce.New(salesforce.Config{AllowPrivate: true}, creds)
	}
	return nil, fmt.Errorf("no %s client here", provider)
}

// service is a process of the family over st with the real clients.
func (p realProviders) service(t *testing.T, f *fixture, st store.Store, allowPrivate bool) *Service {
	t.Helper()
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	svc, err := New(Config{Store: st, Sealer: secretstest.Wrap(key, kms.PurposeCRMCredentials), Bots: bots{account: f.Account.ID, ids: []string{f.bot, f.otherBot}},
		Audit: sink{audit.NewLog(st)}, Limiter: ratelimit.New(st, f.clock.Now), NewClient: p.newClient,
		HTTPClient: crmhttp.NewHTTPClient(true), Settings: p.settings(allowPrivate), Log: slog.New(slog.DiscardHandler), Now: f.clock.Now})
	require.NoError(t, err)
	return svc
}

// connect runs start, the user's consent at the fake and the browser's callback.
func connectAt(t *testing.T, f *fixture, svc *Service, provider string) (Connection, error) {
	t.Helper()
	p := &auth.Principal{AccountID: f.Account.ID, UserID: f.Owner.ID, Kind: auth.KindPAT}
	st, err := svc.Start(t.Context(), p, f.bot, provider, StartRequest{AccountKey: "acme.example"})
	require.NoError(t, err)
	q, err := crmfake.Consent(st.RedirectURL)
	require.NoError(t, err)
	require.NotEmpty(t, q.Get("code"), "the fake granted a code: %v", q)
	c, _, actor, err := svc.Callback(t.Context(), provider, q)
	require.NotNil(t, actor, "the state authenticated the callback")
	return c, err
}

// Two processes (two services on one store) whose HubSpot access token expired refresh it
// once at the real fake, with the real client: every caller then calls HubSpot with the one
// new token, which the fake accepts.
func TestRefreshAtHubSpot(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := newRealProviders(t)
	one, two := p.service(t, f, f.raw, true), p.service(t, f, f.raw, true)
	c, err := connectAt(t, f, one, crmapi.HubSpot)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(hubspotfake.PortalID), c.Account.ID)

	cl, err := two.client(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	_, err = cl.Account(t.Context())
	require.NoError(t, err, "a fresh token is used as it is")
	exchanges := p.hs.TokenRequests()

	// The token's life is over, at HubSpot and in the stored credentials (x/oauth2 stamps
	// expiries with the real clock, so the family's clock cannot be moved past it: the
	// tokens the refresh brings would look expired too).
	p.hs.ExpireAccessTokens()
	_, err = cl.Account(t.Context())
	require.ErrorIs(t, err, crmapi.ErrUnauthorized, "the old token is dead at HubSpot")
	expireStored(t, f, one, c.ID)

	const callers = 8
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		svc := one
		if i%2 == 1 {
			svc = two
		}
		wg.Go(func() {
			cl, err := svc.client(t.Context(), f.bot, c.ID)
			if err == nil {
				_, err = cl.Account(t.Context())
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "caller %d", i)
	}
	assert.Equal(t, exchanges+1, p.hs.TokenRequests(), "exactly one refresh at HubSpot")
	res := f.Do(t, "GET", f.base+"/"+c.ID, nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["revision"], "a refresh is no change of the connection")
}

// expireStored makes the stored access token of connection id expire now.
func expireStored(t *testing.T, f *fixture, svc *Service, id string) {
	t.Helper()
	ctx := sqlitetest.Unrecorded(t.Context())
	it, err := f.raw.Get(ctx, credKey(f.bot, id))
	require.NoError(t, err)
	rec, err := store.Decode[credRecord](it)
	require.NoError(t, err)
	creds, err := svc.open(ctx, f.bot, id, rec)
	require.NoError(t, err)
	creds.Expiry = f.clock.Now()
	rec.Expiry = creds.Expiry
	rec.Sealed, err = svc.seal(ctx, f.bot, id, creds)
	require.NoError(t, err)
	next, err := item(credKey(f.bot, id), it.Revision+1, rec)
	require.NoError(t, err)
	require.NoError(t, f.raw.Put(ctx, next, store.RevisionIs(it.Revision)))
}

// Salesforce's instance URL comes from the token response, checked: at the code exchange and
// at every refresh. A deployment that allows only public addresses refuses the fake's plain
// http instance, and stores nothing.
func TestSalesforceInstanceURL(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := newRealProviders(t)
	svc := p.service(t, f, f.raw, true)
	c, err := connectAt(t, f, svc, crmapi.Salesforce)
	require.NoError(t, err)
	assert.Equal(t, p.sf.URL(), c.InstanceURL)
	assert.Equal(t, crmapi.Account{ID: salesforcefake.OrgID, Name: salesforcefake.OrgName, User: salesforcefake.Username}, c.Account)

	creds, err := svc.credentials(t.Context(), f.bot, c)
	require.NoError(t, err)
	creds.InstanceURL = "https://stale.example"
	next, err := svc.refresh(t.Context(), c, creds)
	require.NoError(t, err)
	assert.Equal(t, p.sf.URL(), next.InstanceURL, "each refresh names the instance")
	assert.NotEqual(t, creds.AccessToken, next.AccessToken)

	strict := p.service(t, f, f.raw, false)
	_, err = strict.refresh(t.Context(), c, creds)
	assert.Equal(t, "provider_unavailable", httpapitest.AsError(t, providerProblem(err)).Code, "an http instance on a strict deployment")

	f.clock.Advance(time.Minute) // the start limit
	_, err = connectAt(t, f, strict, crmapi.Salesforce)
	assert.Equal(t, "provider_unavailable", httpapitest.AsError(t, err).Code)
	list, _, err := svc.List(t.Context(), f.bot, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 1, "nothing stored for the refused instance")
}

// Disconnecting revokes the grant at the provider: HubSpot's refresh token, Salesforce's.
func TestDeleteRevokesAtProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	p := newRealProviders(t)
	svc := p.service(t, f, f.raw, true)
	for _, provider := range []string{crmapi.HubSpot, crmapi.Salesforce} {
		c, err := connectAt(t, f, svc, provider)
		require.NoError(t, err, provider)
		creds, err := svc.credentials(t.Context(), f.bot, c)
		require.NoError(t, err)
		valid := p.hs.RefreshTokenValid
		if provider == crmapi.Salesforce {
			valid = p.sf.RefreshTokenValid
		}
		require.True(t, valid(creds.RefreshToken), provider)
		require.NoError(t, svc.Delete(t.Context(), f.bot, c.ID))
		assert.False(t, valid(creds.RefreshToken), "%s revoked the refresh token", provider)
	}
}
