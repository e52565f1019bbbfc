// Package openai is the ai.Client of OpenAI's Chat Completions API (POST /v1/chat/completions)
// with an API key sent as a bearer token: one generation, whole or streamed as server-sent
// events with the usage in a last chunk.
package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/aihttp"
)

// DefaultBaseURL is OpenAI's API host.
const DefaultBaseURL = "https://api.openai.com"

// Config configures a client.
type Config = aihttp.Config

// Client is OpenAI's API. It is safe for concurrent use.
type Client struct {
	url  string
	http aihttp.Client
}

var _ ai.Client = (*Client)(nil)

// New returns a client of the API at cfg.BaseURL.
func New(cfg Config) (*Client, error) {
	base, hc, err := cfg.Open(DefaultBaseURL)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return &Client{url: base + "/v1/chat/completions", http: aihttp.Client{HTTP: hc, Refuse: refuse}}, nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type request struct {
	Model               string         `json:"model"`
	Messages            []ai.Message   `json:"messages"`
	MaxCompletionTokens int            `json:"max_completion_tokens"`
	Temperature         *float64       `json:"temperature,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
}

type usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
}

func (u *usage) normalized() ai.Usage {
	if u == nil {
		return ai.Usage{}
	}
	return ai.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
}

// completion is a chat.completion, or a chat.completion.chunk (Delta instead of Message).
type completion struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"message"`
		Delta struct {
			Content *string `json:"content"`
			Refusal *string `json:"refusal"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
	// Error is an error sent in a stream's chunk after its 200.
	Error *errorBody `json:"error"`
}

type errorBody struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Code    any    `json:"code"` // a string, a number or null
}

func (c *Client) call(key string, req ai.Request, stream bool) (aihttp.Request, error) {
	if err := aihttp.CheckRequest(req); err != nil {
		return aihttp.Request{}, err
	}
	body := request{Model: req.Model, Messages: req.Messages, MaxCompletionTokens: req.MaxOutputTokens,
		Temperature: req.Temperature, Stream: stream}
	if stream {
		body.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	return aihttp.Request{URL: c.url, Body: body, Secret: key,
		Header: http.Header{"Authorization": {"Bearer " + key}}}, nil
}

// Generate runs the generation with one call.
func (c *Client) Generate(ctx context.Context, key string, req ai.Request) (ai.Response, error) {
	r, err := c.call(key, req, false)
	if err != nil {
		return ai.Response{}, err
	}
	var out completion
	if err := c.http.Do(ctx, r, &out); err != nil {
		return ai.Response{}, err
	}
	if len(out.Choices) == 0 {
		return ai.Response{}, &ai.ProviderError{Status: http.StatusOK, Code: "bad_response", Message: "no choice in the answer", Temporary: true}
	}
	ch := out.Choices[0]
	resp := ai.Response{ID: out.ID, Model: out.Model, Usage: out.Usage.normalized()}
	if ch.Message.Content != nil {
		resp.Text = *ch.Message.Content
	}
	resp.StopReason = stopReason(ch.FinishReason, ch.Message.Refusal)
	return resp, nil
}

// Stream runs the generation with stream and stream_options.include_usage: text deltas of
// choice 0, then a chunk with the usage and no choice, then [DONE]. A stream that ends
// before [DONE] is a temporary failure.
func (c *Client) Stream(ctx context.Context, key string, req ai.Request, delta func(string) error) (ai.Response, error) {
	r, err := c.call(key, req, true)
	if err != nil {
		return ai.Response{}, err
	}
	var (
		resp    ai.Response
		text    []byte
		finish  *string
		refusal *string
		done    bool
	)
	err = c.http.Stream(ctx, r, func(ev aihttp.Event) error {
		if done {
			return nil
		}
		if string(ev.Data) == "[DONE]" {
			done = true
			return nil
		}
		var chunk completion
		if err := json.Unmarshal(ev.Data, &chunk); err != nil {
			return badChunk()
		}
		if chunk.Error != nil {
			return streamError(chunk.Error)
		}
		if resp.ID == "" {
			resp.ID, resp.Model = chunk.ID, chunk.Model
		}
		if chunk.Usage != nil {
			resp.Usage = chunk.Usage.normalized()
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if ch.FinishReason != nil {
				finish = ch.FinishReason
			}
			if ch.Delta.Refusal != nil {
				refusal = ch.Delta.Refusal
			}
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				text = append(text, *ch.Delta.Content...)
				if err := delta(*ch.Delta.Content); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return ai.Response{}, err
	}
	if !done {
		return ai.Response{}, &ai.ProviderError{Status: http.StatusOK, Code: "incomplete_stream",
			Message: "the stream ended before [DONE]", Temporary: true}
	}
	resp.Text = string(text)
	resp.StopReason = stopReason(finish, refusal)
	return resp, nil
}

func stopReason(finish, refusal *string) string {
	if refusal != nil && *refusal != "" {
		return ai.StopFilter
	}
	if finish == nil {
		return ai.StopOther
	}
	switch *finish {
	case "stop":
		return ai.StopEnd
	case "length":
		return ai.StopLength
	case "content_filter":
		return ai.StopFilter
	}
	return ai.StopOther
}

func badChunk() error {
	return &ai.ProviderError{Status: http.StatusOK, Code: "bad_response", Message: "a stream chunk could not be read", Temporary: true}
}

// streamError maps an error OpenAI sends inside a stream: its status is gone, so its type
// tells a server error (temporary) from the request's fault.
func streamError(e *errorBody) error {
	code := codeString(e.Code, e.Type)
	switch {
	case e.Type == "server_error" || code == "server_error":
		return aihttp.Refusal(http.StatusInternalServerError, code, e.Message, 0)
	case code == "rate_limit_exceeded":
		return &ai.RateLimitedError{}
	}
	return aihttp.Refusal(http.StatusBadRequest, code, e.Message, 0)
}

func codeString(code any, typ string) string {
	switch c := code.(type) {
	case string:
		if c != "" {
			return c
		}
	case float64:
		return fmt.Sprint(c)
	}
	return typ
}

// refuse maps OpenAI's error envelope {"error": {message, type, param, code}}.
func refuse(res *http.Response, body []byte) error {
	var e struct {
		Error errorBody `json:"error"`
	}
	_ = json.Unmarshal(body, &e)
	msg := e.Error.Message
	if msg == "" && res.StatusCode >= 500 {
		msg = "OpenAI is unavailable"
	}
	return aihttp.Refusal(res.StatusCode, codeString(e.Error.Code, e.Error.Type), msg, aihttp.RetryAfter(res.Header, time.Now()))
}
