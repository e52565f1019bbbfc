package crm

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/httpapi"
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
	// Page returns a page of the bot's subscribers, oldest first, and the cursor of the
	// next ("" after the last): what a sync job walks.
	Page(ctx context.Context, bot string, limit int, cursor string) ([]Person, string, error)
	// Write changes what a pull or a conflict's resolution writes to one subscriber.
	Write(ctx context.Context, bot, id string, w Write) error
}

// Write is a change a CRM value makes to a subscriber: custom field values by name (nil
// clears), labels by name (true gives, false takes; a label the bot does not have is
// skipped), and the writable attributes (first_name, last_name, locale, timezone) by name.
type Write struct {
	Fields     map[string]any
	Labels     map[string]bool
	Attributes map[string]string
}

// Empty reports whether w changes nothing.
func (w Write) Empty() bool {
	return len(w.Fields) == 0 && len(w.Labels) == 0 && len(w.Attributes) == 0
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
	var names map[string]string
	if len(sub.Labels) > 0 {
		if names, err = a.labelNames(ctx, bot); err != nil {
			return Person{}, err
		}
	}
	return personOf(sub, names), nil
}

func (a subscriberSource) Page(ctx context.Context, bot string, limit int, cursor string) ([]Person, string, error) {
	subs, next, err := a.svc.List(ctx, bot, subscribers.Filter{}, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	names, err := a.labelNames(ctx, bot)
	if err != nil {
		return nil, "", err
	}
	out := make([]Person, len(subs))
	for i, sub := range subs {
		out[i] = personOf(sub, names)
	}
	return out, next, nil
}

func (a subscriberSource) labelNames(ctx context.Context, bot string) (map[string]string, error) {
	labels, err := a.svc.Labels(ctx, bot)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(labels))
	for _, l := range labels {
		names[l.ID] = l.Name
	}
	return names, nil
}

func (a subscriberSource) Write(ctx context.Context, bot, id string, w Write) error {
	var c subscribers.Changes
	if len(w.Fields) > 0 {
		c.Fields = w.Fields
	}
	if len(w.Labels) > 0 {
		labels, err := a.svc.Labels(ctx, bot)
		if err != nil {
			return err
		}
		for name, on := range w.Labels {
			for _, l := range labels {
				if !strings.EqualFold(l.Name, name) {
					continue
				}
				if on {
					c.AddLabels = append(c.AddLabels, l.ID)
				} else {
					c.RemoveLabels = append(c.RemoveLabels, l.ID)
				}
			}
		}
	}
	for name, v := range w.Attributes {
		switch name {
		case "first_name":
			c.FirstName = &v
		case "last_name":
			c.LastName = &v
		case "locale":
			c.Locale = &v
		case "timezone":
			c.Timezone = &v
		}
	}
	// The subscriber's revision is read just before the write; another writer first means
	// one more read, a few times at most.
	for attempt := 0; ; attempt++ {
		sub, err := a.svc.Get(ctx, bot, id)
		if err != nil {
			return err
		}
		_, err = a.svc.Update(ctx, bot, id, sub.Revision, c)
		if err == nil || attempt == 4 || !isStale(err) {
			return err
		}
	}
}

// isStale reports a revision conflict of the subscribers family's Update.
func isStale(err error) bool {
	var he *httpapi.Error
	return errors.As(err, &he) && he.Status() == http.StatusConflict
}

// personOf is a subscriber as a mapping reads it; names are the bot's label names by id.
func personOf(sub subscribers.Subscriber, names map[string]string) Person {
	p := Person{ID: sub.ID, Channel: sub.Channel, ExternalID: sub.ExternalID, Fields: sub.Fields,
		CreatedAt: sub.CreatedAt, UpdatedAt: sub.UpdatedAt, LastSeenAt: sub.LastSeenAt}
	for dst, src := range map[*string]*string{&p.FirstName: sub.FirstName, &p.LastName: sub.LastName, &p.Name: sub.Name,
		&p.Locale: sub.Locale, &p.Timezone: sub.Timezone} {
		if src != nil {
			*dst = *src
		}
	}
	for _, id := range sub.Labels {
		if n, ok := names[id]; ok {
			p.Labels = append(p.Labels, n)
		}
	}
	return p
}
