package runtime

import (
	"context"
	"strconv"

	"github.com/botplatform/api/shared/eventlog"
)

// The runtime feeds the bot's event log (docs/events.md) after each stored transition of a
// run: started, a message sent, completed or failed. Each event's ID derives from the run
// and the transition, so a handler that saves the same transition again (a retry after a
// crash) appends nothing twice. The run's state is the truth; the event is recorded after
// it, and a failure to record it is logged, never retried at the run's expense.

// runEvent is the event of one of rec's transitions.
func (r *Runtime) runEvent(rec *record, name string, props map[string]any) eventlog.Event {
	p := map[string]any{"reaction_id": rec.ReactionID, "reaction_version": float64(rec.ReactionVersion), "execution_id": rec.ID}
	if rec.Trigger.Type != "" {
		p["trigger"] = rec.Trigger.Type
	}
	for k, v := range props {
		p[k] = v
	}
	return eventlog.Event{BotID: rec.BotID, SubscriberID: rec.SubscriberID, Name: name, At: r.now(),
		Channel: string(rec.Channel), Source: eventlog.SourceRuntime, Properties: p}
}

// recordSaved appends the events of what save just stored: fresh tells a run's first save;
// e is the entry written with it (nil for none).
func (r *Runtime) recordSaved(ctx context.Context, rec *record, fresh bool, e *Entry) {
	if r.events == nil {
		return
	}
	if fresh {
		eventlog.Emit(ctx, r.events, r.log, "reaction_started:"+rec.BotID+":"+rec.ID, r.runEvent(rec, eventlog.ReactionStarted, nil))
	}
	if e != nil {
		if id, ok := e.Outcome["message_id"].(string); ok && id != "" {
			seq := strconv.Itoa(rec.Seq)
			eventlog.Emit(ctx, r.events, r.log, "message_sent:"+rec.BotID+":"+rec.ID+":"+seq,
				r.runEvent(rec, eventlog.MessageSent, map[string]any{"step_id": e.StepID}))
		}
	}
	switch rec.Status {
	case StatusCompleted:
		props := map[string]any{}
		if rec.EndReason != nil {
			props["end_reason"] = *rec.EndReason
		}
		eventlog.Emit(ctx, r.events, r.log, "reaction_completed:"+rec.BotID+":"+rec.ID, r.runEvent(rec, eventlog.ReactionCompleted, props))
	case StatusFailed:
		eventlog.Emit(ctx, r.events, r.log, "reaction_failed:"+rec.BotID+":"+rec.ID, r.runEvent(rec, eventlog.ReactionFailed, nil))
	}
}

// recordInbound appends an inbound update's events once its claim is stored: the message
// received and, for a first contact, the subscriber's creation. cause is the update's claim
// key, which names the update.
func (r *Runtime) recordInbound(ctx context.Context, bot, sub, kind, cause string, first bool) {
	if r.events == nil || sub == "" {
		return
	}
	at := r.now()
	ev := eventlog.Event{BotID: bot, SubscriberID: sub, At: at, Channel: kind, Source: eventlog.SourceRuntime}
	if first {
		created := ev
		created.Name = eventlog.SubscriberCreated
		eventlog.Emit(ctx, r.events, r.log, "subscriber_created:"+bot+":"+sub, created)
	}
	ev.Name = eventlog.MessageReceived
	eventlog.Emit(ctx, r.events, r.log, "message_received:"+cause, ev)
}
