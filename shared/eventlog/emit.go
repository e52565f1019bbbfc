package eventlog

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
)

// CauseID derives a platform event's ID from its cause: a string that names one occurrence
// of what happened (say "email_opened:" + the send's id, or "reaction_completed:" + the run's
// id), so that an emitter that runs twice for it, a retried job step or a redelivered
// webhook, appends the same ID and the log keeps one event.
func CauseID(cause string) string {
	sum := sha256.Sum256([]byte(cause))
	return "ev_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// Emit appends one platform event to l, its ID derived from cause (CauseID) when e has none.
// A failure is logged and dropped: the work that emits the event (a message sent, an email
// opened) has happened and must not fail, or be done again, because its analytics could not
// be recorded. A nil l records nothing, so that a process without an event log runs the
// same code.
func Emit(ctx context.Context, l Log, log *slog.Logger, cause string, e Event) {
	if l == nil {
		return
	}
	if e.ID == "" {
		e.ID = CauseID(cause)
	}
	if _, err := l.Append(ctx, e); err != nil && log != nil {
		log.WarnContext(ctx, "event not recorded", "bot_id", e.BotID, "event", e.Name, "event_id", e.ID, "error", err)
	}
}

// EmitAll appends platform events in batches of at most MaxEventsPerAppend, each ID set
// by the caller (CauseID), so that an emitter of many events at once (a batch of sent
// emails) pays one append per batch rather than per event. Failures are logged and
// dropped, as in Emit.
func EmitAll(ctx context.Context, l Log, log *slog.Logger, events []Event) {
	if l == nil {
		return
	}
	for len(events) > 0 {
		n := min(len(events), MaxEventsPerAppend)
		if _, err := l.Append(ctx, events[:n]...); err != nil && log != nil {
			log.WarnContext(ctx, "events not recorded", "bot_id", events[0].BotID, "event", events[0].Name, "count", n, "error", err)
		}
		events = events[n:]
	}
}
