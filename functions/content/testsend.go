package content

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/text"
)

// Recipients finds a bot's test recipients: subscribers carrying the tester label.
type Recipients interface {
	// Testers returns a page of test recipients.
	Testers(ctx context.Context, bot string, limit int, cursor string) ([]Recipient, string, error)
	// Subscriber returns one subscriber, and whether it is a test recipient.
	Subscriber(ctx context.Context, bot, id string) (Recipient, bool, error)
}

// Messenger sends a message to a subscriber over the bot's channel of its type.
type Messenger interface {
	Send(ctx context.Context, bot, channelType, externalID string, m channel.Message) (string, error)
}

// TesterLabel is the label that makes a subscriber a test recipient.
const TesterLabel = "tester"

// TestSendLimit is how many test sends a bot may make: they reach real people, and a loop
// calling the route must not turn into spam.
var TestSendLimit = ratelimit.Limit{Name: "test sends", Max: 10, Window: time.Minute}

// TestSender sends drafts to test recipients.
type TestSender struct {
	Recipients Recipients
	// Messenger is nil in a process that cannot open channels (no credentials key).
	Messenger Messenger
	// Mail sends email documents.
	Mail    email.Sender
	Limiter *ratelimit.Limiter
	Now     func() time.Time
}

// TestSend is test-send's answer.
type TestSend struct {
	DocumentID  string `json:"document_id"`
	Revision    int64  `json:"revision"`
	RecipientID string `json:"subscriber_id"`
	// Via is the channel type or "email" the draft went out on.
	Via string `json:"via"`
	// MessageID is the provider's id of what was sent.
	MessageID string    `json:"message_id"`
	SentAt    time.Time `json:"sent_at"`
}

// TestSend renders the draft for one test recipient and sends it. The draft must pass
// publish's checks (a test of something that cannot be published tests nothing).
func (s *Service) TestSend(ctx context.Context, bot, id, subscriberID string) (TestSend, error) {
	if s.sends == nil {
		return TestSend{}, httpapi.E(httpapi.KindUnavailable, "test_send_unavailable", "this deployment cannot send test messages")
	}
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return TestSend{}, err
	}
	if rec.Archived {
		return TestSend{}, httpapi.E(httpapi.KindConflict, "document_archived", "the document is archived; clone it to test a copy")
	}
	if rec.Type == TypePush {
		return TestSend{}, httpapi.E(httpapi.KindUnprocessable, "unsupported_document_type",
			"push documents are tested on a browser subscription: POST /api/bots/{botID}/web-push/test")
	}
	body, _, err := s.checked(ctx, rec)
	if err != nil {
		return TestSend{}, err
	}
	r, tester, err := s.sends.Recipients.Subscriber(ctx, bot, subscriberID)
	if err != nil {
		if httpapi.KindOf(err) == httpapi.KindNotFound {
			var p httpapi.Problems
			p.Add("subscriber_id", "no subscriber %q in this bot", subscriberID)
			return TestSend{}, p.Unprocessable("not_a_test_recipient")
		}
		return TestSend{}, err
	}
	if !tester {
		var p httpapi.Problems
		p.Add("subscriber_id", "subscriber %s is not a test recipient: give it the %q label", subscriberID, TesterLabel)
		return TestSend{}, p.Unprocessable("not_a_test_recipient")
	}
	if err := s.sends.Limiter.Allow(ctx, TestSendLimit, bot); err != nil {
		return TestSend{}, err
	}
	out := TestSend{DocumentID: id, Revision: rec.Revision, RecipientID: subscriberID, SentAt: stamp(s.sends.Now())}
	r.UnsubscribeURL = previewUnsubscribeURL
	rendered := render(body, r)
	switch rec.Type {
	case TypeMessage:
		out.Via = r.Channel
		out.MessageID, err = s.sendMessage(ctx, bot, r, *rendered.Message)
	case TypeEmail:
		out.Via = "email"
		out.MessageID, err = s.sendEmail(ctx, r, *rendered.Email)
	}
	if err != nil {
		return TestSend{}, err
	}
	return out, nil
}

func (s *Service) sendMessage(ctx context.Context, bot string, r Recipient, m channel.Message) (string, error) {
	if s.sends.Messenger == nil {
		return "", httpapi.E(httpapi.KindUnavailable, "test_send_unavailable", "this deployment cannot open channels (no credentials key)")
	}
	id, err := s.sends.Messenger.Send(ctx, bot, r.Channel, r.ExternalID, m)
	switch {
	case err == nil:
		return id, nil
	case httpapi.KindOf(err) >= 0:
		return "", err
	case errors.Is(err, channel.ErrRateLimited), errors.Is(err, channel.ErrUnavailable):
		return "", httpapi.Errorf(httpapi.KindUnavailable, "channel_unavailable", "the %s channel did not take the message; retry shortly", r.Channel).Wrap(err)
	default:
		// Blocked, rejected, bad credentials, outside the window: the provider's answer is
		// the customer's to see, without its internals.
		return "", httpapi.Errorf(httpapi.KindUnprocessable, "test_send_refused", "the %s channel refused the message: %s", r.Channel, refusal(err)).Wrap(err)
	}
}

// refusal names a channel failure for the customer.
func refusal(err error) string {
	for _, k := range []struct {
		err  error
		what string
	}{
		{channel.ErrBlocked, "the subscriber blocked the bot or cannot receive messages"},
		{channel.ErrRejected, "the provider rejected the message"},
		{channel.ErrInvalidCredentials, "the channel's credentials are no longer valid"},
		{channel.ErrOutsideWindow, "outside the session window, only approved templates may be sent"},
	} {
		if errors.Is(err, k.err) {
			return k.what
		}
	}
	return "the provider refused it"
}

func (s *Service) sendEmail(ctx context.Context, r Recipient, e RenderedEmail) (string, error) {
	if r.Email == "" {
		var p httpapi.Problems
		p.Add("subscriber_id", "subscriber %s has no email address: set its custom field %q", r.ID, "email")
		return "", p.Unprocessable("not_a_test_recipient")
	}
	to, err := mail.ParseAddress(r.Email)
	if err != nil {
		var p httpapi.Problems
		p.Add("subscriber_id", "subscriber %s's email %q is not an address", r.ID, r.Email)
		return "", p.Unprocessable("not_a_test_recipient")
	}
	m := email.Message{
		From:      mail.Address{Name: e.From.Name, Address: e.From.Address},
		To:        mail.Address{Name: r.Name, Address: to.Address},
		Subject:   "[Test] " + e.Subject,
		Preheader: e.Preheader,
		HTML:      e.HTML,
		Text:      e.Text,
		Tags:      map[string]string{"kind": "test_send"},
	}
	if e.ReplyTo != "" {
		m.ReplyTo = &mail.Address{Address: e.ReplyTo}
	}
	rc, err := s.sends.Mail.Send(ctx, m)
	switch {
	case err == nil:
		return rc.MessageID, nil
	case email.IsPermanent(err):
		return "", httpapi.E(httpapi.KindUnprocessable, "test_send_refused", "the mail server refused the message").Wrap(err)
	default:
		return "", httpapi.E(httpapi.KindUnavailable, "email_unavailable", "the mail server did not take the message; retry shortly").Wrap(err)
	}
}

// TestRecipients lists the bot's test recipients.
func (s *Service) TestRecipients(ctx context.Context, bot string, limit int, cursor string) ([]Recipient, string, error) {
	if s.sends == nil {
		return []Recipient{}, "", nil
	}
	return s.sends.Recipients.Testers(ctx, bot, limit, cursor)
}

// PreviewRequest says whom to render a preview for: a subscriber, or sample data.
type PreviewRequest struct {
	SubscriberID *string `json:"subscriber_id"`
	Sample       *Sample `json:"sample"`
	// Version renders a published version instead of the draft.
	Version *int `json:"version"`
}

// Sample is made-up recipient data for a preview.
type Sample struct {
	FirstName string            `json:"first_name"`
	LastName  string            `json:"last_name"`
	Locale    string            `json:"locale"`
	Channel   string            `json:"channel"`
	Fields    map[string]string `json:"fields"`
}

// Preview is preview's answer.
type Preview struct {
	DocumentID string   `json:"document_id"`
	Revision   int64    `json:"revision"`
	Version    *int     `json:"version"`
	Rendered   Rendered `json:"rendered"`
	// Problems are what would keep the draft from being published; a preview still renders.
	Problems []httpapi.FieldError `json:"problems"`
}

// Preview renders the draft (or a published version) for a subscriber or sample data.
// Email HTML comes back sanitized, safe to show in a page.
func (s *Service) Preview(ctx context.Context, bot, id string, req PreviewRequest) (Preview, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Preview{}, err
	}
	raw := rec.Draft
	if req.Version != nil {
		if *req.Version < 1 || *req.Version > rec.PublishedVersion {
			return Preview{}, httpapi.NotFound(fmt.Sprintf("version %d of the document", *req.Version))
		}
		v, err := s.version(ctx, bot, id, *req.Version)
		if err != nil {
			return Preview{}, err
		}
		raw = v.Body
	}
	body, err := decodeBody(rec.Type, raw, "draft")
	if err != nil {
		return Preview{}, err
	}
	r, err := s.previewRecipient(ctx, bot, req)
	if err != nil {
		return Preview{}, err
	}
	cat, err := s.catalog.Catalog(ctx, bot)
	if err != nil {
		return Preview{}, err
	}
	r.UnsubscribeURL = previewUnsubscribeURL
	out := Preview{DocumentID: id, Revision: rec.Revision, Version: req.Version, Rendered: render(body, r), Problems: check(rec.Type, body, cat)}
	if out.Problems == nil {
		out.Problems = []httpapi.FieldError{}
	}
	if e := out.Rendered.Email; e != nil {
		e.HTML = sanitize(e.HTML)
	}
	return out, nil
}

func (s *Service) previewRecipient(ctx context.Context, bot string, req PreviewRequest) (Recipient, error) {
	var p httpapi.Problems
	switch {
	case req.SubscriberID != nil && req.Sample != nil:
		p.Add("sample", "give subscriber_id or sample, not both")
		return Recipient{}, p.Err()
	case req.SubscriberID != nil:
		if s.sends == nil {
			return Recipient{}, httpapi.E(httpapi.KindUnavailable, "preview_unavailable", "this deployment cannot read subscribers for previews")
		}
		r, _, err := s.sends.Recipients.Subscriber(ctx, bot, *req.SubscriberID)
		if httpapi.KindOf(err) == httpapi.KindNotFound {
			p.Add("subscriber_id", "no subscriber %q in this bot", *req.SubscriberID)
			return Recipient{}, p.Err()
		}
		return r, err
	case req.Sample != nil:
		sm := req.Sample
		r := Recipient{ID: "sample", FirstName: sm.FirstName, LastName: sm.LastName, Locale: sm.Locale, Channel: sm.Channel, Fields: map[string]any{}}
		r.Name = joinName(sm.FirstName, sm.LastName)
		if len(sm.Fields) > 200 {
			p.Add("sample.fields", "at most 200 fields")
		}
		for k, v := range sm.Fields {
			checkLen(&p, "sample.fields."+k, v, MaxMessageText, text.Message)
			r.Fields[k] = v
		}
		for _, f := range []struct{ name, v string }{{"first_name", sm.FirstName}, {"last_name", sm.LastName}, {"locale", sm.Locale}} {
			checkLen(&p, "sample."+f.name, f.v, MaxNameLen, text.Name)
		}
		switch sm.Channel {
		case "", "telegram", "whatsapp", "vk":
		default:
			p.Add("sample.channel", "must be telegram, whatsapp or vk")
		}
		return r, p.Err()
	default:
		return Recipient{ID: "sample", FirstName: "Alex", LastName: "Sample", Name: "Alex Sample", Locale: "en", Channel: "telegram"}, nil
	}
}

func joinName(first, last string) string {
	switch {
	case first == "":
		return last
	case last == "":
		return first
	}
	return first + " " + last
}
