// Package openai is a fake of OpenAI's Chat Completions API (POST /v1/chat/completions) on
// 127.0.0.1, for tests. It checks what OpenAI checks: the bearer key (401 invalid_api_key in
// OpenAI's envelope for one not added with AddKey), a JSON body without unknown parameters,
// a model it has (404 model_not_found), messages with known roles and text content,
// max_completion_tokens (present here, and at least 1), a temperature within 0..2 and
// stream_options only with stream. It answers as a model that echoes (aifake.Generate), as a
// chat.completion or as chat.completion.chunk server-sent events (a word each, the usage in
// a last chunk when stream_options.include_usage, then [DONE]). It imports nothing of the
// client.
package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botplatform/api/tests/fakes/ai/aifake"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// Models maps the model ids the fake has to the snapshot OpenAI answers with.
var Models = map[string]string{
	"gpt-4o-mini":            "gpt-4o-mini-2024-07-18",
	"gpt-4o-mini-2024-07-18": "gpt-4o-mini-2024-07-18",
	"gpt-4o":                 "gpt-4o-2024-08-06",
	"gpt-4o-2024-08-06":      "gpt-4o-2024-08-06",
	"gpt-4.1-mini":           "gpt-4.1-mini-2025-04-14",
}

// Server is the fake. Its methods (the embedded controls included) are safe for concurrent
// use.
type Server struct {
	aifake.Controls
	ids atomic.Int64
}

// New starts a fake on 127.0.0.1, closed when the test ends (held answers released first).
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{}
	s.Serve(t, s.handler())
	return s
}

// Listen starts the fake outside a test (make demo); close stops it.
func Listen() (s *Server, close func()) {
	s = &Server{}
	return s, s.Controls.Listen(s.handler())
}

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.completions)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.Admit()
		writeError(w, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", nil, nil)
	})
	return mux
}

// writeError answers OpenAI's envelope {"error": {message, type, param, code}}.
func writeError(w http.ResponseWriter, status int, message, typ string, param, code any) {
	w.Header().Set("x-request-id", "req_"+fakehttp.RandomString(24))
	fakehttp.WriteJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ,
		"param": param, "code": code}})
}

func invalid(w http.ResponseWriter, message string, param, code any) {
	writeError(w, http.StatusBadRequest, message, "invalid_request_error", param, code)
}

func fail(w http.ResponseWriter, status int) {
	switch {
	case status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		w.Header().Set("retry-after-ms", "1000")
		writeError(w, status, "Rate limit reached for requests. Please try again in 1s.", "requests", "", "rate_limit_exceeded")
	case status >= 502 && status <= 504:
		fakehttp.ProxyError(w, status)
	case status >= 500:
		writeError(w, status, "The server had an error while processing your request. Sorry about that!", "server_error", nil, nil)
	case status == http.StatusUnauthorized:
		writeError(w, status, "Incorrect API key provided.", "invalid_request_error", nil, "invalid_api_key")
	default:
		writeError(w, status, http.StatusText(status), "invalid_request_error", nil, nil)
	}
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Name    string          `json:"name,omitempty"`
}

type request struct {
	Model               string     `json:"model"`
	Messages            *[]message `json:"messages"`
	MaxCompletionTokens *int       `json:"max_completion_tokens"`
	MaxTokens           *int       `json:"max_tokens"` // deprecated, still taken
	Temperature         *float64   `json:"temperature"`
	Stream              bool       `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	User string `json:"user"`
}

// text reads a message's content: a string, or an array of text parts.
func text(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

// key reads the bearer key: masked in OpenAI's answer to a wrong one.
func (s *Server) key(w http.ResponseWriter, r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	key, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok || key == "" {
		writeError(w, http.StatusUnauthorized, "You didn't provide an API key. You need to provide your API key in an "+
			"Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", "invalid_request_error", nil, nil)
		return false
	}
	if !s.Valid(key) {
		masked := key
		if len(key) > 8 {
			masked = key[:3] + strings.Repeat("*", 8) + key[len(key)-4:]
		}
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided: "+masked+
			". You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", nil, "invalid_api_key")
		return false
	}
	return true
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	if status := s.Admit(); status != 0 {
		fail(w, status)
		return
	}
	if !s.key(w, r) {
		return
	}
	var req request
	if err := aifake.Decode(r, &req); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			invalid(w, "Unrecognized request argument supplied: "+strings.Trim(name, `"`), nil, nil)
			return
		}
		invalid(w, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "+
			"HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)", nil, nil)
		return
	}
	if req.Model == "" {
		invalid(w, "you must provide a model parameter", nil, nil)
		return
	}
	if req.Messages == nil {
		invalid(w, "Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
		return
	}
	if len(*req.Messages) == 0 {
		invalid(w, "Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.",
			"messages", "empty_array")
		return
	}
	var inputs []string
	lastUser := ""
	for i, m := range *req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		default:
			invalid(w, fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', "+
				"'tool', and 'developer'.", m.Role), fmt.Sprintf("messages[%d].role", i), "invalid_value")
			return
		}
		t, ok := text(m.Content)
		if !ok {
			invalid(w, fmt.Sprintf("Invalid type for 'messages[%d].content': expected one of a string or array of "+
				"objects, but got something else instead.", i), fmt.Sprintf("messages[%d].content", i), "invalid_type")
			return
		}
		inputs = append(inputs, t)
		if m.Role == "user" {
			lastUser = t
		}
	}
	limit := req.MaxCompletionTokens
	if limit == nil {
		limit = req.MaxTokens
	}
	if limit == nil {
		// OpenAI has a default; the fake insists, since the platform always bounds answers.
		invalid(w, "Missing required parameter: 'max_completion_tokens'.", "max_completion_tokens", "missing_required_parameter")
		return
	}
	if *limit < 1 {
		invalid(w, fmt.Sprintf("Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, "+
			"but got %d instead.", *limit), "max_completion_tokens", "integer_below_min_value")
		return
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		invalid(w, fmt.Sprintf("Invalid 'temperature': decimal out of range. Expected a value between 0 and 2, but got %v "+
			"instead.", *t), "temperature", "decimal_out_of_range")
		return
	}
	if req.StreamOptions != nil && !req.Stream {
		invalid(w, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", nil)
		return
	}
	snapshot, ok := Models[req.Model]
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", req.Model),
			"invalid_request_error", nil, "model_not_found")
		return
	}
	a := s.Generate(lastUser, *limit, inputs...)
	id := fmt.Sprintf("chatcmpl-fake%06d", s.ids.Add(1))
	finish := "stop"
	if a.Truncated {
		finish = "length"
	}
	usage := map[string]any{"prompt_tokens": a.InputTokens, "completion_tokens": a.OutputTokens,
		"total_tokens": a.InputTokens + a.OutputTokens}
	w.Header().Set("x-request-id", "req_"+fakehttp.RandomString(24))
	w.Header().Set("openai-processing-ms", "42")
	if !req.Stream {
		if !s.Wait(r.Context()) {
			return
		}
		s.Bill(a)
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion",
			"created": time.Now().Unix(), "model": snapshot, "system_fingerprint": "fp_fake",
			"choices": []any{map[string]any{"index": 0, "logprobs": nil, "finish_reason": finish,
				"message": map[string]any{"role": "assistant", "content": a.Text, "refusal": nil}}},
			"usage": usage})
		return
	}
	s.Bill(a)
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	chunk := func(delta map[string]any, finish any) {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": snapshot,
			"system_fingerprint": "fp_fake",
			"choices":            []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}}}
		if includeUsage {
			c["usage"] = nil
		}
		fmt.Fprintf(w, "data: %s\n\n", fakehttp.MustJSON(c))
		aifake.Flush(w)
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	for i, p := range a.Pieces {
		if i == 1 && !s.Wait(r.Context()) {
			return
		}
		chunk(map[string]any{"content": p}, nil)
	}
	if len(a.Pieces) < 2 && !s.Wait(r.Context()) {
		return
	}
	chunk(map[string]any{}, finish)
	if includeUsage {
		fmt.Fprintf(w, "data: %s\n\n", fakehttp.MustJSON(map[string]any{"id": id, "object": "chat.completion.chunk",
			"created": time.Now().Unix(), "model": snapshot, "system_fingerprint": "fp_fake", "choices": []any{}, "usage": usage}))
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	aifake.Flush(w)
}
