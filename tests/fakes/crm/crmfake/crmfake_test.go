package crmfake

import (
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The limit is a sliding window: a request is refused while the window holds n requests,
// with the time until the oldest leaves it.
func TestTrafficSlidingWindow(t *testing.T) {
	t.Parallel()
	var clock Clock
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	tr := NewTraffic(&clock)
	tr.SetLimit(2, time.Second)
	assert.False(t, tr.Admit().Limited)
	advance(600 * time.Millisecond)
	v := tr.Admit()
	assert.False(t, v.Limited)
	assert.Equal(t, 0, v.Remaining)
	v = tr.Admit()
	require.True(t, v.Limited)
	assert.Equal(t, 400*time.Millisecond, v.RetryAfter)
	advance(400 * time.Millisecond)
	assert.False(t, tr.Admit().Limited, "the first left the window")
	tr.FailNext(1, 503)
	tr.SetLimit(0, 0)
	assert.Equal(t, 503, tr.Admit().Fail)
	assert.Equal(t, 0, tr.Admit().Fail, "once")
	assert.Equal(t, 6, tr.Requests())
	assert.Equal(t, 1, tr.Limited())
}

func TestOAuthCodeExpiresAndPKCE(t *testing.T) {
	t.Parallel()
	var clock Clock
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock.Set(func() time.Time { mu.Lock(); defer mu.Unlock(); return now })
	o := NewOAuth(&clock, time.Minute)
	o.AddApp(App{ClientID: "c", ClientSecret: "s", RedirectURI: "https://x.example/cb"})
	verifier := "0123456789012345678901234567890123456789abc"
	q := url.Values{"client_id": {"c"}, "redirect_uri": {"https://x.example/cb"}, "response_type": {"code"},
		"code_challenge_method": {"S256"}, "code_challenge": {s256(verifier)}, "state": {"st"}}
	to, oerr := o.Authorize(q)
	require.Nil(t, oerr)
	u, _ := url.Parse(to)
	code := u.Query().Get("code")
	mu.Lock()
	now = now.Add(11 * time.Minute)
	mu.Unlock()
	form := url.Values{"grant_type": {"authorization_code"}, "client_id": {"c"}, "client_secret": {"s"}, "code": {code},
		"redirect_uri": {"https://x.example/cb"}, "code_verifier": {verifier}}
	_, oerr = o.Exchange(form)
	require.NotNil(t, oerr)
	assert.Equal(t, "authorization code expired", oerr.Description)
}

// Put creates a record with the id given when there is none, and merges into it otherwise.
func TestRecordsPut(t *testing.T) {
	t.Parallel()
	var clock Clock
	s := NewRecords(&clock, func(string, int) string { return "generated" })
	rec, created := s.Put("contacts", "id-1", map[string]any{"a": "1", "b": "2"})
	require.True(t, created)
	assert.Equal(t, "id-1", rec.ID)
	assert.Equal(t, rec.Created, rec.Updated)
	rec, created = s.Put("contacts", "id-1", map[string]any{"b": nil, "c": "3"})
	require.False(t, created)
	assert.Equal(t, map[string]any{"a": "1", "c": "3"}, rec.Props)
	assert.Equal(t, 1, s.Count("contacts"))
	assert.Len(t, s.All("contacts"), 1, "one record, in the creation order once")
	_, found := s.Update("contacts", "id-1", map[string]any{"d": "4"})
	assert.True(t, found)
}

// FindFold answers what a scan would, in creation order, as records are created, changed,
// upserted and deleted after the property was first indexed.
func TestFindFoldFollowsWrites(t *testing.T) {
	t.Parallel()
	var clock Clock
	s := NewRecords(&clock, func(_ string, n int) string { return strconv.Itoa(n) })
	emails := func(v ...string) []any {
		out := []any{}
		for _, e := range v {
			out = append(out, map[string]any{"value": e})
		}
		return out
	}
	ids := func(recs []Record) []string {
		out := []string{}
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	a := s.Create("persons", map[string]any{"email": emails("Ann@example.com")})
	assert.Equal(t, []string{a.ID}, ids(s.FindFold("persons", []string{"email"}, "ann@EXAMPLE.com")), "indexed on first use")
	b := s.Create("persons", map[string]any{"email": emails("bob@example.com", "ann@example.com")})
	assert.Equal(t, []string{a.ID, b.ID}, ids(s.FindFold("persons", []string{"email"}, "ann@example.com")), "a later create, in creation order")
	s.Update("persons", a.ID, map[string]any{"email": emails("ann@work.example")})
	assert.Equal(t, []string{b.ID}, ids(s.FindFold("persons", []string{"email"}, "ann@example.com")), "an update moves it")
	assert.Equal(t, []string{a.ID}, ids(s.FindFold("persons", []string{"email", "name"}, "ANN@work.example")))
	s.Put("persons", "x9", map[string]any{"name": "ann@work.example"})
	assert.Equal(t, []string{a.ID, "x9"}, ids(s.FindFold("persons", []string{"name", "email"}, "ann@work.example")), "a put-created record, on another key")
	s.Update("persons", b.ID, map[string]any{"email": nil})
	assert.Empty(t, ids(s.FindFold("persons", []string{"email"}, "bob@example.com")), "a removed property")
	s.Delete("persons", a.ID)
	assert.Empty(t, ids(s.FindFold("persons", []string{"email"}, "ann@work.example")), "a deleted record")
	assert.Empty(t, ids(s.FindFold("deals", []string{"title"}, "x")), "an object with no records")
	// The match is EqualFold's, not lowering's: the long s folds to s but lowers to itself.
	l := s.Create("persons", map[string]any{"name": "Ro\u017fa \u212aing"})
	assert.Equal(t, []string{l.ID}, ids(s.FindFold("persons", []string{"name"}, "ROSA king")))
	assert.True(t, strings.EqualFold("Ro\u017fa \u212aing", "ROSA king"), "the case above is one EqualFold accepts")
}
