package collections

import (
	"context"
	"errors"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// A batch upsert's status item is the single point at which all of its records change: a
// pending version is part of its record only once the status says committed. Status moves
// once, from pending to committed or aborted, by a write conditioned on the item's revision
// (1 while pending), so a batch commits or aborts exactly once whoever races for it.
const (
	batchPending   = "pending"
	batchCommitted = "committed"
	batchAborted   = "aborted"
)

// batchDeadline is how long a batch may stay pending. Past it, the process that runs it is
// presumed dead and any writer may abort it; the batch itself never commits after it.
const batchDeadline = 60 * time.Second

// abortedRetention bounds how long the status of an aborted batch is kept when nobody
// finishes its roll-back (normally the status is deleted once every record is rolled back).
// A missing status reads as aborted, so letting it expire is safe; a committed status is
// deleted only once every record of the batch has folded its pending version in.
const abortedRetention = 30 * 24 * time.Hour

type batchDoc struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Started  time.Time `json:"started"`
	Deadline time.Time `json:"deadline"`
	// Records lists every record the batch writes, so that whoever finishes the batch in
	// place of a process that died (sweep) finds them all, including records it was
	// creating, which no reader or writer would otherwise come across.
	Records []string `json:"records"`
}

// statuses caches batch states for one request, so a page of records of one batch costs one
// status read, and so one request sees every record of a batch in the same state (as far
// as their items have not been folded meanwhile, see docs/collections.md).
type statuses map[string]batchDoc

func (s *Service) status(ctx context.Context, bot, col, batch string, cache statuses) (batchDoc, error) {
	if b, ok := cache[batch]; ok {
		return b, nil
	}
	it, err := s.store.Get(ctx, batchKey(bot, col, batch))
	var b batchDoc
	switch {
	case errors.Is(err, store.ErrNotFound):
		b = batchDoc{ID: batch, State: batchAborted}
	case err != nil:
		return batchDoc{}, err
	default:
		if b, err = store.Decode[batchDoc](it); err != nil {
			return batchDoc{}, err
		}
	}
	if cache != nil && b.State != batchPending {
		cache[batch] = b // a decided state never changes
	}
	return b, nil
}

// visible returns the version of d that readers see: the pending one if its batch
// committed, else the committed one (nil: the record does not exist for readers).
func (s *Service) visible(ctx context.Context, bot, col string, d *recordDoc, cache statuses) (*version, error) {
	if d.Pending == nil {
		return d.Current, nil
	}
	b, err := s.status(ctx, bot, col, d.Pending.Batch, cache)
	if err != nil {
		return nil, err
	}
	if cache != nil {
		cache[b.ID] = b // pending too: the rest of this request sees the batch the same way
	}
	if b.State == batchCommitted {
		return &d.Pending.version, nil
	}
	return d.Current, nil
}

// abortBatch moves a pending batch to aborted and returns the state it ends in (committed
// if it committed first).
func (s *Service) abortBatch(ctx context.Context, bot, col string, b batchDoc) (string, error) {
	b.State = batchAborted
	data, err := store.Encode(b)
	if err != nil {
		return "", err
	}
	err = s.store.Put(ctx, store.Item{Key: batchKey(bot, col, b.ID), Data: data, Revision: 2,
		ExpiresAt: store.SecondsPrecision(s.now().Add(abortedRetention))}, store.RevisionIs(1))
	if errors.Is(err, store.ErrConditionFailed) {
		cur, err := s.status(ctx, bot, col, b.ID, nil)
		return cur.State, err
	}
	if err != nil {
		return "", err
	}
	return batchAborted, nil
}

// woundPolicy decides what a writer does about a record's pending version whose batch is
// still running: abort that batch (true) or give up itself (false).
type woundPolicy func(other batchDoc) bool

// always is the policy of single-record writes: they never wait for a batch.
func always(batchDoc) bool { return true }

// never gives way to every running batch.
func never(batchDoc) bool { return false }

var errBatchConflict = httpapi.E(httpapi.KindConflict, "batch_conflict",
	"another write changed a record of this batch while it was applied; nothing was applied, retry the batch")

// settle reads a record and brings it to a state without a pending version: a committed
// batch's version is folded in, an aborted one is rolled back, and a running one is aborted
// first when policy allows (errBatchConflict otherwise). It returns the record (nil when it
// does not exist) and its item revision, for the caller's conditional write.
func (s *Service) settle(ctx context.Context, c *collectionDoc, bot, rec string, policy woundPolicy) (*recordDoc, int64, error) {
	key := recordKey(bot, c.ID, rec)
	for range attempts {
		it, err := s.store.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return nil, 0, nil
		}
		if err != nil {
			return nil, 0, err
		}
		d, err := store.Decode[recordDoc](it)
		if err != nil {
			return nil, 0, err
		}
		if d.Pending == nil {
			return &d, it.Revision, nil
		}
		b, err := s.status(ctx, bot, c.ID, d.Pending.Batch, nil)
		if err != nil {
			return nil, 0, err
		}
		if b.State == batchPending {
			if !policy(b) {
				return nil, 0, errBatchConflict
			}
			if b.State, err = s.abortBatch(ctx, bot, c.ID, b); err != nil {
				return nil, 0, err
			}
		}
		var writes []store.Write
		if b.State == batchCommitted {
			writes, err = c.foldWrites(bot, &d, it.Revision)
		} else {
			writes, err = c.rollbackWrites(bot, &d, it.Revision)
		}
		if err != nil {
			return nil, 0, err
		}
		if err := s.store.Transact(ctx, writes); err != nil && failedAt(err) < 0 {
			return nil, 0, err
		}
		// Applied, or someone else settled it first: read again either way.
	}
	return nil, 0, busy("the record")
}

// foldWrites make a committed pending version the record's current one and remove the index
// entries and the external key claim that only the replaced version had.
func (c *collectionDoc) foldWrites(bot string, d *recordDoc, itemRev int64) ([]store.Write, error) {
	next := &recordDoc{ID: d.ID, Current: &d.Pending.version}
	it, err := next.item(bot, c.ID)
	if err != nil {
		return nil, err
	}
	writes := []store.Write{store.PutOp(it, store.RevisionIs(itemRev))}
	writes = append(writes, deleteEntries(bot, c.ID, d.ID, minus(c.entries(d.Current), c.entries(next.Current)))...)
	if d.Current != nil && d.Current.ExternalKey != "" && d.Current.ExternalKey != next.Current.ExternalKey {
		writes = append(writes, store.DeleteOp(externalKey(bot, c.ID, d.Current.ExternalKey), store.Always))
	}
	return writes, nil
}

// rollbackWrites drop a pending version: the record returns to its current version, or is
// deleted if the batch was creating it, with the index entries and the claim only the
// pending version had.
func (c *collectionDoc) rollbackWrites(bot string, d *recordDoc, itemRev int64) ([]store.Write, error) {
	var writes []store.Write
	if d.Current == nil {
		writes = append(writes, store.DeleteOp(recordKey(bot, c.ID, d.ID), store.RevisionIs(itemRev)))
	} else {
		it, err := (&recordDoc{ID: d.ID, Current: d.Current}).item(bot, c.ID)
		if err != nil {
			return nil, err
		}
		writes = append(writes, store.PutOp(it, store.RevisionIs(itemRev)))
	}
	writes = append(writes, deleteEntries(bot, c.ID, d.ID, minus(c.entries(&d.Pending.version), c.entries(d.Current)))...)
	if k := d.Pending.ExternalKey; k != "" && (d.Current == nil || d.Current.ExternalKey != k) {
		writes = append(writes, store.DeleteOp(externalKey(bot, c.ID, k), store.Always))
	}
	return writes, nil
}
