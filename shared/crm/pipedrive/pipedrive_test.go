package pipedrive_test

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/pipedrive"
	fake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
)

func newClient(t *testing.T, f *fake.Server) *pipedrive.Client {
	t.Helper()
	c, err := pipedrive.New(pipedrive.Config{BaseURL: f.URL(), AllowPrivate: true}, crm.Credentials{APIKey: fake.APIToken})
	require.NoError(t, err)
	return c
}

func TestAccountAndKeyNeverInURL(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	acct, err := c.Account(t.Context())
	require.NoError(t, err)
	assert.Equal(t, crm.Account{ID: fmt.Sprint(fake.CompanyID), Name: fake.CompanyName, User: fake.UserEmail}, acct)
	_, err = c.Upsert(t.Context(), "persons", "email", "a@example.com", nil)
	require.NoError(t, err)
	for _, u := range f.RequestURIs() {
		assert.NotContains(t, u, fake.APIToken)
		assert.NotContains(t, u, "api_token")
	}

	bad, err := pipedrive.New(pipedrive.Config{BaseURL: f.URL(), AllowPrivate: true}, crm.Credentials{APIKey: "wrong-key"})
	require.NoError(t, err)
	_, err = bad.Account(t.Context())
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "wrong-key")

	f.RevokeToken(fake.APIToken)
	_, err = c.Account(t.Context())
	assert.ErrorIs(t, err, crm.ErrUnauthorized, "a revoked key")
	assert.NoError(t, c.Revoke(t.Context()), "Pipedrive has no revocation")

	_, err = pipedrive.New(pipedrive.Config{}, crm.Credentials{})
	assert.Error(t, err, "no key")
	_, err = pipedrive.New(pipedrive.Config{}, crm.Credentials{APIKey: "k", InstanceURL: "http://demo.pipedrive.com"})
	assert.Error(t, err, "a company domain must be https")
	c2, err := pipedrive.New(pipedrive.Config{}, crm.Credentials{APIKey: fake.APIToken, InstanceURL: f.URL()})
	require.Error(t, err, "and not plain http outside tests")
	assert.Nil(t, c2)
}

func TestCompanyDomain(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c, err := pipedrive.New(pipedrive.Config{BaseURL: "http://127.0.0.1:1", AllowPrivate: true},
		crm.Credentials{APIKey: fake.APIToken, InstanceURL: f.URL()})
	require.NoError(t, err)
	_, err = c.Account(t.Context())
	require.NoError(t, err, "the company domain wins over the base URL")
}

func TestDiscovery(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	objs, err := c.Objects(ctx)
	require.NoError(t, err)
	assert.Len(t, objs, 3)

	fields, err := c.Fields(ctx, "persons")
	require.NoError(t, err)
	by := map[string]crm.Field{}
	for _, fl := range fields {
		by[fl.Name] = fl
	}
	assert.Equal(t, crm.TypeEmail, by["email"].Type)
	assert.Equal(t, crm.TypePhone, by["phone"].Type)
	assert.True(t, by["name"].Required)
	assert.False(t, by["name"].ReadOnly)
	assert.True(t, by["id"].ReadOnly)
	assert.True(t, by["update_time"].ReadOnly)
	assert.Equal(t, crm.TypeDateTime, by["update_time"].Type)
	assert.Equal(t, crm.TypeEnum, by[fake.KeySubscribed].Type)
	assert.Equal(t, []string{"31", "32"}, by[fake.KeySubscribed].Options, "option ids are what Pipedrive takes")
	assert.Equal(t, crm.TypeNumber, by[fake.KeyConversations].Type)
	assert.Equal(t, crm.TypeDate, by[fake.KeyBirthday].Type)
	assert.False(t, by[fake.KeyBirthday].ReadOnly)

	_, err = c.Fields(ctx, "leads")
	assert.ErrorIs(t, err, crm.ErrNotFound)

	pipes, err := c.Pipelines(ctx)
	require.NoError(t, err)
	require.Len(t, pipes, 2)
	assert.Equal(t, crm.Pipeline{ID: "1", Label: "Sales", Stages: []crm.Stage{{ID: "1", Label: "Lead in"}, {ID: "2", Label: "Contact made"},
		{ID: "3", Label: "Proposal"}}}, pipes[0])
	assert.Equal(t, "Partners", pipes[1].Label)
}

func TestUpsertGetFind(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()

	props := map[string]any{"first_name": "Ada", fake.KeySubscribed: 31.0, fake.KeyConversations: 2.0,
		fake.KeyBirthday: time.Date(1990, 12, 10, 0, 0, 0, 0, time.UTC)}
	r1, err := c.Upsert(ctx, "persons", "email", "ada@example.com", props)
	require.NoError(t, err)
	r2, err := c.Upsert(ctx, "persons", "email", "ADA@example.com", props)
	require.NoError(t, err)
	assert.Equal(t, r1.ID, r2.ID)
	require.Equal(t, 1, f.Count("persons"), "the same upsert twice leaves one record")
	assert.Equal(t, "ada@example.com", r1.Properties["email"])
	assert.Equal(t, "Ada", r1.Properties["name"], "a person's name comes from its first and last names")
	assert.Equal(t, "1990-12-10", r1.Properties[fake.KeyBirthday])

	got, err := c.Get(ctx, "persons", r1.ID, []string{"email", "first_name", "phone", fake.KeyConversations})
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"email": "ada@example.com", "first_name": "Ada", "phone": nil, fake.KeyConversations: 2.0}, got.Properties)
	assert.False(t, got.UpdatedAt.IsZero())

	// A custom field as the key.
	d1, err := c.Upsert(ctx, "persons", fake.KeyChannel, "tg:42", map[string]any{"name": "Telegram user"})
	require.NoError(t, err)
	d2, err := c.Upsert(ctx, "persons", fake.KeyChannel, "tg:42", map[string]any{"name": "Telegram user 2"})
	require.NoError(t, err)
	assert.Equal(t, d1.ID, d2.ID)
	assert.Equal(t, 2, f.Count("persons"))

	found, err := c.Find(ctx, "persons", "email", "ada@example.com", nil)
	require.NoError(t, err)
	assert.Equal(t, r1.ID, found.ID)
	_, err = c.Find(ctx, "persons", "email", "ad@example.com", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Get(ctx, "persons", "99999", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound)
	_, err = c.Get(ctx, "persons", "../users/me", nil)
	assert.ErrorIs(t, err, crm.ErrNotFound, "ids are checked before they reach a path")

	deal, err := c.Upsert(ctx, "deals", "title", "Chat lead", map[string]any{"value": 100.0, "stage_id": 2.0})
	require.NoError(t, err)
	again, err := c.Upsert(ctx, "deals", "title", "Chat lead", map[string]any{"value": 120.0})
	require.NoError(t, err)
	assert.Equal(t, deal.ID, again.ID)
	assert.Equal(t, 120.0, again.Properties["value"])

	_, err = c.Upsert(ctx, "persons", "email", "x@example.com", map[string]any{fake.KeySubscribed: 99.0})
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	assert.Contains(t, pe.Message, "Invalid option")
	_, err = c.Upsert(ctx, "persons", "first_name", "Ada", nil)
	require.ErrorAs(t, err, &pe, "Pipedrive cannot search by first name")
	assert.Equal(t, "unsearchable_field", pe.Code)
}

func TestChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now })
	var ids []int
	for i := range 150 {
		ids = append(ids, f.Create("persons", map[string]any{"name": fmt.Sprint("P", i), "email": fmt.Sprintf("p%d@example.com", i)}))
	}
	require.True(t, f.Change("persons", ids[0], map[string]any{"name": "Changed"}))

	var got []crm.Record
	cursor := ""
	for {
		recs, next, err := c.ChangedSince(t.Context(), "persons", base.Add(101*time.Second), []string{"name", "email"}, cursor)
		require.NoError(t, err)
		got = append(got, recs...)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Len(t, got, 51, "persons 100..149 and the changed first one")
	assert.Equal(t, fmt.Sprint(ids[0]), got[50].ID)
	assert.Equal(t, "Changed", got[50].Properties["name"])
	assert.Equal(t, "p0@example.com", got[50].Properties["email"])
	for i := 1; i < len(got); i++ {
		assert.False(t, got[i].UpdatedAt.Before(got[i-1].UpdatedAt))
	}
}

func TestAddNote(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	r, err := c.Upsert(t.Context(), "persons", "email", "n@example.com", nil)
	require.NoError(t, err)
	require.NoError(t, c.AddNote(t.Context(), "persons", r.ID, "User: <b>hi</b>\nBot: hello"))
	notes := f.Notes()
	require.Len(t, notes, 1)
	assert.Equal(t, "User: &lt;b&gt;hi&lt;/b&gt;<br>Bot: hello", notes[0].Content)
	assert.Equal(t, "persons", notes[0].Object)
	assert.Equal(t, r.ID, fmt.Sprint(notes[0].RecordID))
	var pe *crm.ProviderError
	assert.ErrorAs(t, c.AddNote(t.Context(), "persons", "9999", "x"), &pe)
}

func TestErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	f.SetRateLimit(3, 2*time.Second)
	for range 3 {
		_, err := c.Account(ctx)
		require.NoError(t, err)
	}
	_, err := c.Account(ctx)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Positive(t, rl.RetryAfter)
	assert.LessOrEqual(t, rl.RetryAfter, 2*time.Second, "x-ratelimit-reset: what is left of the window")
	assert.Equal(t, 1, f.Limited())
	assert.Equal(t, 4, f.Requests())
	f.SetRateLimit(0, 0)

	f.FailNext(1, 500)
	_, err = c.Pipelines(ctx)
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	_, err = c.Pipelines(ctx)
	require.NoError(t, err)

	f.FailNext(1, 503)
	_, err = c.Account(ctx)
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, 503, pe.Status)
	assert.False(t, strings.Contains(err.Error(), fake.APIToken))
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	r, err := c.Upsert(ctx, "persons", "email", "upd@example.com", map[string]any{"first_name": "Ada"})
	require.NoError(t, err)

	before := f.Requests()
	got, err := c.Update(ctx, "persons", r.ID, map[string]any{"last_name": "Lovelace", fake.KeyConversations: 4.0,
		"phone": "+4930123456"})
	require.NoError(t, err)
	assert.Equal(t, before+1, f.Requests(), "one PUT, no search")
	assert.Equal(t, r.ID, got.ID)
	assert.Equal(t, "Lovelace", got.Properties["last_name"])
	assert.Equal(t, "Ada", got.Properties["first_name"])
	assert.Equal(t, 4.0, got.Properties[fake.KeyConversations])
	assert.Equal(t, "+4930123456", got.Properties["phone"], "a phone written as its primary entry")
	assert.Equal(t, "upd@example.com", got.Properties["email"])
	assert.False(t, got.UpdatedAt.IsZero())
	assert.Equal(t, 1, f.Count("persons"))

	// Upsert updates through the same PUT, after its search and the read of the candidate.
	before = f.Requests()
	again, err := c.Upsert(ctx, "persons", "email", "upd@example.com", map[string]any{"first_name": "Augusta"})
	require.NoError(t, err)
	assert.Equal(t, r.ID, again.ID)
	assert.Equal(t, before+3, f.Requests())

	_, err = c.Update(ctx, "persons", "99999", map[string]any{"first_name": "Ada"})
	require.ErrorIs(t, err, crm.ErrNotFound)
	assert.Equal(t, 1, f.Count("persons"), "an update never creates")
	before = f.Requests()
	for _, id := range []string{"", "../users/me", "1?x=1"} {
		_, err = c.Update(ctx, "persons", id, nil)
		require.ErrorIs(t, err, crm.ErrNotFound, id)
	}
	assert.Equal(t, before, f.Requests(), "an id that is not a Pipedrive id reaches no URL")

	var pe *crm.ProviderError
	_, err = c.Update(ctx, "persons", r.ID, map[string]any{fake.KeySubscribed: 99.0})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	_, err = c.Update(ctx, "persons", r.ID, map[string]any{"name": ""})
	require.ErrorAs(t, err, &pe, "a person keeps its name")
	_, err = c.Update(ctx, "leads", r.ID, nil)
	assert.ErrorIs(t, err, crm.ErrNotFound, "an object the client does not write")
}

func TestUpdateErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	id := strconv.Itoa(f.Create("persons", map[string]any{"name": "Ada"}))

	f.SetRateLimit(1, time.Minute)
	_, err := c.Update(ctx, "persons", id, map[string]any{"first_name": "A"})
	require.NoError(t, err)
	_, err = c.Update(ctx, "persons", id, map[string]any{"first_name": "B"})
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl)
	assert.Positive(t, rl.RetryAfter)
	assert.LessOrEqual(t, rl.RetryAfter, time.Minute)
	f.SetRateLimit(0, 0)

	f.RevokeToken(fake.APIToken)
	_, err = c.Update(ctx, "persons", id, map[string]any{"first_name": "C"})
	assert.ErrorIs(t, err, crm.ErrUnauthorized, "a revoked key")
	assert.NotContains(t, err.Error(), fake.APIToken)
	n, _ := strconv.Atoi(id)
	stored, _ := f.Record("persons", n)
	assert.Equal(t, "A", stored.Props["first_name"], "only the admitted update wrote")
}
