package crmfake

import (
	"net/url"
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
