// Package webhooks serves the providers' inbound webhooks: public routes outside the token
// API, each authenticated by its provider's own mechanism (Telegram's secret token header,
// WhatsApp's X-Hub-Signature-256 and verification challenge, VK's secret key and
// confirmation). A delivery is verified, parsed into updates, and each update is enqueued for
// the conversation runtime; the answer goes back at once. Providers redeliver what they
// think failed, so an update already enqueued is recognized by a marker and not enqueued
// again (the runtime de-duplicates once more). docs/webhooks.md records the decisions.
package webhooks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/vk"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/jsonguard"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Channel is a connected channel as a webhook needs it: who it belongs to and the
// connection (webhook secret and credentials opened) to verify deliveries with.
type Channel struct {
	ID        string
	BotID     string
	AccountID string
	Kind      channel.Kind
	Conn      channel.Connection
}

// ErrUnknownChannel is what Channels answers for a channel that does not exist.
var ErrUnknownChannel = errors.New("webhooks: unknown channel")

// Channels is what the webhooks need of the channels family.
type Channels interface {
	// Resolve returns the channel id; ErrUnknownChannel when there is none.
	Resolve(ctx context.Context, id string) (Channel, error)
	// ResolveKey returns the channel of type k registered under a provider's lookup key
	// (WhatsApp: the phone number id); ErrUnknownChannel when there is none.
	ResolveKey(ctx context.Context, k channel.Kind, key string) (Channel, error)
	// Adapter returns the deployment's adapter of type k.
	Adapter(k channel.Kind) (channel.Adapter, bool)
}

// Templates receives WhatsApp template review outcomes, which arrive on the same webhook as
// messages (message_template_status_update): the channels family's template catalog.
type Templates interface {
	TemplateStatus(ctx context.Context, s whatsapp.TemplateStatus) error
}

// Deliveries receives the delivery statuses of messages a bot's WhatsApp number sent
// (delivered, read and failed; "sent" says nothing the send's answer did not and is not
// passed on): the broadcasts family counts them in its reports. It must be idempotent:
// Meta redelivers a batch whose answer was not a success, and sends a status twice at will.
type Deliveries interface {
	MessageStatuses(ctx context.Context, bot string, statuses []whatsapp.MessageStatus) error
}

// Config is the family's dependencies.
type Config struct {
	Store    store.Store
	Queue    queue.Sender
	Channels Channels
	// Templates takes WhatsApp template status updates; nil logs and drops them.
	Templates Templates
	// Deliveries takes the delivery statuses of sent WhatsApp messages; nil drops them
	// (they arrive for every message sent: no log line each).
	Deliveries Deliveries
	// WhatsAppVerifyToken answers Meta's subscription check (GET /webhooks/whatsapp).
	WhatsAppVerifyToken string
	Now                 func() time.Time
	Log                 *slog.Logger
}

// Service answers the webhooks.
type Service struct {
	cfg Config
}

// New returns the Service. Store, Now and Log are required; without Queue or Channels (a
// process that cannot hold credentials) every delivery is answered 503, so providers retry.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Now == nil || cfg.Log == nil {
		return nil, errors.New("webhooks: Store, Now and Log are required")
	}
	return &Service{cfg: cfg}, nil
}

// MarkerRetention is how long an enqueued update is remembered: longer than any provider
// keeps redelivering (Telegram gives up within a day, WhatsApp within 7 days).
const MarkerRetention = 7 * 24 * time.Hour

// MaxBodyBytes bounds a delivery. Providers send small JSON documents (a WhatsApp batch of
// many messages stays far below).
const MaxBodyBytes = httpapi.MaxBodyBytes

// markersPK is the bot's partition of markers: one per update enqueued, under its channel.
func markersPK(bot string) string { return "BOT#" + bot + "#WEBHOOK" }

// markerKey remembers that the update was enqueued.
func markerKey(bot, ch, update string) store.Key {
	return store.Key{PK: markersPK(bot), SK: ch + "/" + update}
}

// PurgeStep erases a deleted bot's markers (job purge.Job); they also expire on their own
// after MarkerRetention.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: markersPK(p.BotID)}}, nil
	})
}

// Routes registers the webhooks. They are public: no token, each provider's own check.
func Routes(mux *httpapi.Mux, s *Service) {
	mux.Handle("POST /webhooks/telegram/{channelID}", httpapi.Public(), s.channelDelivery(channel.Telegram))
	mux.Handle("POST /webhooks/vk/{channelID}", httpapi.Public(), s.channelDelivery(channel.VK))
	mux.Handle("GET /webhooks/whatsapp", httpapi.Public(), s.whatsappChallenge)
	mux.Handle("POST /webhooks/whatsapp", httpapi.Public(), s.whatsappDelivery)
}

func notFound() error { return httpapi.NotFound("channel") }

func unavailable() *httpapi.Error {
	return httpapi.E(httpapi.KindUnavailable, "temporarily_unavailable", "deliveries cannot be accepted right now; retry later")
}

// unauthentic answers a delivery that failed its provider's check: 401, logged without
// the body (which may hold personal data) and without the presented secret.
func (s *Service) unauthentic(r *http.Request, k channel.Kind, ch string, err error) error {
	level := slog.LevelWarn
	if errors.Is(err, whatsapp.ErrNotConfigured) {
		level = slog.LevelError // every delivery fails until an operator sets the secret
	}
	s.cfg.Log.Log(r.Context(), level, "webhook delivery failed verification", "request_id", httpapi.RequestID(r.Context()),
		"provider", string(k), "channel_id", ch, "reason", err.Error())
	return httpapi.E(httpapi.KindUnauthenticated, "unauthentic_webhook", "the delivery failed the provider's authentication")
}

// readBody reads the whole body, at most MaxBodyBytes, nesting at most jsonguard.MaxDepth.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, httpapi.Errorf(httpapi.KindTooLarge, "body_too_large", "the body exceeds %d bytes", MaxBodyBytes)
	}
	if err != nil {
		return nil, httpapi.E(httpapi.KindInvalid, "invalid_body", "the body could not be read").Wrap(err)
	}
	// Before any parser sees it (VK's confirmation check reads it before the signature is
	// checked). Only the depth: the text is what users typed, passed on as the provider sent it.
	if err := jsonguard.CheckDepth(body); err != nil {
		return nil, httpapi.Errorf(httpapi.KindInvalid, "invalid_body", "the body nests deeper than %d levels", jsonguard.MaxDepth)
	}
	return body, nil
}

// channelDelivery serves the providers whose webhook URL names the channel (Telegram, VK).
func (s *Service) channelDelivery(k channel.Kind) httpapi.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if s.cfg.Queue == nil || s.cfg.Channels == nil {
			return unavailable()
		}
		id := r.PathValue("channelID")
		if !ids.Valid("ch", id) {
			return notFound()
		}
		ch, err := s.cfg.Channels.Resolve(r.Context(), id)
		if errors.Is(err, ErrUnknownChannel) || err == nil && ch.Kind != k {
			return notFound()
		}
		if err != nil {
			return err
		}
		a, ok := s.cfg.Channels.Adapter(k)
		if !ok {
			return unavailable()
		}
		body, err := readBody(w, r)
		if err != nil {
			return err
		}
		if k == channel.VK {
			code, confirmation, err := vk.ConfirmationResponse(body, ch.Conn)
			if confirmation {
				if err != nil {
					return s.unauthentic(r, k, id, err)
				}
				return writeText(w, code)
			}
		}
		if err := a.Verify(r, body, ch.Conn); err != nil {
			return s.unauthentic(r, k, id, err)
		}
		updates, err := a.Parse(body)
		if err != nil {
			s.cfg.Log.WarnContext(r.Context(), "webhook delivery could not be parsed", "request_id", httpapi.RequestID(r.Context()),
				"provider", string(k), "channel_id", id, "error", err)
			return httpapi.E(httpapi.KindInvalid, "invalid_body", "the delivery is not an update this webhook understands")
		}
		if err := s.enqueue(r.Context(), ch, updates); err != nil {
			return err
		}
		if k == channel.VK {
			return writeText(w, vk.Acknowledgement)
		}
		return httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
	}
}

// whatsappChallenge answers Meta's subscription check: the challenge when the verify
// token is the configured one, else 403.
func (s *Service) whatsappChallenge(w http.ResponseWriter, r *http.Request) error {
	challenge, ok := whatsapp.VerifyChallenge(r.URL.Query(), s.cfg.WhatsAppVerifyToken)
	if !ok {
		s.cfg.Log.WarnContext(r.Context(), "WhatsApp webhook verification refused", "request_id", httpapi.RequestID(r.Context()),
			"verify_token_configured", s.cfg.WhatsAppVerifyToken != "")
		return httpapi.E(httpapi.KindForbidden, "verification_failed", "hub.mode must be subscribe and hub.verify_token the configured verify token")
	}
	return writeText(w, challenge)
}

// whatsappDelivery serves WhatsApp's one webhook for every number: the app secret's
// signature is checked first (it needs no channel), then each message goes to the channel
// of the phone number it was sent to, the statuses of the messages a number sent to
// Deliveries for that channel's bot, and template status changes to the template catalog.
// A delivery whose numbers are all unknown (and that carries no template status) is 404.
func (s *Service) whatsappDelivery(w http.ResponseWriter, r *http.Request) error {
	if s.cfg.Queue == nil || s.cfg.Channels == nil {
		return unavailable()
	}
	a, ok := s.cfg.Channels.Adapter(channel.WhatsApp)
	if !ok {
		return unavailable()
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if err := a.Verify(r, body, channel.Connection{}); err != nil {
		return s.unauthentic(r, channel.WhatsApp, "", err)
	}
	env, err := whatsapp.ParseEnvelope(body)
	if err != nil {
		s.cfg.Log.WarnContext(r.Context(), "webhook delivery could not be parsed", "request_id", httpapi.RequestID(r.Context()),
			"provider", "whatsapp", "error", err)
		return httpapi.E(httpapi.KindInvalid, "invalid_body", "the delivery is not a WhatsApp Business Account notification")
	}
	for _, st := range env.TemplateStatuses {
		if s.cfg.Templates == nil {
			s.cfg.Log.WarnContext(r.Context(), "WhatsApp template status update dropped: no template catalog in this process",
				"template_id", st.ID, "status", st.Status)
			continue
		}
		if err := s.cfg.Templates.TemplateStatus(r.Context(), st); err != nil {
			return fmt.Errorf("webhooks: template status %s: %w", st.ID, err) // Meta redelivers
		}
	}
	// A number a delivery names is resolved once, whether it carries messages, statuses
	// or both; in the order the delivery names them.
	type batch struct {
		inbound  []channel.Inbound
		statuses []whatsapp.MessageStatus
	}
	byNumber := map[string]*batch{}
	var order []string
	of := func(number string) *batch {
		b, ok := byNumber[number]
		if !ok {
			b = &batch{}
			byNumber[number] = b
			order = append(order, number)
		}
		return b
	}
	for _, u := range env.Updates {
		b := of(u.PhoneNumberID)
		b.inbound = append(b.inbound, u.Inbound)
	}
	now := s.cfg.Now().UTC()
	for _, st := range env.MessageStatuses {
		b := of(st.PhoneNumberID)
		if !deliveryStatus(st.Status) {
			continue
		}
		if st.At.IsZero() {
			st.At = now // Meta always stamps; a status without one happened by now
		}
		b.statuses = append(b.statuses, st)
	}
	unknown := 0
	for _, number := range order {
		b := byNumber[number]
		ch, err := s.cfg.Channels.ResolveKey(r.Context(), channel.WhatsApp, number)
		if errors.Is(err, ErrUnknownChannel) {
			unknown++
			s.cfg.Log.WarnContext(r.Context(), "WhatsApp messages and statuses for a number no channel has were dropped",
				"request_id", httpapi.RequestID(r.Context()), "phone_number_id", number, "messages", len(b.inbound), "statuses", len(b.statuses))
			continue
		}
		if err != nil {
			return err
		}
		if err := s.enqueue(r.Context(), ch, b.inbound); err != nil {
			return err
		}
		if len(b.statuses) > 0 && s.cfg.Deliveries != nil {
			if err := s.cfg.Deliveries.MessageStatuses(r.Context(), ch.BotID, b.statuses); err != nil {
				return fmt.Errorf("webhooks: %d message status(es) of channel %s: %w", len(b.statuses), ch.ID, err) // Meta redelivers
			}
		}
	}
	if unknown > 0 && unknown == len(order) && len(env.TemplateStatuses) == 0 {
		return notFound()
	}
	return httpapi.WriteJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// deliveryStatus reports whether a message status is one Deliveries takes: delivered, read
// and failed. "sent" only repeats the send's answer; others (deleted, warning) say nothing
// of a delivery.
func deliveryStatus(s string) bool {
	switch s {
	case whatsapp.StatusDelivered, whatsapp.StatusRead, whatsapp.StatusFailed:
		return true
	}
	return false
}

func writeText(w http.ResponseWriter, s string) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(s)))
	w.WriteHeader(http.StatusOK)
	_, err := io.WriteString(w, s)
	return err
}

// enqueue sends one message per update not seen before, then remembers them. A crash
// between the two enqueues an update again on its redelivery, which the runtime's own claim
// absorbs; a marker written before the send could instead lose an update whose send failed.
func (s *Service) enqueue(ctx context.Context, ch Channel, updates []channel.Inbound) error {
	now := s.cfg.Now()
	var msgs []queue.Message
	var markers []store.Key
	seen := map[string]bool{}
	for _, in := range updates {
		if in.UpdateID != "" {
			if seen[in.UpdateID] {
				continue
			}
			seen[in.UpdateID] = true
			key := markerKey(ch.BotID, ch.ID, in.UpdateID)
			_, err := s.cfg.Store.Get(ctx, key)
			if err == nil {
				continue // enqueued before: a provider's redelivery
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
			markers = append(markers, key)
		}
		m, err := queue.New(channel.InboundMessage, channel.Delivery{ChannelID: ch.ID, BotID: ch.BotID, AccountID: ch.AccountID,
			Kind: ch.Kind, Inbound: in, ReceivedAt: now.UTC()})
		if err != nil {
			return err
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil
	}
	if err := s.cfg.Queue.Send(ctx, msgs...); err != nil {
		// 503: the provider redelivers later, and nothing was remembered as enqueued.
		return unavailable().Wrap(fmt.Errorf("webhooks: enqueue %d update(s): %w", len(msgs), err))
	}
	for _, key := range markers {
		it := store.Item{Key: key, Revision: 1, ExpiresAt: now.Add(MarkerRetention)}
		if err := s.cfg.Store.Put(ctx, it, store.Always); err != nil {
			// Enqueued already: the answer must be a success, or the provider redelivers
			// and the runtime absorbs the duplicate anyway.
			s.cfg.Log.WarnContext(ctx, "webhook marker not written; a redelivery will be enqueued again", "channel_id", ch.ID, "error", err)
		}
	}
	return nil
}
