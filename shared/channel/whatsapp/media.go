package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"syscall"
	"time"

	"github.com/botplatform/api/shared/channel"
)

// downloadTimeout bounds connecting to a media URL and waiting for its headers; the body
// is read within the caller's deadline (it is streamed on to the provider).
const downloadTimeout = 30 * time.Second

// downloadClient fetches customer-given URLs. Unless private is allowed, it refuses to
// connect to any address that is not public unicast (loopback, private, link-local such as
// the instance metadata service, CGNAT, multicast), checked on the resolved address at
// dial time, so neither DNS nor a redirect can smuggle one in. It follows at most three
// redirects.
func downloadClient(private bool) *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	if !private {
		d.Control = func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return err
			}
			if !publicAddr(ap.Addr()) {
				return errPrivateAddress
			}
			return nil
		}
	}
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 nil, // a proxy would dial in our place, past the check
			DialContext:           d.DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: downloadTimeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 3 {
				return errors.New("more than 3 redirects")
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return errors.New("redirect to a non-http URL")
			}
			return nil
		},
	}
}

var errPrivateAddress = errors.New("the address is not a public one")

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

func publicAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsGlobalUnicast() && !a.IsPrivate() && !a.IsLoopback() && !a.IsLinkLocalUnicast() &&
		!cgnat.Contains(a) && !a.IsMulticast() && !a.IsUnspecified()
}

// RemoteFile is a media file being downloaded: what its server says of it, and its body,
// which the caller must close.
type RemoteFile struct {
	// MIMEType is the server's Content-Type without parameters ("" when it sent none).
	MIMEType string
	// Length is the server's Content-Length, or -1 when it did not say.
	Length int64
	// FileName is the last segment of the URL's path ("" when none).
	FileName string
	Body     io.ReadCloser
}

// FetchMedia starts downloading a customer-given media URL (http or https; public
// addresses only unless the adapter allows private ones), for a header example to be
// uploaded from. Nothing of the body is read: the caller checks type and length first.
// Failures are ErrRejected (a URL that cannot be used: refused address, non-2xx answer)
// or ErrUnavailable (a timeout, a connection reset).
func (a *Adapter) FetchMedia(ctx context.Context, rawURL string) (*RemoteFile, error) {
	fail := func(kind error, format string, args ...any) error {
		return &channel.Error{Kind: kind, Provider: channel.WhatsApp, Code: "media_url", Message: fmt.Sprintf(format, args...)}
	}
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, fail(channel.ErrRejected, "the media URL must be an absolute http(s) URL without user info")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fail(channel.ErrRejected, "the media URL cannot be requested")
	}
	req.Header.Set("Accept", "image/jpeg, image/png, video/mp4, application/pdf")
	res, err := a.download.Do(req)
	if err != nil {
		if errors.Is(err, errPrivateAddress) {
			return nil, fail(channel.ErrRejected, "the media URL points to an address that is not public")
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
			return nil, fail(channel.ErrUnavailable, "the media URL did not answer in time")
		}
		return nil, fail(channel.ErrRejected, "the media URL could not be fetched")
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		res.Body.Close()
		return nil, fail(channel.ErrRejected, "the media URL answered %d", res.StatusCode)
	}
	f := &RemoteFile{Length: res.ContentLength, Body: res.Body}
	if ct := res.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil {
			f.MIMEType = mt
		}
	}
	if base := path.Base(res.Request.URL.Path); base != "/" && base != "." {
		f.FileName = base
	}
	return f, nil
}
