package crm

import (
	"context"
	"time"

	"github.com/botplatform/api/functions/subscribers"
)

// Subscribers is what the family reads of the bot's subscribers (the subscribers family,
// adapted by the wiring): the custom fields and labels a mapping may name, and one
// subscriber to preview. SubscribersOf is the one implementation beyond tests.
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

// SubscribersOf reads the subscribers family's service as the CRM family needs it.
func SubscribersOf(svc *subscribers.Service) Subscribers { return subscriberSource{svc} }

// subscriberSource adapts the subscribers family's service to Subscribers.
type subscriberSource struct{ svc *subscribers.Service }

func (a subscriberSource) Catalog(ctx context.Context, bot string) (Catalog, error) {
	fields, err := a.svc.Fields(ctx, bot)
	if err != nil {
		return Catalog{}, err
	}
	labels, err := a.svc.Labels(ctx, bot)
	if err != nil {
		return Catalog{}, err
	}
	c := Catalog{Fields: make(map[string]string, len(fields)), Labels: make([]string, 0, len(labels))}
	for _, f := range fields {
		c.Fields[f.Name] = string(f.Type)
	}
	for _, l := range labels {
		c.Labels = append(c.Labels, l.Name)
	}
	return c, nil
}

func (a subscriberSource) Subscriber(ctx context.Context, bot, id string) (Person, error) {
	sub, err := a.svc.Get(ctx, bot, id)
	if err != nil {
		return Person{}, err
	}
	p := Person{ID: sub.ID, Channel: sub.Channel, ExternalID: sub.ExternalID, Fields: sub.Fields,
		CreatedAt: sub.CreatedAt, UpdatedAt: sub.UpdatedAt, LastSeenAt: sub.LastSeenAt}
	for dst, src := range map[*string]*string{&p.FirstName: sub.FirstName, &p.LastName: sub.LastName, &p.Name: sub.Name,
		&p.Locale: sub.Locale, &p.Timezone: sub.Timezone} {
		if src != nil {
			*dst = *src
		}
	}
	if len(sub.Labels) > 0 {
		labels, err := a.svc.Labels(ctx, bot)
		if err != nil {
			return Person{}, err
		}
		names := make(map[string]string, len(labels))
		for _, l := range labels {
			names[l.ID] = l.Name
		}
		for _, id := range sub.Labels {
			if n, ok := names[id]; ok {
				p.Labels = append(p.Labels, n)
			}
		}
	}
	return p, nil
}
