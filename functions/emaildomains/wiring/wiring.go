// Package wiring composes the sending-domains family (domains, inbound routes, inbound mail)
// with the process: its credentials sealer, DNS resolver, email sender and SES identities,
// and, for inbound routes whose action is a reaction, the subscribers (the sender's
// subscriber), the reactions (is it published?) and the conversation runtime (its message,
// staged in the outbox).
package wiring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/botplatform/api/functions/emaildomains"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/sns"
	"github.com/botplatform/api/shared/store"
)

// Family is the emaildomains family.
func Family() family.Family {
	return family.Family{Name: "emaildomains", Build: func(env *family.Env) family.Parts {
		svc := New(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) {
				emaildomains.Routes(mux, svc, env.Cursors)
				emaildomains.PublicRoutes(mux, svc)
			},
			// The purge runs in the jobs worker, which on AWS has the SES client too: a
			// deleted bot's domains are deregistered there.
			Purge: emaildomains.PurgeStep(env.Store, identities(env)),
			// A deleted domain's release job deregisters its name there too.
			Jobs: svc.Steps(),
		}
	}}
}

// New builds the sending-domains service on env; campaigns use it for DKIM signers.
func New(env *family.Env) *emaildomains.Service {
	sealer := env.Secrets
	if sealer == nil {
		sealer = noSealer{}
	}
	acts := newActions(env)
	cfg := emaildomains.Config{
		Store:         env.Store,
		Sealer:        sealer,
		Resolver:      emaildomains.NewResolver(env.EmailSettings.DNSServer),
		Actions:       acts,
		InboundSecret: env.EmailSettings.InboundSecret,
		Log:           env.Log,
		Now:           env.Now,
	}
	// The tracking CNAME points at the public host; a process reached by address (locally)
	// has none to point at.
	if u, err := url.Parse(env.PublicURL); err == nil && u.Hostname() != "" && net.ParseIP(u.Hostname()) == nil && u.Hostname() != "localhost" {
		cfg.Records.TrackingHost = u.Hostname()
	}
	// Without topics the verifier refuses every SES delivery (inbound_not_configured).
	cfg.SNS = sns.New(sns.Config{Topics: env.EmailSettings.SNSTopicARNs, Now: env.Now})
	cfg.Identities, cfg.Outbox = identities(env), env.Outbox
	if es := env.EmailSettings; es.SES != nil {
		// SES's feedback and inbound hosts are those of the region it sends from.
		cfg.Records.Region = es.SES.Options().Region
	}
	if es := env.EmailSettings; es.InboundBucket != "" && es.AWS != nil {
		cfg.ReceivedMail = &emaildomains.ReceivedMail{Bucket: es.InboundBucket, Client: s3.NewFromConfig(*es.AWS, func(o *s3.Options) {
			// SES stores objects without a checksum the SDK could validate on reading.
			o.DisableLogOutputChecksumValidationSkipped = true
		})}
		cfg.Records.InboundMX = inboundMX(cfg.Records.Region)
	}
	svc, err := emaildomains.New(cfg)
	if err != nil {
		// Every field New checks is set above; a failure here is a programming error.
		panic(err)
	}
	acts.signer = svc.Signer
	return svc
}

// inboundMX is the host SES receives mail at in region ("" is emaildomains.DefaultRegion).
func inboundMX(region string) string {
	if region == "" {
		region = emaildomains.DefaultRegion
	}
	return "inbound-smtp." + region + ".amazonaws.com"
}

// identities is the provider domains are registered with: SES on AWS, none (nil) in a
// process without an SES client (the local one).
func identities(env *family.Env) emaildomains.Identities {
	es := env.EmailSettings
	if es.SES == nil {
		return nil
	}
	return emaildomains.SESIdentities{Client: es.SES, ConfigurationSet: es.ConfigurationSet}
}

// noSealer stands in for a process without a credentials key: domains cannot be added
// (their DKIM keys cannot be sealed), everything else works.
type noSealer struct{}

var errNoSealer = httpapi.E(httpapi.KindUnavailable, "secrets_unavailable", "this deployment holds no key to seal DKIM keys with (SECRETS_KEY_ID on AWS)")

func (noSealer) Seal(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
func (noSealer) Open(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }

// actions runs inbound routes' actions: forwards go out through the deployment's email
// sender; a reaction runs for the sender's subscriber through the runtime's queue message,
// staged in the outbox (docs/email.md, "Inbound routes").
type actions struct {
	mail      email.Sender
	store     store.Store
	outbox    *outbox.Outbox
	subs      *subscribers.Service
	published publishedReactions
	now       func() time.Time
	// signer is the DKIM signer of a From address at one of the bot's verified domains
	// (the service's Signer): forwards are signed as campaign mail is.
	signer func(ctx context.Context, bot, from string) (*email.Signer, error)
}

// publishedReactions is what a reaction action asks the reactions family: which reactions
// have a published version (one small read per call; see reactions.Service.Published).
type publishedReactions interface {
	Published(ctx context.Context, bot string) ([]reactions.Published, error)
}

func newActions(env *family.Env) *actions {
	return &actions{
		mail: env.Email, store: env.Store, outbox: env.Outbox, now: env.Now,
		subs: subscribers.NewService(env.Store, env.Now, env.Jobs).WithEvents(env.Events, env.Log),
		// Published reads only: no vocabulary (that is for publishing and imports).
		published: reactions.NewService(env.Store, nil, env.Now, env.Log),
	}
}

func (a actions) Forward(ctx context.Context, bot, to string, msg emaildomains.InboundMessage) error {
	if a.mail == nil {
		return errors.New("this deployment sends no email")
	}
	addr, err := mail.ParseAddress(to)
	if err != nil {
		return err
	}
	if msg.From == nil {
		return errors.New("the message has no sender to forward for")
	}
	from := &mail.Address{Name: msg.From.Name, Address: msg.From.Address}
	text := msg.Text
	if text == "" {
		text = "(this message had no text part)"
	}
	sender := addressOf(msg)
	mailer := a.mail
	if a.signer != nil {
		k, err := a.signer(ctx, bot, sender)
		if err != nil {
			return fmt.Errorf("the DKIM key of %s: %w", sender, err)
		}
		var ok bool
		if mailer, ok = email.Signing(a.mail, k); !ok {
			return fmt.Errorf("%T cannot sign with the bot's DKIM key", a.mail)
		}
	}
	fwd := email.Message{
		From: mail.Address{Name: from.Name + " (forwarded)", Address: sender}, To: *addr,
		ReplyTo: from, Subject: "Fwd: " + msg.Subject, Text: text, HTML: msg.HTML,
	}
	if len(msg.Raw) > 0 {
		// The original rides along, attachments and all.
		fwd.Attachments = []email.Attachment{email.OriginalMessage(msg.Raw)}
	}
	_, err = mailer.Send(ctx, fwd)
	if errors.Is(err, email.ErrTooLarge) && len(fwd.Attachments) > 0 {
		// Too large with the original attached (it counts twice, and base64 grows it): the
		// bodies alone, saying so.
		fwd.Attachments = nil
		fwd.Text = text + "\n\n(The original message, " + strconv.Itoa(len(msg.Raw)) + " bytes, was too large to attach: its attachments are not forwarded.)"
		_, err = mailer.Send(ctx, fwd)
	}
	return err
}

// addressOf is the address the mail was sent to: forwards go out from it, so the forward
// is sent from the bot's own verified domain rather than spoofing the original sender.
func addressOf(msg emaildomains.InboundMessage) string {
	if len(msg.Recipients) > 0 {
		return msg.Recipients[0]
	}
	return "noreply@localhost"
}

// RunReaction queues the run of reactionID's published version for the sender's subscriber:
// the bot's oldest subscriber whose email field holds the sender's address, else the
// subscriber of the email channel type whose external id is the address (created, with the
// address in its email field when the bot has a string field of that name). The runtime's
// message is staged in the outbox and caused by the inbound message's id, so the run starts
// once however often the message is sent; a reaction with no published version now is
// skipped (one the runtime then finds unpublished starts nothing, and is logged).
func (a actions) RunReaction(ctx context.Context, bot, reactionID string, from mail.Address, msg emaildomains.InboundMessage) (string, error) {
	list, err := a.published.Published(ctx, bot)
	if err != nil {
		return "", fmt.Errorf("published reactions: %w", err)
	}
	if !slices.ContainsFunc(list, func(p reactions.Published) bool { return p.ReactionID == reactionID }) {
		return "", &emaildomains.SkipError{Reason: "reaction " + reactionID + " has no published version (never published, or deleted): nothing ran"}
	}
	sub, err := a.sender(ctx, bot, from.Address)
	if err != nil {
		return "", err
	}
	m, err := runtime.RunReactionMessage(bot, sub.ID, channel.Kind(sub.Channel), reactionID, runtime.TriggerInboundEmail, msg.ID)
	if err != nil {
		return "", err
	}
	writes, deliver, err := a.outbox.Stage(m)
	if err != nil {
		return "", err
	}
	if err := a.store.Transact(ctx, writes); err != nil {
		return "", fmt.Errorf("stage the reaction's run: %w", err)
	}
	deliver(ctx)
	return sub.ID, nil
}

// sender finds or creates the subscriber of an email sender.
func (a actions) sender(ctx context.Context, bot, address string) (subscribers.Subscriber, error) {
	addr := subscribers.EmailAddress(address)
	if addr == "" {
		return subscribers.Subscriber{}, &emaildomains.SkipError{Reason: "the sender's address is not one a subscriber can be known by (a bare ASCII address): no reaction ran"}
	}
	sub, err := a.subs.FindByEmail(ctx, bot, addr)
	if httpapi.KindOf(err) != httpapi.KindNotFound {
		return sub, err
	}
	sub, err = a.subs.GetByIdentity(ctx, bot, subscribers.ChannelEmail, addr)
	if httpapi.KindOf(err) != httpapi.KindNotFound {
		return sub, err
	}
	if len(addr) > subscribers.MaxExternalIDLen {
		return subscribers.Subscriber{}, &emaildomains.SkipError{Reason: fmt.Sprintf(
			"no subscriber has the sender's address in its email field, and an address over %d characters cannot identify a new one: no reaction ran",
			subscribers.MaxExternalIDLen)}
	}
	fields, err := a.subs.Fields(ctx, bot)
	if err != nil {
		return subscribers.Subscriber{}, err
	}
	seen := a.now()
	c := subscribers.Changes{LastSeenAt: &seen}
	if slices.ContainsFunc(fields, func(f subscribers.Field) bool {
		return f.Name == subscribers.EmailFieldName && f.Type == subscribers.TypeString
	}) {
		c.Fields = map[string]any{subscribers.EmailFieldName: addr}
	}
	// Created concurrently by another message of the sender: the upsert finds theirs.
	sub, _, err = a.subs.Upsert(ctx, bot, subscribers.ChannelEmail, addr, c)
	return sub, err
}
