// Package anthropic is a fake of Anthropic's Messages API (POST /v1/messages) on 127.0.0.1,
// for tests. It checks what Anthropic checks: the x-api-key header (401 authentication_error
// for one not added with AddKey), the anthropic-version header, a JSON body without unknown
// members, a model it has (404 not_found_error), max_tokens present and at least 1, messages
// with alternating user and assistant roles starting with user and non-empty text content, a
// system prompt as a string or text blocks, and a temperature within 0..1; it answers in
// Anthropic's envelope {"type": "error", "error": {type, message}}. It answers as a model
// that echoes (aifake.Generate), as a message or as Anthropic's typed server-sent events
// (message_start, content_block_start, ping, a content_block_delta a word, content_block_stop,
// message_delta, message_stop). It imports nothing of the client.
package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/botplatform/api/tests/fakes/ai/aifake"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// Models maps the model ids the fake has (aliases and dated ids) to the id Anthropic answers
// with.
var Models = map[string]string{
	"claude-3-5-haiku-latest":    "claude-3-5-haiku-20241022",
	"claude-3-5-haiku-20241022":  "claude-3-5-haiku-20241022",
	"claude-sonnet-4-0":          "claude-sonnet-4-20250514",
	"claude-sonnet-4-20250514":   "claude-sonnet-4-20250514",
	"claude-3-7-sonnet-latest":   "claude-3-7-sonnet-20250219",
	"claude-3-7-sonnet-20250219": "claude-3-7-sonnet-20250219",
}

// Versions are the anthropic-version values the fake accepts.
var Versions = []string{"2023-06-01", "2023-01-01"}

// StatusOverloaded is Anthropic's status for overloaded_error.
const StatusOverloaded = 529

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
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.Admit()
		writeError(w, http.StatusNotFound, "not_found_error", "Not Found")
	})
	return mux
}

func writeError(w http.ResponseWriter, status int, typ, message string) {
	w.Header().Set("request-id", "req_"+fakehttp.RandomString(24))
	fakehttp.WriteJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
}

func invalid(w http.ResponseWriter, message string) {
	writeError(w, http.StatusBadRequest, "invalid_request_error", message)
}

func fail(w http.ResponseWriter, status int) {
	switch {
	case status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		w.Header().Set("anthropic-ratelimit-requests-limit", "50")
		w.Header().Set("anthropic-ratelimit-requests-remaining", "0")
		writeError(w, status, "rate_limit_error", "This request would exceed the rate limit for your organization of 50 requests per minute.")
	case status == StatusOverloaded:
		writeError(w, status, "overloaded_error", "Overloaded")
	case status >= 502 && status <= 504:
		fakehttp.ProxyError(w, status)
	case status >= 500:
		writeError(w, status, "api_error", "Internal server error")
	case status == http.StatusUnauthorized:
		writeError(w, status, "authentication_error", "invalid x-api-key")
	case status == http.StatusForbidden:
		writeError(w, status, "permission_error", "Your API key does not have permission to use the specified resource.")
	default:
		writeError(w, status, "invalid_request_error", http.StatusText(status))
	}
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type request struct {
	Model         *string          `json:"model"`
	MaxTokens     *int             `json:"max_tokens"`
	Messages      *[]message       `json:"messages"`
	System        json.RawMessage  `json:"system"`
	Temperature   *float64         `json:"temperature"`
	Stream        bool             `json:"stream"`
	StopSequences []string         `json:"stop_sequences"`
	Metadata      *json.RawMessage `json:"metadata"`
}

// text reads a content or a system prompt: a string, or an array of text blocks.
func text(raw json.RawMessage) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, true
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil || len(blocks) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, bl := range blocks {
		if bl.Type != "text" || bl.Text == "" {
			return "", false
		}
		b.WriteString(bl.Text)
	}
	return b.String(), true
}

func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	if status := s.Admit(); status != 0 {
		fail(w, status)
		return
	}
	key := r.Header.Get("x-api-key")
	if key == "" {
		writeError(w, http.StatusUnauthorized, "authentication_error", "x-api-key header is required")
		return
	}
	if !s.Valid(key) {
		writeError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key")
		return
	}
	switch v := r.Header.Get("anthropic-version"); {
	case v == "":
		invalid(w, "anthropic-version: header is required")
		return
	case !slices.Contains(Versions, v):
		invalid(w, fmt.Sprintf("anthropic-version: invalid version %q", v))
		return
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		invalid(w, "content-type: must be application/json")
		return
	}
	var req request
	if err := aifake.Decode(r, &req); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			invalid(w, strings.Trim(name, `"`)+": Extra inputs are not permitted")
			return
		}
		invalid(w, "There was an issue with the request body: the JSON could not be parsed")
		return
	}
	switch {
	case req.Model == nil:
		invalid(w, "model: Field required")
		return
	case req.MaxTokens == nil:
		invalid(w, "max_tokens: Field required")
		return
	case *req.MaxTokens < 1:
		invalid(w, "max_tokens: Input should be greater than or equal to 1")
		return
	case req.Messages == nil:
		invalid(w, "messages: Field required")
		return
	case len(*req.Messages) == 0:
		invalid(w, "messages: at least one message is required")
		return
	case req.Temperature != nil && (*req.Temperature < 0 || *req.Temperature > 1):
		invalid(w, "temperature: Input should be less than or equal to 1")
		return
	}
	var inputs []string
	if len(req.System) > 0 {
		sys, ok := text(req.System)
		if !ok {
			invalid(w, "system: Input should be a valid string or a list of text blocks")
			return
		}
		inputs = append(inputs, sys)
	}
	lastUser := ""
	for i, m := range *req.Messages {
		if m.Role != "user" && m.Role != "assistant" {
			invalid(w, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
			return
		}
		if i == 0 && m.Role != "user" {
			invalid(w, `messages: first message must use the "user" role`)
			return
		}
		if i > 0 && (*req.Messages)[i-1].Role == m.Role {
			invalid(w, fmt.Sprintf(`messages: roles must alternate between "user" and "assistant", but found multiple %q roles in a row`, m.Role))
			return
		}
		t, ok := text(m.Content)
		if !ok || (t == "" && !(m.Role == "assistant" && i == len(*req.Messages)-1)) {
			invalid(w, fmt.Sprintf("messages.%d.content: text content blocks must be non-empty", i))
			return
		}
		inputs = append(inputs, t)
		if m.Role == "user" {
			lastUser = t
		}
	}
	model, ok := Models[*req.Model]
	if !ok {
		writeError(w, http.StatusNotFound, "not_found_error", "model: "+*req.Model)
		return
	}
	a := s.Generate(lastUser, *req.MaxTokens, inputs...)
	id := fmt.Sprintf("msg_fake%016d", s.ids.Add(1))
	stop := "end_turn"
	if a.Truncated {
		stop = "max_tokens"
	}
	w.Header().Set("request-id", "req_"+fakehttp.RandomString(24))
	if !req.Stream {
		if !s.Wait(r.Context()) {
			return
		}
		s.Bill(a)
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{map[string]any{"type": "text", "text": a.Text}}, "stop_reason": stop, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": a.InputTokens, "output_tokens": a.OutputTokens,
				"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
		return
	}
	s.Bill(a)
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	event := func(name string, data map[string]any) {
		data["type"] = name
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, fakehttp.MustJSON(data))
		aifake.Flush(w)
	}
	event("message_start", map[string]any{"message": map[string]any{"id": id, "type": "message", "role": "assistant",
		"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": a.InputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}})
	event("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	event("ping", map[string]any{})
	for i, p := range a.Pieces {
		if i == 1 && !s.Wait(r.Context()) {
			return
		}
		event("content_block_delta", map[string]any{"index": 0, "delta": map[string]any{"type": "text_delta", "text": p}})
	}
	if len(a.Pieces) < 2 && !s.Wait(r.Context()) {
		return
	}
	event("content_block_stop", map[string]any{"index": 0})
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": a.OutputTokens}})
	event("message_stop", map[string]any{})
}
