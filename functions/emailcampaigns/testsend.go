package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"time"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// TestSendLimit is how many test sends a bot may make: each reaches real mailboxes.
var TestSendLimit = ratelimit.Limit{Name: "email campaign test sends", Max: 10, Window: time.Minute}

// MaxTestAddresses bounds the addresses of one test send.
const MaxTestAddresses = 5

// TestSendResult is test-send's answer.
type TestSendResult struct {
	CampaignID string `json:"campaign_id"`
	// ContentVersion is the published version sent: the campaign's frozen one once it is
	// scheduled, the newest before.
	ContentVersion int        `json:"content_version"`
	Sent           []TestSent `json:"sent"`
}

// TestSent is one message of a test send.
type TestSent struct {
	Address   string    `json:"address"`
	MessageID string    `json:"message_id"`
	SentAt    time.Time `json:"sent_at"`
}

// testPerson is who a test message is rendered for: sample data, as content's preview.
func testPerson(addr string) Person {
	return Person{SubscriberID: "sample", Email: addr, Consent: true, FirstName: "Alex", LastName: "Sample", Name: "Alex Sample", Locale: "en"}
}

// TestSend sends the campaign's content to up to MaxTestAddresses addresses, its subject
// prefixed "[Test] ": signed with the bot's domain key, without tracking (no pixel, links as
// written, no recipient rows, nothing counted).
func (s *Service) TestSend(ctx context.Context, bot, id string, addresses []string) (TestSendResult, error) {
	var p httpapi.Problems
	switch {
	case len(addresses) == 0:
		p.Add("addresses", "give 1 to %d addresses", MaxTestAddresses)
	case len(addresses) > MaxTestAddresses:
		p.Add("addresses", "at most %d addresses", MaxTestAddresses)
	}
	for i, a := range addresses {
		if addr, _ := address(Person{Email: a}); addr == "" || addr != a {
			p.Add(fmt.Sprintf("addresses[%d]", i), "is not an email address")
		}
	}
	if err := p.Err(); err != nil {
		return TestSendResult{}, err
	}
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return TestSendResult{}, err
	}
	version := 0
	if rec.ContentVersion != nil {
		version = *rec.ContentVersion
	} else if version, err = s.d.Content.Published(ctx, bot, rec.ContentID); err != nil {
		return TestSendResult{}, err
	}
	out, err := s.d.Content.Render(ctx, bot, rec.ContentID, version, testPerson(""))
	if err != nil {
		return TestSendResult{}, err
	}
	signer, err := s.d.Domains.Signer(ctx, bot, out.From.Address)
	if errors.Is(err, ErrNotVerified) || clientError(err) {
		return TestSendResult{}, httpapi.Errorf(httpapi.KindUnprocessable, "domain_not_verified", "%s is not sent from a verified sending domain of this bot: %s", out.From.Address, detail(err))
	}
	if err != nil {
		return TestSendResult{}, err
	}
	if err := s.refuseSuppressed(ctx, bot, addresses); err != nil {
		return TestSendResult{}, err
	}
	if err := s.d.Limiter.Allow(ctx, TestSendLimit, bot); err != nil {
		return TestSendResult{}, err
	}
	res := TestSendResult{CampaignID: id, ContentVersion: version, Sent: []TestSent{}}
	for _, a := range addresses {
		// Each address gets the content rendered for the sample person with its own address.
		r, err := s.d.Content.Render(ctx, bot, rec.ContentID, version, testPerson(a))
		if err != nil {
			return TestSendResult{}, err
		}
		m := email.Message{From: r.From, To: mail.Address{Address: a}, Subject: "[Test] " + r.Subject, Preheader: r.Preheader,
			HTML: r.HTML, Text: r.Text, Tags: map[string]string{"kind": "test_send", "campaign": id}}
		if r.ReplyTo != "" {
			m.ReplyTo = &mail.Address{Address: r.ReplyTo}
		}
		sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
		rc, err := s.d.Mail.Send(sendCtx, m, signer)
		cancel()
		switch {
		case err == nil:
		case email.IsPermanent(err):
			return TestSendResult{}, httpapi.Errorf(httpapi.KindUnprocessable, "test_send_refused", "the mail server refused the message to %s", a).Wrap(err).
				With("sent", res.Sent)
		default:
			return TestSendResult{}, httpapi.E(httpapi.KindUnavailable, "email_unavailable", "the mail server did not take the message; retry shortly").Wrap(err).
				With("sent", res.Sent)
		}
		res.Sent = append(res.Sent, TestSent{Address: a, MessageID: rc.MessageID, SentAt: stamp(s.d.Now())})
	}
	return res, nil
}

// SuppressedAddress is an address a test send refused: the bot's suppression list has it.
type SuppressedAddress struct {
	Address string `json:"address"`
	// Reason is why it was suppressed: unsubscribed, bounced or complained.
	Reason string `json:"reason"`
}

// refuseSuppressed answers 422 address_suppressed, naming each, when the bot's suppression
// list has any of addresses: a test goes to the same provider, under the same domain's
// reputation, as the campaign, and an address that bounced hard or complained must not be
// mailed again, test or not. Nothing is sent then.
func (s *Service) refuseSuppressed(ctx context.Context, bot string, addresses []string) error {
	lower := make([]string, len(addresses))
	for i, a := range addresses {
		lower[i] = strings.ToLower(a)
	}
	suppressed, err := s.suppressed(ctx, bot, lower)
	if err != nil {
		return err
	}
	var refused []SuppressedAddress
	for i, a := range addresses {
		if r, ok := suppressed[lower[i]]; ok {
			refused = append(refused, SuppressedAddress{Address: a, Reason: suppressionReason(r)})
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return httpapi.Errorf(httpapi.KindUnprocessable, "address_suppressed",
		"the bot's suppression list has %d of the addresses (unsubscribed, bounced or complained); nothing was sent", len(refused)).
		With("suppressed", refused)
}
