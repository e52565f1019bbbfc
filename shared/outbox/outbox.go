// Package outbox makes sending a queue message part of a store transaction: the
// transactional outbox. A change that must be followed by background work (a deleted bot's
// purge, the label_added reactions of a label added over the API) stages its messages as
// outbox items written in the change's own transaction, so the change and the promise to
// send commit together or not at all. Once the transaction has committed, the caller
// delivers them at once (best effort, in the request): each item's messages are sent to the
// queue, then the item is deleted. A relay, Sweep, run on a timer (the local process) or on
// a schedule (the jobs Lambda on AWS), sends again whatever items are still there after a
// short grace: the process died, or the queue refused, between the commit and the send.
//
// Delivery is at least once. A message can be sent twice: the sweep finds an item whose
// messages were sent but whose deletion failed, or overtakes a delivery slower than the
// grace, or two sweeps overlap. Every handler of a message sent through the outbox must
// therefore be idempotent, as every queue handler already must (shared/queue).
//
// Items live in Shards partitions, OUTBOX#00 to OUTBOX#15, sorted by the time they were
// staged, so a sweep is one bounded query per shard, never a scan; see docs/outbox.md for
// the reasons (DynamoDB's per-partition throughput).
//
// The package lives beside shared/queue rather than in it: queue is the contract between
// producers and consumers and knows nothing of the store; the outbox is a producer built
// on both, like the families that use it.
package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Shards is the number of outbox partitions. Staged items spread over them by id, so no one
// partition takes every producer's writes. It may be raised, never lowered: a sweep reads
// shards 0 to Shards-1 only, and items in a shard it no longer reads would stay unsent.
const Shards = 16

// Defaults of Config.
const (
	// DefaultGrace is how old an item must be before a sweep sends it. The delivery in the
	// request normally removes an item within milliseconds; the grace keeps a sweep from
	// sending, a second time, what a slow request is still delivering.
	DefaultGrace = 30 * time.Second
	// DefaultBatch bounds the items one sweep reads per shard: 16 x 50 = 800 items per
	// sweep, each sent and deleted, well inside one Lambda invocation.
	DefaultBatch = 50
)

// MaxItemBytes bounds the messages one outbox item holds, as their Message.Size: room for
// the largest message the queue takes (queue.MaxMessageBytes) and the item's own members,
// under DynamoDB's 400 KB item limit. Messages that do not fit one item take several.
const MaxItemBytes = 320 << 10

// itemOverhead is what each message adds to an item beyond its Size: the JSON members.
const itemOverhead = 96

// deliverTimeout bounds a delivery after the commit, which must not depend on the client
// still waiting.
const deliverTimeout = 10 * time.Second

// Config configures an Outbox.
type Config struct {
	// Grace: how old an item must be for Sweep to send it (default DefaultGrace).
	Grace time.Duration
	// Batch: the most items Sweep reads per shard (default DefaultBatch, at most
	// store.MaxQueryLimit).
	Batch int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log receives delivery failures (default: discarded).
	Log *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Grace == 0 {
		c.Grace = DefaultGrace
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
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
	if c.Grace < 0 {
		errs = append(errs, errors.New("grace must not be negative"))
	}
	if c.Batch < 1 || c.Batch > store.MaxQueryLimit {
		errs = append(errs, fmt.Errorf("batch must be 1..%d", store.MaxQueryLimit))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("outbox config: %w", err)
	}
	return nil
}

// Stager is what a family takes of an Outbox: staging messages in a transaction of its own.
// *Outbox implements it; a test passes one that fails, to show that a change is never made
// without the messages that must follow it.
type Stager interface {
	Stage(msgs ...queue.Message) (writes []store.Write, deliver func(context.Context), err error)
}

var _ Stager = (*Outbox)(nil)

// Outbox stages messages in the store and relays them to a queue. It is safe for
// concurrent use.
type Outbox struct {
	store store.Store
	queue queue.Sender
	cfg   Config
}

// New returns the outbox over st that delivers to q. With a nil q (a process that sends
// nothing) Stage still stages and delivering is left to the sweep of a process that has the
// queue; Sweep itself then fails.
func New(st store.Store, q queue.Sender, cfg Config) (*Outbox, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if st == nil {
		return nil, errors.New("outbox: a store is required")
	}
	return &Outbox{store: st, queue: q, cfg: cfg}, nil
}

// record is an outbox item's document.
type record struct {
	ID       string    `json:"id"`
	StagedAt time.Time `json:"staged_at"`
	Messages []message `json:"messages"`
}

// message is one staged queue message. DueAt (staging time + Delay) is kept rather than the
// delay, so that a message sent late by a sweep waits only what is left of its delay.
type message struct {
	Type  string          `json:"type"`
	Body  json.RawMessage `json:"body"`
	DueAt time.Time       `json:"due_at,omitzero"`
}

// shardPK is the partition of shard i.
func shardPK(i int) string { return fmt.Sprintf("OUTBOX#%02d", i) }

// shardOf spreads items over the shards by id (its random part).
func shardOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % Shards)
}

// sortKey orders a shard's items by staging time: zero-padded nanoseconds sort as strings
// in time order, and the id breaks ties.
func sortKey(t time.Time, id string) string { return fmt.Sprintf("%020d#%s", t.UnixNano(), id) }

// Stage returns the writes that put msgs in the outbox, to add to the transaction of the
// change they follow, and deliver, to call once that transaction has committed (never after
// it failed): it sends the messages and clears their items, best effort, with a context of
// its own so that a client hanging up does not cancel it. What deliver cannot send, Sweep
// sends later. Messages are packed into as few items as MaxItemBytes allows: one for a few
// small messages, so staging usually costs the transaction one write.
func (o *Outbox) Stage(msgs ...queue.Message) (writes []store.Write, deliver func(context.Context), err error) {
	if len(msgs) == 0 {
		return nil, func(context.Context) {}, nil
	}
	now := o.cfg.Now().UTC()
	var recs []record
	size := 0
	for i, m := range msgs {
		if err := m.Validate(); err != nil {
			return nil, nil, fmt.Errorf("outbox: message %d: %w", i, err)
		}
		n := m.Size() + itemOverhead
		if len(recs) == 0 || size+n > MaxItemBytes {
			recs = append(recs, record{ID: ids.At("obx", now), StagedAt: now})
			size = 0
		}
		size += n
		sm := message{Type: m.Type, Body: m.Body}
		if m.Delay > 0 {
			sm.DueAt = now.Add(m.Delay)
		}
		r := &recs[len(recs)-1]
		r.Messages = append(r.Messages, sm)
	}
	keys := make([]store.Key, len(recs))
	for i, r := range recs {
		data, err := store.Encode(r)
		if err != nil {
			return nil, nil, err
		}
		keys[i] = store.Key{PK: shardPK(shardOf(r.ID)), SK: sortKey(r.StagedAt, r.ID)}
		writes = append(writes, store.PutOp(store.Item{Key: keys[i], Revision: 1, Data: data}, store.MustNotExist))
	}
	return writes, func(ctx context.Context) { o.deliver(ctx, keys, recs) }, nil
}

// deliver sends the items of a committed transaction, logging what it leaves to the sweep.
func (o *Outbox) deliver(ctx context.Context, keys []store.Key, recs []record) {
	if o.queue == nil {
		return // a process without the queue: the sweep delivers
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deliverTimeout)
	defer cancel()
	for i, r := range recs {
		if err := o.send(ctx, keys[i], r); err != nil {
			o.cfg.Log.WarnContext(ctx, "outbox: not delivered after the commit; the sweep will send it",
				"outbox_id", r.ID, "types", types(r), "error", err)
		}
	}
}

// send sends one item's messages, then deletes the item. A deletion that fails leaves the
// item for the sweep, which sends its messages again: at least once.
func (o *Outbox) send(ctx context.Context, key store.Key, r record) error {
	now := o.cfg.Now()
	msgs := make([]queue.Message, len(r.Messages))
	for i, m := range r.Messages {
		msgs[i] = queue.Message{Type: m.Type, Body: m.Body}
		if !m.DueAt.IsZero() {
			// What is left of the delay, however long: past queue.MaxDelay the SQS sender
			// schedules the message (a sender without schedules refuses it, and the sweep,
			// in the jobs Lambda, which has them, sends it).
			msgs[i].Delay = max(m.DueAt.Sub(now), 0)
		}
	}
	if err := o.queue.Send(ctx, msgs...); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	// Always: a sweep that overtook this delivery may have deleted it already.
	if err := o.store.Delete(ctx, key, store.Always); err != nil {
		return fmt.Errorf("sent, but the item was not cleared (it will be sent again): %w", err)
	}
	return nil
}

func types(r record) []string {
	out := make([]string, len(r.Messages))
	for i, m := range r.Messages {
		out[i] = m.Type
	}
	return out
}

// Result is what one sweep did.
type Result struct {
	// Delivered counts the items whose messages were sent and that were cleared.
	Delivered int `json:"delivered"`
	// Failed counts the items left for the next sweep.
	Failed int `json:"failed"`
	// More is set when a shard held more due items than one batch: the next sweep goes on.
	More bool `json:"more"`
}

// Sweep sends the messages of every item staged more than the grace ago and clears the
// items, at most Batch items per shard, oldest first: one query per shard. An item it cannot
// send stays for the next sweep, and Sweep then returns an error naming how many and how
// old, so that an outbox that stopped draining shows up in the errors of whatever runs it
// (an alarm on AWS). It goes on through the other items and shards.
func (o *Outbox) Sweep(ctx context.Context) (Result, error) {
	var res Result
	if o.queue == nil {
		return res, errors.New("outbox: this process has no queue to sweep to")
	}
	now := o.cfg.Now()
	cutoff := now.Add(-o.cfg.Grace)
	var errs []error
	var oldest time.Time
	for i := range Shards {
		page, err := o.store.Query(ctx, store.Query{
			PK: shardPK(i), To: fmt.Sprintf("%020d#~", cutoff.UnixNano()), Limit: o.cfg.Batch,
		})
		if err != nil {
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			errs = append(errs, fmt.Errorf("shard %d: %w", i, err))
			continue
		}
		res.More = res.More || page.Next != ""
		for _, it := range page.Items {
			r, err := store.Decode[record](it)
			if err == nil {
				err = o.send(ctx, it.Key, r)
			}
			if err == nil {
				res.Delivered++
				continue
			}
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			res.Failed++
			if !r.StagedAt.IsZero() && (oldest.IsZero() || r.StagedAt.Before(oldest)) {
				oldest = r.StagedAt
			}
			if len(errs) < 3 {
				errs = append(errs, fmt.Errorf("item %s: %w", it.SK, err))
			}
		}
	}
	if res.Delivered > 0 || res.Failed > 0 {
		o.cfg.Log.InfoContext(ctx, "outbox swept", "delivered", res.Delivered, "failed", res.Failed, "more", res.More)
	}
	if res.Failed > 0 {
		age := "at an unknown time"
		if !oldest.IsZero() {
			age = now.Sub(oldest).Round(time.Second).String() + " ago"
		}
		return res, fmt.Errorf("outbox: %d item(s) not delivered, the oldest staged %s: %w",
			res.Failed, age, errors.Join(errs...))
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("outbox: sweep: %w", errors.Join(errs...))
	}
	return res, nil
}
