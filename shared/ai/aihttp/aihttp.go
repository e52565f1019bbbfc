// Package aihttp is the HTTP plumbing the AI provider clients (shared/ai/openai, anthropic,
// gemini) share: the default HTTP client, the base URL rule, one JSON call and one event
// stream with their bounds and timeouts, the reader of server-sent events, and the mapping of
// a refusal, once a provider has parsed its error body, to the errors of package ai. Each
// provider's wire format (paths, bodies, chunks, error envelopes) stays in its own package.
package aihttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/channel/httpclient"
)

// Bounds of one call.
const (
	// CallTimeout bounds a Generate call: the provider answers only once the whole text is
	// generated, which for a long answer of a large model takes minutes.
	CallTimeout = 5 * time.Minute
	// StreamTimeout bounds a whole stream.
	StreamTimeout = 10 * time.Minute
	// StreamIdleTimeout bounds the wait for the stream's headers and then for each line:
	// providers send a chunk or a keep-alive every few seconds while they generate.
	StreamIdleTimeout = 90 * time.Second
	// MaxResponseBytes bounds a JSON answer read into memory.
	MaxResponseBytes = 8 << 20
	// maxErrorBytes bounds the error body of a refusal.
	maxErrorBytes = 64 << 10
	// maxMessage bounds a provider's error message kept in an error.
	maxMessage = 500
)

// NewHTTPClient returns the client a provider uses when its Config names none: it bounds
// connecting and waiting for an answer's headers, never follows redirects (one would carry the
// key to another host) and, unless allowPrivate (tests, the local process), reaches only
// public addresses. It has no overall timeout, which would cut streams: each call bounds
// itself with its context.
func NewHTTPClient(allowPrivate bool) *http.Client {
	t := httpclient.PublicTransport(allowPrivate)
	t.ResponseHeaderTimeout = CallTimeout
	t.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: t, CheckRedirect: httpclient.NoRedirects}
}

// Config configures a provider client: where its API is and how it is reached. Each
// client's package names it as its own Config.
type Config struct {
	// BaseURL is the API's base URL, without a version path (the client's default when
	// empty); https unless AllowPrivate.
	BaseURL string
	// HTTPClient sends the requests (nil: NewHTTPClient(AllowPrivate)).
	HTTPClient *http.Client
	// AllowPrivate lets the client reach loopback and private addresses over plain http
	// (tests, the local process).
	AllowPrivate bool
}

// Open returns the base URL (def when none is configured), checked with
// httpclient.CheckBaseURL and https unless AllowPrivate (the key travels in a header),
// without a trailing slash, and the HTTP client to send with.
func (c Config) Open(def string) (string, *http.Client, error) {
	s := strings.TrimRight(c.BaseURL, "/")
	if s == "" {
		s = def
	}
	if err := httpclient.CheckBaseURL(s); err != nil {
		return "", nil, fmt.Errorf("base URL %w", err)
	}
	if !c.AllowPrivate && !strings.HasPrefix(s, "https://") {
		return "", nil, errors.New("base URL must be https")
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = NewHTTPClient(c.AllowPrivate)
	}
	return s, hc, nil
}

// CheckRequest checks what every provider needs of a request before it is sent: a model, a
// positive MaxOutputTokens, known roles and at least one user message. A failure is the
// request's fault: a *ai.ProviderError with Status 400 and Code "invalid_request", as the
// provider would answer.
func CheckRequest(req ai.Request) error {
	invalid := func(msg string) error {
		return &ai.ProviderError{Status: http.StatusBadRequest, Code: "invalid_request", Message: msg}
	}
	if strings.TrimSpace(req.Model) == "" {
		return invalid("no model")
	}
	if req.MaxOutputTokens <= 0 {
		return invalid("MaxOutputTokens must be positive")
	}
	users := 0
	for _, m := range req.Messages {
		switch m.Role {
		case ai.RoleUser:
			users++
		case ai.RoleSystem, ai.RoleAssistant:
		default:
			return invalid(fmt.Sprintf("unknown role %q", Truncate(m.Role, 40)))
		}
	}
	if users == 0 {
		return invalid("no user message")
	}
	return nil
}

// Request is one call to a provider's API: a POST of Body as JSON.
type Request struct {
	URL    string // absolute: the base URL, path and query (never the key)
	Header http.Header
	Body   any
	// Secret is the key the call is made with, scrubbed from any error text.
	Secret string
}

// Client sends a provider's requests. Refuse is the provider's; the rest is shared.
type Client struct {
	HTTP *http.Client
	// Refuse turns a non-2xx answer into an error, normally by parsing the provider's error
	// body (at most 64 KiB, with the secret scrubbed) and calling Refusal.
	Refuse func(res *http.Response, body []byte) error
	// IdleTimeout replaces StreamIdleTimeout when positive (tests).
	IdleTimeout time.Duration
}

var (
	errCallTimeout   = errors.New("call timeout")
	errStreamTimeout = errors.New("stream timeout")
	errStreamIdle    = errors.New("stream idle")
)

// Do sends r and decodes the 2xx answer's JSON into out. It returns the caller's context
// error when its context ended, the provider's refusal as mapped by Refuse, and a temporary
// *ai.ProviderError for a timeout, a transport failure or an unreadable answer.
func (c *Client) Do(ctx context.Context, r Request, out any) error {
	callCtx, cancel := context.WithTimeoutCause(ctx, CallTimeout, errCallTimeout)
	defer cancel()
	res, err := c.send(ctx, callCtx, r, "application/json")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := readAll(res.Body, MaxResponseBytes)
	if err != nil {
		return transportError(ctx, callCtx, err, r.Secret)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &ai.ProviderError{Status: res.StatusCode, Code: "bad_response",
			Message: "the provider's answer could not be read", Temporary: true}
	}
	return nil
}

// Stream sends r and calls event with each event of the 2xx answer's event stream until it
// ends (nil), event returns an error (returned as it is), or the stream fails: the caller's
// context error when its context ended, a temporary *ai.ProviderError when the stream timed
// out, stayed idle past the idle timeout, broke or exceeded a bound. It returns nil when the
// stream ended: whether it ended complete is the provider's to tell from its events.
func (c *Client) Stream(ctx context.Context, r Request, event func(Event) error) error {
	streamCtx, cancelTimeout := context.WithTimeoutCause(ctx, StreamTimeout, errStreamTimeout)
	defer cancelTimeout()
	streamCtx, cancel := context.WithCancelCause(streamCtx)
	defer cancel(nil)
	idle := c.IdleTimeout
	if idle <= 0 {
		idle = StreamIdleTimeout
	}
	timer := time.AfterFunc(idle, func() { cancel(errStreamIdle) })
	defer timer.Stop()

	res, err := c.send(ctx, streamCtx, r, "text/event-stream")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	events := NewReader(res.Body, MaxStreamBytes, func() { timer.Reset(idle) })
	for {
		ev, err := events.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return transportError(ctx, streamCtx, err, r.Secret)
		}
		if err := event(ev); err != nil {
			return err
		}
	}
}

// send makes the call under callCtx (ctx is the caller's, to tell its end from a timeout)
// and returns a 2xx answer, or the error a refusal or a failure maps to.
func (c *Client) send(ctx, callCtx context.Context, r Request, accept string) (*http.Response, error) {
	b, err := json.Marshal(r.Body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(callCtx, http.MethodPost, r.URL, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", accept)
	res, err := c.HTTP.Do(req)
	if err != nil {
		return nil, transportError(ctx, callCtx, err, r.Secret)
	}
	if res.StatusCode >= 200 && res.StatusCode <= 299 {
		return res, nil
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, maxErrorBytes))
	// A provider that echoes what it was sent must not put the key into an error.
	if r.Secret != "" {
		body = bytes.ReplaceAll(body, []byte(r.Secret), []byte("[redacted]"))
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, c.Refuse(res, body)
}

// transportError is a failure to reach the provider or to read its answer: the caller's
// context error when it ended, else a temporary *ai.ProviderError whose text carries neither
// the URL nor the key.
func transportError(ctx, callCtx context.Context, err error, secret string) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	switch cause := context.Cause(callCtx); {
	case errors.Is(cause, errCallTimeout), errors.Is(cause, errStreamTimeout):
		return &ai.ProviderError{Code: "timeout", Message: "the provider did not answer in time", Temporary: true}
	case errors.Is(cause, errStreamIdle):
		return &ai.ProviderError{Code: "timeout", Message: "the provider's stream went idle", Temporary: true}
	}
	switch {
	case errors.Is(err, ErrTooLarge), errors.Is(err, ErrLineTooLong):
		return &ai.ProviderError{Code: "too_large", Message: err.Error(), Temporary: true}
	}
	msg := httpclient.WithoutURL(err).Error()
	if secret != "" {
		msg = strings.ReplaceAll(msg, secret, "[redacted]")
	}
	return &ai.ProviderError{Code: "transport", Message: Truncate(msg, maxMessage), Temporary: true}
}

// readAll reads r whole, failing with ErrTooLarge past limit bytes.
func readAll(r io.Reader, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrTooLarge
	}
	return b, nil
}

// Refusal maps a provider's refusal, once its error body is parsed, to the errors of package
// ai: 401 and 403 wrap ErrUnauthorized with the status and code (not the message, which
// providers write with part of the key in it), 429 is a *ai.RateLimitedError with retryAfter,
// and any other status a *ai.ProviderError, temporary for a 5xx and a 408. A provider handles
// its own exceptions (Anthropic's 529, Gemini's 400 API_KEY_INVALID) before calling it.
func Refusal(status int, code, message string, retryAfter time.Duration) error {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden:
		return fmt.Errorf("%w (%d %s)", ai.ErrUnauthorized, status, code)
	case http.StatusTooManyRequests:
		return &ai.RateLimitedError{RetryAfter: retryAfter}
	}
	if code == "" {
		code = http.StatusText(status)
	}
	return &ai.ProviderError{Status: status, Code: code, Message: Truncate(message, maxMessage),
		Temporary: status >= 500 || status == http.StatusRequestTimeout}
}

// RetryAfter reads how long a 429 asks to wait as of now: OpenAI's retry-after-ms when
// present (it is finer), else Retry-After; 0 when neither says.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(strings.TrimSpace(h.Get("retry-after-ms")), 64); err == nil && ms > 0 && ms < 1e9 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	return httpclient.RetryAfter(h.Get("Retry-After"), now)
}

// Truncate cuts s to at most n bytes, dropping a rune cut in two.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
