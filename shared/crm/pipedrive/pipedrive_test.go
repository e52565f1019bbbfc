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

// tickingClock makes the fake's clock move a second at every reading, from base.
func tickingClock(f *fake.Server, base time.Time) {
	var mu sync.Mutex
	now := base
	f.Clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(time.Second); return now })
}

func TestOpenDeal(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	ada := f.Create("persons", map[string]any{"name": "Ada", "email": "ada@example.com"})
	in := crm.DealInput{Pipeline: "1", Stage: "2", Name: "Chat lead"}

	before := f.Requests()
	d, created, err := c.OpenDeal(ctx, "persons", strconv.Itoa(ada), in)
	require.NoError(t, err)
	require.True(t, created)
	assert.Equal(t, before+2, f.Requests(), "the person's open deals, then the create")
	assert.Equal(t, "Chat lead", d.Name)
	assert.Equal(t, "1", d.Pipeline)
	assert.Equal(t, "2", d.Stage)
	assert.Equal(t, crm.DealOpen, d.Status)
	require.NotNil(t, d.Amount, "Pipedrive gives a new deal the value 0")
	assert.Equal(t, 0.0, *d.Amount)
	assert.Equal(t, fake.Currency, d.Currency)
	assert.False(t, d.UpdatedAt.IsZero())
	id, _ := strconv.Atoi(d.ID)
	stored, found := f.Record("deals", id)
	require.True(t, found)
	assert.Equal(t, ada, stored.Props["person_id"], "linked to the person")
	assert.Equal(t, 1, stored.Props["pipeline_id"])
	assert.Equal(t, 2, stored.Props["stage_id"])

	// A repeated call (a resumed job) finds the deal instead of opening another.
	before = f.Requests()
	again, created, err := c.OpenDeal(ctx, "persons", strconv.Itoa(ada), in)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, d.ID, again.ID)
	assert.Equal(t, before+1, f.Requests(), "one read finds it")
	assert.Equal(t, 1, f.Count("deals"))

	// A deal moved on by a user is still the open one, wherever it stands in the pipeline.
	require.True(t, f.Change("deals", id, map[string]any{"stage_id": 3}))
	again, created, err = c.OpenDeal(ctx, "persons", strconv.Itoa(ada), in)
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, d.ID, again.ID)
	assert.Equal(t, "3", again.Stage)

	// A won or lost deal is not open: the next call opens a new one.
	for _, status := range []string{crm.DealWon, crm.DealLost} {
		require.True(t, f.Change("deals", id, map[string]any{"status": status}))
		next, created, err := c.OpenDeal(ctx, "persons", strconv.Itoa(ada), in)
		require.NoError(t, err)
		assert.True(t, created, status)
		assert.NotEqual(t, d.ID, next.ID, status)
		id, _ = strconv.Atoi(next.ID)
	}
	assert.Equal(t, 3, f.Count("deals"))
}

func TestOpenDealPipelines(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	bob := f.Create("persons", map[string]any{"name": "Bob"})
	partners := f.Create("deals", map[string]any{"title": "Partnership", "person_id": bob, "stage_id": 10})
	stored, _ := f.Record("deals", partners)
	require.Equal(t, 2, stored.Props["pipeline_id"], "the pipeline follows the stage")

	// An open deal of another pipeline does not count.
	sales, created, err := c.OpenDeal(ctx, "persons", strconv.Itoa(bob), crm.DealInput{Pipeline: "1", Stage: "1", Name: "Sale"})
	require.NoError(t, err)
	assert.True(t, created)
	assert.NotEqual(t, strconv.Itoa(partners), sales.ID)
	got, created, err := c.OpenDeal(ctx, "persons", strconv.Itoa(bob), crm.DealInput{Pipeline: "2", Stage: "10", Name: "Other"})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, strconv.Itoa(partners), got.ID)
	assert.Equal(t, "Partnership", got.Name, "the existing deal keeps its title")

	// With two open deals in the pipeline, the lowest id wins, however recently the other
	// changed; another person's deal is never seen.
	eve := f.Create("persons", map[string]any{"name": "Eve"})
	f.Create("deals", map[string]any{"title": "Eve's", "person_id": eve, "stage_id": 1})
	first := f.Create("deals", map[string]any{"title": "First", "person_id": bob, "stage_id": 2})
	second := f.Create("deals", map[string]any{"title": "Second", "person_id": bob, "stage_id": 3})
	require.True(t, f.Change("deals", second, map[string]any{"value": 10.0}))
	require.True(t, f.Change("deals", mustAtoi(t, sales.ID), map[string]any{"status": "lost"}))
	got, created, err = c.OpenDeal(ctx, "persons", strconv.Itoa(bob), crm.DealInput{Pipeline: "1", Stage: "1", Name: "Sale"})
	require.NoError(t, err)
	assert.False(t, created)
	assert.Equal(t, strconv.Itoa(first), got.ID)
	assert.Equal(t, 5, f.Count("deals"))
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}

func TestOpenDealErrors(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	ada := strconv.Itoa(f.Create("persons", map[string]any{"name": "Ada"}))
	in := crm.DealInput{Pipeline: "1", Stage: "2", Name: "Chat lead"}

	_, _, err := c.OpenDeal(ctx, "persons", "99999", in)
	require.ErrorIs(t, err, crm.ErrNotFound, "Pipedrive answers 404 for the deals of an unknown person")

	var pe *crm.ProviderError
	_, _, err = c.OpenDeal(ctx, "persons", ada, crm.DealInput{Pipeline: "1", Stage: "99", Name: "x"})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 400, pe.Status)
	assert.Equal(t, "Stage not found.", pe.Message)
	_, _, err = c.OpenDeal(ctx, "persons", ada, crm.DealInput{Pipeline: "1", Stage: "10", Name: "x"})
	require.ErrorAs(t, err, &pe, "a stage of another pipeline")
	assert.Equal(t, 400, pe.Status)
	assert.Contains(t, pe.Message, "does not belong to pipeline 1")
	_, _, err = c.OpenDeal(ctx, "persons", ada, crm.DealInput{Pipeline: "7", Stage: "1", Name: "x"})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "Pipeline not found.", pe.Message)
	_, _, err = c.OpenDeal(ctx, "persons", ada, crm.DealInput{Pipeline: "1", Stage: "1"})
	require.ErrorAs(t, err, &pe, "a deal needs a title")
	assert.Equal(t, 0, f.Count("deals"))

	before := f.Requests()
	for _, bad := range []struct{ object, id string }{{"persons", "../users/me"}, {"persons", ""}, {"leads", "1"}} {
		_, _, err = c.OpenDeal(ctx, bad.object, bad.id, in)
		require.ErrorIs(t, err, crm.ErrNotFound, bad)
		_, err = c.Deals(ctx, bad.object, bad.id)
		require.ErrorIs(t, err, crm.ErrNotFound, bad)
	}
	_, _, err = c.OpenDeal(ctx, "organizations", ada, in)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_object", pe.Code)
	_, _, err = c.OpenDeal(ctx, "persons", ada, crm.DealInput{Pipeline: "Sales", Stage: "1", Name: "x"})
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_pipeline", pe.Code)
	assert.Equal(t, before, f.Requests(), "what cannot be a Pipedrive id reaches no URL")

	// The traffic gate applies to the deal routes as to the others.
	f.FailNext(1, 503)
	_, _, err = c.OpenDeal(ctx, "persons", ada, in)
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, 0, f.Count("deals"))
	f.SetRateLimit(1, time.Minute)
	_, _, err = c.OpenDeal(ctx, "persons", ada, in)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, err, &rl, "the create is over the limit")
	assert.Equal(t, 0, f.Count("deals"))
	f.SetRateLimit(0, 0)
	f.RevokeToken(fake.APIToken)
	_, _, err = c.OpenDeal(ctx, "persons", ada, in)
	assert.ErrorIs(t, err, crm.ErrUnauthorized)
}

func TestDeals(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	ctx := t.Context()
	tickingClock(f, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ada := f.Create("persons", map[string]any{"name": "Ada"})
	other := f.Create("persons", map[string]any{"name": "Other"})
	won := f.Create("deals", map[string]any{"title": "Won", "person_id": ada, "stage_id": 1, "value": 250.5, "currency": "USD"})
	lost := f.Create("deals", map[string]any{"title": "Lost", "person_id": ada, "stage_id": 10})
	gone := f.Create("deals", map[string]any{"title": "Deleted", "person_id": ada, "stage_id": 1})
	f.Create("deals", map[string]any{"title": "Not Ada's", "person_id": other, "stage_id": 1})
	open := f.Create("deals", map[string]any{"title": "Open", "person_id": ada, "stage_id": 2, "value": 40})
	require.True(t, f.Change("deals", lost, map[string]any{"status": "lost", "value": nil, "currency": nil}))
	require.True(t, f.Change("deals", gone, map[string]any{"status": "deleted"}))
	require.True(t, f.Change("deals", won, map[string]any{"status": "won", "stage_id": 3}))
	require.True(t, f.Change("deals", open, map[string]any{"stage_id": 3})) // the newest deal changed last

	before := f.Requests()
	deals, err := c.Deals(ctx, "persons", strconv.Itoa(ada))
	require.NoError(t, err)
	assert.Equal(t, before+1, f.Requests())
	require.Len(t, deals, 3, "not deleted, Ada's only")
	ids := []string{deals[0].ID, deals[1].ID, deals[2].ID}
	assert.Equal(t, []string{strconv.Itoa(open), strconv.Itoa(won), strconv.Itoa(lost)}, ids, "most recently changed first")
	assert.True(t, deals[0].UpdatedAt.After(deals[1].UpdatedAt))
	assert.True(t, deals[1].UpdatedAt.After(deals[2].UpdatedAt))

	assert.Equal(t, crm.DealOpen, deals[0].Status)
	assert.Equal(t, "3", deals[0].Stage)
	require.NotNil(t, deals[0].Amount)
	assert.Equal(t, 40.0, *deals[0].Amount)
	assert.Equal(t, fake.Currency, deals[0].Currency)
	assert.Equal(t, time.Date(2026, 3, 1, 12, 0, 11, 0, time.UTC), deals[0].UpdatedAt, "update_time, in UTC")
	amount := 250.5
	assert.Equal(t, crm.Deal{ID: strconv.Itoa(won), Name: "Won", Pipeline: "1", Stage: "3", Status: crm.DealWon, Amount: &amount,
		Currency: "USD", UpdatedAt: time.Date(2026, 3, 1, 12, 0, 10, 0, time.UTC)}, deals[1])
	assert.Equal(t, crm.DealLost, deals[2].Status)
	assert.Equal(t, "2", deals[2].Pipeline)
	assert.Equal(t, "10", deals[2].Stage)
	assert.Nil(t, deals[2].Amount, "a deal without a value has no amount")
	assert.Empty(t, deals[2].Currency)

	none, err := c.Deals(ctx, "persons", strconv.Itoa(f.Create("persons", map[string]any{"name": "New"})))
	require.NoError(t, err, "Pipedrive answers data null for a person without deals")
	assert.Empty(t, none)
	_, err = c.Deals(ctx, "persons", "99999")
	assert.ErrorIs(t, err, crm.ErrNotFound)
}

func TestDealsChangedSince(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	c := newClient(t, f)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tickingClock(f, base)
	ada := f.Create("persons", map[string]any{"name": "Ada"}) // base+1s
	var ids []int
	for i := range 220 { // deal i at base+2s+i
		ids = append(ids, f.Create("deals", map[string]any{"title": fmt.Sprint("D", i), "person_id": ada, "stage_id": 1}))
	}
	require.True(t, f.Change("deals", ids[0], map[string]any{"status": "won"}))
	require.True(t, f.Change("deals", ids[120], map[string]any{"status": "deleted"}))

	var got []crm.Deal
	cursor, pages := "", 0
	for {
		deals, next, err := c.DealsChangedSince(t.Context(), base.Add(52*time.Second), cursor)
		require.NoError(t, err)
		pages++
		got = append(got, deals...)
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, 2, pages)
	require.Len(t, got, 170, "deals 50..219 but the deleted one, and the one won since")
	assert.Equal(t, strconv.Itoa(ids[50]), got[0].ID, "oldest first")
	last := got[len(got)-1]
	assert.Equal(t, strconv.Itoa(ids[0]), last.ID)
	assert.Equal(t, crm.DealWon, last.Status)
	seen := map[string]bool{}
	for i, d := range got {
		seen[d.ID] = true
		if i > 0 {
			assert.False(t, d.UpdatedAt.Before(got[i-1].UpdatedAt))
		}
		assert.False(t, d.UpdatedAt.Before(base.Add(52*time.Second)), d.ID)
	}
	assert.False(t, seen[strconv.Itoa(ids[49])], "changed before since")
	assert.False(t, seen[strconv.Itoa(ids[120])], "deleted")
	assert.Equal(t, "1", got[0].Pipeline)
	assert.Equal(t, "1", got[0].Stage)
	assert.Equal(t, "D50", got[0].Name)
	for _, u := range f.RequestURIs() {
		if strings.Contains(u, "recents") {
			assert.Contains(t, u, "items=deal")
		}
	}

	_, _, err := c.DealsChangedSince(t.Context(), base, "not-a-cursor")
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "invalid_cursor", pe.Code)
}
