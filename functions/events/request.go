package events

import (
	"fmt"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// PostRequest is the body of POST /api/bots/{botID}/events.
type PostRequest struct {
	Events []EventInput `json:"events"`
}

// EventInput is one posted event.
type EventInput struct {
	// EventID is the client's id of the event: a replay with the same id stores nothing.
	EventID      string         `json:"event_id"`
	SubscriberID string         `json:"subscriber_id"`
	Name         string         `json:"name"`
	At           *time.Time     `json:"at"` // the server's clock when left out
	Properties   map[string]any `json:"properties"`
	Revenue      *RevenueInput  `json:"revenue"`
}

// RevenueInput is an event's revenue: an integer of the currency's minor unit.
type RevenueInput struct {
	Minor    *int64 `json:"minor"`
	Currency string `json:"currency"`
}

// Validate checks the shape of every event (400 validation_failed, every problem at once);
// what depends on the bot's data or the clock is Ingest's (422).
func (r *PostRequest) Validate() error {
	var p httpapi.Problems
	switch {
	case len(r.Events) == 0:
		p.Add("events", "is required: 1 to %d events", eventlog.MaxEventsPerAppend)
	case len(r.Events) > eventlog.MaxEventsPerAppend:
		p.Add("events", "at most %d events per request, got %d", eventlog.MaxEventsPerAppend, len(r.Events))
	}
	if len(p) > 0 {
		return p.Err()
	}
	for i, e := range r.Events {
		field := func(name string) string { return fmt.Sprintf("events[%d].%s", i, name) }
		if err := eventlog.CheckClientEventID(e.EventID); err != nil {
			p.Add(field("event_id"), "is required and %s", err.Error())
		}
		if !subscriberID(e.SubscriberID) {
			p.Add(field("subscriber_id"), "is required: a subscriber id such as sub_...")
		}
		if err := eventlog.CheckName(e.Name); err != nil {
			p.Add(field("name"), "%s", err.Error())
		}
		if e.At != nil && (e.At.Year() < 1970 || e.At.Year() > 9999) {
			p.Add(field("at"), "must be an RFC 3339 time such as 2026-01-01T00:00:00Z")
		}
		if len(e.Properties) > eventlog.MaxProperties {
			p.Add(field("properties"), "at most %d properties, got %d", eventlog.MaxProperties, len(e.Properties))
		}
		for k, v := range e.Properties {
			if err := eventlog.CheckPropertyKey(k); err != nil {
				p.Add(field("properties"), "%q: %s", k, err.Error())
			} else if err := eventlog.CheckPropertyValue(v); err != nil {
				p.Add(field("properties."+k), "%s (properties are flat)", err.Error())
			}
		}
		if rv := e.Revenue; rv != nil {
			if rv.Minor == nil {
				p.Add(field("revenue.minor"), "is required: an integer amount in the currency's minor unit (cents for USD)")
			} else if *rv.Minor > eventlog.MaxRevenueMinor || *rv.Minor < -eventlog.MaxRevenueMinor {
				p.Add(field("revenue.minor"), "must be between -%d and %d", int64(eventlog.MaxRevenueMinor), int64(eventlog.MaxRevenueMinor))
			}
			if !upper3(rv.Currency) {
				p.Add(field("revenue.currency"), "is required: an ISO 4217 code of three upper-case letters, such as USD")
			}
		}
	}
	return p.Err()
}

// subscriberID reports whether s can be a subscriber id: what eventlog keeps as one.
func subscriberID(s string) bool {
	if s == "" || len(s) > eventlog.MaxIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func upper3(s string) bool {
	return len(s) == 3 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z' && s[2] >= 'A' && s[2] <= 'Z'
}
