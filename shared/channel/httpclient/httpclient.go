// Package httpclient is the HTTP plumbing the channel adapters share: the rules every
// provider client must apply the same way (what a configured base URL may be, that a
// transport error must not carry the request URL, how Retry-After is read, which addresses a
// customer-given media URL may reach). They live here once so that a fix to one of them, such
// as an address range the download guard missed, reaches every adapter. What differs between
// providers (timeouts, response envelopes, error mapping) stays in the adapters.
package httpclient

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CheckBaseURL reports whether s can be a provider's base URL: an absolute http or https URL
// with a host and no user info, query or fragment, since adapters append method names and
// paths to it.
func CheckBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("must be an absolute http or https URL")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return errors.New("must have no user info, query or fragment")
	}
	return nil
}

// NoRedirects is an http.Client CheckRedirect policy that hands back the redirect response
// instead of following it: provider APIs never redirect, and following one could carry a
// credential (a token in the URL or a header) to another host.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// LimitRedirects is an http.Client CheckRedirect policy for fetching customer-given URLs: at
// most n redirects, each to an http or https URL.
func LimitRedirects(n int) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if len(via) >= n {
			return errors.New("stopped after " + strconv.Itoa(n) + " redirects")
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return errors.New("redirect to a non-http URL")
		}
		return nil
	}
}

// WithoutURL returns the cause of the *url.Error in err's chain, or err when there is none.
// net/http wraps every transport failure in a *url.Error that quotes the request URL, and a
// URL may hold a credential (the Bot API token, VK's one-time upload URL), so an adapter
// keeps only the cause for its errors, logs and traces.
func WithoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// RetryAfter reads a Retry-After header value as of now: delay-seconds or an HTTP date. It
// is 0 when the value is absent, malformed, negative or in the past, which callers read as
// "the provider did not say".
func RetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(n, 0)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// ErrNotPublic is the dial error of a PublicTransport that refused an address; match it with
// errors.Is to tell a refused media URL from an unreachable one.
var ErrNotPublic = errors.New("the address is not a public one")

// cgnat is the shared address space of carrier-grade NAT (RFC 6598): not routable on the
// internet, and inside some deployments' networks.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Public reports whether a is a public unicast address: not loopback, private, link-local
// (the instance metadata service is 169.254.169.254), CGNAT, multicast, broadcast or
// unspecified. An IPv4-mapped IPv6 address is judged as the IPv4 address it maps.
func Public(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!cgnat.Contains(a) && !a.IsMulticast() && !a.IsUnspecified()
}

// PublicTransport returns a transport for fetching customer-given URLs (media to send or to
// upload). Unless allowPrivate (the local process, tests), it connects only to Public
// addresses, checked on the resolved address at dial time so that neither DNS nor a redirect
// can smuggle a private one in; and it never uses a proxy, which would dial in its place,
// past the check. Its timeouts bound connecting and the TLS handshake; callers add the
// response deadlines their use needs.
func PublicTransport(allowPrivate bool) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = dialPublic
	}
	return &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

// dialPublic is a net.Dialer Control function: it runs after name resolution, on the address
// about to be connected to.
func dialPublic(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	if !Public(ap.Addr()) {
		return ErrNotPublic
	}
	return nil
}
