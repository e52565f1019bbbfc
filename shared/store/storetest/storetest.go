// Package storetest is the conformance suite every store.Store implementation must pass, so
// that the embedded store and the DynamoDB store behave the same under the business code.
//
// An implementation's test calls Run with a function that opens a fresh store:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
//			s, err := sqlite.Open(filepath.Join(t.TempDir(), "db"), sqlite.WithClock(now))
//			require.NoError(t, err)
//			return s
//		})
//	}
//
// Every subtest writes under its own random partition-key prefix, so a store backed by one
// shared server (or even one store shared by all subtests) passes too. Subtests run in
// parallel and close the store they opened.
package storetest

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
)

// Run runs the suite. open returns an empty store (or one whose other contents the suite's
// random key prefixes cannot meet) that decides expiry by the given clock; the suite closes
// it when the subtest ends.
func Run(t *testing.T, open func(t *testing.T, now func() time.Time) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h *harness)
	}{
		{"GetMissing", testGetMissing},
		{"GetMany", testGetMany},
		{"RoundTrip", testRoundTrip},
		{"InvalidKeys", testInvalidKeys},
		{"PutConditions", testPutConditions},
		{"DeleteConditions", testDeleteConditions},
		{"ConcurrentConditionalWriters", testConcurrentWriters},
		{"Query", testQuery},
		{"QueryPagination", testPagination},
		{"QueryExactlyFullPages", testExactlyFullPages},
		{"QueryInvalidCursor", testInvalidCursor},
		{"QueryIsolation", testIsolation},
		{"QuerySpecialCharacters", testSpecialCharacters},
		{"SecondaryIndexes", testIndexes},
		{"Add", testAdd},
		{"AddConcurrent", testAddConcurrent},
		{"Expiry", testExpiry},
		{"ExpiryAndConditions", testExpiryConditions},
		{"ExpiryAndPaging", testExpiryPaging},
		{"Transact", testTransact},
		{"TransactIncrements", testTransactIncrements},
		{"TransactConditionFailure", testTransactFailure},
		{"TransactInvalid", testTransactInvalid},
		{"InvalidQueries", testInvalidQueries},
		{"ContextCanceled", testContextCanceled},
		{"CountedLimit", testCountedLimit},
		{"CounterRepair", testCounterRepair},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newHarness(t, open))
		})
	}
}

// start is the fake clock's first reading. It lies inside a second so that tests notice a
// store that keeps sub-second expiries, and far enough ahead that no real clock reaches it.
func start() time.Time { return time.Date(2031, 3, 14, 15, 9, 26, 535_000_000, time.UTC) }

// clock is the controllable time the suite gives the store.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// harness is one subtest's store, clock and key namespace.
type harness struct {
	s     store.Store
	clock *clock
	ns    string
	ctx   context.Context
}

func newHarness(t *testing.T, open func(t *testing.T, now func() time.Time) store.Store) *harness {
	c := &clock{now: start()}
	s := open(t, c.Now)
	require.NotNil(t, s, "open returned a nil store")
	t.Cleanup(func() { assert.NoError(t, s.Close(), "Close") })
	return &harness{
		s:     s,
		clock: c,
		ns:    fmt.Sprintf("storetest-%016x/", rand.Uint64()),
		ctx:   t.Context(),
	}
}

// pk returns a partition key private to this subtest.
func (h *harness) pk(name string) string { return h.ns + name }

func (h *harness) key(pk, sk string) store.Key { return store.Key{PK: h.pk(pk), SK: sk} }

func (h *harness) put(t *testing.T, it store.Item) {
	t.Helper()
	require.NoError(t, h.s.Put(h.ctx, it, store.Always), "Put %s/%s", it.PK, it.SK)
}

// putAll writes items from several goroutines: order of arrival must not matter, and a
// remote store fills up faster.
func (h *harness) putAll(t *testing.T, items []store.Item) {
	t.Helper()
	work := make(chan store.Item)
	errs := make(chan error, len(items))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for it := range work {
				if err := h.s.Put(h.ctx, it, store.Always); err != nil {
					errs <- fmt.Errorf("Put %s/%s: %w", it.PK, it.SK, err)
				}
			}
		})
	}
	for _, i := range rand.Perm(len(items)) {
		work <- items[i]
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func (h *harness) get(t *testing.T, k store.Key) store.Item {
	t.Helper()
	it, err := h.s.Get(h.ctx, k)
	require.NoError(t, err, "Get %s/%s", k.PK, k.SK)
	return it
}

func (h *harness) requireMissing(t *testing.T, k store.Key) {
	t.Helper()
	_, err := h.s.Get(h.ctx, k)
	require.ErrorIs(t, err, store.ErrNotFound, "Get %s/%s", k.PK, k.SK)
}

func (h *harness) query(t *testing.T, q store.Query) store.Page {
	t.Helper()
	p, err := h.s.Query(h.ctx, q)
	require.NoError(t, err, "Query %+v", q)
	return p
}

// queryAll follows cursors to the end, checking that every page but the last is full and
// that Next is empty only on the last.
func (h *harness) queryAll(t *testing.T, q store.Query) []store.Item {
	t.Helper()
	var all []store.Item
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10_000, "cursor does not advance")
		p := h.query(t, q)
		if p.Next == "" {
			return append(all, p.Items...)
		}
		require.Len(t, p.Items, q.PageLimit(), "a page with a Next cursor must be full")
		all = append(all, p.Items...)
		q.Cursor = p.Next
	}
}

func sortKeys(items []store.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SK
	}
	return out
}

func item(pk, sk string) store.Item { return store.Item{Key: store.Key{PK: pk, SK: sk}} }

func itemsOf(pk string, sks ...string) []store.Item {
	out := make([]store.Item, len(sks))
	for i, sk := range sks {
		out[i] = item(pk, sk)
		out[i].Data = fmt.Appendf(nil, `{"sk":%q}`, sk)
	}
	return out
}

func reversed(s []string) []string {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}

// assertItem compares every field the store keeps; an empty and a nil document are equal
// (DynamoDB cannot tell them apart), and expiry is compared at whole seconds.
func assertItem(t *testing.T, want, got store.Item) {
	t.Helper()
	assert.Equal(t, want.Key, got.Key, "Key")
	assert.Equal(t, want.GSI1, got.GSI1, "GSI1")
	assert.Equal(t, want.GSI2, got.GSI2, "GSI2")
	assert.Equal(t, want.Revision, got.Revision, "Revision")
	assert.Equal(t, want.Count, got.Count, "Count")
	if len(want.Data) == 0 {
		assert.Empty(t, got.Data, "Data")
	} else {
		assert.Equal(t, want.Data, got.Data, "Data: want %q, got %q", want.Data, got.Data)
	}
	wantExp := store.SecondsPrecision(want.ExpiresAt)
	assert.True(t, wantExp.Equal(got.ExpiresAt), "ExpiresAt: want %v, got %v", wantExp, got.ExpiresAt)
}

func requireConditionFailed(t *testing.T, err error, index int) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, store.ErrConditionFailed)
	var ce *store.ConditionError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, index, ce.Index, "ConditionError.Index")
}

// requireRefused checks for an error that callers must not mistake for a lost race or a
// missing item.
func requireRefused(t *testing.T, err error, msgAndArgs ...any) {
	t.Helper()
	require.Error(t, err, msgAndArgs...)
	require.NotErrorIs(t, err, store.ErrConditionFailed, msgAndArgs...)
	require.NotErrorIs(t, err, store.ErrNotFound, msgAndArgs...)
}

func testGetMissing(t *testing.T, h *harness) {
	h.requireMissing(t, h.key("p", "missing"))
	h.put(t, item(h.pk("p"), "present"))
	h.requireMissing(t, h.key("p", "presen"))
	h.requireMissing(t, h.key("p", "present2"))
	h.requireMissing(t, h.key("p2", "present"))
	h.get(t, h.key("p", "present"))
}

func testGetMany(t *testing.T, h *harness) {
	got, err := h.s.GetMany(h.ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, got)

	sec := store.SecondsPrecision(start())
	a := store.Item{Key: h.key("p", "a"), Revision: 3, Data: []byte(`{"n":1}`), GSI1: store.IndexKey{PK: h.pk("g"), SK: "a"}}
	b := store.Item{Key: h.key("q", "b"), Count: 7}
	expiring := store.Item{Key: h.key("p", "x"), ExpiresAt: sec.Add(10 * time.Second)}
	h.putAll(t, []store.Item{a, b, expiring})

	// In key order, absent ones as the zero Item, a repeated key answered at each place.
	keys := []store.Key{b.Key, h.key("p", "missing"), a.Key, expiring.Key, a.Key, h.key("q", "a")}
	got, err = h.s.GetMany(h.ctx, keys)
	require.NoError(t, err)
	require.Len(t, got, len(keys))
	assertItem(t, b, got[0])
	assert.Equal(t, store.Item{}, got[1])
	assertItem(t, a, got[2])
	assertItem(t, expiring, got[3])
	assertItem(t, a, got[4])
	assert.Equal(t, store.Item{}, got[5])

	h.clock.Set(expiring.ExpiresAt) // expired items are absent, as for Get
	got, err = h.s.GetMany(h.ctx, keys[3:4])
	require.NoError(t, err)
	assert.Equal(t, store.Item{}, got[0])

	// Every length up to the limit (the SQLite store pads to a few statement shapes).
	many := make([]store.Item, store.MaxGetMany)
	for i := range many {
		many[i] = store.Item{Key: h.key("m", fmt.Sprintf("%03d", i)), Revision: int64(i + 1)}
	}
	h.putAll(t, many)
	for _, n := range []int{1, 2, 3, 31, 64, 65, store.MaxGetMany} {
		keys := make([]store.Key, n)
		for i := range keys {
			keys[i] = many[(i*7)%store.MaxGetMany].Key
		}
		got, err := h.s.GetMany(h.ctx, keys)
		require.NoError(t, err, n)
		require.Len(t, got, n)
		for i, it := range got {
			assert.Equal(t, keys[i], it.Key, "n=%d i=%d", n, i)
		}
	}

	// Refused before anything is read: too many keys, an invalid key.
	_, err = h.s.GetMany(h.ctx, make([]store.Key, store.MaxGetMany+1))
	requireRefused(t, err)
	_, err = h.s.GetMany(h.ctx, []store.Key{a.Key, {PK: "", SK: "x"}})
	requireRefused(t, err)
}

func testRoundTrip(t *testing.T, h *harness) {
	// Whitespace, key order and escapes must survive: Data is opaque bytes to the store.
	data := []byte("{ \"z\": 1,\n\t\"a\": [true, null], \"s\": \"h\u00e9llo \\u00e9 \U0001F600\" }")
	full := store.Item{
		Key:       h.key("p", "full"),
		GSI1:      store.IndexKey{PK: h.pk("g1"), SK: "2031-03-14"},
		GSI2:      store.IndexKey{PK: h.pk("g2"), SK: "alice"},
		Revision:  7,
		Data:      slices.Clone(data),
		Count:     -42,
		ExpiresAt: start().Add(90*time.Minute + 250*time.Millisecond),
	}
	h.put(t, full)
	got := h.get(t, full.Key)
	assertItem(t, full, got)
	assert.Equal(t, full.ExpiresAt.Unix(), got.ExpiresAt.Unix(), "ExpiresAt keeps whole seconds")
	// Reads hand out copies: neither the caller's buffer nor a returned one is the store's.
	full.Data[0] = 'X'
	got.Data[1] = 'Y'
	assert.Equal(t, data, h.get(t, full.Key).Data)

	bare := item(h.pk("p"), "bare")
	h.put(t, bare)
	got = h.get(t, bare.Key)
	assertItem(t, bare, got)
	assert.True(t, got.ExpiresAt.IsZero(), "no expiry reads back as the zero time")

	extreme := store.Item{Key: h.key("p", "extreme"), Revision: math.MaxInt64, Count: math.MinInt64, Data: []byte(`{}`)}
	h.put(t, extreme)
	assertItem(t, extreme, h.get(t, extreme.Key))

	// Query returns the same fields as Get.
	p := h.query(t, store.Query{PK: h.pk("p"), Prefix: "full"})
	require.Len(t, p.Items, 1)
	assertItem(t, store.Item{
		Key: full.Key, GSI1: full.GSI1, GSI2: full.GSI2, Revision: full.Revision,
		Data: data, Count: full.Count, ExpiresAt: full.ExpiresAt,
	}, p.Items[0])

	// Put replaces the whole item: fields and index entries it no longer has are gone.
	replacement := store.Item{Key: full.Key, Revision: 8, Data: []byte(`{"v":2}`)}
	h.put(t, replacement)
	assertItem(t, replacement, h.get(t, full.Key))
	assert.Empty(t, h.query(t, store.Query{Index: store.GSI1, PK: h.pk("g1")}).Items, "old GSI1 entry")
	assert.Empty(t, h.query(t, store.Query{Index: store.GSI2, PK: h.pk("g2")}).Items, "old GSI2 entry")
}

func testInvalidKeys(t *testing.T, h *harness) {
	ctx := h.ctx
	for _, k := range []store.Key{{}, {PK: h.pk("p")}, {SK: "s"}} {
		requireRefused(t, h.s.Put(ctx, store.Item{Key: k}, store.Always), "Put %+v", k)
		requireRefused(t, h.s.Put(ctx, store.Item{Key: k}, store.MustNotExist), "Put MustNotExist %+v", k)
		_, err := h.s.Get(ctx, k)
		requireRefused(t, err, "Get %+v", k)
		requireRefused(t, h.s.Delete(ctx, k, store.Always), "Delete %+v", k)
		_, err = h.s.Add(ctx, k, 1, time.Time{})
		requireRefused(t, err, "Add %+v", k)
	}
	// Keys are UTF-8 strings (DynamoDB's rule); anything else would be silently altered
	// on the way to DynamoDB.
	bad := store.Item{Key: h.key("p", "bad\xff")}
	requireRefused(t, h.s.Put(ctx, bad, store.Always), "non-UTF-8 SK")

	// An index key is all or nothing: the zero IndexKey means "not indexed".
	for _, ik := range []store.IndexKey{{PK: h.pk("g")}, {SK: "s"}} {
		it := store.Item{Key: h.key("p", "half"), GSI1: ik}
		requireRefused(t, h.s.Put(ctx, it, store.Always), "half GSI1 key %+v", ik)
		it = store.Item{Key: h.key("p", "half"), GSI2: ik}
		requireRefused(t, h.s.Put(ctx, it, store.Always), "half GSI2 key %+v", ik)
	}
	h.requireMissing(t, h.key("p", "half"))

	// A document DynamoDB could not hold is refused by every store, in a transaction too.
	big := store.Item{Key: h.key("p", "big"), Data: []byte(`"` + strings.Repeat("x", store.MaxDataBytes-1) + `"`)}
	err := h.s.Put(ctx, big, store.Always)
	requireRefused(t, err, "a document over MaxDataBytes")
	assert.ErrorIs(t, err, store.ErrTooLarge)
	err = h.s.Transact(ctx, []store.Write{store.PutOp(big, store.Always)})
	assert.ErrorIs(t, err, store.ErrTooLarge)
	big.Data = big.Data[:store.MaxDataBytes-1]
	big.Data = append(big.Data, '"')
	require.NoError(t, h.s.Put(ctx, big, store.Always), "a document of exactly MaxDataBytes fits")
	require.NoError(t, h.s.Delete(ctx, big.Key, store.Always))
	assert.Empty(t, h.query(t, store.Query{PK: h.pk("p")}).Items, "refused writes wrote nothing")
}

func testPutConditions(t *testing.T, h *harness) {
	ctx := h.ctx
	v := func(name string, rev int64) store.Item {
		return store.Item{Key: h.key("p", name), Revision: rev, Data: fmt.Appendf(nil, `{"rev":%d}`, rev)}
	}

	// MustNotExist creates, then refuses to overwrite.
	require.NoError(t, h.s.Put(ctx, v("a", 1), store.MustNotExist))
	assertItem(t, v("a", 1), h.get(t, v("a", 1).Key))
	requireConditionFailed(t, h.s.Put(ctx, v("a", 2), store.MustNotExist), 0)
	assertItem(t, v("a", 1), h.get(t, v("a", 1).Key))

	// MustExist refuses to create, then overwrites.
	requireConditionFailed(t, h.s.Put(ctx, v("b", 1), store.MustExist), 0)
	h.requireMissing(t, v("b", 1).Key)
	require.NoError(t, h.s.Put(ctx, v("a", 2), store.MustExist))
	assertItem(t, v("a", 2), h.get(t, v("a", 2).Key))

	// RevisionIs compares the stored revision.
	requireConditionFailed(t, h.s.Put(ctx, v("a", 3), store.RevisionIs(1)), 0)
	requireConditionFailed(t, h.s.Put(ctx, v("a", 3), store.RevisionIs(3)), 0)
	assertItem(t, v("a", 2), h.get(t, v("a", 2).Key))
	require.NoError(t, h.s.Put(ctx, v("a", 3), store.RevisionIs(2)))
	assertItem(t, v("a", 3), h.get(t, v("a", 3).Key))
	requireConditionFailed(t, h.s.Put(ctx, v("c", 1), store.RevisionIs(0)), 0)
	h.requireMissing(t, v("c", 1).Key)

	// Always creates and overwrites, whatever the revision.
	require.NoError(t, h.s.Put(ctx, v("d", 5), store.Always))
	require.NoError(t, h.s.Put(ctx, v("d", 1), store.Always))
	assertItem(t, v("d", 1), h.get(t, v("d", 1).Key))
}

func testDeleteConditions(t *testing.T, h *harness) {
	ctx := h.ctx
	k := func(name string) store.Key { return h.key("p", name) }
	put := func(name string, rev int64) { h.put(t, store.Item{Key: k(name), Revision: rev}) }

	require.NoError(t, h.s.Delete(ctx, k("absent"), store.Always), "Always on an absent item")
	requireConditionFailed(t, h.s.Delete(ctx, k("absent"), store.MustExist), 0)
	requireConditionFailed(t, h.s.Delete(ctx, k("absent"), store.RevisionIs(0)), 0)
	require.NoError(t, h.s.Delete(ctx, k("absent"), store.MustNotExist))

	put("a", 1)
	require.NoError(t, h.s.Delete(ctx, k("a"), store.Always))
	h.requireMissing(t, k("a"))

	put("b", 1)
	requireConditionFailed(t, h.s.Delete(ctx, k("b"), store.MustNotExist), 0)
	h.get(t, k("b"))
	require.NoError(t, h.s.Delete(ctx, k("b"), store.MustExist))
	h.requireMissing(t, k("b"))

	put("c", 4)
	requireConditionFailed(t, h.s.Delete(ctx, k("c"), store.RevisionIs(3)), 0)
	assert.Equal(t, int64(4), h.get(t, k("c")).Revision)
	require.NoError(t, h.s.Delete(ctx, k("c"), store.RevisionIs(4)))
	h.requireMissing(t, k("c"))
}

// race starts n calls of fn at once and returns their errors.
func race(n int, fn func(i int) error) []error {
	errs := make([]error, n)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-begin
			errs[i] = fn(i)
		})
	}
	close(begin)
	wg.Wait()
	return errs
}

// onlyWinner checks that exactly one call succeeded and the rest lost on their condition.
func onlyWinner(t *testing.T, errs []error) int {
	t.Helper()
	winner := -1
	for i, err := range errs {
		if err == nil {
			require.Equal(t, -1, winner, "writers %d and %d both won", winner, i)
			winner = i
			continue
		}
		require.ErrorIs(t, err, store.ErrConditionFailed, "writer %d", i)
	}
	require.NotEqual(t, -1, winner, "no writer won")
	return winner
}

func testConcurrentWriters(t *testing.T, h *harness) {
	const writers = 8
	for round := range 5 {
		key := h.key("p", fmt.Sprintf("rev-%d", round))
		h.put(t, store.Item{Key: key, Revision: 1})
		errs := race(writers, func(i int) error {
			return h.s.Put(h.ctx, store.Item{Key: key, Revision: 2, Data: fmt.Appendf(nil, `{"w":%d}`, i)}, store.RevisionIs(1))
		})
		w := onlyWinner(t, errs)
		assert.Equal(t, fmt.Appendf(nil, `{"w":%d}`, w), h.get(t, key).Data, "the winner's write is stored")

		key = h.key("p", fmt.Sprintf("new-%d", round))
		errs = race(writers, func(i int) error {
			return h.s.Put(h.ctx, store.Item{Key: key, Data: fmt.Appendf(nil, `{"w":%d}`, i)}, store.MustNotExist)
		})
		w = onlyWinner(t, errs)
		assert.Equal(t, fmt.Appendf(nil, `{"w":%d}`, w), h.get(t, key).Data, "the winner's write is stored")

		errs = race(writers, func(int) error { return h.s.Delete(h.ctx, key, store.MustExist) })
		onlyWinner(t, errs)
	}
}

// A limit kept with store.Counted holds when many creations race: 150 concurrent creations
// against a limit of 100 create exactly 100 items and move the counter to exactly 100. A
// creation that keeps losing the race answers ErrUnavailable (the API's 503: retry later);
// retried, it then meets the limit. No creation is lost and none passes the limit.
func testCountedLimit(t *testing.T, h *harness) {
	const limit, creators = 100, 150
	counter := h.key("c", "COUNT")
	errLimit := errors.New("limit reached")
	create := func(i int) error {
		return store.Counted(h.ctx, h.s, counter, +1, func(c store.Counter) error {
			if c.Count >= limit {
				return errLimit
			}
			return h.s.Transact(h.ctx, []store.Write{c.Write,
				store.PutOp(store.Item{Key: h.key("c", fmt.Sprintf("item-%03d", i)), Revision: 1}, store.MustNotExist)})
		})
	}
	errs := race(creators, create)
	created, limited, busy := 0, 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, errLimit):
			limited++
		case errors.Is(err, store.ErrUnavailable):
			busy++
			// What a client does with a 503: try again (alone now).
			if err := create(i); err == nil {
				created++
			} else if errors.Is(err, errLimit) {
				limited++
			} else {
				t.Errorf("creation %d retried: %v", i, err)
			}
		default:
			t.Errorf("creation %d: %v", i, err)
		}
	}
	t.Logf("%d created, %d refused at the limit, %d busy at first", created, limited, busy)
	assert.Equal(t, limit, created, "exactly the limit is created")
	assert.Equal(t, creators-limit, limited)
	assert.EqualValues(t, limit, h.get(t, counter).Count, "the counter counts every creation")
	page, err := h.s.Query(h.ctx, store.Query{PK: h.pk("c"), Prefix: "item-"})
	require.NoError(t, err)
	assert.Len(t, page.Items, limit, "the items created")
}

// A counter read for a move can instead be set (a recount repairs it), under the same
// condition; a new counter never goes below zero.
func testCounterRepair(t *testing.T, h *harness) {
	key := h.key("c", "COUNT")
	c, err := store.ReadCounter(h.ctx, h.s, key, -1)
	require.NoError(t, err)
	assert.False(t, c.Exists)
	require.NoError(t, h.s.Transact(h.ctx, []store.Write{c.Write}))
	assert.Zero(t, h.get(t, key).Count, "a count never goes below zero")

	c, err = store.ReadCounter(h.ctx, h.s, key, +1)
	require.NoError(t, err)
	stale := c
	require.NoError(t, h.s.Transact(h.ctx, []store.Write{c.Set(40).Write}))
	assert.EqualValues(t, 40, h.get(t, key).Count)
	err = h.s.Transact(h.ctx, []store.Write{stale.Set(7).Write})
	var ce *store.ConditionError
	require.ErrorAs(t, err, &ce, "a counter moved since it was read cannot be set")
	assert.Equal(t, 0, ce.Index)
	assert.EqualValues(t, 40, h.get(t, key).Count)
}

func testQuery(t *testing.T, h *harness) {
	pk := h.pk("p")
	all := []string{"a", "b", "b#1", "b#2", "b#3", "c", "note", "note#1", "note#2", "z"}
	h.putAll(t, itemsOf(pk, all...))
	h.putAll(t, itemsOf(h.pk("p0"), all...)) // a neighbour that must not leak in

	// want is the whole forward result; each case also runs reversed and with limits.
	cases := []struct {
		name string
		q    store.Query
		want []string
	}{
		{"all", store.Query{}, all},
		{"prefix b", store.Query{Prefix: "b"}, []string{"b", "b#1", "b#2", "b#3"}},
		{"prefix b#", store.Query{Prefix: "b#"}, []string{"b#1", "b#2", "b#3"}},
		{"prefix note#", store.Query{Prefix: "note#"}, []string{"note#1", "note#2"}},
		{"prefix equal to a key", store.Query{Prefix: "z"}, []string{"z"}},
		{"prefix matching nothing", store.Query{Prefix: "x"}, nil},
		{"range", store.Query{From: "b#1", To: "c"}, []string{"b#1", "b#2", "b#3", "c"}},
		{"range between keys", store.Query{From: "b#15", To: "b#25"}, []string{"b#2"}},
		{"from only", store.Query{From: "note#1"}, []string{"note#1", "note#2", "z"}},
		{"to only", store.Query{To: "b"}, []string{"a", "b"}},
		{"to excludes longer keys", store.Query{To: "note"}, []string{"a", "b", "b#1", "b#2", "b#3", "c", "note"}},
		{"from equals to", store.Query{From: "c", To: "c"}, []string{"c"}},
		{"empty range", store.Query{From: "b#9", To: "b#9"}, nil},
	}
	for _, tc := range cases {
		for _, rev := range []bool{false, true} {
			for _, limit := range []int{0, 1, 2, 3, 4, 10} {
				q := tc.q
				q.PK, q.Reverse, q.Limit = pk, rev, limit
				want := tc.want
				if rev {
					want = reversed(want)
				}
				more := limit > 0 && limit < len(want)
				if more {
					want = want[:limit]
				}
				p := h.query(t, q)
				assert.Equal(t, want, nilIfEmpty(sortKeys(p.Items)), "%s reverse=%v limit=%d", tc.name, rev, limit)
				assert.Equal(t, more, p.Next != "", "%s reverse=%v limit=%d: Next %q", tc.name, rev, limit, p.Next)
			}
		}
	}

	// Limit 0 means the maximum page, which holds this whole partition.
	p := h.query(t, store.Query{PK: pk, Limit: 0})
	assert.Len(t, p.Items, len(all))
	assert.Empty(t, p.Next)
	// An absent partition is an empty page, not an error.
	p = h.query(t, store.Query{PK: h.pk("nobody")})
	assert.Empty(t, p.Items)
	assert.Empty(t, p.Next)
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func testPagination(t *testing.T, h *harness) {
	pk := h.pk("p")
	const n = 1000
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf("k%04d", i))
	}
	h.putAll(t, itemsOf(pk, want...))

	filter := func(keep func(string) bool) []string {
		var out []string
		for _, s := range want {
			if keep(s) {
				out = append(out, s)
			}
		}
		return out
	}
	cases := []struct {
		name string
		q    store.Query
		want []string
	}{
		{"all", store.Query{}, want},
		{"prefix", store.Query{Prefix: "k05"}, filter(func(s string) bool { return strings.HasPrefix(s, "k05") })},
		{"range", store.Query{From: "k0100", To: "k0199"}, want[100:200]},
	}
	for _, tc := range cases {
		for _, rev := range []bool{false, true} {
			for _, limit := range []int{7, 64} {
				q := tc.q
				q.PK, q.Reverse, q.Limit = pk, rev, limit
				w := tc.want
				if rev {
					w = reversed(w)
				}
				got := sortKeys(h.queryAll(t, q))
				// Equal order and length means each item exactly once.
				require.Equal(t, w, got, "%s reverse=%v limit=%d", tc.name, rev, limit)
			}
		}
	}

	// The page size may change between pages: the cursor is a position, not a page number.
	p := h.query(t, store.Query{PK: pk, Limit: 7})
	p = h.query(t, store.Query{PK: pk, Limit: 13, Cursor: p.Next})
	assert.Equal(t, want[7:20], sortKeys(p.Items))
	p = h.query(t, store.Query{PK: pk, Limit: 5, Reverse: true})
	p = h.query(t, store.Query{PK: pk, Limit: 3, Reverse: true, Cursor: p.Next})
	assert.Equal(t, reversed(want[n-8:n-5]), sortKeys(p.Items))
}

func testExactlyFullPages(t *testing.T, h *harness) {
	pk := h.pk("p")
	var sks []string
	for i := range 14 {
		sks = append(sks, fmt.Sprintf("s%02d", i))
	}
	h.putAll(t, itemsOf(pk, sks...))
	for _, rev := range []bool{false, true} {
		p := h.query(t, store.Query{PK: pk, Limit: 7, Reverse: rev})
		require.Len(t, p.Items, 7)
		require.NotEmpty(t, p.Next, "reverse=%v", rev)
		p = h.query(t, store.Query{PK: pk, Limit: 7, Reverse: rev, Cursor: p.Next})
		assert.Len(t, p.Items, 7)
		assert.Empty(t, p.Next, "reverse=%v: the last page is exactly full", rev)

		p = h.query(t, store.Query{PK: pk, Limit: 14, Reverse: rev})
		assert.Len(t, p.Items, 14)
		assert.Empty(t, p.Next, "reverse=%v: one exactly full page", rev)

		p = h.query(t, store.Query{PK: pk, Limit: 13, Reverse: rev})
		require.NotEmpty(t, p.Next)
		p = h.query(t, store.Query{PK: pk, Limit: 13, Reverse: rev, Cursor: p.Next})
		assert.Len(t, p.Items, 1)
		assert.Empty(t, p.Next)

		p = h.query(t, store.Query{PK: pk, Prefix: "s0", Limit: 10, Reverse: rev})
		assert.Len(t, p.Items, 10)
		assert.Empty(t, p.Next, "reverse=%v: exactly full under a prefix with keys beyond it", rev)
	}
}

func testInvalidCursor(t *testing.T, h *harness) {
	pk := h.pk("p")
	h.putAll(t, itemsOf(pk, "a", "b", "c", "d"))
	other := h.pk("q")
	h.putAll(t, itemsOf(other, "a", "b", "c", "d"))
	for _, c := range []string{
		"garbage!",
		"not-a-cursor",
		base64.RawURLEncoding.EncodeToString([]byte("not-a-cursor")),
		base64.RawURLEncoding.EncodeToString([]byte(`{}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`[]`)),
		base64.RawURLEncoding.EncodeToString([]byte(`["a"]`)),
		base64.StdEncoding.EncodeToString([]byte(`["x","y","z","w"]`)),
		strings.Repeat("A", 64),
	} {
		_, err := h.s.Query(h.ctx, store.Query{PK: pk, Cursor: c})
		assert.ErrorIs(t, err, store.ErrInvalidCursor, "cursor %q", c)
	}

	fwd := h.query(t, store.Query{PK: pk, Limit: 2})
	require.NotEmpty(t, fwd.Next)
	// A working cursor, for contrast with the foreign uses below.
	assert.Equal(t, []string{"c", "d"}, sortKeys(h.query(t, store.Query{PK: pk, Limit: 2, Cursor: fwd.Next}).Items))
	foreign := []struct {
		name string
		q    store.Query
	}{
		{"other direction", store.Query{PK: pk, Reverse: true}},
		{"other index", store.Query{PK: pk, Index: store.GSI1}},
		{"other partition", store.Query{PK: other}},
		{"truncated", store.Query{PK: pk, Cursor: fwd.Next[:len(fwd.Next)-3]}},
	}
	for _, f := range foreign {
		q := f.q
		if q.Cursor == "" {
			q.Cursor = fwd.Next
		}
		_, err := h.s.Query(h.ctx, q)
		assert.ErrorIs(t, err, store.ErrInvalidCursor, f.name)
	}
	rev := h.query(t, store.Query{PK: pk, Limit: 2, Reverse: true})
	require.NotEmpty(t, rev.Next)
	_, err := h.s.Query(h.ctx, store.Query{PK: pk, Cursor: rev.Next})
	assert.ErrorIs(t, err, store.ErrInvalidCursor, "reverse cursor read forward")
}

func testIsolation(t *testing.T, h *harness) {
	// Partition keys that are prefixes of one another are still separate partitions.
	parts := map[string][]string{
		"a":  {"1", "2"},
		"ab": {"1", "3"},
		"a#": {"0"},
		"b":  {"1"},
	}
	for p, sks := range parts {
		h.putAll(t, itemsOf(h.pk(p), sks...))
	}
	for p, sks := range parts {
		got := h.query(t, store.Query{PK: h.pk(p)})
		assert.Equal(t, sks, sortKeys(got.Items), "partition %q", p)
		for _, it := range got.Items {
			assert.Equal(t, h.pk(p), it.PK)
		}
		got = h.query(t, store.Query{PK: h.pk(p), Prefix: "1"})
		var want []string
		for _, sk := range sks {
			if strings.HasPrefix(sk, "1") {
				want = append(want, sk)
			}
		}
		assert.Equal(t, want, nilIfEmpty(sortKeys(got.Items)), "partition %q prefix 1", p)
	}
	// The partition key is matched exactly, LIKE-special characters included.
	for _, p := range []string{"p%", "p_", "p%_é", "p\\"} {
		h.put(t, item(h.pk(p), "x"))
	}
	for _, p := range []string{"p%", "p_", "p%_é", "p\\"} {
		got := h.query(t, store.Query{PK: h.pk(p)})
		require.Len(t, got.Items, 1, "partition %q", p)
		assert.Equal(t, h.pk(p), got.Items[0].PK)
	}
	assert.Empty(t, h.query(t, store.Query{PK: h.pk("p")}).Items)
}

func testSpecialCharacters(t *testing.T, h *harness) {
	pk := h.pk("p")
	sks := []string{
		"100", "100%", "100%off", "1000", "100x", "100_", "100_a", "100a", "100\\", "100\\a",
		"a_b", "a_bc", "axb", "aXb", "B", "ae", "aé", "aéb", "aê", "aêb", "aéz",
		"日", "日本", "日本語", "日曜", "\U0001F600", "\U0001F600!", "\U0010FFFF", "z\U0010FFFFz", "z", "z~",
	}
	h.putAll(t, itemsOf(pk, sks...))
	// Byte order of the UTF-8 encoding (DynamoDB's order, and Go's string order), not a
	// collation: "B" < "a", and code points beyond the BMP sort last.
	sorted := slices.Clone(sks)
	slices.Sort(sorted)
	assert.Equal(t, sorted, sortKeys(h.queryAll(t, store.Query{PK: pk, Limit: 5})))

	for _, prefix := range []string{"100%", "100_", "100\\", "a_b", "a_", "aé", "日本", "日", "\U0001F600", "\U0010FFFF", "z\U0010FFFF", "%", "_", "z"} {
		var want []string
		for _, s := range sorted {
			if strings.HasPrefix(s, prefix) {
				want = append(want, s)
			}
		}
		for _, rev := range []bool{false, true} {
			w := want
			if rev {
				w = reversed(want)
			}
			got := sortKeys(h.queryAll(t, store.Query{PK: pk, Prefix: prefix, Reverse: rev, Limit: 2}))
			assert.Equal(t, w, nilIfEmpty(got), "prefix %q reverse=%v", prefix, rev)
		}
	}
	for _, r := range [][2]string{{"aé", "aê"}, {"100%", "100_"}, {"日", "日本"}, {"z", "\U0010FFFF"}} {
		var want []string
		for _, s := range sorted {
			if s >= r[0] && s <= r[1] {
				want = append(want, s)
			}
		}
		got := sortKeys(h.queryAll(t, store.Query{PK: pk, From: r[0], To: r[1], Limit: 2}))
		assert.Equal(t, want, nilIfEmpty(got), "range %q..%q", r[0], r[1])
	}
}

func testIndexes(t *testing.T, h *harness) {
	for _, idx := range []store.Index{store.GSI1, store.GSI2} {
		other := store.GSI2
		if idx == store.GSI2 {
			other = store.GSI1
		}
		ns := string(idx) + "/"
		gpk := h.pk(ns + "g")
		withIndex := func(pk, sk, gsk string) store.Item {
			it := item(h.pk(ns+pk), sk)
			it.Data = fmt.Appendf(nil, `{"g":%q}`, gsk)
			it.Revision = 3
			ik := store.IndexKey{PK: gpk, SK: gsk}
			if idx == store.GSI1 {
				it.GSI1 = ik
			} else {
				it.GSI2 = ik
			}
			return it
		}
		// Several primary partitions feed one index partition, with ties on the index
		// sort key that only the primary key orders.
		indexed := []store.Item{
			withIndex("a", "1", "2031-01-01"),
			withIndex("b", "1", "2031-01-02"),
			withIndex("a", "2", "2031-01-02"),
			withIndex("c", "0", "2031-01-02"),
			withIndex("b", "0", "2031-01-02"),
			withIndex("a", "0", "2031-01-02"),
			withIndex("a", "3", "2031-01-03"),
			withIndex("b", "2", "2031-01-03"),
		}
		elsewhere := withIndex("a", "4", "2031-01-02")
		if idx == store.GSI1 {
			elsewhere.GSI1.PK = gpk + "x"
		} else {
			elsewhere.GSI2.PK = gpk + "x"
		}
		unindexed := []store.Item{item(h.pk(ns+"a"), "5"), item(h.pk(ns+"c"), "1")}
		h.putAll(t, append(append(slices.Clone(indexed), elsewhere), unindexed...))

		type pos struct{ gsk, pk, sk string }
		posOf := func(it store.Item) pos {
			if idx == store.GSI1 {
				return pos{it.GSI1.SK, it.PK, it.SK}
			}
			return pos{it.GSI2.SK, it.PK, it.SK}
		}
		positions := func(items []store.Item) []pos {
			out := make([]pos, len(items))
			for i, it := range items {
				out[i] = posOf(it)
			}
			return out
		}
		want := positions(indexed)
		slices.SortFunc(want, func(x, y pos) int {
			return strings.Compare(x.gsk+"\x00"+x.pk+"\x00"+x.sk, y.gsk+"\x00"+y.pk+"\x00"+y.sk)
		})
		filter := func(keep func(pos) bool) []pos {
			var out []pos
			for _, p := range want {
				if keep(p) {
					out = append(out, p)
				}
			}
			return out
		}
		cases := []struct {
			name string
			q    store.Query
			want []pos
		}{
			{"all", store.Query{}, want},
			{"prefix with ties", store.Query{Prefix: "2031-01-02"}, filter(func(p pos) bool { return p.gsk == "2031-01-02" })},
			{"prefix", store.Query{Prefix: "2031-01"}, want},
			{"range", store.Query{From: "2031-01-02", To: "2031-01-03"}, filter(func(p pos) bool { return p.gsk >= "2031-01-02" })},
			{"to", store.Query{To: "2031-01-02"}, filter(func(p pos) bool { return p.gsk <= "2031-01-02" })},
		}
		for _, tc := range cases {
			for _, rev := range []bool{false, true} {
				for _, limit := range []int{1, 2, 3, 0} {
					q := tc.q
					q.Index, q.PK, q.Reverse, q.Limit = idx, gpk, rev, limit
					w := tc.want
					if rev {
						w = slices.Clone(w)
						slices.Reverse(w)
					}
					got := h.queryAll(t, q)
					require.Equal(t, w, positions(got), "%s %s reverse=%v limit=%d", idx, tc.name, rev, limit)
				}
			}
		}

		// Index queries return whole items.
		got := h.query(t, store.Query{Index: idx, PK: gpk, Limit: 1})
		require.Len(t, got.Items, 1)
		assertItem(t, indexed[0], got.Items[0])
		// Each index is separate: these items are not in the other one.
		assert.Empty(t, h.query(t, store.Query{Index: other, PK: gpk}).Items, "%s items in %s", idx, other)
		assert.Len(t, h.query(t, store.Query{Index: idx, PK: gpk + "x"}).Items, 1)

		// Writes move, drop and expire index entries.
		moved := withIndex("a", "1", "2031-01-09")
		h.put(t, moved)
		dropped := item(indexed[1].PK, indexed[1].SK)
		h.put(t, dropped)
		require.NoError(t, h.s.Delete(h.ctx, indexed[2].Key, store.Always))
		expiring := indexed[3]
		expiring.ExpiresAt = h.clock.Now().Add(time.Second)
		h.put(t, expiring)
		h.clock.Advance(2 * time.Second)
		now := positions(h.queryAll(t, store.Query{Index: idx, PK: gpk, Limit: 2}))
		assert.Equal(t, []pos{want[1], want[3], want[6], want[7], posOf(moved)}, now, "%s after changes", idx)
	}
}

func testAdd(t *testing.T, h *harness) {
	ctx := h.ctx
	k := h.key("p", "ctr")
	n, err := h.s.Add(ctx, k, 5, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, int64(5), n, "Add creates the counter")
	assertItem(t, store.Item{Key: k, Count: 5}, h.get(t, k))
	n, err = h.s.Add(ctx, k, -7, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, int64(-2), n)
	n, err = h.s.Add(ctx, k, 0, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, int64(-2), n, "Add 0 reads the counter")

	// Expiry: set when given, kept when not.
	e1 := start().Add(time.Hour)
	_, err = h.s.Add(ctx, k, 1, e1)
	require.NoError(t, err)
	assert.Equal(t, e1.Unix(), h.get(t, k).ExpiresAt.Unix())
	_, err = h.s.Add(ctx, k, 1, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, e1.Unix(), h.get(t, k).ExpiresAt.Unix(), "a zero expiry keeps the old one")
	e2 := start().Add(2 * time.Hour)
	n, err = h.s.Add(ctx, k, 1, e2)
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assert.Equal(t, e2.Unix(), h.get(t, k).ExpiresAt.Unix())

	// Add touches only Count (and expiry) of an item written by Put.
	doc := store.Item{
		Key: h.key("p", "doc"), Revision: 3, Data: []byte(`{"a":1}`), Count: 10,
		GSI1: store.IndexKey{PK: h.pk("g"), SK: "s"},
	}
	h.put(t, doc)
	n, err = h.s.Add(ctx, doc.Key, 1, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, int64(11), n)
	doc.Count = 11
	assertItem(t, doc, h.get(t, doc.Key))
	assert.Len(t, h.query(t, store.Query{Index: store.GSI1, PK: h.pk("g")}).Items, 1)
}

func testAddConcurrent(t *testing.T, h *harness) {
	k := h.key("p", "ctr")
	const goroutines, adds = 10, 20
	results := make([][]int64, goroutines)
	errs := race(goroutines, func(g int) error {
		for range adds {
			n, err := h.s.Add(h.ctx, k, 1, time.Time{})
			if err != nil {
				return err
			}
			results[g] = append(results[g], n)
		}
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	// Atomic means every increment saw a distinct value: together they are 1..200.
	var all []int64
	for _, r := range results {
		all = append(all, r...)
	}
	slices.Sort(all)
	want := make([]int64, goroutines*adds)
	for i := range want {
		want[i] = int64(i + 1)
	}
	assert.Equal(t, want, all)
	assert.Equal(t, int64(goroutines*adds), h.get(t, k).Count)
}

func testExpiry(t *testing.T, h *harness) {
	pk := h.pk("p")
	sec := store.SecondsPrecision(start())
	exp := sec.Add(10 * time.Second)
	x := store.Item{Key: store.Key{PK: pk, SK: "x"}, Revision: 1, ExpiresAt: exp, GSI1: store.IndexKey{PK: h.pk("g"), SK: "x"}}
	// Stores keep whole seconds: this one expires at sec+20s, not 900 ms later.
	y := store.Item{Key: store.Key{PK: pk, SK: "y"}, ExpiresAt: sec.Add(20*time.Second + 900*time.Millisecond)}
	forever := item(pk, "z")
	h.putAll(t, []store.Item{x, y, forever})

	visible := func(want ...string) {
		t.Helper()
		got := h.query(t, store.Query{PK: pk})
		assert.Equal(t, want, sortKeys(got.Items), "query at %v", h.clock.Now())
		idx := h.query(t, store.Query{Index: store.GSI1, PK: h.pk("g")})
		assert.Equal(t, slices.Contains(want, "x"), len(idx.Items) == 1, "index query at %v", h.clock.Now())
		for _, sk := range []string{"x", "y", "z"} {
			_, err := h.s.Get(h.ctx, store.Key{PK: pk, SK: sk})
			if slices.Contains(want, sk) {
				assert.NoError(t, err, "Get %s at %v", sk, h.clock.Now())
			} else {
				assert.ErrorIs(t, err, store.ErrNotFound, "Get %s at %v", sk, h.clock.Now())
			}
		}
	}
	visible("x", "y", "z")
	assert.True(t, sec.Add(20*time.Second).Equal(h.get(t, y.Key).ExpiresAt))
	h.clock.Set(exp.Add(-time.Nanosecond))
	visible("x", "y", "z")
	h.clock.Set(exp) // invisible from the expiry second on
	visible("y", "z")
	h.clock.Set(sec.Add(20*time.Second + 500*time.Millisecond))
	visible("z")
	h.clock.Set(start().Add(1000 * time.Hour))
	visible("z")
}

func testExpiryConditions(t *testing.T, h *harness) {
	ctx := h.ctx
	exp := start().Add(time.Minute)
	k := func(name string) store.Key { return h.key("p", name) }
	for _, name := range []string{"a", "b", "c"} {
		h.put(t, store.Item{Key: k(name), Revision: 1, Data: []byte(`{"old":true}`), ExpiresAt: exp,
			GSI2: store.IndexKey{PK: h.pk("g"), SK: name}})
	}
	_, err := h.s.Add(ctx, k("ctr"), 5, exp)
	require.NoError(t, err)
	h.clock.Set(exp.Add(time.Second))

	// An expired item is absent to every condition.
	requireConditionFailed(t, h.s.Put(ctx, store.Item{Key: k("a"), Revision: 2}, store.MustExist), 0)
	requireConditionFailed(t, h.s.Put(ctx, store.Item{Key: k("a"), Revision: 2}, store.RevisionIs(1)), 0)
	requireConditionFailed(t, h.s.Delete(ctx, k("a"), store.MustExist), 0)
	requireConditionFailed(t, h.s.Delete(ctx, k("a"), store.RevisionIs(1)), 0)
	requireConditionFailed(t, h.s.Transact(ctx, []store.Write{store.CheckOp(k("a"), store.MustExist)}), 0)
	require.NoError(t, h.s.Transact(ctx, []store.Write{store.CheckOp(k("a"), store.MustNotExist)}))
	require.NoError(t, h.s.Delete(ctx, k("b"), store.MustNotExist))
	require.NoError(t, h.s.Delete(ctx, k("c"), store.Always))

	// MustNotExist replaces the expired item with a whole new one.
	fresh := store.Item{Key: k("a"), Revision: 1, Data: []byte(`{"new":true}`)}
	require.NoError(t, h.s.Put(ctx, fresh, store.MustNotExist))
	assertItem(t, fresh, h.get(t, k("a")))
	h.clock.Advance(1000 * time.Hour)
	assertItem(t, fresh, h.get(t, k("a")))
	assert.Empty(t, h.query(t, store.Query{Index: store.GSI2, PK: h.pk("g")}).Items, "expired index entries")

	// A counter that expired starts again from zero, as a new item without the old expiry.
	n, err := h.s.Add(ctx, k("ctr"), 1, time.Time{})
	require.NoError(t, err)
	assert.Equal(t, int64(1), n)
	assertItem(t, store.Item{Key: k("ctr"), Count: 1}, h.get(t, k("ctr")))

	// Likewise an expired document: Add does not revive its fields.
	h.put(t, store.Item{Key: k("doc"), Revision: 4, Data: []byte(`{"a":1}`), Count: 9,
		GSI1: store.IndexKey{PK: h.pk("g1"), SK: "s"}, ExpiresAt: h.clock.Now().Add(time.Second)})
	h.clock.Advance(time.Minute)
	later := h.clock.Now().Add(time.Hour)
	n, err = h.s.Add(ctx, k("doc"), 2, later)
	require.NoError(t, err)
	assert.Equal(t, int64(2), n)
	assertItem(t, store.Item{Key: k("doc"), Count: 2, ExpiresAt: later}, h.get(t, k("doc")))
	assert.Empty(t, h.query(t, store.Query{Index: store.GSI1, PK: h.pk("g1")}).Items)
}

func testExpiryPaging(t *testing.T, h *harness) {
	pk := h.pk("p")
	soon := start().Add(time.Second)
	var items []store.Item
	for _, sk := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		it := item(pk, sk)
		if strings.Contains("bdfg", sk) {
			it.ExpiresAt = soon
		}
		items = append(items, it)
	}
	h.putAll(t, items)
	h.clock.Advance(time.Hour)

	// Live: a c e. Expired items neither fill pages nor make a Next.
	p := h.query(t, store.Query{PK: pk, Limit: 3})
	assert.Equal(t, []string{"a", "c", "e"}, sortKeys(p.Items))
	assert.Empty(t, p.Next, "only expired items follow")
	p = h.query(t, store.Query{PK: pk, Limit: 3, Reverse: true})
	assert.Equal(t, []string{"e", "c", "a"}, sortKeys(p.Items))
	assert.Empty(t, p.Next)
	p = h.query(t, store.Query{PK: pk, Limit: 2})
	assert.Equal(t, []string{"a", "c"}, sortKeys(p.Items))
	require.NotEmpty(t, p.Next)
	p = h.query(t, store.Query{PK: pk, Limit: 2, Cursor: p.Next})
	assert.Equal(t, []string{"e"}, sortKeys(p.Items))
	assert.Empty(t, p.Next)
}

func testTransact(t *testing.T, h *harness) {
	ctx := h.ctx
	k := func(name string) store.Key { return h.key("p", name) }
	h.put(t, store.Item{Key: k("del"), Revision: 1})
	h.put(t, store.Item{Key: k("chk"), Revision: 4, Data: []byte(`{"c":4}`)})
	h.put(t, store.Item{Key: k("upd"), Revision: 2})
	_, err := h.s.Add(ctx, k("ctr"), 5, time.Time{})
	require.NoError(t, err)

	created := store.Item{Key: h.key("q", "new"), Revision: 1, Data: []byte(`{"n":1}`), GSI1: store.IndexKey{PK: h.pk("g"), SK: "n"}}
	updated := store.Item{Key: k("upd"), Revision: 3, Data: []byte(`{"u":3}`)}
	require.NoError(t, h.s.Transact(ctx, []store.Write{
		store.PutOp(created, store.MustNotExist),
		store.PutOp(updated, store.RevisionIs(2)),
		store.DeleteOp(k("del"), store.MustExist),
		store.AddOp(k("ctr"), 3, time.Time{}),
		store.AddOp(k("ctr2"), 7, start().Add(time.Hour)),
		store.CheckOp(k("chk"), store.RevisionIs(4)),
		store.DeleteOp(k("absent"), store.Always),
	}))
	assertItem(t, created, h.get(t, created.Key))
	assertItem(t, updated, h.get(t, k("upd")))
	h.requireMissing(t, k("del"))
	assert.Equal(t, int64(8), h.get(t, k("ctr")).Count)
	assertItem(t, store.Item{Key: k("ctr2"), Count: 7, ExpiresAt: start().Add(time.Hour)}, h.get(t, k("ctr2")))
	assertItem(t, store.Item{Key: k("chk"), Revision: 4, Data: []byte(`{"c":4}`)}, h.get(t, k("chk")))
	assert.Len(t, h.query(t, store.Query{Index: store.GSI1, PK: h.pk("g")}).Items, 1)

	// Checks alone, and a single write, are transactions too.
	require.NoError(t, h.s.Transact(ctx, []store.Write{store.CheckOp(k("chk"), store.MustExist), store.CheckOp(k("nope"), store.MustNotExist)}))
	require.NoError(t, h.s.Transact(ctx, []store.Write{store.PutOp(item(h.pk("p"), "single"), store.Always)}))
	h.get(t, k("single"))

	// Exactly MaxTransactWrites is allowed.
	var writes []store.Write
	for i := range store.MaxTransactWrites {
		writes = append(writes, store.PutOp(item(h.pk("max"), fmt.Sprintf("%03d", i)), store.MustNotExist))
	}
	require.NoError(t, h.s.Transact(ctx, writes))
	assert.Len(t, h.query(t, store.Query{PK: h.pk("max")}).Items, store.MaxTransactWrites)
}

// A transaction's increments behave as Add does, each on its own key, however many there
// are (a store may apply them together), beside other writes and in a failing transaction.
func testTransactIncrements(t *testing.T, h *harness) {
	ctx := h.ctx
	k := func(name string) store.Key { return h.key("p", name) }
	_, err := h.s.Add(ctx, k("old"), 5, start().Add(time.Hour))
	require.NoError(t, err)
	_, err = h.s.Add(ctx, k("stale"), 9, start().Add(time.Second))
	require.NoError(t, err)
	doc := store.Item{Key: k("doc"), Revision: 3, Data: []byte(`{"a":1}`), Count: 10, GSI1: store.IndexKey{PK: h.pk("g"), SK: "s"}}
	h.put(t, doc)
	h.clock.Advance(2 * time.Second) // "stale" has expired: it counts as absent
	e := start().Add(2 * time.Hour)
	require.NoError(t, h.s.Transact(ctx, []store.Write{
		store.AddOp(k("new"), 2, e),
		store.PutOp(store.Item{Key: k("put"), Revision: 1}, store.MustNotExist),
		store.AddOp(k("old"), -1, time.Time{}),
		store.AddOp(k("stale"), 4, time.Time{}),
		store.AddOp(k("doc"), 1, time.Time{}),
	}))
	assertItem(t, store.Item{Key: k("new"), Count: 2, ExpiresAt: e}, h.get(t, k("new")))
	assertItem(t, store.Item{Key: k("old"), Count: 4, ExpiresAt: start().Add(time.Hour)}, h.get(t, k("old")))
	assertItem(t, store.Item{Key: k("stale"), Count: 4}, h.get(t, k("stale")))
	doc.Count = 11
	assertItem(t, doc, h.get(t, k("doc")))
	h.get(t, k("put"))

	// A failing condition undoes the increments with the rest.
	err = h.s.Transact(ctx, []store.Write{
		store.AddOp(k("new"), 100, time.Time{}),
		store.AddOp(k("other"), 100, time.Time{}),
		store.PutOp(store.Item{Key: k("put"), Revision: 2}, store.MustNotExist),
	})
	requireConditionFailed(t, err, 2)
	assert.Equal(t, int64(2), h.get(t, k("new")).Count)
	h.requireMissing(t, k("other"))

	// As many increments as a transaction holds.
	var writes []store.Write
	for i := range store.MaxTransactWrites {
		writes = append(writes, store.AddOp(h.key("many", fmt.Sprintf("%03d", i)), int64(i), time.Time{}))
	}
	require.NoError(t, h.s.Transact(ctx, writes))
	require.NoError(t, h.s.Transact(ctx, writes))
	items := h.queryAll(t, store.Query{PK: h.pk("many")})
	require.Len(t, items, store.MaxTransactWrites)
	for i, it := range items {
		assert.Equal(t, int64(2*i), it.Count, it.SK)
	}
}

func testTransactFailure(t *testing.T, h *harness) {
	ctx := h.ctx
	k := func(name string) store.Key { return h.key("p", name) }
	h.put(t, store.Item{Key: k("chk"), Revision: 4})
	h.put(t, store.Item{Key: k("upd"), Revision: 2, Data: []byte(`{"u":2}`)})
	_, err := h.s.Add(ctx, k("ctr"), 8, time.Time{})
	require.NoError(t, err)
	unchanged := func() {
		t.Helper()
		h.requireMissing(t, k("new"))
		h.requireMissing(t, k("ctr2"))
		assert.Equal(t, int64(8), h.get(t, k("ctr")).Count, "counter")
		assertItem(t, store.Item{Key: k("upd"), Revision: 2, Data: []byte(`{"u":2}`)}, h.get(t, k("upd")))
		assert.Equal(t, int64(4), h.get(t, k("chk")).Revision)
		assert.Empty(t, h.query(t, store.Query{Index: store.GSI1, PK: h.pk("g")}).Items)
	}
	newItem := store.Item{Key: k("new"), GSI1: store.IndexKey{PK: h.pk("g"), SK: "n"}}

	cases := []struct {
		name   string
		writes []store.Write
		index  int
	}{
		{"last write fails", []store.Write{
			store.PutOp(newItem, store.Always),
			store.AddOp(k("ctr"), 100, time.Time{}),
			store.AddOp(k("ctr2"), 1, time.Time{}),
			store.DeleteOp(k("upd"), store.Always),
			store.PutOp(store.Item{Key: k("chk"), Revision: 5}, store.RevisionIs(4)),
			store.CheckOp(k("missing"), store.MustExist),
		}, 5},
		{"first write fails", []store.Write{
			store.CheckOp(k("upd"), store.RevisionIs(99)),
			store.PutOp(newItem, store.MustNotExist),
		}, 0},
		{"put MustNotExist fails in the middle", []store.Write{
			store.PutOp(newItem, store.MustNotExist),
			store.PutOp(store.Item{Key: k("upd"), Revision: 3}, store.MustNotExist),
			store.DeleteOp(k("chk"), store.MustExist),
		}, 1},
		{"delete fails", []store.Write{
			store.AddOp(k("ctr"), 1, time.Time{}),
			store.DeleteOp(k("missing"), store.MustExist),
		}, 1},
		{"the first of two failures is named", []store.Write{
			store.PutOp(newItem, store.Always),
			store.CheckOp(k("missing"), store.MustExist),
			store.PutOp(store.Item{Key: k("upd")}, store.MustNotExist),
		}, 1},
	}
	for _, tc := range cases {
		requireConditionFailed(t, h.s.Transact(ctx, tc.writes), tc.index)
		unchanged()
	}
}

func testTransactInvalid(t *testing.T, h *harness) {
	ctx := h.ctx
	k := func(name string) store.Key { return h.key("p", name) }
	var tooMany []store.Write
	for i := range store.MaxTransactWrites + 1 {
		tooMany = append(tooMany, store.PutOp(item(h.pk("p"), fmt.Sprintf("%03d", i)), store.Always))
	}
	cases := []struct {
		name   string
		writes []store.Write
	}{
		{"none", nil},
		{"too many", tooMany},
		{"same key twice", []store.Write{store.PutOp(item(h.pk("p"), "a"), store.Always), store.AddOp(k("a"), 1, time.Time{})}},
		{"same key put twice", []store.Write{store.PutOp(item(h.pk("p"), "a"), store.Always), store.PutOp(item(h.pk("p"), "a"), store.Always)}},
		{"check and write of one key", []store.Write{store.CheckOp(k("a"), store.MustNotExist), store.DeleteOp(k("a"), store.Always)}},
		{"empty write", []store.Write{store.PutOp(item(h.pk("p"), "a"), store.Always), {}}},
		{"two operations in one write", []store.Write{{Put: &store.Item{Key: k("a")}, Delete: &store.Key{PK: h.pk("p"), SK: "b"}}}},
		{"empty key", []store.Write{store.PutOp(item(h.pk("p"), "a"), store.Always), store.PutOp(item(h.pk("p"), ""), store.Always)}},
		{"half index key", []store.Write{store.PutOp(item(h.pk("p"), "a"), store.Always), store.PutOp(store.Item{Key: k("b"), GSI1: store.IndexKey{PK: "g"}}, store.Always)}},
	}
	for _, tc := range cases {
		requireRefused(t, h.s.Transact(ctx, tc.writes), tc.name)
	}
	assert.Empty(t, h.query(t, store.Query{PK: h.pk("p")}).Items, "refused transactions wrote nothing")
}

func testInvalidQueries(t *testing.T, h *harness) {
	pk := h.pk("p")
	h.put(t, item(pk, "a"))
	for _, q := range []store.Query{
		{},
		{Prefix: "a"},
		{PK: pk, Index: "gsi3"},
		{PK: pk, Index: "GSI1"},
		{PK: pk, Prefix: "a", From: "a"},
		{PK: pk, Prefix: "a", To: "b"},
		{PK: pk, From: "b", To: "a"},
		{PK: pk, Limit: -1},
		{PK: pk, Limit: store.MaxQueryLimit + 1},
	} {
		require.Error(t, q.Validate(), "the suite's own premise: %+v is invalid", q)
		_, err := h.s.Query(h.ctx, q)
		assert.Error(t, err, "Query %+v", q)
	}
	for _, q := range []store.Query{{PK: pk, Limit: store.MaxQueryLimit}, {PK: pk, From: "a", To: "a"}, {PK: pk, Index: store.GSI2}} {
		_, err := h.s.Query(h.ctx, q)
		assert.NoError(t, err, "Query %+v", q)
	}
}

func testContextCanceled(t *testing.T, h *harness) {
	k := h.key("p", "a")
	h.put(t, store.Item{Key: k, Revision: 1})
	ctx, cancel := context.WithCancel(h.ctx)
	cancel()
	_, err := h.s.Get(ctx, k)
	assert.ErrorIs(t, err, context.Canceled, "Get")
	assert.ErrorIs(t, h.s.Put(ctx, store.Item{Key: k, Revision: 2}, store.RevisionIs(1)), context.Canceled, "Put")
	assert.ErrorIs(t, h.s.Put(ctx, store.Item{Key: k, Revision: 2}, store.Always), context.Canceled, "Put Always")
	assert.ErrorIs(t, h.s.Delete(ctx, k, store.Always), context.Canceled, "Delete")
	_, err = h.s.Add(ctx, k, 1, time.Time{})
	assert.ErrorIs(t, err, context.Canceled, "Add")
	_, err = h.s.Query(ctx, store.Query{PK: k.PK})
	assert.ErrorIs(t, err, context.Canceled, "Query")
	assert.ErrorIs(t, h.s.Transact(ctx, []store.Write{store.PutOp(store.Item{Key: k}, store.Always)}), context.Canceled, "Transact")

	dctx, dcancel := context.WithDeadline(h.ctx, time.Now().Add(-time.Second))
	defer dcancel()
	_, err = h.s.Get(dctx, k)
	assert.ErrorIs(t, err, context.DeadlineExceeded, "Get after the deadline")

	// The store still works with a live context.
	assertItem(t, store.Item{Key: k, Revision: 1}, h.get(t, k))
}
