// Package emaildomains serves a bot's sending domains and inbound email: the DNS records a
// domain must publish (DKIM, SPF, DMARC, return path, tracking), their verification through a
// DNS resolver, the DKIM signer of a verified domain for the senders (Signer), and the
// routes that decide what happens to mail arriving at a verified domain, which providers
// deliver to the public POST /esp/{provider}/inbound.
//
// A domain is the bot's once it is added, and the deployment's bot's once it verifies: the
// first bot to verify a name claims it for the whole deployment (EMAILDOMAIN#<name>), so two
// bots can never sign as, or receive mail for, the same domain. Inbound mail finds its bot
// through that claim.
package emaildomains

import (
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/sns"
	"github.com/botplatform/api/shared/store"
)

// Defaults of Config.
const (
	// DefaultRetention is how long an inbound message is kept.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultMaxInboundPerDay is how many inbound messages a bot keeps a day (UTC); more are
	// dropped (and logged): mail arrives at the rate strangers choose, and each message may
	// take a stored item of up to 390 KB for the retention period.
	DefaultMaxInboundPerDay = 1000
	// DefaultSPFInclude is the SPF mechanism that authorizes SES to send for a domain.
	DefaultSPFInclude = "include:amazonses.com"
	// DefaultRegion is the SES region of the default return-path MX.
	DefaultRegion = "us-east-1"
)

// RecordValues are the values of the DNS records every new domain is asked to publish. They
// are written into the domain when it is added, so changing them later changes no domain.
type RecordValues struct {
	// SPFInclude is the mechanism the return-path SPF record includes; "" is
	// DefaultSPFInclude.
	SPFInclude string
	// MailFromMX is the MX host of the return-path (MAIL FROM) domain; "" is SES's feedback
	// host of Region, feedback-smtp.<Region>.amazonses.com.
	MailFromMX string
	// Region is the SES region of the default MailFromMX; "" is DefaultRegion.
	Region string
	// TrackingHost is the deployment's public host, which the tracking CNAME points to;
	// "" leaves the tracking record out.
	TrackingHost string
	// InboundMX is the host that receives the deployment's inbound mail (on AWS, SES's
	// inbound-smtp.<region>.amazonaws.com); "" (a deployment that receives no mail by MX)
	// leaves the inbound record out.
	InboundMX string
}

func (v RecordValues) withDefaults() RecordValues {
	if v.SPFInclude == "" {
		v.SPFInclude = DefaultSPFInclude
	}
	if v.Region == "" {
		v.Region = DefaultRegion
	}
	if v.MailFromMX == "" {
		v.MailFromMX = "feedback-smtp." + v.Region + ".amazonses.com"
	}
	v.MailFromMX = strings.TrimSuffix(strings.ToLower(v.MailFromMX), ".")
	v.TrackingHost = strings.TrimSuffix(strings.ToLower(v.TrackingHost), ".")
	v.InboundMX = strings.TrimSuffix(strings.ToLower(v.InboundMX), ".")
	return v
}

// Config is the family's dependencies and settings. Store, Sealer, Log and Now are required.
type Config struct {
	Store store.Store
	// Sealer seals the DKIM private keys at rest.
	Sealer secrets.Sealer
	// Resolver looks up the records verify checks; nil is the system resolver (see
	// NewResolver for one that asks a given server).
	Resolver Resolver
	// Identities registers domains with the sending provider when they first verify (SES
	// on AWS); nil registers nothing.
	Identities Identities
	// Outbox stages the release job of a deleted domain's name (JobRelease) in the deletion's
	// transaction; required with Identities.
	Outbox outbox.Stager
	// Actions runs the forward and reaction actions of inbound routes; nil only stores mail
	// (those actions are then recorded as skipped).
	Actions Actions
	// Records are the values of the records new domains are asked to publish.
	Records RecordValues
	// InboundSecret authenticates POST /esp/local/inbound (header X-Inbound-Secret); ""
	// refuses every local delivery.
	InboundSecret string
	// SNS verifies POST /esp/ses/inbound: its topics are the receipt rules' SNS topics.
	// nil, or one accepting no topic, refuses every SES delivery.
	SNS *sns.Verifier
	// ReceivedMail is where the receipt rules' S3 actions store inbound mail (on AWS, the
	// stack's inbound bucket); nil: a receipt whose notification does not carry the
	// message is logged and acknowledged.
	ReceivedMail *ReceivedMail
	// Retention is how long inbound messages are kept; 0 is DefaultRetention.
	Retention time.Duration
	// MaxInboundPerDay bounds the inbound messages a bot keeps a day; 0 is
	// DefaultMaxInboundPerDay.
	MaxInboundPerDay int64
	// GenerateKey makes DKIM keys; nil is email.GenerateKey. Tests pass a faster one.
	GenerateKey func() (*rsa.PrivateKey, error)
	Log         *slog.Logger
	Now         func() time.Time
}

// Validate reports every missing dependency and bad setting at once.
func (c Config) Validate() error {
	var errs []error
	if c.Store == nil {
		errs = append(errs, errors.New("Store is required"))
	}
	if c.Sealer == nil {
		errs = append(errs, errors.New("Sealer is required"))
	}
	if c.Log == nil {
		errs = append(errs, errors.New("Log is required"))
	}
	if c.Now == nil {
		errs = append(errs, errors.New("Now is required"))
	}
	if c.Identities != nil && c.Outbox == nil {
		errs = append(errs, errors.New("Outbox is required with Identities (a deleted domain's release job)"))
	}
	if c.Retention < 0 || c.MaxInboundPerDay < 0 {
		errs = append(errs, errors.New("Retention and MaxInboundPerDay cannot be negative"))
	}
	v := c.Records.withDefaults()
	if err := checkHost(v.MailFromMX); err != nil {
		errs = append(errs, fmt.Errorf("Records.MailFromMX: %w", err))
	}
	if v.InboundMX != "" {
		if err := checkHost(v.InboundMX); err != nil {
			errs = append(errs, fmt.Errorf("Records.InboundMX: %w", err))
		}
	}
	if v.TrackingHost != "" {
		if err := checkHost(v.TrackingHost); err != nil {
			errs = append(errs, fmt.Errorf("Records.TrackingHost: %w", err))
		}
	}
	if !strings.HasPrefix(v.SPFInclude, "include:") || strings.ContainsAny(v.SPFInclude, " \t\"") {
		errs = append(errs, errors.New("Records.SPFInclude must be one include: mechanism"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("emaildomains: %w", err)
	}
	return nil
}

// Service is the sending domains, inbound routes and inbound mail of every bot.
type Service struct {
	store      store.Store
	sealer     secrets.Sealer
	resolver   Resolver
	identities Identities
	outbox     outbox.Stager
	actions    Actions
	records    RecordValues
	secret     string
	sns        *sns.Verifier
	received   *ReceivedMail
	retention  time.Duration
	maxPerDay  int64
	genKey     func() (*rsa.PrivateKey, error)
	log        *slog.Logger
	now        func() time.Time
}

// New returns the Service, or the problems of cfg.
func New(cfg Config) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Service{store: cfg.Store, sealer: cfg.Sealer, resolver: cfg.Resolver, identities: cfg.Identities, outbox: cfg.Outbox,
		actions: cfg.Actions, records: cfg.Records.withDefaults(), secret: cfg.InboundSecret, sns: cfg.SNS,
		received: cfg.ReceivedMail, retention: cfg.Retention, maxPerDay: cfg.MaxInboundPerDay, genKey: cfg.GenerateKey, log: cfg.Log, now: cfg.Now}
	if s.resolver == nil {
		s.resolver = NewResolver("")
	}
	if s.retention == 0 {
		s.retention = DefaultRetention
	}
	if s.maxPerDay == 0 {
		s.maxPerDay = DefaultMaxInboundPerDay
	}
	if s.genKey == nil {
		s.genKey = email.GenerateKey
	}
	return s, nil
}

// stamp is a resource timestamp: UTC, whole seconds (docs/conventions.md).
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// aad binds a sealed value to the record it belongs to: a sealed key copied into another
// bot's or domain's record does not open.
func aad(bot, domainID, purpose string) []byte {
	return []byte(bot + "/" + domainID + "/" + purpose)
}

// updateAttempts bounds how often a write that lost a race to a concurrent one is redone.
const updateAttempts = 4

// background is a context for work that must finish once started (releasing a claim, a
// provider call after the store committed) even when the client went away.
func background(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
