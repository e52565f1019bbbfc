// Package runtime is the conversation runtime: it takes the inbound updates the webhooks
// enqueue, upserts their senders as subscribers, counts them, finds the published reaction
// they trigger and executes its steps (messages through the channel adapters, labels,
// fields, conditions, gotos, waits that survive restarts, buttons that suspend a run), and
// records an execution trace of every run. It also serves the traces over the API.
//
// Every handler is idempotent: queues deliver at least once and providers redeliver, so an
// event is claimed once, a run's state is written after each step, and a retried message
// resumes a run at the step that failed without repeating the ones done. docs/runtime.md
// records the decisions: matching, retries and failures, waits, buttons, redaction.
package runtime

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// The queue message types the runtime handles.
const (
	// InboundMessage carries one update from a webhook (body: channel.Delivery).
	InboundMessage = channel.InboundMessage
	// ResumeMessage wakes a run suspended by a wait step (body: wake).
	ResumeMessage = "runtime.resume"
	// TriggerMessage starts the label_added reactions of a label a run added (body: labelEvent).
	TriggerMessage = "runtime.trigger"
)

// Deps are the runtime's dependencies.
type Deps struct {
	Store       store.Store
	Queue       queue.Sender
	Channels    Channels
	Subscribers Subscribers
	Reactions   Reactions
	// Events receives the runs' events (optional: nil records none).
	Events eventlog.Log
	Now    func() time.Time
	Log    *slog.Logger
}

// Runtime executes reactions.
type Runtime struct {
	store     store.Store
	queue     queue.Sender
	channels  Channels
	subs      Subscribers
	reactions Reactions
	events    eventlog.Log
	now       func() time.Time
	log       *slog.Logger
	patterns  patternCache
}

// New returns a Runtime, refusing to build one without every dependency.
func New(d Deps) (*Runtime, error) {
	var missing []string
	for name, ok := range map[string]bool{
		"Store": d.Store != nil, "Queue": d.Queue != nil, "Channels": d.Channels != nil,
		"Subscribers": d.Subscribers != nil, "Reactions": d.Reactions != nil, "Now": d.Now != nil, "Log": d.Log != nil,
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("runtime: missing %v", missing)
	}
	return &Runtime{store: d.Store, queue: d.Queue, channels: d.Channels, subs: d.Subscribers,
		reactions: d.Reactions, events: d.Events, now: d.Now, log: d.Log}, nil
}

// Register adds the runtime's message handlers to mux.
func (r *Runtime) Register(mux *queue.Mux) {
	mux.HandleFunc(InboundMessage, deferSyncs(r.handleInbound))
	mux.HandleFunc(ResumeMessage, deferSyncs(r.handleResume))
	mux.HandleFunc(TriggerMessage, deferSyncs(r.handleTrigger))
}

// deferSyncs runs h with the disk syncs of its writes deferred (store.Deferral): a handler
// writes a dozen times (the claim, the subscriber, counters, each step of a run, events),
// and a store that syncs each write before it returns (the local SQLite files) would have
// the handler wait for a dozen syncs. Two make the same promise: before a message goes to a
// provider, what decided it (the claim's plan, the run's state, from which the send's
// idempotency key derives) is synced (driver.sendMessage), so a power loss cannot make a
// redelivery send it under another key; and before the handler returns, and so before the
// queue deletes the message, everything it wrote is synced. A kill -9 loses nothing either
// way: a commit is in the WAL, which the OS holds, before it returns.
func deferSyncs(h func(context.Context, queue.Message) error) func(context.Context, queue.Message) error {
	return func(ctx context.Context, m queue.Message) error {
		dctx, d := store.DeferSync(ctx)
		err := h(dctx, m)
		if serr := d.Settle(context.WithoutCancel(ctx)); serr != nil && err == nil {
			// Committed, but not known to be on disk: let the queue deliver it again.
			err = fmt.Errorf("runtime: sync the handler's writes: %w", serr)
		}
		return err
	}
}

// Unavailable registers handlers that fail every message, for a process that cannot run
// conversations (no credentials sealer, so no channels): the messages are retried and then
// dead-lettered, never lost, and the log says why.
func Unavailable(mux *queue.Mux, why string, log *slog.Logger) {
	h := func(ctx context.Context, m queue.Message) error {
		log.ErrorContext(ctx, "runtime: cannot handle a conversation message here", "type", m.Type, "reason", why)
		return errors.New("runtime: unavailable in this process: " + why)
	}
	for _, t := range []string{InboundMessage, ResumeMessage, TriggerMessage} {
		mux.HandleFunc(t, h)
	}
}

// token returns a random identifier for a handler's lease.
func token() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// handling is one handler invocation: its lease token and its visibility bookkeeping.
type handling struct {
	token    string
	extended time.Time
	// touched: the subscriber was counted active by this handler already (an inbound
	// update counts its sender), so the runs it drives need not count them again.
	touched bool
	// started is the run the event's claim created with it, until startRun takes it.
	started *record
	// done is the write that marks the handler's event done (its claim's last revision),
	// for the run the event's last action drives to commit with its last write; doneWritten
	// says it did. Either write of the mark is the same (the claim's plan never changes),
	// so it is written unconditionally.
	done        *store.Write
	doneWritten bool
	// sender is the inbound update's sender as this handler's upsert left it, for the first
	// run it drives (a later run may follow steps that changed them); channel is the bot's
	// channel the update came on, opened by the claim, for the runs to send on.
	sender  *Subscriber
	channel *openChannel
}

// openChannel is a bot's channel of one type, opened.
type openChannel struct {
	bot     string
	kind    channel.Kind
	adapter channel.Adapter
	conn    channel.Connection
}

// keepVisible extends the queue message's visibility when the handler has run long, so the
// queue does not hand it to a second consumer meanwhile.
func (r *Runtime) keepVisible(ctx context.Context, h *handling) {
	now := r.now()
	if now.Sub(h.extended) < 15*time.Second {
		return
	}
	h.extended = now
	if err := queue.ExtendVisibility(ctx, leaseFor+30*time.Second); err != nil && !errors.Is(err, queue.ErrNotHandling) {
		r.log.WarnContext(ctx, "runtime: could not extend the message's visibility", "error", err)
	}
}

// send enqueues msgs.
func (r *Runtime) send(ctx context.Context, msgs []outMessage) error {
	if len(msgs) == 0 {
		return nil
	}
	out := make([]queue.Message, 0, len(msgs))
	for _, m := range msgs {
		out = append(out, queue.Message{Type: m.Type, Body: m.Body, Delay: m.Delay})
	}
	if err := r.queue.Send(ctx, out...); err != nil {
		return fmt.Errorf("runtime: enqueue: %w", err)
	}
	return nil
}

// message builds an outMessage with body v.
func message(typ string, v any, delay time.Duration) (outMessage, error) {
	m, err := queue.New(typ, v)
	if err != nil {
		return outMessage{}, err
	}
	return outMessage{Type: typ, Body: m.Body, Delay: delay}, nil
}
