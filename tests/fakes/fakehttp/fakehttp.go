// Package fakehttp is the plumbing the fake provider servers (tests/fakes/...) share: their
// httptest lifecycle, the records tests read back, the queue of misbehaviours a test asks
// for, the webhook POST they make as the provider, and small JSON and random-value helpers.
// It holds no provider's wire format: each fake implements its provider's on its own, so that
// a mismatch with the adapter shows up as a failing test.
package fakehttp

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Start serves h on 127.0.0.1 until the test ends.
func Start(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// Listen serves h on 127.0.0.1 outside a test (the local demo, make demo) until the returned
// server is closed.
func Listen(h http.Handler) *httptest.Server { return httptest.NewServer(h) }

// Log is a record a fake keeps of what it received or did, for tests to read back while the
// handlers go on appending. The zero value is an empty log; it is safe for concurrent use.
type Log[T any] struct {
	mu    sync.Mutex
	items []T
}

// Add appends vs.
func (l *Log[T]) Add(vs ...T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.items = append(l.items, vs...)
}

// All returns a copy of the log, in order.
func (l *Log[T]) All() []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.items)
}

// Queue holds the misbehaviours a test asked a fake for, each to be used up by one request
// ("the next n calls fail"). The zero value is empty; it is safe for concurrent use.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
}

// Push queues v n times.
func (q *Queue[T]) Push(n int, v T) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for range n {
		q.items = append(q.items, v)
	}
}

// Take removes and returns the first queued value that match accepts (nil accepts any), and
// reports whether there was one.
func (q *Queue[T]) Take(match func(T) bool) (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, v := range q.items {
		if match == nil || match(v) {
			q.items = slices.Delete(q.items, i, i+1)
			return v, true
		}
	}
	var zero T
	return zero, false
}

// WriteJSON answers status with v as JSON. The Content-Type is application/json unless the
// handler set one already (a provider that adds a charset).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ProxyError answers status with the HTML page of the nginx in front of a provider's API,
// as providers do when a backend is down or slow (502, 503, 504): not the API's JSON, which
// an adapter must survive.
func ProxyError(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Type", "text/html")
	w.WriteHeader(status)
	text := http.StatusText(status)
	fmt.Fprintf(w, "<html>\r\n<head><title>%d %s</title></head>\r\n<body>\r\n<center><h1>%d %s</h1></center>\r\n"+
		"<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n", status, text, status, text)
}

// MustJSON marshals v, which a fake builds from values that always marshal.
func MustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// RandomString returns n random characters of A-Z a-z 0-9 - _ (the alphabet of Telegram bot
// tokens and of Meta's ids and handles).
func RandomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)[:n]
}

// maxAnswer bounds how much of a webhook's answer Post keeps: enough for a confirmation code
// or an error text.
const maxAnswer = 64 << 10

// Post delivers a webhook as a provider does: body POSTed to url as application/json with
// header's members set (a signature, a secret), within 10 s. It returns the answer's status and (the first 64 KiB
// of) its body.
func Post(url string, body []byte, header http.Header) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, maxAnswer))
	return res.StatusCode, answer, err
}
