// Package webpush serves a bot's browser push: its configuration (the VAPID key pair, made on
// the first enable, whose private key is sealed at rest and never shown; the VAPID subject;
// the origins a notification may open; quiet hours), the rotation of its keys, the report of
// its subscriptions and receipts, and the one send there is, a test send of a published push
// content document to one subscription. Messages are encrypted (RFC 8291, aes128gcm) and
// signed (VAPID, RFC 8292) by github.com/SherClockHolmes/webpush-go and posted to the
// subscription's endpoint, which the push service of the subscriber's browser chose.
//
// The subscriptions are the customer SDK's (its devices register them); this package reads
// and expires them through Subscriptions, and reads push documents through Content: both are
// implemented in the wiring package. docs/webpush.md holds the decisions.
package webpush

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store"
)

// Subscription is a browser push subscription as this API shows it: never its endpoint nor
// its keys.
type Subscription struct {
	ID             string `json:"id"`
	InstallationID string `json:"installation_id"`
	// State is active or expired.
	State string `json:"state"`
	// Consent is what the visitor granted: granted, denied or default (the browser's
	// Notification.permission when it subscribed).
	Consent  string `json:"consent"`
	Browser  string `json:"browser"`
	Locale   string `json:"locale"`
	Timezone string `json:"timezone"`
	// ExpiredReason says why an expired subscription expired (push_service_gone,
	// keys_rotated, unsubscribed...).
	ExpiredReason string     `json:"expired_reason,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiredAt     *time.Time `json:"expired_at"`
}

// Target is where one subscription's messages go: the push service endpoint and the keys
// the browser gave (base64url). It is opened for a send and never stored or shown by this
// package.
type Target struct {
	Endpoint string
	P256dh   string
	Auth     string
}

// SubscriptionCounts are the subscription and receipt counters of a bot's browser push.
type SubscriptionCounts struct {
	Active   int64 `json:"active"`
	Expired  int64 `json:"expired"`
	Receipts struct {
		Delivered int64 `json:"delivered"`
		Clicked   int64 `json:"clicked"`
		Closed    int64 `json:"closed"`
	} `json:"receipts"`
}

// Subscriptions is the store of browser push subscriptions (the customer SDK's).
type Subscriptions interface {
	// List returns a page of the bot's subscriptions, newest first.
	List(ctx context.Context, bot string, limit int, cursor string) ([]Subscription, string, error)
	// Target opens an active subscription's endpoint and keys; a 404 error for an unknown or
	// expired one.
	Target(ctx context.Context, bot, subscriptionID string) (Target, error)
	// Expire expires one subscription (idempotent).
	Expire(ctx context.Context, bot, subscriptionID, reason string) error
	// ExpireAll expires every active subscription of the bot and returns how many.
	ExpireAll(ctx context.Context, bot string) (int64, error)
	// Active counts the bot's active subscriptions.
	Active(ctx context.Context, bot string) (int64, error)
	// Counts returns the bot's subscription and receipt counters.
	Counts(ctx context.Context, bot string) (SubscriptionCounts, error)
}

// Message is the published version of a push content document, as sent.
type Message struct {
	DocumentID string
	Version    int
	Title      string
	Body       string
	Icon       string
	URL        string
	Actions    []Action
}

// Action is a button of a notification.
type Action struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

// Content reads push content documents.
type Content interface {
	// Push returns the published version of a push document: 404 for an unknown or archived
	// one, 409 document_not_published, 422 unsupported_document_type for another type.
	Push(ctx context.Context, bot, documentID string) (Message, error)
}

// TestSendLimit bounds the test sends of a bot: each one is a request to a third party's
// push service, on the bot's VAPID key.
var TestSendLimit = ratelimit.Limit{Name: "web push test sends", Max: 60, Window: time.Minute}

// Config is the family's dependencies and settings. Store, Sealer, Subscriptions, Content,
// Log and Now are required.
type Config struct {
	Store store.Store
	// Sealer seals the VAPID private keys at rest.
	Sealer        secrets.Sealer
	Subscriptions Subscriptions
	Content       Content
	// Push sends the messages; nil is NewPusher(PushOptions{}) (public https endpoints only).
	Push *Pusher
	// Limiter counts test sends; nil counts none.
	Limiter *ratelimit.Limiter
	// GenerateKeys makes VAPID key pairs (private, public; base64url); nil is webpush-go's.
	GenerateKeys func() (private, public string, err error)
	Log          *slog.Logger
	Now          func() time.Time
}

// Validate reports every missing dependency at once.
func (c Config) Validate() error {
	var errs []error
	for _, m := range []struct {
		name    string
		missing bool
	}{
		{"Store", c.Store == nil}, {"Sealer", c.Sealer == nil}, {"Subscriptions", c.Subscriptions == nil},
		{"Content", c.Content == nil}, {"Log", c.Log == nil}, {"Now", c.Now == nil},
	} {
		if m.missing {
			errs = append(errs, errors.New(m.name+" is required"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webpush: %w", err)
	}
	return nil
}

// Service is the browser push of every bot.
type Service struct {
	store   store.Store
	sealer  secrets.Sealer
	subs    Subscriptions
	content Content
	push    *Pusher
	limiter *ratelimit.Limiter
	genKeys func() (string, string, error)
	log     *slog.Logger
	now     func() time.Time
}

// New returns the Service, or the problems of cfg.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{store: cfg.Store, sealer: cfg.Sealer, subs: cfg.Subscriptions, content: cfg.Content, push: cfg.Push,
		limiter: cfg.Limiter, genKeys: cfg.GenerateKeys, log: cfg.Log, now: cfg.Now}
	if s.push == nil {
		s.push = NewPusher(PushOptions{})
	}
	if s.genKeys == nil {
		s.genKeys = generateKeys
	}
	return s, nil
}

// stamp is a resource timestamp: UTC, whole seconds (docs/conventions.md).
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// aad binds a sealed private key to its bot and key version: a sealed key copied into
// another bot's configuration does not open.
func aad(bot string, version int) []byte {
	return fmt.Appendf(nil, "%s/webpush/vapid/%d", bot, version)
}

// updateAttempts bounds how often a write that lost a race to a concurrent one is redone.
const updateAttempts = 4
