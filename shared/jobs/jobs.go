// Package jobs runs long background work as a sequence of bounded steps. A job kind
// registers a Step that does a bounded amount of work and returns a cursor to continue from;
// runners drive the steps to completion: over the work queue (each step one message, a
// continuation enqueued when not done) or, on AWS, by a Step Functions state machine that
// invokes the jobs Lambda once per step. Steps never run longer than one Lambda invocation,
// whatever the job's total length.
package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Step does a bounded amount of a job's work. cursor is "" on the first step and the
// previous step's next cursor afterwards. Steps must be idempotent for a given cursor: a
// runner may repeat a step after a crash.
type Step func(ctx context.Context, payload json.RawMessage, cursor string) (next string, done bool, err error)

// StepNumber reads the cursor of a job whose cursor is its step's number: first on the
// first step (cursor ""), else the number the previous step returned (strconv.FormatInt).
func StepNumber(cursor string, first int64) (int64, error) {
	if cursor == "" {
		return first, nil
	}
	n, err := strconv.ParseInt(cursor, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("jobs: %q is not a step number", cursor)
	}
	return n, nil
}

// State is a job between two steps. It is the Step Functions state and the body of a
// queue continuation, so its JSON shape is a contract with infra/ (the state machine reads
// "done").
type State struct {
	Kind    string          `json:"kind"`
	Payload json.RawMessage `json:"payload"`
	Cursor  string          `json:"cursor"`
	Done    bool            `json:"done"`
	// Steps counts the steps run so far, for logs and runaway protection.
	Steps int `json:"steps"`
}

// MaxSteps stops a job whose steps never report done: a bug, not a long job.
const MaxSteps = 100000

// ErrUnknownKind means no Step is registered for a job's kind.
var ErrUnknownKind = errors.New("jobs: unknown job kind")

// Registry maps job kinds to their steps.
type Registry struct {
	steps map[string]Step
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry { return &Registry{steps: map[string]Step{}} }

// Register adds a kind. Registering a kind twice is a wiring bug and panics at start-up.
func (r *Registry) Register(kind string, s Step) {
	if kind == "" || s == nil {
		panic("jobs: Register needs a kind and a step")
	}
	if _, dup := r.steps[kind]; dup {
		panic("jobs: kind registered twice: " + kind)
	}
	r.steps[kind] = s
}

// Kinds lists the registered kinds, sorted.
func (r *Registry) Kinds() []string {
	out := make([]string, 0, len(r.steps))
	for k := range r.steps {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RunStep runs the next step of st and returns the state after it.
func (r *Registry) RunStep(ctx context.Context, st State) (State, error) {
	if st.Done {
		return st, nil
	}
	step, ok := r.steps[st.Kind]
	if !ok {
		return st, fmt.Errorf("%w %q", ErrUnknownKind, st.Kind)
	}
	if st.Steps >= MaxSteps {
		return st, fmt.Errorf("jobs: %s ran %d steps without finishing", st.Kind, st.Steps)
	}
	next, done, err := step(ctx, st.Payload, st.Cursor)
	if err != nil {
		return st, fmt.Errorf("jobs: %s step %d: %w", st.Kind, st.Steps+1, err)
	}
	return State{Kind: st.Kind, Payload: st.Payload, Cursor: next, Done: done, Steps: st.Steps + 1}, nil
}

// Later marks a step's error as one that passes (a provider throttling, or down for a
// while): the queue runner acknowledges the attempt and runs the step again from the same
// cursor no sooner than d from now (at least a second), so that the job waits an outage
// out instead of being dead-lettered after the queue's few retries. Nothing counts against
// the job but its steps (MaxSteps). The runner does not log it: the step says what failed.
// Other runners (Step Functions) see the error it wraps.
func Later(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &laterError{err: err, d: max(d, time.Second)}
}

type laterError struct {
	err error
	d   time.Duration
}

func (e *laterError) Error() string { return e.err.Error() }
func (e *laterError) Unwrap() error { return e.err }

// LaterDelay reports the delay err asks for through Later (ok false: none).
func LaterDelay(err error) (d time.Duration, ok bool) {
	var l *laterError
	if errors.As(err, &l) {
		return l.d, true
	}
	return 0, false
}

// LaterWhenUnavailable is Later(err, d) when err is the store being unavailable for now
// (store.ErrUnavailable: throttled past the SDK's retries, locked past the busy timeout) and
// not already Later, and reports whether it made it so: a send job waits such an outage out
// rather than count it towards the dead-letter limit. Any other err is returned as it is.
func LaterWhenUnavailable(err error, d time.Duration) (error, bool) {
	if _, later := LaterDelay(err); later || !errors.Is(err, store.ErrUnavailable) {
		return err, false
	}
	return Later(err, d), true
}

// Safely runs step, a panic of it returned as an error with its stack, so that the job can
// count it as a failure of the step like any other.
func Safely(step func() (string, bool, error)) (next string, done bool, err error) {
	defer func() {
		if p := recover(); p != nil {
			next, done, err = "", false, fmt.Errorf("jobs: step panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return step()
}

// MaxStepFailures is how many times one step of a send job may fail for a reason that does
// not pass (not Later: a bug, data that does not decode, a panic) before the job stops itself
// in a state its user sees (a campaign or broadcast paused with send_failed): fewer than the
// queue's deliveries before it dead-letters the step (5, locally and on AWS), which would
// leave the send looking busy with nothing running.
const MaxStepFailures = 3

// Failures counts the failed attempts of one step (Step of run Epoch), kept by a job in its
// progress item across the queue's redeliveries. The zero value counts nothing yet.
type Failures struct {
	Epoch int64 `json:"epoch"`
	Step  int64 `json:"step"`
	Count int   `json:"count"`
}

// Add counts a failure of step n of run epoch, starting over when the last one counted was
// another step's, and returns the failures of this step so far.
func (f *Failures) Add(epoch, n int64) int {
	if f.Epoch != epoch || f.Step != n {
		*f = Failures{Epoch: epoch, Step: n}
	}
	f.Count++
	return f.Count
}

// Starter starts jobs. Start returns once the job is durably accepted, not when it is done.
type Starter interface {
	Start(ctx context.Context, kind string, payload any) error
}

// stepMessage is the queue message type that carries a State.
const stepMessage = "jobs.step"

// QueueRunner runs jobs over a work queue: each step is one message, and a step that is not
// done enqueues the state after it. A failed step is retried by the queue (its backoff and
// dead-lettering apply), from the same cursor.
type QueueRunner struct {
	queue queue.Sender
	reg   *Registry
}

// NewQueueRunner returns a runner that sends steps to q and runs them from reg.
func NewQueueRunner(q queue.Sender, reg *Registry) *QueueRunner {
	return &QueueRunner{queue: q, reg: reg}
}

// Start enqueues the first step of a job.
func (q *QueueRunner) Start(ctx context.Context, kind string, payload any) error {
	return q.StartAfter(ctx, 0, kind, payload)
}

// StartAfter enqueues the first step of a job to run no sooner than delay from now (at most
// queue.MaxDelay): for work that must wait until writes already under way have landed, such
// as the second pass of a deleted bot's purge.
func (q *QueueRunner) StartAfter(ctx context.Context, delay time.Duration, kind string, payload any) error {
	if _, ok := q.reg.steps[kind]; !ok {
		return fmt.Errorf("%w %q", ErrUnknownKind, kind)
	}
	m, err := StartMessage(delay, kind, payload)
	if err != nil {
		return err
	}
	return q.queue.Send(ctx, m)
}

// StartMessage returns the queue message that starts a job of kind with payload no sooner
// than delay from now: what StartAfter sends, for a caller that sends it itself, as part of
// a transaction of its own through the outbox (shared/outbox). A QueueRunner over the queue
// it reaches runs it; nothing here checks that the kind is registered, so the caller names
// a kind the runner's registry has (the platform registers them all at start-up).
func StartMessage(delay time.Duration, kind string, payload any) (queue.Message, error) {
	if kind == "" {
		return queue.Message{}, errors.New("jobs: a job needs a kind")
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return queue.Message{}, fmt.Errorf("jobs: encode %s payload: %w", kind, err)
	}
	return stepMessageOf(State{Kind: kind, Payload: b}, delay)
}

func stepMessageOf(st State, delay time.Duration) (queue.Message, error) {
	m, err := queue.New(stepMessage, st)
	if err != nil {
		return queue.Message{}, err
	}
	m.Delay = delay
	if err := m.Validate(); err != nil {
		return queue.Message{}, err
	}
	return m, nil
}

func (q *QueueRunner) send(ctx context.Context, st State, delay time.Duration) error {
	m, err := stepMessageOf(st, delay)
	if err != nil {
		return err
	}
	return q.queue.Send(ctx, m)
}

// Registry returns the kinds the runner runs.
func (q *QueueRunner) Registry() *Registry { return q.reg }

// Register adds the runner's message handler to a queue mux.
func (q *QueueRunner) Register(mux *queue.Mux) {
	mux.HandleFunc(stepMessage, q.handle)
}

// handle runs one step. The continuation is sent before the message is acknowledged, so a
// crash in between repeats the step (steps are idempotent) rather than losing the job.
func (q *QueueRunner) handle(ctx context.Context, m queue.Message) error {
	var st State
	if err := m.Decode(&st); err != nil {
		return err
	}
	next, err := q.reg.RunStep(ctx, st)
	if d, ok := LaterDelay(err); ok {
		// The same step again, later; counted, so that MaxSteps still ends a job that
		// never gets on. Should the send fail, the queue retries this message instead.
		st.Steps++
		return q.send(ctx, st, d)
	}
	if err != nil {
		return err
	}
	if next.Done {
		return nil
	}
	return q.send(ctx, next, 0)
}
