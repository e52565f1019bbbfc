package dynamo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/storetest"
)

// endpointEnv names the DynamoDB Local endpoint; tests/emulators/dynamodb-test.sh starts
// the emulator and sets it. Without it these tests skip, so that `go test ./...` stays
// fast and needs nothing but Go.
const endpointEnv = "DYNAMODB_ENDPOINT"

// emulator is the shared DynamoDB Local client and the one table every test of this run
// uses; the tests keep apart by random key prefixes, as storetest's subtests do.
type emulator struct {
	client *dynamodb.Client
	table  string
}

var (
	emuOnce sync.Once
	emu     emulator
	emuErr  error
)

// newClient builds a client for endpoint with fake static credentials: DynamoDB Local
// checks that requests are signed, not by whom.
func newClient(ctx context.Context, endpoint string, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		// Keep the developer's ~/.aws out of the tests.
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	)
	if err != nil {
		return nil, err
	}
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		// DynamoDB Local sends no X-Amz-Crc32 header with error responses (DynamoDB does),
		// and the SDK then checks the body against 0 and logs a warning per failed
		// condition. The check guards against corruption on the wire, not our logic.
		o.DisableValidateResponseChecksum = true
	}}, optFns...)...), nil
}

// needEmulator returns the shared emulator, or skips the test when none was started.
func needEmulator(t *testing.T) emulator {
	t.Helper()
	endpoint := os.Getenv(endpointEnv)
	if endpoint == "" {
		t.Skipf("%s is not set: run tests/emulators/dynamodb-test.sh (or make test-dynamodb) to test against DynamoDB Local", endpointEnv)
	}
	emuOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		emu.client, emuErr = newClient(ctx, endpoint)
		if emuErr != nil {
			return
		}
		emu.table = fmt.Sprintf("storetest-%016x", rand.Uint64())
		emuErr = CreateTable(ctx, emu.client, emu.table)
	})
	require.NoError(t, emuErr, "DynamoDB Local at %s", endpoint)
	return emu
}

func TestConformance(t *testing.T) {
	e := needEmulator(t)
	storetest.Run(t, func(t *testing.T, now func() time.Time) store.Store {
		return New(e.client, e.table, WithClock(now))
	})
}

// open returns a Store on the shared table with a fixed clock and a key prefix private to
// the test.
func open(t *testing.T, opts ...Option) (*Store, func(string) string) {
	t.Helper()
	e := needEmulator(t)
	ns := fmt.Sprintf("dyn-%016x/", rand.Uint64())
	return New(e.client, e.table, opts...), func(name string) string { return ns + name }
}

// fixedClock is a clock the test moves by hand.
type fixedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fixedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fixedClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClock() *fixedClock { return &fixedClock{now: time.Date(2031, 3, 14, 15, 9, 26, 0, time.UTC)} }

func sks(items []store.Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SK
	}
	return out
}

// TestStoredLayout reads an item back with the plain client: infra/ and anyone reading the
// table in the console see the attributes the package doc promises.
func TestStoredLayout(t *testing.T) {
	t.Parallel()
	e := needEmulator(t)
	s, pk := open(t)
	it := store.Item{
		Key:       store.Key{PK: pk("p"), SK: "s"},
		GSI1:      store.IndexKey{PK: pk("g"), SK: "2031-03-14"},
		Revision:  4,
		Data:      []byte(`{"a":1}`),
		Count:     9,
		ExpiresAt: time.Unix(1_950_000_000, 0),
	}
	require.NoError(t, s.Put(t.Context(), it, store.Always))
	out, err := e.client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(e.table), Key: keyAttrs(it.Key)})
	require.NoError(t, err)
	assert.Equal(t, map[string]types.AttributeValue{
		AttrPK:       &types.AttributeValueMemberS{Value: pk("p")},
		AttrSK:       &types.AttributeValueMemberS{Value: "s"},
		AttrGSI1PK:   &types.AttributeValueMemberS{Value: pk("g")},
		AttrGSI1SK:   &types.AttributeValueMemberS{Value: "2031-03-14\x00\x01" + pk("p") + "\x00\x01s"},
		AttrRevision: &types.AttributeValueMemberN{Value: "4"},
		AttrCount:    &types.AttributeValueMemberN{Value: "9"},
		AttrData:     &types.AttributeValueMemberB{Value: []byte(`{"a":1}`)},
		AttrExpires:  &types.AttributeValueMemberN{Value: "1950000000"},
	}, out.Item)

	// The table has what TableSchema describes, TTL included.
	desc, err := e.client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(e.table)})
	require.NoError(t, err)
	require.NoError(t, checkSchema(TableSchema(), desc.Table))
	ttl, err := e.client.DescribeTimeToLive(t.Context(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(e.table)})
	require.NoError(t, err)
	assert.Equal(t, AttrExpires, aws.ToString(ttl.TimeToLiveDescription.AttributeName))
	assert.Equal(t, types.TimeToLiveStatusEnabled, ttl.TimeToLiveDescription.TimeToLiveStatus)
}

func TestCreateTable(t *testing.T) {
	t.Parallel()
	e := needEmulator(t)
	ctx := t.Context()
	require.NoError(t, CreateTable(ctx, e.client, e.table), "an existing table with our schema is accepted")

	other := fmt.Sprintf("other-%016x", rand.Uint64())
	_, err := e.client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(other),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	require.NoError(t, err)
	err = CreateTable(ctx, e.client, other)
	assert.ErrorContains(t, err, "another schema")
}

// TestCursorTamper changes a real cursor in every way a client could, and checks each
// change is refused as an invalid cursor, never as a 500 from DynamoDB's validation.
func TestCursorTamper(t *testing.T) {
	t.Parallel()
	s, pk := open(t)
	ctx := t.Context()
	for _, sk := range []string{"a1", "a2", "a3", "b1"} {
		it := store.Item{Key: store.Key{PK: pk("p"), SK: sk}, GSI1: store.IndexKey{PK: pk("g"), SK: "x" + sk}}
		require.NoError(t, s.Put(ctx, it, store.Always))
	}
	q := store.Query{PK: pk("p"), Prefix: "a", Limit: 1}
	page, err := s.Query(ctx, q)
	require.NoError(t, err)
	require.NotEmpty(t, page.Next)
	gq := store.Query{Index: store.GSI1, PK: pk("g"), From: "xa", To: "xa9", Limit: 1}
	gpage, err := s.Query(ctx, gq)
	require.NoError(t, err)
	require.NotEmpty(t, gpage.Next)

	shape, gshape := queryShape(q), queryShape(gq)
	tampered := map[string]store.Query{
		"position outside the prefix":              {PK: q.PK, Prefix: "a", Cursor: store.EncodeCursor(shape, []string{"b1"})},
		"position past the range":                  {Index: store.GSI1, PK: gq.PK, From: "xa", To: "xa9", Cursor: store.EncodeCursor(gshape, []string{"xb1", pk("p"), "b1"})},
		"empty primary key":                        {Index: store.GSI1, PK: gq.PK, From: "xa", To: "xa9", Cursor: store.EncodeCursor(gshape, []string{"xa1", "", "a1"})},
		"key longer than DynamoDB's":               {PK: q.PK, Prefix: "a", Cursor: store.EncodeCursor(shape, []string{"a" + strings.Repeat("z", 1100)})},
		"index key too long to encode":             {Index: store.GSI1, PK: gq.PK, From: "xa", To: "xa9", Cursor: store.EncodeCursor(gshape, []string{"xa1", strings.Repeat("p", 1020), "a1"})},
		"a table cursor on the index":              {Index: store.GSI1, PK: gq.PK, From: "xa", To: "xa9", Cursor: page.Next},
		"an index cursor on the table":             {PK: q.PK, Prefix: "a", Cursor: gpage.Next},
		"one byte changed":                         {PK: q.PK, Prefix: "a", Cursor: flipByte(page.Next)},
		"truncated":                                {PK: q.PK, Prefix: "a", Cursor: page.Next[:len(page.Next)-2]},
		"other limit is fine, other prefix is not": {PK: q.PK, Prefix: "a1", Cursor: page.Next},
	}
	for name, tq := range tampered {
		_, err := s.Query(ctx, tq)
		assert.ErrorIs(t, err, store.ErrInvalidCursor, name)
	}
	// The untouched cursors still work, whatever the page size.
	page, err = s.Query(ctx, store.Query{PK: q.PK, Prefix: "a", Limit: 5, Cursor: page.Next})
	require.NoError(t, err)
	assert.Equal(t, []string{"a2", "a3"}, sks(page.Items))
	gpage, err = s.Query(ctx, store.Query{Index: store.GSI1, PK: gq.PK, From: "xa", To: "xa9", Limit: 5, Cursor: gpage.Next})
	require.NoError(t, err)
	assert.Equal(t, []string{"a2", "a3"}, sks(gpage.Items))
}

func flipByte(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// TestIndexTies puts many items on one index sort key from primary keys that are prefixes
// of one another and hold the bytes the combined key's escapes use, reads them in pages of
// every size, and expects primary-key order; index SKs with those bytes too.
func TestIndexTies(t *testing.T) {
	t.Parallel()
	s, pk := open(t)
	ctx := t.Context()
	g := pk("g")
	type pos struct{ isk, pk, sk string }
	var want []pos
	var items []store.Item
	for i, isk := range []string{"t", "t\x00", "t\x00\x01", "t\x01", "ta"} {
		// Each index SK gets its own primary keys (an item has one index key); within
		// one index SK they tie, and only the primary key orders them.
		ns := pk(fmt.Sprint(i))
		for _, p := range []string{ns + "a", ns + "a\x00", ns + "a\x00b", ns + "a\x01", ns + "a\x02", ns + "ab"} {
			for _, sk := range []string{"s", "s\x00", "s\x00\x02", "s\x01"} {
				items = append(items, store.Item{Key: store.Key{PK: p, SK: sk}, GSI2: store.IndexKey{PK: g, SK: isk}})
				want = append(want, pos{isk, p, sk})
			}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(items))
	for _, it := range items {
		wg.Go(func() { errs <- s.Put(ctx, it, store.Always) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	slices.SortFunc(want, func(x, y pos) int {
		return compareTuples(tuple{x.isk, x.pk, x.sk}, tuple{y.isk, y.pk, y.sk})
	})
	readAll := func(q store.Query) []pos {
		var got []pos
		for range 1000 {
			page, err := s.Query(ctx, q)
			require.NoError(t, err)
			for _, it := range page.Items {
				got = append(got, pos{it.GSI2.SK, it.PK, it.SK})
			}
			if page.Next == "" {
				return got
			}
			q.Cursor = page.Next
		}
		t.Fatal("cursor does not advance")
		return nil
	}
	for _, limit := range []int{1, 5, 7, 0} {
		for _, rev := range []bool{false, true} {
			w := slices.Clone(want)
			if rev {
				slices.Reverse(w)
			}
			got := readAll(store.Query{Index: store.GSI2, PK: g, Limit: limit, Reverse: rev})
			require.Equal(t, w, got, "limit %d reverse %v", limit, rev)
		}
	}
	// Prefixes and ranges over index SKs that hold NUL bytes.
	filter := func(keep func(string) bool) []pos {
		var out []pos
		for _, p := range want {
			if keep(p.isk) {
				out = append(out, p)
			}
		}
		return out
	}
	assert.Equal(t, filter(func(s string) bool { return strings.HasPrefix(s, "t\x00") }),
		readAll(store.Query{Index: store.GSI2, PK: g, Prefix: "t\x00", Limit: 4}))
	assert.Equal(t, filter(func(s string) bool { return s == "t\x00" }),
		readAll(store.Query{Index: store.GSI2, PK: g, From: "t\x00", To: "t\x00", Limit: 4}))
	assert.Equal(t, filter(func(s string) bool { return s >= "t\x00\x01" && s <= "t\x01" }),
		readAll(store.Query{Index: store.GSI2, PK: g, From: "t\x00\x01", To: "t\x01", Limit: 4}))
	assert.Equal(t, filter(func(s string) bool { return s <= "t\x00" }),
		readAll(store.Query{Index: store.GSI2, PK: g, To: "t\x00", Limit: 4}))
}

// countQueries wraps the emulator's client so that the test can count the Query requests a
// Store sends (the Store clones the client's options, middleware included).
func countQueries(t *testing.T, n *atomic.Int64) *dynamodb.Client {
	e := needEmulator(t)
	return dynamodb.New(e.client.Options(), func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			return st.Initialize.Add(middleware.InitializeMiddlewareFunc("countQueries",
				func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
					if _, ok := in.Parameters.(*dynamodb.QueryInput); ok {
						n.Add(1)
					}
					return next.HandleInitialize(ctx, in)
				}), middleware.After)
		})
	})
}

// TestPaginationThroughExpired puts long runs of expired items between live ones:
// DynamoDB's Limit counts them, so the Store must keep reading, and should not need one
// round trip per expired item to do it.
func TestPaginationThroughExpired(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	e := needEmulator(t)
	clock := newClock()
	s := New(countQueries(t, &requests), e.table, WithClock(clock.Now))
	ctx := t.Context()
	pk := fmt.Sprintf("dyn-%016x/p", rand.Uint64())

	var writes []store.Write
	var live []string
	flush := func() {
		if len(writes) > 0 {
			require.NoError(t, s.Transact(ctx, writes))
			writes = writes[:0]
		}
	}
	for i := range 1200 {
		sk := fmt.Sprintf("k%05d", i)
		it := store.Item{Key: store.Key{PK: pk, SK: sk}, Data: []byte(`{"pad":"` + strings.Repeat("x", 200) + `"}`)}
		// Live items: the first three, one in the middle, the last two; 1194 expired ones between.
		if i < 3 || i == 600 || i >= 1198 {
			live = append(live, sk)
		} else {
			it.ExpiresAt = clock.Now().Add(time.Minute)
		}
		writes = append(writes, store.PutOp(it, store.Always))
		if len(writes) == store.MaxTransactWrites {
			flush()
		}
	}
	flush()
	clock.Advance(time.Hour)

	for _, rev := range []bool{false, true} {
		w := slices.Clone(live)
		if rev {
			slices.Reverse(w)
		}
		for _, limit := range []int{1, 2, 3, 4, 100} {
			requests.Store(0)
			var got []string
			q := store.Query{PK: pk, Limit: limit, Reverse: rev}
			pages := 0
			for {
				page, err := s.Query(ctx, q)
				require.NoError(t, err)
				pages++
				got = append(got, sks(page.Items)...)
				if page.Next == "" {
					break
				}
				require.Len(t, page.Items, limit, "a page with a Next is full")
				q.Cursor = page.Next
			}
			require.Equal(t, w, got, "limit %d reverse %v", limit, rev)
			// Doubling the evaluated count reaches 1200 items in about log2(1200) reads
			// per gap; one read per expired item would be over a thousand.
			assert.LessOrEqual(t, requests.Load(), int64(pages*12), "limit %d reverse %v: %d requests for %d pages", limit, rev, requests.Load(), pages)
			t.Logf("limit %d reverse %v: %d pages, %d requests", limit, rev, pages, requests.Load())
		}
	}
}

// TestTransactMaxWrites sends transactions of DynamoDB's maximum size, 100 writes of every
// kind, once succeeding and once failing on the very last write.
func TestTransactMaxWrites(t *testing.T) {
	t.Parallel()
	clock := newClock()
	s, pk := open(t, WithClock(clock.Now))
	ctx := t.Context()
	for i := range 25 {
		require.NoError(t, s.Put(ctx, store.Item{Key: store.Key{PK: pk("old"), SK: fmt.Sprintf("%02d", i)}, Revision: 1}, store.Always))
	}
	build := func(lastCond store.Condition) []store.Write {
		var w []store.Write
		for i := range 25 {
			w = append(w,
				store.PutOp(store.Item{Key: store.Key{PK: pk("new"), SK: fmt.Sprintf("%02d", i)}, Revision: 1,
					GSI1: store.IndexKey{PK: pk("g"), SK: fmt.Sprintf("%02d", i)}}, store.MustNotExist),
				store.AddOp(store.Key{PK: pk("ctr"), SK: fmt.Sprintf("%02d", i)}, int64(i), clock.Now().Add(time.Hour)),
				store.DeleteOp(store.Key{PK: pk("old"), SK: fmt.Sprintf("%02d", i)}, store.RevisionIs(1)),
			)
		}
		for i := range 24 {
			w = append(w, store.CheckOp(store.Key{PK: pk("none"), SK: fmt.Sprintf("%02d", i)}, store.MustNotExist))
		}
		return append(w, store.CheckOp(store.Key{PK: pk("none"), SK: "last"}, lastCond))
	}
	failing := build(store.MustExist)
	require.Len(t, failing, store.MaxTransactWrites)
	err := s.Transact(ctx, failing)
	var ce *store.ConditionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, store.MaxTransactWrites-1, ce.Index)
	page, err := s.Query(ctx, store.Query{PK: pk("new")})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "nothing of a failed transaction is written")

	require.NoError(t, s.Transact(ctx, build(store.MustNotExist)))
	for _, p := range []string{"new", "ctr"} {
		page, err := s.Query(ctx, store.Query{PK: pk(p)})
		require.NoError(t, err)
		assert.Len(t, page.Items, 25, p)
	}
	page, err = s.Query(ctx, store.Query{PK: pk("old")})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	page, err = s.Query(ctx, store.Query{Index: store.GSI1, PK: pk("g")})
	require.NoError(t, err)
	assert.Len(t, page.Items, 25)
}

// bump is a route's read-modify-write: read, then write under RevisionIs, again on a lost
// race.
func bump(ctx context.Context, s store.Store, k store.Key) (lost int, err error) {
	for {
		cur, err := s.Get(ctx, k)
		cond := store.RevisionIs(cur.Revision)
		if errors.Is(err, store.ErrNotFound) {
			cond = store.MustNotExist
		} else if err != nil {
			return lost, err
		}
		err = s.Put(ctx, store.Item{Key: k, Revision: cur.Revision + 1, Data: fmt.Appendf(nil, `{"r":%d}`, cur.Revision+1)}, cond)
		if !errors.Is(err, store.ErrConditionFailed) {
			return lost, err
		}
		lost++
	}
}

// TestConcurrentRevisionWriters runs read-modify-write loops from many goroutines on one
// document, half of them through transactions: no update may be lost, and some races must
// actually have been lost and retried for the test to mean anything.
func TestConcurrentRevisionWriters(t *testing.T) {
	t.Parallel()
	s, pk := open(t)
	ctx := t.Context()
	k := store.Key{PK: pk("p"), SK: "doc"}
	const writers, rounds = 8, 15
	var lost atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for r := range rounds {
				if w%2 == 0 {
					n, err := bump(ctx, s, k)
					lost.Add(int64(n))
					if err != nil {
						errs <- err
						return
					}
					continue
				}
				for {
					cur, err := s.Get(ctx, k)
					cond := store.RevisionIs(cur.Revision)
					if errors.Is(err, store.ErrNotFound) {
						cond = store.MustNotExist
					} else if err != nil {
						errs <- err
						return
					}
					err = s.Transact(ctx, []store.Write{
						store.PutOp(store.Item{Key: k, Revision: cur.Revision + 1}, cond),
						store.PutOp(store.Item{Key: store.Key{PK: pk("log"), SK: fmt.Sprintf("%d-%d", w, r)}}, store.MustNotExist),
						store.AddOp(store.Key{PK: pk("p"), SK: "tx-count"}, 1, time.Time{}),
					})
					if err == nil {
						break
					}
					var ce *store.ConditionError
					if !errors.As(err, &ce) || ce.Index != 0 {
						errs <- fmt.Errorf("writer %d: %w", w, err)
						return
					}
					lost.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	doc, err := s.Get(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, int64(writers*rounds), doc.Revision, "no lost update")
	ctr, err := s.Get(ctx, store.Key{PK: pk("p"), SK: "tx-count"})
	require.NoError(t, err)
	assert.Equal(t, int64(writers/2*rounds), ctr.Count)
	page, err := s.Query(ctx, store.Query{PK: pk("log")})
	require.NoError(t, err)
	assert.Len(t, page.Items, writers/2*rounds)
	assert.Positive(t, lost.Load(), "the writers never raced")
	t.Logf("%d lost races retried", lost.Load())
}

// TestAddOnExpired covers the Add's second form: a transaction whose AddOp meets an
// expired document restarts it, atomically with the transaction's other writes, and
// concurrent Adds on an expired counter restart it exactly once.
func TestAddOnExpired(t *testing.T) {
	t.Parallel()
	clock := newClock()
	s, pk := open(t, WithClock(clock.Now))
	ctx := t.Context()
	doc := store.Item{Key: store.Key{PK: pk("p"), SK: "doc"}, Revision: 5, Data: []byte(`{"a":1}`), Count: 40,
		GSI1: store.IndexKey{PK: pk("g"), SK: "s"}, ExpiresAt: clock.Now().Add(time.Second)}
	require.NoError(t, s.Put(ctx, doc, store.Always))
	ctr := store.Key{PK: pk("p"), SK: "ctr"}
	_, err := s.Add(ctx, ctr, 100, clock.Now().Add(time.Second))
	require.NoError(t, err)
	clock.Advance(time.Minute)

	// A failing transaction leaves the expired document as it was (and still invisible).
	err = s.Transact(ctx, []store.Write{
		store.AddOp(doc.Key, 2, time.Time{}),
		store.CheckOp(store.Key{PK: pk("p"), SK: "missing"}, store.MustExist),
	})
	var ce *store.ConditionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 1, ce.Index)
	_, err = s.Get(ctx, doc.Key)
	require.ErrorIs(t, err, store.ErrNotFound)

	require.NoError(t, s.Transact(ctx, []store.Write{
		store.AddOp(doc.Key, 2, time.Time{}),
		store.PutOp(store.Item{Key: store.Key{PK: pk("p"), SK: "other"}}, store.MustNotExist),
	}))
	got, err := s.Get(ctx, doc.Key)
	require.NoError(t, err)
	assert.Equal(t, store.Item{Key: doc.Key, Count: 2}, got, "a fresh counter, nothing of the old document")
	page, err := s.Query(ctx, store.Query{Index: store.GSI1, PK: pk("g")})
	require.NoError(t, err)
	assert.Empty(t, page.Items)

	// Concurrent Adds, single and transactional, on the expired counter: it restarts once
	// and no increment is lost.
	const adders = 8
	var wg sync.WaitGroup
	errs := make(chan error, adders)
	for i := range adders {
		wg.Go(func() {
			if i%2 == 0 {
				_, err := s.Add(ctx, ctr, 1, time.Time{})
				errs <- err
				return
			}
			errs <- s.Transact(ctx, []store.Write{store.AddOp(ctr, 1, time.Time{})})
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	got, err = s.Get(ctx, ctr)
	require.NoError(t, err)
	assert.Equal(t, store.Item{Key: ctr, Count: adders}, got)
}

func TestAddOverflowFails(t *testing.T) {
	t.Parallel()
	s, pk := open(t)
	ctx := t.Context()
	k := store.Key{PK: pk("p"), SK: "c"}
	_, err := s.Add(ctx, k, 1<<62, time.Time{})
	require.NoError(t, err)
	_, err = s.Add(ctx, k, 1<<62, time.Time{})
	require.ErrorContains(t, err, "overflow")
	assert.NotErrorIs(t, err, store.ErrConditionFailed)
	err = s.Transact(ctx, []store.Write{store.AddOp(k, 1<<62, time.Time{})})
	require.ErrorContains(t, err, "overflow")
	assert.NotErrorIs(t, err, store.ErrConditionFailed)
	n, err := s.Add(ctx, k, -(1 << 62), time.Time{})
	require.NoError(t, err)
	assert.Equal(t, int64(0), n)
	_, err = s.Add(ctx, k, math.MinInt64, time.Time{})
	require.NoError(t, err)
	_, err = s.Add(ctx, k, -1, time.Time{})
	require.ErrorContains(t, err, "overflow")
	it, err := s.Get(ctx, k)
	require.NoError(t, err)
	assert.Equal(t, int64(math.MinInt64), it.Count)
}

// TestRevisionZeroMatchesAddedItems: an item Add created has no rev attribute, and reads
// and compares as revision 0, as in the SQLite store.
func TestRevisionZeroMatchesAddedItems(t *testing.T) {
	t.Parallel()
	s, pk := open(t)
	ctx := t.Context()
	k := store.Key{PK: pk("p"), SK: "c"}
	_, err := s.Add(ctx, k, 1, time.Time{})
	require.NoError(t, err)
	requireCondFailed := func(err error) {
		t.Helper()
		var ce *store.ConditionError
		require.ErrorAs(t, err, &ce)
	}
	requireCondFailed(s.Put(ctx, store.Item{Key: k, Revision: 2}, store.RevisionIs(1)))
	require.NoError(t, s.Transact(ctx, []store.Write{store.CheckOp(k, store.RevisionIs(0))}))
	require.NoError(t, s.Put(ctx, store.Item{Key: k, Revision: 1}, store.RevisionIs(0)))
	requireCondFailed(s.Put(ctx, store.Item{Key: k, Revision: 2}, store.RevisionIs(0)))
}

// TestLongKeys: DynamoDB's own limits hold (the store refuses beyond them, never as a
// condition failure), and keys right at them work.
func TestLongKeys(t *testing.T) {
	t.Parallel()
	s, pk := open(t)
	ctx := t.Context()
	maxSK := strings.Repeat("s", store.MaxSKBytes)
	it := store.Item{Key: store.Key{PK: pk("p"), SK: maxSK}}
	require.NoError(t, s.Put(ctx, it, store.MustNotExist))
	_, err := s.Get(ctx, it.Key)
	require.NoError(t, err)
	page, err := s.Query(ctx, store.Query{PK: pk("p"), Limit: 1})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)

	err = s.Put(ctx, store.Item{Key: store.Key{PK: pk("p"), SK: maxSK + "s"}}, store.MustNotExist)
	require.Error(t, err)
	assert.NotErrorIs(t, err, store.ErrConditionFailed)
	err = s.Put(ctx, store.Item{Key: store.Key{PK: pk("p"), SK: maxSK[:600]}, GSI1: store.IndexKey{PK: pk("g"), SK: maxSK[:400]}}, store.Always)
	require.ErrorContains(t, err, "index sort key")
	assert.NotErrorIs(t, err, store.ErrConditionFailed)
}
