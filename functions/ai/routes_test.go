package ai

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
)

const responses = "/api/v1/ai/responses"

func body(profile, text string) map[string]any {
	return map[string]any{"profile": profile, "input": []any{map[string]any{"role": "user", "content": text}}}
}

func (f *fixture) respond(t *testing.T, key string, b any) httpapitest.Reply {
	t.Helper()
	if key == "" {
		return f.Do(t, "POST", responses, b)
	}
	return f.Do(t, "POST", responses, b, "Idempotency-Key", key)
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	want := map[string]httpapi.Access{
		"POST /api/v1/ai/responses": httpapi.Need("managed_ai:invoke").InPlan(auth.FeatureManagedAI),
		"GET /api/v1/ai/usage":      httpapi.Need("managed_ai:usage:read").InPlan(auth.FeatureManagedAI),
	}
	got := map[string]httpapi.Access{}
	for _, rt := range f.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

// Stripe's idempotency: the same key and body replay the first answer (marked), without
// calling the provider again; another body under the key is 422; the key is kept 24 hours.
func TestIdempotency(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := f.respond(t, "", body("fast", "hello"))
	assert.Equal(t, http.StatusBadRequest, res.Code, res.Body)
	assert.Equal(t, "idempotency_key_required", res.Problem())
	res = f.respond(t, strings.Repeat("k", 256), body("fast", "hello"))
	assert.Equal(t, "invalid_idempotency_key", res.Problem())
	res = f.respond(t, "key with space", body("fast", "hello"))
	assert.Equal(t, "invalid_idempotency_key", res.Problem())

	res = f.respond(t, "k-1", body("fast", "hello"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Empty(t, res.Header.Get(ReplayedHeader))
	first := res.JSON
	assert.Equal(t, "gemini", first["provider"], "the fast route starts with Gemini")
	assert.Equal(t, "gemini-2.0-flash", first["model"])
	assert.Equal(t, "gemini says hi", first["output_text"])
	assert.Equal(t, "managed", first["billing"])
	assert.Equal(t, 1, f.providers[aiapi.Gemini].callCount())

	res = f.respond(t, "k-1", body("fast", "hello"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader))
	assert.Equal(t, first, res.JSON, "the stored answer, byte for byte")
	assert.Equal(t, 1, f.providers[aiapi.Gemini].callCount(), "a replay calls no provider")

	res = f.respond(t, "k-1", body("fast", "hello!"))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "idempotency_key_reused", res.Problem())
	res = f.respond(t, "k-1", body("quality", "hello"))
	assert.Equal(t, "idempotency_key_reused", res.Problem(), "every member counts")

	// Another account's same key is its own.
	_, owner, err := f.Auth.CreateAccount(t.Context(), "Other")
	require.NoError(t, err)
	tok := f.PAT(t, owner)
	res = f.DoAs(t, tok, "POST", responses, body("fast", "hello"), "Idempotency-Key", "k-1")
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Empty(t, res.Header.Get(ReplayedHeader))
	assert.NotEqual(t, first["id"], res.JSON["id"])

	// A second short of 24 hours, the key still replays and still refuses another body.
	calls := f.providers[aiapi.Gemini].callCount()
	f.clock.Advance(IdempotencyTTL - time.Second)
	res = f.respond(t, "k-1", body("fast", "hello"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader), "just before 24 h the key still replays")
	assert.Equal(t, first, res.JSON)
	assert.Equal(t, calls, f.providers[aiapi.Gemini].callCount(), "a replay calls no provider")
	res = f.respond(t, "k-1", body("fast", "hello!"))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "idempotency_key_reused", res.Problem())

	// 24 hours on, the key is free again.
	f.clock.Advance(time.Second)
	res = f.respond(t, "k-1", body("fast", "hello!"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.NotEqual(t, first["id"], res.JSON["id"])
}

// Two requests with one key at once: exactly one reaches the provider; the other is 409
// until the first has answered, then replays it.
func TestIdempotencyInFlight(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	g := f.providers[aiapi.Gemini]
	g.hold, g.entered = make(chan struct{}), make(chan struct{}, 1)
	var wg sync.WaitGroup
	var first httpapitest.Reply
	wg.Go(func() { first = f.respond(t, "same", body("fast", "hi")) })
	<-g.entered
	res := f.respond(t, "same", body("fast", "hi"))
	assert.Equal(t, http.StatusConflict, res.Code, res.Body)
	assert.Equal(t, "idempotency_in_flight", res.Problem())
	close(g.hold)
	wg.Wait()
	require.Equal(t, http.StatusOK, first.Code, first.Body)
	assert.Equal(t, 1, g.callCount())
	res = f.respond(t, "same", body("fast", "hi"))
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader))
	assert.Equal(t, first.JSON["id"], res.JSON["id"])
}

// A request whose holder died (its lease ran out) is taken over by the retry.
func TestIdempotencyAbandoned(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, _, err := f.svc.claim(t.Context(), f.Account.ID, "crashed", (&ResponseRequest{Profile: "fast", Provider: "auto",
		Input: []aiapi.Message{{Role: "user", Content: "hi"}}, MaxOutputTokens: DefaultMaxOutputTokens}).hash())
	require.NoError(t, err)
	res := f.respond(t, "crashed", body("fast", "hi"))
	assert.Equal(t, "idempotency_in_flight", res.Problem())
	f.clock.Advance(leaseTTL)
	res = f.respond(t, "crashed", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
}

// auto falls back across managed providers on the providers' failures, saying what it
// tried; a refusal of the request itself is the answer, and frees the key for a retry.
func TestFallback(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.providers[aiapi.Gemini].fail = []error{&aiapi.ProviderError{Status: 503, Temporary: true}}
	f.providers[aiapi.OpenAI].fail = []error{&aiapi.RateLimitedError{RetryAfter: 7 * time.Second}}
	res := f.respond(t, "fb", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "anthropic", res.JSON["provider"])
	assert.Equal(t, "claude-3-5-haiku-latest", res.JSON["model"])
	assert.Equal(t, []any{
		map[string]any{"provider": "gemini", "model": "gemini-2.0-flash", "error": "provider_unavailable"},
		map[string]any{"provider": "openai", "model": "gpt-4o-mini", "error": "provider_rate_limited"},
	}, res.JSON["attempts"])
	assert.Equal(t, "managed-anthropic", f.providers[aiapi.Anthropic].lastKey())

	// Every provider down: 503 with the shortest wait any asked for.
	for _, p := range aiapi.Providers {
		f.providers[p].fail = []error{&aiapi.RateLimitedError{RetryAfter: time.Duration(len(p)) * time.Second}}
	}
	res = f.respond(t, "down", body("fast", "hi"))
	assert.Equal(t, http.StatusServiceUnavailable, res.Code, res.Body)
	assert.Equal(t, "ai_unavailable", res.Problem())
	assert.Equal(t, "6", res.Header.Get("Retry-After"), "gemini and openai asked for 6 s")
	res = f.respond(t, "down", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code, "the failure freed the key: %s", res.Body)

	// The request's fault stops at the first provider.
	f.providers[aiapi.Gemini].fail = []error{&aiapi.ProviderError{Status: 400, Code: "INVALID_ARGUMENT", Message: "too long"}}
	before := f.providers[aiapi.OpenAI].callCount()
	res = f.respond(t, "bad", body("fast", "hi"))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "ai_request_rejected", res.Problem())
	assert.Equal(t, float64(400), res.JSON["provider_status"])
	assert.Equal(t, before, f.providers[aiapi.OpenAI].callCount())

	// A named provider is that provider only.
	f.providers[aiapi.OpenAI].fail = []error{&aiapi.ProviderError{Status: 502, Temporary: true}}
	res = f.respond(t, "named", map[string]any{"provider": "openai", "input": []any{map[string]any{"role": "user", "content": "hi"}}})
	assert.Equal(t, http.StatusServiceUnavailable, res.Code, res.Body)
	assert.Equal(t, "provider_unavailable", res.Problem())
}

// An account's own key is used before managed keys and its failure is the answer: paid
// managed AI never replaces it silently.
func TestBYOK(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	info, err := f.setKey(t, f.Account.ID, aiapi.OpenAI, "sk-own-123")
	require.NoError(t, err)
	assert.Len(t, info.Fingerprint, 12)
	keys, err := f.svc.Keys(t.Context(), f.Account.ID)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	assert.NotContains(t, fmt.Sprint(keys), "sk-own-123")

	res := f.respond(t, "own-1", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "openai", res.JSON["provider"], "the route's provider the account has a key of")
	assert.Equal(t, "byok", res.JSON["billing"])
	assert.Equal(t, "sk-own-123", f.providers[aiapi.OpenAI].lastKey())
	assert.Equal(t, map[string]any{"currency": "USD", "minor_units": float64(0), "nanos": float64(0)},
		res.JSON["usage"].(map[string]any)["cost"], "the provider bills the account's own key")
	assert.Zero(t, f.providers[aiapi.Gemini].callCount(), "Gemini comes first on the route, but with a managed key")

	f.providers[aiapi.OpenAI].fail = []error{aiapi.ErrUnauthorized}
	res = f.respond(t, "own-2", body("fast", "hi"))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Code, res.Body)
	assert.Equal(t, "byok_key_rejected", res.Problem())
	f.providers[aiapi.OpenAI].fail = []error{&aiapi.ProviderError{Status: 500, Temporary: true}}
	res = f.respond(t, "own-3", body("fast", "hi"))
	assert.Equal(t, http.StatusServiceUnavailable, res.Code, res.Body)
	assert.Equal(t, "provider_unavailable", res.Problem())
	f.providers[aiapi.OpenAI].fail = []error{&aiapi.RateLimitedError{RetryAfter: 3 * time.Second}}
	res = f.respond(t, "own-4", body("fast", "hi"))
	assert.Equal(t, http.StatusTooManyRequests, res.Code, res.Body)
	assert.Equal(t, "3", res.Header.Get("Retry-After"))
	assert.Zero(t, f.providers[aiapi.Gemini].callCount()+f.providers[aiapi.Anthropic].callCount(), "no managed provider was called")

	require.NoError(t, f.svc.DeleteKey(t.Context(), f.Account.ID, aiapi.OpenAI))
	res = f.respond(t, "own-5", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "managed", res.JSON["billing"])
}

// The plan (the account's own keys) and the key's claim run side by side; the key's outcome
// comes first. A replay answers even when the plan would now fail (the key it used was
// removed since), and a plan that fails gives the key up at once.
func TestReplayOutlivesThePlan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	delete(f.svc.keys, aiapi.Anthropic) // no managed Anthropic: only an own key reaches it
	req := body("fast", "hi")
	req["provider"] = aiapi.Anthropic
	_, err := f.setKey(t, f.Account.ID, aiapi.Anthropic, "sk-ant-own")
	require.NoError(t, err)
	first := f.respond(t, "plan-1", req)
	require.Equal(t, http.StatusOK, first.Code, first.Body)
	assert.Equal(t, "byok", first.JSON["billing"])

	require.NoError(t, f.svc.DeleteKey(t.Context(), f.Account.ID, aiapi.Anthropic))
	res := f.respond(t, "plan-1", req)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader))
	assert.Equal(t, first.JSON, res.JSON)

	res = f.respond(t, "plan-2", req)
	assert.Equal(t, http.StatusServiceUnavailable, res.Code, res.Body)
	assert.Equal(t, "provider_not_configured", res.Problem())
	_, err = f.setKey(t, f.Account.ID, aiapi.Anthropic, "sk-ant-own")
	require.NoError(t, err)
	res = f.respond(t, "plan-2", req)
	require.Equal(t, http.StatusOK, res.Code, res.Body, "the failed plan released the key")
	assert.Empty(t, res.Header.Get(ReplayedHeader))
	assert.Equal(t, 2, f.providers[aiapi.Anthropic].callCount())
}

// heldPlan is a store whose reads of the account's own keys (the plan) wait until held is
// closed or their context ends, which they report on canceled.
type heldPlan struct {
	store.Store
	held     chan struct{}
	canceled chan struct{}
}

func (h *heldPlan) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if q.Prefix == byokPrefix {
		select {
		case <-h.held:
		case <-ctx.Done():
			close(h.canceled)
			return store.Page{}, ctx.Err()
		}
	}
	return h.Store.Query(ctx, q)
}

// A replay answers from the stored answer without waiting for the plan, which it cancels.
func TestReplayDoesNotWaitForThePlan(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.respond(t, "replay-1", body("fast", "hi"))
	require.Equal(t, http.StatusOK, first.Code, first.Body)

	h := &heldPlan{Store: f.svc.store, held: make(chan struct{}), canceled: make(chan struct{})}
	f.svc.store = h
	defer close(h.held)
	res := f.respond(t, "replay-1", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader))
	assert.Equal(t, first.JSON, res.JSON)
	select {
	case <-h.canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the plan's read was not canceled")
	}
}

// Usage is metered per request and reported by day, profile, provider and billing; costs
// add up in nanos and are rounded once.
func TestUsage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for i := range 3 {
		res := f.respond(t, fmt.Sprint("u", i), body("fast", "hello")) // gemini-2.0-flash: 100/400 nano-USD a token
		require.Equal(t, http.StatusOK, res.Code, res.Body)
		u := res.JSON["usage"].(map[string]any)
		assert.Equal(t, float64(5), u["input_tokens"])
		assert.Equal(t, float64(3), u["output_tokens"])
		assert.Equal(t, map[string]any{"currency": "USD", "minor_units": float64(0), "nanos": float64(5*100 + 3*400)}, u["cost"])
	}
	f.clock.Advance(24 * time.Hour)
	res := f.respond(t, "q", body("quality", strings.Repeat("x", 100_000))) // claude-sonnet-4-0: 3000/15000
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	f.respond(t, "q", body("quality", strings.Repeat("x", 100_000))) // a replay meters nothing

	res = f.Do(t, "GET", "/api/v1/ai/usage?from=2026-11-20&to=2026-11-21", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, []any{
		map[string]any{"date": "2026-11-20", "profile": "fast", "provider": "gemini", "billing": "managed", "requests": float64(3),
			"input_tokens": float64(15), "output_tokens": float64(9),
			"cost": map[string]any{"currency": "USD", "minor_units": float64(0), "nanos": float64(5100)}},
		map[string]any{"date": "2026-11-21", "profile": "quality", "provider": "anthropic", "billing": "managed", "requests": float64(1),
			"input_tokens": float64(100_000), "output_tokens": float64(3),
			"cost": map[string]any{"currency": "USD", "minor_units": float64(30), "nanos": float64(300_045_000)}},
	}, res.JSON["data"])
	assert.Equal(t, map[string]any{"requests": float64(4), "input_tokens": float64(100_015), "output_tokens": float64(12),
		"cost": map[string]any{"currency": "USD", "minor_units": float64(30), "nanos": float64(300_050_100)}}, res.JSON["total"])

	res = f.Do(t, "GET", "/api/v1/ai/usage?from=2026-11-21&provider=gemini", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Empty(t, res.JSON["data"])
	res = f.Do(t, "GET", "/api/v1/ai/usage", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "2026-10-23", res.JSON["from"], "the last 30 days by default")
	assert.Len(t, res.JSON["data"], 2)

	for q, code := range map[string]string{
		"from=2025-01-01&to=2026-11-21": "range_too_long",
		"from=2026-11-22&to=2026-11-21": "invalid_parameter",
		"from=yesterday":                "validation_failed",
		"profile=cheap":                 "validation_failed",
	} {
		res = f.Do(t, "GET", "/api/v1/ai/usage?"+q, nil)
		assert.Equal(t, http.StatusBadRequest, res.Code, "%s: %s", q, res.Body)
		assert.Equal(t, code, res.Problem(), q)
	}
}

// The body is strict and bounded; every problem at once.
func TestValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res := f.respond(t, "v", map[string]any{"profile": "cheap", "provider": "mistral", "input": []any{
		map[string]any{"role": "system", "content": "x"}, map[string]any{"role": "assistant", "content": ""}},
		"max_output_tokens": 9000, "temperature": 3})
	assert.Equal(t, http.StatusBadRequest, res.Code, res.Body)
	var fields []string
	for _, e := range res.JSON["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	assert.ElementsMatch(t, []string{"profile", "provider", "input[0].role", "input[1].content", "input", "max_output_tokens", "temperature"}, fields)
	res = f.respond(t, "v", map[string]any{"input": []any{map[string]any{"role": "user", "content": "x", "name": "n"}}})
	assert.Equal(t, http.StatusBadRequest, res.Code, "unknown members are refused: %s", res.Body)
	many := make([]any, MaxInputMessages+1)
	for i := range many {
		many[i] = map[string]any{"role": "user", "content": "x"}
	}
	res = f.respond(t, "v", map[string]any{"input": many})
	assert.Equal(t, http.StatusBadRequest, res.Code, res.Body)
	for _, p := range f.providers {
		assert.Zero(t, p.callCount())
	}
}

// A streamed answer arrives as server-sent events; its replay is one delta and the answer.
func TestStream(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := body("balanced", "hi")
	b["stream"] = true
	res := f.respond(t, "s", b)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	evs := sse(t, res.Body)
	require.Len(t, evs, 4)
	assert.Equal(t, []string{"response.delta", "response.delta", "response.delta", "response.completed"},
		[]string{evs[0].name, evs[1].name, evs[2].name, evs[3].name})
	assert.Equal(t, " says", evs[1].data["delta"])
	assert.Equal(t, "openai says hi", evs[3].data["output_text"])

	res = f.respond(t, "s", b)
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader))
	evs = sse(t, res.Body)
	require.Len(t, evs, 2)
	assert.Equal(t, "openai says hi", evs[0].data["delta"])
	assert.Equal(t, 1, f.providers[aiapi.OpenAI].callCount())

	// A failure after the first delta ends the stream with an error event: no other
	// provider starts over, and the key is free for a retry.
	f.providers[aiapi.OpenAI].midStream = &aiapi.ProviderError{Status: 500, Temporary: true}
	res = f.respond(t, "s2", b)
	require.Equal(t, http.StatusOK, res.Code)
	evs = sse(t, res.Body)
	require.Len(t, evs, 2)
	assert.Equal(t, "openai", evs[0].data["delta"])
	assert.Equal(t, "error", evs[1].name)
	assert.Equal(t, "provider_unavailable", evs[1].data["code"])
	assert.Zero(t, f.providers[aiapi.Anthropic].callCount()+f.providers[aiapi.Gemini].callCount())
	res = f.respond(t, "s2", b)
	assert.Empty(t, res.Header.Get(ReplayedHeader))
	assert.Equal(t, "response.completed", sse(t, res.Body)[3].name)
}

// A caller that goes away does not stop its generation: the provider bills it anyway, so it
// runs to its end, is metered once, and its answer is kept under the key, which the caller's
// retry replays without a second provider call. Streamed (the caller gone after the first
// piece of text) and not (the caller's context canceled while the provider works).
func TestGenerationOutlivesTheCaller(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	o := f.providers[aiapi.OpenAI]
	req := ResponseRequest{Profile: "balanced", Provider: "auto", Stream: true,
		Input: []aiapi.Message{{Role: aiapi.RoleUser, Content: "hi"}}}
	pieces := 0
	resp, replayed, err := f.svc.Respond(t.Context(), f.Account.ID, "gone", req, func(string) error {
		pieces++
		return errors.New("write: broken pipe")
	})
	require.NoError(t, err)
	assert.False(t, replayed)
	assert.Equal(t, 1, pieces, "nothing more is written to a caller that is gone")
	assert.Equal(t, "openai says hi", resp.OutputText, "the provider was read to its end")
	b := body("balanced", "hi")
	b["stream"] = true
	res := f.respond(t, "gone", b)
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader), "the retry replays the kept answer")
	assert.Equal(t, "openai says hi", sse(t, res.Body)[0].data["delta"])
	assert.Equal(t, 1, o.callCount())

	o.hold, o.entered = make(chan struct{}), make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	req.Stream = false
	done := make(chan error, 1)
	go func() {
		_, _, err := f.svc.Respond(ctx, f.Account.ID, "gone2", req, nil)
		done <- err
	}()
	<-o.entered
	cancel() // the caller hangs up while the provider works
	close(o.hold)
	require.NoError(t, <-done)
	res = f.respond(t, "gone2", body("balanced", "hi"))
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, "true", res.Header.Get(ReplayedHeader))
	assert.Equal(t, 2, o.callCount())

	rep, err := f.svc.Usage(t.Context(), f.Account.ID, UsageQuery{})
	require.NoError(t, err)
	assert.Equal(t, int64(2), rep.Total.Requests, "each generation metered once")
	assert.Equal(t, int64(6), rep.Total.OutputTokens)
}

type event struct {
	name string
	data map[string]any
}

func sse(t *testing.T, body string) []event {
	t.Helper()
	var out []event
	sc := bufio.NewScanner(strings.NewReader(body))
	var cur event
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &cur.data))
		case line == "":
			out = append(out, cur)
			cur = event{}
		}
	}
	return out
}

// An answer too large to keep under its key is still answered and metered; the key is
// released (a retry generates anew) instead of the request failing after the provider billed.
func TestAnswerTooLargeToKeep(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.providers[aiapi.Gemini].text = strings.Repeat("\u0001", 80_000) // 6 bytes each in JSON
	res := f.respond(t, "big", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code)
	assert.Len(t, res.JSON["output_text"], 80_000)
	res = f.respond(t, "big", body("fast", "hi"))
	require.Equal(t, http.StatusOK, res.Code)
	assert.Empty(t, res.Header.Get(ReplayedHeader))
	assert.Equal(t, 2, f.providers[aiapi.Gemini].callCount())
	res = f.Do(t, "GET", "/api/v1/ai/usage?from=2026-11-20&to=2026-11-20", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["total"].(map[string]any)["requests"])
}
