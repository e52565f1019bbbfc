// Package anthropic is the ai.Client of Anthropic's Messages API (POST /v1/messages) with an
// API key in the x-api-key header and anthropic-version 2023-06-01: one generation, whole or
// streamed as Anthropic's typed server-sent events.
package anthropic

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/aihttp"
)

// DefaultBaseURL is Anthropic's API host.
const DefaultBaseURL = "https://api.anthropic.com"

// Version is the anthropic-version the client speaks.
const Version = "2023-06-01"

// statusOverloaded is Anthropic's answer when its API is overloaded (overloaded_error).
const statusOverloaded = 529

// Config configures a client.
type Config = aihttp.Config

// Client is Anthropic's API. It is safe for concurrent use.
type Client struct {
	url  string
	http aihttp.Client
}

var _ ai.Client = (*Client)(nil)

// New returns a client of the API at cfg.BaseURL.
func New(cfg Config) (*Client, error) {
	base, hc, err := cfg.Open(DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	return &Client{url: base + "/v1/messages", http: aihttp.Client{HTTP: hc, Refuse: refuse}}, nil
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type request struct {
	Model       string    `json:"model"`
	MaxTokens   int       `json:"max_tokens"`
	System      string    `json:"system,omitempty"`
	Messages    []message `json:"messages"`
	Temperature *float64  `json:"temperature,omitempty"`
	Stream      bool      `json:"stream,omitempty"`
}

type usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// input counts every input token billed: Anthropic counts the cached ones apart.
func (u usage) input() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

type messageBody struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason *string `json:"stop_reason"`
	Usage      usage   `json:"usage"`
}

type errorBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// body turns req into Anthropic's: the system messages joined into system, and consecutive
// turns of one role joined into one (Anthropic's turns alternate).
func body(req ai.Request, stream bool) request {
	out := request{Model: req.Model, MaxTokens: req.MaxOutputTokens, Temperature: req.Temperature, Stream: stream}
	var system []string
	for _, m := range req.Messages {
		if m.Role == ai.RoleSystem {
			system = append(system, m.Content)
			continue
		}
		if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == m.Role {
			out.Messages[n-1].Content += "\n\n" + m.Content
			continue
		}
		out.Messages = append(out.Messages, message{Role: m.Role, Content: m.Content})
	}
	out.System = strings.Join(system, "\n\n")
	return out
}

func (c *Client) call(key string, req ai.Request, stream bool) (aihttp.Request, error) {
	if err := aihttp.CheckRequest(req); err != nil {
		return aihttp.Request{}, err
	}
	return aihttp.Request{URL: c.url, Body: body(req, stream), Secret: key,
		Header: http.Header{"X-Api-Key": {key}, "Anthropic-Version": {Version}}}, nil
}

// Generate runs the generation with one call; the answer's text blocks are joined.
func (c *Client) Generate(ctx context.Context, key string, req ai.Request) (ai.Response, error) {
	r, err := c.call(key, req, false)
	if err != nil {
		return ai.Response{}, err
	}
	var out messageBody
	if err := c.http.Do(ctx, r, &out); err != nil {
		return ai.Response{}, err
	}
	var text strings.Builder
	for _, b := range out.Content {
		if b.Type == "text" {
			text.WriteString(b.Text)
		}
	}
	return ai.Response{ID: out.ID, Model: out.Model, Text: text.String(), StopReason: stopReason(out.StopReason),
		Usage: ai.Usage{InputTokens: out.Usage.input(), OutputTokens: out.Usage.OutputTokens}}, nil
}

// streamEvent is the data of one event of a stream; its type repeats the event's name.
type streamEvent struct {
	Type    string      `json:"type"`
	Message messageBody `json:"message"` // message_start
	Delta   struct {
		Type       string  `json:"type"` // content_block_delta: text_delta, ...
		Text       string  `json:"text"`
		StopReason *string `json:"stop_reason"` // message_delta
	} `json:"delta"`
	Usage *usage     `json:"usage"` // message_delta: output_tokens so far
	Error *errorBody `json:"error"`
}

// Stream runs the generation with stream: message_start (id, model, input tokens),
// content_block_delta text deltas, message_delta (stop reason, output tokens), message_stop.
// A stream that ends before message_stop is a temporary failure; an error event is mapped
// as the same error answered with its status would be.
func (c *Client) Stream(ctx context.Context, key string, req ai.Request, delta func(string) error) (ai.Response, error) {
	r, err := c.call(key, req, true)
	if err != nil {
		return ai.Response{}, err
	}
	var (
		resp ai.Response
		text strings.Builder
		stop *string
		done bool
	)
	err = c.http.Stream(ctx, r, func(ev aihttp.Event) error {
		if done {
			return nil
		}
		var e streamEvent
		if err := json.Unmarshal(ev.Data, &e); err != nil {
			return &ai.ProviderError{Status: http.StatusOK, Code: "bad_response", Message: "a stream event could not be read", Temporary: true}
		}
		name := ev.Name
		if name == "" {
			name = e.Type
		}
		switch name {
		case "message_start":
			resp.ID, resp.Model = e.Message.ID, e.Message.Model
			resp.Usage = ai.Usage{InputTokens: e.Message.Usage.input(), OutputTokens: e.Message.Usage.OutputTokens}
		case "content_block_delta":
			if e.Delta.Type == "text_delta" && e.Delta.Text != "" {
				text.WriteString(e.Delta.Text)
				return delta(e.Delta.Text)
			}
		case "message_delta":
			if e.Delta.StopReason != nil {
				stop = e.Delta.StopReason
			}
			if e.Usage != nil {
				// Cumulative: the last one counts.
				resp.Usage.OutputTokens = e.Usage.OutputTokens
				if in := e.Usage.input(); in > 0 {
					resp.Usage.InputTokens = in
				}
			}
		case "message_stop":
			done = true
		case "error":
			if e.Error == nil {
				e.Error = &errorBody{Type: "api_error"}
			}
			return refusal(errorStatus(e.Error.Type), e.Error, 0)
		}
		return nil
	})
	if err != nil {
		return ai.Response{}, err
	}
	if !done {
		return ai.Response{}, &ai.ProviderError{Status: http.StatusOK, Code: "incomplete_stream",
			Message: "the stream ended before message_stop", Temporary: true}
	}
	resp.Text = text.String()
	resp.StopReason = stopReason(stop)
	return resp, nil
}

func stopReason(s *string) string {
	if s == nil {
		return ai.StopOther
	}
	switch *s {
	case "end_turn", "stop_sequence":
		return ai.StopEnd
	case "max_tokens", "model_context_window_exceeded":
		return ai.StopLength
	case "refusal":
		return ai.StopFilter
	}
	return ai.StopOther
}

// errorStatus is the status Anthropic answers an error type with, for an error event sent
// after the stream's 200.
func errorStatus(typ string) int {
	switch typ {
	case "invalid_request_error":
		return http.StatusBadRequest
	case "authentication_error":
		return http.StatusUnauthorized
	case "permission_error":
		return http.StatusForbidden
	case "not_found_error":
		return http.StatusNotFound
	case "request_too_large":
		return http.StatusRequestEntityTooLarge
	case "rate_limit_error":
		return http.StatusTooManyRequests
	case "overloaded_error":
		return statusOverloaded
	}
	return http.StatusInternalServerError
}

// refusal maps Anthropic's error: an overload (529) is a rate limit, as package ai says.
func refusal(status int, e *errorBody, retryAfter time.Duration) error {
	if status == statusOverloaded || e.Type == "overloaded_error" {
		return &ai.RateLimitedError{RetryAfter: retryAfter}
	}
	msg := e.Message
	if msg == "" && status >= 500 {
		msg = "Anthropic is unavailable"
	}
	return aihttp.Refusal(status, e.Type, msg, retryAfter)
}

// refuse maps Anthropic's error envelope {"type": "error", "error": {type, message}}.
func refuse(res *http.Response, body []byte) error {
	var e struct {
		Error errorBody `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	return refusal(res.StatusCode, &e.Error, aihttp.RetryAfter(res.Header, time.Now()))
}
