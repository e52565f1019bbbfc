package webpush

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/SherClockHolmes/webpush-go"

	"github.com/botplatform/api/shared/channel/httpclient"
	"github.com/botplatform/api/shared/pushendpoint"
)

// MaxEndpointLen bounds an endpoint URL: the bound the customer SDK accepts endpoints
// under (shared/pushendpoint), so that none it stored is refused here for its length.
const MaxEndpointLen = pushendpoint.MaxLength

// DefaultTTL is how long a push service keeps an undelivered test message.
const DefaultTTL = 24 * time.Hour

// PushOptions configure a Pusher.
type PushOptions struct {
	// AllowLoopback lets endpoints be http or https URLs on a loopback address
	// (127.0.0.0/8, ::1, localhost): a push service emulator on the same machine. Only the
	// local process sets it, on an explicit option (docs/webpush.md); every other private
	// address stays refused.
	AllowLoopback bool
	// HTTPClient sends the requests; nil is a client that connects to public addresses only
	// (and loopback ones with AllowLoopback), follows no redirect and gives up after 30 s.
	// Benchmarks pass one that answers without a network.
	HTTPClient webpush.HTTPClient
	// TTL is the push service's time to live of a message; 0 is DefaultTTL.
	TTL time.Duration
}

// Pusher encrypts, signs and posts messages to push services.
type Pusher struct {
	opts PushOptions
}

// NewPusher returns a Pusher.
func NewPusher(o PushOptions) *Pusher {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.HTTPClient == nil {
		o.HTTPClient = guardedClient(o.AllowLoopback)
	}
	return &Pusher{opts: o}
}

// VAPID is the key pair and subject a message is signed with.
type VAPID struct {
	PublicKey  string
	PrivateKey string
	Subject    string
}

// Outcome is what a push service answered.
type Outcome struct {
	// Status is the push service's HTTP status.
	Status int
	// Gone: the subscription no longer exists (404 or 410); it must be expired.
	Gone bool
	// RetryAfter is the push service's Retry-After (429, 503), 0 when it gave none.
	RetryAfter time.Duration
}

// errEndpoint is the error of an endpoint this deployment does not send to.
type errEndpoint struct{ reason string }

func (e errEndpoint) Error() string { return "the subscription's endpoint is refused: " + e.reason }

// ErrEndpointRefused matches (errors.Is) the error of an endpoint that is not an https URL
// on a public address (or, with AllowLoopback, a loopback one).
var ErrEndpointRefused = errors.New("endpoint refused")

func (e errEndpoint) Is(target error) bool { return target == ErrEndpointRefused }

// CheckEndpoint reports why endpoint is not one to send to: the endpoint comes from a
// browser, that is from anyone, so it must be https on a host that is not an address
// literal of a private network. The dial guard checks the resolved address as well.
func (p *Pusher) CheckEndpoint(endpoint string) error {
	if len(endpoint) > MaxEndpointLen {
		return errEndpoint{"longer than " + fmt.Sprint(MaxEndpointLen) + " characters"}
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return errEndpoint{"not an absolute URL"}
	}
	if u.User != nil || u.Fragment != "" {
		return errEndpoint{"has user info or a fragment"}
	}
	host := strings.ToLower(u.Hostname())
	loopback := host == "localhost"
	if a, err := netip.ParseAddr(host); err == nil {
		loopback = a.Unmap().IsLoopback()
		if !loopback && !httpclient.Public(a) {
			return errEndpoint{"points into a private network"}
		}
	}
	if loopback && !p.opts.AllowLoopback {
		return errEndpoint{"points at this machine"}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopback:
	default:
		return errEndpoint{"not an https URL"}
	}
	return nil
}

// Send encrypts payload for target (RFC 8291, aes128gcm), signs the request for the
// endpoint's origin with v (RFC 8292) and posts it. An error is a refused endpoint, bad keys
// or a failed connection (without the endpoint in its text); any answer of the push service
// is an Outcome.
func (p *Pusher) Send(ctx context.Context, target Target, v VAPID, payload []byte) (Outcome, error) {
	if err := p.CheckEndpoint(target.Endpoint); err != nil {
		return Outcome{}, err
	}
	res, err := webpush.SendNotificationWithContext(ctx, payload, &webpush.Subscription{
		Endpoint: target.Endpoint, Keys: webpush.Keys{P256dh: target.P256dh, Auth: target.Auth},
	}, &webpush.Options{
		HTTPClient:      p.opts.HTTPClient,
		Subscriber:      strings.TrimPrefix(v.Subject, "mailto:"), // webpush-go adds mailto: back to non-https subjects
		TTL:             int(p.opts.TTL / time.Second),
		Urgency:         webpush.UrgencyNormal,
		VAPIDPublicKey:  v.PublicKey,
		VAPIDPrivateKey: v.PrivateKey,
	})
	if err != nil {
		if errors.Is(err, httpclient.ErrNotPublic) {
			return Outcome{}, errEndpoint{"resolves to an address that is not public"}
		}
		return Outcome{}, fmt.Errorf("push: %w", httpclient.WithoutURL(err))
	}
	defer res.Body.Close()
	// A push service's answer is short; read a little so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	o := Outcome{Status: res.StatusCode, Gone: res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusGone}
	if res.StatusCode == http.StatusTooManyRequests || res.StatusCode == http.StatusServiceUnavailable {
		o.RetryAfter = httpclient.RetryAfter(res.Header.Get("Retry-After"), time.Now())
	}
	return o, nil
}

// guardedClient connects to public addresses only (and loopback ones when allowed), checked
// on the resolved address at dial time, follows no redirect (a push service never
// redirects, and a redirect would carry the VAPID signature elsewhere) and uses no proxy.
func guardedClient(allowLoopback bool) *http.Client {
	tr := httpclient.PublicTransport(true)
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if a := ap.Addr().Unmap(); httpclient.Public(a) || allowLoopback && a.IsLoopback() {
				return nil
			}
			return httpclient.ErrNotPublic
		}}
	tr.DialContext = d.DialContext
	return &http.Client{Transport: tr, Timeout: 30 * time.Second, CheckRedirect: httpclient.NoRedirects}
}
