// Package wiring composes the events family with the subscribers family: a custom event's
// subscriber must be one of the bot's, and its channel is the subscriber's.
package wiring

import (
	"context"

	"github.com/botplatform/api/functions/events"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the events family: the custom events route, the list and the counts of a bot's
// event log, and the erasure of a deleted bot's events.
func Family() family.Family {
	return family.Family{Name: "events", Build: func(env *family.Env) family.Parts {
		subs := subscribers.NewService(env.Store, env.Now, env.Jobs)
		svc := events.NewService(env.Events, Subscribers{subs}, env.Now)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { events.Routes(mux, svc, env.Cursors) },
			Purge:  events.PurgeStep(env.Events),
		}
	}}
}

// Subscribers answers the events family's questions about subscribers.
type Subscribers struct{ Subs *subscribers.Service }

// Channel implements events.Subscribers.
func (s Subscribers) Channel(ctx context.Context, bot, id string) (string, error) {
	sub, err := s.Subs.Get(ctx, bot, id)
	if err != nil {
		return "", err
	}
	return sub.Channel, nil
}
