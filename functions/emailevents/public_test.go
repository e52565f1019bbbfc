package emailevents

import (
	"bytes"
	"image/gif"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

// browser is what a person's mail app sends with a fetch.
var browser = []string{"User-Agent", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko)", "Accept-Language", "en-GB"}

// path returns the path of a URL the signer made.
func path(u string) string { return strings.TrimPrefix(u, "https://api.example") }

func assertPixel(t *testing.T, r httpapitest.Reply) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Equal(t, "image/gif", r.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	assert.Equal(t, string(pixel), r.Body)
}

func TestPixelIsATransparentGIF(t *testing.T) {
	t.Parallel()
	assert.Len(t, pixel, 43)
	img, err := gif.Decode(bytes.NewReader(pixel))
	require.NoError(t, err)
	assert.Equal(t, 1, img.Bounds().Dx())
	assert.Equal(t, 1, img.Bounds().Dy())
	_, _, _, a := img.At(0, 0).RGBA()
	assert.Zero(t, a, "the pixel is transparent")
}

func TestOpenPixel(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	u := path(s.links.OpenURL("https://api.example", s.ref))

	r := s.DoAs(t, "", "GET", u, nil, browser...)
	assertPixel(t, r)
	require.Len(t, s.camps.all(), 1)
	assert.Equal(t, recorded{Ref: s.ref, Ev: Event{Type: EventOpen, At: t0}}, s.camps.all()[0])

	// A tampered token, a token without .gif and a click token still get the pixel and
	// record nothing.
	tok := s.links.Token(emaillinks.Open, s.ref)
	for _, bad := range []string{
		"/e/t/o/A" + tok + ".gif",
		"/e/t/o/" + tok,
		"/e/t/o/" + s.links.Token(emaillinks.Click, s.ref) + ".gif",
		"/e/t/o/x.gif",
	} {
		assertPixel(t, s.DoAs(t, "", "GET", bad, nil, browser...))
	}
	assert.Len(t, s.camps.all(), 1, "recorded once")

	// A record that fails is logged; the pixel is served.
	s.camps.fail(errBoom)
	assertPixel(t, s.DoAs(t, "", "GET", u, nil, browser...))
	assert.Contains(t, s.logs.String(), "email open not recorded")
}

func TestMachineOpens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ua      string
		lang    string
		machine bool
	}{
		{"a mail app", browser[1], "en-GB", false},
		{"a browser without a language", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "", false},
		{"Apple Mail Privacy Protection", "Mozilla/5.0", "", true},
		{"bare Mozilla/5.0 with a language is a person", "Mozilla/5.0", "de", false},
		{"Gmail image proxy", "Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)", "", true},
		{"Yahoo Mail proxy", "YahooMailProxy; https://help.yahoo.com/kb/yahoo-mail-proxy-SLN28749.html", "", true},
		{"Outlook prefetch", "Microsoft Office/16.0 (Windows NT 10.0; Microsoft Outlook 16.0.17328; Pro)", "en-US", true},
		{"Outlook ms-office", "Mozilla/4.0 (compatible; ms-office; MSOffice 16)", "en-US", true},
		{"Barracuda", "Mozilla/5.0 (compatible; Barracuda Sentinel)", "", true},
		{"Mimecast", "Mimecast-URL-Protect/1.0", "", true},
		{"Proofpoint", "Mozilla/5.0 proofpoint URL Defense", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/e/t/o/x.gif", nil)
			r.Header.Set("User-Agent", tt.ua)
			if tt.lang != "" {
				r.Header.Set("Accept-Language", tt.lang)
			}
			assert.Equal(t, tt.machine, isMachine(r))
		})
	}

	// Through the route: the flag reaches campaigns.
	s := newServer(t, Config{})
	assertPixel(t, s.DoAs(t, "", "GET", path(s.links.OpenURL("https://api.example", s.ref)), nil, "User-Agent", "Mozilla/5.0"))
	require.Len(t, s.camps.all(), 1)
	assert.True(t, s.camps.all()[0].Ev.Machine)
}

func TestClickRedirect(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	u := path(s.links.ClickURL("https://api.example", s.ref, 1))

	// A URL in the query string is not where the click goes.
	r := s.DoAs(t, "", "GET", u+"?url=https://evil.example/", nil, browser...)
	require.Equal(t, http.StatusFound, r.Code, r.Body)
	assert.Equal(t, "https://shop.example/b", r.Header.Get("Location"))
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	want := s.ref
	want.Link = 1
	assert.Equal(t, []recorded{{Ref: want, Ev: Event{Type: EventClick, Link: 1, At: t0}}}, s.camps.all(), "the click of link 1")

	// A scanner's click is recorded as a machine's.
	r = s.DoAs(t, "", "GET", path(s.links.ClickURL("https://api.example", s.ref, 0)), nil, "User-Agent", "Mimecast-URL-Protect/1.0")
	require.Equal(t, http.StatusFound, r.Code)
	assert.Equal(t, "https://shop.example/spring?utm_source=email", r.Header.Get("Location"))
	require.Len(t, s.camps.all(), 2)
	assert.True(t, s.camps.all()[1].Ev.Machine)

	tok := s.links.Token(emaillinks.Click, emaillinks.Ref{Bot: s.bot, Campaign: "ecmp_1", Recipient: "rcp_ada", Link: 1})
	forged := strings.Replace(tok, tok[:4], "AAAA", 1)
	for name, bad := range map[string]string{
		"tampered":        "/e/t/c/" + forged,
		"open token":      "/e/t/c/" + s.links.Token(emaillinks.Open, s.ref),
		"unsubscribe":     "/e/t/c/" + s.links.Token(emaillinks.Unsubscribe, s.ref),
		"no such link":    path(s.links.ClickURL("https://api.example", s.ref, 7)),
		"garbage":         "/e/t/c/x",
		"other campaign":  path(s.links.ClickURL("https://api.example", emaillinks.Ref{Bot: s.bot, Campaign: "ecmp_2", Recipient: "rcp_ada"}, 0)),
		"query-only link": "/e/t/c/?url=https://evil.example/",
	} {
		r := s.DoAs(t, "", "GET", bad, nil, browser...)
		assert.Equal(t, http.StatusNotFound, r.Code, name)
		assert.Empty(t, r.Header.Get("Location"), name)
	}
	assert.Len(t, s.camps.all(), 2, "nothing recorded for refused clicks")

	// A link table entry that is no web URL is never a Location.
	s.camps.mu.Lock()
	s.camps.links["ecmp_1/2"] = "javascript:alert(1)"
	s.camps.mu.Unlock()
	r = s.DoAs(t, "", "GET", path(s.links.ClickURL("https://api.example", s.ref, 2)), nil, browser...)
	assert.Equal(t, http.StatusNotFound, r.Code)
	assert.Empty(t, r.Header.Get("Location"))

	// A record that fails does not keep the reader from the link.
	s.camps.fail(errBoom)
	r = s.DoAs(t, "", "GET", u, nil, browser...)
	assert.Equal(t, http.StatusFound, r.Code)
	assert.Equal(t, "https://shop.example/b", r.Header.Get("Location"))
	assert.Contains(t, s.logs.String(), "email click not recorded")
}

func TestUnsubscribe(t *testing.T) {
	t.Parallel()
	s := newServer(t, Config{})
	u := path(s.links.UnsubscribeURL("https://api.example", s.ref))

	// GET shows the page and changes nothing: link scanners follow GETs.
	r := s.DoAs(t, "", "GET", u, nil, browser...)
	require.Equal(t, http.StatusOK, r.Code)
	assert.Equal(t, "text/html; charset=utf-8", r.Header.Get("Content-Type"))
	assert.Contains(t, r.Header.Get("Content-Security-Policy"), "default-src 'none'")
	assert.Contains(t, r.Body, `<form method="post">`)
	assert.Contains(t, r.Body, ">Unsubscribe</button>")
	assert.NotContains(t, r.Body, "http", "no external resource, no link")
	assert.Empty(t, s.camps.all())
	assert.Nil(t, s.suppression(t, "ada@example.com"))

	// RFC 8058 one-click.
	oneClick := []string{"Content-Type", "application/x-www-form-urlencoded"}
	r = s.DoAs(t, "", "POST", u, []byte("List-Unsubscribe=One-Click"), oneClick...)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.Contains(t, r.Body, "You are unsubscribed")
	sup := s.suppression(t, "ada@example.com")
	require.NotNil(t, sup, "suppressed, lower-cased")
	assert.Equal(t, ReasonUnsubscribed, sup.Reason)
	assert.Equal(t, "ecmp_1", *sup.CampaignID)
	assert.Equal(t, []recorded{{Ref: s.ref, Ev: Event{Type: EventUnsubscribe, At: t0, Address: adaAddress}}}, s.camps.all())
	got, err := s.svc.Suppressed(t.Context(), s.bot, []string{"ADA@example.com", "bo@example.com"})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"ada@example.com": ReasonUnsubscribed}, got)

	// The page's form, again: idempotent.
	r = s.DoAs(t, "", "POST", u, []byte("List-Unsubscribe=One-Click"), oneClick...)
	require.Equal(t, http.StatusOK, r.Code)
	assert.Equal(t, int64(1), s.suppression(t, "ada@example.com").Revision, "the suppression did not change")

	// Bad tokens: 404 pages, nothing done.
	before := len(s.camps.all())
	for _, bad := range []string{"/u/x", "/u/" + s.links.Token(emaillinks.Click, s.ref), u + "A"} {
		for _, m := range []string{"GET", "POST"} {
			r = s.DoAs(t, "", m, bad, nil)
			assert.Equal(t, http.StatusNotFound, r.Code, m+" "+bad)
			assert.Contains(t, r.Body, "Link not valid")
		}
	}
	assert.Len(t, s.camps.all(), before)

	// A recipient campaigns no longer has: 404.
	gone := path(s.links.UnsubscribeURL("https://api.example", emaillinks.Ref{Bot: s.bot, Campaign: "ecmp_1", Recipient: "rcp_gone"}))
	assert.Equal(t, http.StatusNotFound, s.DoAs(t, "", "POST", gone, nil).Code)

	// A failure is a page too, and logged without the address.
	s.camps.fail(errBoom)
	bo := path(s.links.UnsubscribeURL("https://api.example", emaillinks.Ref{Bot: s.bot, Campaign: "ecmp_1", Recipient: "rcp_bo"}))
	r = s.DoAs(t, "", "POST", bo, nil)
	assert.Equal(t, http.StatusInternalServerError, r.Code)
	assert.Contains(t, r.Body, "Please try again")
	assert.NotContains(t, s.logs.String(), "bo@example.com")
	assert.NotContains(t, strings.ToLower(s.logs.String()), "ada@example.com")
}

func TestWithoutCampaigns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	f.svc.campaigns = nil
	f.svc.RecordOpen(t.Context(), f.links.Token(emaillinks.Open, f.ref), false) // nothing to record with, no panic
	_, err := f.svc.Click(t.Context(), f.links.Token(emaillinks.Click, f.ref), false)
	assert.Equal(t, http.StatusServiceUnavailable, httpapitest.AsError(t, err).Status())
	err = f.svc.Unsubscribe(t.Context(), f.links.Token(emaillinks.Unsubscribe, f.ref))
	assert.Equal(t, http.StatusServiceUnavailable, httpapitest.AsError(t, err).Status())
}
