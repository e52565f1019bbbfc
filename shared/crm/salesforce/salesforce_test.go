package salesforce_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/salesforce"
	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	fake "github.com/botplatform/api/tests/fakes/crm/salesforce"
)

func oauthConfig(f *fake.Server) *oauth2.Config {
	return &oauth2.Config{ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, RedirectURL: fake.RedirectURI,
		Endpoint: salesforce.Endpoint(f.URL()), Scopes: salesforce.Scopes()}
}

func newClient(t *testing.T, f *fake.Server) (*salesforce.Client, string) {
	t.Helper()
	access, refresh := f.IssueToken()
	c, err := salesforce.New(salesforce.Config{AllowPrivate: true, LimitWait: time.Second},
		crm.Credentials{AccessToken: access, RefreshToken: refresh, InstanceURL: f.URL()})
	require.NoError(t, err)
	return c, refresh
}

func TestOAuthCodeFlowWithPKCE(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	cfg := oauthConfig(f)
	ctx := t.Context()
	verifier := oauth2.GenerateVerifier()
	got, err := crmfake.Consent(cfg.AuthCodeURL("st-1", oauth2.S256ChallengeOption(verifier)))
	require.NoError(t, err)
	assert.Equal(t, "st-1", got.Get("state"))

	_, err = cfg.Exchange(ctx, got.Get("code"))
	require.Error(t, err, "without the verifier")
	tok, err := cfg.Exchange(ctx, got.Get("code"), oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	assert.True(t, tok.Expiry.IsZero(), "Salesforce sends no expires_in")
	instance, err := salesforce.InstanceURL(tok, true)
	require.NoError(t, err)
	assert.Equal(t, f.URL(), instance)
	_, err = salesforce.InstanceURL(tok, false)
	assert.Error(t, err, "an http instance outside tests")

	_, err = cfg.Exchange(ctx, got.Get("code"), oauth2.VerifierOption(verifier))
	var re *oauth2.RetrieveError
	require.ErrorAs(t, err, &re, "a code is single use")
	assert.Equal(t, "invalid_grant", re.ErrorCode)

	other := *cfg
	other.RedirectURL = "https://attacker.example/cb"
	_, err = crmfake.Consent(other.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)))
	assert.Error(t, err, "an unregistered callback gets no redirect")
}

func TestRefreshAfterSessionEnds(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	ctx := t.Context()
	cfg := oauthConfig(f)
	c, refresh := newClient(t, f)
	_, err := c.Account(ctx)
	require.NoError(t, err)
	f.ExpireAccessTokens()
	_, err = c.Account(ctx)
	require.ErrorIs(t, err, crm.ErrUnauthorized)

	// The family refreshes (a token source over an expired token) and the new session works;
	// the refresh answer names the instance again.
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: refresh, Expiry: time.Now().Add(-time.Second)}).Token()
	require.NoError(t, err)
	instance, err := salesforce.InstanceURL(tok, true)
	require.NoError(t, err)
	c2, err := salesforce.New(salesforce.Config{AllowPrivate: true, Token: oauth2.StaticTokenSource(tok)}, crm.Credentials{InstanceURL: instance})
	require.NoError(t, err)
	acct, err := c2.Account(ctx)
	require.NoError(t, err)
	assert.Equal(t, crm.Account{ID: fake.OrgID, Name: fake.OrgName, User: fake.Username}, acct)

	require.NoError(t, c.Revoke(ctx))
	assert.False(t, f.RefreshTokenValid(refresh))
	_, err = c2.Account(ctx)
	assert.ErrorIs(t, err, crm.ErrUnauthorized, "revoking the refresh token ends its sessions")
	assert.NoError(t, c.Revoke(ctx), "revoking twice is done")
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	objs, err := c.Objects(ctx)
	require.NoError(t, err)
	assert.Equal(t, "Contact", objs[0].Name)

	fields, err := c.Fields(ctx, "Contact")
	require.NoError(t, err)
	by := map[string]crm.Field{}
	for _, fl := range fields {
		by[fl.Name] = fl
	}
	assert.Equal(t, crm.TypeEmail, by["Email"].Type)
	assert.Equal(t, crm.TypePhone, by["Phone"].Type)
	assert.Equal(t, crm.TypeDate, by["Birthdate"].Type)
	assert.Equal(t, crm.TypeBool, by["HasOptedOutOfEmail"].Type)
	assert.Equal(t, crm.TypeNumber, by["Bot_Conversations__c"].Type)
	assert.Equal(t, crm.TypeDateTime, by["SystemModstamp"].Type)
	assert.True(t, by["SystemModstamp"].ReadOnly)
	assert.True(t, by["LastName"].Required)
	assert.Equal(t, crm.TypeEnum, by["LeadSource"].Type)
	assert.Equal(t, []string{"Web", "Phone Inquiry", "Chat"}, by["LeadSource"].Options, "active values only")
	_, err = c.Fields(ctx, "Case")
	assert.ErrorIs(t, err, crm.ErrNotFound)

	pipes, err := c.Pipelines(ctx)
	require.NoError(t, err)
	require.Len(t, pipes, 1)
	assert.Equal(t, []crm.Stage{{ID: "Prospecting", Label: "Prospecting"}, {ID: "Qualification", Label: "Qualification"},
		{ID: "Closed Won", Label: "Closed Won"}}, pipes[0].Stages)
}

func TestUpsertGetFind(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	props := map[string]any{"FirstName": "Ada", "Bot_Conversations__c": 2.0, "HasOptedOutOfEmail": false}
	r1, err := c.Upsert(ctx, "Contact", "Email", "ada@example.com", props)
	require.NoError(t, err)
	r2, err := c.Upsert(ctx, "Contact", "Email", "ada@example.com", props)
	require.NoError(t, err)
	assert.Equal(t, r1.ID, r2.ID)
	require.Equal(t, 1, f.Count("Contact"), "the same upsert twice leaves one record")
	stored, _ := f.Record("Contact", r1.ID)
	assert.Equal(t, "[not provided]", stored.Props["LastName"], "Salesforce requires a last name")
	assert.Equal(t, "Ada", r2.Properties["FirstName"])
	assert.Equal(t, 2.0, r2.Properties["Bot_Conversations__c"])
	assert.False(t, r2.UpdatedAt.IsZero())

	got, err := c.Get(ctx, "Contact", r1.ID, []string{"Email", "Phone"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"Id": r1.ID, "SystemModstamp": got.Properties["SystemModstamp"], "Email": "ada@example.com", "Phone": nil}, got.Properties)

	// A quote in the value cannot break out of the SOQL literal.
	tricky := "o'hara@example.com"
	r3, err := c.Upsert(ctx, "Contact", "Email", tricky, map[string]any{"LastName": "O'Hara"})
	require.NoError(t, err)
	found, err := c.Find(ctx, "Contact", "Email", tricky, []string{"LastName"})
	require.NoError(t, err)
	assert.Equal(t, r3.ID, found.ID)
	assert.Equal(t, "O'Hara", found.Properties["LastName"])
	_, err = c.Find(ctx, "Contact", "Email", "x' OR Email != 'y", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)

	_, err = c.Get(ctx, "Contact", "003000000000000AAA", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Find(ctx, "Contact", "Email = 'a' OR Id", "x", nil)
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe, "field names are checked before they reach SOQL")

	_, err = c.Upsert(ctx, "Contact", "Email", "bad@example.com", map[string]any{"LeadSource": "Fax"})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	_, err = c.Upsert(ctx, "Contact", "Email", "bad@example.com", map[string]any{"Nope__c": "x"})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "INVALID_FIELD", pe.Code)
}

func TestChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now })
	var ids []string
	for i := range 450 {
		ids = append(ids, f.Create("Contact", map[string]any{"LastName": fmt.Sprint("L", i), "Email": fmt.Sprintf("c%d@example.com", i)}))
	}
	require.True(t, f.Change("Contact", ids[0], map[string]any{"FirstName": "Changed"}))
	var got []crm.Record
	cursor, pages := "", 0
	for {
		recs, next, err := c.ChangedSince(t.Context(), "Contact", base.Add(101*time.Second), []string{"Email", "FirstName"}, cursor)
		require.NoError(t, err)
		got = append(got, recs...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, got, 351)
	assert.Equal(t, 2, pages, "batches of 200")
	assert.Equal(t, ids[0], got[350].ID)
	assert.Equal(t, "Changed", got[350].Properties["FirstName"])
	_, _, err := c.ChangedSince(t.Context(), "Contact", base, nil, "https://evil.example/query/x-1")
	var pe *crm.ProviderError
	assert.ErrorAs(t, err, &pe, "a cursor cannot point elsewhere")
}

func TestAddNote(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	r, err := c.Upsert(t.Context(), "Contact", "Email", "n@example.com", nil)
	require.NoError(t, err)
	require.NoError(t, c.AddNote(t.Context(), "Contact", r.ID, "Chat on 2026-03-01\nUser: hi\nBot: hello"))
	notes := f.Records("Note")
	require.Len(t, notes, 1)
	assert.Equal(t, map[string]any{"ParentId": r.ID, "Title": "Chat on 2026-03-01", "Body": "Chat on 2026-03-01\nUser: hi\nBot: hello"}, notes[0].Props)
	var pe *crm.ProviderError
	assert.ErrorAs(t, c.AddNote(t.Context(), "Contact", "003000000000000AAA", "x"), &pe, "no such parent")
}

func TestErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	f.SetRateLimit(1, time.Minute)
	_, err := c.Pipelines(ctx)
	require.NoError(t, err)
	_, err = c.Pipelines(ctx)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl, "403 REQUEST_LIMIT_EXCEEDED")
	assert.Equal(t, time.Second, rl.RetryAfter, "Salesforce gives no hint: the configured wait")
	f.SetRateLimit(0, 0)

	f.FailNext(1, 503)
	_, err = c.Pipelines(ctx)
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, "SERVER_UNAVAILABLE", pe.Code)
	_, err = c.Pipelines(ctx)
	require.NoError(t, err)

	bad, err := salesforce.New(salesforce.Config{AllowPrivate: true}, crm.Credentials{AccessToken: "nope", InstanceURL: f.URL()})
	require.NoError(t, err)
	_, err = bad.Account(ctx)
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	_, err = salesforce.New(salesforce.Config{}, crm.Credentials{AccessToken: "a"})
	assert.Error(t, err, "an instance URL is required")
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	r, err := c.Upsert(ctx, "Contact", "Email", "upd@example.com", map[string]any{"FirstName": "Ada"})
	require.NoError(t, err)

	before := f.Requests()
	got, err := c.Update(ctx, "Contact", r.ID, map[string]any{"LastName": "Lovelace", "Bot_Conversations__c": 4.0})
	require.NoError(t, err)
	assert.Equal(t, before+2, f.Requests(), "a PATCH (204) and the read of the fields written; no query")
	assert.Equal(t, r.ID, got.ID)
	assert.Equal(t, map[string]any{"Id": r.ID, "SystemModstamp": got.Properties["SystemModstamp"], "LastName": "Lovelace",
		"Bot_Conversations__c": 4.0}, got.Properties)
	assert.False(t, got.UpdatedAt.IsZero())
	stored, _ := f.Record("Contact", r.ID)
	assert.Equal(t, "Ada", stored.Props["FirstName"])
	assert.Equal(t, "Lovelace", stored.Props["LastName"])
	assert.Equal(t, 1, f.Count("Contact"))

	before = f.Requests()
	got, err = c.Update(ctx, "Contact", r.ID, nil)
	require.NoError(t, err)
	assert.Equal(t, before+1, f.Requests(), "nothing to write: the read alone")
	assert.Equal(t, r.ID, got.ID)

	// Upsert updates through the same path: the query, the PATCH and the read.
	before = f.Requests()
	_, err = c.Upsert(ctx, "Contact", "Email", "upd@example.com", map[string]any{"FirstName": "Augusta"})
	require.NoError(t, err)
	assert.Equal(t, before+3, f.Requests())

	// Deleted on the CRM side (or merged away): ENTITY_IS_DELETED is not found, and the
	// PATCH is the only request.
	require.True(t, f.Delete("Contact", r.ID))
	before = f.Requests()
	_, err = c.Update(ctx, "Contact", r.ID, map[string]any{"FirstName": "Ada"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Contains(t, err.Error(), "ENTITY_IS_DELETED")
	assert.Equal(t, before+1, f.Requests())
	_, err = c.Update(ctx, "Contact", "003000000000000AAA", map[string]any{"FirstName": "Ada"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Equal(t, 0, f.Count("Contact"), "an update never creates")
	before = f.Requests()
	for _, id := range []string{"", "003000000000000AAA/../x", "003000000000000" + "A?b"} {
		_, err = c.Update(ctx, "Contact", id, nil)
		require.ErrorIs(t, err, crm.ErrNotFound, id)
	}
	assert.Equal(t, before, f.Requests(), "an id that is not a Salesforce id reaches no URL")

	o, err := c.Upsert(ctx, "Contact", "Email", "o@example.com", nil)
	require.NoError(t, err)
	var pe *crm.ProviderError
	_, err = c.Update(ctx, "Contact", o.ID, map[string]any{"Nope__c": "x"})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "INVALID_FIELD", pe.Code)
	_, err = c.Update(ctx, "Case", o.ID, nil)
	assert.ErrorIs(t, err, crm.ErrNotFound, "an object the client does not write")
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	r, err := c.Upsert(ctx, "Contact", "Email", "rl@example.com", nil)
	require.NoError(t, err)

	f.SetRateLimit(2, time.Minute)
	_, err = c.Update(ctx, "Contact", r.ID, map[string]any{"FirstName": "A"})
	require.NoError(t, err)
	_, err = c.Update(ctx, "Contact", r.ID, map[string]any{"FirstName": "B"})
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl, "403 REQUEST_LIMIT_EXCEEDED")
	assert.Equal(t, time.Second, rl.RetryAfter)
	f.SetRateLimit(0, 0)
	stored, _ := f.Record("Contact", r.ID)
	assert.Equal(t, "A", stored.Props["FirstName"], "the refused update wrote nothing")

	f.ExpireAccessTokens()
	_, err = c.Update(ctx, "Contact", r.ID, map[string]any{"FirstName": "C"})
	assert.ErrorIs(t, err, crm.ErrUnauthorized, "INVALID_SESSION_ID")
	stored, _ = f.Record("Contact", r.ID)
	assert.Equal(t, "A", stored.Props["FirstName"])
}
