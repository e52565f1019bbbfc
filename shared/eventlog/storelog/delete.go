package storelog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/store"
)

// MaxDeletes bounds the items one DeleteBot call deletes (shared/purge's bound: a few
// transactions, well inside one Lambda invocation).
const MaxDeletes = 300

// DeleteBot implements eventlog.Log. The counters say where the events are, so each
// counter goes only once its events' partition is empty: a call that stops half-way leaves
// every event still findable by the next. The ids go last.
func (l *Log) DeleteBot(ctx context.Context, bot string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	d := &deleter{st: l.st, budget: MaxDeletes}
	for s := range Shards {
		for {
			page, err := l.st.Query(ctx, store.Query{PK: aggPK(bot, s), Limit: 100})
			if err != nil {
				return false, fmt.Errorf("storelog: delete bot: %w", err)
			}
			if len(page.Items) == 0 {
				break
			}
			for _, it := range page.Items {
				day, name, _, ok := parseAgg(it.SK)
				if ok {
					empty, err := d.drain(ctx, eventPK(bot, day, name, s))
					if err != nil || !empty {
						return false, err
					}
				}
				if !d.add(ctx, it.Key) {
					return false, d.flush(ctx)
				}
			}
			if err := d.flush(ctx); err != nil {
				return false, err
			}
		}
	}
	for s := range Shards {
		empty, err := d.drain(ctx, idPK(bot, s))
		if err != nil || !empty {
			return false, err
		}
	}
	return true, d.flush(ctx)
}

// deleter deletes within one call's budget, in transactions of store.MaxTransactWrites.
type deleter struct {
	st     store.Store
	budget int
	batch  []store.Write
	err    error
}

// add queues the deletion of key; false when the budget is spent (key is not queued).
func (d *deleter) add(ctx context.Context, key store.Key) bool {
	if d.budget == 0 {
		return false
	}
	d.budget--
	d.batch = append(d.batch, store.DeleteOp(key, store.Always))
	if len(d.batch) == store.MaxTransactWrites {
		d.err = d.flush(ctx)
	}
	return d.err == nil
}

func (d *deleter) flush(ctx context.Context) error {
	if d.err != nil {
		return d.err
	}
	if len(d.batch) == 0 {
		return nil
	}
	err := d.st.Transact(ctx, d.batch)
	d.batch = d.batch[:0]
	if err != nil {
		return fmt.Errorf("storelog: delete bot: %w", err)
	}
	return nil
}

// drain deletes the items of partition pk; empty reports that none is left (false: the
// budget ran out first, and what was queued is deleted).
func (d *deleter) drain(ctx context.Context, pk string) (bool, error) {
	for {
		if err := d.flush(ctx); err != nil {
			return false, err
		}
		if d.budget == 0 {
			return false, nil
		}
		page, err := d.st.Query(ctx, store.Query{PK: pk, Limit: min(d.budget, store.MaxTransactWrites)})
		if err != nil {
			return false, fmt.Errorf("storelog: delete bot: %w", err)
		}
		if len(page.Items) == 0 {
			return true, nil
		}
		for _, it := range page.Items {
			if !d.add(ctx, it.Key) {
				return false, d.flush(ctx)
			}
		}
	}
}

// subscriberBatch is the most events one DeleteSubscriber call erases: each is two deletes
// and at most one counter's decrement, so a call writes at most MaxDeletes items.
const subscriberBatch = MaxDeletes / 3

// perTransaction is the most events one transaction of DeleteSubscriber erases: their three
// writes each fit store.MaxTransactWrites.
const perTransaction = store.MaxTransactWrites / 3

// DeleteSubscriber implements eventlog.Log. The subscriber's events are one range of GSI1;
// each call reads at most subscriberBatch of them and erases each with its id item, taking
// the events off their counters in the same transaction, so a counter counts exactly the
// events stored (Scan and DeleteBot find events through the counters, and a counter at
// zero names an empty partition, which DeleteBot still clears). The event's delete is
// conditional (MustExist): an event another call erased meanwhile, or one GSI1 still lists
// after its deletion (the index is eventually consistent), is left out and not subtracted
// twice. An event GSI1 does not list yet is missed: the caller erases again later.
func (l *Log) DeleteSubscriber(ctx context.Context, bot, subscriber string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := eventlog.CheckDeleteSubscriber(bot, subscriber); err != nil {
		return false, err
	}
	page, err := l.st.Query(ctx, store.Query{Index: store.GSI1, PK: subPK(bot, subscriber), Limit: subscriberBatch})
	if err != nil {
		return false, fmt.Errorf("storelog: delete subscriber: %w", err)
	}
	events := make([]eventlog.Event, 0, len(page.Items))
	for _, it := range page.Items {
		e, err := store.Decode[eventlog.Event](it)
		if err != nil {
			return false, fmt.Errorf("storelog: delete subscriber: %w", err)
		}
		events = append(events, e)
	}
	for len(events) > 0 {
		n := min(len(events), perTransaction)
		if err := l.erase(ctx, events[:n]); err != nil {
			return false, err
		}
		events = events[n:]
	}
	return page.Next == "", nil
}

// erase deletes events (at most perTransaction, each stored once, as Scan decodes them) in
// one transaction with their ids and counters, leaving out those that are gone already.
func (l *Log) erase(ctx context.Context, events []eventlog.Event) error {
	for len(events) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		writes := make([]store.Write, 0, 3*len(events))
		counters := map[store.Key]int64{}
		var order []store.Key
		for _, e := range events {
			s := shard(e.ID)
			day := e.At.UTC().Format(dayLayout)
			writes = append(writes,
				store.DeleteOp(store.Key{PK: eventPK(e.BotID, day, e.Name, s), SK: eventSK(e.At, e.ID)}, store.MustExist),
				store.DeleteOp(idKey(e.BotID, e.ID), store.Always))
			k := aggKey(e.BotID, s, day, e.Name, e.Channel)
			if _, ok := counters[k]; !ok {
				order = append(order, k)
			}
			counters[k]--
		}
		for _, k := range order {
			writes = append(writes, store.AddOp(k, counters[k], time.Time{}))
		}
		err := l.st.Transact(ctx, writes)
		var ce *store.ConditionError
		if errors.As(err, &ce) && ce.Index < 2*len(events) && ce.Index%2 == 0 {
			// That event is gone already (with its id and from its counter): erase the others.
			events = append(events[:ce.Index/2:ce.Index/2], events[ce.Index/2+1:]...)
			continue
		}
		if err != nil {
			return fmt.Errorf("storelog: delete subscriber: %w", err)
		}
		return nil
	}
	return nil
}
