package runtime

import (
	"context"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/flowstats"
	"github.com/botplatform/api/shared/store"
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

// recordSaved appends the events of what save just stored (savedEvents), in one append.
func (r *Runtime) recordSaved(ctx context.Context, rec *record, fresh bool, e *Entry) {
	if r.events == nil {
		return
	}
	eventlog.EmitAll(ctx, r.events, r.log, r.savedEvents(rec, fresh, e))
}

// savedEvents are the events of a stored transition of rec: fresh tells a run's first save;
// e is the entry written with it (nil for none).
func (r *Runtime) savedEvents(rec *record, fresh bool, e *Entry) []eventlog.Event {
	var evs []eventlog.Event
	add := func(cause string, ev eventlog.Event) {
		ev.ID = eventlog.CauseID(cause)
		evs = append(evs, ev)
	}
	if fresh {
		add("reaction_started:"+rec.BotID+":"+rec.ID, r.runEvent(rec, eventlog.ReactionStarted, nil))
	}
	if e != nil {
		if id, ok := e.Outcome["message_id"].(string); ok && id != "" {
			seq := strconv.Itoa(rec.Seq)
			add("message_sent:"+rec.BotID+":"+rec.ID+":"+seq, r.runEvent(rec, eventlog.MessageSent, map[string]any{"step_id": e.StepID}))
		}
	}
	switch rec.Status {
	case StatusCompleted:
		props := map[string]any{}
		if rec.EndReason != nil {
			props["end_reason"] = *rec.EndReason
		}
		add("reaction_completed:"+rec.BotID+":"+rec.ID, r.runEvent(rec, eventlog.ReactionCompleted, props))
	case StatusFailed:
		add("reaction_failed:"+rec.BotID+":"+rec.ID, r.runEvent(rec, eventlog.ReactionFailed, nil))
	}
	return evs
}

// inboundEvents are an inbound update's events, appended once its claim is stored: the
// message received and, for a first contact, the subscriber's creation. cause is the
// update's claim key, which names the update.
func (r *Runtime) inboundEvents(bot, sub, kind, cause string, first bool) []eventlog.Event {
	if sub == "" {
		return nil
	}
	ev := eventlog.Event{BotID: bot, SubscriberID: sub, At: r.now(), Channel: kind, Source: eventlog.SourceRuntime}
	var evs []eventlog.Event
	if first {
		// The subscribers family records it too, under the same id; this one covers an
		// earlier attempt that created the subscriber and stopped before recording it.
		created := ev
		created.ID, created.Name = eventlog.CauseID("subscriber_created:"+bot+":"+sub), eventlog.SubscriberCreated
		evs = append(evs, created)
	}
	ev.ID, ev.Name = eventlog.CauseID("message_received:"+cause), eventlog.MessageReceived
	return append(evs, ev)
}

// The runtime also keeps the flow counters of every reaction version (shared/flowstats,
// docs/flowintel.md), in the transaction of each transition it stores. The rule, which
// FlowWrites applies to a recorded trace in the same way:
//
//   - an entry of a step counts that step entered, and completed or errors (the entry's
//     error: the step failed the run); it also counts the run's previous step (LastStep)
//     continued, with the time from entering that step to entering this one;
//   - the entry a button press writes for a run waiting at a buttons step (outcome
//     "resumed") is not a second visit: it counts the buttons step continued, with the time
//     from entering it to the press, and the step the press leads to then counts as a visit
//     with no previous step;
//   - a run that ends normally right after a step (end_step, last_step, goto_reaction,
//     goto_unpublished) counts that step continued, with the time to the run's end (EndedAt,
//     whole seconds);
//   - nothing else counts: a run that waits, is abandoned at a buttons step (reply,
//     button_payload, superseded, buttons_expired) or fails without an entry leaves its last
//     step completed and not continued (the overlay's dropped).

// flowTracker applies the rule to one run's transitions in order.
type flowTracker struct {
	bot, reaction string
	version       int64
	last          string
	lastAt        time.Time
}

func (f *flowTracker) mark(step string, at time.Time) flowstats.Mark {
	return flowstats.Mark{Bot: f.bot, Reaction: f.reaction, Version: f.version, StepID: step, At: at}
}

// entry counts the written entry e.
func (f *flowTracker) entry(e *Entry) []store.Write {
	if resumed, _ := e.Outcome["resumed"].(bool); resumed {
		var out []store.Write
		if f.last != "" {
			out = flowstats.ContinueWrites(f.mark(f.last, f.lastAt), e.At)
		}
		f.last, f.lastAt = "", time.Time{}
		return out
	}
	var prev *flowstats.Mark
	if f.last != "" {
		p := f.mark(f.last, f.lastAt)
		prev = &p
	}
	f.last, f.lastAt = e.StepID, e.At
	return flowstats.EntryWrites(f.mark(e.StepID, e.At), e.Error != nil, prev)
}

// end counts the run's state after its entries: a normal end continues the last step. A
// run that is over forgets its last step, so a later save counts nothing again.
func (f *flowTracker) end(status Status, reason *string, ended *time.Time) []store.Write {
	var out []store.Write
	if status == StatusCompleted && reason != nil && ended != nil && f.last != "" {
		switch *reason {
		case EndLastStep, EndStep, EndGoto, EndGotoNothing:
			out = flowstats.EndWrites(f.mark(f.last, f.lastAt), *ended)
		}
	}
	if status == StatusCompleted || status == StatusFailed {
		f.last, f.lastAt = "", time.Time{}
	}
	return out
}

// flowCounts returns the flow counter writes of the transition save is storing (entry e,
// or nil) and moves rec's LastStep on.
func (rec *record) flowCounts(e *Entry) []store.Write {
	f := flowTracker{bot: rec.BotID, reaction: rec.ReactionID, version: rec.ReactionVersion, last: rec.LastStep, lastAt: rec.LastAt}
	var out []store.Write
	if e != nil {
		out = append(out, f.entry(e)...)
	}
	out = append(out, f.end(rec.Status, rec.EndReason, rec.EndedAt)...)
	rec.LastStep, rec.LastAt = f.last, f.lastAt
	return flowstats.Merge(out)
}
