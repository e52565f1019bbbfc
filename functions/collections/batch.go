package collections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// A batch upsert writes up to 500 records, each with its index entries and claims: far more
// than one transaction holds. It is still all or nothing, by versioning (docs/collections.md
// states the guarantee):
//
//  1. resolve and validate every entry; nothing is written if one is invalid;
//  2. write the batch's status item, pending;
//  3. stage: write each record's new version as its pending version (and the index entries
//     and claims it needs) in transactions of up to 100 writes, each conditioned on the
//     record being as it was read and on the collection's schema revision. Readers ignore
//     pending versions of a batch that is not committed;
//  4. commit: one transaction moves the status to committed (if it is still pending), checks
//     the schema revision and moves the record count. This is the single point at which
//     every record of the batch changes, for every reader at once;
//  5. fold: rewrite each record with its pending version as current and delete what only
//     the old version had. Readers see the same values before and after; a fold that fails
//     is finished by the next write of that record.
//
// If anything fails before the commit, the status moves to aborted and the staged versions
// are rolled back; whatever a crash leaves behind is invisible to readers and is rolled
// back by the next write of the record. A write of a record that is staged by a running
// batch aborts that batch (single writes never wait); two batches meeting on a record give
// way to the older one.

// BatchEntry is one record of a batch upsert. With id it updates that record; with
// external_key it updates the record that has the key or creates one with it; with neither
// it creates a record. Values merge as in a PATCH.
type BatchEntry struct {
	ID               *string                    `json:"id"`
	ExternalKey      *string                    `json:"external_key"`
	ExpectedRevision *int64                     `json:"expected_revision"`
	Values           map[string]json.RawMessage `json:"values"`
}

// BatchResult reports what a committed batch did, in the order of the request. An entry
// that would change nothing is unchanged: like a PATCH that changes nothing, it makes no new
// revision (imports often send the same data again).
type BatchResult struct {
	Created   []string          `json:"created"`
	Updated   []string          `json:"updated"`
	Unchanged []string          `json:"unchanged"`
	Results   []BatchItemResult `json:"results"`
}

// BatchItemResult is the outcome of one entry.
type BatchItemResult struct {
	Index    int    `json:"index"`
	ID       string `json:"id"`
	Action   string `json:"action"`
	Revision int64  `json:"revision"`
}

// target is a resolved entry: the record as read (nil doc: a new record) and its new version.
type target struct {
	id      string
	doc     *recordDoc
	itemRev int64
	next    *version
	// unchanged entries write nothing.
	unchanged bool
	// staged is the record item as staged, once staging committed.
	staged *recordDoc
}

func (t *target) creates() bool { return t.doc == nil }

// checkBatchShape reports what can be wrong with the entries without reading anything.
func checkBatchShape(entries []BatchEntry) error {
	var p httpapi.Problems
	switch {
	case len(entries) == 0:
		p.Add("records", "must list at least one record")
	case len(entries) > MaxBatchRecords:
		p.Add("records", "must list at most %d records", MaxBatchRecords)
	}
	byID, keys := map[string]int{}, map[string]int{}
	for i, e := range entries {
		path := fmt.Sprintf("records[%d]", i)
		if e.ID != nil && e.ExternalKey != nil {
			p.Add(path, "give id (update that record) or external_key (update or create by key), not both")
		}
		if e.ID != nil {
			if !ids.Valid("rec", *e.ID) {
				p.Add(path+".id", "no record of the collection has this id")
			} else if j, dup := byID[*e.ID]; dup {
				p.Add(path+".id", "names the same record as records[%d]", j)
			} else {
				byID[*e.ID] = i
			}
		}
		if e.ExternalKey != nil {
			checkExternalKey(&p, path+".external_key", *e.ExternalKey)
			if j, dup := keys[*e.ExternalKey]; dup {
				p.Add(path+".external_key", "names the same record as records[%d]", j)
			} else {
				keys[*e.ExternalKey] = i
			}
		}
		if e.ExpectedRevision != nil && e.ID == nil {
			p.Add(path+".expected_revision", "is only allowed with id")
		}
	}
	return p.Err()
}

// Batch upserts entries into the collection, all or nothing.
func (s *Service) Batch(ctx context.Context, bot, col string, entries []BatchEntry) (BatchResult, error) {
	if err := checkBatchShape(entries); err != nil {
		return BatchResult{}, err
	}
	c, err := s.load(ctx, bot, col)
	if err != nil {
		return BatchResult{}, err
	}
	now := s.now()
	b := batchDoc{ID: ids.At("bat", now), State: batchPending, Started: now.UTC(), Deadline: now.UTC().Add(batchDeadline)}
	// Wound-wait: a younger batch, or one past its deadline, gives way to this one; an
	// older running batch makes this one give way (409 batch_conflict).
	policy := func(other batchDoc) bool { return other.ID > b.ID || !s.now().Before(other.Deadline) }

	s.sweep(ctx, c, bot)
	targets, err := s.resolve(ctx, c, bot, entries, policy)
	if err != nil {
		return BatchResult{}, err
	}
	creates, err := s.prepare(ctx, c, bot, entries, targets)
	if err != nil {
		return BatchResult{}, err
	}

	var changes []*target
	for _, t := range targets {
		if !t.unchanged {
			changes = append(changes, t)
			b.Records = append(b.Records, t.id)
		}
	}
	if len(changes) > 0 {
		if err := s.apply(ctx, c, bot, b, changes, creates); err != nil {
			return BatchResult{}, err
		}
	}

	res := BatchResult{Created: []string{}, Updated: []string{}, Unchanged: []string{}, Results: make([]BatchItemResult, len(targets))}
	for i, t := range targets {
		action := "updated"
		switch {
		case t.creates():
			action = "created"
			res.Created = append(res.Created, t.id)
		case t.unchanged:
			action = "unchanged"
			res.Unchanged = append(res.Unchanged, t.id)
		default:
			res.Updated = append(res.Updated, t.id)
		}
		res.Results[i] = BatchItemResult{Index: i, ID: t.id, Action: action, Revision: t.next.Revision}
	}
	return res, nil
}

// apply writes the status, stages, commits and folds the targets that change something.
func (s *Service) apply(ctx context.Context, c *collectionDoc, bot string, b batchDoc, targets []*target, creates int64) error {
	data, err := store.Encode(b)
	if err != nil {
		return err
	}
	if err := s.store.Put(ctx, store.Item{Key: batchKey(bot, c.ID, b.ID), Data: data, Revision: 1}, store.MustNotExist); err != nil {
		return fmt.Errorf("batch: write status: %w", err)
	}
	if err := s.stage(ctx, c, bot, b, targets); err != nil {
		return s.abort(ctx, c, bot, b, targets, err)
	}
	if err := s.commit(ctx, c, bot, b, creates); err != nil {
		return s.abort(ctx, c, bot, b, targets, err)
	}
	s.fold(ctx, c, bot, b, targets)
	return nil
}

// resolveConcurrency bounds the parallel reads that resolve a batch's entries.
const resolveConcurrency = 16

// resolve finds the record each entry names, settling pending versions of other batches.
func (s *Service) resolve(ctx context.Context, c *collectionDoc, bot string, entries []BatchEntry, policy woundPolicy) ([]*target, error) {
	targets := make([]*target, len(entries))
	errs := make([]error, len(entries))
	sem := make(chan struct{}, resolveConcurrency)
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			var (
				d   *recordDoc
				rev int64
				err error
			)
			switch {
			case e.ID != nil:
				d, rev, err = s.settle(ctx, c, bot, *e.ID, policy)
				if err == nil && d == nil {
					err = notInBatch(i)
				}
			case e.ExternalKey != nil:
				d, rev, err = s.keyOwner(ctx, c, bot, *e.ExternalKey, policy)
			}
			if err != nil {
				errs[i] = err
				return
			}
			t := &target{doc: d, itemRev: rev}
			if d != nil {
				t.id = d.ID
			}
			targets[i] = t
		}()
	}
	wg.Wait()
	var p httpapi.Problems
	for i, err := range errs {
		var nf *entryNotFound
		switch {
		case errors.As(err, &nf):
			p.Add(fmt.Sprintf("records[%d].id", i), "no record of the collection has this id")
		case err != nil:
			return nil, err
		}
	}
	// An id and an external key can name the same record.
	seen := map[string]int{}
	for i, t := range targets {
		if t == nil || t.doc == nil {
			continue
		}
		if j, dup := seen[t.id]; dup {
			p.Add(fmt.Sprintf("records[%d]", i), "names the same record as records[%d]", j)
		}
		seen[t.id] = i
	}
	return targets, p.Err()
}

type entryNotFound struct{ index int }

func (e *entryNotFound) Error() string { return fmt.Sprintf("batch: records[%d] not found", e.index) }

func notInBatch(i int) error { return &entryNotFound{index: i} }

// prepare computes every entry's new version, checks it and the record limit, and returns
// how many records the batch creates.
func (s *Service) prepare(ctx context.Context, c *collectionDoc, bot string, entries []BatchEntry, targets []*target) (int64, error) {
	var p httpapi.Problems
	var creates int64
	at := stamp(s.now())
	for i, e := range entries {
		t := targets[i]
		prefix := fmt.Sprintf("records[%d].values", i)
		if t.creates() {
			creates++
			t.id = ids.At("rec", s.now())
			t.next = &version{Values: applyValues(&p, prefix, c, nil, e.Values), Revision: 1, CreatedAt: at, UpdatedAt: at}
			if e.ExternalKey != nil {
				t.next.ExternalKey = *e.ExternalKey
			}
			continue
		}
		cur := t.doc.Current
		if e.ExpectedRevision != nil && *e.ExpectedRevision != cur.Revision {
			return 0, httpapi.StaleRevision(cur.Revision).With("index", i)
		}
		next := *cur
		next.Values = applyValues(&p, prefix, c, cur.Values, e.Values)
		if sameValues(next.Values, cur.Values) {
			t.next, t.unchanged = cur, true
			continue
		}
		next.Revision++
		next.UpdatedAt = at
		t.next = &next
	}
	if err := p.Err(); err != nil {
		return 0, err
	}
	if creates > 0 {
		n, err := s.recordCount(ctx, bot, c.ID)
		if err != nil {
			return 0, err
		}
		if n+creates > s.maxRecords {
			return 0, limitReached("the batch would create %d records in a collection of %d; a collection may have at most %d", creates, n, s.maxRecords)
		}
	}
	return creates, nil
}

// stageWrites are the writes that stage one target.
func (c *collectionDoc) stageWrites(bot string, b batchDoc, t *target) ([]store.Write, *recordDoc, error) {
	d := &recordDoc{ID: t.id, Pending: &pendingVersion{Batch: b.ID, version: *t.next}}
	cond := store.MustNotExist
	var cur *version
	if !t.creates() {
		cur = t.doc.Current
		d.Current = cur
		cond = store.RevisionIs(t.itemRev)
	}
	it, err := d.item(bot, c.ID)
	if err != nil {
		return nil, nil, err
	}
	writes := []store.Write{store.PutOp(it, cond)}
	writes = append(writes, putEntries(bot, c.ID, t.id, minus(c.entries(t.next), c.entries(cur)))...)
	if k := t.next.ExternalKey; k != "" && (cur == nil || cur.ExternalKey != k) {
		writes = append(writes, store.PutOp(claimItem(bot, c.ID, k, t.id), store.MustNotExist))
	}
	return writes, d, nil
}

// maxTransactBytes keeps a transaction well under DynamoDB's 4 MB per TransactWriteItems:
// a staged record holds two versions of up to 32 KiB each, so a hundred of them would not fit.
const maxTransactBytes = 3 << 20

// writeBytes estimates what a write adds to a transaction's size.
func writeBytes(w store.Write) int {
	k, _ := w.Target()
	n := len(k.PK) + len(k.SK) + 64
	if w.Put != nil {
		n += len(w.Put.Data)
	}
	return n
}

// chunks groups per-target writes into transactions of at most MaxTransactWrites writes and
// maxTransactBytes, each starting with head (nil for none). It returns, per transaction,
// its writes and targets.
func chunks(head *store.Write, targets []*target, writesOf func(*target) ([]store.Write, error)) ([][]store.Write, [][]*target, error) {
	var txs [][]store.Write
	var groups [][]*target
	var cur []store.Write
	var group []*target
	size := 0
	start := func() {
		cur, group, size = nil, nil, 0
		if head != nil {
			cur, size = append(cur, *head), writeBytes(*head)
		}
	}
	start()
	for _, t := range targets {
		ws, err := writesOf(t)
		if err != nil {
			return nil, nil, err
		}
		if len(ws) == 0 {
			continue
		}
		n := 0
		for _, w := range ws {
			n += writeBytes(w)
		}
		if len(group) > 0 && (len(cur)+len(ws) > store.MaxTransactWrites || size+n > maxTransactBytes) {
			txs, groups = append(txs, cur), append(groups, group)
			start()
		}
		cur, group, size = append(cur, ws...), append(group, t), size+n
	}
	if len(group) > 0 {
		txs, groups = append(txs, cur), append(groups, group)
	}
	return txs, groups, nil
}

// stage writes every target's pending version, with the schema check in each transaction
// (a collection deleted or changed meanwhile stops the batch before it leaves anything
// behind in a purged partition). A failed condition means another writer got there first:
// the batch gives way.
func (s *Service) stage(ctx context.Context, c *collectionDoc, bot string, b batchDoc, targets []*target) error {
	check := store.CheckOp(collectionKey(bot, c.ID), store.RevisionIs(c.Revision))
	staged := map[*target]*recordDoc{}
	txs, groups, err := chunks(&check, targets, func(t *target) ([]store.Write, error) {
		ws, d, err := c.stageWrites(bot, b, t)
		staged[t] = d
		return ws, err
	})
	if err != nil {
		return err
	}
	for i, tx := range txs {
		err := s.store.Transact(ctx, tx)
		switch failedAt(err) {
		case -1:
			if err != nil {
				return fmt.Errorf("batch: stage: %w", err)
			}
			for _, t := range groups[i] {
				t.staged = staged[t]
			}
		case 0:
			if _, err := s.load(ctx, bot, c.ID); err != nil {
				return err
			}
			return errBatchConflict
		default:
			return errBatchConflict
		}
	}
	return nil
}

// commit moves the batch to committed, with the schema check and the record count, in one
// transaction. An ambiguous failure is resolved by reading the status back.
func (s *Service) commit(ctx context.Context, c *collectionDoc, bot string, b batchDoc, creates int64) error {
	done := b
	done.State = batchCommitted
	data, err := store.Encode(done)
	if err != nil {
		return err
	}
	for attempt := range attempts {
		pause(ctx, attempt)
		if !s.now().Before(b.Deadline) {
			// Too late: other writers may already treat the batch as dead.
			return httpapi.Errorf(httpapi.KindConflict, "batch_conflict",
				"the batch took longer than %s to apply; nothing was applied, retry it (smaller batches apply faster)", batchDeadline)
		}
		writes := []store.Write{
			store.PutOp(store.Item{Key: batchKey(bot, c.ID, b.ID), Data: data, Revision: 2}, store.RevisionIs(1)),
			store.CheckOp(collectionKey(bot, c.ID), store.RevisionIs(c.Revision)),
		}
		if creates > 0 {
			cnt, err := store.ReadCounter(ctx, s.store, recordCountKey(bot, c.ID), creates)
			if err != nil {
				return err
			}
			if cnt.Count+creates > s.maxRecords {
				return limitReached("the batch would create %d records in a collection of %d; a collection may have at most %d", creates, cnt.Count, s.maxRecords)
			}
			writes = append(writes, cnt.Write)
		}
		err = s.store.Transact(ctx, writes)
		switch failedAt(err) {
		case -1:
			if err == nil {
				return nil
			}
			// The outcome is unknown (a timeout after the write may have landed): the
			// status says which. Trying to abort settles it either way.
			st, aerr := s.abortBatch(ctx, bot, c.ID, b)
			if aerr == nil && st == batchCommitted {
				return nil
			}
			return fmt.Errorf("batch: commit: %w", err)
		case 0:
			return errBatchConflict // a write of one of its records aborted the batch
		case 1:
			if _, err := s.load(ctx, bot, c.ID); err != nil {
				return err
			}
			return errBatchConflict // the schema changed since the batch was validated
		}
		// The record count moved: read it again.
	}
	return busy("the record count")
}

// abort moves the batch to aborted, rolls back its staged versions (best effort: what is
// left is invisible and rolled back by the next write of the record) and returns cause.
func (s *Service) abort(ctx context.Context, c *collectionDoc, bot string, b batchDoc, targets []*target, cause error) error {
	st, err := s.abortBatch(ctx, bot, c.ID, b)
	if err != nil {
		s.logError(ctx, "batch: abort failed", "batch", b.ID, "error", err)
		return cause
	}
	if st == batchCommitted {
		// Cannot happen (only this process commits it), but if it did, the batch's
		// versions are the truth and must be folded, not rolled back.
		s.fold(ctx, c, bot, b, targets)
		return fmt.Errorf("batch %s committed while it was aborted: %w", b.ID, cause)
	}
	var staged []*target
	for _, t := range targets {
		if t.staged != nil {
			staged = append(staged, t)
		}
	}
	if s.finish(ctx, c, bot, staged, c.rollbackWrites) {
		s.forget(ctx, bot, c.ID, b.ID)
	}
	return cause
}

// forget deletes the status of a batch none of whose records refers to it any more.
func (s *Service) forget(ctx context.Context, bot, col, batch string) {
	if err := s.store.Delete(ctx, batchKey(bot, col, batch), store.Always); err != nil {
		s.logError(ctx, "batch: status not deleted", "batch", batch, "error", err)
	}
}

// sweepLimit bounds how many abandoned batches one batch request finishes first.
const sweepLimit = 2

// sweep finishes, before a new batch starts, batches of the collection whose process is
// gone (past their deadline): a pending one is aborted, then each of its records is rolled
// back or folded in, and its status deleted. Readers never needed this (they ignore what an
// uncommitted batch staged); it reclaims what a crash left, such as records a dead batch
// was creating, which no reader or writer would come across. Failures are only logged.
func (s *Service) sweep(ctx context.Context, c *collectionDoc, bot string) {
	page, err := s.store.Query(ctx, store.Query{PK: batchPK(bot, c.ID), Limit: 20})
	if err != nil {
		s.logError(ctx, "batch: sweep", "error", err)
		return
	}
	swept := 0
	for _, it := range page.Items {
		b, err := store.Decode[batchDoc](it)
		if err != nil || s.now().Before(b.Deadline) || swept == sweepLimit {
			continue // its own process may still be finishing it
		}
		swept++
		if b.State == batchPending {
			if _, err := s.abortBatch(ctx, bot, c.ID, b); err != nil {
				s.logError(ctx, "batch: sweep abort", "batch", b.ID, "error", err)
				continue
			}
		}
		ok := true
		for _, rec := range b.Records {
			if _, _, err := s.settle(ctx, c, bot, rec, never); err != nil && !errors.Is(err, errBatchConflict) {
				ok = false
			}
		}
		if ok {
			s.forget(ctx, bot, c.ID, b.ID)
		}
	}
}

// fold makes each staged version current, then deletes the batch's status. If any fold
// fails, the status stays (committed) so readers still resolve the remaining records.
func (s *Service) fold(ctx context.Context, c *collectionDoc, bot string, b batchDoc, targets []*target) {
	if s.finish(ctx, c, bot, targets, c.foldWrites) {
		s.forget(ctx, bot, c.ID, b.ID)
	}
}

// finish applies fold or rollback writes to the staged targets, in transactions; a
// transaction that fails falls back to settling its records one by one. It reports whether
// every record was finished.
func (s *Service) finish(ctx context.Context, c *collectionDoc, bot string, targets []*target, writes func(string, *recordDoc, int64) ([]store.Write, error)) bool {
	txs, groups, err := chunks(nil, targets, func(t *target) ([]store.Write, error) {
		return writes(bot, t.staged, t.staged.itemRevision())
	})
	if err != nil {
		s.logError(ctx, "batch: finish", "error", err)
		return false
	}
	ok := true
	for i, tx := range txs {
		if err := s.store.Transact(ctx, tx); err == nil {
			continue
		}
		for _, t := range groups[i] {
			// Never abort another batch here: a record that another batch has staged
			// since was settled already, and is no longer this batch's to finish.
			_, _, err := s.settle(ctx, c, bot, t.id, never)
			if err != nil && !errors.Is(err, errBatchConflict) {
				s.logError(ctx, "batch: record left pending; its next write finishes it", "record", t.id, "error", err)
				ok = false
			}
		}
	}
	return ok
}
