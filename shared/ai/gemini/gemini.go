// Package gemini is the ai.Client of Google's Gemini API (POST
// /v1beta/models/{model}:generateContent) with an API key in the x-goog-api-key header, never
// the key query parameter, so that the key never sits in a URL: one generation, whole or
// streamed with :streamGenerateContent?alt=sse.
package gemini

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/aihttp"
)

// DefaultBaseURL is the Gemini API's host.
const DefaultBaseURL = "https://generativelanguage.googleapis.com"

// Config configures a client.
type Config = aihttp.Config

// Client is the Gemini API. It is safe for concurrent use.
type Client struct {
	base string
	http aihttp.Client
}

var _ ai.Client = (*Client)(nil)

// New returns a client of the API at cfg.BaseURL.
func New(cfg Config) (*Client, error) {
	base, hc, err := cfg.Open(DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("gemini: %w", err)
	}
	return &Client{base: base, http: aihttp.Client{HTTP: hc, Refuse: refuse}}, nil
}

// modelID is a model id as it may go into the path: a colon would name another method, a
// slash another resource.
var modelID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

type part struct {
	Text    string `json:"text"`
	Thought bool   `json:"thought,omitempty"`
}

type content struct {
	Role  string `json:"role,omitempty"`
	Parts []part `json:"parts"`
}

type generationConfig struct {
	MaxOutputTokens int      `json:"maxOutputTokens"`
	Temperature     *float64 `json:"temperature,omitempty"`
}

type request struct {
	Contents          []content        `json:"contents"`
	SystemInstruction *content         `json:"systemInstruction,omitempty"`
	GenerationConfig  generationConfig `json:"generationConfig"`
}

// answer is a GenerateContentResponse, whole or one chunk of a stream.
type answer struct {
	Candidates []struct {
		Content      content `json:"content"`
		FinishReason string  `json:"finishReason"`
		Index        int     `json:"index"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount     int64 `json:"promptTokenCount"`
		CandidatesTokenCount int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount   int64 `json:"thoughtsTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
	// Error is an error sent in a stream's chunk after its 200.
	Error *errorBody `json:"error"`
}

type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Status  string `json:"status"`
	Details []struct {
		Type       string `json:"@type"`
		Reason     string `json:"reason"`     // google.rpc.ErrorInfo
		RetryDelay string `json:"retryDelay"` // google.rpc.RetryInfo
	} `json:"details"`
}

// text returns the answer's text of candidate 0, thoughts left out, and its finish reason.
func (a *answer) text() (string, string) {
	for _, c := range a.Candidates {
		if c.Index != 0 {
			continue
		}
		var b strings.Builder
		for _, p := range c.Content.Parts {
			if !p.Thought {
				b.WriteString(p.Text)
			}
		}
		return b.String(), c.FinishReason
	}
	return "", ""
}

// usage counts the thoughts of a thinking model as output: Google bills them so.
func (a *answer) usage() (ai.Usage, bool) {
	if a.UsageMetadata == nil {
		return ai.Usage{}, false
	}
	u := a.UsageMetadata
	return ai.Usage{InputTokens: u.PromptTokenCount, OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount}, true
}

func (c *Client) call(key string, req ai.Request, method string) (aihttp.Request, error) {
	if err := aihttp.CheckRequest(req); err != nil {
		return aihttp.Request{}, err
	}
	model := strings.TrimPrefix(req.Model, "models/")
	if !modelID.MatchString(model) {
		return aihttp.Request{}, &ai.ProviderError{Status: http.StatusBadRequest, Code: "invalid_request",
			Message: fmt.Sprintf("%q is not a Gemini model id", aihttp.Truncate(req.Model, 140))}
	}
	body := request{GenerationConfig: generationConfig{MaxOutputTokens: req.MaxOutputTokens, Temperature: req.Temperature}}
	var system []part
	for _, m := range req.Messages {
		switch m.Role {
		case ai.RoleSystem:
			system = append(system, part{Text: m.Content})
		case ai.RoleAssistant:
			body.Contents = append(body.Contents, content{Role: "model", Parts: []part{{Text: m.Content}}})
		default:
			body.Contents = append(body.Contents, content{Role: "user", Parts: []part{{Text: m.Content}}})
		}
	}
	if len(system) > 0 {
		body.SystemInstruction = &content{Parts: system}
	}
	return aihttp.Request{URL: c.base + "/v1beta/models/" + model + ":" + method, Body: body, Secret: key,
		Header: http.Header{"X-Goog-Api-Key": {key}}}, nil
}

// Generate runs the generation with one generateContent call.
func (c *Client) Generate(ctx context.Context, key string, req ai.Request) (ai.Response, error) {
	r, err := c.call(key, req, "generateContent")
	if err != nil {
		return ai.Response{}, err
	}
	var out answer
	if err := c.http.Do(ctx, r, &out); err != nil {
		return ai.Response{}, err
	}
	text, finish := out.text()
	u, _ := out.usage()
	return ai.Response{ID: out.ResponseID, Model: out.ModelVersion, Text: text, StopReason: stopReason(finish, &out), Usage: u}, nil
}

// Stream runs the generation with streamGenerateContent?alt=sse: every event is a
// GenerateContentResponse with a piece of the text; the last has the finish reason and the
// usage. Gemini sends no end marker, so a stream that ends without a finish reason (or a
// blocked prompt's feedback) is a temporary failure.
func (c *Client) Stream(ctx context.Context, key string, req ai.Request, delta func(string) error) (ai.Response, error) {
	r, err := c.call(key, req, "streamGenerateContent")
	if err != nil {
		return ai.Response{}, err
	}
	r.URL += "?alt=sse"
	var (
		resp   ai.Response
		text   strings.Builder
		finish string
		last   answer
	)
	err = c.http.Stream(ctx, r, func(ev aihttp.Event) error {
		var chunk answer
		if err := json.Unmarshal(ev.Data, &chunk); err != nil {
			return &ai.ProviderError{Status: http.StatusOK, Code: "bad_response", Message: "a stream chunk could not be read", Temporary: true}
		}
		if chunk.Error != nil {
			return refusal(chunk.Error.Code, chunk.Error, 0)
		}
		if resp.ID == "" {
			resp.ID, resp.Model = chunk.ResponseID, chunk.ModelVersion
		}
		if u, ok := chunk.usage(); ok {
			resp.Usage = u
		}
		if chunk.PromptFeedback != nil {
			last.PromptFeedback = chunk.PromptFeedback
		}
		piece, reason := chunk.text()
		if reason != "" {
			finish = reason
		}
		if piece != "" {
			text.WriteString(piece)
			return delta(piece)
		}
		return nil
	})
	if err != nil {
		return ai.Response{}, err
	}
	if finish == "" && (last.PromptFeedback == nil || last.PromptFeedback.BlockReason == "") {
		return ai.Response{}, &ai.ProviderError{Status: http.StatusOK, Code: "incomplete_stream",
			Message: "the stream ended without a finish reason", Temporary: true}
	}
	resp.Text = text.String()
	resp.StopReason = stopReason(finish, &last)
	return resp, nil
}

func stopReason(finish string, a *answer) string {
	if finish == "" && a.PromptFeedback != nil && a.PromptFeedback.BlockReason != "" {
		return ai.StopFilter
	}
	switch finish {
	case "STOP":
		return ai.StopEnd
	case "MAX_TOKENS":
		return ai.StopLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return ai.StopFilter
	}
	return ai.StopOther
}

// refusal maps Google's error: a 400 whose ErrorInfo reason is API_KEY_INVALID (Gemini's
// answer to a wrong key) is a refused key; a 429's RetryInfo says how long to wait when no
// Retry-After header does.
func refusal(status int, e *errorBody, retryAfter time.Duration) error {
	for _, d := range e.Details {
		switch {
		case d.Reason == "API_KEY_INVALID" || d.Reason == "API_KEY_EXPIRED":
			return aihttp.Refusal(http.StatusUnauthorized, d.Reason, "", 0)
		case d.RetryDelay != "" && retryAfter == 0:
			if delay, err := time.ParseDuration(d.RetryDelay); err == nil && delay > 0 {
				retryAfter = delay
			}
		}
	}
	if status == 0 {
		status = http.StatusInternalServerError
	}
	msg := e.Message
	if msg == "" && status >= 500 {
		msg = "Gemini is unavailable"
	}
	return aihttp.Refusal(status, e.Status, msg, retryAfter)
}

// refuse maps Google's error envelope {"error": {code, message, status, details}}.
func refuse(res *http.Response, body []byte) error {
	var e struct {
		Error errorBody `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return refusal(res.StatusCode, &e.Error, aihttp.RetryAfter(res.Header, time.Now()))
}
