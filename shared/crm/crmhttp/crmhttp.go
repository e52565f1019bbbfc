// Package crmhttp is the HTTP plumbing the CRM provider clients (shared/crm/...) share: the
// default HTTP client (timeouts, no redirects, public addresses only outside tests), one
// JSON request and its bounded answer, the skeleton that turns a refusal into the errors of
// package crm, and the handling of OAuth token failures. Each provider's wire format (paths,
// bodies, error envelopes) stays in its own package: a provider parses its error body and
// calls Refusal with what it found.
package crmhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/botplatform/api/shared/channel/httpclient"
	"github.com/botplatform/api/shared/crm"
)

// Bounds of one call.
const (
	// CallTimeout bounds one request and its answer.
	CallTimeout = 30 * time.Second
	// MaxResponseBytes bounds an answer read into memory: a Salesforce describe of an object
	// with hundreds of custom fields is a few MiB.
	MaxResponseBytes = 8 << 20
	// maxMessage bounds a provider's error message kept in an error.
	maxMessage = 500
)

// NewHTTPClient returns the client a provider uses when its Config names none: it bounds
// connecting and waiting for headers, never follows redirects (one could carry a credential
// to another host) and, unless allowPrivate (tests, the local process), reaches only public
// addresses, because a connection's instance URL (a Dataverse environment, a Pipedrive
// company domain) is customer-given.
func NewHTTPClient(allowPrivate bool) *http.Client {
	t := httpclient.PublicTransport(allowPrivate)
	t.ResponseHeaderTimeout = CallTimeout
	t.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: t, CheckRedirect: httpclient.NoRedirects}
}

// CheckInstanceURL checks a per-connection base URL (crm.Credentials.InstanceURL): a base URL
// (httpclient.CheckBaseURL) that is https unless allowPrivate, and returns it without a
// trailing slash.
func CheckInstanceURL(s string, allowPrivate bool) (string, error) {
	if err := httpclient.CheckBaseURL(s); err != nil {
		return "", fmt.Errorf("instance URL %w", err)
	}
	if !allowPrivate && !strings.HasPrefix(s, "https://") {
		return "", errors.New("instance URL must be https")
	}
	return strings.TrimRight(s, "/"), nil
}

// Request is one call to a provider's API.
type Request struct {
	Method string
	URL    string // absolute: the provider's base URL and path, with its query
	// JSON, when not nil, is marshalled as the application/json body; Form, when not nil, is
	// the application/x-www-form-urlencoded body.
	JSON   any
	Form   url.Values
	Header http.Header // added to the request (Prefer, Sforce-Query-Options, ...)
}

// Client sends a provider's requests. Auth and Refuse are the provider's; the rest is shared.
type Client struct {
	HTTP *http.Client
	// Auth sets the credential on req (a header: never the URL) and returns the secret it
	// used, which is scrubbed from any error text.
	Auth func(ctx context.Context, req *http.Request) (secret string, err error)
	// Refuse turns a non-2xx answer into an error, normally by parsing the provider's error
	// body and calling Refusal.
	Refuse func(res *http.Response, body []byte) error
	// Now is the clock Retry-After dates are read against (nil: time.Now).
	Now func() time.Time
}

// Do sends r and decodes a 2xx answer's JSON body into out (nil: the body is discarded). It
// returns ctx's error when ctx ended, the provider's refusal as mapped by Refuse, and a
// temporary *crm.ProviderError for a transport failure or an unreadable answer.
func (c *Client) Do(ctx context.Context, r Request, out any) error {
	_, err := c.DoHeader(ctx, r, out)
	return err
}

// DoHeader is Do that also returns the answer's header (the OData-EntityId of a Dataverse
// create, say).
func (c *Client) DoHeader(ctx context.Context, r Request, out any) (http.Header, error) {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	var body io.Reader
	contentType := ""
	switch {
	case r.JSON != nil:
		b, err := json.Marshal(r.JSON)
		if err != nil {
			return nil, err
		}
		body, contentType = bytes.NewReader(b), "application/json"
	case r.Form != nil:
		body, contentType = strings.NewReader(r.Form.Encode()), "application/x-www-form-urlencoded"
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		req.Header[k] = vs
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json")
	secret := ""
	if c.Auth != nil {
		if secret, err = c.Auth(ctx, req); err != nil {
			return nil, err
		}
	}
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, transportError(ctx, err, secret)
	}
	defer res.Body.Close()
	b, err := ReadBody(res.Body)
	if err != nil {
		return nil, transportError(ctx, err, secret)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		// A provider that echoes what it was sent must not put the credential into an error.
		if secret != "" {
			b = bytes.ReplaceAll(b, []byte(secret), []byte("[redacted]"))
		}
		return res.Header, c.Refuse(res, b)
	}
	if out != nil && len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return res.Header, &crm.ProviderError{Status: res.StatusCode, Code: "bad_response",
				Message: "the provider's answer could not be read", Temporary: true}
		}
	}
	return res.Header, nil
}

// ErrTooLarge is returned by ReadBody for an answer beyond MaxResponseBytes.
var ErrTooLarge = errors.New("the answer exceeds " + fmt.Sprint(MaxResponseBytes) + " bytes")

// ReadBody reads at most MaxResponseBytes of r, and ErrTooLarge when there is more.
func ReadBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxResponseBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxResponseBytes {
		return nil, ErrTooLarge
	}
	return b, nil
}

// transportError is a failure to reach the provider or to read its answer: the context's own
// error when it ended, else a temporary ProviderError whose text carries no URL (a URL may
// hold a credential: HubSpot's revocation path holds the refresh token).
func transportError(ctx context.Context, err error, secret string) error {
	if ctxErr := ctx.Err(); ctxErr != nil && errors.Is(err, ctxErr) {
		return ctxErr
	}
	if errors.Is(err, ErrTooLarge) {
		return &crm.ProviderError{Code: "too_large", Message: err.Error(), Temporary: false}
	}
	return &crm.ProviderError{Code: "transport", Message: Scrub(httpclient.WithoutURL(err).Error(), secret), Temporary: true}
}

// Refusal maps a provider's refusal, once its error body is parsed, to the errors of package
// crm: 401 ErrUnauthorized, 403 ErrForbidden, 404 ErrNotFound, 429 *crm.RateLimitedError with
// retryAfter, 5xx a temporary *crm.ProviderError and any other status a *crm.ProviderError.
// The sentinel errors are wrapped with the provider's code and message, so errors.Is matches
// them and logs keep the detail. A provider handles its own exceptions (Salesforce's 403
// REQUEST_LIMIT_EXCEEDED) before calling it.
func Refusal(status int, code, message string, retryAfter time.Duration) error {
	message = Truncate(message, maxMessage)
	detail := func(sentinel error) error {
		if code == "" && message == "" {
			return sentinel
		}
		return fmt.Errorf("%w (%d %s: %s)", sentinel, status, code, message)
	}
	switch {
	case status == http.StatusUnauthorized:
		return detail(crm.ErrUnauthorized)
	case status == http.StatusForbidden:
		return detail(crm.ErrForbidden)
	case status == http.StatusNotFound:
		return detail(crm.ErrNotFound)
	case status == http.StatusTooManyRequests:
		return &crm.RateLimitedError{RetryAfter: retryAfter}
	}
	if code == "" {
		code = http.StatusText(status)
	}
	return &crm.ProviderError{Status: status, Code: code, Message: message, Temporary: status >= 500}
}

// RetryAfter reads the Retry-After header of h as of now (0: absent or unreadable).
func RetryAfter(h http.Header, now time.Time) time.Duration {
	return httpclient.RetryAfter(h.Get("Retry-After"), now)
}

// TokenError maps a failure of an oauth2.TokenSource (a refresh, a client-credentials grant)
// to the errors of package crm: a refused grant or client is ErrUnauthorized, a 429
// RateLimitedError, a 5xx or transport failure a temporary ProviderError. The token
// endpoint's answer body is not kept: it may echo what was sent.
func TokenError(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return &crm.ProviderError{Code: "token", Message: Truncate(httpclient.WithoutURL(err).Error(), maxMessage), Temporary: true}
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	switch {
	// A token endpoint's 400 is a refused grant or client (RFC 6749 5.2) in every provider's
	// own words (HubSpot's BAD_REFRESH_TOKEN has no "error" member): the credentials are dead.
	case re.ErrorCode == "invalid_grant" || re.ErrorCode == "invalid_client" || re.ErrorCode == "unauthorized_client" ||
		status == http.StatusBadRequest || status == http.StatusUnauthorized:
		return fmt.Errorf("%w (token endpoint: %s)", crm.ErrUnauthorized, cmpOr(re.ErrorCode, http.StatusText(status)))
	case status == http.StatusTooManyRequests:
		var ra time.Duration
		if re.Response != nil {
			ra = RetryAfter(re.Response.Header, time.Now())
		}
		return &crm.RateLimitedError{RetryAfter: ra}
	}
	return &crm.ProviderError{Status: status, Code: cmpOr(re.ErrorCode, "token_endpoint"),
		Message: Truncate(re.ErrorDescription, maxMessage), Temporary: status >= 500 || status == 0}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Bearer returns an Auth function that sets src's access token as a bearer token, mapping a
// failure to get one with TokenError.
func Bearer(src oauth2.TokenSource) func(context.Context, *http.Request) (string, error) {
	return func(ctx context.Context, req *http.Request) (string, error) {
		tok, err := src.Token()
		if err != nil {
			return "", TokenError(ctx, err)
		}
		if tok.AccessToken == "" {
			return "", fmt.Errorf("%w: no access token", crm.ErrUnauthorized)
		}
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		return tok.AccessToken, nil
	}
}

// TokenSource returns the token source a provider client uses: src when the family gave one
// (refreshing and persisting tokens is the family's), else creds' tokens as they are.
func TokenSource(src oauth2.TokenSource, creds crm.Credentials) oauth2.TokenSource {
	if src != nil {
		return src
	}
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: creds.AccessToken, RefreshToken: creds.RefreshToken,
		Expiry: creds.Expiry, TokenType: "Bearer"})
}

// Scrub removes secret from s.
func Scrub(s, secret string) string {
	if secret != "" {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// Truncate cuts s to at most n bytes, on a rune boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// PathEscape escapes one path segment of a record id or object name a caller gave, so that
// it cannot add segments or a query.
func PathEscape(s string) string { return url.PathEscape(s) }

// Values copies a record's properties for a provider that takes JSON values as they are:
// every name passes check (what may go into the provider's query language unquoted) and a
// time.Time becomes a string in layout.
func Values(props map[string]any, check func(names ...string) error, layout string) (map[string]any, error) {
	out := make(map[string]any, len(props))
	for k, v := range props {
		if err := check(k); err != nil {
			return nil, err
		}
		if t, ok := v.(time.Time); ok {
			v = t.UTC().Format(layout)
		}
		out[k] = v
	}
	return out, nil
}
