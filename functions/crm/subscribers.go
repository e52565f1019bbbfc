package crm

import (
	"context"
	"time"
)

// Subscribers is what the family reads of the bot's subscribers (the subscribers family,
// adapted by the wiring): the custom fields and labels a mapping may name, and one
// subscriber to preview.
type Subscribers interface {
	// Catalog returns the bot's custom fields and labels.
	Catalog(ctx context.Context, bot string) (Catalog, error)
	// Subscriber returns one subscriber of the bot; a not-found *httpapi.Error for an id
	// that is not one of the bot's subscribers.
	Subscriber(ctx context.Context, bot, id string) (Person, error)
}

// The types of the subscribers' custom fields (the subscribers family's).
const (
	SubscriberString   = "string"
	SubscriberNumber   = "number"
	SubscriberBoolean  = "boolean"
	SubscriberDatetime = "datetime"
)

// Catalog is a bot's custom fields (name -> type: string, number, boolean, datetime) and
// label names.
type Catalog struct {
	Fields map[string]string
	Labels []string
}

// Person is a subscriber as a mapping reads it.
type Person struct {
	ID         string
	Channel    string
	ExternalID string
	// FirstName, LastName, Name, Locale and Timezone are "" when unknown.
	FirstName, LastName, Name, Locale, Timezone string
	// Labels are the names of the subscriber's labels.
	Labels []string
	// Fields are the custom field values by name: string, float64, bool, or an RFC 3339
	// string for datetime fields.
	Fields     map[string]any
	CreatedAt  time.Time
	UpdatedAt  time.Time
	LastSeenAt *time.Time
}
