package emaildomains

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/functions/emaildomains/internal/mimemail"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Actions runs the actions of inbound routes. The message it gets is the stored one.
type Actions interface {
	// Forward sends msg on to the address to.
	Forward(ctx context.Context, bot, to string, msg InboundMessage) error
	// RunReaction runs reactionID for the bot's subscriber whose email is from's address
	// (creating one when none has it) and returns that subscriber's id. It may only queue
	// the run: done means the run was handed to the runtime, which starts it once per
	// message. A *SkipError says it had nothing to do (the outcome is skipped, not failed).
	RunReaction(ctx context.Context, bot, reactionID string, from mail.Address, msg InboundMessage) (subscriberID string, err error)
}

// SkipError is an action's answer that it had nothing to do, and why (for people: the
// outcome's detail): a reaction with no published version, say. The outcome is skipped.
type SkipError struct{ Reason string }

func (e *SkipError) Error() string { return e.Reason }

// Provider names of inbound mail.
const (
	ProviderLocal = "local"
	ProviderSES   = "ses"
)

// Statuses of an action's outcome.
const (
	OutcomeDone    = "done"
	OutcomeFailed  = "failed"
	OutcomeSkipped = "skipped"
)

// MaxRawBytes bounds an inbound message as received (10 MiB); a larger one is refused (413)
// before it is parsed.
const MaxRawBytes = 10 << 20

// Address is a mailbox of a message's header.
type Address = mimemail.Address

// Attachment describes a part of a message that is not its text or HTML body: only this is
// kept, not its content.
type Attachment = mimemail.Attachment

// Bounds of a stored message's bodies. Both are cut further when the message would not fit
// in one stored item (store.MaxDataBytes).
const (
	MaxTextBytes = 128 << 10
	MaxHTMLBytes = 192 << 10
	// maxRecipients bounds the recipients of one delivery that are looked at.
	maxRecipients = 50
	// actionTimeout bounds one action.
	actionTimeout = 20 * time.Second
	// itemSlack is room kept in the item for the action's outcome, written after.
	itemSlack = 2 << 10
)

// ActionOutcome is what became of a route's action for a message.
type ActionOutcome struct {
	Type ActionType `json:"type"`
	// Status is done, failed or skipped.
	Status string `json:"status"`
	// Detail says why it failed or was skipped.
	Detail string `json:"detail,omitempty"`
	// SubscriberID (reaction, done) is the sender's subscriber the reaction runs for: its
	// executions list the run.
	SubscriberID string     `json:"subscriber_id,omitempty"`
	At           *time.Time `json:"at"`
}

// Verdicts are the provider's checks of a message (SES: PASS, FAIL, GRAY,
// PROCESSING_FAILED, DISABLED); absent for local deliveries.
type Verdicts struct {
	Spam  string `json:"spam"`
	Virus string `json:"virus"`
	SPF   string `json:"spf"`
	DKIM  string `json:"dkim"`
	DMARC string `json:"dmarc"`
}

// MessageSummary is a stored inbound message without its bodies: what lists show.
type MessageSummary struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	// ProviderMessageID is the provider's id of the delivery (SES's message id).
	ProviderMessageID string `json:"provider_message_id,omitempty"`
	// MessageID is the Message-ID header, without angle brackets ("" when it had none).
	MessageID string     `json:"message_id"`
	From      *Address   `json:"from"`
	To        []Address  `json:"to"`
	Cc        []Address  `json:"cc"`
	Subject   string     `json:"subject"`
	Date      *time.Time `json:"date"`
	// Recipients are the message's recipients at the bot's domains.
	Recipients []string `json:"recipients"`
	DomainID   string   `json:"domain_id"`
	// RouteID is the route that took the message; null for unmatched mail (no route of
	// the domain matches a recipient), which is stored too, with Matched false, so that
	// nothing sent to a verified domain is lost.
	RouteID *string        `json:"route_id"`
	Matched bool           `json:"matched"`
	Action  *ActionOutcome `json:"action"`
	// Spam is the provider's verdict; a spam message is stored but its action skipped.
	Spam          bool         `json:"spam"`
	Verdicts      *Verdicts    `json:"verdicts,omitempty"`
	Attachments   []Attachment `json:"attachments"`
	TextTruncated bool         `json:"text_truncated"`
	HTMLTruncated bool         `json:"html_truncated"`
	// Notes say what could not be kept as it was.
	Notes []string `json:"notes"`
	// Size is the raw message's size in bytes.
	Size       int       `json:"size"`
	ReceivedAt time.Time `json:"received_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// InboundMessage is a stored inbound message: headers, text and HTML bodies (bounded),
// attachment descriptions. The raw message is not kept.
type InboundMessage struct {
	MessageSummary
	Text string `json:"text"`
	HTML string `json:"html"`
	// Raw is the message as received, for Actions only (a forward of the original with
	// its attachments): it is never stored or returned.
	Raw []byte `json:"-"`
}

// Result is the answer to a delivery.
type Result struct {
	// Stored counts the bots the message was stored for.
	Stored int `json:"stored"`
	// Duplicates counts bots that had the message already (a redelivery).
	Duplicates int `json:"duplicates"`
	// Dropped counts bots over their daily limit, or every bot for a virus.
	Dropped int `json:"dropped"`
	// IgnoredRecipients counts recipients at no verified domain of the deployment.
	IgnoredRecipients int `json:"ignored_recipients"`
}

// delivery is one message as a provider delivered it.
type delivery struct {
	provider   string
	providerID string
	raw        []byte
	// recipients are the envelope recipients; none means the To and Cc headers'.
	recipients []string
	verdicts   *Verdicts
}

// dedupeKey identifies a message across redeliveries: the provider's id of it when there is
// one (SES), else its Message-ID, else its bytes. A message whose key repeats one the bot
// kept within the retention period is taken for a redelivery and stored no second time.
func (d delivery) dedupeKey(p mimemail.Message) string {
	switch {
	case d.providerID != "":
		return d.provider + ":" + d.providerID
	case p.MessageID != "":
		return "mid:" + p.MessageID
	}
	sum := sha256.Sum256(d.raw)
	return "raw:" + hex.EncodeToString(sum[:])
}

// target is the part of a delivery for one bot: its recipients at the bot's domains.
type target struct {
	bot        string
	recipients []string
	domains    []string // domain id of each recipient
}

func errMessageTooLarge() error {
	return httpapi.Errorf(httpapi.KindTooLarge, "message_too_large", "an inbound message is at most %d bytes", MaxRawBytes).
		With("max_bytes", MaxRawBytes)
}

// receive parses a delivered message and stores it for every bot with a verified domain
// among its recipients, then runs each bot's route action.
func (s *Service) receive(ctx context.Context, d delivery) (Result, error) {
	if len(d.raw) > MaxRawBytes {
		return Result{}, errMessageTooLarge()
	}
	p, err := mimemail.Parse(d.raw)
	if err != nil {
		return Result{}, httpapi.E(httpapi.KindUnprocessable, "invalid_message", "the message could not be read as an RFC 5322 message").Wrap(err)
	}
	var res Result
	targets, ignored, err := s.targets(ctx, recipientsOf(d, p))
	if err != nil {
		return Result{}, err
	}
	res.IgnoredRecipients = ignored
	if d.verdicts != nil && d.verdicts.Virus == "FAIL" {
		s.log.WarnContext(ctx, "inbound message with a virus dropped", "request_id", httpapi.RequestID(ctx), "provider", d.provider,
			"provider_message_id", d.providerID, "bots", len(targets))
		res.Dropped = len(targets)
		return res, nil
	}
	for _, t := range targets {
		outcome, err := s.deliver(ctx, t, d, p)
		if err != nil {
			return Result{}, err
		}
		switch outcome {
		case delivered:
			res.Stored++
		case duplicate:
			res.Duplicates++
		case dropped:
			res.Dropped++
		}
	}
	return res, nil
}

// recipientsOf returns the delivery's recipients, lower-cased domains, each once.
func recipientsOf(d delivery, p mimemail.Message) []string {
	var in []string
	if len(d.recipients) > 0 {
		in = d.recipients
	} else {
		for _, a := range slices.Concat(p.To, p.Cc) {
			in = append(in, a.Address)
		}
	}
	var out []string
	for _, r := range in {
		a, err := mail.ParseAddress(r)
		if err != nil || len(a.Address) > maxAddress {
			continue
		}
		addr := lowerDomain(a.Address)
		if !slices.Contains(out, addr) {
			out = append(out, addr)
		}
		if len(out) == maxRecipients {
			break
		}
	}
	return out
}

// targets groups recipients by the bot that claimed their domain; it also counts the
// recipients at no claimed domain.
func (s *Service) targets(ctx context.Context, recipients []string) ([]target, int, error) {
	claims := map[string]*claim{}
	var out []target
	ignored := 0
	for _, r := range recipients {
		name := domainOf(r)
		c, seen := claims[name]
		if !seen {
			got, _, ok, err := s.readClaim(ctx, name)
			if err != nil {
				return nil, 0, err
			}
			if ok && !got.Releasing { // a deleted domain's: no mail is routed by it
				c = &got
			}
			claims[name] = c
		}
		if c == nil {
			ignored++
			continue
		}
		i := slices.IndexFunc(out, func(t target) bool { return t.bot == c.BotID })
		if i < 0 {
			out = append(out, target{bot: c.BotID})
			i = len(out) - 1
		}
		out[i].recipients = append(out[i].recipients, r)
		out[i].domains = append(out[i].domains, c.DomainID)
	}
	return out, ignored, nil
}

type outcome int

const (
	delivered outcome = iota
	duplicate
	dropped
)

// deliver stores the message for one bot and runs the action of its route.
func (s *Service) deliver(ctx context.Context, t target, d delivery, p mimemail.Message) (outcome, error) {
	seen := seenKey(t.bot, d.dedupeKey(p))
	if _, err := s.store.Get(ctx, seen); err == nil {
		return duplicate, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	now := s.now().UTC()
	day := now.Format(time.DateOnly)
	dayEnd := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	n, err := s.store.Add(ctx, dayKey(t.bot, day), 1, dayEnd.Add(48*time.Hour))
	if err != nil {
		return 0, err
	}
	if n > s.maxPerDay {
		s.log.WarnContext(ctx, "inbound message dropped: the bot's daily limit is reached", "request_id", httpapi.RequestID(ctx),
			"bot_id", t.bot, "limit", s.maxPerDay, "provider", d.provider)
		return dropped, nil
	}
	routes, err := s.allRoutes(ctx, t.bot)
	if err != nil {
		return 0, err
	}
	m := s.message(t, d, p, routes, now)
	var route *InboundRoute
	if m.RouteID != nil {
		route = &routes[slices.IndexFunc(routes, func(r InboundRoute) bool { return r.ID == *m.RouteID })]
	}
	data, m, err := fit(m)
	if err != nil {
		return 0, err
	}
	expires := store.SecondsPrecision(m.ExpiresAt)
	err = s.store.Transact(ctx, []store.Write{
		store.PutOp(store.Item{Key: seen, Revision: 1, Data: []byte(`{"message_id":"` + m.ID + `"}`), ExpiresAt: expires}, store.MustNotExist),
		store.PutOp(store.Item{Key: messageKey(t.bot, m.ID), Revision: 1, Data: data, ExpiresAt: expires}, store.MustNotExist),
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 0 {
		return duplicate, nil // a concurrent redelivery was first
	}
	if err != nil {
		return 0, fmt.Errorf("store inbound message: %w", err)
	}
	if route != nil {
		m.Raw = d.raw
		s.act(ctx, t.bot, *route, m)
	}
	return delivered, nil
}

// message builds the stored message of a delivery for one bot.
func (s *Service) message(t target, d delivery, p mimemail.Message, routes []InboundRoute, now time.Time) InboundMessage {
	m := InboundMessage{MessageSummary: MessageSummary{
		ID: ids.At("eim", now), Provider: d.provider, ProviderMessageID: d.providerID, MessageID: p.MessageID,
		From: p.From, To: nonNil(p.To), Cc: nonNil(p.Cc), Subject: p.Subject, Date: p.Date,
		Recipients: t.recipients, DomainID: t.domains[0], Verdicts: d.verdicts,
		Attachments: nonNil(p.Attachments), Notes: nonNil(p.Notes), Size: len(d.raw),
		ReceivedAt: stamp(now), ExpiresAt: stamp(now.Add(s.retention)),
	}, Text: p.Text, HTML: p.HTML}
	m.Spam = d.verdicts != nil && d.verdicts.Spam == "FAIL"
	for i, r := range t.recipients {
		local := r[:strings.LastIndexByte(r, '@')]
		if route := pick(routes, t.domains[i], local); route != nil {
			m.RouteID, m.Matched, m.DomainID = &route.ID, true, route.DomainID
			break
		}
	}
	return m
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// fit encodes m, its bodies cut to their bounds and further, HTML first, until the item fits
// in the store with room for the action's outcome.
func fit(m InboundMessage) ([]byte, InboundMessage, error) {
	text, html := m.Text, m.HTML
	textMax, htmlMax := MaxTextBytes, MaxHTMLBytes
	budget := store.MaxDataBytes - itemSlack
	for {
		var cut bool
		m.Text, cut = mimemail.Truncate(text, textMax)
		m.TextTruncated = cut
		m.HTML, cut = mimemail.Truncate(html, htmlMax)
		m.HTMLTruncated = cut
		b, err := store.Encode(m)
		if err != nil {
			return nil, m, err
		}
		excess := len(b) - budget
		if excess <= 0 {
			return b, m, nil
		}
		switch {
		case len(m.HTML) > 0:
			htmlMax = max(len(m.HTML)-excess, 0)
		case len(m.Text) > 0:
			textMax = max(len(m.Text)-excess, 0)
		default:
			return nil, m, fmt.Errorf("inbound message %s: %d bytes without its bodies", m.ID, len(b))
		}
	}
}

// act runs the route's action for the stored message m and records its outcome. The action
// runs once: a redelivery is a duplicate and runs nothing, so a failed action is recorded
// and logged, not retried.
func (s *Service) act(ctx context.Context, bot string, r InboundRoute, m InboundMessage) {
	ctx, cancel := background(ctx, actionTimeout)
	defer cancel()
	o := ActionOutcome{Type: r.Action.Type}
	switch {
	case r.Action.Type == ActionStore:
		o.Status = OutcomeDone
	case m.Spam:
		o.Status, o.Detail = OutcomeSkipped, "the provider judged the message to be spam"
	case r.Action.Type == ActionReaction && m.Verdicts != nil && m.Verdicts.DMARC == "FAIL":
		o.Status, o.Detail = OutcomeSkipped, "the sender's address failed DMARC: it may be forged, so no reaction runs for it"
	case r.Action.Type == ActionReaction && m.From == nil:
		o.Status, o.Detail = OutcomeSkipped, "the message has no sender address"
	case s.actions == nil:
		o.Status, o.Detail = OutcomeSkipped, "this deployment does not run inbound actions"
	case r.Action.Type == ActionForward && s.receivesFor(ctx, domainOf(r.Action.To)):
		// It would come back here, and perhaps be forwarded back again.
		o.Status, o.Detail = OutcomeSkipped, "the address is at a domain that receives its mail through this platform: forwarding there could loop"
	default:
		var err error
		if r.Action.Type == ActionForward {
			err = s.actions.Forward(ctx, bot, r.Action.To, m)
		} else {
			o.SubscriberID, err = s.actions.RunReaction(ctx, bot, r.Action.ReactionID, mail.Address{Name: m.From.Name, Address: m.From.Address}, m)
		}
		o.Status = OutcomeDone
		var skip *SkipError
		switch {
		case errors.As(err, &skip):
			s.log.InfoContext(ctx, "inbound route action skipped", "request_id", httpapi.RequestID(ctx), "bot_id", bot,
				"route_id", r.ID, "message_id", m.ID, "action", string(r.Action.Type), "reason", skip.Reason)
			o.Status, o.SubscriberID = OutcomeSkipped, ""
			o.Detail, _ = mimemail.Truncate(skip.Reason, 500)
		case err != nil:
			o.SubscriberID = ""
			s.log.ErrorContext(ctx, "inbound route action failed", "request_id", httpapi.RequestID(ctx), "bot_id", bot,
				"route_id", r.ID, "message_id", m.ID, "action", string(r.Action.Type), "error", err)
			o.Status, o.Detail = OutcomeFailed, "the "+string(r.Action.Type)+" action failed"
			var he *httpapi.Error
			if errors.As(err, &he) {
				o.Detail, _ = mimemail.Truncate(o.Detail+": "+he.Detail, 500)
			}
		}
	}
	at := stamp(s.now())
	o.At = &at
	m.Action = &o
	b, err := store.Encode(m)
	if err == nil {
		err = s.store.Put(ctx, store.Item{Key: messageKey(bot, m.ID), Revision: 2, Data: b, ExpiresAt: store.SecondsPrecision(m.ExpiresAt)}, store.RevisionIs(1))
	}
	if err != nil {
		s.log.ErrorContext(ctx, "inbound action outcome not recorded", "request_id", httpapi.RequestID(ctx), "bot_id", bot,
			"message_id", m.ID, "status", o.Status, "error", err)
	}
}

// receivesFor reports whether a bot of the deployment claimed domain (a failed read counts
// as yes: the safe answer for a loop check).
func (s *Service) receivesFor(ctx context.Context, domain string) bool {
	_, _, ok, err := s.readClaim(ctx, strings.ToLower(domain))
	return ok || err != nil
}

// GetMessage returns a stored inbound message with its bodies.
func (s *Service) GetMessage(ctx context.Context, bot, id string) (InboundMessage, error) {
	if !ids.Valid("eim", id) {
		return InboundMessage{}, httpapi.NotFound("inbound message")
	}
	it, err := s.store.Get(ctx, messageKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return InboundMessage{}, httpapi.NotFound("inbound message")
	}
	if err != nil {
		return InboundMessage{}, err
	}
	return store.Decode[InboundMessage](it)
}

// ListMessages returns a page of the bot's stored inbound messages, newest first, without
// their bodies.
func (s *Service) ListMessages(ctx context.Context, bot string, limit int, cursor string) ([]MessageSummary, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: inboundPK(bot), Prefix: messagePrefix, Reverse: true, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]MessageSummary, 0, len(page.Items))
	for _, it := range page.Items {
		m, err := store.Decode[InboundMessage](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, m.MessageSummary)
	}
	return out, page.Next, nil
}
