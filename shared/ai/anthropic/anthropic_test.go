package anthropic_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/anthropic"
	"github.com/botplatform/api/tests/fakes/ai/aitest"
	fake "github.com/botplatform/api/tests/fakes/ai/anthropic"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

func newClient(t testing.TB, url string) *anthropic.Client {
	t.Helper()
	c, err := anthropic.New(anthropic.Config{BaseURL: url, AllowPrivate: true})
	require.NoError(t, err)
	return c
}

func TestSuite(t *testing.T) {
	t.Parallel()
	aitest.Run(t, aitest.Provider{
		Fake:        func(t testing.TB) aitest.Fake { return fake.New(t) },
		Client:      func(t testing.TB, url string) ai.Client { return newClient(t, url) },
		Model:       "claude-3-5-haiku-latest",
		Answered:    "claude-3-5-haiku-20241022",
		Temperature: 0.7,
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := anthropic.New(anthropic.Config{})
	require.NoError(t, err, "the default base URL")
	_, err = anthropic.New(anthropic.Config{BaseURL: "http://api.anthropic.com"})
	assert.Error(t, err, "plain http outside tests")
	_, err = anthropic.New(anthropic.Config{BaseURL: "https://api.anthropic.com#x"})
	assert.Error(t, err)
}

func TestOverloaded(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddKey(aitest.Key)
	c := newClient(t, f.URL())
	req := ai.Request{Model: "claude-sonnet-4-0", MaxOutputTokens: 10, Messages: []ai.Message{{Role: ai.RoleUser, Content: "hi"}}}
	f.FailNext(2, fake.StatusOverloaded)
	var rl *ai.RateLimitedError
	_, err := c.Generate(t.Context(), aitest.Key, req)
	require.ErrorAs(t, err, &rl, "529 is an overload: slow down")
	assert.Zero(t, rl.RetryAfter)
	_, err = c.Stream(t.Context(), aitest.Key, req, func(string) error { return nil })
	require.ErrorAs(t, err, &rl)

	f.FailNext(1, http.StatusForbidden)
	_, err = c.Generate(t.Context(), aitest.Key, req)
	assert.ErrorIs(t, err, ai.ErrUnauthorized, "403 permission_error")

	resp, err := c.Generate(t.Context(), aitest.Key, req)
	require.NoError(t, err)
	assert.Equal(t, "claude-sonnet-4-20250514", resp.Model)
	assert.Contains(t, resp.ID, "msg_")
}

// The Messages API takes the system prompt apart and turns that alternate, starting with
// the user's: the client joins system messages and consecutive turns of one role.
func TestConversationShape(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddKey(aitest.Key)
	c := newClient(t, f.URL())
	req := ai.Request{Model: "claude-3-5-haiku-latest", MaxOutputTokens: 20, Messages: []ai.Message{
		{Role: ai.RoleSystem, Content: "Be kind."},
		{Role: ai.RoleSystem, Content: "Be brief."},
		{Role: ai.RoleUser, Content: "first"},
		{Role: ai.RoleUser, Content: "second"},
		{Role: ai.RoleAssistant, Content: "ok"},
		{Role: ai.RoleUser, Content: "last one"},
	}}
	resp, err := c.Generate(t.Context(), aitest.Key, req)
	require.NoError(t, err)
	assert.Equal(t, "echo: last one", resp.Text)
	assert.Equal(t, ai.Usage{InputTokens: 9, OutputTokens: 3}, resp.Usage)

	hot := 1.5
	req.Temperature = &hot
	var pe *ai.ProviderError
	_, err = c.Generate(t.Context(), aitest.Key, req)
	require.ErrorAs(t, err, &pe, "Anthropic's temperature is 0..1")
	assert.Equal(t, "invalid_request_error", pe.Code)
	assert.False(t, pe.Temporary)

	req = ai.Request{Model: "claude-3-5-haiku-latest", MaxOutputTokens: 20, Messages: []ai.Message{
		{Role: ai.RoleAssistant, Content: "I start"}, {Role: ai.RoleUser, Content: "hi"}}}
	_, err = c.Generate(t.Context(), aitest.Key, req)
	require.ErrorAs(t, err, &pe, "the first turn must be the user's")
	assert.Equal(t, http.StatusBadRequest, pe.Status)
}

// An error event after the stream's 200 maps as its status would; a stream cut before
// message_stop is a temporary failure.
func TestStreamBroken(t *testing.T) {
	t.Parallel()
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{\"input_tokens\":3}}}\n\n"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /overloaded/v1/messages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"))
	})
	mux.HandleFunc("POST /failed/v1/messages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"Internal\"}}\n\n"))
	})
	mux.HandleFunc("POST /cut/v1/messages", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"))
	})
	srv := fakehttp.Start(t, mux)
	req := ai.Request{Model: "m", MaxOutputTokens: 5, Messages: []ai.Message{{Role: ai.RoleUser, Content: "hi"}}}
	nop := func(string) error { return nil }

	var rl *ai.RateLimitedError
	_, err := newClient(t, srv.URL+"/overloaded").Stream(t.Context(), "k", req, nop)
	require.ErrorAs(t, err, &rl)

	var pe *ai.ProviderError
	_, err = newClient(t, srv.URL+"/failed").Stream(t.Context(), "k", req, nop)
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, "api_error", pe.Code)

	_, err = newClient(t, srv.URL+"/cut").Stream(t.Context(), "k", req, nop)
	require.ErrorAs(t, err, &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, "incomplete_stream", pe.Code)
}
