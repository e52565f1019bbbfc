// Package wiring composes the email campaigns family with the families it reads and sends
// through: content (the published email), subscribers (the audience), sending domains (DKIM
// signers) and email events (the suppression list).
package wiring

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/botplatform/api/functions/content"
	contentwiring "github.com/botplatform/api/functions/content/wiring"
	"github.com/botplatform/api/functions/emailcampaigns"
	"github.com/botplatform/api/functions/emaildomains"
	domainswiring "github.com/botplatform/api/functions/emaildomains/wiring"
	"github.com/botplatform/api/functions/emailevents"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the emailcampaigns family: its routes and its send job.
func Family() family.Family {
	return family.Family{Name: "emailcampaigns", Build: func(env *family.Env) family.Parts {
		svc, err := New(env)
		if err != nil {
			// A process without a link key or public URL cannot send campaigns: its routes
			// answer 503 rather than the process failing to start. It still erases a
			// deleted bot's campaigns: a purge needs only the store.
			env.Log.Warn("email campaigns unavailable", "error", err)
			return family.Parts{Routes: func(mux *httpapi.Mux) { emailcampaigns.Unavailable(mux, err.Error()) },
				Purge: emailcampaigns.PurgeStep(env.Store), Erase: emailcampaigns.EraseStep(env.Store)}
		}
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { emailcampaigns.Routes(mux, svc, env.Cursors) },
			Jobs:   svc.Jobs(),
			Purge:  emailcampaigns.PurgeStep(env.Store),
			Erase:  emailcampaigns.EraseStep(env.Store),
		}
	}}
}

// New builds the campaigns service on env; the email events family uses it to record
// opens, clicks, unsubscribes and provider events.
func New(env *family.Env) (*emailcampaigns.Service, error) {
	if env.Links == nil {
		return nil, errors.New("no email link key in this process")
	}
	mailer := env.Email
	if mailer == nil {
		// A process that only records events (the email events Lambda) sends nothing.
		mailer = noSender{}
	}
	subs := subscribers.NewService(env.Store, env.Now, env.Jobs)
	return emailcampaigns.New(emailcampaigns.Deps{
		Store:        env.Store,
		Content:      &contentAdapter{svc: contentwiring.New(env)},
		Audience:     audience{subs},
		Domains:      domains{domainswiring.New(env)},
		Suppressions: emailevents.NewService(env.Store, env.Links, nil, emailevents.Config{}, env.Now, env.Log),
		Mail:         emailcampaigns.SigningMailer(mailer),
		Links:        env.Links,
		Outbox:       env.Outbox,
		Limiter:      ratelimit.New(env.Store, env.Now),
		Now:          env.Now,
		Log:          env.Log,
		Events:       env.Events,
		Quota:        quota(env),
	}, emailcampaigns.Config{Rate: env.EmailSettings.Rate, PublicURL: LinkBase(env)})
}

// quota is the campaigns' Deps.Quota: on AWS without EMAIL_RATE, the SES account's maximum
// send rate (GetAccount), which the first send step of a container asks for (so a quota SES
// raised needs no deploy, only new containers); nil elsewhere (the configured or default
// rate).
func quota(env *family.Env) func(ctx context.Context) (float64, error) {
	es := env.EmailSettings
	if es.Rate > 0 || es.SES == nil {
		return nil
	}
	return func(ctx context.Context) (float64, error) {
		ctx, cancel := context.WithTimeout(ctx, quotaTimeout)
		defer cancel()
		out, err := es.SES.GetAccount(ctx, &sesv2.GetAccountInput{})
		if err != nil {
			return 0, err
		}
		if out.SendQuota == nil {
			return 0, errors.New("the SES account reports no send quota")
		}
		return out.SendQuota.MaxSendRate, nil
	}
}

// quotaTimeout bounds the read of the SES account's quota.
const quotaTimeout = 3 * time.Second

// LinkBase is the base URL of sent emails' links: the configured one, else the public URL,
// else the local process's default address (a process that serves no public URL still
// sends test campaigns whose links work on this machine).
func LinkBase(env *family.Env) string {
	switch {
	case env.EmailSettings.LinkBaseURL != "":
		return env.EmailSettings.LinkBaseURL
	case env.PublicURL != "":
		return env.PublicURL
	}
	return "http://127.0.0.1:8080"
}

// noSender refuses to send, as a temporary failure that names the missing configuration:
// a test send there answers 503, a send step fails and is retried where a sender exists.
type noSender struct{}

func (noSender) Send(context.Context, email.Message) (email.Receipt, error) {
	return email.Receipt{}, &email.SendError{Err: errors.New("this process has no email sender (SES_CONFIGURATION_SET on AWS)")}
}

// contentAdapter renders published email versions, each parsed once per process.
type contentAdapter struct {
	svc *content.Service
	mu  sync.Mutex
	// versions caches parsed versions by bot, document and number: a campaign renders one
	// version for every recipient, and versions never change.
	versions map[string]*content.EmailVersion
}

// maxCachedVersions bounds the cache: a process sends few campaigns at once.
const maxCachedVersions = 64

func (c *contentAdapter) Published(ctx context.Context, bot, docID string) (int, error) {
	ev, err := c.svc.EmailVersion(ctx, bot, docID, 0)
	if err != nil {
		return 0, err
	}
	c.keep(bot, docID, ev)
	return ev.Number, nil
}

func (c *contentAdapter) keep(bot, docID string, ev *content.EmailVersion) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.versions == nil || len(c.versions) >= maxCachedVersions {
		c.versions = map[string]*content.EmailVersion{}
	}
	c.versions[bot+"/"+docID+"/"+strconv.Itoa(ev.Number)] = ev
}

func (c *contentAdapter) Render(ctx context.Context, bot, docID string, version int, p emailcampaigns.Person) (emailcampaigns.Rendered, error) {
	c.mu.Lock()
	ev := c.versions[bot+"/"+docID+"/"+strconv.Itoa(version)]
	c.mu.Unlock()
	if ev == nil {
		var err error
		if ev, err = c.svc.EmailVersion(ctx, bot, docID, version); err != nil {
			return emailcampaigns.Rendered{}, err
		}
		c.keep(bot, docID, ev)
	}
	r := ev.Render(content.Recipient{ID: p.SubscriberID, Name: p.Name, FirstName: p.FirstName, LastName: p.LastName,
		Locale: p.Locale, Timezone: p.Timezone, Email: p.Email, Fields: p.Fields, UnsubscribeURL: p.UnsubscribeURL})
	return emailcampaigns.Rendered{Subject: r.Subject, Preheader: r.Preheader, HTML: r.HTML, Text: r.Text,
		From: mail.Address{Name: r.From.Name, Address: r.From.Address}, ReplyTo: r.ReplyTo}, nil
}

// audience reads subscribers: a campaign's audience is the subscribers with any of its
// labels (every subscriber without labels).
type audience struct{ subs *subscribers.Service }

// Page lists the subscribers that have any of the labels (every subscriber without labels),
// each once (subscribers.Service.Audience).
func (a audience) Page(ctx context.Context, bot string, labelIDs []string, limit int, cursor string) ([]emailcampaigns.Person, string, error) {
	list, next, err := a.subs.Audience(ctx, bot, labelIDs, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	out := make([]emailcampaigns.Person, 0, len(list))
	for _, s := range list {
		out = append(out, person(s))
	}
	return out, next, nil
}

func (a audience) People(ctx context.Context, bot string) (emailcampaigns.People, error) {
	r, err := a.subs.Reader(ctx, bot)
	if err != nil {
		return nil, err
	}
	return people{r}, nil
}

// people reads subscribers with the field catalog of the moment it was made (one send
// step's).
type people struct{ r *subscribers.Reader }

func (p people) Get(ctx context.Context, ids []string) (map[string]emailcampaigns.Person, error) {
	subs, err := p.r.GetMany(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]emailcampaigns.Person, len(subs))
	for id, s := range subs {
		out[id] = person(s)
	}
	return out, nil
}

// person is a subscriber as a campaign sees it: its address is the custom field email, its
// consent the custom field email_consent (docs/emailcampaigns.md).
func person(s subscribers.Subscriber) emailcampaigns.Person {
	deref := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	p := emailcampaigns.Person{SubscriberID: s.ID, FirstName: deref(s.FirstName), LastName: deref(s.LastName),
		Name: deref(s.Name), Locale: deref(s.Locale), Timezone: deref(s.Timezone), Fields: s.Fields, Labels: s.Labels}
	p.Email, _ = s.Fields["email"].(string)
	p.Consent, _ = s.Fields["email_consent"].(bool)
	return p
}

// domains gives the DKIM signer of a verified sending domain.
type domains struct{ svc *emaildomains.Service }

func (d domains) Signer(ctx context.Context, bot, from string) (*email.Signer, error) {
	s, err := d.svc.Signer(ctx, bot, from)
	if errors.Is(err, emaildomains.ErrNotVerified) {
		return nil, fmt.Errorf("%w: %w", emailcampaigns.ErrNotVerified, err)
	}
	return s, err
}
