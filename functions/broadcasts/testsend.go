package broadcasts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// TestSendLimit is how many test sends a bot may make: 10 a minute. Each reaches a real
// person, and a loop calling the route must not turn into spam.
var TestSendLimit = ratelimit.Limit{Name: "broadcast test sends", Max: 10, Window: time.Minute}

// TesterLabel is the label that makes a subscriber a verified test contact (the content
// family's test recipients carry the same label).
const TesterLabel = "tester"

// TestSendResult is test-send's answer.
type TestSendResult struct {
	BroadcastID  string    `json:"broadcast_id"`
	SubscriberID string    `json:"subscriber_id"`
	Channel      string    `json:"channel"`
	DocumentID   string    `json:"document_id"`
	Version      int       `json:"version"`
	MessageID    string    `json:"message_id"`
	SentAt       time.Time `json:"sent_at"`
}

// TestSend sends the broadcast's content for the contact's channel to one verified contact:
// a subscriber of the bot carrying the tester label, on a channel of the broadcast. Nothing
// is counted in the report. 422 not_a_test_recipient, 422 broadcast_content_invalid and 409
// broadcast_not_ready as schedule's, 429 rate_limited beyond TestSendLimit.
func (s *Service) TestSend(ctx context.Context, bot, id, subscriberID string) (TestSendResult, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return TestSendResult{}, err
	}
	p, err := s.d.Audience.Person(ctx, bot, subscriberID)
	tester := ""
	if err == nil {
		tester, err = s.d.Audience.TesterLabel(ctx, bot)
	}
	var bad httpapi.Problems
	switch {
	case httpapi.KindOf(err) == httpapi.KindNotFound:
		bad.Add("subscriber_id", "no subscriber %q in this bot", subscriberID)
	case err != nil:
		return TestSendResult{}, err
	case tester == "" || !slices.Contains(p.Labels, tester):
		bad.Add("subscriber_id", "subscriber %s is not a verified test contact: give it the %q label", subscriberID, TesterLabel)
	case !slices.Contains(rec.Channels, p.Channel):
		bad.Add("subscriber_id", "subscriber %s is on %q, not on a channel of the broadcast", subscriberID, p.Channel)
	}
	if err := bad.Unprocessable("not_a_test_recipient"); err != nil {
		return TestSendResult{}, err
	}
	k := p.Channel
	doc := rec.Content.document(k)
	if doc == "" {
		var c httpapi.Problems
		c.Add("content.channels."+string(k), "no content document for %s", k)
		return TestSendResult{}, c.Unprocessable("broadcast_content_invalid")
	}
	version, ok := rec.ContentVersions[string(k)]
	if !ok {
		if version, err = s.d.Content.Check(ctx, bot, doc, k); err != nil {
			return TestSendResult{}, err
		}
	}
	adapter, conn, err := s.d.Channels.Open(ctx, bot, k)
	if errors.Is(err, ErrNoChannel) {
		return TestSendResult{}, httpapi.Errorf(httpapi.KindConflict, "broadcast_not_ready", "the bot has no %s channel connected", k).
			With("reasons", []Problem{{Code: "channel_not_connected", Channel: string(k), Message: fmt.Sprintf("the bot has no %s channel connected", k)}})
	}
	if err != nil {
		return TestSendResult{}, err
	}
	if err := s.d.Limiter.Allow(ctx, TestSendLimit, bot); err != nil {
		return TestSendResult{}, err
	}
	m, err := s.d.Content.Render(ctx, bot, doc, version, p)
	if err != nil {
		return TestSendResult{}, err
	}
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	msgID, err := adapter.Send(sendCtx, conn, p.ExternalID, m)
	cancel()
	switch {
	case err == nil:
	case channel.Retryable(err):
		return TestSendResult{}, httpapi.Errorf(httpapi.KindUnavailable, "channel_unavailable", "the %s channel did not take the message; retry shortly", k).Wrap(err)
	default:
		return TestSendResult{}, httpapi.Errorf(httpapi.KindUnprocessable, "test_send_refused", "the %s channel refused the message", k).Wrap(err)
	}
	return TestSendResult{BroadcastID: id, SubscriberID: subscriberID, Channel: string(k), DocumentID: doc, Version: version,
		MessageID: msgID, SentAt: stamp(s.d.Now())}, nil
}
