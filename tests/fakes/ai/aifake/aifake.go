// Package aifake is what the fake AI providers (tests/fakes/ai/openai, anthropic, gemini)
// share besides their wire formats: the server's lifecycle, the test-side controls (keys,
// queued failures, holding answers, counters, the bill) and the deterministic "model" whose answers and token counts a
// test can predict. It holds no provider's wire format: each fake speaks its own.
package aifake

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// MaxBody bounds a request body the fakes read (the providers take tens of MiB; a test sends
// a few KiB).
const MaxBody = 4 << 20

// Usage is a sum of tokens as a provider bills them.
type Usage struct {
	InputTokens  int64
	OutputTokens int64
}

// Controls are a fake's test-side controls. Every fake embeds them, so their methods are the
// fake's. They are safe for concurrent use.
type Controls struct {
	srv   *httptest.Server
	fails fakehttp.Queue[int]

	mu       sync.Mutex
	keys     map[string]bool
	requests int
	billed   Usage
	hold     chan struct{} // nil when answers flow
	replies  []string      // scripted answers (ReplyNext), taken in order
}

// Serve starts h on 127.0.0.1, closed when the test ends (held answers released first).
func (c *Controls) Serve(t testing.TB, h http.Handler) {
	c.srv = fakehttp.Start(t, h)
	t.Cleanup(c.Release)
}

// Listen starts h outside a test (make demo); the returned func stops it.
func (c *Controls) Listen(h http.Handler) (close func()) {
	c.srv = fakehttp.Listen(h)
	return func() { c.Release(); c.srv.Close() }
}

// URL is the API's base URL: what the provider's https host is.
func (c *Controls) URL() string { return c.srv.URL }

// AddKey registers an API key the fake accepts; any other is refused with 401 (or what the
// provider answers a wrong key with).
func (c *Controls) AddKey(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = map[string]bool{}
	}
	c.keys[key] = true
}

// Valid reports whether key was added.
func (c *Controls) Valid(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return key != "" && c.keys[key]
}

// FailNext makes the next n requests answer status in the provider's error envelope (429
// with Retry-After: 1), before the key is checked.
func (c *Controls) FailNext(n, status int) { c.fails.Push(n, status) }

// Hold blocks answers until Release: a generation's whole answer, a stream's after its first
// piece of text, so that a test can act on a request in flight (cancel it mid-stream).
func (c *Controls) Hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold == nil {
		c.hold = make(chan struct{})
	}
}

// Release lets held answers go on.
func (c *Controls) Release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold != nil {
		close(c.hold)
		c.hold = nil
	}
}

// Requests counts the API requests received, refused ones included.
func (c *Controls) Requests() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.requests
}

// Billed sums the tokens the fake reported in its answers: what the provider would bill.
// A stream is billed in full when it starts, since the fake generates its answer at once.
func (c *Controls) Billed() Usage {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.billed
}

// Admit counts one request and returns the failure status queued for it (0: none).
func (c *Controls) Admit() int {
	c.mu.Lock()
	c.requests++
	c.mu.Unlock()
	status, _ := c.fails.Take(nil)
	return status
}

// Wait blocks while answers are held; false when ctx (the request's) ended first.
func (c *Controls) Wait(ctx context.Context) bool {
	c.mu.Lock()
	hold := c.hold
	c.mu.Unlock()
	if hold == nil {
		return true
	}
	select {
	case <-hold:
		return true
	case <-ctx.Done():
		return false
	}
}

// Bill adds an answer's tokens to the bill.
func (c *Controls) Bill(a Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.billed.InputTokens += int64(a.InputTokens)
	c.billed.OutputTokens += int64(a.OutputTokens)
}

// ReplyNext scripts the model's next answers: the next len(texts) generations answer these
// texts, in order, instead of echoing (a test of a feature that asks the model for JSON).
// Their tokens are counted as Generate counts them.
func (c *Controls) ReplyNext(texts ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.replies = append(c.replies, texts...)
}

// Generate is the fake model of this server: the next scripted answer (ReplyNext) when
// there is one, else the package's Generate (an echo).
func (c *Controls) Generate(lastUser string, maxTokens int, inputs ...string) Answer {
	c.mu.Lock()
	var scripted *string
	if len(c.replies) > 0 {
		scripted = &c.replies[0]
		c.replies = c.replies[1:]
	}
	c.mu.Unlock()
	if scripted == nil {
		return Generate(lastUser, maxTokens, inputs...)
	}
	return answer(*scripted, maxTokens, inputs)
}

// Answer is the fake model's answer.
type Answer struct {
	Text string
	// Pieces split Text for a stream, one word a piece with the whitespace before it:
	// joined, they are Text.
	Pieces []string
	// Truncated is true when the answer was cut at the maximum tokens.
	Truncated    bool
	InputTokens  int
	OutputTokens int
}

// Words counts the whitespace-separated words of s: the fake's tokens.
func Words(s string) int { return len(strings.Fields(s)) }

var piece = regexp.MustCompile(`\s*\S+`)

// Generate is the fake model: the answer is "echo: " and the last user message, cut to
// maxTokens words (then Truncated, its words joined by single spaces). Its input tokens are
// the words of inputs (every text of the request), its output tokens the words of the answer.
func Generate(lastUser string, maxTokens int, inputs ...string) Answer {
	return answer("echo: "+lastUser, maxTokens, inputs)
}

// answer is the Answer of text: cut to maxTokens words, its tokens counted.
func answer(text string, maxTokens int, inputs []string) Answer {
	a := Answer{Text: text}
	for _, in := range inputs {
		a.InputTokens += Words(in)
	}
	if words := strings.Fields(a.Text); len(words) > maxTokens {
		a.Text = strings.Join(words[:maxTokens], " ")
		a.Truncated = true
	}
	a.OutputTokens = Words(a.Text)
	a.Pieces = piece.FindAllString(a.Text, -1)
	if n := len(a.Pieces); n > 0 {
		// Trailing whitespace goes with the last piece.
		a.Pieces[n-1] += a.Text[len(strings.Join(a.Pieces, "")):]
	}
	return a
}

// Decode reads a request's JSON body as strictly as the providers do: at most MaxBody bytes,
// no unknown member (the providers refuse a parameter they do not know), one value.
func Decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, MaxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON value")
	}
	return nil
}

// Flush sends what w holds to the client now (a piece of a stream).
func Flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
