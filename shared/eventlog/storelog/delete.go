package storelog

import (
	"context"
	"fmt"

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
