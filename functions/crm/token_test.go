package crm

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// expiring connects HubSpot with an access token that expires in 30 s (within refreshBefore)
// and makes later tokens last an hour.
func expiring(t *testing.T, f *fixture) string {
	t.Helper()
	f.auth.mu.Lock()
	f.auth.expiresIn = 30
	f.auth.mu.Unlock()
	id := f.connectHubSpot(t)["id"].(string)
	f.auth.mu.Lock()
	f.auth.expiresIn = 3600
	f.auth.mu.Unlock()
	return id
}

func accessToken(t *testing.T, c crmapi.Client) string {
	t.Helper()
	fc, ok := c.(*fakeClient)
	require.True(t, ok)
	return fc.creds.AccessToken
}

// Two processes (two services on one store) that find the token expiring at once refresh it
// once: the one that takes the lease asks the provider, every other caller waits for it and
// uses the token it stored. The provider rotates refresh tokens, so a second refresh with
// the old one would fail.
func TestRefreshRace(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := expiring(t, f)
	other := f.service(t, f.raw)
	gate, arrived := make(chan struct{}), make(chan struct{}, 16)
	f.auth.mu.Lock()
	f.auth.gate, f.auth.arrived = gate, arrived
	f.auth.mu.Unlock()

	const callers = 8
	tokens := make([]string, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		svc := f.svc
		if i%2 == 1 {
			svc = other
		}
		wg.Go(func() {
			c, err := svc.client(t.Context(), f.bot, id)
			errs[i] = err
			if err == nil {
				tokens[i] = c.(*fakeClient).creds.AccessToken
			}
		})
	}
	<-arrived // one refresh is at the provider, under the lease: let it answer
	close(gate)
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i], "caller %d", i)
		assert.Equal(t, tokens[0], tokens[i], "caller %d has the one refreshed token", i)
	}
	assert.Equal(t, 1, f.auth.refreshCount(), "exactly one refresh")
	assert.NotEqual(t, "at-1", tokens[0])

	// The new token and the rotated refresh token were stored: the next call needs no
	// refresh, and a later one refreshes with the new refresh token.
	c, err := other.client(t.Context(), f.bot, id)
	require.NoError(t, err)
	assert.Equal(t, tokens[0], accessToken(t, c))
	assert.Equal(t, 1, f.auth.refreshCount())
	f.clock.Advance(time.Hour)
	c, err = f.svc.client(t.Context(), f.bot, id)
	require.NoError(t, err)
	assert.Equal(t, 2, f.auth.refreshCount())
	assert.NotEqual(t, tokens[0], accessToken(t, c))
}

// A fresh token is used as it is; an API key never refreshes.
func TestNoRefreshNeeded(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.connectHubSpot(t)["id"].(string)
	c, err := f.svc.client(t.Context(), f.bot, id)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(accessToken(t, c), "at-"))
	res := f.Do(t, "POST", f.base+"/pipedrive", `{"api_key":"`+goodAPIKey+`","company_domain":"acme"}`)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	c, err = f.svc.client(t.Context(), f.bot, res.JSON["id"].(string))
	require.NoError(t, err)
	assert.Equal(t, goodAPIKey, c.(*fakeClient).creds.APIKey)
	assert.Zero(t, f.auth.refreshCount())
	_, err = f.svc.client(t.Context(), f.otherBot, id)
	assert.Error(t, err, "another bot's connection")
}

// A refresh the provider refuses marks the connection for reconnection; authorizing the same
// account again makes it active.
func TestRefreshRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := expiring(t, f)
	f.auth.mu.Lock()
	f.auth.refresh = "" // the user revoked the app at HubSpot
	f.auth.mu.Unlock()
	_, err := f.svc.client(t.Context(), f.bot, id)
	require.Error(t, err)
	res := f.Do(t, "GET", f.base+"/"+id, nil)
	assert.Equal(t, StatusReconnectRequired, res.JSON["status"])
	assert.Equal(t, float64(2), res.JSON["revision"])

	again := f.connectHubSpot(t)
	assert.Equal(t, id, again["id"])
	assert.Equal(t, StatusActive, again["status"])
	c, err := f.svc.client(t.Context(), f.bot, id)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(accessToken(t, c), "at-"))
}

// A lease whose process died runs out: the next caller refreshes.
func TestStaleLease(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := expiring(t, f)
	ctx := sqlitetest.Unrecorded(t.Context())
	it, err := f.raw.Get(ctx, credKey(f.bot, id))
	require.NoError(t, err)
	rec, err := store.Decode[credRecord](it)
	require.NoError(t, err)
	rec.LeaseUntil = f.clock.Now().Add(leaseTTL)
	held, err := item(credKey(f.bot, id), it.Revision+1, rec)
	require.NoError(t, err)
	require.NoError(t, f.raw.Put(ctx, held, store.RevisionIs(it.Revision)))

	f.clock.Advance(leaseTTL)
	c, err := f.svc.client(t.Context(), f.bot, id)
	require.NoError(t, err)
	assert.Equal(t, 1, f.auth.refreshCount())
	assert.NotEqual(t, "at-1", accessToken(t, c))
}

// A Dataverse connection's client-credentials token is renewed the same way.
func TestDynamicsTokenRenewed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.auth.mu.Lock()
	f.auth.expiresIn = 30
	f.auth.mu.Unlock()
	res := f.Do(t, "POST", f.base+"/dynamics", `{"tenant_id":"`+dynamicsTenant+`","client_id":"`+dynamicsClient+
		`","client_secret":"`+dynamicsSecret+`","environment_url":"https://acme.crm4.dynamics.com"}`)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	first := f.provider.built[len(f.provider.built)-1].AccessToken
	c, err := f.svc.client(t.Context(), f.bot, res.JSON["id"].(string))
	require.NoError(t, err)
	creds := c.(*fakeClient).creds
	assert.NotEqual(t, first, creds.AccessToken)
	assert.True(t, strings.HasPrefix(creds.AccessToken, "dyn-at-"))
	assert.Equal(t, dynamicsSecret, creds.ClientSecret)
	assert.Equal(t, "https://acme.crm4.dynamics.com", creds.InstanceURL)
}
