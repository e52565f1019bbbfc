// Package aitest is the one test suite every ai.Client passes against its provider's fake
// (tests/fakes/ai/...): a generation whole and streamed, its text, model, usage and stop
// reasons, the errors of package ai for a refused key, a rate limit, an outage and a model
// the provider does not have, cancellation in flight, and that the key never shows in an
// error. Each client's own tests add what is particular to its provider.
package aitest

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/tests/fakes/ai/aifake"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// Fake is what the suite needs of a provider's fake.
type Fake interface {
	URL() string
	AddKey(key string)
	FailNext(n, status int)
	Hold()
	Release()
	Requests() int
	Billed() aifake.Usage
}

// Provider is one client under test.
type Provider struct {
	// Fake starts the provider's fake for t.
	Fake func(t testing.TB) Fake
	// Client returns a client of the API at baseURL.
	Client func(t testing.TB, baseURL string) ai.Client
	// Model is a model the fake has; Answered the model id the answer names.
	Model, Answered string
	// Temperature is a valid temperature for the provider.
	Temperature float64
}

// Key is the key the suite registers: every error is checked not to hold it.
const Key = "sk-test-SECRET-0123456789abcdefghijklmnop"

// conversation is a request whose answer and counts the fakes make predictable: input words
// 3 + 2 + 1 + 3 = 9, answer "echo: say something nice" (4 words).
func conversation(model string, maxTokens int) ai.Request {
	return ai.Request{Model: model, MaxOutputTokens: maxTokens, Messages: []ai.Message{
		{Role: ai.RoleSystem, Content: "You are terse."},
		{Role: ai.RoleUser, Content: "hello there"},
		{Role: ai.RoleAssistant, Content: "hi"},
		{Role: ai.RoleUser, Content: "say something nice"},
	}}
}

const answer = "echo: say something nice"

type env struct {
	fake   Fake
	client ai.Client
	p      Provider
}

func (p Provider) start(t *testing.T) env {
	t.Helper()
	f := p.Fake(t)
	f.AddKey(Key)
	return env{fake: f, client: p.Client(t, f.URL()), p: p}
}

func (e env) stream(ctx context.Context, key string, req ai.Request) (ai.Response, []string, error) {
	var deltas []string
	resp, err := e.client.Stream(ctx, key, req, func(s string) error {
		deltas = append(deltas, s)
		return nil
	})
	return resp, deltas, err
}

// noKey checks that err's text does not hold the key.
func noKey(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), Key)
	assert.NotContains(t, err.Error(), Key[8:], "not even part of it")
}

// Run runs the suite.
func Run(t *testing.T, p Provider) {
	t.Run("generate", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		req := conversation(p.Model, 50)
		temp := p.Temperature
		req.Temperature = &temp
		resp, err := e.client.Generate(t.Context(), Key, req)
		require.NoError(t, err)
		assert.Equal(t, answer, resp.Text)
		assert.Equal(t, p.Answered, resp.Model)
		assert.NotEmpty(t, resp.ID)
		assert.Equal(t, ai.StopEnd, resp.StopReason)
		assert.Equal(t, ai.Usage{InputTokens: 9, OutputTokens: 4}, resp.Usage)
		assert.Equal(t, aifake.Usage{InputTokens: 9, OutputTokens: 4}, e.fake.Billed())
		assert.Equal(t, 1, e.fake.Requests())
	})
	t.Run("generate max tokens", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		resp, err := e.client.Generate(t.Context(), Key, conversation(p.Model, 2))
		require.NoError(t, err)
		assert.Equal(t, "echo: say", resp.Text)
		assert.Equal(t, ai.StopLength, resp.StopReason)
		assert.Equal(t, ai.Usage{InputTokens: 9, OutputTokens: 2}, resp.Usage)
	})
	t.Run("stream", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		resp, deltas, err := e.stream(t.Context(), Key, conversation(p.Model, 50))
		require.NoError(t, err)
		assert.Len(t, deltas, 4, "a word a piece")
		assert.Equal(t, answer, strings.Join(deltas, ""))
		assert.Equal(t, answer, resp.Text)
		assert.Equal(t, p.Answered, resp.Model)
		assert.NotEmpty(t, resp.ID)
		assert.Equal(t, ai.StopEnd, resp.StopReason)
		assert.Equal(t, ai.Usage{InputTokens: 9, OutputTokens: 4}, resp.Usage)
		assert.Equal(t, aifake.Usage{InputTokens: 9, OutputTokens: 4}, e.fake.Billed())

		resp, deltas, err = e.stream(t.Context(), Key, conversation(p.Model, 3))
		require.NoError(t, err)
		assert.Equal(t, "echo: say something", strings.Join(deltas, ""))
		assert.Equal(t, ai.StopLength, resp.StopReason)
		assert.Equal(t, ai.Usage{InputTokens: 9, OutputTokens: 3}, resp.Usage)
		assert.Equal(t, aifake.Usage{InputTokens: 18, OutputTokens: 7}, e.fake.Billed())
	})
	t.Run("whitespace kept", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		req := ai.Request{Model: p.Model, MaxOutputTokens: 20, Messages: []ai.Message{
			{Role: ai.RoleUser, Content: "two\nlines  and   spaces "}}}
		resp, deltas, err := e.stream(t.Context(), Key, req)
		require.NoError(t, err)
		assert.Equal(t, "echo: two\nlines  and   spaces ", resp.Text)
		assert.Equal(t, resp.Text, strings.Join(deltas, ""))
		assert.Equal(t, ai.Usage{InputTokens: 4, OutputTokens: 5}, resp.Usage)
	})
	t.Run("refused key", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		wrong := Key + "-revoked"
		_, err := e.client.Generate(t.Context(), wrong, conversation(p.Model, 50))
		require.ErrorIs(t, err, ai.ErrUnauthorized)
		noKey(t, err)
		_, _, err = e.stream(t.Context(), wrong, conversation(p.Model, 50))
		require.ErrorIs(t, err, ai.ErrUnauthorized)
		noKey(t, err)
		_, err = e.client.Generate(t.Context(), "", conversation(p.Model, 50))
		require.ErrorIs(t, err, ai.ErrUnauthorized, "no key")
		assert.Equal(t, aifake.Usage{}, e.fake.Billed())
	})
	t.Run("rate limited", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		e.fake.FailNext(2, http.StatusTooManyRequests)
		var rl *ai.RateLimitedError
		_, err := e.client.Generate(t.Context(), Key, conversation(p.Model, 50))
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, time.Second, rl.RetryAfter)
		noKey(t, err)
		_, _, err = e.stream(t.Context(), Key, conversation(p.Model, 50))
		require.ErrorAs(t, err, &rl)
		assert.Equal(t, time.Second, rl.RetryAfter)
		_, err = e.client.Generate(t.Context(), Key, conversation(p.Model, 50))
		require.NoError(t, err, "the limit passed")
	})
	t.Run("outage", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable} {
			e.fake.FailNext(2, status)
			var pe *ai.ProviderError
			_, err := e.client.Generate(t.Context(), Key, conversation(p.Model, 50))
			require.ErrorAs(t, err, &pe, "%d", status)
			assert.True(t, pe.Temporary)
			assert.Equal(t, status, pe.Status)
			noKey(t, err)
			_, _, err = e.stream(t.Context(), Key, conversation(p.Model, 50))
			require.ErrorAs(t, err, &pe, "%d", status)
			assert.True(t, pe.Temporary)
		}
	})
	t.Run("unknown model", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		var pe *ai.ProviderError
		_, err := e.client.Generate(t.Context(), Key, conversation("no-such-model-1", 50))
		require.ErrorAs(t, err, &pe)
		assert.False(t, pe.Temporary)
		assert.Equal(t, http.StatusNotFound, pe.Status)
		assert.Contains(t, pe.Message, "no-such-model-1")
		noKey(t, err)
		_, _, err = e.stream(t.Context(), Key, conversation("no-such-model-1", 50))
		require.ErrorAs(t, err, &pe)
		assert.False(t, pe.Temporary)
	})
	t.Run("invalid request", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		for _, req := range []ai.Request{
			conversation(p.Model, 0),
			conversation("", 50),
			{Model: p.Model, MaxOutputTokens: 5, Messages: []ai.Message{{Role: ai.RoleSystem, Content: "x"}}},
			{Model: p.Model, MaxOutputTokens: 5, Messages: []ai.Message{{Role: "tool", Content: "x"}}},
		} {
			var pe *ai.ProviderError
			_, err := e.client.Generate(t.Context(), Key, req)
			require.ErrorAs(t, err, &pe)
			assert.False(t, pe.Temporary)
			assert.Equal(t, http.StatusBadRequest, pe.Status)
		}
		assert.Zero(t, e.fake.Requests(), "refused before sending")
	})
	t.Run("cancel mid-stream", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		e.fake.Hold()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		first := make(chan struct{})
		var once sync.Once
		done := make(chan error, 1)
		go func() {
			_, err := e.client.Stream(ctx, Key, conversation(p.Model, 50), func(string) error {
				once.Do(func() { close(first) })
				return nil
			})
			done <- err
		}()
		select {
		case <-first:
		case <-time.After(10 * time.Second):
			t.Fatal("no first piece")
		}
		cancel()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, context.Canceled)
		case <-time.After(5 * time.Second):
			t.Fatal("the stream did not stop on cancellation")
		}
	})
	t.Run("cancel in flight", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		e.fake.Hold()
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		_, err := e.client.Generate(ctx, Key, conversation(p.Model, 50))
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		e.fake.Release()
		_, err = e.client.Generate(t.Context(), Key, conversation(p.Model, 50))
		assert.NoError(t, err)
	})
	t.Run("delta error stops the stream", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		stop := errors.New("the reader went away")
		calls := 0
		_, err := e.client.Stream(t.Context(), Key, conversation(p.Model, 50), func(string) error {
			calls++
			return stop
		})
		assert.ErrorIs(t, err, stop)
		assert.Equal(t, 1, calls)
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		srv := fakehttp.Start(t, http.NotFoundHandler())
		url := srv.URL
		srv.Close()
		c := p.Client(t, url)
		var pe *ai.ProviderError
		_, err := c.Generate(t.Context(), Key, conversation(p.Model, 50))
		require.ErrorAs(t, err, &pe)
		assert.True(t, pe.Temporary)
		assert.Zero(t, pe.Status)
		noKey(t, err)
		assert.NotContains(t, err.Error(), url, "no URL in a transport error")
	})
	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		e := p.start(t)
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				var err error
				if i%2 == 0 {
					_, err = e.client.Generate(t.Context(), Key, conversation(p.Model, 50))
				} else {
					_, _, err = e.stream(t.Context(), Key, conversation(p.Model, 50))
				}
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		assert.Equal(t, aifake.Usage{InputTokens: 72, OutputTokens: 32}, e.fake.Billed())
	})
}
