package hubspot_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/hubspot"
	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	fake "github.com/botplatform/api/tests/fakes/crm/hubspot"
)

func oauthConfig(f *fake.Server) *oauth2.Config {
	return &oauth2.Config{ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, RedirectURL: fake.RedirectURI,
		Endpoint: hubspot.Endpoint(f.URL(), f.URL()), Scopes: hubspot.Scopes()}
}

// newClient returns a client with a token issued by the fake, without the code flow.
func newClient(t *testing.T, f *fake.Server) (*hubspot.Client, string) {
	t.Helper()
	access, refresh := f.IssueToken()
	c, err := hubspot.New(hubspot.Config{BaseURL: f.URL(), AllowPrivate: true},
		crm.Credentials{AccessToken: access, RefreshToken: refresh})
	require.NoError(t, err)
	return c, refresh
}

func TestOAuthCodeFlowWithPKCE(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	cfg := oauthConfig(f)
	ctx := t.Context()

	verifier := oauth2.GenerateVerifier()
	got, err := crmfake.Consent(cfg.AuthCodeURL("state-123", oauth2.S256ChallengeOption(verifier)))
	require.NoError(t, err)
	require.Equal(t, "state-123", got.Get("state"), "the state comes back as sent")
	code := got.Get("code")
	require.NotEmpty(t, code)

	wrong := oauth2.GenerateVerifier()
	_, err = cfg.Exchange(ctx, code, oauth2.VerifierOption(wrong))
	var re *oauth2.RetrieveError
	require.ErrorAs(t, err, &re, "a verifier that does not match the challenge is refused")
	assert.Equal(t, http.StatusBadRequest, re.Response.StatusCode)

	// A refused exchange does not spend the code: the right verifier still works.
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	assert.NotEmpty(t, tok.AccessToken)
	assert.NotEmpty(t, tok.RefreshToken)
	assert.WithinDuration(t, time.Now().Add(fake.AccessTTL), tok.Expiry, time.Minute)

	_, err = cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	require.ErrorAs(t, err, &re, "a code is single use")
	assert.Contains(t, string(re.Body), "BAD_AUTH_CODE")

	c, err := hubspot.New(hubspot.Config{BaseURL: f.URL(), AllowPrivate: true, Token: cfg.TokenSource(ctx, tok)}, crm.Credentials{})
	require.NoError(t, err)
	_, err = c.Account(ctx)
	assert.ErrorIs(t, err, crm.ErrUnauthorized, "reusing a code revokes the tokens it issued (RFC 6749 4.1.2)")
}

func TestAuthorizeChecks(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	cfg := oauthConfig(f)
	verifier := oauth2.GenerateVerifier()

	other := *cfg
	other.RedirectURL = "https://attacker.example/callback"
	_, err := crmfake.Consent(other.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)))
	require.Error(t, err, "a redirect_uri other than the registered one gets no redirect")

	other = *cfg
	other.ClientID = "unknown"
	_, err = crmfake.Consent(other.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)))
	require.Error(t, err)

	got, err := crmfake.Consent(cfg.AuthCodeURL("s"))
	require.NoError(t, err)
	assert.Equal(t, "invalid_request", got.Get("error"), "PKCE is required")
	assert.Equal(t, "s", got.Get("state"))
	assert.Empty(t, got.Get("code"))

	// A code exchanged with another redirect_uri is refused.
	got, err = crmfake.Consent(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)))
	require.NoError(t, err)
	other = *cfg
	other.RedirectURL = RedirectElsewhere
	_, err = other.Exchange(t.Context(), got.Get("code"), oauth2.VerifierOption(verifier))
	require.Error(t, err)
	other = *cfg
	other.ClientSecret = "wrong"
	_, err = other.Exchange(t.Context(), got.Get("code"), oauth2.VerifierOption(verifier))
	require.Error(t, err, "a wrong client secret is refused")
	_, err = cfg.Exchange(t.Context(), got.Get("code"), oauth2.VerifierOption(verifier))
	require.NoError(t, err, "refused exchanges did not spend the code")
}

// RedirectElsewhere is a redirect URI the app did not register.
const RedirectElsewhere = "https://api.example.test/other"

func TestRefreshAndExpiry(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	ctx := t.Context()
	c, refresh := newClient(t, f)
	_, err := c.Account(ctx)
	require.NoError(t, err)

	f.ExpireAccessTokens()
	_, err = c.Account(ctx)
	require.ErrorIs(t, err, crm.ErrUnauthorized, "an expired access token is refused")

	// The family's token source refreshes a token it knows expired.
	src := oauthConfig(f).TokenSource(ctx, &oauth2.Token{RefreshToken: refresh, Expiry: time.Now().Add(-time.Minute)})
	c2, err := hubspot.New(hubspot.Config{BaseURL: f.URL(), AllowPrivate: true, Token: src}, crm.Credentials{})
	require.NoError(t, err)
	before := f.TokenRequests()
	acct, err := c2.Account(ctx)
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprint(fake.PortalID), acct.ID)
	assert.Equal(t, before+1, f.TokenRequests(), "one refresh")

	// A revoked refresh token fails the refresh as rejected credentials.
	require.NoError(t, c2.Revoke(ctx))
	assert.False(t, f.RefreshTokenValid(refresh))
	src = oauthConfig(f).TokenSource(ctx, &oauth2.Token{RefreshToken: refresh, Expiry: time.Now().Add(-time.Minute)})
	c3, err := hubspot.New(hubspot.Config{BaseURL: f.URL(), AllowPrivate: true, Token: src}, crm.Credentials{})
	require.NoError(t, err)
	_, err = c3.Account(ctx)
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	assert.NotContains(t, err.Error(), refresh)
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, refresh := newClient(t, f)
	require.NoError(t, c.Revoke(t.Context()))
	assert.False(t, f.RefreshTokenValid(refresh))
	assert.NoError(t, c.Revoke(t.Context()), "revoking twice is done")
	_, err := c.Account(t.Context())
	assert.ErrorIs(t, err, crm.ErrUnauthorized, "the access tokens of a revoked refresh token die with it")
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()

	acct, err := c.Account(ctx)
	require.NoError(t, err)
	assert.Equal(t, "62515", acct.ID)

	objs, err := c.Objects(ctx)
	require.NoError(t, err)
	assert.Equal(t, []crm.Object{{Name: "contacts", Label: "Contacts"}, {Name: "companies", Label: "Companies"}, {Name: "deals", Label: "Deals"}}, objs)

	fields, err := c.Fields(ctx, "contacts")
	require.NoError(t, err)
	byName := map[string]crm.Field{}
	for _, fl := range fields {
		byName[fl.Name] = fl
	}
	assert.Equal(t, crm.TypeEmail, byName["email"].Type)
	assert.Equal(t, crm.TypePhone, byName["phone"].Type)
	assert.Equal(t, crm.TypeBool, byName["bot_subscribed"].Type)
	assert.Equal(t, crm.TypeNumber, byName["bot_conversations"].Type)
	assert.Equal(t, crm.TypeDate, byName["date_of_birth"].Type)
	assert.Equal(t, crm.TypeDateTime, byName["createdate"].Type)
	assert.True(t, byName["createdate"].ReadOnly)
	assert.False(t, byName["email"].ReadOnly)
	assert.Equal(t, crm.TypeEnum, byName["lifecyclestage"].Type)
	assert.Contains(t, byName["lifecyclestage"].Options, "customer")

	_, err = c.Fields(ctx, "tickets")
	assert.ErrorIs(t, err, crm.ErrNotFound)

	pipes, err := c.Pipelines(ctx)
	require.NoError(t, err)
	require.Len(t, pipes, 1)
	assert.Equal(t, "default", pipes[0].ID)
	assert.Equal(t, []crm.Stage{{ID: "appointmentscheduled", Label: "Appointment Scheduled"}, {ID: "qualifiedtobuy", Label: "Qualified To Buy"},
		{ID: "closedwon", Label: "Closed Won"}, {ID: "closedlost", Label: "Closed Lost"}}, pipes[0].Stages, "in display order")
}

func TestUpsertGetFind(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()

	props := map[string]any{"firstname": "Ada", "bot_subscribed": true, "bot_conversations": 3.0}
	r1, err := c.Upsert(ctx, "contacts", "email", "ada@example.com", props)
	require.NoError(t, err)
	r2, err := c.Upsert(ctx, "contacts", "email", "ada@example.com", props)
	require.NoError(t, err)
	assert.Equal(t, r1.ID, r2.ID)
	require.Equal(t, 1, f.Count("contacts"), "the same upsert twice leaves one record")
	stored, _ := f.Record("contacts", r1.ID)
	assert.Equal(t, map[string]any{"email": "ada@example.com", "firstname": "Ada", "bot_subscribed": "true", "bot_conversations": "3"}, stored.Props)

	r3, err := c.Upsert(ctx, "contacts", "email", "ada@example.com", map[string]any{"lastname": "Lovelace"})
	require.NoError(t, err)
	assert.Equal(t, r1.ID, r3.ID)
	assert.Equal(t, "Lovelace", r3.Properties["lastname"])

	got, err := c.Get(ctx, "contacts", r1.ID, []string{"email", "firstname", "lastname", "phone"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"email": "ada@example.com", "firstname": "Ada", "lastname": "Lovelace", "phone": nil}, got.Properties)
	assert.False(t, got.UpdatedAt.IsZero())

	found, err := c.Find(ctx, "contacts", "email", "ADA@example.com", []string{"firstname"})
	require.NoError(t, err)
	assert.Equal(t, r1.ID, found.ID)
	_, err = c.Find(ctx, "contacts", "email", "nobody@example.com", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Get(ctx, "contacts", "999999", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)

	// Deals have no unique property: search, then create or update.
	d1, err := c.Upsert(ctx, "deals", "dealname", "Chat lead 42", map[string]any{"amount": 1500.5, "dealstage": "qualifiedtobuy"})
	require.NoError(t, err)
	d2, err := c.Upsert(ctx, "deals", "dealname", "Chat lead 42", map[string]any{"amount": 1600.0, "dealstage": "qualifiedtobuy"})
	require.NoError(t, err)
	assert.Equal(t, d1.ID, d2.ID)
	assert.Equal(t, 1, f.Count("deals"))
	stored, _ = f.Record("deals", d1.ID)
	assert.Equal(t, "1600", stored.Props["amount"])

	_, err = c.Upsert(ctx, "contacts", "email", "x@example.com", map[string]any{"no_such_property": "1"})
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	assert.Equal(t, "VALIDATION_ERROR", pe.Code)
	assert.Contains(t, pe.Message, "PROPERTY_DOESNT_EXIST")
	assert.False(t, pe.Temporary)

	_, err = c.Upsert(ctx, "contacts", "email", "x@example.com", map[string]any{"bad name": "1"})
	require.ErrorAs(t, err, &pe, "property names are checked before they reach a URL or body")
}

func TestConcurrentUpserts(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			_, err := c.Upsert(t.Context(), "contacts", "email", fmt.Sprintf("u%d@example.com", i%4), map[string]any{"firstname": "U"})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	assert.Equal(t, 4, f.Count("contacts"), "batch upsert keys on the email")
}

func TestChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now })

	var ids []string
	for i := range 250 {
		ids = append(ids, f.Create("contacts", map[string]string{"email": fmt.Sprintf("c%d@example.com", i)}))
	}
	// Changed on the CRM side: the first contact moves to the end.
	require.True(t, f.Change("contacts", ids[0], map[string]string{"firstname": "Changed"}))

	var got []crm.Record
	cursor := ""
	pages := 0
	for {
		recs, next, err := c.ChangedSince(ctx, "contacts", base.Add(101*time.Millisecond), []string{"email", "firstname"}, cursor)
		require.NoError(t, err)
		got = append(got, recs...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, got, 151, "records 100..249 and the changed first one")
	assert.Equal(t, 2, pages)
	for i := 1; i < len(got); i++ {
		assert.False(t, got[i].UpdatedAt.Before(got[i-1].UpdatedAt), "oldest first")
	}
	last := got[len(got)-1]
	assert.Equal(t, ids[0], last.ID)
	assert.Equal(t, "Changed", last.Properties["firstname"])

	_, _, err := c.ChangedSince(ctx, "contacts", base, nil, "garbage")
	var pe *crm.ProviderError
	assert.ErrorAs(t, err, &pe)
}

// TestChangedSinceBeyondSearchWindow: HubSpot pages a search up to 10,000 results; the
// client starts a new search from the last time it saw and misses nothing.
func TestChangedSinceBeyondSearchWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("10,100 records")
	}
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now })
	const n = fake.SearchWindow + 100
	for i := range n {
		f.Create("deals", map[string]string{"dealname": fmt.Sprint(i)})
	}
	seen := map[string]bool{}
	cursor := ""
	for {
		recs, next, err := c.ChangedSince(t.Context(), "deals", base, nil, cursor)
		require.NoError(t, err)
		for _, r := range recs {
			seen[r.ID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Len(t, seen, n)
}

func TestAddNote(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	r, err := c.Upsert(ctx, "contacts", "email", "note@example.com", nil)
	require.NoError(t, err)
	require.NoError(t, c.AddNote(ctx, "contacts", r.ID, "User: <hi>\nBot: hello"))
	notes := f.Notes()
	require.Len(t, notes, 1)
	assert.Equal(t, fake.Note{ID: notes[0].ID, Body: "User: &lt;hi&gt;<br>Bot: hello", Object: "contacts", RecordID: r.ID}, notes[0])

	err = c.AddNote(ctx, "contacts", "424242", "x")
	var pe *crm.ProviderError
	assert.ErrorAs(t, err, &pe, "a note to a missing record is refused")
}

func TestErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()

	f.SetRateLimit(2, 3*time.Second)
	for range 2 {
		_, err := c.Account(ctx)
		require.NoError(t, err)
	}
	_, err := c.Account(ctx)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 3*time.Second, rl.RetryAfter, "the policy's interval")
	assert.Equal(t, 1, f.Limited())
	f.SetRateLimit(0, 0)

	f.FailNext(1, 500)
	_, err = c.Pipelines(ctx)
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, 500, pe.Status)
	_, err = c.Pipelines(ctx)
	require.NoError(t, err, "the failure happens once")

	f.FailNext(1, 502)
	_, err = c.Pipelines(ctx)
	require.ErrorAs(t, err, &pe, "the proxy's HTML page")
	assert.True(t, pe.Temporary)

	bad, err := hubspot.New(hubspot.Config{BaseURL: f.URL(), AllowPrivate: true}, crm.Credentials{AccessToken: "not-a-token"})
	require.NoError(t, err)
	_, err = bad.Account(ctx)
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "not-a-token")
}

func TestTransportErrorHasNoSecret(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	_, refresh := f.IssueToken()
	// A server that is gone: the error must name neither the token nor the URL holding it.
	dead := "http://127.0.0.1:1"
	c, err := hubspot.New(hubspot.Config{BaseURL: dead, AllowPrivate: true}, crm.Credentials{AccessToken: "secret-access", RefreshToken: refresh})
	require.NoError(t, err)
	err = c.Revoke(t.Context())
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.NotContains(t, err.Error(), refresh)
	assert.NotContains(t, err.Error(), "refresh-tokens")

	_, err = hubspot.New(hubspot.Config{BaseURL: "https://u:p@x.example"}, crm.Credentials{AccessToken: "a"})
	assert.Error(t, err)
	c, err = hubspot.New(hubspot.Config{BaseURL: f.URL()}, crm.Credentials{AccessToken: "a"})
	require.NoError(t, err)
	_, err = c.Account(t.Context())
	require.Error(t, err, "outside tests only public addresses are reached")
	assert.False(t, errors.Is(err, crm.ErrUnauthorized))
	assert.True(t, strings.Contains(err.Error(), "public"), err.Error())
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	r, err := c.Upsert(ctx, "contacts", "email", "upd@example.com", map[string]any{"firstname": "Ada"})
	require.NoError(t, err)

	before := f.Requests()
	got, err := c.Update(ctx, "contacts", r.ID, map[string]any{"lastname": "Lovelace", "bot_conversations": 4.0})
	require.NoError(t, err)
	assert.Equal(t, before+1, f.Requests(), "one PATCH, no search")
	assert.Equal(t, r.ID, got.ID)
	assert.Equal(t, "Lovelace", got.Properties["lastname"])
	assert.False(t, got.UpdatedAt.IsZero())
	stored, _ := f.Record("contacts", r.ID)
	assert.Equal(t, map[string]any{"email": "upd@example.com", "firstname": "Ada", "lastname": "Lovelace", "bot_conversations": "4"}, stored.Props)
	assert.Equal(t, 1, f.Count("contacts"))

	// Deals have no unique key: Upsert searches, then updates through the same PATCH.
	d, err := c.Upsert(ctx, "deals", "dealname", "Chat lead 7", map[string]any{"amount": 10.0})
	require.NoError(t, err)
	before = f.Requests()
	_, err = c.Upsert(ctx, "deals", "dealname", "Chat lead 7", map[string]any{"amount": 20.0})
	require.NoError(t, err)
	assert.Equal(t, before+2, f.Requests(), "Upsert: a search and a PATCH")
	got, err = c.Update(ctx, "deals", d.ID, map[string]any{"amount": 30.0})
	require.NoError(t, err)
	assert.Equal(t, "30", got.Properties["amount"])
	assert.Equal(t, 1, f.Count("deals"))

	// A record archived on the CRM side, an id never seen: not found, and nothing created.
	require.True(t, f.Archive("contacts", r.ID))
	_, err = c.Update(ctx, "contacts", r.ID, map[string]any{"firstname": "Ada"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Update(ctx, "contacts", "999999", map[string]any{"firstname": "Ada"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Equal(t, 0, f.Count("contacts"), "an update never creates")
	before = f.Requests()
	for _, id := range []string{"", "12/../34", "1?x=1"} {
		_, err = c.Update(ctx, "contacts", id, nil)
		require.ErrorIs(t, err, crm.ErrNotFound, id)
	}
	assert.Equal(t, before, f.Requests(), "an id that is not a HubSpot id reaches no URL")

	// Another contact's email is refused, as HubSpot refuses it.
	a, err := c.Upsert(ctx, "contacts", "email", "a@example.com", nil)
	require.NoError(t, err)
	b, err := c.Upsert(ctx, "contacts", "email", "b@example.com", nil)
	require.NoError(t, err)
	_, err = c.Update(ctx, "contacts", b.ID, map[string]any{"email": "a@example.com"})
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 409, pe.Status)
	stored, _ = f.Record("contacts", a.ID)
	assert.Equal(t, "a@example.com", stored.Props["email"])

	_, err = c.Update(ctx, "contacts", a.ID, map[string]any{"no_such_property": "1"})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	_, err = c.Update(ctx, "tickets", a.ID, nil)
	assert.ErrorIs(t, err, crm.ErrNotFound, "an object the client does not write")
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	r, err := c.Upsert(ctx, "contacts", "email", "rl@example.com", nil)
	require.NoError(t, err)

	f.SetRateLimit(1, time.Minute)
	_, err = c.Update(ctx, "contacts", r.ID, map[string]any{"firstname": "A"})
	require.NoError(t, err)
	_, err = c.Update(ctx, "contacts", r.ID, map[string]any{"firstname": "B"})
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, time.Minute, rl.RetryAfter, "the policy's interval")
	f.SetRateLimit(0, 0)
	stored, _ := f.Record("contacts", r.ID)
	assert.Equal(t, "A", stored.Props["firstname"], "the refused update wrote nothing")

	f.ExpireAccessTokens()
	_, err = c.Update(ctx, "contacts", r.ID, map[string]any{"firstname": "C"})
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	bad, err := hubspot.New(hubspot.Config{BaseURL: f.URL(), AllowPrivate: true}, crm.Credentials{AccessToken: "not-a-token"})
	require.NoError(t, err)
	_, err = bad.Update(ctx, "contacts", r.ID, map[string]any{"firstname": "C"})
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "not-a-token")
	stored, _ = f.Record("contacts", r.ID)
	assert.Equal(t, "A", stored.Props["firstname"])
}

// tickingClock makes the fake's clock advance a millisecond on every read, so that every
// write has its own modification time.
func tickingClock(f *fake.Server, base time.Time) {
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Millisecond); return now })
}

// renewals is a second pipeline, with HubSpot's numeric ids of custom pipelines and stages.
var renewals = fake.Pipeline{ID: "7654321", Label: "Renewals", Stages: []fake.Stage{
	{ID: "1111", Label: "Due", Probability: 0.5},
	{ID: "2222", Label: "Renewed", Probability: 1, Closed: true},
}}

func TestOpenDeal(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddPipeline(renewals)
	c, _ := newClient(t, f)
	ctx := t.Context()
	contact, err := c.Upsert(ctx, "contacts", "email", "deal@example.com", nil)
	require.NoError(t, err)
	in := crm.DealInput{Pipeline: "default", Stage: "appointmentscheduled", Name: "Chat lead"}

	d1, created, err := c.OpenDeal(ctx, "contacts", contact.ID, in)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, "Chat lead", d1.Name)
	assert.Equal(t, "default", d1.Pipeline)
	assert.Equal(t, "appointmentscheduled", d1.Stage)
	assert.Equal(t, crm.DealOpen, d1.Status)
	assert.Nil(t, d1.Amount)
	assert.False(t, d1.UpdatedAt.IsZero())
	require.Equal(t, 1, f.Count("deals"))
	stored, ok := f.Record("deals", d1.ID)
	require.True(t, ok)
	assert.Equal(t, map[string]any{"dealname": "Chat lead", "pipeline": "default", "dealstage": "appointmentscheduled"}, stored.Props)
	assert.Equal(t, []string{contact.ID}, f.Associated(d1.ID, "contacts"), "associated with the contact on create")

	before := f.Requests()
	d2, created, err := c.OpenDeal(ctx, "contacts", contact.ID, in)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, d1.ID, d2.ID)
	assert.Equal(t, crm.DealOpen, d2.Status)
	assert.Equal(t, 1, f.Count("deals"), "the second call finds the first deal")
	assert.Equal(t, before+2, f.Requests(), "the associations and one batch read")

	// Closed won on the CRM side: no longer open, so the next call opens another.
	require.True(t, f.Change("deals", d1.ID, map[string]string{"dealstage": "closedwon"}))
	d3, created, err := c.OpenDeal(ctx, "contacts", contact.ID, in)
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, d1.ID, d3.ID)
	assert.Equal(t, 2, f.Count("deals"))

	// A lost deal and an open deal of another pipeline do not count as open in default.
	other, err := c.Upsert(ctx, "contacts", "email", "other@example.com", nil)
	require.NoError(t, err)
	lost := f.CreateDeal(other.ID, map[string]string{"dealname": "Lost", "pipeline": "default", "dealstage": "closedlost"})
	renewal := f.CreateDeal(other.ID, map[string]string{"dealname": "Renewal", "pipeline": renewals.ID, "dealstage": "1111"})
	d4, created, err := c.OpenDeal(ctx, "contacts", other.ID, in)
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotContains(t, []string{lost, renewal}, d4.ID)
	assert.Equal(t, 5, f.Count("deals"))
	// ... but the renewal is the open deal of its own pipeline.
	d5, created, err := c.OpenDeal(ctx, "contacts", other.ID, crm.DealInput{Pipeline: renewals.ID, Stage: "1111", Name: "x"})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, renewal, d5.ID)
	assert.Equal(t, "Renewal", d5.Name)
	assert.Equal(t, 5, f.Count("deals"))

	// Two open deals (made by hand in HubSpot): the lowest id, whichever changed last.
	third, err := c.Upsert(ctx, "contacts", "email", "third@example.com", nil)
	require.NoError(t, err)
	first := f.CreateDeal(third.ID, map[string]string{"dealname": "A", "pipeline": "default", "dealstage": "qualifiedtobuy"})
	second := f.CreateDeal(third.ID, map[string]string{"dealname": "B", "pipeline": "default", "dealstage": "appointmentscheduled"})
	require.True(t, f.Change("deals", second, map[string]string{"amount": "5"}))
	d6, created, err := c.OpenDeal(ctx, "contacts", third.ID, in)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, first, d6.ID)
	assert.Equal(t, "qualifiedtobuy", d6.Stage)
}

func TestOpenDealErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddPipeline(renewals)
	c, _ := newClient(t, f)
	ctx := t.Context()
	contact, err := c.Upsert(ctx, "contacts", "email", "err@example.com", nil)
	require.NoError(t, err)

	_, _, err = c.OpenDeal(ctx, "contacts", "999999", crm.DealInput{Pipeline: "default", Stage: "appointmentscheduled", Name: "x"})
	require.ErrorIs(t, err, crm.ErrNotFound, "a contact HubSpot does not have")
	assert.Equal(t, 0, f.Count("deals"))

	var pe *crm.ProviderError
	_, _, err = c.OpenDeal(ctx, "contacts", contact.ID, crm.DealInput{Pipeline: "default", Stage: "nope", Name: "x"})
	require.ErrorAs(t, err, &pe, "an unknown stage")
	assert.Equal(t, 400, pe.Status)
	assert.Equal(t, "VALIDATION_ERROR", pe.Code)
	assert.Contains(t, pe.Message, "dealstage")
	assert.False(t, pe.Temporary)
	_, _, err = c.OpenDeal(ctx, "contacts", contact.ID, crm.DealInput{Pipeline: "default", Stage: "1111", Name: "x"})
	require.ErrorAs(t, err, &pe, "a stage of another pipeline")
	assert.Equal(t, 400, pe.Status)
	assert.Contains(t, pe.Message, "INVALID_OPTION")
	_, _, err = c.OpenDeal(ctx, "contacts", contact.ID, crm.DealInput{Pipeline: "nope", Stage: "appointmentscheduled", Name: "x"})
	require.ErrorAs(t, err, &pe, "an unknown pipeline")
	assert.Equal(t, 400, pe.Status)
	assert.Equal(t, 0, f.Count("deals"))

	before := f.Requests()
	for _, id := range []string{"", "12/../34", "1?x=1"} {
		_, _, err = c.OpenDeal(ctx, "contacts", id, crm.DealInput{Pipeline: "default", Stage: "appointmentscheduled"})
		require.ErrorIs(t, err, crm.ErrNotFound, id)
		_, err = c.Deals(ctx, "contacts", id)
		require.ErrorIs(t, err, crm.ErrNotFound, id)
	}
	_, _, err = c.OpenDeal(ctx, "tickets", contact.ID, crm.DealInput{Pipeline: "default", Stage: "appointmentscheduled"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	_, _, err = c.OpenDeal(ctx, "contacts", contact.ID, crm.DealInput{Pipeline: "default"})
	require.ErrorAs(t, err, &pe, "no stage")
	assert.Equal(t, before, f.Requests(), "refused before any request")

	f.FailNext(1, 500)
	_, _, err = c.OpenDeal(ctx, "contacts", contact.ID, crm.DealInput{Pipeline: "default", Stage: "appointmentscheduled"})
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	f.SetRateLimit(1, time.Minute)
	_, _, err = c.OpenDeal(ctx, "contacts", contact.ID, crm.DealInput{Pipeline: "default", Stage: "appointmentscheduled"})
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl, "the associations pass, the batch read is limited")
	assert.Equal(t, time.Minute, rl.RetryAfter)
	f.SetRateLimit(0, 0)
	assert.Equal(t, 0, f.Count("deals"), "a refused call creates nothing")

	f.ExpireAccessTokens()
	_, err = c.Deals(ctx, "contacts", contact.ID)
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
}

func TestDeals(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	tickingClock(f, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c, _ := newClient(t, f)
	ctx := t.Context()
	contact, err := c.Upsert(ctx, "contacts", "email", "list@example.com", nil)
	require.NoError(t, err)
	other, err := c.Upsert(ctx, "contacts", "email", "someone@example.com", nil)
	require.NoError(t, err)

	open := f.CreateDeal(contact.ID, map[string]string{"dealname": "Open", "pipeline": "default", "dealstage": "qualifiedtobuy", "amount": "1500.5", "deal_currency_code": "EUR"})
	won := f.CreateDeal(contact.ID, map[string]string{"dealname": "Won", "pipeline": "default", "dealstage": "closedwon", "amount": "200"})
	lost := f.CreateDeal(contact.ID, map[string]string{"dealname": "Lost", "pipeline": "default", "dealstage": "closedlost"})
	f.CreateDeal(other.ID, map[string]string{"dealname": "Not hers", "pipeline": "default", "dealstage": "qualifiedtobuy"})
	require.True(t, f.Change("deals", open, map[string]string{"amount": "1600"}), "the open deal changed last")

	deals, err := c.Deals(ctx, "contacts", contact.ID)
	require.NoError(t, err)
	require.Len(t, deals, 3)
	assert.Equal(t, []string{open, lost, won}, []string{deals[0].ID, deals[1].ID, deals[2].ID}, "most recently changed first")
	assert.Equal(t, []string{crm.DealOpen, crm.DealLost, crm.DealWon}, []string{deals[0].Status, deals[1].Status, deals[2].Status})
	require.NotNil(t, deals[0].Amount)
	assert.Equal(t, 1600.0, *deals[0].Amount)
	assert.Equal(t, "EUR", deals[0].Currency)
	assert.Equal(t, "Open", deals[0].Name)
	assert.Equal(t, "qualifiedtobuy", deals[0].Stage)
	assert.Equal(t, "default", deals[0].Pipeline)
	assert.Nil(t, deals[1].Amount)
	assert.Empty(t, deals[1].Currency)
	require.NotNil(t, deals[2].Amount)
	assert.Equal(t, 200.0, *deals[2].Amount)
	stored, _ := f.Record("deals", open)
	assert.Equal(t, stored.Updated, deals[0].UpdatedAt, "HubSpot's hs_lastmodifieddate")

	// A deal archived on the CRM side loses its associations.
	require.True(t, f.Archive("deals", lost))
	deals, err = c.Deals(ctx, "contacts", contact.ID)
	require.NoError(t, err)
	assert.Len(t, deals, 2)

	none, err := c.Upsert(ctx, "contacts", "email", "none@example.com", nil)
	require.NoError(t, err)
	deals, err = c.Deals(ctx, "contacts", none.ID)
	require.NoError(t, err)
	assert.Equal(t, []crm.Deal{}, deals)
	_, err = c.Deals(ctx, "contacts", "999999")
	assert.ErrorIs(t, err, crm.ErrNotFound, "a contact HubSpot does not have")
}

func TestDealsAtMost100(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	tickingClock(f, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c, _ := newClient(t, f)
	ctx := t.Context()
	contact, err := c.Upsert(ctx, "contacts", "email", "many@example.com", nil)
	require.NoError(t, err)
	var ids []string
	for i := range 105 {
		ids = append(ids, f.CreateDeal(contact.ID, map[string]string{"dealname": fmt.Sprint(i), "dealstage": "appointmentscheduled"}))
	}
	before := f.Requests()
	deals, err := c.Deals(ctx, "contacts", contact.ID)
	require.NoError(t, err)
	assert.Equal(t, before+3, f.Requests(), "the associations, then two batch reads of at most 100")
	require.Len(t, deals, 100)
	assert.Equal(t, ids[104], deals[0].ID)
	assert.Equal(t, ids[5], deals[99].ID, "the 5 oldest are left out")
}

func TestDealsChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tickingClock(f, base)

	var ids []string
	for i := range 250 {
		ids = append(ids, f.Create("deals", map[string]string{"dealname": fmt.Sprint(i), "pipeline": "default",
			"dealstage": "appointmentscheduled", "amount": fmt.Sprint(i)}))
	}
	require.True(t, f.Change("deals", ids[0], map[string]string{"dealstage": "closedlost"}))

	since := base.Add(101 * time.Millisecond)
	var got []crm.Deal
	cursor := ""
	pages := 0
	for {
		deals, next, err := c.DealsChangedSince(ctx, since, cursor)
		require.NoError(t, err)
		got = append(got, deals...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, got, 151, "deals 100..249 and the changed first one")
	assert.Equal(t, 2, pages)
	assert.Equal(t, ids[100], got[0].ID)
	for i, d := range got {
		assert.False(t, d.UpdatedAt.Before(since), "changed since")
		if i > 0 {
			assert.False(t, d.UpdatedAt.Before(got[i-1].UpdatedAt), "oldest first")
		}
	}
	assert.Equal(t, crm.DealOpen, got[0].Status)
	require.NotNil(t, got[0].Amount)
	assert.Equal(t, 100.0, *got[0].Amount)
	last := got[len(got)-1]
	assert.Equal(t, ids[0], last.ID)
	assert.Equal(t, crm.DealLost, last.Status)
	assert.Equal(t, "closedlost", last.Stage)

	_, _, err := c.DealsChangedSince(ctx, base, "garbage")
	var pe *crm.ProviderError
	assert.ErrorAs(t, err, &pe)
}
