package runtime

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/queue"
)

// A direct run starts a named reaction for a subscriber, whatever its trigger, because
// something outside a conversation asked for it: an inbound email route whose action is a
// reaction (docs/email.md). It travels as a TriggerMessage and is claimed like a label event,
// once per cause, so a message sent or delivered twice starts one run.

// TriggerInboundEmail is the trigger type of a run an inbound email route started for the
// mail's sender.
const TriggerInboundEmail = "inbound_email"

// TriggerBroadcast is the trigger type of a run a legacy reaction broadcast started for one
// of its recipients.
const TriggerBroadcast = "broadcast"

// directTrigger reports whether t is a trigger type RunReactionMessage starts runs for.
func directTrigger(t string) bool {
	return slices.Contains([]string{TriggerInboundEmail, TriggerBroadcast}, t)
}

// maxCauseLen bounds a direct run's cause (it is part of the claim's key).
const maxCauseLen = 200

// RunReactionMessage is the TriggerMessage that runs reactionID's published version (the one
// published when the message is handled) for the subscriber, on its channel type k. trigger
// is the trigger type the run records (TriggerInboundEmail); cause names the occasion (for
// inbound_email, the stored inbound message's id, which the run's trigger shows as
// inbound_message_id). The event is claimed under (trigger, cause): however often the
// message is sent or delivered, one run starts. A reaction with no published version then
// (never published, deleted) starts nothing: the event is settled with an empty plan, and
// logged. The run starts a new chain and holds nothing of what caused it beyond the cause.
func RunReactionMessage(bot, subscriberID string, k channel.Kind, reactionID, trigger, cause string) (queue.Message, error) {
	if bot == "" || subscriberID == "" || k == "" || reactionID == "" || cause == "" {
		return queue.Message{}, fmt.Errorf("runtime: a direct run needs a bot, subscriber, channel type, reaction and cause")
	}
	if !directTrigger(trigger) {
		return queue.Message{}, fmt.Errorf("runtime: %q is not a trigger type of direct runs", trigger)
	}
	if len(cause) > maxCauseLen || strings.ContainsFunc(cause, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return queue.Message{}, fmt.Errorf("runtime: a direct run's cause is at most %d bytes without spaces or control characters", maxCauseLen)
	}
	return queue.New(TriggerMessage, labelEvent{BotID: bot, SubscriberID: subscriberID, Kind: k, ReactionID: reactionID,
		Trigger: trigger, Cause: trigger + ":" + cause})
}

// planReaction decides what a direct run does: start the reaction's published version, or
// nothing when it has none.
func (r *Runtime) planReaction(ctx context.Context, ev *event) ([]action, error) {
	le := ev.label
	published, err := r.reactions.Published(ctx, ev.bot)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(published, func(p Published) bool { return p.ReactionID == le.ReactionID })
	if i < 0 {
		r.log.InfoContext(ctx, "runtime: reaction not started: it has no published version", "bot_id", le.BotID,
			"reaction_id", le.ReactionID, "trigger", le.Trigger, "cause", le.Cause)
		return []action{}, nil
	}
	p := published[i]
	info := TriggerInfo{Type: le.Trigger}
	switch cause := strings.TrimPrefix(le.Cause, le.Trigger+":"); le.Trigger {
	case TriggerInboundEmail:
		info.InboundMessageID = cause
	case TriggerBroadcast:
		info.BroadcastID, _, _ = strings.Cut(cause, "/") // the cause is <broadcast>/<recipient row>
	}
	spec := startSpec{ExecutionID: newExecutionID(r.now()), ReactionID: p.ReactionID, Version: p.Version, Trigger: info, Hops: 1}
	return []action{{Kind: actStart, Start: &spec}}, nil
}
