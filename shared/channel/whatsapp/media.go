package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/httpclient"
)

// downloadTimeout bounds waiting for a media URL's headers; the body is read within the
// caller's deadline (it is streamed on to the provider), so the client has no overall timeout.
const downloadTimeout = 30 * time.Second

// downloadClient fetches customer-given URLs. Unless private is allowed, it refuses to
// connect to any address that is not public (httpclient.PublicTransport). It follows at most
// three redirects.
func downloadClient(private bool) *http.Client {
	tr := httpclient.PublicTransport(private)
	tr.ResponseHeaderTimeout = downloadTimeout
	tr.MaxIdleConnsPerHost = 4
	tr.IdleConnTimeout = 30 * time.Second
	return &http.Client{Transport: tr, CheckRedirect: httpclient.LimitRedirects(3)}
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
		if errors.Is(err, httpclient.ErrNotPublic) {
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
