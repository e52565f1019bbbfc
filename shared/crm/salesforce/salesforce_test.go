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
	assert.Equal(t, "Opportunity", pipes[0].ID)
	assert.Equal(t, []crm.Stage{{ID: "Prospecting", Label: "Prospecting"}, {ID: "Qualification", Label: "Qualification"},
		{ID: "Closed Won", Label: "Closed Won"}, {ID: "Closed Lost", Label: "Closed Lost"}}, pipes[0].Stages, "active stages in order")
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

// steppingClock makes the fake's clock start at base and move a second at each reading, so
// that records' SystemModstamps are distinct and known.
func steppingClock(f *fake.Server, base time.Time) {
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now })
}

// addDeal creates an opportunity with a contact role for contact, as a Salesforce user would.
func addDeal(f *fake.Server, contact string, props map[string]any) string {
	props["CloseDate"] = "2026-06-30"
	id := f.Create("Opportunity", props)
	f.Create("OpportunityContactRole", map[string]any{"OpportunityId": id, "ContactId": contact, "IsPrimary": true})
	return id
}

func TestOpenDeal(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	access, _ := f.IssueToken()
	today := time.Date(2026, 3, 1, 22, 0, 0, 0, time.FixedZone("PST", -8*3600))
	c, err := salesforce.New(salesforce.Config{AllowPrivate: true, LimitWait: time.Second, Now: func() time.Time { return today }},
		crm.Credentials{AccessToken: access, InstanceURL: f.URL()})
	require.NoError(t, err)
	ctx := t.Context()
	contact := f.Create("Contact", map[string]any{"LastName": "Lovelace", "Email": "ada@example.com"})
	in := crm.DealInput{Pipeline: "Opportunity", Stage: "Prospecting", Name: "Ada Lovelace"}

	before := f.Requests()
	d1, created, err := c.OpenDeal(ctx, "Contact", contact, in)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, before+2, f.Requests(), "the contact's deals and one composite call")
	assert.Equal(t, "Ada Lovelace", d1.Name)
	assert.Equal(t, "Opportunity", d1.Pipeline)
	assert.Equal(t, "Prospecting", d1.Stage)
	assert.Equal(t, crm.DealOpen, d1.Status)
	assert.Nil(t, d1.Amount)
	assert.Empty(t, d1.Currency)
	stored, ok := f.Record("Opportunity", d1.ID)
	require.True(t, ok)
	assert.Equal(t, stored.Updated.Truncate(time.Millisecond), d1.UpdatedAt, "SystemModstamp")
	assert.Equal(t, map[string]any{"Name": "Ada Lovelace", "StageName": "Prospecting", "CloseDate": "2026-04-01"}, stored.Props,
		"CloseDate is 30 days after today in UTC")
	assert.Equal(t, []string{contact}, f.DealContacts(d1.ID))
	roles := f.Records("OpportunityContactRole")
	require.Len(t, roles, 1)
	assert.Equal(t, map[string]any{"OpportunityId": d1.ID, "ContactId": contact, "IsPrimary": true}, roles[0].Props)

	// A repeated call (a resumed job) finds the deal through the contact role: one query.
	before = f.Requests()
	d2, created, err := c.OpenDeal(ctx, "Contact", contact, in)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, d1, d2)
	assert.Equal(t, before+1, f.Requests())
	assert.Equal(t, 1, f.Count("Opportunity"), "one deal")

	// A won or a lost deal is not open: the next call opens another.
	require.True(t, f.Change("Opportunity", d1.ID, map[string]any{"StageName": "Closed Won"}))
	d3, created, err := c.OpenDeal(ctx, "Contact", contact, in)
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, d1.ID, d3.ID)
	require.True(t, f.Change("Opportunity", d3.ID, map[string]any{"StageName": "Closed Lost"}))
	d4, created, err := c.OpenDeal(ctx, "Contact", contact, in)
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotContains(t, []string{d1.ID, d3.ID}, d4.ID)
	assert.Equal(t, 3, f.Count("Opportunity"))

	// Another contact's open deal is not this contact's.
	other := f.Create("Contact", map[string]any{"LastName": "Byron"})
	_, created, err = c.OpenDeal(ctx, "Contact", other, in)
	require.NoError(t, err)
	assert.True(t, created, "the deals of %s are not %s's", contact, other)
	assert.Equal(t, 4, f.Count("Opportunity"))

	// A deal opened at a closed stage is read back as it is.
	third := f.Create("Contact", map[string]any{"LastName": "Somerville"})
	won, created, err := c.OpenDeal(ctx, "Contact", third, crm.DealInput{Pipeline: "Opportunity", Stage: "Closed Won", Name: "Mary"})
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, crm.DealWon, won.Status)
	assert.Equal(t, 5, f.Count("Opportunity"))
}

func TestOpenDealRefusals(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	contact := f.Create("Contact", map[string]any{"LastName": "Lovelace"})
	in := crm.DealInput{Pipeline: "Opportunity", Stage: "Prospecting", Name: "Ada"}

	// Salesforce has one pipeline: no other pipeline's deal can be open, and none is opened.
	before := f.Requests()
	_, _, err := c.OpenDeal(ctx, "Contact", contact, crm.DealInput{Pipeline: "Partners", Stage: "Prospecting", Name: "Ada"})
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "unknown_pipeline", pe.Code)
	assert.Equal(t, before, f.Requests())

	// An unknown contact: the opportunity the composite created is rolled back with its
	// role's failure.
	_, _, err = c.OpenDeal(ctx, "Contact", "003000000000000AAA", in)
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Contains(t, err.Error(), "INVALID_CROSS_REFERENCE_KEY")
	assert.Equal(t, 0, f.Count("Opportunity"), "allOrNone")
	assert.Equal(t, 0, f.Count("OpportunityContactRole"))
	gone := f.Create("Contact", map[string]any{"LastName": "Gone"})
	require.True(t, f.Delete("Contact", gone))
	_, _, err = c.OpenDeal(ctx, "Contact", gone, in)
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Contains(t, err.Error(), "ENTITY_IS_DELETED")
	_, _, err = c.OpenDeal(ctx, "Contact", "not an id", in)
	require.ErrorIs(t, err, crm.ErrNotFound)

	// A stage the org does not have, or no longer uses.
	for _, stage := range []string{"Negotiation", "Retired"} {
		_, _, err = c.OpenDeal(ctx, "Contact", contact, crm.DealInput{Pipeline: "Opportunity", Stage: stage, Name: "Ada"})
		require.ErrorAs(t, err, &pe, stage)
		assert.Equal(t, 400, pe.Status)
		assert.Equal(t, "INVALID_OR_NULL_FOR_RESTRICTED_PICKLIST", pe.Code)
		assert.False(t, pe.Temporary)
	}
	_, _, err = c.OpenDeal(ctx, "Contact", contact, crm.DealInput{Pipeline: "Opportunity", Stage: "Prospecting"})
	require.ErrorAs(t, err, &pe, "no name")
	assert.Equal(t, "REQUIRED_FIELD_MISSING", pe.Code)
	assert.Equal(t, 0, f.Count("Opportunity"))

	lead := f.Create("Lead", map[string]any{"LastName": "L", "Company": "C"})
	_, _, err = c.OpenDeal(ctx, "Lead", lead, in)
	require.ErrorAs(t, err, &pe, "contact roles name contacts only")
	assert.Equal(t, "unsupported_object", pe.Code)

	// The composite call goes through the traffic gate like any other.
	f.SetRateLimit(1, time.Minute)
	_, _, err = c.OpenDeal(ctx, "Contact", contact, in)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	f.SetRateLimit(0, 0)
	assert.Equal(t, 0, f.Count("Opportunity"))
	_, created, err := c.OpenDeal(ctx, "Contact", contact, in)
	require.NoError(t, err)
	assert.True(t, created)
}

func TestDeals(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	ctx := t.Context()
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	steppingClock(f, base)
	contact := f.Create("Contact", map[string]any{"LastName": "Lovelace"})                                      // +1s
	open := addDeal(f, contact, map[string]any{"Name": "Open", "StageName": "Qualification", "Amount": 1200.5}) // +2s
	won := addDeal(f, contact, map[string]any{"Name": "Won", "StageName": "Closed Won", "Amount": 5000.0})      // +4s
	lost := addDeal(f, contact, map[string]any{"Name": "Lost", "StageName": "Closed Lost"})                     // +6s
	other := f.Create("Contact", map[string]any{"LastName": "Byron"})                                           // +8s
	addDeal(f, other, map[string]any{"Name": "Byron's", "StageName": "Prospecting"})                            // +9s
	require.True(t, f.Change("Opportunity", open, map[string]any{"Amount": 1500.0}))                            // +11s

	before := f.Requests()
	deals, err := c.Deals(ctx, "Contact", contact)
	require.NoError(t, err)
	assert.Equal(t, before+1, f.Requests())
	amount := func(v float64) *float64 { return &v }
	assert.Equal(t, []crm.Deal{
		{ID: open, Name: "Open", Pipeline: "Opportunity", Stage: "Qualification", Status: crm.DealOpen, Amount: amount(1500), UpdatedAt: base.Add(11 * time.Second)},
		{ID: lost, Name: "Lost", Pipeline: "Opportunity", Stage: "Closed Lost", Status: crm.DealLost, UpdatedAt: base.Add(6 * time.Second)},
		{ID: won, Name: "Won", Pipeline: "Opportunity", Stage: "Closed Won", Status: crm.DealWon, Amount: amount(5000), UpdatedAt: base.Add(4 * time.Second)},
	}, deals, "most recently changed first")

	// OpenDeal picks the open one among them.
	d, created, err := c.OpenDeal(ctx, "Contact", contact, crm.DealInput{Pipeline: "Opportunity", Stage: "Prospecting", Name: "x"})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, deals[0], d)

	lonely := f.Create("Contact", map[string]any{"LastName": "Nobody"})
	before = f.Requests()
	deals, err = c.Deals(ctx, "Contact", lonely)
	require.NoError(t, err)
	assert.Empty(t, deals)
	assert.Equal(t, before+2, f.Requests(), "no deals: a read tells whether the contact exists")
	_, err = c.Deals(ctx, "Contact", "003000000000000AAA")
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Deals(ctx, "Case", contact)
	assert.ErrorIs(t, err, crm.ErrNotFound)
}

func TestDealsChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, _ := newClient(t, f)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	steppingClock(f, base)
	var ids []string
	for i := range 260 {
		ids = append(ids, f.Create("Opportunity", map[string]any{"Name": fmt.Sprint("D", i), "StageName": "Prospecting", "CloseDate": "2026-06-30"}))
	}
	require.True(t, f.Change("Opportunity", ids[0], map[string]any{"StageName": "Closed Lost"}))

	var got []crm.Deal
	cursor, pages := "", 0
	for {
		deals, next, err := c.DealsChangedSince(t.Context(), base.Add(51*time.Second), cursor)
		require.NoError(t, err)
		got = append(got, deals...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, 2, pages, "batches of 200")
	require.Len(t, got, 211, "the deals created from the 51st second on, and the one changed")
	assert.Equal(t, ids[50], got[0].ID)
	assert.Equal(t, base.Add(51*time.Second), got[0].UpdatedAt)
	assert.Equal(t, crm.Deal{ID: ids[0], Name: "D0", Pipeline: "Opportunity", Stage: "Closed Lost", Status: crm.DealLost,
		UpdatedAt: base.Add(261 * time.Second)}, got[210])
	for i := 1; i < len(got); i++ {
		require.False(t, got[i].UpdatedAt.Before(got[i-1].UpdatedAt), "oldest first")
	}
	_, _, err := c.DealsChangedSince(t.Context(), base, "/services/data/v60.0/query/../sobjects/Contact")
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_cursor", pe.Code)
}
