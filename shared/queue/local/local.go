// Package local is the in-process work queue of the local process. Messages are items in
// the store (the same SQLite file as everything else), so they survive restarts, and
// goroutines drain them with SQS's semantics: a delivered message is leased (invisible) for
// a visibility timeout, deleted when its handler succeeds, made visible again with backoff
// when it fails, and moved to a dead-letter partition after MaxAttempts deliveries.
//
// Layout in the store, per queue name N:
//
//	PK QUEUE#N      SK MSG#<id>   a pending or leased message
//	  GSI1 PK QUEUE#N, SK <visible-at, 20-digit unix ns>#<id>   due order
//	PK QUEUE#N#DLQ  SK <id>       a dead letter
//
// Every state change is a write conditioned on the revision the worker last saw, so two
// workers (goroutines of one process, or two processes on one file) never both hold a
// message: whoever writes second fails its condition and moves on.
package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Config configures a Queue. Zero fields take the defaults documented on each.
type Config struct {
	// Name identifies the queue; each name is its own store partition. Required.
	Name string
	// Concurrency is the number of worker goroutines (default 4).
	Concurrency int
	// VisibilityTimeout is how long a delivered message stays leased before another worker
	// may take it (default 30 s). Handlers doing longer work call queue.ExtendVisibility.
	VisibilityTimeout time.Duration
	// MaxAttempts is the number of deliveries after which a message that still failed is
	// dead-lettered (default 5), like an SQS redrive policy's maxReceiveCount.
	MaxAttempts int
	// Backoff spaces retries (default 1 s doubling to 5 min).
	Backoff backoff.Policy
	// PollInterval is how often idle workers look for due messages (default 1 s). Sends and
	// retries scheduled by this process wake workers at once; polling finds messages sent
	// by another process (the admin CLI) and leases abandoned by a crashed one.
	PollInterval time.Duration
	// Retention is how long a message, and then its dead letter, is kept (default 14 days,
	// SQS's maximum).
	Retention time.Duration
	// Now is the clock for visibility times (default time.Now). Waits use real timers, so
	// tests shorten durations rather than fake the clock.
	Now func() time.Time
	// Log receives worker failures (default: discarded).
	Log *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Concurrency == 0 {
		c.Concurrency = 4
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = 30 * time.Second
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 5
	}
	if c.Backoff == (backoff.Policy{}) {
		c.Backoff = backoff.Policy{Base: time.Second, Max: 5 * time.Minute}
	}
	if c.PollInterval == 0 {
		c.PollInterval = time.Second
	}
	if c.Retention == 0 {
		c.Retention = 14 * 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" || strings.ContainsAny(c.Name, "#") {
		errs = append(errs, errors.New("name is required and may not contain '#'"))
	}
	if c.Concurrency < 1 {
		errs = append(errs, errors.New("concurrency must be at least 1"))
	}
	if c.VisibilityTimeout <= 0 {
		errs = append(errs, errors.New("visibility timeout must be positive"))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, errors.New("max attempts must be at least 1"))
	}
	if c.Backoff.Base < 0 || c.Backoff.Max < c.Backoff.Base {
		errs = append(errs, errors.New("backoff needs 0 <= min <= max"))
	}
	if c.PollInterval <= 0 {
		errs = append(errs, errors.New("poll interval must be positive"))
	}
	if c.Retention <= 0 {
		errs = append(errs, errors.New("retention must be positive"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("local queue config: %w", err)
	}
	return nil
}

// Queue is one named queue in the store. Send may be called from any goroutine (and any
// process on the same store); Start runs the workers of this process.
type Queue struct {
	store store.Store
	cfg   Config
	pk    string
	dlqPK string

	wake chan struct{} // wakes idle workers; buffered, sends never block

	mu       sync.Mutex
	started  bool
	stopping chan struct{}      // closed by Stop: lease nothing more
	cancel   context.CancelFunc // cancels handlers when Stop's deadline passes
	workers  sync.WaitGroup
}

var _ queue.Sender = (*Queue)(nil)

// New returns the queue cfg.Name over st.
func New(st store.Store, cfg Config) (*Queue, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Queue{
		store: st,
		cfg:   cfg,
		pk:    "QUEUE#" + cfg.Name,
		dlqPK: "QUEUE#" + cfg.Name + "#DLQ",
		wake:  make(chan struct{}, cfg.Concurrency),
	}, nil
}

// record is a message as stored.
type record struct {
	ID     string          `json:"id"`
	Type   string          `json:"type"`
	Body   json.RawMessage `json:"body"`
	SentAt time.Time       `json:"sent_at"`
	// DueAt is when the message was first due (SentAt plus its Delay): a delayed message
	// is kept Retention after that, however long it waited (up to queue.MaxScheduledDelay).
	DueAt     time.Time `json:"due_at,omitzero"`
	VisibleAt time.Time `json:"visible_at"`
	// Attempts counts deliveries (leases), including one that is running now.
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	DeadAt    time.Time `json:"dead_at,omitzero"`
}

// maxErrorLen bounds the handler error kept with a message: enough to debug a dead letter,
// not enough to bloat the item.
const maxErrorLen = 1024

func (q *Queue) msgKey(id string) store.Key { return store.Key{PK: q.pk, SK: "MSG#" + id} }

// dueKey orders messages by the time they become visible. Zero-padded nanoseconds sort as
// strings in time order.
func dueKey(t time.Time, id string) string { return fmt.Sprintf("%020d#%s", t.UnixNano(), id) }

// keptFrom is when rec's retention starts: when it was first due.
func keptFrom(rec record) time.Time {
	if rec.DueAt.After(rec.SentAt) {
		return rec.DueAt
	}
	return rec.SentAt
}

// item renders rec as the message item at revision rev.
func (q *Queue) item(rec record, rev int64) (store.Item, error) {
	b, err := store.Encode(rec)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:       q.msgKey(rec.ID),
		GSI1:      store.IndexKey{PK: q.pk, SK: dueKey(rec.VisibleAt, rec.ID)},
		Revision:  rev,
		Data:      b,
		ExpiresAt: keptFrom(rec).Add(q.cfg.Retention),
	}, nil
}

// Send stores the messages. Each group of up to store.MaxTransactWrites is one transaction:
// all of it is enqueued or none.
func (q *Queue) Send(ctx context.Context, msgs ...queue.Message) error {
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	now := q.cfg.Now()
	var earliest time.Time
	due := 0
	for len(msgs) > 0 {
		n := min(len(msgs), store.MaxTransactWrites)
		writes := make([]store.Write, 0, n)
		for _, m := range msgs[:n] {
			rec := record{ID: ids.At("msg", now), Type: m.Type, Body: m.Body, SentAt: now, DueAt: now.Add(m.Delay), VisibleAt: now.Add(m.Delay)}
			if m.Delay == 0 {
				due++
			} else if earliest.IsZero() || rec.VisibleAt.Before(earliest) {
				earliest = rec.VisibleAt
			}
			it, err := q.item(rec, 1)
			if err != nil {
				return err
			}
			writes = append(writes, store.PutOp(it, store.MustNotExist))
		}
		if err := q.store.Transact(ctx, writes); err != nil {
			return fmt.Errorf("queue %s: send: %w", q.cfg.Name, err)
		}
		msgs = msgs[n:]
	}
	for range min(due, q.cfg.Concurrency) {
		q.wakeOne()
	}
	q.wakeAt(earliest)
	return nil
}

// wakeAt wakes one idle worker at t (now, if t has passed), so delayed messages and
// retries run on time without tight polling.
func (q *Queue) wakeAt(t time.Time) {
	if t.IsZero() {
		return
	}
	if d := t.Sub(q.cfg.Now()); d > 0 {
		time.AfterFunc(d, q.wakeOne)
		return
	}
	q.wakeOne()
}

func (q *Queue) wakeOne() {
	select {
	case q.wake <- struct{}{}:
	default: // enough wake-ups pending already
	}
}

// Start runs cfg.Concurrency workers that deliver messages to h until Stop.
func (q *Queue) Start(h queue.Handler) error {
	if h == nil {
		return errors.New("queue: Start needs a handler")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started {
		return errors.New("queue: already started")
	}
	q.started = true
	q.stopping = make(chan struct{})
	// Handlers get a context of their own: Stop cancels it only when draining runs out of
	// time, so a shutdown first lets in-flight work finish.
	ctx, cancel := context.WithCancel(context.Background())
	q.cancel = cancel
	for range q.cfg.Concurrency {
		q.workers.Add(1)
		go q.work(ctx, h)
	}
	return nil
}

// Stop stops leasing messages and waits for the handlers in flight to finish. When ctx ends
// first it cancels their context and returns ctx's error without waiting further; any
// message whose handler did not finish becomes visible again after its visibility timeout,
// as after a crash.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	if !q.started {
		q.mu.Unlock()
		return nil
	}
	select {
	case <-q.stopping:
	default:
		close(q.stopping)
	}
	q.mu.Unlock()

	done := make(chan struct{})
	go func() { q.workers.Wait(); close(done) }()
	select {
	case <-done:
		q.cancel()
		return nil
	case <-ctx.Done():
		q.cancel()
		return ctx.Err()
	}
}

// work is one worker goroutine: lease, handle, settle, until Stop.
func (q *Queue) work(ctx context.Context, h queue.Handler) {
	defer q.workers.Done()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		select {
		case <-q.stopping:
			return
		default:
		}
		l, err := q.lease(ctx)
		if err != nil && ctx.Err() == nil {
			q.cfg.Log.Warn("queue lease failed", "queue", q.cfg.Name, "error", err)
		}
		if l != nil {
			q.run(ctx, h, l)
			continue
		}
		poll.Reset(q.cfg.PollInterval)
		select {
		case <-q.stopping:
			return
		case <-q.wake:
		case <-poll.C:
		}
	}
}

// lease claims the first due message that no other worker claims first, or returns nil.
func (q *Queue) lease(ctx context.Context) (*lease, error) {
	now := q.cfg.Now()
	// A few more candidates than workers: the others may win the first ones.
	page, err := q.store.Query(ctx, store.Query{
		Index: store.GSI1, PK: q.pk, To: dueKey(now, "~"), Limit: q.cfg.Concurrency + 4,
	})
	if err != nil {
		return nil, err
	}
	for _, it := range page.Items {
		rec, err := store.Decode[record](it)
		if err != nil {
			q.cfg.Log.Error("queue: undecodable message skipped", "queue", q.cfg.Name, "key", it.SK, "error", err)
			continue
		}
		if rec.Attempts >= q.cfg.MaxAttempts {
			// Its last delivery never settled (a crash or an expired lease): do not run
			// it again, as SQS moves a message past maxReceiveCount on receive.
			if rec.LastError == "" {
				rec.LastError = "visibility timeout expired on the last attempt"
			}
			if err := q.deadLetter(ctx, it, rec); err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return nil, err
			}
			continue
		}
		rec.Attempts++
		rec.VisibleAt = now.Add(q.cfg.VisibilityTimeout)
		next, err := q.item(rec, it.Revision+1)
		if err != nil {
			return nil, err
		}
		switch err := q.store.Put(ctx, next, store.RevisionIs(it.Revision)); {
		case errors.Is(err, store.ErrConditionFailed):
			continue // another worker claimed it (or it changed) since our read
		case err != nil:
			return nil, err
		}
		if len(page.Items) > 1 {
			q.wakeOne() // more may be due: let an idle worker look instead of waiting to poll
		}
		return &lease{q: q, item: next, rec: rec}, nil
	}
	return nil, nil
}

// run calls the handler and settles the message by its outcome.
func (q *Queue) run(ctx context.Context, h queue.Handler, l *lease) {
	msg := queue.Message{ID: l.rec.ID, Type: l.rec.Type, Body: l.rec.Body, Attempt: l.rec.Attempts}
	herr := queue.Call(queue.WithExtender(ctx, l), h, msg)

	// Settle even when the handlers' context is cancelled: the outcome is known, and
	// recording it spares a redelivery.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	var err error
	if herr == nil {
		err = l.ack(sctx)
	} else {
		err = l.nack(sctx, herr)
	}
	if errors.Is(err, store.ErrConditionFailed) {
		q.cfg.Log.Warn("queue: lease lost before the handler finished; the message may run again",
			"queue", q.cfg.Name, "message_id", msg.ID, "type", msg.Type, "attempt", msg.Attempt)
	} else if err != nil {
		q.cfg.Log.Error("queue: settle failed; the message will be redelivered",
			"queue", q.cfg.Name, "message_id", msg.ID, "type", msg.Type, "error", err)
	}
	if herr != nil {
		q.cfg.Log.Warn("queue: handler failed", "queue", q.cfg.Name, "message_id", msg.ID,
			"type", msg.Type, "attempt", msg.Attempt, "error", herr)
	}
}

// lease is a worker's claim on one message: the item as it last wrote it.
type lease struct {
	q *Queue

	mu   sync.Mutex // the handler may extend from another goroutine while we settle
	item store.Item
	rec  record
}

// ErrLeaseLost is returned by ExtendVisibility when the message's lease expired and another
// worker took it: the handler should stop, since its work will be redone.
var ErrLeaseLost = errors.New("queue: lease lost")

// ExtendVisibility implements queue.Extender.
func (l *lease) ExtendVisibility(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return errors.New("queue: visibility extension must be positive")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.rec
	rec.VisibleAt = l.q.cfg.Now().Add(d)
	if err := l.write(ctx, rec); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return ErrLeaseLost
		}
		return err
	}
	return nil
}

// write replaces the leased item with rec, if nobody else changed it.
func (l *lease) write(ctx context.Context, rec record) error {
	next, err := l.q.item(rec, l.item.Revision+1)
	if err != nil {
		return err
	}
	if err := l.q.store.Put(ctx, next, store.RevisionIs(l.item.Revision)); err != nil {
		return err
	}
	l.item, l.rec = next, rec
	return nil
}

// ack deletes the message after success.
func (l *lease) ack(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.q.store.Delete(ctx, l.item.Key, store.RevisionIs(l.item.Revision))
}

// nack schedules a retry after the backoff (or the longer delay the handler's error asks
// for, queue.RetryAfter), or dead-letters the message on its last attempt.
func (l *lease) nack(ctx context.Context, herr error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.rec
	rec.LastError = truncate(herr.Error(), maxErrorLen)
	if rec.Attempts >= l.q.cfg.MaxAttempts {
		return l.q.deadLetter(ctx, l.item, rec)
	}
	rec.VisibleAt = l.q.cfg.Now().Add(max(l.q.cfg.Backoff.Delay(rec.Attempts), queue.RetryDelay(herr)))
	if err := l.write(ctx, rec); err != nil {
		return err
	}
	l.q.wakeAt(rec.VisibleAt)
	return nil
}

// deadLetter moves the message at item (as last seen) to the dead-letter partition, in one
// transaction so a message is never in both places nor in neither.
func (q *Queue) deadLetter(ctx context.Context, it store.Item, rec record) error {
	rec.DeadAt = q.cfg.Now()
	b, err := store.Encode(rec)
	if err != nil {
		return err
	}
	dead := store.Item{
		Key: store.Key{PK: q.dlqPK, SK: rec.ID}, Revision: 1, Data: b,
		ExpiresAt: rec.DeadAt.Add(q.cfg.Retention),
	}
	err = q.store.Transact(ctx, []store.Write{
		store.DeleteOp(it.Key, store.RevisionIs(it.Revision)),
		store.PutOp(dead, store.Always),
	})
	if err == nil {
		q.cfg.Log.Error("queue: message dead-lettered", "queue", q.cfg.Name, "message_id", rec.ID,
			"type", rec.Type, "attempts", rec.Attempts, "error", rec.LastError)
	}
	return err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// DeadLetter is a message that failed MaxAttempts times.
type DeadLetter struct {
	Message   queue.Message
	SentAt    time.Time
	DeadAt    time.Time
	LastError string
}

// DeadLetters lists one page of the queue's dead letters, oldest first.
func (q *Queue) DeadLetters(ctx context.Context, limit int, cursor string) ([]DeadLetter, string, error) {
	page, err := q.store.Query(ctx, store.Query{PK: q.dlqPK, Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]DeadLetter, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[record](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, DeadLetter{
			Message:   queue.Message{ID: rec.ID, Type: rec.Type, Body: rec.Body, Attempt: rec.Attempts},
			SentAt:    rec.SentAt,
			DeadAt:    rec.DeadAt,
			LastError: rec.LastError,
		})
	}
	return out, page.Next, nil
}

// Redrive moves the dead letter id back onto the queue with a fresh attempt count, for an
// operator who has fixed the cause. It returns store.ErrNotFound for an unknown id.
func (q *Queue) Redrive(ctx context.Context, id string) error {
	dk := store.Key{PK: q.dlqPK, SK: id}
	it, err := q.store.Get(ctx, dk)
	if err != nil {
		return err
	}
	rec, err := store.Decode[record](it)
	if err != nil {
		return err
	}
	now := q.cfg.Now()
	rec.Attempts, rec.LastError, rec.DeadAt = 0, "", time.Time{}
	rec.SentAt, rec.VisibleAt = now, now
	msg, err := q.item(rec, 1)
	if err != nil {
		return err
	}
	if err := q.store.Transact(ctx, []store.Write{
		store.DeleteOp(dk, store.RevisionIs(it.Revision)),
		store.PutOp(msg, store.MustNotExist),
	}); err != nil {
		return fmt.Errorf("queue %s: redrive %s: %w", q.cfg.Name, id, err)
	}
	q.wakeOne()
	return nil
}
