package collections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/botplatform/api/shared/store"
)

// PurgeJob is the job kind that deletes the items of a deleted collection, or the index
// entries of removed fields, in bounded steps.
const PurgeJob = "collections.purge"

// purgePayload says what to purge. Whole purges every partition of the collection and then
// its tombstone; otherwise only the index partitions of Fields.
type purgePayload struct {
	Bot        string   `json:"bot_id"`
	Collection string   `json:"collection_id"`
	Fields     []string `json:"fields"`
	Whole      bool     `json:"whole"`
}

func (s *Service) startPurge(ctx context.Context, p purgePayload) error {
	if s.jobs == nil {
		return errors.New("collections: no job runner to purge with")
	}
	if err := s.jobs.Start(ctx, PurgeJob, p); err != nil {
		return fmt.Errorf("start purge of %s: %w", p.Collection, err)
	}
	return nil
}

// partitions lists what p purges, in order.
func (p purgePayload) partitions() []string {
	var out []string
	if p.Whole {
		out = append(out, recordsPK(p.Bot, p.Collection), externalPK(p.Bot, p.Collection), batchPK(p.Bot, p.Collection))
	}
	for _, f := range p.Fields {
		out = append(out, indexPK(p.Bot, p.Collection, f))
	}
	return out
}

// Purge budget of one step: a step stays well within one Lambda invocation.
const (
	purgePage       = store.MaxTransactWrites
	purgeStepWrites = 10
)

// PurgeStep runs one step of a purge job: it deletes up to purgeStepWrites pages of items,
// partition after partition; the cursor is the partition it is in. Deleting what is already
// gone is harmless, so a repeated step is too.
func (s *Service) PurgeStep(ctx context.Context, raw json.RawMessage, cursor string) (string, bool, error) {
	var p purgePayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", false, fmt.Errorf("purge: payload: %w", err)
	}
	if p.Whole {
		// The tombstone is written in the deletion's transaction and removed last: without
		// it the collection was never deleted (nothing to do) or is already purged.
		if _, err := s.store.Get(ctx, tombstoneKey(p.Bot, p.Collection)); errors.Is(err, store.ErrNotFound) {
			return "", true, nil
		} else if err != nil {
			return "", false, err
		}
	} else if c, err := s.load(ctx, p.Bot, p.Collection); err == nil {
		// Field keys are never reused, so a key still in the schema is a wrong payload.
		for _, f := range c.Fields {
			if slices.Contains(p.Fields, f.Key) {
				return "", false, fmt.Errorf("purge: field %s of %s is still in use", f.Key, p.Collection)
			}
		}
	}
	parts := p.partitions()
	i := 0
	if cursor != "" {
		n, err := strconv.Atoi(cursor)
		if err != nil || n < 0 || n > len(parts) {
			return "", false, fmt.Errorf("purge: bad cursor %q", cursor)
		}
		i = n
	}
	for budget := purgeStepWrites; i < len(parts) && budget > 0; budget-- {
		page, err := s.store.Query(ctx, store.Query{PK: parts[i], Limit: purgePage})
		if err != nil {
			return "", false, err
		}
		if len(page.Items) == 0 {
			i++
			continue
		}
		writes := make([]store.Write, len(page.Items))
		for j, it := range page.Items {
			writes[j] = store.DeleteOp(it.Key, store.Always)
		}
		if err := s.store.Transact(ctx, writes); err != nil {
			return "", false, fmt.Errorf("purge %s: %w", parts[i], err)
		}
	}
	if i < len(parts) {
		return strconv.Itoa(i), false, nil
	}
	if p.Whole {
		if err := s.store.Delete(ctx, tombstoneKey(p.Bot, p.Collection), store.Always); err != nil {
			return "", false, err
		}
	}
	return "", true, nil
}
