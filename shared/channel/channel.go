// Package channel is the platform's contract with messaging providers: what a channel can
// send (its capabilities), the provider-neutral outbound message, the normalized inbound
// update, and the typed errors every adapter maps its provider's failures to. One package
// per provider (telegram, whatsapp, vk) implements Adapter with a real HTTP client whose base
// URL is configurable, so tests run against fake servers that speak the same wire format.
package channel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Kind is a channel type.
type Kind string

// The channel types of the specification.
const (
	// Telegram is the messenger with a bot interface (Telegram Bot API).
	Telegram Kind = "telegram"
	// WhatsApp is the template-based messenger (WhatsApp Business Cloud API).
	WhatsApp Kind = "whatsapp"
	// VK is the social-network messenger (VK community messages: Callback API, messages.send).
	VK Kind = "vk"
)

// Kinds lists every channel type.
func Kinds() []Kind { return []Kind{Telegram, WhatsApp, VK} }

// Capabilities is what a channel type can do; adapters declare their own, and
// GET /api/channels/capabilities is built from these declarations.
type Capabilities struct {
	Kind Kind `json:"type"`
	// ConnectableOverREST: WhatsApp and VK connect through the API; Telegram through the admin CLI.
	ConnectableOverREST bool `json:"connectable_over_rest"`
	// MessageKinds the channel can send: the MessageKind* constants. MessageKindQuickReplies
	// says the channel shows a Message with QuickReplies as a keyboard of answers of its own
	// (without it, the runtime sends such buttons as inline ones).
	MessageKinds []string `json:"message_kinds"`
	// Media lists each sendable media type with its size limit and accepted MIME types.
	Media []MediaLimit `json:"media"`
	// MaxTextLength is the longest text message, in characters.
	MaxTextLength int `json:"max_text_length"`
	// MaxCaptionLength is the longest media caption, in characters.
	MaxCaptionLength int `json:"max_caption_length"`
	// Buttons bounds interactive buttons.
	Buttons ButtonLimits `json:"buttons"`
	// SessionWindow is how long after the subscriber's last message free-form messages may be
	// sent (WhatsApp: 24 h); zero means no window.
	SessionWindowSeconds int `json:"session_window_seconds"`
	// TemplateOutsideWindow: outside the window only approved templates may be sent.
	TemplateOutsideWindow bool `json:"template_outside_window"`
	// RateLimit is the provider's documented sending limit, as text for humans.
	RateLimit string `json:"rate_limit"`
	// MessagesPerSecond is the rate the platform holds sends of one channel to.
	MessagesPerSecond float64 `json:"messages_per_second"`
	// TemplateHeaderMedia bounds the media a message template's header example may be
	// (checked before the upload); only channel types with templates (WhatsApp) have it.
	TemplateHeaderMedia []MediaLimit `json:"template_header_media,omitempty"`
}

// The message kinds a channel may declare in Capabilities.MessageKinds.
const (
	MessageKindText         = "text"
	MessageKindMedia        = "media"
	MessageKindButtons      = "buttons"
	MessageKindQuickReplies = "quick_replies"
	MessageKindTemplate     = "template"
)

// Sends reports whether the channel declares the message kind (a MessageKind* constant).
func (c Capabilities) Sends(kind string) bool { return slices.Contains(c.MessageKinds, kind) }

// MediaLimit bounds one media type.
type MediaLimit struct {
	Type      MediaType `json:"type"`
	MaxBytes  int64     `json:"max_bytes"`
	MimeTypes []string  `json:"mime_types"`
}

// ButtonLimits bounds the buttons of one message.
type ButtonLimits struct {
	Max            int  `json:"max"`
	MaxTitleLength int  `json:"max_title_length"`
	URLButtons     bool `json:"url_buttons"`
	// URLButtonAlone: a link button must be the message's only button (WhatsApp sends a
	// link as a call-to-action message of its own, never beside reply buttons).
	URLButtonAlone bool `json:"url_button_alone"`
}

// MediaType is a kind of media.
type MediaType string

// The media types.
const (
	Image    MediaType = "image"
	Video    MediaType = "video"
	Audio    MediaType = "audio"
	Document MediaType = "document"
)

// Message is one outbound message, provider-neutral. Exactly one of Text (optionally with
// Buttons), Media, or Template is the body.
type Message struct {
	Text     string    `json:"text,omitempty"`
	Media    *Media    `json:"media,omitempty"`
	Buttons  []Button  `json:"buttons,omitempty"`
	Template *Template `json:"template,omitempty"`
	// QuickReplies shows Buttons as quick replies rather than as buttons attached to the
	// message: a keyboard of answers that goes away once one is tapped (Telegram's reply
	// keyboard with one_time_keyboard, VK's one-time keyboard; WhatsApp's reply buttons are
	// its quick replies already). Only channels whose Capabilities declare
	// MessageKindQuickReplies take it. Quick replies answer; they cannot open links: a URL
	// button among them is ErrRejected. A tapped quick reply comes back as an Inbound with
	// its Payload (VK, WhatsApp) or as a Text equal to its Title (Telegram, whose reply
	// keyboard sends the title as a message).
	QuickReplies bool `json:"quick_replies,omitempty"`
	// Key identifies the message for idempotency: the same key means the same message, so a
	// Send retried after its answer was lost must not reach the user twice. The runtime sets
	// it to a value stable across every retry of one step's send ("<execution>/<entry>/<step>",
	// with "/<part>" for a step that sends several messages). Adapters whose provider
	// de-duplicates sends derive its idempotency parameter from (channel, Key) (VK's
	// random_id); the others ignore it, and a retry after a lost answer can deliver twice
	// there (docs/runtime.md). "" means no key: the adapter makes each send unique.
	Key string `json:"key,omitempty"`
}

// Media is an image, video, audio or document by URL.
type Media struct {
	Type    MediaType `json:"type"`
	URL     string    `json:"url"`
	Caption string    `json:"caption,omitempty"`
}

// Button is a reply button (Payload comes back as an inbound update) or a link (URL):
// exactly one of the two.
type Button struct {
	Title   string `json:"title"`
	Payload string `json:"payload,omitempty"`
	URL     string `json:"url,omitempty"`
}

// Template is an approved WhatsApp message template with its body parameters.
type Template struct {
	Name     string   `json:"name"`
	Language string   `json:"language"`
	Params   []string `json:"params,omitempty"`
}

// Inbound is one normalized update from a provider: a message or a button press.
type Inbound struct {
	// UpdateID is the provider's id of the update; with the channel it identifies the update
	// for de-duplication (providers retry deliveries).
	UpdateID string `json:"update_id"`
	// UserID is the sender's id on the channel (the subscriber's external id).
	UserID    string `json:"user_id"`
	FirstName string `json:"first_name,omitempty"`
	LastName  string `json:"last_name,omitempty"`
	Locale    string `json:"locale,omitempty"`
	// Text is the message text; Payload the pressed button's payload (one of them is set).
	Text    string    `json:"text,omitempty"`
	Payload string    `json:"payload,omitempty"`
	At      time.Time `json:"at"`
	// CallbackID is the provider's id of a button press that must be answered (Telegram's
	// callback query: its client shows a spinner until then); "" otherwise. The runtime
	// answers it through CallbackAnswerer.
	CallbackID string `json:"callback_id,omitempty"`
}

// InboundMessage is the work-queue message type that carries one inbound update from the
// webhooks to the conversation runtime; its body is a Delivery.
const InboundMessage = "runtime.inbound"

// Delivery is the body of an InboundMessage: one update and the channel it arrived on. It
// is the contract between the webhooks, which send it, and the runtime, which handles it.
type Delivery struct {
	ChannelID  string    `json:"channel_id"`
	BotID      string    `json:"bot_id"`
	AccountID  string    `json:"account_id"`
	Kind       Kind      `json:"kind"`
	Inbound    Inbound   `json:"inbound"`
	ReceivedAt time.Time `json:"received_at"`
}

// CallbackAnswerer is implemented by adapters whose button presses must be acknowledged to
// the provider (Telegram's answerCallbackQuery). The runtime calls it for an Inbound with a
// CallbackID, once, whatever the reaction does; a failure there is cosmetic, never a reason
// to retry the update.
type CallbackAnswerer interface {
	AnswerCallback(ctx context.Context, conn Connection, callbackID string) error
}

// MessagingLimiter is implemented by adapters whose provider bounds how many people a number
// may start conversations with in a rolling 24 hours (WhatsApp's messaging tiers: only
// messages outside a person's service window, which must be templates, start one).
// MessagingLimit answers that bound; 0 means none.
type MessagingLimiter interface {
	MessagingLimit(ctx context.Context, conn Connection) (int, error)
}

// Disconnector is implemented by adapters that register something with the provider at
// Connect which must be undone when the channel goes (VK's callback server: a community has
// at most 10, and a stale one keeps delivering to a dead webhook). The channels service calls
// it, best effort, after a channel is disconnected and when a connected channel could not be
// stored; a failure never keeps a channel.
type Disconnector interface {
	Disconnect(ctx context.Context, conn Connection) error
}

// Connection is what an adapter needs to act for one connected channel: its public
// settings and its decrypted credentials, both provider-specific JSON documents.
type Connection struct {
	ChannelID   string
	BotID       string
	Settings    json.RawMessage
	Credentials json.RawMessage
	// WebhookSecret is the secret the provider presents on deliveries (see ConnectRequest).
	WebhookSecret string
}

// ConnectRequest asks an adapter to connect a channel.
type ConnectRequest struct {
	ChannelID string
	// Credentials is what Adapter.Credentials returned, filled from the client's request and
	// already validated (strict decoding and its Validate method).
	Credentials any
	// WebhookURL is where the provider must deliver updates for this channel, when the
	// deployment has a public URL ("" otherwise: then nothing is registered with the provider).
	WebhookURL string
	// WebhookSecret is a fresh random secret the provider must present on each delivery,
	// where the provider supports one (Telegram's secret token, VK's secret key).
	WebhookSecret string
}

// ConnectResult is what an adapter keeps of a connected channel.
type ConnectResult struct {
	// Settings are the channel's public facts (bot username, phone number id, group id),
	// shown in the API and used for lookups; never secrets.
	Settings json.RawMessage
	// Credentials are what sending needs later; stored sealed, never shown.
	Credentials json.RawMessage
	// DisplayName names the channel for humans (the bot's @username, the phone number).
	DisplayName string
	// LookupKey identifies the channel among all of the provider's when its webhook URL
	// cannot (WhatsApp: the phone number id); unique per type across the deployment.
	LookupKey string
}

// CredentialsError is a credentials value the adapter refuses before asking the provider
// (a missing or malformed member); Field is its name within the credentials object.
type CredentialsError struct {
	Field   string
	Message string
}

func (e *CredentialsError) Error() string {
	return "channel: credentials." + e.Field + ": " + e.Message
}

// Adapter is one provider.
type Adapter interface {
	// Kind is the channel type it serves.
	Kind() Kind
	// Capabilities declares what the channel can do.
	Capabilities() Capabilities
	// Credentials returns a pointer to a new, empty credentials value of the provider, for the
	// connect request to be decoded into (strictly; it may implement a Validate method).
	Credentials() any
	// Connect checks the credentials against the provider (a 401 there is
	// ErrInvalidCredentials) and registers the webhook where the provider allows it.
	Connect(ctx context.Context, req ConnectRequest) (ConnectResult, error)
	// Send delivers m to the user and returns the provider's message id.
	Send(ctx context.Context, conn Connection, userID string, m Message) (string, error)
	// Verify checks that an inbound webhook request really comes from the provider for conn
	// (a secret header, a signature over the body); body is the request body already read.
	Verify(r *http.Request, body []byte, conn Connection) error
	// Parse turns a verified webhook body into updates (none for events the runtime ignores).
	Parse(body []byte) ([]Inbound, error)
}

// Errors adapters map provider failures to, so the runtime decides retries without knowing
// the provider. Match them with errors.Is; *Error carries the details.
var (
	// ErrRateLimited: the provider throttled; retry after Error.RetryAfter.
	ErrRateLimited = errors.New("channel: rate limited")
	// ErrBlocked: the user blocked the bot or cannot receive messages; do not retry.
	ErrBlocked = errors.New("channel: blocked by the user")
	// ErrInvalidCredentials: the channel's token or key is wrong or revoked; do not retry.
	ErrInvalidCredentials = errors.New("channel: invalid credentials")
	// ErrOutsideWindow: a free-form message outside the session window (use a template).
	ErrOutsideWindow = errors.New("channel: outside the session window")
	// ErrRejected: the provider refused the message as invalid; do not retry.
	ErrRejected = errors.New("channel: message rejected")
	// ErrUnavailable: a transient failure (5xx, timeout, connection); retry with backoff.
	ErrUnavailable = errors.New("channel: provider unavailable")
	// ErrUnauthenticWebhook: an inbound request failed Verify.
	ErrUnauthenticWebhook = errors.New("channel: webhook failed verification")
)

// Error is a provider failure mapped to one of the Err* kinds.
type Error struct {
	Kind       error
	Provider   Kind
	Code       string // the provider's error code, for logs and traces
	Message    string // the provider's description, never containing credentials
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %v: %s %s", e.Provider, e.Kind, e.Code, e.Message)
}

// Is makes errors.Is(err, ErrRateLimited) and the like work.
func (e *Error) Is(target error) bool { return e.Kind == target }

// Retryable reports whether a send that failed with err may be retried later.
func Retryable(err error) bool {
	return errors.Is(err, ErrRateLimited) || errors.Is(err, ErrUnavailable)
}
