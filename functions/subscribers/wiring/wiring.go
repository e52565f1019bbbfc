// Package wiring composes the subscribers family with the conversation runtime: labels added
// over the API start their label_added reactions.
package wiring

import (
	"context"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Family is the subscribers family. Its routes and its jobs (the removal of deleted labels
// and fields, the erasure of erased subscribers' events) share one service; an erasure
// stages its events' erasure in the family's outbox.
func Family() family.Family {
	return family.Family{Name: "subscribers", Build: func(env *family.Env) family.Parts {
		svc := subscribers.NewService(env.Store, env.Now, env.Jobs).WithLabelHook(labelTrigger{env.Outbox}).
			WithEvents(env.Events, env.Log).WithOutbox(env.Outbox)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { subscribers.Routes(mux, svc, env.Cursors) },
			Tools:  subscribers.Tools(svc, env.Cursors),
			Jobs:   svc.Jobs(),
			Purge:  subscribers.PurgeStep(env.Store),
			Erase:  svc.EraseStep,
		}
	}}
}

// labelTrigger is the subscribers family's LabelHook: labels added over the API start their
// label_added reactions, as labels a run adds do. It stages one runtime.trigger message per
// label in the outbox, within the change's own transaction, with the body the runtime's own
// label events have, caused by the subscriber's revision that added the label, so the
// runtime runs each addition once however often it is delivered (the outbox delivers at
// least once).
type labelTrigger struct{ outbox *outbox.Outbox }

func (l labelTrigger) LabelsAdded(_ context.Context, bot string, a subscribers.LabelAddition) ([]store.Write, func(context.Context), error) {
	msgs := make([]queue.Message, 0, len(a.LabelIDs))
	for _, label := range a.LabelIDs {
		m, err := runtime.LabelAddedMessage(bot, a.SubscriberID, channel.Kind(a.Channel), label, a.Revision)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, m)
	}
	return l.outbox.Stage(msgs...)
}
