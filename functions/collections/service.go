package collections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// Service reads and writes collections and their records.
type Service struct {
	store store.Store
	// jobs purges a deleted collection's records, and a removed indexed field's entries.
	jobs jobs.Starter
	now  func() time.Time
	log  *slog.Logger
	// maxRecords is MaxRecordsPerCollection; tests lower it.
	maxRecords int64
}

// NewService returns a Service. j runs the purge jobs; log records failures of work that
// happens after a request's outcome is decided (a purge that could not be scheduled, a
// batch's clean-up that a later write will finish).
func NewService(st store.Store, j jobs.Starter, now func() time.Time, log *slog.Logger) *Service {
	return &Service{store: st, jobs: j, now: now, log: log, maxRecords: MaxRecordsPerCollection}
}

// logError records a failure of work whose outcome the client does not wait for.
func (s *Service) logError(ctx context.Context, msg string, args ...any) {
	if s.log != nil {
		s.log.ErrorContext(ctx, msg, append([]any{"request_id", httpapi.RequestID(ctx)}, args...)...)
	}
}

// attempts bounds the retries of a write whose condition failed because of a concurrent
// writer (not because the request is wrong).
const attempts = 8

// contention spaces the retries of a write that lost a race: a random time up to 2^n ms
// before retry n (at most 128 ms), so that writers contending for one counter spread out
// instead of colliding again at once.
var contention = backoff.Policy{Base: 2 * time.Millisecond, Max: 128 * time.Millisecond, Jitter: backoff.Full}

// pause waits before retry n (none before the first try); an ended context ends it early,
// and the write that follows reports the context's error.
func pause(ctx context.Context, n int) { _ = contention.Sleep(ctx, n) }

func busy(what string) error {
	return fmt.Errorf("collections: %s keeps changing: %w", what, store.ErrUnavailable)
}

func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

func collectionNotFound() error { return httpapi.NotFound("collection") }

func limitReached(format string, args ...any) error {
	return httpapi.Errorf(httpapi.KindConflict, "limit_reached", format, args...)
}

// failedAt returns the index of the write whose condition failed, or -1.
func failedAt(err error) int {
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		return ce.Index
	}
	return -1
}

// load returns a collection as stored; a malformed or unknown id is not found.
func (s *Service) load(ctx context.Context, bot, col string) (*collectionDoc, error) {
	if !ids.Valid("col", col) {
		return nil, collectionNotFound()
	}
	it, err := s.store.Get(ctx, collectionKey(bot, col))
	if errors.Is(err, store.ErrNotFound) {
		return nil, collectionNotFound()
	}
	if err != nil {
		return nil, err
	}
	c, err := store.Decode[collectionDoc](it)
	if err != nil {
		return nil, err
	}
	return &c, nil
}

func (s *Service) recordCount(ctx context.Context, bot, col string) (int64, error) {
	it, err := s.store.Get(ctx, recordCountKey(bot, col))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	return it.Count, err
}

// CreateCollection adds a collection to the bot.
func (s *Service) CreateCollection(ctx context.Context, bot, name string, fields []FieldInput) (Collection, error) {
	var p httpapi.Problems
	name = checkName(&p, name)
	schema, next := newSchema(&p, fields)
	if err := p.Err(); err != nil {
		return Collection{}, err
	}
	now := s.now()
	c := collectionDoc{ID: ids.At("col", now), Name: name, Fields: schema, NextKey: next, Revision: 1, CreatedAt: stamp(now), UpdatedAt: stamp(now)}
	data, err := store.Encode(c)
	if err != nil {
		return Collection{}, err
	}
	for attempt := range attempts {
		pause(ctx, attempt)
		cnt, err := store.ReadCounter(ctx, s.store, collectionCountKey(bot), +1)
		if err != nil {
			return Collection{}, err
		}
		if cnt.Count >= MaxCollectionsPerBot {
			return Collection{}, limitReached("a bot may have at most %d collections; delete one first", MaxCollectionsPerBot)
		}
		err = s.store.Transact(ctx, []store.Write{
			cnt.Write,
			store.PutOp(store.Item{Key: nameKey(bot, name), Data: []byte(`"` + c.ID + `"`), Revision: 1}, store.MustNotExist),
			store.PutOp(store.Item{Key: collectionKey(bot, c.ID), Data: data, Revision: c.Revision}, store.MustNotExist),
			store.PutOp(store.Item{Key: recordCountKey(bot, c.ID), Revision: 1}, store.MustNotExist),
		})
		switch failedAt(err) {
		case -1:
			if err != nil {
				return Collection{}, fmt.Errorf("create collection: %w", err)
			}
			return c.view(0), nil
		case 0:
			continue // another collection was created or deleted meanwhile
		case 1:
			return Collection{}, nameTaken(name)
		default:
			return Collection{}, fmt.Errorf("create collection: %w", err)
		}
	}
	return Collection{}, busy("the bot's collection count")
}

func nameTaken(name string) error {
	return httpapi.Errorf(httpapi.KindConflict, "name_taken", "the bot already has a collection named %q (names are compared ignoring case)", name)
}

// GetCollection returns one collection of the bot.
func (s *Service) GetCollection(ctx context.Context, bot, col string) (Collection, error) {
	c, err := s.load(ctx, bot, col)
	if err != nil {
		return Collection{}, err
	}
	n, err := s.recordCount(ctx, bot, col)
	if err != nil {
		return Collection{}, err
	}
	return c.view(n), nil
}

// ListCollections returns one page of the bot's collections, oldest first.
func (s *Service) ListCollections(ctx context.Context, bot string, limit int, cursor string) ([]Collection, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: collectionsPK(bot), Prefix: "COL#", Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	// A bot has at most MaxCollectionsPerBot counters: one query reads them all.
	counts := map[string]int64{}
	cp, err := s.store.Query(ctx, store.Query{PK: collectionsPK(bot), Prefix: "RECORDS#"})
	if err != nil {
		return nil, "", err
	}
	for _, it := range cp.Items {
		counts[strings.TrimPrefix(it.SK, "RECORDS#")] = it.Count
	}
	out := make([]Collection, 0, len(page.Items))
	for _, it := range page.Items {
		c, err := store.Decode[collectionDoc](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, c.view(counts[c.ID]))
	}
	return out, page.Next, nil
}

// UpdateCollection renames a collection and changes its schema if its revision is still
// expected. fields, when given, is the whole new field list (see changeSchema).
func (s *Service) UpdateCollection(ctx context.Context, bot, col string, expected int64, name *string, fields *[]FieldInput) (Collection, error) {
	c, err := s.load(ctx, bot, col)
	if err != nil {
		return Collection{}, err
	}
	if c.Revision != expected {
		return Collection{}, httpapi.StaleRevision(c.Revision)
	}
	next := *c
	var p httpapi.Problems
	if name != nil {
		next.Name = checkName(&p, *name)
	}
	var purged []string
	if fields != nil {
		next.Fields, next.NextKey, purged = changeSchema(&p, c, *fields)
	}
	if err := p.Err(); err != nil {
		return Collection{}, err
	}
	count, err := s.recordCount(ctx, bot, col)
	if err != nil {
		return Collection{}, err
	}
	if next.Name == c.Name && sameFields(next.Fields, c.Fields) {
		return c.view(count), nil // nothing changes, so no new revision
	}
	next.Revision++
	next.UpdatedAt = stamp(s.now())
	data, err := store.Encode(next)
	if err != nil {
		return Collection{}, err
	}
	// The read above is advisory; this condition is what enforces expected_revision, and
	// every record write checks the collection's revision, so no record is ever written
	// against a schema that has changed.
	writes := []store.Write{store.PutOp(store.Item{Key: collectionKey(bot, col), Data: data, Revision: next.Revision}, store.RevisionIs(expected))}
	renamed := nameKey(bot, next.Name) != nameKey(bot, c.Name)
	if renamed {
		writes = append(writes,
			store.PutOp(store.Item{Key: nameKey(bot, next.Name), Data: []byte(`"` + col + `"`), Revision: 1}, store.MustNotExist),
			store.DeleteOp(nameKey(bot, c.Name), store.Always))
	}
	err = s.store.Transact(ctx, writes)
	switch i := failedAt(err); {
	case i == 0:
		cur, err := s.load(ctx, bot, col)
		if err != nil {
			return Collection{}, err
		}
		return Collection{}, httpapi.StaleRevision(cur.Revision)
	case i == 1 && renamed:
		return Collection{}, nameTaken(next.Name)
	case err != nil:
		return Collection{}, fmt.Errorf("update collection: %w", err)
	}
	if len(purged) > 0 {
		// Entries of a removed field are unreachable (filters name fields of the schema);
		// purging them only reclaims space, and a collection's deletion purges every field
		// key it ever had, so a purge that cannot start now is not lost for good.
		if err := s.startPurge(ctx, purgePayload{Bot: bot, Collection: col, Fields: purged}); err != nil {
			s.logError(ctx, "purge of removed fields not started", "bot_id", bot, "collection_id", col, "error", err)
		}
	}
	return next.view(count), nil
}

func sameFields(a, b []storedField) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// DeleteCollection deletes a collection at once (the collection, its name and its count in
// one transaction) and purges its records in the background. A collection that still has
// records is deleted only with force. With expected set, only at that revision.
func (s *Service) DeleteCollection(ctx context.Context, bot, col string, expected *int64, force bool) error {
	if s.jobs == nil {
		// Without a job runner the records would outlive their collection: refuse before
		// changing anything.
		return errors.New("collections: no job runner to purge records")
	}
	for attempt := range attempts {
		pause(ctx, attempt)
		c, err := s.load(ctx, bot, col)
		var he *httpapi.Error
		if errors.As(err, &he) && he.Kind == httpapi.KindNotFound && ids.Valid("col", col) {
			return s.resumePurge(ctx, bot, col, err)
		}
		if err != nil {
			return err
		}
		if expected != nil && c.Revision != *expected {
			return httpapi.StaleRevision(c.Revision)
		}
		countIt, err := s.store.Get(ctx, recordCountKey(bot, col))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if countIt.Count > 0 && !force {
			return httpapi.Errorf(httpapi.KindConflict, "collection_not_empty",
				"the collection has %d records; delete them first or send force=true to delete the collection with its records", countIt.Count).
				With("record_count", countIt.Count)
		}
		// Without force the count must still be what was read (zero) when the deletion
		// commits: a record created meanwhile fails the transaction instead of being purged.
		countDel := store.DeleteOp(recordCountKey(bot, col), store.Always)
		if !force && countIt.Revision > 0 {
			countDel = store.DeleteOp(recordCountKey(bot, col), store.RevisionIs(countIt.Revision))
		}
		cnt, err := store.ReadCounter(ctx, s.store, collectionCountKey(bot), -1)
		if err != nil {
			return err
		}
		payload := purgePayload{Bot: bot, Collection: col, Fields: allKeys(c.NextKey), Whole: true}
		tomb, err := store.Encode(payload)
		if err != nil {
			return err
		}
		err = s.store.Transact(ctx, []store.Write{
			cnt.Write,
			store.DeleteOp(collectionKey(bot, col), store.RevisionIs(c.Revision)),
			store.DeleteOp(nameKey(bot, c.Name), store.Always),
			countDel,
			store.PutOp(store.Item{Key: tombstoneKey(bot, col), Data: tomb, Revision: 1}, store.Always),
		})
		switch failedAt(err) {
		case -1:
			if err != nil {
				return fmt.Errorf("delete collection: %w", err)
			}
			return s.startPurge(ctx, payload)
		case 0, 1, 3:
			continue // the count, the collection or its records changed: decide again
		default:
			return fmt.Errorf("delete collection: %w", err)
		}
	}
	return busy("the collection")
}

// resumePurge answers a DELETE of a collection that is already gone. While its purge is
// unfinished (the tombstone exists), the purge is started again and the DELETE succeeds, so
// a client whose first DELETE failed after the collection was deleted (the job could not be
// queued) can simply retry. Otherwise the collection is not found.
func (s *Service) resumePurge(ctx context.Context, bot, col string, notFound error) error {
	it, err := s.store.Get(ctx, tombstoneKey(bot, col))
	if errors.Is(err, store.ErrNotFound) {
		return notFound
	}
	if err != nil {
		return err
	}
	payload, err := store.Decode[purgePayload](it)
	if err != nil {
		return err
	}
	return s.startPurge(ctx, payload)
}

// allKeys lists every field key a collection has had: a deletion purges the index entries of
// removed fields too.
func allKeys(next int) []string {
	out := make([]string, 0, next-1)
	for i := 1; i < next; i++ {
		out = append(out, fmt.Sprintf("f%d", i))
	}
	return out
}
