package dynamics_test

import (
	"fmt"
	"net/http"
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

// TestFakePatchWithoutIfMatchUpserts is the control of TestUpdate's deleted record: a PATCH
// without If-Match creates the record it names, so only the client's If-Match: * kept it
// deleted.
func TestFakePatchWithoutIfMatchUpserts(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	cc := clientcredentials.Config{ClientID: fake.ClientID, ClientSecret: fake.ClientSecret,
		TokenURL: f.URL() + "/" + fake.TenantID + "/oauth2/v2.0/token", Scopes: []string{f.URL() + "/.default"},
		AuthStyle: oauth2.AuthStyleInParams}
	hc := cc.Client(t.Context())
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
