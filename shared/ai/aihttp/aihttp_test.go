package aihttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/aihttp"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

func events(t *testing.T, r *aihttp.Reader) ([]aihttp.Event, error) {
	t.Helper()
	var out []aihttp.Event
	for {
		ev, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestReader(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in   string
		want []aihttp.Event
	}{
		"lf":              {"data: {\"a\":1}\n\ndata: [DONE]\n\n", []aihttp.Event{{Data: []byte(`{"a":1}`)}, {Data: []byte("[DONE]")}}},
		"crlf":            {"data: x\r\n\r\ndata: y\r\n\r\n", []aihttp.Event{{Data: []byte("x")}, {Data: []byte("y")}}},
		"lone cr":         {"event: e\rdata: x\r\r", []aihttp.Event{{Name: "e", Data: []byte("x")}}},
		"comments":        {": keep-alive\n\n:ping\ndata: x\n\n", []aihttp.Event{{Data: []byte("x")}}},
		"named":           {"event: message_stop\ndata: {}\n\n", []aihttp.Event{{Name: "message_stop", Data: []byte("{}")}}},
		"multi-line data": {"data: a\ndata:b\ndata:  c\n\n", []aihttp.Event{{Data: []byte("a\nb\n c")}}},
		"no data":         {"event: ping\n\nid: 3\nretry: 10\n\n", nil},
		"unterminated":    {"data: x\n\ndata: cut", []aihttp.Event{{Data: []byte("x")}}},
		"name reset":      {"event: a\n\ndata: x\n\n", []aihttp.Event{{Data: []byte("x")}}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := events(t, aihttp.NewReader(strings.NewReader(tc.in), 0, nil))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// A CR at the end of one read and its LF at the start of the next are one line end.
func TestReaderSplitCRLF(t *testing.T) {
	t.Parallel()
	pr, pw := io.Pipe()
	go func() {
		for _, s := range []string{"data: x\r", "\n\r", "\ndata: y\r\n", "\r\n"} {
			_, _ = pw.Write([]byte(s))
		}
		_ = pw.Close()
	}()
	got, err := events(t, aihttp.NewReader(pr, 0, nil))
	require.NoError(t, err)
	assert.Equal(t, []aihttp.Event{{Data: []byte("x")}, {Data: []byte("y")}}, got)
}

func TestReaderBounds(t *testing.T) {
	t.Parallel()
	long := "data: " + strings.Repeat("x", aihttp.MaxLineBytes) + "\n\n"
	_, err := events(t, aihttp.NewReader(strings.NewReader(long), 0, nil))
	assert.ErrorIs(t, err, aihttp.ErrLineTooLong)

	fits := "data: " + strings.Repeat("x", aihttp.MaxLineBytes-10) + "\n\n"
	got, err := events(t, aihttp.NewReader(strings.NewReader(fits), 0, nil))
	require.NoError(t, err)
	assert.Len(t, got, 1)

	many := strings.Repeat("data: "+strings.Repeat("x", 1000)+"\n", 2000) + "\n"
	_, err = events(t, aihttp.NewReader(strings.NewReader(many), 0, nil))
	assert.ErrorIs(t, err, aihttp.ErrLineTooLong, "an event's data lines add up")

	stream := strings.Repeat("data: 0123456789\n\n", 100)
	got, err = events(t, aihttp.NewReader(strings.NewReader(stream), int64(len(stream)), nil))
	require.NoError(t, err, "exactly the limit")
	assert.Len(t, got, 100)
	_, err = events(t, aihttp.NewReader(strings.NewReader(stream), int64(len(stream)-1), nil))
	assert.ErrorIs(t, err, aihttp.ErrTooLarge)

	lines := 0
	_, err = events(t, aihttp.NewReader(strings.NewReader(": a\n: b\ndata: x\n\n"), 0, func() { lines++ }))
	require.NoError(t, err)
	assert.Equal(t, 4, lines, "keep-alives count as signs of life")
}

func TestRefusal(t *testing.T) {
	t.Parallel()
	err := aihttp.Refusal(401, "invalid_api_key", "Incorrect API key provided: sk-ab****wxyz", 0)
	assert.ErrorIs(t, err, ai.ErrUnauthorized)
	assert.NotContains(t, err.Error(), "sk-ab", "the message is left out: it quotes the key")
	assert.ErrorIs(t, aihttp.Refusal(403, "", "", 0), ai.ErrUnauthorized)
	var rl *ai.RateLimitedError
	require.ErrorAs(t, aihttp.Refusal(429, "", "", 3*time.Second), &rl)
	assert.Equal(t, 3*time.Second, rl.RetryAfter)
	var pe *ai.ProviderError
	require.ErrorAs(t, aihttp.Refusal(503, "", "down", 0), &pe)
	assert.True(t, pe.Temporary)
	assert.Equal(t, "Service Unavailable", pe.Code)
	require.ErrorAs(t, aihttp.Refusal(404, "model_not_found", strings.Repeat("é", 600), 0), &pe)
	assert.False(t, pe.Temporary)
	assert.LessOrEqual(t, len(pe.Message), 500)
	assert.True(t, strings.HasSuffix(pe.Message, "é"), "cut on a rune boundary")
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Now()
	assert.Equal(t, 1500*time.Millisecond, aihttp.RetryAfter(http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, now))
	assert.Equal(t, 2*time.Second, aihttp.RetryAfter(http.Header{"Retry-After": {"2"}}, now))
	assert.Zero(t, aihttp.RetryAfter(http.Header{"Retry-After-Ms": {"soon"}}, now))
}

func TestConfigOpen(t *testing.T) {
	t.Parallel()
	u, hc, err := aihttp.Config{}.Open("https://api.example.com")
	require.NoError(t, err)
	assert.Equal(t, "https://api.example.com", u)
	assert.NotNil(t, hc, "a default client")
	mine := &http.Client{}
	u, hc, err = aihttp.Config{BaseURL: "http://127.0.0.1:8080/", AllowPrivate: true, HTTPClient: mine}.Open("https://api.example.com")
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:8080", u)
	assert.Same(t, mine, hc)
	for _, bad := range []string{"http://api.example.com", "https://k@api.example.com", "https://api.example.com/?key=1", "/v1"} {
		_, _, err := aihttp.Config{BaseURL: bad}.Open("")
		assert.Error(t, err, bad)
	}
}

func client(idle time.Duration) *aihttp.Client {
	return &aihttp.Client{HTTP: aihttp.NewHTTPClient(true), IdleTimeout: idle,
		Refuse: func(res *http.Response, body []byte) error {
			return &ai.ProviderError{Status: res.StatusCode, Message: string(body)}
		}}
}

func TestDo(t *testing.T) {
	t.Parallel()
	const secret = "sk-secret-echoed"
	mux := http.NewServeMux()
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		fakehttp.WriteJSON(w, http.StatusBadRequest, map[string]any{"error": "bad key " + r.Header.Get("X-Key")})
	})
	mux.HandleFunc("POST /huge", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"a":"`))
		_, _ = w.Write([]byte(strings.Repeat("x", aihttp.MaxResponseBytes)))
		_, _ = w.Write([]byte(`"}`))
	})
	mux.HandleFunc("POST /garbage", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("<html>")) })
	mux.HandleFunc("POST /redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/echo", http.StatusTemporaryRedirect)
	})
	srv := fakehttp.Start(t, mux)
	c := client(0)
	var out map[string]any
	req := func(path string) aihttp.Request {
		return aihttp.Request{URL: srv.URL + path, Body: map[string]any{}, Secret: secret, Header: http.Header{"X-Key": {secret}}}
	}
	err := c.Do(t.Context(), req("/echo"), &out)
	var pe *ai.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.NotContains(t, pe.Message, secret, "scrubbed before Refuse sees it")
	assert.Contains(t, pe.Message, "[redacted]")

	require.ErrorAs(t, c.Do(t.Context(), req("/huge"), &out), &pe)
	assert.Equal(t, "too_large", pe.Code)
	require.ErrorAs(t, c.Do(t.Context(), req("/garbage"), &out), &pe)
	assert.Equal(t, "bad_response", pe.Code)
	assert.True(t, pe.Temporary)
	require.ErrorAs(t, c.Do(t.Context(), req("/redirect"), &out), &pe, "redirects are not followed")
	assert.Equal(t, http.StatusTemporaryRedirect, pe.Status)
}

func TestStreamIdle(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: first\n\n"))
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	srv := fakehttp.Start(t, mux)
	t.Cleanup(func() { close(release) })
	var got []string
	err := client(300*time.Millisecond).Stream(t.Context(), aihttp.Request{URL: srv.URL + "/", Body: map[string]any{}},
		func(ev aihttp.Event) error {
			got = append(got, string(ev.Data))
			return nil
		})
	var pe *ai.ProviderError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "timeout", pe.Code)
	assert.True(t, pe.Temporary)
	assert.Equal(t, []string{"first"}, got)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err = client(time.Minute).Stream(ctx, aihttp.Request{URL: srv.URL + "/", Body: map[string]any{}},
		func(aihttp.Event) error { return nil })
	assert.ErrorIs(t, err, context.DeadlineExceeded, "the caller's deadline is the caller's error")
}

func TestCheckRequest(t *testing.T) {
	t.Parallel()
	ok := ai.Request{Model: "m", MaxOutputTokens: 1, Messages: []ai.Message{{Role: ai.RoleUser, Content: "x"}}}
	require.NoError(t, aihttp.CheckRequest(ok))
	bad := ok
	bad.Messages = []ai.Message{{Role: ai.RoleAssistant, Content: "x"}}
	var pe *ai.ProviderError
	require.ErrorAs(t, aihttp.CheckRequest(bad), &pe)
	assert.Equal(t, http.StatusBadRequest, pe.Status)
}
