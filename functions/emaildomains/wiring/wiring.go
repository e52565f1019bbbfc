// Package wiring composes the sending-domains family (domains, inbound routes, inbound mail)
// with the process: its credentials sealer, DNS resolver, email sender and SES identities.
package wiring

import (
	"context"
	"errors"
	"net"
	"net/mail"
	"net/url"

	"github.com/botplatform/api/functions/emaildomains"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/sns"
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
			Purge: emaildomains.PurgeStep(env.Store),
		}
	}}
}

// New builds the sending-domains service on env; campaigns use it for DKIM signers.
func New(env *family.Env) *emaildomains.Service {
	sealer := env.Secrets
	if sealer == nil {
		sealer = noSealer{}
	}
	cfg := emaildomains.Config{
		Store:         env.Store,
		Sealer:        sealer,
		Resolver:      emaildomains.NewResolver(env.EmailSettings.DNSServer),
		Actions:       actions{env.Email},
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
	if es := env.EmailSettings; es.SES != nil {
		cfg.Identities = emaildomains.SESIdentities{Client: es.SES, ConfigurationSet: es.ConfigurationSet}
	}
	svc, err := emaildomains.New(cfg)
	if err != nil {
		// Every field New checks is set above; a failure here is a programming error.
		panic(err)
	}
	return svc
}

// noSealer stands in for a process without a credentials key: domains cannot be added
// (their DKIM keys cannot be sealed), everything else works.
type noSealer struct{}

var errNoSealer = httpapi.E(httpapi.KindUnavailable, "secrets_unavailable", "this deployment holds no key to seal DKIM keys with (SECRETS_KEY_ID on AWS)")

func (noSealer) Seal(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }
func (noSealer) Open(context.Context, []byte, []byte) ([]byte, error) { return nil, errNoSealer }

// actions runs inbound routes' actions: forwards go out through the deployment's email
// sender; reactions for an email sender's subscriber are not built yet (docs/email.md).
type actions struct{ mail email.Sender }

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
	_, err = a.mail.Send(ctx, email.Message{
		From: mail.Address{Name: from.Name + " (forwarded)", Address: addressOf(msg)}, To: *addr,
		ReplyTo: from, Subject: "Fwd: " + msg.Subject, Text: text, HTML: msg.HTML,
	})
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

func (actions) RunReaction(context.Context, string, string, mail.Address, emaildomains.InboundMessage) error {
	return errors.New("running a reaction for an email sender is not supported yet")
}
