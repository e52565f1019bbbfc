package collections

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

func recordNotFound() error { return httpapi.NotFound("record") }

func duplicateKey(key, rec string) error {
	return httpapi.Errorf(httpapi.KindConflict, "duplicate_external_key",
		"record %s of this collection already has external_key %q", rec, key).With("record_id", rec)
}

// keyOwner returns the record that holds an external key, settling a pending batch's claim
// first: a claim of an aborted or abandoned batch is released, so it does not block the key.
func (s *Service) keyOwner(ctx context.Context, c *collectionDoc, bot, key string, policy woundPolicy) (*recordDoc, int64, error) {
	it, err := s.store.Get(ctx, externalKey(bot, c.ID, key))
	if errors.Is(err, store.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	rec, err := store.Decode[string](it)
	if err != nil {
		return nil, 0, err
	}
	return s.settle(ctx, c, bot, rec, policy)
}

// claimConflict explains a failed external key claim: 409 when a record holds the key, nil
// (retry) when the claim was released while settling it.
func (s *Service) claimConflict(ctx context.Context, c *collectionDoc, bot, key string) error {
	d, _, err := s.keyOwner(ctx, c, bot, key, always)
	if err != nil {
		return err
	}
	if d != nil {
		return duplicateKey(key, d.ID)
	}
	return nil
}

// CreateRecord adds a record. extKey, when given, must be unused in the collection.
func (s *Service) CreateRecord(ctx context.Context, bot, col string, extKey *string, values map[string]json.RawMessage) (Record, error) {
	now := s.now()
	id := ids.At("rec", now)
	for attempt := range attempts {
		pause(ctx, attempt)
		c, err := s.load(ctx, bot, col)
		if err != nil {
			return Record{}, err
		}
		var p httpapi.Problems
		v := &version{Values: applyValues(&p, "values", c, nil, values), Revision: 1, CreatedAt: stamp(now), UpdatedAt: stamp(now)}
		if extKey != nil {
			checkExternalKey(&p, "external_key", *extKey)
			v.ExternalKey = *extKey
		}
		if err := p.Err(); err != nil {
			return Record{}, err
		}
		cnt, err := store.ReadCounter(ctx, s.store, recordCountKey(bot, col), +1)
		if err != nil {
			return Record{}, err
		}
		if cnt.Count >= s.maxRecords {
			return Record{}, limitReached("a collection may have at most %d records", s.maxRecords)
		}
		d := &recordDoc{ID: id, Current: v}
		it, err := d.item(bot, col)
		if err != nil {
			return Record{}, err
		}
		writes := []store.Write{
			cnt.Write,
			store.CheckOp(collectionKey(bot, col), store.RevisionIs(c.Revision)),
			store.PutOp(it, store.MustNotExist),
		}
		writes = append(writes, putEntries(bot, col, id, minus(c.entries(v), nil))...)
		if v.ExternalKey != "" {
			writes = append(writes, store.PutOp(claimItem(bot, col, v.ExternalKey, id), store.MustNotExist))
		}
		err = s.store.Transact(ctx, writes)
		switch i := failedAt(err); {
		case i < 0 && err != nil:
			return Record{}, fmt.Errorf("create record: %w", err)
		case i < 0:
			return c.show(id, v), nil
		case i == len(writes)-1 && v.ExternalKey != "":
			if err := s.claimConflict(ctx, c, bot, v.ExternalKey); err != nil {
				return Record{}, err
			}
		}
		// The count or the schema moved, or a stale claim was released: try again.
	}
	return Record{}, busy("the collection")
}

// GetRecord returns one record as readers see it.
func (s *Service) GetRecord(ctx context.Context, bot, col, rec string) (Record, error) {
	c, err := s.load(ctx, bot, col)
	if err != nil {
		return Record{}, err
	}
	if !ids.Valid("rec", rec) {
		return Record{}, recordNotFound()
	}
	it, err := s.store.Get(ctx, recordKey(bot, col, rec))
	if errors.Is(err, store.ErrNotFound) {
		return Record{}, recordNotFound()
	}
	if err != nil {
		return Record{}, err
	}
	d, err := store.Decode[recordDoc](it)
	if err != nil {
		return Record{}, err
	}
	v, err := s.visible(ctx, bot, col, &d, statuses{})
	if err != nil {
		return Record{}, err
	}
	if v == nil {
		return Record{}, recordNotFound()
	}
	return c.show(rec, v), nil
}

// UpdateRecord merges values into a record and may set or change its external key, if its
// revision is still expected. A request that changes nothing makes no new revision.
func (s *Service) UpdateRecord(ctx context.Context, bot, col, rec string, expected int64, extKey *string, values map[string]json.RawMessage) (Record, error) {
	for attempt := range attempts {
		pause(ctx, attempt)
		c, err := s.load(ctx, bot, col)
		if err != nil {
			return Record{}, err
		}
		if !ids.Valid("rec", rec) {
			return Record{}, recordNotFound()
		}
		d, _, err := s.settle(ctx, c, bot, rec, always)
		if err != nil {
			return Record{}, err
		}
		if d == nil {
			return Record{}, recordNotFound()
		}
		cur := d.Current
		if cur.Revision != expected {
			return Record{}, httpapi.StaleRevision(cur.Revision)
		}
		var p httpapi.Problems
		next := *cur
		next.Values = applyValues(&p, "values", c, cur.Values, values)
		if extKey != nil {
			checkExternalKey(&p, "external_key", *extKey)
			next.ExternalKey = *extKey
		}
		if err := p.Err(); err != nil {
			return Record{}, err
		}
		if next.ExternalKey == cur.ExternalKey && sameValues(next.Values, cur.Values) {
			return c.show(rec, cur), nil
		}
		next.Revision++
		next.UpdatedAt = stamp(s.now())
		it, err := (&recordDoc{ID: rec, Current: &next}).item(bot, col)
		if err != nil {
			return Record{}, err
		}
		// RevisionIs(2*expected) holds only at that revision with nothing pending.
		writes := []store.Write{
			store.CheckOp(collectionKey(bot, col), store.RevisionIs(c.Revision)),
			store.PutOp(it, store.RevisionIs(2*expected)),
		}
		writes = append(writes, deleteEntries(bot, col, rec, minus(c.entries(cur), c.entries(&next)))...)
		writes = append(writes, putEntries(bot, col, rec, minus(c.entries(&next), c.entries(cur)))...)
		claimAt := -1
		if next.ExternalKey != cur.ExternalKey {
			if cur.ExternalKey != "" {
				writes = append(writes, store.DeleteOp(externalKey(bot, col, cur.ExternalKey), store.Always))
			}
			claimAt = len(writes)
			writes = append(writes, store.PutOp(claimItem(bot, col, next.ExternalKey, rec), store.MustNotExist))
		}
		err = s.store.Transact(ctx, writes)
		switch i := failedAt(err); {
		case i < 0 && err != nil:
			return Record{}, fmt.Errorf("update record: %w", err)
		case i < 0:
			return c.show(rec, &next), nil
		case i == claimAt:
			if err := s.claimConflict(ctx, c, bot, next.ExternalKey); err != nil {
				return Record{}, err
			}
		}
		// The schema or the record moved: read both again (a new revision answers 409 there).
	}
	return Record{}, busy("the record")
}

// DeleteRecord deletes a record; with expected set, only at that revision.
func (s *Service) DeleteRecord(ctx context.Context, bot, col, rec string, expected *int64) error {
	for attempt := range attempts {
		pause(ctx, attempt)
		c, err := s.load(ctx, bot, col)
		if err != nil {
			return err
		}
		if !ids.Valid("rec", rec) {
			return recordNotFound()
		}
		d, itemRev, err := s.settle(ctx, c, bot, rec, always)
		if err != nil {
			return err
		}
		if d == nil {
			return recordNotFound()
		}
		if expected != nil && d.Current.Revision != *expected {
			return httpapi.StaleRevision(d.Current.Revision)
		}
		cnt, err := store.ReadCounter(ctx, s.store, recordCountKey(bot, col), -1)
		if err != nil {
			return err
		}
		writes := []store.Write{
			cnt.Write,
			store.CheckOp(collectionKey(bot, col), store.MustExist),
			store.DeleteOp(recordKey(bot, col, rec), store.RevisionIs(itemRev)),
		}
		writes = append(writes, deleteEntries(bot, col, rec, minus(c.entries(d.Current), nil))...)
		if k := d.Current.ExternalKey; k != "" {
			writes = append(writes, store.DeleteOp(externalKey(bot, col, k), store.Always))
		}
		err = s.store.Transact(ctx, writes)
		if err == nil {
			return nil
		}
		if failedAt(err) < 0 {
			return fmt.Errorf("delete record: %w", err)
		}
	}
	return busy("the record")
}

// Filter is one equality filter of a record list: the records whose field Field has the
// value Value (as sent in the query string).
type Filter struct {
	Field string
	Value string
	// Param is the query parameter that carried it, for error messages.
	Param string
}

// filter is a Filter checked against the schema.
type filter struct {
	field storedField
	token string
}

func (s *Service) checkFilters(c *collectionDoc, in []Filter) ([]filter, error) {
	out := make([]filter, 0, len(in))
	for _, f := range in {
		sf, ok := c.field(f.Field)
		if !ok {
			return nil, httpapi.InvalidParam(f.Param, fmt.Sprintf("the collection has no field %q", f.Field))
		}
		if !sf.Indexed {
			return nil, httpapi.InvalidParam(f.Param, fmt.Sprintf("field %q is not indexed; only indexed fields can be filtered", f.Field))
		}
		tok, problem := filterToken(sf.Field, f.Value)
		if problem != "" {
			return nil, httpapi.InvalidParam(f.Param, f.Param+" "+problem)
		}
		out = append(out, filter{field: sf, token: tok})
	}
	return out, nil
}

// matches reports whether version v has every filtered value.
func matches(v *version, fs []filter) bool {
	for _, f := range fs {
		raw, ok := v.Values[f.field.Key]
		if !ok || indexToken(f.field.Type, raw) != f.token {
			return false
		}
	}
	return true
}

// maxScan bounds the items one list request reads beyond the page: filters on several
// fields, and records a batch is still writing, can make a page shorter than limit (with a
// next_cursor) rather than make one request read without bound.
const maxScan = 1000

// ListRecords returns one page of a collection's records, oldest first; with filters, the
// records that have each filtered value, oldest first. The first filter (in the caller's
// order) is answered from its index; the others are checked on the records found.
func (s *Service) ListRecords(ctx context.Context, bot, col string, filters []Filter, limit int, cursor string) ([]Record, string, error) {
	c, err := s.load(ctx, bot, col)
	if err != nil {
		return nil, "", err
	}
	fs, err := s.checkFilters(c, filters)
	if err != nil {
		return nil, "", err
	}
	q := store.Query{PK: recordsPK(bot, col), Cursor: cursor}
	if len(fs) > 0 {
		q = store.Query{PK: indexPK(bot, col, fs[0].field.Key), Prefix: fs[0].token + "#", Cursor: cursor}
	}
	cache := statuses{}
	out := make([]Record, 0, limit)
	scanned := 0
	for {
		q.Limit = limit - len(out)
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		docs, err := s.pageRecords(ctx, bot, col, page.Items, len(fs) > 0)
		if err != nil {
			return nil, "", err
		}
		for _, d := range docs {
			if d == nil {
				continue // an index entry whose record is gone
			}
			v, err := s.visible(ctx, bot, col, d, cache)
			if err != nil {
				return nil, "", err
			}
			if v != nil && matches(v, fs) {
				out = append(out, c.show(d.ID, v))
			}
		}
		scanned += len(page.Items)
		if page.Next == "" || len(out) >= limit || scanned >= maxScan {
			return out, page.Next, nil
		}
		q.Cursor = page.Next
	}
}

// listConcurrency bounds the parallel reads of the records behind a page of index entries.
const listConcurrency = 16

// pageRecords decodes a page of record items, or reads the records a page of index entries
// points to (nil for one that no longer exists), in the page's order.
func (s *Service) pageRecords(ctx context.Context, bot, col string, items []store.Item, fromIndex bool) ([]*recordDoc, error) {
	docs := make([]*recordDoc, len(items))
	if !fromIndex {
		for i, it := range items {
			d, err := store.Decode[recordDoc](it)
			if err != nil {
				return nil, err
			}
			docs[i] = &d
		}
		return docs, nil
	}
	errs := make([]error, len(items))
	sem := make(chan struct{}, listConcurrency)
	var wg sync.WaitGroup
	for i, it := range items {
		rec := it.SK[strings.LastIndexByte(it.SK, '#')+1:]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			got, err := s.store.Get(ctx, recordKey(bot, col, rec))
			if errors.Is(err, store.ErrNotFound) {
				return
			}
			if err != nil {
				errs[i] = err
				return
			}
			d, err := store.Decode[recordDoc](got)
			docs[i], errs[i] = &d, err
		}()
	}
	wg.Wait()
	return docs, errors.Join(errs...)
}
