package webpush

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// TestSendRequest is the body of POST .../web-push/test.
type TestSendRequest struct {
	SubscriptionID string `json:"subscription_id"`
	DocumentID     string `json:"document_id"`
	// IgnoreQuietHours sends during quiet hours; without it a send then is refused.
	IgnoreQuietHours bool `json:"ignore_quiet_hours"`
}

// Validate checks what decoding cannot.
func (r *TestSendRequest) Validate() error {
	var p httpapi.Problems
	p.Require("subscription_id", r.SubscriptionID)
	p.Require("document_id", r.DocumentID)
	return p.Err()
}

// TestSend is the answer of a test send the push service accepted.
type TestSend struct {
	// MessageID identifies the message in the payload: the device's receipts name it.
	MessageID       string    `json:"message_id"`
	SubscriptionID  string    `json:"subscription_id"`
	DocumentID      string    `json:"document_id"`
	DocumentVersion int       `json:"document_version"`
	PushStatus      int       `json:"push_status"`
	SentAt          time.Time `json:"sent_at"`
}

// Payload is the JSON a notification carries to the service worker (sw.js), encrypted:
// what it shows, where a click goes, and the message and subscription its receipts name.
type Payload struct {
	V              int      `json:"v"`
	MessageID      string   `json:"message_id"`
	SubscriptionID string   `json:"subscription_id"`
	Title          string   `json:"title"`
	Body           string   `json:"body"`
	Icon           string   `json:"icon,omitempty"`
	URL            string   `json:"url,omitempty"`
	Actions        []Action `json:"actions,omitempty"`
}

// Build returns the payload of m as message messageID to subscription subscriptionID.
func (m Message) Build(messageID, subscriptionID string) ([]byte, error) {
	return json.Marshal(Payload{V: 1, MessageID: messageID, SubscriptionID: subscriptionID, Title: m.Title, Body: m.Body,
		Icon: m.Icon, URL: m.URL, Actions: m.Actions})
}

// TestSend sends the published version of a push document to one subscription. Quiet hours
// refuse it (409 quiet_hours) unless the request ignores them; a push service that no
// longer knows the subscription (404, 410) expires it (409 subscription_expired).
func (s *Service) TestSend(ctx context.Context, bot string, req TestSendRequest) (TestSend, error) {
	r, err := s.load(ctx, bot)
	if err != nil {
		return TestSend{}, err
	}
	if !r.Enabled {
		return TestSend{}, httpapi.E(httpapi.KindConflict, "web_push_disabled", "browser push is disabled for this bot: PATCH it with enabled: true first")
	}
	now := s.now()
	if until, quiet := quietUntil(r.QuietHours, now); quiet && !req.IgnoreQuietHours {
		return TestSend{}, httpapi.Errorf(httpapi.KindConflict, "quiet_hours",
			"it is quiet hours until %s; send ignore_quiet_hours: true to send anyway", until.Format(time.RFC3339)).
			With("quiet_until", until.Format(time.RFC3339))
	}
	msg, err := s.content.Push(ctx, bot, req.DocumentID)
	if err != nil {
		return TestSend{}, err
	}
	if err := checkNavigation(msg, r.NavigationOrigins); err != nil {
		return TestSend{}, err
	}
	target, err := s.subs.Target(ctx, bot, req.SubscriptionID)
	if err != nil {
		return TestSend{}, err
	}
	if s.limiter != nil {
		if err := s.limiter.Allow(ctx, TestSendLimit, bot); err != nil {
			return TestSend{}, err
		}
	}
	priv, err := s.privateKey(ctx, bot, r)
	if err != nil {
		return TestSend{}, err
	}
	out := TestSend{MessageID: ids.At("wpm", now), SubscriptionID: req.SubscriptionID, DocumentID: msg.DocumentID,
		DocumentVersion: msg.Version, SentAt: stamp(now)}
	payload, err := msg.Build(out.MessageID, req.SubscriptionID)
	if err != nil {
		return TestSend{}, err
	}
	o, err := s.push.Send(ctx, target, VAPID{PublicKey: r.VAPIDPublicKey, PrivateKey: priv, Subject: r.Subject}, payload)
	if errors.Is(err, ErrEndpointRefused) {
		return TestSend{}, httpapi.E(httpapi.KindUnprocessable, "endpoint_refused", err.Error())
	}
	if err != nil {
		s.count(ctx, bot, countFailed)
		return TestSend{}, httpapi.E(httpapi.KindUnavailable, "push_service_unreachable", "the subscription's push service could not be reached; retry later").Wrap(err)
	}
	out.PushStatus = o.Status
	switch {
	case o.Status >= 200 && o.Status < 300:
		s.count(ctx, bot, countSent)
		return out, nil
	case o.Gone:
		s.count(ctx, bot, countExpired)
		if err := s.subs.Expire(ctx, bot, req.SubscriptionID, "push_service_gone"); err != nil {
			return TestSend{}, fmt.Errorf("expire the subscription the push service no longer has: %w", err)
		}
		return TestSend{}, httpapi.Errorf(httpapi.KindConflict, "subscription_expired",
			"the push service answered %d: the subscription no longer exists and is now expired", o.Status).With("push_status", o.Status)
	case o.Status == http.StatusTooManyRequests || o.Status >= 500:
		s.count(ctx, bot, countFailed)
		e := httpapi.Errorf(httpapi.KindUnavailable, "push_service_unavailable", "the push service answered %d; retry later", o.Status).With("push_status", o.Status)
		if o.RetryAfter > 0 {
			e = e.With("retry_after_seconds", int64(math.Ceil(o.RetryAfter.Seconds())))
		}
		return TestSend{}, e
	default:
		// 400 (a payload or header it refused), 401/403 (the VAPID signature), 413.
		s.count(ctx, bot, countFailed)
		return TestSend{}, httpapi.Errorf(httpapi.KindUnprocessable, "push_rejected",
			"the push service refused the message with status %d", o.Status).With("push_status", o.Status)
	}
}

// count adds one to a send counter; a failure is logged, never the send's.
func (s *Service) count(ctx context.Context, bot, what string) {
	if _, err := s.store.Add(context.WithoutCancel(ctx), countKey(bot, what), 1, time.Time{}); err != nil {
		s.log.Warn("web push counter", "bot", bot, "counter", what, "error", err)
	}
}

// checkNavigation refuses a message that would open a page outside the allowed origins.
func checkNavigation(m Message, origins []string) error {
	var p httpapi.Problems
	check := func(field, raw string) {
		if raw == "" {
			return
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			p.Add(field, "is not an absolute URL")
			return
		}
		origin := strings.ToLower(u.Scheme + "://" + u.Host)
		if !slices.Contains(origins, origin) {
			p.Add(field, "opens %s, which is not one of the navigation origins (PATCH navigation_origins)", origin)
		}
	}
	check("url", m.URL)
	for i, a := range m.Actions {
		check(fmt.Sprintf("actions[%d].url", i), a.URL)
	}
	if len(p) == 0 {
		return nil
	}
	return httpapi.E(httpapi.KindUnprocessable, "navigation_origin_not_allowed", p[0].Field+": "+p[0].Message).
		With("errors", []httpapi.FieldError(p))
}

// Report is GET .../web-push/report.
type Report struct {
	Subscriptions struct {
		Active  int64 `json:"active"`
		Expired int64 `json:"expired"`
	} `json:"subscriptions"`
	Receipts struct {
		Delivered int64 `json:"delivered"`
		Clicked   int64 `json:"clicked"`
		Closed    int64 `json:"closed"`
	} `json:"receipts"`
	// Sends counts test sends by what the push service answered: accepted (sent), the
	// subscription gone (expired), or anything else and unreachable (failed).
	Sends struct {
		Sent    int64 `json:"sent"`
		Expired int64 `json:"expired"`
		Failed  int64 `json:"failed"`
	} `json:"sends"`
}

// Report returns the bot's subscription, receipt and send counters.
func (s *Service) Report(ctx context.Context, bot string) (Report, error) {
	c, err := s.subs.Counts(ctx, bot)
	if err != nil {
		return Report{}, err
	}
	var rep Report
	rep.Subscriptions.Active, rep.Subscriptions.Expired = c.Active, c.Expired
	rep.Receipts.Delivered, rep.Receipts.Clicked, rep.Receipts.Closed = c.Receipts.Delivered, c.Receipts.Clicked, c.Receipts.Closed
	for _, x := range []struct {
		what string
		to   *int64
	}{{countSent, &rep.Sends.Sent}, {countExpired, &rep.Sends.Expired}, {countFailed, &rep.Sends.Failed}} {
		it, err := s.store.Get(ctx, countKey(bot, x.what))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return Report{}, err
		}
		*x.to = it.Count
	}
	return rep, nil
}

// Subscriptions returns a page of the bot's subscriptions, newest first.
func (s *Service) Subscriptions(ctx context.Context, bot string, limit int, cursor string) ([]Subscription, string, error) {
	return s.subs.List(ctx, bot, limit, cursor)
}
