// Package emailevents serves what happens to an email after it was sent: the public routes
// a sent campaign message points at (its open pixel, its tracked links and its unsubscribe
// page with RFC 8058 one-click), the sending providers' event webhooks (Amazon SES through
// SNS, Mailgun), each authenticated by the provider's own signature scheme, and the
// bot-wide suppression list those events feed, which campaigns consult before every send.
//
// The campaigns family owns the recipients: this package verifies and classifies events
// and hands them over through Campaigns; it keeps only the suppression list and the
// markers that refuse a replayed Mailgun delivery.
package emailevents

import (
	"context"
	"log/slog"
	"time"

	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/sns"
	"github.com/botplatform/api/shared/store"
)

// The event types handed to Campaigns.Record.
const (
	EventOpen        = "open"
	EventClick       = "click"
	EventUnsubscribe = "unsubscribe"
	EventDelivered   = "delivered"
	EventBounce      = "bounce"
	EventComplaint   = "complaint"
)

// Event is one thing that happened to one sent message.
type Event struct {
	// Type is one of the Event* constants.
	Type string
	// Link is a click's index in the campaign's link table.
	Link int
	// Machine marks an open or click no person made: a privacy proxy's prefetch or a
	// security scanner (machineAgents). Campaigns count them apart.
	Machine bool
	// Permanent marks a hard bounce; a bounce without it is transient.
	Permanent bool
	// At is when it happened: the provider's time when it gives one, else when we heard.
	At time.Time
	// Address is the address the provider names (bounced, complained), when it names one.
	Address string
}

// Campaigns is what this package needs of the email campaigns family. Errors whose
// httpapi.KindOf is KindNotFound mean the reference (or message id) is not, or no
// longer, a recipient of a campaign.
type Campaigns interface {
	// LinkTarget returns the URL of link number ref.Link of the campaign as sent.
	LinkTarget(ctx context.Context, ref emaillinks.Ref) (string, error)
	// Record applies an event to the recipient row (idempotent per kind where it must be:
	// a second "delivered" changes nothing).
	Record(ctx context.Context, ref emaillinks.Ref, ev Event) error
	// ByMessageID finds the recipient a provider's message id belongs to: the
	// email.Receipt's MessageID of the send, which is SES's own id for SES, and the
	// Message-ID header, angle brackets included, for Mailgun (which relays SMTP sends).
	ByMessageID(ctx context.Context, messageID string) (emaillinks.Ref, error)
	// Recipient returns the address the recipient's message was sent to: the address an
	// unsubscribe, a hard bounce or a complaint suppresses.
	Recipient(ctx context.Context, ref emaillinks.Ref) (string, error)
}

// Config is the service's configuration; its zero value works and refuses every provider
// delivery (events of neither SES nor Mailgun are taken).
type Config struct {
	// SNS verifies the SNS messages carrying SES events (POST /esp/ses/webhook) and
	// confirms their subscriptions. Its topics are the only ones whose messages are
	// accepted: every AWS account can publish SNS messages signed by AWS, so without them
	// anyone could subscribe this endpoint to a topic of theirs. nil, or a verifier with no
	// topic, refuses every SES delivery.
	SNS *sns.Verifier
	// MailgunSigningKey is the Mailgun account's HTTP webhook signing key (a secret).
	// Empty refuses every Mailgun delivery.
	MailgunSigningKey string
}

// Service records email events and keeps the bots' suppression lists.
type Service struct {
	store     store.Store
	links     *emaillinks.Signer
	campaigns Campaigns
	cfg       Config
	now       func() time.Time
	log       *slog.Logger
}

// NewService returns the service. campaigns may be nil in a process without campaigns:
// events are then verified and dropped, and a click or unsubscribe cannot be served (503).
func NewService(st store.Store, links *emaillinks.Signer, campaigns Campaigns, cfg Config, now func() time.Time, log *slog.Logger) *Service {
	return &Service{store: st, links: links, campaigns: campaigns, cfg: cfg, now: now, log: log}
}

// stamp is the precision of stored times: whole seconds, UTC.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }
