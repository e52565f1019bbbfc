// Package wiring composes the popups family with the subscribers family: a popup's form
// fields are the bot's custom fields, and a visitor's answers are written to a subscriber.
package wiring

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/botplatform/api/functions/popups"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ratelimit"
)

// Family is the popups family: the token API's popup routes and the public script and
// event routes websites call.
func Family() family.Family {
	return family.Family{Name: "popups", Build: func(env *family.Env) family.Parts {
		subs := subscribers.NewService(env.Store, env.Now, env.Jobs).WithEvents(env.Events, env.Log)
		svc := popups.NewService(env.Store, Fields{subs}, Writer{Subs: subs, Now: env.Now}, ratelimit.New(env.Store, env.Now), env.Now, env.Log).
			WithEvents(env.Events)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) {
				popups.Routes(mux, svc, env.Cursors)
				popups.PublicRoutes(mux, svc)
			},
			Purge: popups.PurgeStep(env.Store),
		}
	}}
}

// Fields lists a bot's custom field names for the popups' forms.
type Fields struct{ Subs *subscribers.Service }

// FieldNames implements popups.Fields.
func (f Fields) FieldNames(ctx context.Context, bot string) ([]string, error) {
	fields, err := f.Subs.Fields(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(fields))
	for _, fl := range fields {
		out = append(out, fl.Name)
	}
	return out, nil
}

// Writer writes a visitor's form answers to the subscriber of the web channel whose
// external id is the visitor id (created on the first answer), each converted to its
// field's type.
type Writer struct {
	Subs *subscribers.Service
	Now  func() time.Time
}

// WriteFields implements popups.FieldWriter.
func (w Writer) WriteFields(ctx context.Context, bot, visitorID string, values map[string]string) (string, error) {
	fields, err := w.Subs.Fields(ctx, bot)
	if err != nil {
		return "", err
	}
	types := map[string]subscribers.FieldType{}
	for _, f := range fields {
		types[f.Name] = f.Type
	}
	typed := make(map[string]any, len(values))
	for name, v := range values {
		t, ok := types[name]
		if !ok {
			continue // the field was deleted since the popup was written: nothing to keep it in
		}
		tv, err := convert(t, v)
		if err != nil {
			return "", httpapi.Errorf(httpapi.KindInvalid, "validation_failed", "fields.%s: %v", name, err).
				With("errors", []httpapi.FieldError{{Field: "fields." + name, Message: err.Error()}})
		}
		typed[name] = tv
	}
	seen := w.Now()
	sub, _, err := w.Subs.Upsert(ctx, bot, subscribers.ChannelWeb, visitorID, subscribers.Changes{Fields: typed, LastSeenAt: &seen})
	return sub.ID, err
}

// Subscriber implements popups.FieldWriter.
func (w Writer) Subscriber(ctx context.Context, bot, visitorID string) (string, error) {
	sub, err := w.Subs.GetByIdentity(ctx, bot, subscribers.ChannelWeb, visitorID)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return "", nil
	}
	return sub.ID, err
}

// convert turns a form answer into a value of the field's type.
func convert(t subscribers.FieldType, v string) (any, error) {
	switch t {
	case subscribers.TypeNumber:
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", v)
		}
		return n, nil
	case subscribers.TypeBoolean:
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not true or false", v)
		}
		return b, nil
	}
	return v, nil
}
