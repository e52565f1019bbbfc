package emailevents

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jsonguard"
	"github.com/botplatform/api/shared/sns"
	"github.com/botplatform/api/shared/store"
)

// MailgunMaxAge is how far a Mailgun signature's timestamp may be from our clock, either
// way: an older one is a replay (Mailgun signs every attempt afresh).
const MailgunMaxAge = 5 * time.Minute

// maxMailgunToken bounds a Mailgun signature token (Mailgun's are 50 hex digits) before
// it becomes part of a key.
const maxMailgunToken = 128

// readBody reads a delivery whole, at most httpapi.MaxBodyBytes (an SNS message is at most
// 256 KB, escaped once more in its envelope), nesting at most jsonguard.MaxDepth.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, httpapi.MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, httpapi.Errorf(httpapi.KindTooLarge, "body_too_large", "the body exceeds %d bytes", httpapi.MaxBodyBytes)
	}
	if err != nil {
		return nil, httpapi.E(httpapi.KindInvalid, "invalid_body", "the body could not be read").Wrap(err)
	}
	if err := jsonguard.CheckDepth(body); err != nil {
		return nil, httpapi.Errorf(httpapi.KindInvalid, "invalid_body", "the body is not JSON nesting at most %d levels", jsonguard.MaxDepth)
	}
	return body, nil
}

// unauthentic answers a delivery that failed its provider's check: 401, logged with the
// reason, never the body (it holds addresses) nor the presented signature.
func (s *Service) unauthentic(ctx context.Context, provider string, level slog.Level, reason error) error {
	s.log.Log(ctx, level, "email webhook delivery failed verification", "request_id", httpapi.RequestID(ctx),
		"provider", provider, "reason", reason.Error())
	return httpapi.E(httpapi.KindUnauthenticated, "unauthentic_webhook", "the delivery failed the provider's authentication")
}

func malformed(what string) error {
	return httpapi.Errorf(httpapi.KindInvalid, "invalid_body", "the delivery is not %s", what)
}

// webhook serves POST /esp/{provider}/webhook.
func (h *Handlers) webhook(w http.ResponseWriter, r *http.Request) error {
	provider := r.PathValue("provider")
	if provider != "ses" && provider != "mailgun" {
		return httpapi.NotFound("email provider")
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if provider == "ses" {
		err = h.svc.SNSDelivery(r.Context(), body)
	} else {
		err = h.svc.MailgunDelivery(r.Context(), body)
	}
	if err != nil {
		return err
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// SNSDelivery handles one SNS message carrying Amazon SES events (event publishing through
// a configuration set, or the older identity notifications): verified, then applied, or a
// subscription confirmed.
func (s *Service) SNSDelivery(ctx context.Context, body []byte) error {
	m, err := s.cfg.SNS.Verify(ctx, body)
	switch {
	case errors.Is(err, sns.ErrNotConfigured):
		// No topic is accepted: every delivery fails closed, and that is a configuration
		// problem, like a missing Mailgun key.
		return s.unauthentic(ctx, "ses", slog.LevelError, errors.New("no SNS topic is configured"))
	case errors.Is(err, sns.ErrMalformed):
		return malformed("an SNS message")
	case errors.Is(err, sns.ErrUnauthentic):
		return s.unauthentic(ctx, "ses", slog.LevelWarn, err)
	case err != nil:
		// The certificate could not be fetched: SNS retries.
		return httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "the delivery cannot be verified right now; retry later").Wrap(err)
	}
	switch m.Type {
	case sns.TypeSubscriptionConfirmation:
		return s.confirm(ctx, m)
	case sns.TypeUnsubscribeConfirmation:
		s.log.WarnContext(ctx, "the SNS subscription of the email events was removed", "topic", m.TopicARN)
		return nil
	}
	var ev sesEvent
	if err := json.Unmarshal([]byte(m.Message), &ev); err != nil {
		return malformed("an SNS message of SES events")
	}
	return s.sesEvent(ctx, ev)
}

// confirm confirms an SNS subscription by visiting its SubscribeURL, which is what AWS
// documents for an HTTP(S) endpoint ("Confirm the subscription"): only on an SNS host, and
// only for an accepted topic. Until confirmed, SNS delivers nothing.
func (s *Service) confirm(ctx context.Context, m sns.Message) error {
	err := s.cfg.SNS.Confirm(ctx, m)
	if errors.Is(err, sns.ErrUnauthentic) {
		return s.unauthentic(ctx, "ses", slog.LevelWarn, err)
	}
	if err != nil {
		// SNS sends the confirmation again.
		return httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "the subscription could not be confirmed; retry later").Wrap(err)
	}
	s.log.InfoContext(ctx, "SNS subscription of the email events confirmed", "topic", m.TopicARN)
	return nil
}

// sesRecipient is one address of a bounce or complaint.
type sesRecipient struct {
	EmailAddress string `json:"emailAddress"`
}

// sesEvent is the part of an SES event (or notification) this package reads.
type sesEvent struct {
	// EventType is set by event publishing, NotificationType by identity notifications.
	EventType        string `json:"eventType"`
	NotificationType string `json:"notificationType"`
	Mail             struct {
		MessageID string `json:"messageId"`
	} `json:"mail"`
	Bounce *struct {
		BounceType        string         `json:"bounceType"`
		BouncedRecipients []sesRecipient `json:"bouncedRecipients"`
		Timestamp         string         `json:"timestamp"`
	} `json:"bounce"`
	Complaint *struct {
		ComplainedRecipients  []sesRecipient `json:"complainedRecipients"`
		ComplaintFeedbackType string         `json:"complaintFeedbackType"`
		Timestamp             string         `json:"timestamp"`
	} `json:"complaint"`
	Delivery *struct {
		Timestamp string `json:"timestamp"`
	} `json:"delivery"`
}

func firstAddress(rs []sesRecipient) string {
	if len(rs) == 0 {
		return ""
	}
	return rs[0].EmailAddress
}

// sesEvent applies the delivery, bounce and complaint events; the others are not this
// package's (SES's own open and click tracking would count what the pixel and the tracked
// links already count; sends, rejects and delays change no recipient).
func (s *Service) sesEvent(ctx context.Context, e sesEvent) error {
	kind := e.EventType
	if kind == "" {
		kind = e.NotificationType
	}
	var ev Event
	reason := ""
	switch {
	case kind == "Delivery" && e.Delivery != nil:
		ev = Event{Type: EventDelivered, At: s.eventTime(e.Delivery.Timestamp)}
	case kind == "Bounce" && e.Bounce != nil:
		// Undetermined bounces (SES could not tell) are transient: suppressing on a guess
		// would lose a good address.
		ev = Event{Type: EventBounce, Permanent: e.Bounce.BounceType == "Permanent",
			At: s.eventTime(e.Bounce.Timestamp), Address: firstAddress(e.Bounce.BouncedRecipients)}
		if ev.Permanent {
			reason = ReasonBounced
		}
	case kind == "Complaint" && e.Complaint != nil:
		if e.Complaint.ComplaintFeedbackType == "not-spam" {
			return nil // the recipient said the message is not spam: no complaint
		}
		ev = Event{Type: EventComplaint, At: s.eventTime(e.Complaint.Timestamp), Address: firstAddress(e.Complaint.ComplainedRecipients)}
		reason = ReasonComplained
	case kind == "":
		return malformed("an SES event")
	default:
		return nil
	}
	return s.apply(ctx, "ses", e.Mail.MessageID, ev, reason)
}

// eventTime parses a provider's RFC 3339 time, or takes ours when it gives none.
func (s *Service) eventTime(v string) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return stamp(t)
	}
	return stamp(s.now())
}

// apply hands a provider's event to campaigns, after suppressing the recipient's address
// for reason when there is one. Both are idempotent, so a failure answers 500 and the
// provider's redelivery does both again. A message no campaign sent is acknowledged and
// dropped: the provider must not retry it forever.
func (s *Service) apply(ctx context.Context, provider, messageID string, ev Event, reason string) error {
	if s.campaigns == nil {
		return nil
	}
	if messageID == "" {
		s.log.WarnContext(ctx, "email event without a message id dropped", "provider", provider, "event", ev.Type)
		return nil
	}
	ref, err := s.campaigns.ByMessageID(ctx, messageID)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		s.log.InfoContext(ctx, "email event for a message no campaign sent dropped", "provider", provider, "event", ev.Type)
		return nil
	}
	if err != nil {
		return fmt.Errorf("find the message of a %s event: %w", provider, err)
	}
	if reason != "" {
		if err := s.suppressRecipient(ctx, ref, ev.Address, reason); err != nil {
			return err
		}
	}
	if err := s.campaigns.Record(ctx, ref, ev); err != nil {
		return fmt.Errorf("record a %s %s event: %w", provider, ev.Type, err)
	}
	return nil
}

// suppressRecipient suppresses the address the message was sent to: that is what the
// check before a send looks up (a bounce's address may be a forwarding target's). fallback,
// the provider's address, serves only when the recipient is gone.
func (s *Service) suppressRecipient(ctx context.Context, ref emaillinks.Ref, fallback, reason string) error {
	addr, err := s.campaigns.Recipient(ctx, ref)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		addr = fallback
	} else if err != nil {
		return fmt.Errorf("read the recipient's address: %w", err)
	}
	_, err = s.suppress(ctx, ref.Bot, addr, reason, ref.Campaign)
	if errors.Is(err, errNotAddress) {
		s.log.WarnContext(ctx, "no address to suppress", "bot_id", ref.Bot, "campaign_id", ref.Campaign, "recipient", ref.Recipient, "reason", reason)
		return nil
	}
	return err
}

// mailgunDelivery is a Mailgun webhook body: the signature and the event.
type mailgunDelivery struct {
	Signature struct {
		Timestamp string `json:"timestamp"`
		Token     string `json:"token"`
		Signature string `json:"signature"`
	} `json:"signature"`
	EventData *mailgunEvent `json:"event-data"`
}

// mailgunEvent is the part of Mailgun's event-data this package reads.
type mailgunEvent struct {
	Event     string  `json:"event"`
	Timestamp float64 `json:"timestamp"`
	Recipient string  `json:"recipient"`
	// Severity is "permanent" or "temporary" on a failed event.
	Severity string `json:"severity"`
	Message  struct {
		Headers struct {
			MessageID string `json:"message-id"`
		} `json:"headers"`
	} `json:"message"`
}

// MailgunDelivery handles one Mailgun webhook delivery, verified as Mailgun documents it
// ("Securing webhooks"): signature is the hex HMAC-SHA256 of timestamp and token under the
// webhook signing key; a timestamp more than MailgunMaxAge away and a token used before
// are refused, so a captured delivery cannot be replayed.
func (s *Service) MailgunDelivery(ctx context.Context, body []byte) error {
	var d mailgunDelivery
	if err := json.Unmarshal(body, &d); err != nil {
		return malformed("a Mailgun webhook")
	}
	sig := d.Signature
	if s.cfg.MailgunSigningKey == "" {
		// Every delivery fails until an operator sets the key.
		return s.unauthentic(ctx, "mailgun", slog.LevelError, errors.New("no Mailgun webhook signing key is configured"))
	}
	signedAt, err := s.checkMailgunSignature(sig.Timestamp, sig.Token, sig.Signature)
	if err != nil {
		return s.unauthentic(ctx, "mailgun", slog.LevelWarn, err)
	}
	err = s.store.Put(ctx, store.Item{Key: tokenKey(sig.Token), Revision: 1, ExpiresAt: tokenExpiry(signedAt)}, store.MustNotExist)
	if errors.Is(err, store.ErrConditionFailed) {
		return s.unauthentic(ctx, "mailgun", slog.LevelWarn, errors.New("the signature token was used before"))
	}
	if err != nil {
		return fmt.Errorf("remember the Mailgun token: %w", err)
	}
	if d.EventData == nil {
		return malformed("a Mailgun webhook with event-data")
	}
	if err := s.mailgunEvent(ctx, *d.EventData); err != nil {
		// Mailgun tries again with a new signature; let even this token through then.
		if derr := s.store.Delete(ctx, tokenKey(sig.Token), store.Always); derr != nil {
			s.log.ErrorContext(ctx, "Mailgun token marker not released", "error", derr)
		}
		return err
	}
	return nil
}

// checkMailgunSignature returns the signature's time when it holds.
func (s *Service) checkMailgunSignature(timestamp, token, signature string) (time.Time, error) {
	if timestamp == "" || token == "" || signature == "" {
		return time.Time{}, errors.New("the signature is incomplete")
	}
	sec, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return time.Time{}, errors.New("the timestamp is not a Unix time")
	}
	if len(token) > maxMailgunToken || strings.IndexFunc(token, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) >= 0 {
		return time.Time{}, errors.New("the token is not plain")
	}
	got, err := hex.DecodeString(signature)
	if err != nil {
		return time.Time{}, errors.New("the signature is not hex")
	}
	mac := hmac.New(sha256.New, []byte(s.cfg.MailgunSigningKey))
	mac.Write([]byte(timestamp + token))
	if !hmac.Equal(got, mac.Sum(nil)) {
		return time.Time{}, errors.New("the signature does not match")
	}
	signedAt := time.Unix(sec, 0)
	if age := s.now().Sub(signedAt); age > MailgunMaxAge || age < -MailgunMaxAge {
		return time.Time{}, fmt.Errorf("the timestamp is %s away from now", age.Round(time.Second))
	}
	return signedAt, nil
}

// mailgunEvent applies deliveries, failures, complaints and Mailgun's own unsubscribes;
// opens and clicks are not this package's (the pixel and the tracked links count them).
func (s *Service) mailgunEvent(ctx context.Context, e mailgunEvent) error {
	at := stamp(s.now())
	if e.Timestamp > 0 && e.Timestamp < math.MaxInt32*4 {
		sec, frac := math.Modf(e.Timestamp)
		at = stamp(time.Unix(int64(sec), int64(frac*1e9)))
	}
	var ev Event
	reason := ""
	switch e.Event {
	case "delivered":
		ev = Event{Type: EventDelivered, At: at}
	case "failed":
		ev = Event{Type: EventBounce, Permanent: e.Severity == "permanent", At: at, Address: e.Recipient}
		if ev.Permanent {
			reason = ReasonBounced
		}
	case "complained":
		ev = Event{Type: EventComplaint, At: at, Address: e.Recipient}
		reason = ReasonComplained
	case "unsubscribed":
		ev = Event{Type: EventUnsubscribe, At: at, Address: e.Recipient}
		reason = ReasonUnsubscribed
	case "":
		return malformed("a Mailgun event")
	default:
		return nil
	}
	id := e.Message.Headers.MessageID
	if id != "" && !strings.HasPrefix(id, "<") {
		id = "<" + id + ">"
	}
	return s.apply(ctx, "mailgun", id, ev, reason)
}
