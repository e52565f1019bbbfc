// Package queue is the work queue the platform's background jobs run on. Producers Send
// typed messages with JSON bodies; a consumer hands every message to a Handler at least once
// and retries it, with backoff, until the handler succeeds or the message is dead-lettered.
//
// Implementations live in sub-packages: sqs (AWS: SQS queues drained by Lambda event source
// mappings) and local (the in-process queue of the local process, persisted in the store).
// Business code sees only Sender and Handler, so it never knows which one it runs on.
//
// At-least-once is the contract on both: a handler can see a message twice (a worker crash
// after the work but before the acknowledgement, an expired visibility timeout), so
// handlers must be idempotent.
package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// Limits every implementation enforces, so a message that works locally also fits SQS.
const (
	// MaxMessageBytes bounds one message as SQS counts it: the body plus the type attribute.
	// 256 KiB is SQS's historical limit and its batch limit, which we keep as the bound of
	// one message so any single message can always be sent.
	MaxMessageBytes = 256 * 1024
	// MaxTypeLen bounds a message type.
	MaxTypeLen = 128
	// MaxDelay is the longest Delay SQS itself accepts. A longer one (up to
	// MaxScheduledDelay) travels differently: the SQS sender turns it into an EventBridge
	// Scheduler one-time schedule that sends the message when it is due; the local queue
	// keeps any message until its due time.
	MaxDelay = 15 * time.Minute
	// MaxScheduledDelay is the longest Delay a message may have at all: a wait step waits
	// at most 30 days; a year leaves room for what later families schedule.
	MaxScheduledDelay = 366 * 24 * time.Hour
)

// Message is one unit of background work.
type Message struct {
	// Type routes the message to its handler (see Mux), e.g. "broadcasts.fanout".
	Type string
	// Body is the job's JSON document.
	Body json.RawMessage
	// Delay postpones the first delivery (at most MaxScheduledDelay; see MaxDelay).
	Delay time.Duration

	// ID identifies the message; the queue sets it on delivery (Send ignores it).
	ID string
	// Attempt is the 1-based delivery count, set on delivery; handlers can use it to
	// give up gracefully on the last attempts.
	Attempt int
}

// New builds a message of type typ whose body is v marshalled as JSON.
func New(typ string, v any) (Message, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Message{}, fmt.Errorf("queue: encode %s body: %w", typ, err)
	}
	m := Message{Type: typ, Body: b}
	if err := m.Validate(); err != nil {
		return Message{}, err
	}
	return m, nil
}

// Decode unmarshals the body into v. It tolerates unknown fields on purpose: a message can
// outlive a deploy (enqueued by the next version, consumed by this one during a rollback),
// and failing it would only retry it into the dead-letter queue.
func (m Message) Decode(v any) error {
	if err := json.Unmarshal(m.Body, v); err != nil {
		return fmt.Errorf("queue: decode %s message %s: %w", m.Type, m.ID, err)
	}
	return nil
}

// Size is the message's size as SQS counts it against its limits: the body, plus the name,
// data type and value of the type attribute that carries Type.
func (m Message) Size() int {
	return len(m.Body) + len(TypeAttribute) + len("String") + len(m.Type)
}

// TypeAttribute is the SQS message attribute that carries Message.Type.
const TypeAttribute = "type"

// Validate reports a message no implementation may send: a missing or malformed type, a body
// that is not JSON, an oversized message or an out-of-range delay.
func (m Message) Validate() error {
	if m.Type == "" || len(m.Type) > MaxTypeLen {
		return fmt.Errorf("queue: message type must be 1 to %d characters", MaxTypeLen)
	}
	for i := 0; i < len(m.Type); i++ {
		c := m.Type[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("queue: message type %q has a character other than letters, digits, '.', '_', '-'", m.Type)
		}
	}
	if !json.Valid(m.Body) {
		return fmt.Errorf("queue: %s message body is not valid JSON", m.Type)
	}
	if n := m.Size(); n > MaxMessageBytes {
		return fmt.Errorf("queue: %s message is %d bytes, over the %d byte limit", m.Type, n, MaxMessageBytes)
	}
	if m.Delay < 0 || m.Delay > MaxScheduledDelay {
		return fmt.Errorf("queue: %s message delay %s is outside 0..%s", m.Type, m.Delay, MaxScheduledDelay)
	}
	return nil
}

// Sender enqueues messages. Send returns nil only when every message is durably accepted;
// a batch is sent in as few calls as the backend allows.
type Sender interface {
	Send(ctx context.Context, msgs ...Message) error
}

// Handler processes one delivered message. A nil error acknowledges (deletes) it; an error
// makes it visible again for a later attempt.
type Handler interface {
	HandleMessage(ctx context.Context, m Message) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, m Message) error

// HandleMessage calls f.
func (f HandlerFunc) HandleMessage(ctx context.Context, m Message) error { return f(ctx, m) }

// ErrUnknownType is returned (wrapped) by Mux for a message type nobody handles. The
// message is retried like any failure and ends in the dead-letter queue, where an operator
// can redrive it after deploying its handler.
var ErrUnknownType = errors.New("queue: no handler for message type")

// Mux routes messages to handlers by type, so one queue (and one worker Lambda) can carry
// several job kinds of a family.
type Mux struct {
	handlers map[string]Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{handlers: make(map[string]Handler)} }

// Handle registers h for typ. Registering a type twice is a wiring bug and panics, as
// http.ServeMux does, at start-up rather than at the first message.
func (m *Mux) Handle(typ string, h Handler) {
	if typ == "" || h == nil {
		panic("queue: Mux.Handle needs a type and a handler")
	}
	if _, dup := m.handlers[typ]; dup {
		panic("queue: two handlers for message type " + typ)
	}
	m.handlers[typ] = h
}

// HandleFunc registers f for typ.
func (m *Mux) HandleFunc(typ string, f func(ctx context.Context, msg Message) error) {
	m.Handle(typ, HandlerFunc(f))
}

// HandleMessage dispatches msg to the handler of its type.
func (m *Mux) HandleMessage(ctx context.Context, msg Message) error {
	h, ok := m.handlers[msg.Type]
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknownType, msg.Type)
	}
	return h.HandleMessage(ctx, msg)
}

// RetryAfter marks a handler's error as asking for the next attempt no sooner than d from
// now (a provider's Retry-After): consumers wait the longer of d and their backoff. The
// attempt still counts toward the dead-letter limit.
func RetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfterError{err: err, d: d}
}

type retryAfterError struct {
	err error
	d   time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryDelay returns the delay err asks for through RetryAfter, or 0.
func RetryDelay(err error) time.Duration {
	var r *retryAfterError
	if errors.As(err, &r) {
		return r.d
	}
	return 0
}

// Call runs h on m, turning a panic into an error: one bad message must fail alone, not take
// down the process (local workers) or the whole batch (a Lambda would redeliver every record).
func Call(ctx context.Context, h Handler, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panic: %v\n%s", r, debug.Stack())
		}
	}()
	return h.HandleMessage(ctx, m)
}

// Extender keeps the message being handled invisible to other consumers for longer.
// Consumers put one in the handler's context; handlers reach it through ExtendVisibility.
type Extender interface {
	ExtendVisibility(ctx context.Context, d time.Duration) error
}

// ErrNotHandling is returned by ExtendVisibility outside a handler's context.
var ErrNotHandling = errors.New("queue: not inside a message handler")

type extenderKey struct{}

// WithExtender returns ctx carrying e; consumers call it before invoking a handler.
func WithExtender(ctx context.Context, e Extender) context.Context {
	return context.WithValue(ctx, extenderKey{}, e)
}

// ExtendVisibility makes the message the handler is processing invisible for d from now
// (SQS ChangeMessageVisibility semantics), so long work is not delivered to a second
// consumer meanwhile. Call it again before d runs out to keep extending; SQS caps the total
// at 12 hours from the first receive.
func ExtendVisibility(ctx context.Context, d time.Duration) error {
	e, ok := ctx.Value(extenderKey{}).(Extender)
	if !ok {
		return ErrNotHandling
	}
	return e.ExtendVisibility(ctx, d)
}
