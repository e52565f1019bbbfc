// Package purge erases what a deleted bot leaves in the store, in bounded steps that a job
// runner drives to the end (docs/purge.md).
//
// Deleting a bot removes the bot item, its API tokens and its channels in one transaction;
// everything else the families keep for the bot is erased afterwards by the job Job, which
// runs each family's purge step in turn. Only the family knows its partitions, including
// the ones it creates on the fly (a label's membership partition, a collection field's index
// partition), so each describes them as a Plan and gets its step from Step.
//
// A step deletes at most MaxDeletes items, in transactions of at most
// store.MaxTransactWrites deletes, and is safe to repeat: it deletes what it finds, and
// deleting what another run already deleted is not an error.
package purge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Job is the job kind that erases a deleted bot's data. The bots family starts it when a bot
// is deleted; the platform registers it, running every family's purge step in turn.
const Job = "bots.purge"

// SweepDelay is when the purge runs a second time after the bot's deletion. Requests that
// passed the bot check just before the deletion, request log entries still being written,
// and job steps of the bot already queued may write after the first pass went by; the
// second pass, once they have all ended, erases what they wrote. It outlasts the longest
// request (60 s locally, 30 s behind API Gateway) and a batch upsert's deadline (60 s) many
// times over, and stays within what SQS can delay a message (15 minutes).
const SweepDelay = 10 * time.Minute

// StartMessages returns the queue messages that start the purge of the deleted bot p: the
// job Job at once, and again SweepDelay later. The bots family stages them in the bot's
// deletion transaction (shared/outbox), so a deletion that commits always starts them.
func StartMessages(p Payload) ([]queue.Message, error) {
	if p.BotID == "" || p.AccountID == "" {
		return nil, errors.New("purge: payload needs account_id and bot_id")
	}
	var out []queue.Message
	for _, delay := range []time.Duration{0, SweepDelay} {
		m, err := jobs.StartMessage(delay, Job, p)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// MaxDeletes bounds the items one step deletes: a few transactions, well inside one Lambda
// invocation even at DynamoDB's latency.
const MaxDeletes = 300

// Payload names the deleted bot. It is the payload of Job and of every family's step.
type Payload struct {
	AccountID string `json:"account_id"`
	BotID     string `json:"bot_id"`
}

// DecodePayload reads a step's payload. A payload without a bot id is refused: every key a
// plan builds from it would name no bot, or worse, a prefix shared by every bot.
func DecodePayload(raw json.RawMessage) (Payload, error) {
	var p Payload
	if err := json.Unmarshal(raw, &p); err != nil {
		return Payload{}, fmt.Errorf("purge: payload: %w", err)
	}
	if p.BotID == "" || p.AccountID == "" {
		return Payload{}, errors.New("purge: payload needs account_id and bot_id")
	}
	return p, nil
}

// Part is one partition of a bot's data, read through Index (the table itself by default).
type Part struct {
	Index store.Index
	PK    string
	// Dependents returns the partitions an item of this one leads to, which could not be
	// found again once the item is gone (a label's memberships, a collection's records).
	// They are erased, in order, before the item.
	Dependents func(ctx context.Context, it store.Item) ([]string, error)
	// Delete returns the writes that delete an item, as one transaction, when it must go
	// together with items of other partitions (a channel with its lookup key). A condition
	// that fails means the item was deleted meanwhile, by another run of the same step for
	// one. Without Delete, items are deleted on their own, many per transaction. Delete may
	// first undo what the item stands for outside the store (a channel's webhook registered
	// with its provider): it runs at every attempt to delete the item, so that must be safe
	// to repeat.
	Delete func(ctx context.Context, it store.Item) ([]store.Write, error)
}

// Plan lists the partitions of a bot's data in the order they are erased. It is called at
// every step; a part is found again by its index and partition key, so a plan may differ
// between steps (one that depends on the time does).
type Plan func(ctx context.Context, p Payload) ([]Part, error)

// position is a step's cursor: the part it stopped in and, when it stopped while erasing an
// item's dependents, that item and the first dependent not yet known to be empty.
type position struct {
	Index store.Index `json:"index,omitempty"`
	PK    string      `json:"pk"`
	SK    string      `json:"sk,omitempty"`
	Dep   int         `json:"dep,omitempty"`
}

// Step returns the job step that erases the partitions of plan, MaxDeletes items at most
// per call. The items of each part are read from the top every time: what earlier steps
// erased is gone, so the top is where the work left off.
func Step(st store.Store, plan Plan) jobs.Step {
	return partsStep(st, func(ctx context.Context, raw json.RawMessage) ([]Part, error) {
		p, err := DecodePayload(raw)
		if err != nil {
			return nil, err
		}
		return plan(ctx, p)
	})
}

// partsStep is the step that erases the partitions parts lists for a payload (Step's, and
// EraseStep's for an erased subscriber).
func partsStep(st store.Store, plan func(ctx context.Context, raw json.RawMessage) ([]Part, error)) jobs.Step {
	return func(ctx context.Context, raw json.RawMessage, cursor string) (string, bool, error) {
		parts, err := plan(ctx, raw)
		if err != nil {
			return "", false, err
		}
		var at position
		if cursor != "" {
			if err := json.Unmarshal([]byte(cursor), &at); err != nil {
				return "", false, fmt.Errorf("purge: bad cursor: %w", err)
			}
		}
		// A part the plan no longer has: start over. The parts before it are empty, so
		// checking them again costs one read each.
		i := 0
		for j, part := range parts {
			if part.Index == at.Index && part.PK == at.PK {
				i = j
				break
			}
		}
		e := &eraser{st: st, budget: MaxDeletes}
		for ; i < len(parts); i++ {
			resume := position{}
			if parts[i].Index == at.Index && parts[i].PK == at.PK {
				resume = at
			}
			stop, done, err := e.part(ctx, parts[i], resume)
			if err != nil {
				return "", false, err
			}
			if !done {
				b, err := json.Marshal(stop)
				if err != nil {
					return "", false, err
				}
				return string(b), false, nil
			}
		}
		return "", true, nil
	}
}

// eraser deletes within one step's budget.
type eraser struct {
	st     store.Store
	budget int
	batch  []store.Write
}

// part erases one part. It reports done when the part is empty, else where it stopped.
func (e *eraser) part(ctx context.Context, part Part, resume position) (position, bool, error) {
	here := position{Index: part.Index, PK: part.PK}
	for {
		if e.budget == 0 {
			return here, false, e.flush(ctx)
		}
		page, err := e.st.Query(ctx, store.Query{Index: part.Index, PK: part.PK, Limit: min(e.budget, store.MaxTransactWrites)})
		if err != nil {
			return here, false, err
		}
		if len(page.Items) == 0 {
			return here, true, e.flush(ctx)
		}
		deleted := 0
		for _, it := range page.Items {
			if e.budget == 0 {
				return here, false, e.flush(ctx)
			}
			if part.Dependents != nil {
				from := 0
				if resume.SK == it.SK {
					from = resume.Dep
				}
				resume = position{} // only the first item can be the one a step stopped in
				deps, err := part.Dependents(ctx, it)
				if err != nil {
					return here, false, err
				}
				for j := from; j < len(deps); j++ {
					empty, err := e.drain(ctx, deps[j])
					if err != nil {
						return here, false, err
					}
					if !empty {
						stop := here
						stop.SK, stop.Dep = it.SK, j
						return stop, false, e.flush(ctx)
					}
				}
			}
			n, err := e.delete(ctx, part, it)
			if err != nil {
				return here, false, err
			}
			deleted += n
		}
		if err := e.flush(ctx); err != nil {
			return here, false, err
		}
		if deleted == 0 {
			// Every item was already deleted by someone else, and the read still showed
			// it (a secondary index lags its table): let a later step read again rather
			// than spin here.
			return here, false, nil
		}
	}
}

// delete deletes one item (queued in the batch unless the part deletes items itself) and
// reports how many deletions it counts as.
func (e *eraser) delete(ctx context.Context, part Part, it store.Item) (int, error) {
	e.budget--
	if part.Delete == nil {
		e.batch = append(e.batch, store.DeleteOp(it.Key, store.Always))
		if len(e.batch) == store.MaxTransactWrites {
			return 1, e.flush(ctx)
		}
		return 1, nil
	}
	writes, err := part.Delete(ctx, it)
	if err != nil {
		return 0, err
	}
	err = e.st.Transact(ctx, writes)
	if errors.Is(err, store.ErrConditionFailed) {
		return 0, nil // deleted meanwhile
	}
	if err != nil {
		return 0, fmt.Errorf("purge: delete %s/%s: %w", it.PK, it.SK, err)
	}
	return 1, nil
}

// drain deletes the items of partition pk within the budget and reports whether it is empty.
func (e *eraser) drain(ctx context.Context, pk string) (bool, error) {
	for {
		if e.budget == 0 {
			return false, nil
		}
		page, err := e.st.Query(ctx, store.Query{PK: pk, Limit: min(e.budget, store.MaxTransactWrites)})
		if err != nil {
			return false, err
		}
		if len(page.Items) == 0 {
			return true, nil
		}
		writes := make([]store.Write, len(page.Items))
		for i, it := range page.Items {
			writes[i] = store.DeleteOp(it.Key, store.Always)
		}
		if err := e.st.Transact(ctx, writes); err != nil {
			return false, fmt.Errorf("purge: delete from %s: %w", pk, err)
		}
		e.budget -= len(writes)
	}
}

func (e *eraser) flush(ctx context.Context) error {
	if len(e.batch) == 0 {
		return nil
	}
	err := e.st.Transact(ctx, e.batch)
	e.batch = e.batch[:0]
	if err != nil {
		return fmt.Errorf("purge: delete: %w", err)
	}
	return nil
}

// Run drives step to the end for p (a Payload, or an Erasure for an erase step) in the
// calling goroutine, for tests and tools; the service runs purges and erasures through the
// job runner, one step per message.
func Run(ctx context.Context, step jobs.Step, p any) error {
	raw, err := json.Marshal(p)
	if err != nil {
		return err
	}
	cursor := ""
	for range jobs.MaxSteps {
		next, done, err := step(ctx, raw, cursor)
		if err != nil || done {
			return err
		}
		cursor = next
	}
	return fmt.Errorf("purge: %d steps without finishing", jobs.MaxSteps)
}
