package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/botplatform/api/shared/auth"
)

// Redacted replaces a field value that carries something shaped like a credential.
const Redacted = "[redacted]"

// Scrubbed returns e with every string field that contains a token prefix replaced by
// Redacted. Most fields come from our own code, but two come from the client: the request
// id (X-Request-Id) and the bot id (the request path), and a client can paste anything
// there, its own token included. The trail, the bus and the archive must never hold one.
func (e Event) Scrubbed() Event {
	for _, f := range []*string{&e.ID, &e.AccountID, &e.ActorUserID, &e.TokenID, &e.TokenKind, &e.BotID, &e.Method, &e.Route, &e.RequestID} {
		if looksSecret(*f) {
			*f = Redacted
		}
	}
	return e
}

func looksSecret(s string) bool {
	return strings.Contains(s, auth.PATPrefix) || strings.Contains(s, auth.BotPrefix)
}

// Validate reports an event missing what every audit event has. The sink refuses such an
// event loudly (it goes to the rule's retry and dead-letter path) rather than store a hole.
func (e Event) Validate() error {
	var errs []error
	for name, v := range map[string]string{
		"id": e.ID, "account_id": e.AccountID, "token_id": e.TokenID, "token_kind": e.TokenKind,
		"method": e.Method, "route": e.Route, "request_id": e.RequestID,
	} {
		if v == "" {
			errs = append(errs, fmt.Errorf("%s is required", name))
		}
	}
	if e.Time.IsZero() {
		errs = append(errs, errors.New("time is required"))
	}
	if e.Status < 100 || e.Status > 599 {
		errs = append(errs, fmt.Errorf("status %d is not an HTTP status", e.Status))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("audit: invalid event: %w", err)
	}
	return nil
}

// DecodeEvent parses an event's JSON strictly (unknown fields, trailing data and missing
// fields are errors), for events that arrive from outside the process. Strict on purpose:
// publisher and sink deploy together, and a field the sink would silently drop is a hole
// in the trail, while a refused event waits in the dead-letter queue for a fixed sink.
func DecodeEvent(b []byte) (Event, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var e Event
	if err := dec.Decode(&e); err != nil {
		return Event{}, fmt.Errorf("audit: decode event: %w", err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		return Event{}, errors.New("audit: decode event: trailing data after the event")
	}
	if err := e.Validate(); err != nil {
		return Event{}, err
	}
	return e, nil
}
