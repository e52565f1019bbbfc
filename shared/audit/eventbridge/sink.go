package eventbridge

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/botplatform/api/shared/audit"
)

// Sink is the audit rule's Lambda target: it stores each delivered event in the trail.
// EventBridge delivers at least once; the store write overwrites by event id, so a
// redelivery changes nothing.
type Sink struct {
	trail  audit.Publisher
	source string
}

// NewSink returns a Sink that stores events with trail (an *audit.Log) and accepts only
// entries from source (DefaultSource when empty).
func NewSink(trail audit.Publisher, source string) (*Sink, error) {
	if trail == nil {
		return nil, errors.New("eventbridge sink: a trail is required")
	}
	if source == "" {
		source = DefaultSource
	}
	return &Sink{trail: trail, source: source}, nil
}

// Handle stores one delivered event: lambda.Start(sink.Handle). An error makes Lambda retry
// the asynchronous invocation and then hand it to the rule target's dead-letter queue, so
// an event the sink cannot store is kept, not dropped.
func (s *Sink) Handle(ctx context.Context, ev events.EventBridgeEvent) error {
	// The rule matches on both already; a mismatch means a misrouted rule, which should
	// be loud rather than fill the trail with foreign events.
	if ev.Source != s.source || ev.DetailType != DetailType {
		return fmt.Errorf("eventbridge sink: unexpected event %s from %q of type %q", ev.ID, ev.Source, ev.DetailType)
	}
	e, err := audit.DecodeEvent(ev.Detail)
	if err != nil {
		return fmt.Errorf("eventbridge sink: event %s: %w", ev.ID, err)
	}
	if err := s.trail.Publish(ctx, e.Scrubbed()); err != nil {
		return fmt.Errorf("eventbridge sink: event %s: %w", ev.ID, err)
	}
	return nil
}
