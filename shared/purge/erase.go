package purge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// EraseJob is the job kind that erases what the families keep about one erased subscriber
// beyond the subscriber's own items, which the erasure itself deleted (docs/subscribers.md,
// "Erasure"): the subscriber's events, an email campaign's copy of their address. The
// subscribers family stages it in the erasure's transaction; the platform registers it,
// running every family's Erase step in turn (shared/family).
const EraseJob = "subscribers.erase"

// Erasure names the erased subscriber. It is the payload of EraseJob and of every family's
// Erase step.
type Erasure struct {
	BotID        string `json:"bot_id"`
	SubscriberID string `json:"subscriber_id"`
}

// DecodeErasure reads an erase step's payload. Both ids are required: a key built from an
// empty one could name every subscriber's items.
func DecodeErasure(raw json.RawMessage) (Erasure, error) {
	var e Erasure
	if err := json.Unmarshal(raw, &e); err != nil {
		return Erasure{}, fmt.Errorf("erase: payload: %w", err)
	}
	if e.BotID == "" || e.SubscriberID == "" {
		return Erasure{}, errors.New("erase: payload needs bot_id and subscriber_id")
	}
	return e, nil
}

// ErasePlan lists the partitions of what a family keeps about the erased subscriber e, in
// the order they are erased, as Plan does for a deleted bot.
type ErasePlan func(ctx context.Context, e Erasure) ([]Part, error)

// EraseStep returns the job step that erases the partitions of plan for an erased
// subscriber, with Step's bounds and guarantees.
func EraseStep(st store.Store, plan ErasePlan) jobs.Step {
	return partsStep(st, func(ctx context.Context, raw json.RawMessage) ([]Part, error) {
		e, err := DecodeErasure(raw)
		if err != nil {
			return nil, err
		}
		return plan(ctx, e)
	})
}

// EraseEach returns an erase step that reads a page of the items query names for the erased
// subscriber (the bot's campaigns, its connections) and calls each for every item, a page a
// step; the cursor is the query's. For a family whose copies of a subscriber sit under items
// it can list, not in partitions of their own.
func EraseEach(st store.Store, query func(e Erasure) store.Query, each func(ctx context.Context, e Erasure, it store.Item) error) jobs.Step {
	return func(ctx context.Context, raw json.RawMessage, cursor string) (string, bool, error) {
		e, err := DecodeErasure(raw)
		if err != nil {
			return "", false, err
		}
		q := query(e)
		q.Cursor = cursor
		page, err := st.Query(ctx, q)
		if err != nil {
			return "", false, err
		}
		for _, it := range page.Items {
			if err := each(ctx, e, it); err != nil {
				return "", false, err
			}
		}
		return page.Next, page.Next == "", nil
	}
}
