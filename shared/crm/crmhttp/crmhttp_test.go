package crmhttp_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/crm/crmhttp"
)

func TestRefusal(t *testing.T) {
	t.Parallel()
	assert.ErrorIs(t, crmhttp.Refusal(401, "x", "bad token", 0), crm.ErrUnauthorized)
	assert.ErrorIs(t, crmhttp.Refusal(403, "", "", 0), crm.ErrForbidden)
	assert.ErrorIs(t, crmhttp.Refusal(404, "NOT_FOUND", "gone", 0), crm.ErrNotFound)
	var rl *crm.RateLimitedError
	require.ErrorAs(t, crmhttp.Refusal(429, "", "", 7*time.Second), &rl)
	assert.Equal(t, 7*time.Second, rl.RetryAfter)
	var pe *crm.ProviderError
	require.ErrorAs(t, crmhttp.Refusal(503, "", "down", 0), &pe)
	assert.True(t, pe.Temporary)
	require.ErrorAs(t, crmhttp.Refusal(400, "VALIDATION", strings.Repeat("é", 600), 0), &pe)
	assert.False(t, pe.Temporary)
	assert.Equal(t, "VALIDATION", pe.Code)
	assert.LessOrEqual(t, len(pe.Message), 500, "messages are bounded, on a rune boundary")
	assert.True(t, strings.HasSuffix(pe.Message, "é"))
}

func TestTokenError(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	refused := &oauth2.RetrieveError{Response: &http.Response{StatusCode: 400}, Body: []byte(`{"status":"BAD_REFRESH_TOKEN"}`)}
	assert.ErrorIs(t, crmhttp.TokenError(ctx, refused), crm.ErrUnauthorized)
	down := &oauth2.RetrieveError{Response: &http.Response{StatusCode: 502}}
	var pe *crm.ProviderError
	require.ErrorAs(t, crmhttp.TokenError(ctx, down), &pe)
	assert.True(t, pe.Temporary)
	assert.NoError(t, crmhttp.TokenError(ctx, nil))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	assert.ErrorIs(t, crmhttp.TokenError(canceled, errors.New("x")), context.Canceled)
}

func TestDo(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			_, _ = w.Write([]byte(`"` + strings.Repeat("a", crmhttp.MaxResponseBytes) + `"`))
		case "/echo":
			// A provider that echoes the credential in its error.
			w.WriteHeader(400)
			_, _ = w.Write([]byte("bad key " + r.Header.Get("X-Key")))
		case "/redirect":
			http.Redirect(w, r, "https://elsewhere.example/", http.StatusFound)
		default:
			_, _ = w.Write([]byte(`{"ok":true}`))
		}
	}))
	t.Cleanup(srv.Close)
	var seen string
	c := crmhttp.Client{HTTP: crmhttp.NewHTTPClient(true),
		Auth: func(_ context.Context, r *http.Request) (string, error) {
			r.Header.Set("X-Key", "s3cret")
			return "s3cret", nil
		},
		Refuse: func(res *http.Response, body []byte) error {
			seen = string(body)
			return crmhttp.Refusal(res.StatusCode, "", string(body), 0)
		}}
	var out struct{ OK bool }
	require.NoError(t, c.Do(t.Context(), crmhttp.Request{Method: "GET", URL: srv.URL + "/"}, &out))
	assert.True(t, out.OK)

	err := c.Do(t.Context(), crmhttp.Request{Method: "GET", URL: srv.URL + "/big"}, &out)
	var pe *crm.ProviderError
	require.ErrorAs(t, err, &pe, "an answer beyond the bound is refused, not truncated")
	assert.Equal(t, "too_large", pe.Code)

	err = c.Do(t.Context(), crmhttp.Request{Method: "GET", URL: srv.URL + "/echo"}, nil)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.NotContains(t, seen, "s3cret")

	err = c.Do(t.Context(), crmhttp.Request{Method: "GET", URL: srv.URL + "/redirect"}, nil)
	require.ErrorAs(t, err, &pe, "a redirect is not followed")
	assert.Equal(t, 302, pe.Status)

	err = c.Do(t.Context(), crmhttp.Request{Method: "GET", URL: "http://127.0.0.1:1/path?token=s3cret"}, nil)
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.NotContains(t, err.Error(), "s3cret")
	assert.NotContains(t, err.Error(), "127.0.0.1:1/path")
}

func TestCheckInstanceURL(t *testing.T) {
	t.Parallel()
	u, err := crmhttp.CheckInstanceURL("https://acme.my.salesforce.com/", false)
	require.NoError(t, err)
	assert.Equal(t, "https://acme.my.salesforce.com", u)
	_, err = crmhttp.CheckInstanceURL("http://acme.example", false)
	assert.Error(t, err)
	_, err = crmhttp.CheckInstanceURL("http://127.0.0.1:8080", true)
	assert.NoError(t, err)
	_, err = crmhttp.CheckInstanceURL("https://u:p@acme.example", false)
	assert.Error(t, err)
}

// Values checks every name and writes times in the provider's layout, other values as given.
func TestValues(t *testing.T) {
	t.Parallel()
	check := func(names ...string) error {
		for _, n := range names {
			if strings.ContainsAny(n, " '") {
				return errors.New("bad name " + n)
			}
		}
		return nil
	}
	at := time.Date(2026, 11, 26, 12, 0, 0, 0, time.FixedZone("x", 3600))
	got, err := crmhttp.Values(map[string]any{"n": 1.5, "s": "x", "t": at, "z": nil}, check, time.RFC3339)
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"n": 1.5, "s": "x", "t": "2026-11-26T11:00:00Z", "z": nil}, got)
	_, err = crmhttp.Values(map[string]any{"a' or 1=1": "x"}, check, time.RFC3339)
	assert.Error(t, err)
}
