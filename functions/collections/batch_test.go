package collections

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
)

// view is everything a reader can observe of a collection: each record as listed and as
// read alone, the answers of some filters, and the record count.
func (f *fixture) view(t *testing.T, col string) string {
	t.Helper()
	var b strings.Builder
	for _, r := range f.list(t, col) {
		one, err := f.svc.GetRecord(t.Context(), f.bot, col, r.ID)
		require.NoError(t, err)
		require.Equal(t, r, one, "a record reads the same alone and in a list")
		v, err := json.Marshal(r)
		require.NoError(t, err)
		b.Write(v)
		b.WriteByte('\n')
	}
	for _, price := range []string{"1", "2", "3"} {
		fmt.Fprintf(&b, "price=%s: %v\n", price, recordIDs(f.list(t, col, Filter{Field: "price", Value: price, Param: "filter[price]"})))
	}
	c, err := f.svc.GetCollection(t.Context(), f.bot, col)
	require.NoError(t, err)
	fmt.Fprintf(&b, "count=%d\n", c.RecordCount)
	return b.String()
}

// pendingLeft counts record items that still carry a pending version.
func (f *fixture) pendingLeft(t *testing.T, col string) int {
	t.Helper()
	page, err := f.raw.Query(t.Context(), store.Query{PK: recordsPK(f.bot, col)})
	require.NoError(t, err)
	n := 0
	for _, it := range page.Items {
		if it.Revision%2 == 1 {
			n++
		}
	}
	return n
}

func TestBatchUpsert(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	ctx := t.Context()
	a, err := f.svc.CreateRecord(ctx, f.bot, c.ID, ptr("a"), vals(t, "sku", "A", "price", 1, "tags", []string{"x"}))
	require.NoError(t, err)
	b, err := f.svc.CreateRecord(ctx, f.bot, c.ID, nil, vals(t, "sku", "B", "price", 1))
	require.NoError(t, err)

	f.clock.Advance(time.Minute)
	res, err := f.svc.Batch(ctx, f.bot, c.ID, []BatchEntry{
		{ID: ptr(b.ID), ExpectedRevision: ptr(int64(1)), Values: vals(t, "price", 2)},
		{ExternalKey: ptr("a"), Values: vals(t, "price", 3, "tags", nil)},
		{ExternalKey: ptr("new"), Values: vals(t, "sku", "N", "price", 2)},
		{Values: vals(t, "sku", "M")},
	})
	require.NoError(t, err)
	require.Len(t, res.Results, 4)
	assert.Equal(t, []string{b.ID, a.ID}, res.Updated)
	assert.Equal(t, []string{res.Results[2].ID, res.Results[3].ID}, res.Created)
	assert.Equal(t, BatchItemResult{Index: 0, ID: b.ID, Action: "updated", Revision: 2}, res.Results[0])
	assert.Equal(t, BatchItemResult{Index: 2, ID: res.Results[2].ID, Action: "created", Revision: 1}, res.Results[2])

	got, err := f.svc.GetRecord(ctx, f.bot, c.ID, a.ID)
	require.NoError(t, err)
	assert.Equal(t, vals(t, "sku", "A", "price", 3), got.Values, "values merge as in a PATCH")
	assert.Equal(t, t0.Add(time.Minute), got.UpdatedAt)
	n, err := f.svc.GetRecord(ctx, f.bot, c.ID, res.Results[2].ID)
	require.NoError(t, err)
	assert.Equal(t, "new", *n.ExternalKey)
	assert.Equal(t, []string{b.ID, res.Results[2].ID}, recordIDs(f.list(t, c.ID, Filter{Field: "price", Value: "2", Param: "filter[price]"})))
	assert.Empty(t, f.list(t, c.ID, Filter{Field: "price", Value: "1", Param: "filter[price]"}), "old index entries are gone")
	col, err := f.svc.GetCollection(ctx, f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(4), col.RecordCount)

	// Nothing is left of the protocol: no pending version, no status.
	assert.Zero(t, f.pendingLeft(t, c.ID))
	assert.Zero(t, f.items(t, batchPK(f.bot, c.ID)))

	// By key again: an update instead of a create; what changes nothing makes no revision.
	res, err = f.svc.Batch(ctx, f.bot, c.ID, []BatchEntry{
		{ExternalKey: ptr("new"), Values: vals(t, "price", 1)},
		{ExternalKey: ptr("a"), Values: vals(t, "price", 3)},
	})
	require.NoError(t, err)
	assert.Equal(t, []string{n.ID}, res.Updated)
	assert.Equal(t, []string{a.ID}, res.Unchanged)
	assert.Empty(t, res.Created)
	assert.Equal(t, BatchItemResult{Index: 1, ID: a.ID, Action: "unchanged", Revision: 2}, res.Results[1])
	res, err = f.svc.Batch(ctx, f.bot, c.ID, []BatchEntry{{ExternalKey: ptr("a"), Values: vals(t, "price", 3)}})
	require.NoError(t, err)
	assert.Equal(t, []string{a.ID}, res.Unchanged)
	assert.Zero(t, f.items(t, batchPK(f.bot, c.ID)), "nothing to apply, no status written")
}

func TestBatchValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.products(t)
	a, err := f.svc.CreateRecord(t.Context(), f.bot, c.ID, ptr("a"), vals(t, "sku", "A"))
	require.NoError(t, err)
	before := f.view(t, c.ID)
	many := make([]BatchEntry, MaxBatchRecords+1)
	for i := range many {
		many[i] = BatchEntry{Values: vals(t, "sku", "x")}
	}
	tests := []struct {
		name     string
		entries  []BatchEntry
		problems []string
	}{
		{"empty", nil, []string{"records"}},
		{"501 records", many, []string{"records"}},
		{"id and key", []BatchEntry{{ID: ptr(a.ID), ExternalKey: ptr("a")}}, []string{"records[0]"}},
		{"malformed id", []BatchEntry{{ID: ptr("rec_nope")}}, []string{"records[0].id"}},
		{"unknown id", []BatchEntry{{ID: ptr("rec_00000000000000000000000000")}}, []string{"records[0].id"}},
		{"same id twice", []BatchEntry{{ID: ptr(a.ID)}, {ID: ptr(a.ID)}}, []string{"records[1].id"}},
		{"same key twice", []BatchEntry{{ExternalKey: ptr("k"), Values: vals(t, "sku", "1")}, {ExternalKey: ptr("k"), Values: vals(t, "sku", "2")}}, []string{"records[1].external_key"}},
		{"id and key of one record", []BatchEntry{{ID: ptr(a.ID)}, {ExternalKey: ptr("a")}}, []string{"records[1]"}},
		{"expected_revision without id", []BatchEntry{{ExternalKey: ptr("a"), ExpectedRevision: ptr(int64(1))}}, []string{"records[0].expected_revision"}},
		{"bad values in several entries", []BatchEntry{
			{Values: vals(t, "sku", "ok")},
			{Values: vals(t, "price", 1)},
			{ID: ptr(a.ID), Values: vals(t, "price", "x", "colour", 1)},
		}, []string{"records[1].values.sku", "records[2].values.price", "records[2].values.colour"}},
		{"empty key", []BatchEntry{{ExternalKey: ptr(""), Values: vals(t, "sku", "1")}}, []string{"records[0].external_key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := f.svc.Batch(t.Context(), f.bot, c.ID, tt.entries)
			assert.ElementsMatch(t, tt.problems, httpapitest.InvalidFields(t, err))
		})
	}
	_, err = f.svc.Batch(t.Context(), f.bot, c.ID, []BatchEntry{{Values: vals(t, "sku", "ok")}, {ID: ptr(a.ID), ExpectedRevision: ptr(int64(4)), Values: vals(t, "price", 1)}})
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "stale_revision", he.Code)
	assert.Equal(t, int64(1), he.Extensions["current_revision"])
	assert.Equal(t, 1, he.Extensions["index"])
	_, err = f.svc.Batch(t.Context(), f.bot, "col_00000000000000000000000000", []BatchEntry{{Values: vals(t, "sku", "x")}})
	assert.Equal(t, "not_found", httpapitest.AsError(t, err).Code)

	assert.Equal(t, before, f.view(t, c.ID), "a refused batch writes nothing")
	assert.Zero(t, f.items(t, batchPK(f.bot, c.ID)))
}

// fiveIndexed is a collection whose records need six writes each (record and five index
// entries) and a seventh with an external key: a 500-record batch is dozens of transactions.
func (f *fixture) fiveIndexed(t *testing.T) Collection {
	t.Helper()
	c, err := f.svc.CreateCollection(t.Context(), f.bot, "Wide", []FieldInput{
		field("sku", "string", true, true), field("price", "number", false, true), field("a", "string", false, true),
		field("b", "boolean", false, true), field("c", "datetime", false, true), field("note", "string", false, false),
	})
	require.NoError(t, err)
	return c
}

// seed creates n records with price 1 and external keys k0..k(n-1), and returns the batch
// that moves them all to price 2 and creates as many new ones with price 3.
func (f *fixture) seed(t *testing.T, col string, n int) []BatchEntry {
	t.Helper()
	var entries, news []BatchEntry
	for i := range n {
		entries = append(entries, BatchEntry{ExternalKey: ptr(fmt.Sprintf("k%d", i)), Values: vals(t, "sku", fmt.Sprint(i), "price", 1, "a", "x", "b", true, "c", "2026-01-01T00:00:00Z")})
	}
	_, err := f.svc.Batch(t.Context(), f.bot, col, entries)
	require.NoError(t, err)
	for i := range entries {
		entries[i].Values = vals(t, "price", 2, "a", "y")
		news = append(news, BatchEntry{ExternalKey: ptr(fmt.Sprintf("n%d", i)), Values: vals(t, "sku", "new", "price", 3, "a", "z", "b", false, "c", "2026-02-01T00:00:00Z")})
	}
	return append(entries, news...)
}

func TestBatch500IsManyTransactions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.fiveIndexed(t)
	entries := f.seed(t, c.ID, MaxBatchRecords/2)
	var txs int64
	f.store.set(nil, func(n int64, _ []store.Write) { txs = n })
	res, err := f.svc.Batch(t.Context(), f.bot, c.ID, entries)
	require.NoError(t, err)
	assert.Len(t, res.Updated, 250)
	assert.Len(t, res.Created, 250)
	assert.Greater(t, txs, int64(30), "staged and folded in many transactions")
	assert.Len(t, f.list(t, c.ID, Filter{Field: "price", Value: "2", Param: "filter[price]"}), 250)
	assert.Len(t, f.list(t, c.ID, Filter{Field: "price", Value: "3", Param: "filter[price]"}), 250)
	assert.Empty(t, f.list(t, c.ID, Filter{Field: "price", Value: "1", Param: "filter[price]"}))
	assert.Zero(t, f.pendingLeft(t, c.ID))
}

// countTransactions runs the batch of seed(40) on a fresh fixture and returns how many
// transactions it takes and which one commits.
func countTransactions(t *testing.T) (total, commitAt int64) {
	t.Helper()
	f := newFixture(t)
	c := f.fiveIndexed(t)
	entries := f.seed(t, c.ID, 40)
	f.store.set(nil, func(n int64, ws []store.Write) {
		total = n
		if ws[0].Put != nil && ws[0].Put.PK == batchPK(f.bot, c.ID) {
			commitAt = n
		}
	})
	_, err := f.svc.Batch(t.Context(), f.bot, c.ID, entries)
	require.NoError(t, err)
	require.Greater(t, commitAt, int64(4), "several staging transactions")
	require.Greater(t, total, commitAt+1, "several fold transactions")
	return total, commitAt
}

// afterSeedBatch checks that the batch of seed(40) is wholly visible.
func (f *fixture) afterSeedBatch(t *testing.T, col string) {
	t.Helper()
	assert.Len(t, f.list(t, col, Filter{Field: "price", Value: "2", Param: "filter[price]"}), 40)
	assert.Len(t, f.list(t, col, Filter{Field: "price", Value: "3", Param: "filter[price]"}), 40)
	assert.Len(t, f.list(t, col, Filter{Field: "a", Value: "y", Param: "filter[a]"}), 40)
	assert.Empty(t, f.list(t, col, Filter{Field: "price", Value: "1", Param: "filter[price]"}))
	assert.Empty(t, f.list(t, col, Filter{Field: "a", Value: "x", Param: "filter[a]"}))
	c, err := f.svc.GetCollection(t.Context(), f.bot, col)
	require.NoError(t, err)
	assert.Equal(t, int64(80), c.RecordCount)
}

// A failure at any transaction of a batch leaves either everything as it was (up to the
// commit) or everything done (from the commit on), whether the failure is transient (one
// transaction fails) or the process dies there (every later write fails, status writes
// included). What a dead process leaves is invisible, and writes go on past it.
func TestBatchFailureAtEveryStep(t *testing.T) {
	t.Parallel()
	total, commitAt := countTransactions(t)
	for _, crash := range []bool{false, true} {
		for k := int64(1); k <= total; k++ {
			name := fmt.Sprintf("transient failure of transaction %d of %d", k, total)
			if crash {
				name = fmt.Sprintf("process dies at transaction %d of %d", k, total)
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				c := f.fiveIndexed(t)
				entries := f.seed(t, c.ID, 40)
				before := f.view(t, c.ID)
				f.store.set(func(n int64, _ []store.Write) bool {
					if crash && n >= k {
						f.store.failPuts.Store(true)
					}
					return n == k || crash && n > k
				}, nil)
				_, err := f.svc.Batch(t.Context(), f.bot, c.ID, entries)
				f.store.set(nil, nil)
				f.store.failPuts.Store(false)
				if k <= commitAt {
					require.ErrorIs(t, err, errInjected)
					assert.Equal(t, before, f.view(t, c.ID), "nothing of an uncommitted batch is visible")
				} else {
					require.NoError(t, err, "the batch committed; only its clean-up failed")
					f.afterSeedBatch(t, c.ID)
				}
				if !crash {
					// A transient failure is cleaned up by the batch itself.
					assert.Zero(t, f.pendingLeft(t, c.ID))
					assert.Zero(t, f.items(t, batchPK(f.bot, c.ID)))
				}

				// Writes go on: the same batch again (once the dead one is past its
				// deadline) sweeps what was left, then a PATCH of every record.
				f.clock.Advance(batchDeadline)
				_, err = f.svc.Batch(t.Context(), f.bot, c.ID, entries)
				require.NoError(t, err)
				f.afterSeedBatch(t, c.ID)
				for _, r := range f.list(t, c.ID) {
					_, err := f.svc.UpdateRecord(t.Context(), f.bot, c.ID, r.ID, r.Revision, nil, vals(t, "note", "touched"))
					require.NoError(t, err)
				}
				assert.Zero(t, f.pendingLeft(t, c.ID))
				assert.Zero(t, f.items(t, batchPK(f.bot, c.ID)), "no status left")
				assert.Equal(t, 80, f.items(t, recordsPK(f.bot, c.ID)), "no invisible record left")
				assert.Equal(t, 80, f.items(t, externalPK(f.bot, c.ID)), "no claim left")
				assert.Equal(t, 80, f.items(t, indexPK(f.bot, c.ID, "f2")), "one price entry per record")
			})
		}
	}
}

// Readers looking at every step of a batch see all of it or none of it.
func TestBatchReadersSeeAllOrNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.fiveIndexed(t)
	entries := f.seed(t, c.ID, 40)
	before := f.view(t, c.ID)
	var views []string
	f.store.set(nil, func(int64, []store.Write) { views = append(views, f.view(t, c.ID)) })
	_, err := f.svc.Batch(t.Context(), f.bot, c.ID, entries)
	require.NoError(t, err)
	f.store.set(nil, nil)
	after := f.view(t, c.ID)
	require.NotEqual(t, before, after)
	changed := false
	for i, v := range views {
		if v == after {
			changed = true
			continue
		}
		require.False(t, changed, "step %d: back to an earlier state", i)
		require.Equal(t, before, v, "step %d: a partial state is visible", i)
	}
	assert.True(t, changed)
}

// A single write of a record that a batch has staged aborts the batch (single writes never
// wait): the write wins, the batch answers batch_conflict and changes nothing.
func TestBatchLosesToASingleWrite(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.fiveIndexed(t)
	entries := f.seed(t, c.ID, 40)
	first := f.list(t, c.ID)[0]
	f.store.set(nil, func(n int64, _ []store.Write) {
		if n == 3 { // staging is under way
			_, err := f.svc.UpdateRecord(t.Context(), f.bot, c.ID, first.ID, 1, nil, vals(t, "note", "mine"))
			require.NoError(t, err)
		}
	})
	_, err := f.svc.Batch(t.Context(), f.bot, c.ID, entries)
	f.store.set(nil, nil)
	assert.Equal(t, "batch_conflict", httpapitest.AsError(t, err).Code)
	got, err := f.svc.GetRecord(t.Context(), f.bot, c.ID, first.ID)
	require.NoError(t, err)
	want := first.Values
	want["note"] = json.RawMessage(`"mine"`)
	assert.Equal(t, want, got.Values)
	assert.Len(t, f.list(t, c.ID), 40)
	assert.Zero(t, f.pendingLeft(t, c.ID))
	_, err = f.svc.Batch(t.Context(), f.bot, c.ID, entries)
	require.NoError(t, err, "a retry succeeds")
}

// Two batches that meet on a record: the younger gives way to an older one that is still
// running, and wins against one past its deadline.
func TestBatchWoundWait(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.fiveIndexed(t)
	entries := f.seed(t, c.ID, 3)
	// An older batch dies after staging (before its commit).
	f.store.set(func(n int64, ws []store.Write) bool {
		if ws[0].Put != nil && ws[0].Put.PK == batchPK(f.bot, c.ID) {
			f.store.failPuts.Store(true)
			return true
		}
		return false
	}, nil)
	_, err := f.svc.Batch(t.Context(), f.bot, c.ID, entries[:3])
	require.Error(t, err)
	f.store.set(nil, nil)
	f.store.failPuts.Store(false)
	require.Equal(t, 3, f.pendingLeft(t, c.ID))

	f.clock.Advance(time.Second)
	_, err = f.svc.Batch(t.Context(), f.bot, c.ID, entries[1:2])
	assert.Equal(t, "batch_conflict", httpapitest.AsError(t, err).Code, "the older batch may still be running")
	f.clock.Advance(batchDeadline)
	res, err := f.svc.Batch(t.Context(), f.bot, c.ID, entries[1:2])
	require.NoError(t, err, "past its deadline the older batch is presumed dead")
	assert.Len(t, res.Updated, 1)
	assert.Zero(t, f.pendingLeft(t, c.ID), "the sweep rolled back the dead batch's other records")
}

// Big records make a batch's transactions smaller: none may exceed DynamoDB's 4 MB.
func TestBatchTransactionsStayUnderTheSizeLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c, err := f.svc.CreateCollection(t.Context(), f.bot, "Docs", []FieldInput{field("body", "string", false, false), field("more", "string", false, false)})
	require.NoError(t, err)
	big := strings.Repeat("x", MaxStringLen)
	var entries []BatchEntry
	for i := range 150 {
		entries = append(entries, BatchEntry{ExternalKey: ptr(fmt.Sprint(i)), Values: vals(t, "body", big, "more", big)})
	}
	_, err = f.svc.Batch(t.Context(), f.bot, c.ID, entries)
	require.NoError(t, err)
	var sizes []int
	f.store.set(nil, func(_ int64, ws []store.Write) {
		n := 0
		for _, w := range ws {
			n += writeBytes(w)
		}
		sizes = append(sizes, n)
	})
	for i := range entries {
		entries[i].Values = vals(t, "body", strings.Repeat("y", MaxStringLen))
	}
	_, err = f.svc.Batch(t.Context(), f.bot, c.ID, entries) // updates: two versions per item
	require.NoError(t, err)
	require.Greater(t, len(sizes), 4)
	for _, n := range sizes {
		assert.LessOrEqual(t, n, maxTransactBytes)
	}
}
