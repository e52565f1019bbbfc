// Package gemini is a fake of Google's Gemini API (POST /v1beta/models/{model}:generateContent
// and :streamGenerateContent) on 127.0.0.1, for tests. It checks what Gemini checks: the key
// (the x-goog-api-key header, or the key query parameter Gemini also accepts, which the fake
// logs so that a test can prove a client never puts the key in a URL): none is 403
// PERMISSION_DENIED, one not added with AddKey 400 INVALID_ARGUMENT with the ErrorInfo reason
// API_KEY_INVALID, as Gemini answers; a JSON body without unknown members, a model it has
// (404 NOT_FOUND), contents with roles user or model and non-empty text parts,
// generationConfig.maxOutputTokens (present here, and at least 1) and a temperature within
// 0..2; it answers in Google's envelope {"error": {code, message, status, details}}. It
// answers as a model that echoes (aifake.Generate): a GenerateContentResponse, or with
// alt=sse server-sent events of one a word (CRLF line ends, as Gemini sends them), the last
// with the finish reason and the usage; without alt=sse a stream is one JSON array of them.
// It imports nothing of the client.
package gemini

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/botplatform/api/tests/fakes/ai/aifake"
	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// Models are the model ids the fake has.
var Models = []string{"gemini-2.0-flash", "gemini-2.0-flash-lite", "gemini-2.5-flash", "gemini-2.5-pro"}

// Server is the fake. Its methods (the embedded controls included) are safe for concurrent
// use.
type Server struct {
	aifake.Controls
	uris fakehttp.Log[string]
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

// RequestURIs returns the request URI (path and query) of every request, in order.
func (s *Server) RequestURIs() []string { return s.uris.All() }

func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1beta/models/{call}", s.call)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.uris.Add(r.URL.RequestURI())
		s.Admit()
		writeError(w, http.StatusNotFound, "NOT_FOUND", "Not Found", nil)
	})
	return mux
}

func writeError(w http.ResponseWriter, code int, status, message string, details []any) {
	e := map[string]any{"code": code, "message": message, "status": status}
	if details != nil {
		e["details"] = details
	}
	fakehttp.WriteJSON(w, code, map[string]any{"error": e})
}

func invalid(w http.ResponseWriter, message string) {
	writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", message, nil)
}

func fail(w http.ResponseWriter, status int) {
	switch {
	case status == http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		writeError(w, status, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.",
			[]any{
				map[string]any{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{map[string]any{
					"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
					"quotaId":     "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}}},
				map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1s"},
			})
	case status >= 502 && status <= 504:
		fakehttp.ProxyError(w, status)
	case status == http.StatusServiceUnavailable:
		writeError(w, status, "UNAVAILABLE", "The model is overloaded. Please try again later.", nil)
	case status >= 500:
		writeError(w, status, "INTERNAL", "An internal error has occurred. Please retry or report in "+
			"https://developers.generativeai.google/guide/troubleshooting", nil)
	case status == http.StatusUnauthorized:
		writeError(w, status, "UNAUTHENTICATED", "Request had invalid authentication credentials.", nil)
	case status == http.StatusForbidden:
		writeError(w, status, "PERMISSION_DENIED", "The caller does not have permission", nil)
	default:
		writeError(w, status, "INVALID_ARGUMENT", http.StatusText(status), nil)
	}
}

type part struct {
	Text *string `json:"text"`
}

type content struct {
	Role  string `json:"role"`
	Parts []part `json:"parts"`
}

type request struct {
	Contents          *[]content `json:"contents"`
	SystemInstruction *content   `json:"systemInstruction"`
	GenerationConfig  *struct {
		MaxOutputTokens *int     `json:"maxOutputTokens"`
		Temperature     *float64 `json:"temperature"`
		TopP            *float64 `json:"topP"`
		TopK            *int     `json:"topK"`
		StopSequences   []string `json:"stopSequences"`
		CandidateCount  *int     `json:"candidateCount"`
	} `json:"generationConfig"`
}

// texts reads a content's parts, which must be non-empty text parts.
func texts(c content) (string, bool) {
	if len(c.Parts) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, p := range c.Parts {
		if p.Text == nil {
			return "", false
		}
		b.WriteString(*p.Text)
	}
	return b.String(), true
}

func (s *Server) call(w http.ResponseWriter, r *http.Request) {
	s.uris.Add(r.URL.RequestURI())
	if status := s.Admit(); status != 0 {
		fail(w, status)
		return
	}
	key := r.Header.Get("x-goog-api-key")
	if key == "" {
		key = r.URL.Query().Get("key")
	}
	if key == "" {
		writeError(w, http.StatusForbidden, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without "+
			"established identity). Please use API Key or other form of API consumer identity to call this API.", nil)
		return
	}
	if !s.Valid(key) {
		writeError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", []any{
			map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
				"domain": "googleapis.com", "metadata": map[string]any{"service": "generativelanguage.googleapis.com"}},
			map[string]any{"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US",
				"message": "API key not valid. Please pass a valid API key."},
		})
		return
	}
	model, method, ok := cut(r.PathValue("call"))
	if !ok || (method != "generateContent" && method != "streamGenerateContent") {
		writeError(w, http.StatusNotFound, "NOT_FOUND", "Not Found", nil)
		return
	}
	var req request
	if err := aifake.Decode(r, &req); err != nil {
		if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			invalid(w, fmt.Sprintf("Invalid JSON payload received. Unknown name %s: Cannot find field.", name))
			return
		}
		invalid(w, "Invalid JSON payload received.")
		return
	}
	if req.Contents == nil || len(*req.Contents) == 0 {
		invalid(w, "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	var inputs []string
	if req.SystemInstruction != nil {
		t, ok := texts(*req.SystemInstruction)
		if !ok {
			invalid(w, "* GenerateContentRequest.system_instruction.parts: contents.parts must not be empty.")
			return
		}
		inputs = append(inputs, t)
	}
	lastUser := ""
	for i, c := range *req.Contents {
		if c.Role != "user" && c.Role != "model" {
			invalid(w, "Please use a valid role: user, model.")
			return
		}
		t, ok := texts(c)
		if !ok {
			invalid(w, fmt.Sprintf("* GenerateContentRequest.contents[%d].parts: contents.parts must not be empty.", i))
			return
		}
		inputs = append(inputs, t)
		if c.Role == "user" {
			lastUser = t
		}
	}
	gc := req.GenerationConfig
	if gc == nil || gc.MaxOutputTokens == nil {
		// Gemini has a default; the fake insists, since the platform always bounds answers.
		invalid(w, "* GenerateContentRequest.generation_config.max_output_tokens: must be set")
		return
	}
	if *gc.MaxOutputTokens < 1 {
		invalid(w, "* GenerateContentRequest.generation_config.max_output_tokens: max_output_tokens must be positive.")
		return
	}
	if t := gc.Temperature; t != nil && (*t < 0 || *t > 2) {
		invalid(w, fmt.Sprintf("* GenerateContentRequest.generation_config.temperature: temperature must be in the range [0.0, 2.0]. Got %v", *t))
		return
	}
	if !slices.Contains(Models, model) {
		writeError(w, http.StatusNotFound, "NOT_FOUND", fmt.Sprintf("models/%s is not found for API version v1beta, or is "+
			"not supported for %s. Call ListModels to see the list of available models and their supported methods.", model, method), nil)
		return
	}
	a := s.Generate(lastUser, *gc.MaxOutputTokens, inputs...)
	id := fakehttp.RandomString(22)
	finish := "STOP"
	if a.Truncated {
		finish = "MAX_TOKENS"
	}
	usage := map[string]any{"promptTokenCount": a.InputTokens, "candidatesTokenCount": a.OutputTokens,
		"totalTokenCount":     a.InputTokens + a.OutputTokens,
		"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": a.InputTokens}}}
	chunk := func(text string, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": text}}, "role": "model"}, "index": 0}
		u := map[string]any{"promptTokenCount": a.InputTokens, "totalTokenCount": a.InputTokens}
		if last {
			cand["finishReason"] = finish
			u = usage
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": u, "modelVersion": model, "responseId": id}
	}
	if method == "generateContent" {
		if !s.Wait(r.Context()) {
			return
		}
		s.Bill(a)
		fakehttp.WriteJSON(w, http.StatusOK, chunk(a.Text, true))
		return
	}
	s.Bill(a)
	if r.URL.Query().Get("alt") != "sse" {
		if !s.Wait(r.Context()) {
			return
		}
		chunks := make([]any, 0, len(a.Pieces))
		for i, p := range a.Pieces {
			chunks = append(chunks, chunk(p, i == len(a.Pieces)-1))
		}
		fakehttp.WriteJSON(w, http.StatusOK, chunks)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	pieces := a.Pieces
	if len(pieces) == 0 {
		pieces = []string{""}
	}
	for i, p := range pieces {
		if i == 1 && !s.Wait(r.Context()) {
			return
		}
		if len(pieces) == 1 && !s.Wait(r.Context()) {
			return
		}
		fmt.Fprintf(w, "data: %s\r\n\r\n", fakehttp.MustJSON(chunk(p, i == len(pieces)-1)))
		aifake.Flush(w)
	}
}

// cut splits "model:method" at its last colon.
func cut(call string) (model, method string, ok bool) {
	i := strings.LastIndexByte(call, ':')
	if i <= 0 {
		return "", "", false
	}
	return call[:i], call[i+1:], true
}
