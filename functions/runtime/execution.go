package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Status is where a run is.
type Status string

// The statuses of a run.
const (
	// StatusRunning: steps are being executed (or a step is being retried).
	StatusRunning Status = "running"
	// StatusWaiting: suspended by a wait step (until a time) or a buttons step (until a press).
	StatusWaiting Status = "waiting"
	// StatusCompleted: the run ended normally (see EndReason).
	StatusCompleted Status = "completed"
	// StatusFailed: a step failed for good (see Error).
	StatusFailed Status = "failed"
)

// Why a run completed.
const (
	EndLastStep       = "last_step"        // after the last step
	EndStep           = "end_step"         // an end step
	EndGoto           = "goto_reaction"    // a goto handed over to another run (next_execution_id)
	EndGotoNothing    = "goto_unpublished" // a goto to a reaction without a published version
	EndReply          = "reply"            // a message other than a button press ended the buttons wait
	EndButtonPayload  = "button_payload"   // a payload button started another reaction
	EndSuperseded     = "superseded"       // a newer run of the subscriber waits for buttons
	EndButtonsExpired = "buttons_expired"  // nobody pressed a button within ButtonsWait
)

// Execution is one run of one published reaction version for one subscriber: the trace a
// client reads. Everything in it is redacted (docs/runtime.md, "Redaction").
type Execution struct {
	ID              string       `json:"id"`
	BotID           string       `json:"bot_id"`
	SubscriberID    string       `json:"subscriber_id"`
	Channel         channel.Kind `json:"channel"`
	ReactionID      string       `json:"reaction_id"`
	ReactionVersion int64        `json:"reaction_version"`
	Trigger         TriggerInfo  `json:"trigger"`
	Status          Status       `json:"status"`
	// EndReason says why a completed run ended.
	EndReason *string `json:"end_reason"`
	// Waiting is what a waiting run waits for.
	Waiting *Waiting `json:"waiting"`
	// Error is why a failed run failed, or, on a running one, the failure of the step being
	// retried.
	Error *StepError `json:"error"`
	// PreviousExecutionID is the run whose goto started this one; NextExecutionID the run
	// this one's goto started.
	PreviousExecutionID *string    `json:"previous_execution_id"`
	NextExecutionID     *string    `json:"next_execution_id"`
	StepCount           int        `json:"step_count"`
	StartedAt           time.Time  `json:"started_at"`
	UpdatedAt           time.Time  `json:"updated_at"`
	EndedAt             *time.Time `json:"ended_at"`
}

// Detail is an execution with its steps, as GET .../executions/{id} returns it.
type Detail struct {
	Execution
	Steps []Entry `json:"steps"`
}

// TriggerInfo is why a run started.
type TriggerInfo struct {
	// Type is the trigger type (start, keyword, button, label_added), goto when another
	// run's goto started it, or inbound_email when an inbound email route's reaction action
	// started it for the mail's sender (RunReactionMessage).
	Type string `json:"type"`
	// Reason refines it: command or first_contact (start), keyword or pattern (keyword),
	// quick_reply (button: a text equal to a button's title), api (label_added: the label
	// was added over the API).
	Reason string `json:"reason,omitempty"`
	// Keyword, Pattern, Payload, LabelID: the part of the trigger that matched (bot-authored).
	Keyword string `json:"keyword,omitempty"`
	Pattern string `json:"pattern,omitempty"`
	Payload string `json:"payload,omitempty"`
	LabelID string `json:"label_id,omitempty"`
	// UpdateID is the provider's id of the update that started the run.
	UpdateID string `json:"update_id,omitempty"`
	// Message describes what the subscriber sent, redacted.
	Message *Redacted `json:"message,omitempty"`
	// FromExecutionID is the run whose goto or added label started this one.
	FromExecutionID string `json:"from_execution_id,omitempty"`
	// InboundMessageID (inbound_email) is the stored inbound email that started the run
	// (eim_..., GET .../email/inbound-messages/{id}): its id only, nothing of its content.
	InboundMessageID string `json:"inbound_message_id,omitempty"`
	// BroadcastID (broadcast) is the legacy reaction broadcast that started the run.
	BroadcastID string `json:"broadcast_id,omitempty"`
}

// Redacted stands for something the subscriber sent: its kind and length, never its content.
type Redacted struct {
	// Kind is text or button.
	Kind string `json:"kind"`
	// Length is the text's length in characters (text only).
	Length int `json:"length"`
}

// Waiting is what a suspended run waits for.
type Waiting struct {
	// For is time (a wait step) or button (a buttons step).
	For    string    `json:"for"`
	StepID string    `json:"step_id"`
	Until  time.Time `json:"until"`
}

// StepError is a failure of a step.
type StepError struct {
	// Kind is stable: rate_limited, unavailable, blocked, outside_window, rejected,
	// invalid_credentials (provider answers, channel.Err*), channel_missing, subscriber_gone,
	// reaction_gone, hop_limit, step_limit.
	Kind string `json:"kind"`
	// ProviderCode is the provider's error code, when a provider answered.
	ProviderCode string `json:"provider_code,omitempty"`
	// ProviderReason is why the provider (or the adapter, checking the provider's rules
	// before a call) refused the message, in its words, at most 300 characters: "WhatsApp
	// sends one link button alone, not with other buttons". Adapters never put credentials
	// in it; it names rules, not what the subscriber sent.
	ProviderReason string `json:"provider_reason,omitempty"`
	// Message says what happened, for people (written by the platform, never a credential
	// or anything the subscriber sent).
	Message string `json:"message"`
	StepID  string `json:"step_id,omitempty"`
	// Attempts counts the executions of the step so far (running runs only).
	Attempts int `json:"attempts,omitempty"`
}

// Entry is one executed step in a trace.
type Entry struct {
	// Seq numbers the entries of a run from 1.
	Seq    int    `json:"seq"`
	StepID string `json:"step_id"`
	Type   string `json:"type"`
	// At is when the step started, with milliseconds; DurationMS how long it took.
	At         time.Time `json:"at"`
	DurationMS float64   `json:"duration_ms"`
	// Attempts is 1, or more when the step was retried (a provider's 429 or 5xx).
	Attempts int `json:"attempts"`
	// Input is what the step acted with (bot-authored values; see docs/runtime.md).
	Input map[string]any `json:"input,omitempty"`
	// Decision is what the step chose (a branch, a button pressed).
	Decision map[string]any `json:"decision,omitempty"`
	// Outcome is what the step did (a message sent with its provider id, a label added).
	Outcome map[string]any `json:"outcome,omitempty"`
	Error   *StepError     `json:"error,omitempty"`
}

// record is an execution as stored: the trace head plus the run's machine state.
type record struct {
	Execution
	// Cursor is the index of the step to run next (of the buttons step while waiting on one).
	Cursor int `json:"cursor"`
	// Seq is the number of entries written.
	Seq int `json:"seq"`
	// Hops counts the runs started in this chain since it last suspended, this one included;
	// more than MaxHops stops the chain (docs/reactions.md, "Loops").
	Hops int `json:"hops"`
	// Cause identifies the event that made the last transition (a claim key, a wake token),
	// so a retry of that event finishes the transition's effects instead of being ignored.
	Cause string `json:"cause"`
	// LeaseToken holds the run for one handler until LeaseUntil, so two deliveries of one
	// event never execute a step twice concurrently.
	LeaseToken string    `json:"lease_token,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	// Retry is the state of the step being retried.
	Retry *StepError `json:"retry,omitempty"`
	// Added are the labels this run added since it last suspended: their label_added
	// reactions start when it suspends or ends.
	Added []string `json:"added,omitempty"`
	// Outbox are queue messages to send once this state is stored (continuations, label
	// triggers); a retry resends them, and their handlers ignore duplicates.
	Outbox []outMessage `json:"outbox,omitempty"`
	// Next is the run a goto reaction starts after this one.
	Next *startSpec `json:"next_run,omitempty"`
	// LastStep and LastAt are the step visit whose continuation the flow counters have not
	// counted yet (shared/flowstats): the step of the last entry and when it was entered,
	// until the run goes on from it or ends (flowCounts).
	LastStep string    `json:"last_step,omitempty"`
	LastAt   time.Time `json:"last_at,omitzero"`

	rev int64
}

// outMessage is a queue message kept until it is sent.
type outMessage struct {
	Type  string          `json:"type"`
	Body  json.RawMessage `json:"body"`
	Delay time.Duration   `json:"delay"`
}

// startSpec is a run to start: which reaction version, why, and where it is in the chain.
type startSpec struct {
	ExecutionID string      `json:"execution_id"`
	ReactionID  string      `json:"reaction_id"`
	Version     int64       `json:"version"`
	Trigger     TriggerInfo `json:"trigger"`
	Hops        int         `json:"hops"`
	Previous    string      `json:"previous,omitempty"`
}

// Storage layout. A run's head and its entries share a partition, so reading a trace is one
// Get and one Query; a subscriber's runs are listed newest first through GSI1. Every run is
// also named in the bot's run index, so a deleted bot's runs can be found (PurgeStep).
// Everything is under the bot ("BOT#<bot>#...") and expires: runs and entries Retention
// after their last write (a waiting run: after its wait ends), event claims after
// ClaimRetention.
//
//	BOT#<bot>#EXE#<exe>   HEAD              the run (record); GSI1 BOT#<bot>#SUBEXE#<sub> / <exe>
//	BOT#<bot>#EXE#<exe>   S#<000001>        entry n
//	BOT#<bot>#EXES        <exe>             the run index (written when a run starts, suspends, ends)
//	BOT#<bot>#INBOUND     <ch>/<update id>  the claim of an inbound update (claim)
//	BOT#<bot>#TRIGGER     <cause>           the claim of a label_added event or a direct run (claim)
//	BOT#<bot>#BUTTONS     <sub>             the subscriber's run waiting for a button (pointer)
func exePK(bot, exe string) string { return "BOT#" + bot + "#EXE#" + exe }

func headKey(bot, exe string) store.Key { return store.Key{PK: exePK(bot, exe), SK: "HEAD"} }

func entryKey(bot, exe string, seq int) store.Key {
	return store.Key{PK: exePK(bot, exe), SK: fmt.Sprintf("S#%06d", seq)}
}

func runsPK(bot string) string { return "BOT#" + bot + "#EXES" }

func subscriberRuns(bot, sub string) string { return "BOT#" + bot + "#SUBEXE#" + sub }

func inboundPK(bot string) string { return "BOT#" + bot + "#INBOUND" }

func inboundKey(bot, ch, update string) store.Key {
	return store.Key{PK: inboundPK(bot), SK: ch + "/" + update}
}

func triggerPK(bot string) string { return "BOT#" + bot + "#TRIGGER" }

func triggerKey(bot, cause string) store.Key { return store.Key{PK: triggerPK(bot), SK: cause} }

func buttonsPK(bot string) string { return "BOT#" + bot + "#BUTTONS" }

func buttonsKey(bot, sub string) store.Key { return store.Key{PK: buttonsPK(bot), SK: sub} }

// Retention and bounds.
const (
	// Retention is how long a run and its entries are kept after their last write.
	Retention = 30 * 24 * time.Hour
	// ClaimRetention is how long an event's claim is kept: providers stop redelivering
	// well before (Telegram and WhatsApp retry for at most a day or so).
	ClaimRetention = 7 * 24 * time.Hour
	// ButtonsWait is how long a run waits for a button press.
	ButtonsWait = 7 * 24 * time.Hour
	// MaxHops bounds the runs one event starts without a suspension (goto reaction chains,
	// label_added cascades): docs/reactions.md says a run that starts more than 10 stops.
	MaxHops = 10
	// MaxEntries bounds the entries of one run; a run that loops through waits forever
	// stops there (failed, step_limit).
	MaxEntries = 1000
	// leaseFor is how long a handler holds a run without writing it.
	leaseFor = 60 * time.Second
)

func (r *Runtime) loadRun(ctx context.Context, bot, exe string) (*record, error) {
	it, err := r.store.Get(ctx, headKey(bot, exe))
	if err != nil {
		return nil, err
	}
	rec, err := store.Decode[record](it)
	if err != nil {
		return nil, err
	}
	rec.rev = it.Revision
	return &rec, nil
}

// expiry is when a run written now may be forgotten.
func (rec *record) expiry(now time.Time) time.Time {
	t := now
	if rec.Waiting != nil && rec.Waiting.Until.After(t) {
		t = rec.Waiting.Until
	}
	return t.Add(Retention)
}

// headWrite is the conditional write of rec's next revision (MustNotExist when new).
func (rec *record) headWrite(now time.Time) (store.Write, error) {
	rec.UpdatedAt = now.UTC().Truncate(time.Second)
	rec.StepCount = rec.Seq
	data, err := store.Encode(rec)
	if err != nil {
		return store.Write{}, err
	}
	cond := store.RevisionOrAbsent(rec.rev)
	it := store.Item{
		Key:       headKey(rec.BotID, rec.ID),
		GSI1:      store.IndexKey{PK: subscriberRuns(rec.BotID, rec.SubscriberID), SK: rec.ID},
		Revision:  rec.rev + 1,
		Data:      data,
		ExpiresAt: rec.expiry(now),
	}
	return store.PutOp(it, cond), nil
}

// entryWrite adds e as rec's next entry.
func (rec *record) entryWrite(e *Entry, now time.Time) (store.Write, error) {
	rec.Seq++
	e.Seq = rec.Seq
	data, err := store.Encode(e)
	if err != nil {
		return store.Write{}, err
	}
	return store.PutOp(store.Item{Key: entryKey(rec.BotID, rec.ID, e.Seq), Revision: 1, Data: data, ExpiresAt: rec.expiry(now)}, store.MustNotExist), nil
}

// errConflict: the run changed under this handler (another took it over); the message is
// retried and then sees what the other did.
var errConflict = errors.New("runtime: the execution changed concurrently")

// save writes rec (and entry e, and extra writes) as one transaction. The head's revision
// condition is what makes a handler that lost its lease stop.
func (r *Runtime) save(ctx context.Context, rec *record, e *Entry, extra ...store.Write) error {
	fresh := rec.rev == 0
	writes, restore, err := r.saveWrites(rec, e, extra...)
	if err != nil {
		return err
	}
	err = r.store.Transact(ctx, writes)
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		restore()
		return fmt.Errorf("%w: %s (write %d)", errConflict, rec.ID, ce.Index)
	}
	if err != nil {
		restore()
		return fmt.Errorf("runtime: save execution %s: %w", rec.ID, err)
	}
	rec.rev++
	r.recordSaved(ctx, rec, fresh, e)
	return nil
}

// saveWrites returns the writes of save, the head's first, and moves rec on as they will
// leave it; restore moves it back, for a transaction that did not commit.
func (r *Runtime) saveWrites(rec *record, e *Entry, extra ...store.Write) (writes []store.Write, restore func(), err error) {
	now := r.now()
	if e != nil {
		w, err := rec.entryWrite(e, now)
		if err != nil {
			return nil, nil, err
		}
		writes = append(writes, w)
	}
	// The flow counters of this transition go in its transaction (at most 6 writes), so
	// they count each stored step exactly once.
	lastStep, lastAt := rec.LastStep, rec.LastAt
	counted := rec.flowCounts(e)
	restore = func() {
		if e != nil {
			rec.Seq--
		}
		rec.LastStep, rec.LastAt = lastStep, lastAt
	}
	head, err := rec.headWrite(now)
	if err != nil {
		restore()
		return nil, nil, err
	}
	writes = append([]store.Write{head}, append(append(writes, extra...), counted...)...)
	if rec.rev == 0 || rec.Status != StatusRunning {
		// The run index lives as long as the run: refreshed when it starts, suspends, ends.
		writes = append(writes, store.PutOp(store.Item{Key: store.Key{PK: runsPK(rec.BotID), SK: rec.ID},
			Revision: 1, ExpiresAt: head.Put.ExpiresAt}, store.Always))
	}
	return writes, restore, nil
}

// newRun is the record of a run starting now.
func newRun(bot string, sub Subscriber, spec startSpec, now time.Time) *record {
	rec := &record{Execution: Execution{
		ID: spec.ExecutionID, BotID: bot, SubscriberID: sub.ID, Channel: sub.Channel,
		ReactionID: spec.ReactionID, ReactionVersion: spec.Version, Trigger: spec.Trigger,
		Status: StatusRunning, StartedAt: now.UTC().Truncate(time.Second),
	}, Hops: spec.Hops}
	if spec.Previous != "" {
		rec.PreviousExecutionID = &spec.Previous
	}
	return rec
}

// newExecutionID mints a run id.
func newExecutionID(now time.Time) string { return ids.At("exe", now) }

// view is the execution as a client sees it at now: a buttons wait past its end reads as
// completed (buttons_expired), since nothing can resume it any more.
func (rec *record) view(now time.Time) Execution {
	v := rec.Execution
	if v.Status == StatusRunning && rec.Retry != nil {
		r := *rec.Retry
		v.Error = &r
	}
	if v.Status == StatusWaiting && v.Waiting != nil && v.Waiting.For == waitButton && !now.Before(v.Waiting.Until) {
		v.Status = StatusCompleted
		reason, ended := EndButtonsExpired, v.Waiting.Until
		v.EndReason, v.EndedAt, v.Waiting = &reason, &ended, nil
	}
	return v
}

const (
	waitTime   = "time"
	waitButton = "button"
)
