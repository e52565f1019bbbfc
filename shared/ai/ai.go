// Package ai is the contract between the managed AI family (functions/ai) and the provider
// clients (shared/ai/openai, anthropic, gemini): what a generation request and its answer are,
// normalized across providers, and the errors a client returns so that the family decides
// what falls back to another provider and what is the caller's answer, without knowing the
// provider's wire format.
//
// Each client is a real HTTP client of its provider's documented API with a configurable base
// URL; tests run them against the fakes in tests/fakes/ai, which check keys, headers and
// bodies as the providers do.
package ai

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// The providers, as the API names them.
const (
	OpenAI    = "openai"    // Chat Completions API
	Anthropic = "anthropic" // Messages API
	Gemini    = "gemini"    // Gemini API generateContent
)

// Providers lists the providers in a stable order.
var Providers = []string{Anthropic, Gemini, OpenAI}

// The roles of a message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one message of a conversation: text only.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is one generation: the model (the provider's model id), the conversation (system
// messages first, then user and assistant turns, ending with a user turn) and its limits.
type Request struct {
	Model    string
	Messages []Message
	// MaxOutputTokens bounds the answer (every provider is sent it).
	MaxOutputTokens int
	// Temperature is sent only when set.
	Temperature *float64
}

// The normalized reasons a generation stopped.
const (
	StopEnd    = "end"            // the model finished its answer
	StopLength = "max_tokens"     // MaxOutputTokens was reached
	StopFilter = "content_filter" // the provider withheld content
	StopOther  = "other"
)

// Usage is what the provider counted for a generation, as it bills it.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// Response is a generation's answer.
type Response struct {
	// ID is the provider's id of the generation (for the provider's support), "" if none.
	ID string
	// Model is the model that answered, as the provider names it.
	Model      string
	Text       string
	StopReason string
	Usage      Usage
}

// Client is one provider's API. Every method is safe for concurrent use; key is the API key
// the call is made with (a managed key of the platform's keyring, or the account's own).
type Client interface {
	// Generate runs the generation and returns the whole answer.
	Generate(ctx context.Context, key string, req Request) (Response, error)
	// Stream runs the generation with the provider's streaming API, calling delta with each
	// piece of text as it arrives (an error from delta stops the stream and is returned),
	// and returns the whole answer with its usage at the end.
	Stream(ctx context.Context, key string, req Request, delta func(text string) error) (Response, error)
}

// ErrUnauthorized is returned when the provider refuses the key (401, or 403 for a key
// without access). For an account's own key it is the answer; a managed key's is an outage.
var ErrUnauthorized = errors.New("ai: the provider refused the API key")

// RateLimitedError is returned when the provider asks the caller to slow down (429, or an
// overload answer such as Anthropic's 529). RetryAfter is 0 when it did not say.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("ai: rate limited by the provider, retry after %s", e.RetryAfter)
}

// ProviderError is any other refusal or failure: Status the HTTP status (0 for a transport
// failure or an unreadable answer), Code and Message what the provider's error body said
// (never a key). Temporary is true for 5xx, timeouts and transport failures: another
// provider may answer. A 4xx is the request's fault (a model the provider does not have, a
// context too long) and Temporary is false.
type ProviderError struct {
	Status    int
	Code      string
	Message   string
	Temporary bool
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("ai: provider answered %d %s: %s", e.Status, e.Code, e.Message)
}
