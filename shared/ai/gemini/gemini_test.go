package gemini_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/gemini"
	"github.com/botplatform/api/tests/fakes/ai/aitest"
	fake "github.com/botplatform/api/tests/fakes/ai/gemini"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

func newClient(t testing.TB, url string) *gemini.Client {
	t.Helper()
	c, err := gemini.New(gemini.Config{BaseURL: url, AllowPrivate: true})
	require.NoError(t, err)
	return c
}

func TestSuite(t *testing.T) {
	t.Parallel()
	aitest.Run(t, aitest.Provider{
		Fake:        func(t testing.TB) aitest.Fake { return fake.New(t) },
		Client:      func(t testing.TB, url string) ai.Client { return newClient(t, url) },
		Model:       "gemini-2.0-flash",
		Answered:    "gemini-2.0-flash",
		Temperature: 1.2,
	})
}

func TestNew(t *testing.T) {
	t.Parallel()
	_, err := gemini.New(gemini.Config{})
	require.NoError(t, err, "the default base URL")
	_, err = gemini.New(gemini.Config{BaseURL: "http://generativelanguage.googleapis.com"})
	assert.Error(t, err, "plain http outside tests")
}

func TestKeyNeverInURL(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddKey(aitest.Key)
	c := newClient(t, f.URL())
	req := ai.Request{Model: "models/gemini-2.5-pro", MaxOutputTokens: 10, Messages: []ai.Message{{Role: ai.RoleUser, Content: "hi"}}}
	resp, err := c.Generate(t.Context(), aitest.Key, req)
	require.NoError(t, err, "a models/ prefix is taken")
	assert.Equal(t, "gemini-2.5-pro", resp.Model)
	_, err = c.Stream(t.Context(), aitest.Key, req, func(string) error { return nil })
	require.NoError(t, err)
	uris := f.RequestURIs()
	require.Len(t, uris, 2)
	assert.Equal(t, "/v1beta/models/gemini-2.5-pro:generateContent", uris[0])
	assert.Equal(t, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", uris[1])
	for _, u := range uris {
		assert.NotContains(t, u, aitest.Key)
	}
}

func TestModelIDChecked(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddKey(aitest.Key)
	c := newClient(t, f.URL())
	for _, model := range []string{"gemini-2.0-flash:streamGenerateContent", "../files/x", "gemini 2", "a/b"} {
		var pe *ai.ProviderError
		_, err := c.Generate(t.Context(), aitest.Key, ai.Request{Model: model, MaxOutputTokens: 10,
			Messages: []ai.Message{{Role: ai.RoleUser, Content: "hi"}}})
		require.ErrorAs(t, err, &pe, model)
		assert.Equal(t, "invalid_request", pe.Code)
	}
	assert.Zero(t, f.Requests())
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	f := fake.New(t)
	f.AddKey(aitest.Key)
	c := newClient(t, f.URL())
	req := ai.Request{Model: "gemini-2.0-flash", MaxOutputTokens: 10, Messages: []ai.Message{{Role: ai.RoleUser, Content: "hi"}}}

	f.FailNext(1, http.StatusForbidden)
	_, err := c.Generate(t.Context(), aitest.Key, req)
	assert.ErrorIs(t, err, ai.ErrUnauthorized, "403 PERMISSION_DENIED")

	hot := 3.0
	req.Temperature = &hot
	var pe *ai.ProviderError
	_, err = c.Generate(t.Context(), aitest.Key, req)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "INVALID_ARGUMENT", pe.Code)
	assert.False(t, pe.Temporary)
}

// Gemini's 429 says how long to wait in a RetryInfo detail, not always in a header; a
// blocked prompt has no candidate, only its feedback.
func TestRetryInfoAndBlockedPrompt(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /limited/v1beta/models/{call}", func(w http.ResponseWriter, r *http.Request) {
		fakehttp.WriteJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{"code": 429,
			"message": "quota", "status": "RESOURCE_EXHAUSTED", "details": []any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "34.5s"}}}})
	})
	mux.HandleFunc("POST /blocked/v1beta/models/{call}", func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"promptFeedback": map[string]any{"blockReason": "SAFETY"},
			"usageMetadata": map[string]any{"promptTokenCount": 4, "totalTokenCount": 4}, "modelVersion": "gemini-2.0-flash"}
		if strings.Contains(r.URL.Path, "stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = w.Write([]byte("data: " + string(fakehttp.MustJSON(body)) + "\r\n\r\n"))
			return
		}
		fakehttp.WriteJSON(w, http.StatusOK, body)
	})
	mux.HandleFunc("POST /cut/v1beta/models/{call}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(`data: {"candidates":[{"content":{"parts":[{"text":"Hi"}],"role":"model"},"index":0}]}` + "\r\n\r\n"))
	})
	srv := fakehttp.Start(t, mux)
	req := ai.Request{Model: "gemini-2.0-flash", MaxOutputTokens: 10, Messages: []ai.Message{{Role: ai.RoleUser, Content: "hi"}}}
	nop := func(string) error { return nil }

	var rl *ai.RateLimitedError
	_, err := newClient(t, srv.URL+"/limited").Generate(t.Context(), "k", req)
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 34500*time.Millisecond, rl.RetryAfter)

	blocked := newClient(t, srv.URL+"/blocked")
	resp, err := blocked.Generate(t.Context(), "k", req)
	require.NoError(t, err)
	assert.Equal(t, ai.StopFilter, resp.StopReason)
	assert.Empty(t, resp.Text)
	assert.Equal(t, int64(4), resp.Usage.InputTokens)
	resp, err = blocked.Stream(t.Context(), "k", req, nop)
	require.NoError(t, err)
	assert.Equal(t, ai.StopFilter, resp.StopReason)

	var pe *ai.ProviderError
	_, err = newClient(t, srv.URL+"/cut").Stream(t.Context(), "k", req, nop)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "incomplete_stream", pe.Code)
	assert.True(t, pe.Temporary)
}
