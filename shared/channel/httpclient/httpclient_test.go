package httpclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel/httpclient"
)

func TestCheckBaseURL(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"https://api.telegram.org", "https://graph.facebook.com/v21.0", "http://127.0.0.1:8081/method"} {
		assert.NoError(t, httpclient.CheckBaseURL(ok), ok)
	}
	for _, bad := range []string{"", "api.vk.com/method", "ftp://x/method", "https:///path", "mailto:a@b",
		"https://u:p@x/method", "https://x/method?v=1", "https://x/method#f"} {
		assert.Error(t, httpclient.CheckBaseURL(bad), bad)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		assert.Equal(t, tc.want, httpclient.RetryAfter(tc.value, now), "%q", tc.value)
	}
}

func TestWithoutURL(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection refused")
	err := &url.Error{Op: "Post", URL: "https://api.telegram.org/bot42:SECRET/sendMessage", Err: cause}
	assert.Equal(t, cause, httpclient.WithoutURL(err))
	assert.Equal(t, cause, httpclient.WithoutURL(cause), "an error without a URL stays as it is")
}

func TestPublic(t *testing.T) {
	t.Parallel()
	for addr, public := range map[string]bool{
		"93.184.216.34":        true,
		"2606:4700::6810:84e5": true,
		"127.0.0.1":            false,
		"::1":                  false,
		"10.1.2.3":             false,
		"172.16.0.1":           false,
		"192.168.1.1":          false,
		"169.254.169.254":      false, // instance metadata
		"fe80::1":              false,
		"fd00::1":              false,
		"100.64.0.1":           false, // CGNAT
		"0.0.0.0":              false,
		"::":                   false,
		"224.0.0.1":            false,
		"255.255.255.255":      false,
		"::ffff:127.0.0.1":     false,
		"::ffff:93.184.216.34": true,
	} {
		assert.Equal(t, public, httpclient.Public(netip.MustParseAddr(addr)), addr)
	}
}

func TestPublicTransport(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("ok"))
	}))
	t.Cleanup(srv.Close)
	get := func(c *http.Client, path string) error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+path, nil)
		require.NoError(t, err)
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}

	guarded := &http.Client{Transport: httpclient.PublicTransport(false)}
	assert.ErrorIs(t, get(guarded, "/"), httpclient.ErrNotPublic, "loopback is refused")

	open := &http.Client{Transport: httpclient.PublicTransport(true), CheckRedirect: httpclient.LimitRedirects(3)}
	assert.NoError(t, get(open, "/"))
	err := get(open, "/loop")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stopped after 3 redirects")
}

func TestNoRedirects(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.RedirectHandler("https://elsewhere.example/", http.StatusTemporaryRedirect))
	t.Cleanup(srv.Close)
	c := &http.Client{CheckRedirect: httpclient.NoRedirects}
	res, err := c.Get(srv.URL)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusTemporaryRedirect, res.StatusCode, "the redirect comes back as the answer")
}
