package dynamics_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/dynamics"
	fake "github.com/botplatform/api/tests/fakes/crm/dynamics"
)

func creds(f *fake.Server) crm.Credentials {
	return crm.Credentials{TenantID: fake.TenantID, ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, InstanceURL: f.URL()}
}

func newClient(t *testing.T, f *fake.Server, c crm.Credentials) *dynamics.Client {
	t.Helper()
	cl, err := dynamics.New(dynamics.Config{LoginURL: f.URL(), AllowPrivate: true}, c)
	require.NoError(t, err)
	return cl
}

func TestClientCredentials(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	ctx := t.Context()
	c := newClient(t, f, creds(f))
	acct, err := c.Account(ctx)
	require.NoError(t, err)
	assert.Equal(t, crm.Account{ID: fake.OrganizationID, Name: fake.OrgName, User: fake.AppUserName}, acct)
	_, err = c.Account(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, f.TokensIssued(), "the token is reused while it lives")

	f.ExpireTokens()
	_, err = c.Account(ctx)
	assert.ErrorIs(t, err, crm.ErrUnauthorized, "Dataverse refuses a token it considers expired")

	// Short-lived tokens are renewed before they expire.
	f.SetTokenTTL(5 * time.Second)
	c2 := newClient(t, f, creds(f))
	for range 2 {
		_, err = c2.Account(ctx)
		require.NoError(t, err)
	}
	assert.Greater(t, f.TokensIssued(), 2)

	for name, bad := range map[string]crm.Credentials{
		"wrong secret": {TenantID: fake.TenantID, ClientID: fake.ClientID, ClientSecret: "wrong", InstanceURL: f.URL()},
		"other tenant": {TenantID: "11111111-2222-3333-4444-555555555555", ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, InstanceURL: f.URL()},
		"unknown app":  {TenantID: fake.TenantID, ClientID: "nope", ClientSecret: fake.ClientSecret, InstanceURL: f.URL()},
		"other env":    {TenantID: fake.TenantID, ClientID: fake.ClientID, ClientSecret: fake.ClientSecret, InstanceURL: f.URL() + "/x"},
	} {
		_, err := newClient(t, f, bad).Account(ctx)
		require.ErrorIs(t, err, crm.ErrUnauthorized, name)
		assert.NotContains(t, err.Error(), fake.ClientSecret, name)
	}

	for name, bad := range map[string]crm.Credentials{
		"tenant":     {TenantID: "../x", ClientID: "a", ClientSecret: "b", InstanceURL: f.URL()},
		"no secret":  {TenantID: fake.TenantID, ClientID: "a", InstanceURL: f.URL()},
		"no env":     {TenantID: fake.TenantID, ClientID: "a", ClientSecret: "b"},
		"env values": {TenantID: fake.TenantID, ClientID: "a", ClientSecret: "b", InstanceURL: f.URL() + "?x=1"},
	} {
		_, err := dynamics.New(dynamics.Config{LoginURL: f.URL(), AllowPrivate: true}, bad)
		assert.Error(t, err, name)
	}
	_, err = dynamics.New(dynamics.Config{}, creds(f))
	assert.Error(t, err, "an http environment outside tests")
	assert.NoError(t, c.Revoke(ctx), "no revocation")
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	objs, err := c.Objects(ctx)
	require.NoError(t, err)
	assert.Equal(t, "contacts", objs[0].Name)

	fields, err := c.Fields(ctx, "contacts")
	require.NoError(t, err)
	by := map[string]crm.Field{}
	for _, fl := range fields {
		by[fl.Name] = fl
	}
	assert.Equal(t, crm.Field{Object: "contacts", Name: "emailaddress1", Label: "Email", Type: crm.TypeEmail}, by["emailaddress1"])
	assert.Equal(t, crm.TypePhone, by["telephone1"].Type)
	assert.Equal(t, crm.TypeDate, by["birthdate"].Type)
	assert.Equal(t, crm.TypeDateTime, by["modifiedon"].Type)
	assert.True(t, by["modifiedon"].ReadOnly)
	assert.Equal(t, crm.TypeBool, by["donotemail"].Type)
	assert.Equal(t, crm.TypeNumber, by["new_botconversations"].Type)
	assert.Equal(t, crm.TypeEnum, by["preferredcontactmethodcode"].Type)
	assert.Equal(t, []string{"1", "2", "3"}, by["preferredcontactmethodcode"].Options)
	assert.True(t, by["lastname"].Required)
	_, err = c.Fields(ctx, "incidents")
	assert.ErrorIs(t, err, crm.ErrNotFound)

	pipes, err := c.Pipelines(ctx)
	require.NoError(t, err)
	assert.Equal(t, []crm.Pipeline{{ID: "opportunity", Label: "Opportunities", Stages: []crm.Stage{{ID: "0", Label: "Qualify"},
		{ID: "1", Label: "Develop"}, {ID: "2", Label: "Propose"}, {ID: "3", Label: "Close"}}}}, pipes)
}

func TestUpsertGetFind(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	props := map[string]any{"firstname": "Ada", "new_botconversations": 2.0, "preferredcontactmethodcode": 2.0,
		"birthdate": "1990-12-10"}
	r1, err := c.Upsert(ctx, "contacts", "emailaddress1", "ada@example.com", props)
	require.NoError(t, err)
	r2, err := c.Upsert(ctx, "contacts", "emailaddress1", "ada@example.com", props)
	require.NoError(t, err)
	assert.Equal(t, r1.ID, r2.ID)
	require.Equal(t, 1, f.Count("contacts"), "the same upsert twice leaves one record")
	assert.Equal(t, "Ada", r2.Properties["firstname"])
	assert.False(t, r2.UpdatedAt.IsZero())

	got, err := c.Get(ctx, "contacts", r1.ID, []string{"emailaddress1", "telephone1"})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"contactid": r1.ID, "modifiedon": got.Properties["modifiedon"], "emailaddress1": "ada@example.com", "telephone1": nil}, got.Properties)

	tricky := "o'hara@example.com"
	r3, err := c.Upsert(ctx, "contacts", "emailaddress1", tricky, nil)
	require.NoError(t, err)
	found, err := c.Find(ctx, "contacts", "emailaddress1", tricky, nil)
	require.NoError(t, err)
	assert.Equal(t, r3.ID, found.ID)
	_, err = c.Find(ctx, "contacts", "emailaddress1", "x' or emailaddress1 ne 'y", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Get(ctx, "contacts", "00000000-0000-0000-0000-000000000000", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Get(ctx, "contacts", "x)/../accounts(", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)

	_, err = c.Upsert(ctx, "contacts", "emailaddress1", "b@example.com", map[string]any{"preferredcontactmethodcode": 9.0})
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	assert.Equal(t, "0x80048d19", pe.Code)
	_, err = c.Upsert(ctx, "contacts", "emailaddress1", "b@example.com", map[string]any{"Bad Name": 1.0})
	require.ErrorAs(t, err, &pe)
}

func TestChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	})
	var ids []string
	for i := range 250 {
		ids = append(ids, f.Create("contacts", map[string]any{"emailaddress1": fmt.Sprintf("c%d@example.com", i)}))
	}
	require.True(t, f.Change("contacts", ids[0], map[string]any{"firstname": "Changed"}))
	var got []crm.Record
	cursor, pages := "", 0
	for {
		recs, next, err := c.ChangedSince(t.Context(), "contacts", base.Add(101*time.Second), []string{"emailaddress1", "firstname"}, cursor)
		require.NoError(t, err)
		got = append(got, recs...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, got, 151)
	assert.Equal(t, 2, pages)
	assert.Equal(t, ids[0], got[150].ID)
	assert.Equal(t, "Changed", got[150].Properties["firstname"])
	_, _, err := c.ChangedSince(t.Context(), "contacts", base, nil, "https://evil.example/api/data/v9.2/contacts?x")
	var pe *crm.ProviderError
	assert.ErrorAs(t, err, &pe)
}

func TestAddNote(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	r, err := c.Upsert(t.Context(), "contacts", "emailaddress1", "n@example.com", nil)
	require.NoError(t, err)
	require.NoError(t, c.AddNote(t.Context(), "contacts", r.ID, "Chat\nUser: hi"))
	notes := f.Records("annotations")
	require.Len(t, notes, 1)
	assert.Equal(t, map[string]any{"subject": "Chat", "notetext": "Chat\nUser: hi", "_objectid_value": r.ID, "objecttypecode": "contact"}, notes[0].Props)
	err = c.AddNote(t.Context(), "contacts", "00000000-0000-0000-0000-000000000000", "x")
	assert.ErrorIs(t, err, crm.ErrNotFound)
}

func TestErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	f.SetRateLimit(3, 3*time.Second)
	_, err := c.Account(ctx) // WhoAmI, organizations and systemusers: three requests
	require.NoError(t, err)
	_, err = c.Pipelines(ctx)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Positive(t, rl.RetryAfter)
	assert.LessOrEqual(t, rl.RetryAfter, 3*time.Second)
	f.SetRateLimit(0, 0)

	f.FailNext(1, 500)
	_, err = c.Pipelines(ctx)
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	_, err = c.Pipelines(ctx)
	require.NoError(t, err)
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	r, err := c.Upsert(ctx, "contacts", "emailaddress1", "upd@example.com", map[string]any{"firstname": "Ada"})
	require.NoError(t, err)

	before := f.Requests()
	got, err := c.Update(ctx, "contacts", r.ID, map[string]any{"lastname": "Lovelace", "new_botconversations": 4.0})
	require.NoError(t, err)
	assert.Equal(t, before+1, f.Requests(), "one PATCH answering the record (return=representation), no query")
	assert.Equal(t, r.ID, got.ID)
	assert.Equal(t, "Lovelace", got.Properties["lastname"])
	assert.Equal(t, "Ada", got.Properties["firstname"])
	assert.Equal(t, 4.0, got.Properties["new_botconversations"])
	assert.False(t, got.UpdatedAt.IsZero())
	assert.Equal(t, 1, f.Count("contacts"))

	// Upsert updates through the same PATCH, after its query.
	before = f.Requests()
	_, err = c.Upsert(ctx, "contacts", "emailaddress1", "upd@example.com", map[string]any{"firstname": "Augusta"})
	require.NoError(t, err)
	assert.Equal(t, before+2, f.Requests())

	// Deleted on the CRM side: If-Match: * makes the PATCH an update, which answers 404;
	// without it Dataverse (and the fake) would create the record again.
	require.True(t, f.Delete("contacts", r.ID))
	_, err = c.Update(ctx, "contacts", r.ID, map[string]any{"firstname": "Ada"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Update(ctx, "contacts", "00000000-0000-0000-0000-000000000000", map[string]any{"firstname": "Ada"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Equal(t, 0, f.Count("contacts"), "an update never creates")
	before = f.Requests()
	for _, id := range []string{"", "x)/../accounts(", r.ID + ")?$x=("} {
		_, err = c.Update(ctx, "contacts", id, nil)
		require.ErrorIs(t, err, crm.ErrNotFound, id)
	}
	assert.Equal(t, before, f.Requests(), "an id that is not a GUID reaches no URL")

	o, err := c.Upsert(ctx, "contacts", "emailaddress1", "o@example.com", nil)
	require.NoError(t, err)
	var pe *crm.ProviderError
	_, err = c.Update(ctx, "contacts", o.ID, map[string]any{"preferredcontactmethodcode": 9.0})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	_, err = c.Update(ctx, "contacts", o.ID, map[string]any{"modifiedon": "2026-01-01T00:00:00Z"})
	require.ErrorAs(t, err, &pe, "a read-only attribute")
	_, err = c.Update(ctx, "incidents", o.ID, nil)
	assert.ErrorIs(t, err, crm.ErrNotFound, "an entity set the client does not write")
}

// fakeClient is an HTTP client holding a token of the fake's app (client credentials), for
// the tests that speak to the fake on the wire.
func fakeClient(t *testing.T, f *fake.Server) *http.Client {
	t.Helper()
	cc := clientcredentials.Config{ClientID: fake.ClientID, ClientSecret: fake.ClientSecret,
		TokenURL: f.URL() + "/" + fake.TenantID + "/oauth2/v2.0/token", Scopes: []string{f.URL() + "/.default"},
		AuthStyle: oauth2.AuthStyleInParams}
	return cc.Client(t.Context())
}

// TestFakePatchWithoutIfMatchUpserts is the control of TestUpdate's deleted record: a PATCH
// without If-Match creates the record it names, so only the client's If-Match: * kept it
// deleted.
func TestFakePatchWithoutIfMatchUpserts(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	hc := fakeClient(t, f)
	id := "0000002a-0000-ef11-a317-00000000002a"
	patch := func(h map[string]string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPatch, f.URL()+"/api/data/v9.2/contacts("+id+")",
			strings.NewReader(`{"firstname":"Ada"}`))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("OData-MaxVersion", "4.0")
		req.Header.Set("OData-Version", "4.0")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		res, err := hc.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		return res.StatusCode
	}
	assert.Equal(t, http.StatusNotFound, patch(map[string]string{"If-Match": "*"}))
	assert.Equal(t, 0, f.Count("contacts"))
	assert.Equal(t, http.StatusNoContent, patch(nil), "an upsert that creates")
	rec, ok := f.Record("contacts", id)
	require.True(t, ok)
	assert.Equal(t, "Ada", rec.Props["firstname"])
	assert.Equal(t, http.StatusPreconditionFailed, patch(map[string]string{"If-None-Match": "*"}), "create only: it exists")
	assert.Equal(t, http.StatusPreconditionFailed, patch(map[string]string{"If-Match": `W/"1"`}), "another version")
	assert.Equal(t, http.StatusNoContent, patch(map[string]string{"If-Match": "*"}))
	assert.Equal(t, 1, f.Count("contacts"))
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	id := f.Create("contacts", map[string]any{"lastname": "Lovelace"})

	f.SetRateLimit(1, time.Minute)
	_, err := c.Update(ctx, "contacts", id, map[string]any{"firstname": "A"})
	require.NoError(t, err)
	_, err = c.Update(ctx, "contacts", id, map[string]any{"firstname": "B"})
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Positive(t, rl.RetryAfter)
	assert.LessOrEqual(t, rl.RetryAfter, time.Minute, "Retry-After")
	f.SetRateLimit(0, 0)

	f.ExpireTokens()
	_, err = c.Update(ctx, "contacts", id, map[string]any{"firstname": "C"})
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	bad := creds(f)
	bad.ClientSecret = "not~the~client~secret"
	_, err = newClient(t, f, bad).Update(ctx, "contacts", id, map[string]any{"firstname": "C"})
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	assert.NotContains(t, err.Error(), bad.ClientSecret)
	rec, _ := f.Record("contacts", id)
	assert.Equal(t, "A", rec.Props["firstname"], "only the admitted update wrote")
}

// tick makes the fake's clock advance a second on every reading, from base.
func tick(f *fake.Server, base time.Time) {
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Second)
		return now
	})
}

func TestOpenDeal(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	tick(f, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	ada := f.Create("contacts", map[string]any{"emailaddress1": "ada@example.com"})
	in := crm.DealInput{Pipeline: "opportunity", Stage: "1", Name: "Ada's order"}

	before := f.Requests()
	d1, created, err := c.OpenDeal(ctx, "contacts", ada, in)
	require.NoError(t, err)
	assert.True(t, created)
	assert.Equal(t, before+2, f.Requests(), "the query of open deals, then the create")
	assert.Equal(t, crm.Deal{ID: d1.ID, Name: "Ada's order", Pipeline: "opportunity", Stage: "1", Status: crm.DealOpen,
		UpdatedAt: d1.UpdatedAt}, d1)
	assert.False(t, d1.UpdatedAt.IsZero())
	require.Equal(t, 1, f.Count("opportunities"))
	rec, ok := f.Record("opportunities", d1.ID)
	require.True(t, ok)
	assert.Equal(t, ada, rec.Props["_parentcontactid_value"], "associated with the contact")
	assert.Equal(t, 1.0, rec.Props["salesstage"])
	assert.Equal(t, 0.0, rec.Props["statecode"])
	assert.Equal(t, "Ada's order", rec.Props["name"])

	before = f.Requests()
	d2, created, err := c.OpenDeal(ctx, "contacts", ada, crm.DealInput{Pipeline: "opportunity", Stage: "0", Name: "Another"})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, d1, d2, "the deal the first call opened")
	assert.Equal(t, before+1, f.Requests(), "one query")
	assert.Equal(t, 1, f.Count("opportunities"))

	// A closed deal is not open: won, then lost, each makes the next call open another.
	for _, state := range []float64{1, 2} {
		open, _, err := c.OpenDeal(ctx, "contacts", ada, in)
		require.NoError(t, err)
		require.True(t, f.Change("opportunities", open.ID, map[string]any{"statecode": state}))
		next, created, err := c.OpenDeal(ctx, "contacts", ada, in)
		require.NoError(t, err)
		assert.True(t, created, "statecode %v", state)
		assert.NotEqual(t, open.ID, next.ID)
	}
	assert.Equal(t, 3, f.Count("opportunities"))

	// Another contact's open deal, or the account's, is not this contact's.
	bob := f.Create("contacts", map[string]any{"emailaddress1": "bob@example.com"})
	acme := f.Create("accounts", map[string]any{"name": "Acme"})
	f.Create("opportunities", map[string]any{"name": "Acme deal", "salesstage": 2.0, "_parentaccountid_value": acme})
	bobs, created, err := c.OpenDeal(ctx, "contacts", bob, in)
	require.NoError(t, err)
	assert.True(t, created)
	rec, _ = f.Record("opportunities", bobs.ID)
	assert.Equal(t, bob, rec.Props["_parentcontactid_value"])
	acmes, created, err := c.OpenDeal(ctx, "accounts", acme, in)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, "Acme deal", acmes.Name)
	assert.Equal(t, "2", acmes.Stage)

	// Of two open deals, the most recently changed.
	older := f.Create("opportunities", map[string]any{"name": "Older", "salesstage": 0.0, "_parentcontactid_value": bob})
	require.True(t, f.Change("opportunities", older, map[string]any{"salesstage": 3.0}))
	got, created, err := c.OpenDeal(ctx, "contacts", bob, in)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, older, got.ID)
	assert.Equal(t, "3", got.Stage, "moved by a user")
}

func TestOpenDealRefused(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	ada := f.Create("contacts", map[string]any{"emailaddress1": "ada@example.com"})
	in := crm.DealInput{Pipeline: "opportunity", Stage: "1", Name: "Order"}

	// The filter on an unknown contact answers no deal; the create's bind answers 404.
	_, _, err := c.OpenDeal(ctx, "contacts", "00000000-0000-0000-0000-000000000000", in)
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Contains(t, err.Error(), "0x80040217")
	assert.Equal(t, 0, f.Count("opportunities"))

	var pe *crm.ProviderError
	_, _, err = c.OpenDeal(ctx, "contacts", ada, crm.DealInput{Pipeline: "opportunity", Stage: "9", Name: "Order"})
	require.ErrorAs(t, err, &pe, "a salesstage that is not an option")
	assert.Equal(t, 400, pe.Status)
	assert.Equal(t, "0x80048d19", pe.Code)
	assert.Contains(t, pe.Message, "salesstage")
	assert.Equal(t, 0, f.Count("opportunities"))

	before := f.Requests()
	for name, d := range map[string]crm.DealInput{
		"another pipeline":  {Pipeline: "default", Stage: "1"},
		"stage not a value": {Pipeline: "opportunity", Stage: "Qualify"},
		"no stage":          {Pipeline: "opportunity"},
	} {
		_, _, err = c.OpenDeal(ctx, "contacts", ada, d)
		require.ErrorAs(t, err, &pe, name)
		assert.Equal(t, 400, pe.Status, name)
	}
	_, _, err = c.OpenDeal(ctx, "leads", ada, in)
	require.ErrorAs(t, err, &pe, "opportunities have no lead lookup the client binds")
	assert.Equal(t, "invalid_object", pe.Code)
	_, _, err = c.OpenDeal(ctx, "contacts", "x)/../accounts(", in)
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Equal(t, before, f.Requests(), "refused before any request")

	f.FailNext(1, 503)
	_, _, err = c.OpenDeal(ctx, "contacts", ada, in)
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, 0, f.Count("opportunities"), "the failed query created nothing")

	f.SetRateLimit(1, time.Minute)
	_, _, err = c.OpenDeal(ctx, "contacts", ada, in)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl, "the create is over the limit")
	assert.Positive(t, rl.RetryAfter)
	assert.Equal(t, 0, f.Count("opportunities"))
	f.SetRateLimit(0, 0)

	f.ExpireTokens()
	_, _, err = c.OpenDeal(ctx, "contacts", ada, in)
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
}

func TestDeals(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	tick(f, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	c := newClient(t, f, creds(f))
	ctx := t.Context()
	ada := f.Create("contacts", map[string]any{"emailaddress1": "ada@example.com"})
	bob := f.Create("contacts", map[string]any{"emailaddress1": "bob@example.com"})
	won := f.Create("opportunities", map[string]any{"name": "Won", "salesstage": 3.0, "statecode": 1.0,
		"estimatedvalue": 1200.5, "_parentcontactid_value": ada})
	lost := f.Create("opportunities", map[string]any{"name": "Lost", "salesstage": 2.0, "statecode": 2.0,
		"estimatedvalue": 300.0, "_transactioncurrencyid_value": fake.EURCurrencyID, "_parentcontactid_value": ada})
	open := f.Create("opportunities", map[string]any{"name": "Open", "salesstage": 0.0, "_parentcontactid_value": ada})
	f.Create("opportunities", map[string]any{"name": "Bob's", "salesstage": 0.0, "_parentcontactid_value": bob})
	require.True(t, f.Change("opportunities", won, map[string]any{"name": "Won big"}))

	before := f.Requests()
	got, err := c.Deals(ctx, "contacts", ada)
	require.NoError(t, err)
	assert.Equal(t, before+1, f.Requests(), "one query, the currency expanded in it")
	require.Len(t, got, 3)
	wonRec, _ := f.Record("opportunities", won)
	lostRec, _ := f.Record("opportunities", lost)
	openRec, _ := f.Record("opportunities", open)
	amount := func(v float64) *float64 { return &v }
	assert.Equal(t, []crm.Deal{
		{ID: won, Name: "Won big", Pipeline: "opportunity", Stage: "3", Status: crm.DealWon, Amount: amount(1200.5), Currency: "USD",
			UpdatedAt: wonRec.Updated.Truncate(time.Second)},
		{ID: open, Name: "Open", Pipeline: "opportunity", Stage: "0", Status: crm.DealOpen, UpdatedAt: openRec.Updated.Truncate(time.Second)},
		{ID: lost, Name: "Lost", Pipeline: "opportunity", Stage: "2", Status: crm.DealLost, Amount: amount(300), Currency: "EUR",
			UpdatedAt: lostRec.Updated.Truncate(time.Second)},
	}, got, "most recently changed first, statecode and money normalized")

	// At most 100, the most recent.
	var last string
	for i := range 105 {
		last = f.Create("opportunities", map[string]any{"name": fmt.Sprint("bulk ", i), "_parentcontactid_value": bob})
	}
	got, err = c.Deals(ctx, "contacts", bob)
	require.NoError(t, err)
	require.Len(t, got, 100)
	assert.Equal(t, last, got[0].ID)
	assert.Empty(t, got[0].Stage, "an opportunity without a sales stage")

	// No deals: the contact is read, to tell an unknown contact from one without deals.
	carol := f.Create("contacts", map[string]any{"emailaddress1": "carol@example.com"})
	before = f.Requests()
	got, err = c.Deals(ctx, "contacts", carol)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.NotNil(t, got)
	assert.Equal(t, before+2, f.Requests())
	_, err = c.Deals(ctx, "contacts", "00000000-0000-0000-0000-000000000000")
	assert.ErrorIs(t, err, crm.ErrNotFound)
	require.True(t, f.Delete("contacts", carol))
	_, err = c.Deals(ctx, "contacts", carol)
	assert.ErrorIs(t, err, crm.ErrNotFound)
}

func TestDealsChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tick(f, base)
	c := newClient(t, f, creds(f))
	ada := f.Create("contacts", map[string]any{"emailaddress1": "ada@example.com"}) // base+1s
	var ids []string
	for i := range 250 { // base+2s .. base+251s
		ids = append(ids, f.Create("opportunities", map[string]any{"name": fmt.Sprint("deal ", i), "salesstage": 1.0,
			"_parentcontactid_value": ada}))
	}
	require.True(t, f.Change("opportunities", ids[0], map[string]any{"statecode": 1.0, "estimatedvalue": 99.0}))
	var got []crm.Deal
	cursor, pages := "", 0
	for {
		page, next, err := c.DealsChangedSince(t.Context(), base.Add(102*time.Second), cursor)
		require.NoError(t, err)
		got = append(got, page...)
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, got, 151, "deals 100..249 and the changed deal 0")
	assert.Equal(t, 2, pages)
	assert.Equal(t, ids[100], got[0].ID)
	assert.Equal(t, "deal 100", got[0].Name)
	assert.Equal(t, base.Add(102*time.Second), got[0].UpdatedAt)
	for i := 1; i < len(got); i++ {
		require.False(t, got[i].UpdatedAt.Before(got[i-1].UpdatedAt), "oldest first")
	}
	assert.Equal(t, ids[0], got[150].ID)
	assert.Equal(t, crm.DealWon, got[150].Status)
	assert.Equal(t, 99.0, *got[150].Amount)
	assert.Equal(t, "USD", got[150].Currency)

	_, _, err := c.DealsChangedSince(t.Context(), base, "https://evil.example/api/data/v9.2/opportunities?x")
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_cursor", pe.Code)
	_, _, err = c.DealsChangedSince(t.Context(), base, f.URL()+"/api/data/v9.2/contacts?$top=1")
	require.ErrorAs(t, err, &pe, "another entity set's link")
}

// TestFakeOpportunities checks the fake's opportunity routes on the wire, where the client's
// own checks do not reach: binds to missing or wrong records, $expand, and the Web API error
// envelope.
func TestFakeOpportunities(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	ada := f.Create("contacts", map[string]any{"emailaddress1": "ada@example.com"})
	send := func(hc *http.Client, method, path, body string) (int, map[string]any) {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, err := http.NewRequestWithContext(t.Context(), method, f.URL()+"/api/data/v9.2/"+path, rd)
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("OData-MaxVersion", "4.0")
		req.Header.Set("OData-Version", "4.0")
		req.Header.Set("Prefer", "return=representation")
		res, err := hc.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode, out
	}
	hc := fakeClient(t, f)
	code := func(out map[string]any) any { return out["error"].(map[string]any)["code"] }

	status, _ := send(http.DefaultClient, http.MethodPost, "opportunities", `{"name":"x"}`)
	assert.Equal(t, http.StatusUnauthorized, status)
	status, out := send(hc, http.MethodPost, "opportunities", `{"name":"x","parentcontactid@odata.bind":"/contacts(00000000-0000-0000-0000-000000000001)"}`)
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "0x80040217", code(out))
	status, out = send(hc, http.MethodPost, "opportunities", `{"name":"x","parentcontactid@odata.bind":"/accounts(`+ada+`)"}`)
	assert.Equal(t, http.StatusBadRequest, status, "a contact lookup bound to an account")
	assert.Equal(t, "0x80048d19", code(out))
	status, out = send(hc, http.MethodPost, "opportunities", `{"name":"x","statecode":1}`)
	assert.Equal(t, http.StatusBadRequest, status, "closing takes WinOpportunity, not a write")
	assert.Equal(t, "0x80048d19", code(out))
	status, out = send(hc, http.MethodPost, "opportunities?$expand=parentcontactid($select=nope)", `{"name":"x"}`)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, "0x80060888", code(out))
	assert.Equal(t, 0, f.Count("opportunities"))

	status, out = send(hc, http.MethodPost, "opportunities?$select=name,statecode&$expand=parentcontactid($select=emailaddress1)",
		`{"name":"x","salesstage":2,"parentcontactid@odata.bind":"/contacts(`+ada+`)"}`)
	require.Equal(t, http.StatusCreated, status)
	delete(out, "@odata.etag")
	assert.Equal(t, map[string]any{"name": "x", "statecode": 0.0, "parentcontactid": map[string]any{"contactid": ada,
		"emailaddress1": "ada@example.com", "@odata.etag": out["parentcontactid"].(map[string]any)["@odata.etag"]}}, out)
	status, out = send(hc, http.MethodGet, "opportunities?$select=name&$filter="+url.QueryEscape("_parentcontactid_value eq "+ada+" and statecode eq 1"), "")
	require.Equal(t, http.StatusOK, status)
	assert.Empty(t, out["value"])
	status, out = send(hc, http.MethodGet, "opportunities?$select=name&$filter="+url.QueryEscape("_parentcontactid_value eq 'ada'"), "")
	assert.Equal(t, http.StatusBadRequest, status, "a GUID is compared unquoted")
	assert.Equal(t, "0x80060888", code(out))
	status, _ = send(hc, http.MethodGet, "opportunities?$orderby=nope%20desc", "")
	assert.Equal(t, http.StatusBadRequest, status)
}

// A connection whose contacts are leads searches, writes, updates, reads, pulls and notes
// subscriber records in leads, whether the mapping names contacts or leads; contacts are
// never touched and the fields are the lead's.
func TestContactsAreLeads(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, err := dynamics.New(dynamics.Config{LoginURL: f.URL(), AllowPrivate: true, Contacts: "leads"}, creds(f))
	require.NoError(t, err)
	ctx := t.Context()

	objs, err := c.Objects(ctx)
	require.NoError(t, err)
	names := []string{}
	for _, o := range objs {
		names = append(names, o.Name)
	}
	assert.Equal(t, []string{"leads", "accounts", "opportunities"}, names, "leads in the place of contacts")

	fields, err := c.Fields(ctx, "contacts")
	require.NoError(t, err)
	have := []string{}
	for _, fl := range fields {
		have = append(have, fl.Name)
		assert.Equal(t, "contacts", fl.Object)
	}
	assert.Contains(t, have, "leadid", "EntityDefinitions(LogicalName='lead')")
	assert.NotContains(t, have, "new_botconversations", "a contact's attribute")

	rec, err := c.Upsert(ctx, "contacts", "emailaddress1", "ada@example.com", map[string]any{"firstname": "Ada"})
	require.NoError(t, err)
	assert.Equal(t, 1, f.Count("leads"))
	assert.Equal(t, 0, f.Count("contacts"))
	lead, ok := f.Record("leads", rec.ID)
	require.True(t, ok)
	assert.Equal(t, "ada@example.com", lead.Props["emailaddress1"])

	again, err := c.Upsert(ctx, "leads", "emailaddress1", "ada@example.com", map[string]any{"lastname": "Lovelace"})
	require.NoError(t, err)
	assert.Equal(t, rec.ID, again.ID, "found by its email in leads")
	_, err = c.Update(ctx, "contacts", rec.ID, map[string]any{"firstname": "Augusta"})
	require.NoError(t, err)
	got, err := c.Get(ctx, "contacts", rec.ID, []string{"firstname", "lastname"})
	require.NoError(t, err)
	assert.Equal(t, "Augusta", got.Properties["firstname"])
	assert.Equal(t, "Lovelace", got.Properties["lastname"])
	found, err := c.Find(ctx, "contacts", "emailaddress1", "ada@example.com", nil)
	require.NoError(t, err)
	assert.Equal(t, rec.ID, found.ID)

	page, next, err := c.ChangedSince(ctx, "contacts", time.Time{}, []string{"firstname"}, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	require.Len(t, page, 1)
	assert.Equal(t, rec.ID, page[0].ID)

	require.NoError(t, c.AddNote(ctx, "contacts", rec.ID, "Hello"))
	notes := f.Records("annotations")
	require.Len(t, notes, 1)
	assert.Equal(t, "lead", notes[0].Props["objecttypecode"])
	assert.Equal(t, rec.ID, notes[0].Props["_objectid_value"])

	var pe *crm.ProviderError
	_, _, err = c.OpenDeal(ctx, "contacts", rec.ID, crm.DealInput{Pipeline: "opportunity", Stage: "0", Name: "Order"})
	require.ErrorAs(t, err, &pe, "an opportunity has no lead lookup the client binds")
	assert.Equal(t, "invalid_object", pe.Code)
	assert.Equal(t, 0, f.Count("contacts"))
	assert.Equal(t, 0, f.Count("opportunities"))
}

// A custom entity set's logical name and primary key come from EntityDefinitions, read
// once; a set the environment does not have is not found.
func TestContactsCustomEntitySet(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, err := dynamics.New(dynamics.Config{LoginURL: f.URL(), AllowPrivate: true, Contacts: "new_subscribers"}, creds(f))
	require.NoError(t, err)
	ctx := t.Context()

	objs, err := c.Objects(ctx)
	require.NoError(t, err)
	assert.Equal(t, crm.Object{Name: "new_subscribers", Label: "Subscribers"}, objs[0])
	fields, err := c.Fields(ctx, "new_subscribers")
	require.NoError(t, err)
	have := []string{}
	for _, fl := range fields {
		have = append(have, fl.Name)
	}
	assert.Contains(t, have, "new_email")

	before := f.Requests()
	rec, err := c.Upsert(ctx, "contacts", "new_email", "ada@example.com", map[string]any{"new_name": "Ada"})
	require.NoError(t, err)
	assert.Equal(t, 2, f.Requests()-before, "a query and a create: the definition is not read again")
	assert.Equal(t, 1, f.Count("new_subscribers"))
	assert.Equal(t, 0, f.Count("contacts"))
	page, _, err := c.ChangedSince(ctx, "new_subscribers", time.Time{}, []string{"new_name"}, "")
	require.NoError(t, err)
	require.Len(t, page, 1)
	assert.Equal(t, rec.ID, page[0].ID)
	assert.Equal(t, "Ada", page[0].Properties["new_name"])
	require.NoError(t, c.AddNote(ctx, "contacts", rec.ID, "Hello"))
	assert.Equal(t, "new_subscriber", f.Records("annotations")[0].Props["objecttypecode"])

	missing, err := dynamics.New(dynamics.Config{LoginURL: f.URL(), AllowPrivate: true, Contacts: "new_customers"}, creds(f))
	require.NoError(t, err)
	_, err = missing.Objects(ctx)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = missing.Upsert(ctx, "contacts", "emailaddress1", "ada@example.com", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)

	_, err = dynamics.New(dynamics.Config{LoginURL: f.URL(), AllowPrivate: true, Contacts: "Leads')/x"}, creds(f))
	assert.Error(t, err, "not an entity set name")
}

// CheckContacts asks the environment about the connection's contacts set: a custom set it has
// with an email column is usable; one it does not have is an UnusableObjectError that is
// ErrNotFound; a table without an email column is one that is not; leads are asked about,
// contacts are not; an environment that fails is a temporary ProviderError.
func TestCheckContacts(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	ctx := t.Context()
	client := func(contacts string) *dynamics.Client {
		c, err := dynamics.New(dynamics.Config{LoginURL: f.URL(), AllowPrivate: true, Contacts: contacts}, creds(f))
		require.NoError(t, err)
		return c
	}
	before := f.Requests()
	require.NoError(t, client("contacts").CheckContacts(ctx))
	require.NoError(t, client("").CheckContacts(ctx))
	assert.Equal(t, before, f.Requests(), "contacts is not asked about")
	require.NoError(t, client("leads").CheckContacts(ctx))
	custom := client("new_subscribers")
	require.NoError(t, custom.CheckContacts(ctx))
	assert.Equal(t, before+4, f.Requests(), "a definition and its attributes, for each")
	_, err := custom.Objects(ctx)
	require.NoError(t, err)
	assert.Equal(t, before+4, f.Requests(), "the definition the check read is kept")

	var ue *crm.UnusableObjectError
	err = client("new_subscriberz").CheckContacts(ctx)
	require.ErrorAs(t, err, &ue)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	assert.Equal(t, "new_subscriberz", ue.Object)
	assert.Contains(t, ue.Reason, `no entity set "new_subscriberz"`)

	err = client("new_botevents").CheckContacts(ctx)
	require.ErrorAs(t, err, &ue)
	assert.NotErrorIs(t, err, crm.ErrNotFound)
	assert.Contains(t, ue.Reason, "new_botevent has no email column")

	f.FailNext(1, http.StatusServiceUnavailable)
	err = client("new_subscribers").CheckContacts(ctx)
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.False(t, errors.As(err, &ue))
}

// The fake answers a definition read by its key, LogicalName, as Dataverse does: the
// definition, or 404 with the Web API's error body for a table the environment does not
// have; a $filter no definition matches is an empty list.
func TestFakeEntityDefinitions(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	hc := fakeClient(t, f)
	get := func(path string) (int, map[string]any) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.URL()+"/api/data/v9.2/"+path, nil)
		require.NoError(t, err)
		req.Header.Set("OData-MaxVersion", "4.0")
		req.Header.Set("OData-Version", "4.0")
		res, err := hc.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(res.Body).Decode(&out))
		return res.StatusCode, out
	}
	status, out := get("EntityDefinitions(LogicalName='new_subscriber')?$select=EntitySetName,PrimaryNameAttribute")
	require.Equal(t, http.StatusOK, status, out)
	assert.Equal(t, "new_subscribers", out["EntitySetName"])
	assert.Equal(t, "new_name", out["PrimaryNameAttribute"])
	status, out = get("EntityDefinitions(LogicalName='new_customer')")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "0x80040217", out["error"].(map[string]any)["code"], out)
	status, out = get("EntityDefinitions(LogicalName='new_customer')/Attributes")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Equal(t, "0x80040217", out["error"].(map[string]any)["code"], out)
	status, out = get("EntityDefinitions?$filter=EntitySetName%20eq%20'new_customers'")
	assert.Equal(t, http.StatusOK, status)
	assert.Empty(t, out["value"])
}
