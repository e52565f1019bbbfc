package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	store *sqlite.Store
	clock *clock
	queue *queuetest.Sender
	box   *outbox.Outbox
	log   *bytes.Buffer
}

func newFixture(t *testing.T, cfg outbox.Config) *fixture {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	f := &fixture{store: st, clock: &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, queue: &queuetest.Sender{}, log: &bytes.Buffer{}}
	cfg.Now = f.clock.Now
	cfg.Log = slog.New(slog.NewTextHandler(&syncWriter{w: f.log}, nil))
	f.box, err = outbox.New(st, f.queue, cfg)
	require.NoError(t, err)
	return f
}

// syncWriter serializes writes to a buffer shared by goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func msg(t *testing.T, n int) queue.Message {
	t.Helper()
	m, err := queue.New("test.job", map[string]int{"n": n})
	require.NoError(t, err)
	return m
}

func numbers(t *testing.T, msgs []queue.Message) []int {
	t.Helper()
	bodies := queuetest.Decode[struct{ N int }](t, msgs)
	out := make([]int, len(bodies))
	for i, b := range bodies {
		out[i] = b.N
	}
	return out
}

// pending counts the items left in every shard.
func (f *fixture) pending(t *testing.T) int {
	t.Helper()
	n := 0
	for i := range outbox.Shards {
		page, err := f.store.Query(t.Context(), store.Query{PK: fmt.Sprintf("OUTBOX#%02d", i)})
		require.NoError(t, err)
		n += len(page.Items)
	}
	return n
}

// commit writes a business item together with the staged writes.
func (f *fixture) commit(t *testing.T, key string, staged []store.Write) error {
	t.Helper()
	w := store.PutOp(store.Item{Key: store.Key{PK: "THING", SK: key}, Revision: 1}, store.MustNotExist)
	return f.store.Transact(t.Context(), append([]store.Write{w}, staged...))
}

// The messages are written with the change and sent once it has committed; a delayed
// message keeps its delay, and nothing stays in the outbox.
func TestStageCommitDeliver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	later := msg(t, 2)
	later.Delay = 10 * time.Minute
	writes, deliver, err := f.box.Stage(msg(t, 1), later)
	require.NoError(t, err)
	require.Len(t, writes, 1, "small messages share one item: one write of the transaction")
	require.NoError(t, f.commit(t, "a", writes))
	assert.Equal(t, 1, f.pending(t))
	assert.Empty(t, f.queue.Take(), "nothing is sent before deliver")

	deliver(t.Context())
	sent := f.queue.Take()
	assert.Equal(t, []int{1, 2}, numbers(t, sent))
	assert.Zero(t, sent[0].Delay)
	assert.Equal(t, 10*time.Minute, sent[1].Delay)
	assert.Zero(t, f.pending(t))
	_, err = f.store.Get(t.Context(), store.Key{PK: "THING", SK: "a"})
	assert.NoError(t, err, "the change itself")

	// A delay longer than SQS's own (the queue schedules it) is kept whole, not cut short.
	week := msg(t, 3)
	week.Delay = 7 * 24 * time.Hour
	writes, deliver, err = f.box.Stage(week)
	require.NoError(t, err)
	require.NoError(t, f.commit(t, "b", writes))
	deliver(t.Context())
	sent = f.queue.Take()
	require.Len(t, sent, 1)
	assert.Equal(t, 7*24*time.Hour, sent[0].Delay)
}

// A change whose transaction fails stages nothing.
func TestFailedTransactionStagesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	writes, _, err := f.box.Stage(msg(t, 1))
	require.NoError(t, err)
	require.NoError(t, f.commit(t, "a", nil))
	require.ErrorIs(t, f.commit(t, "a", writes), store.ErrConditionFailed)
	assert.Zero(t, f.pending(t))
	f.clock.Advance(time.Hour)
	res, err := f.box.Sweep(t.Context())
	require.NoError(t, err)
	assert.Zero(t, res.Delivered)
	assert.Empty(t, f.queue.Take())
}

// The process dies between the commit and the send (deliver never runs): the sweep leaves
// the item alone during the grace, then sends it, with what is left of its delay, once.
func TestCrashBetweenCommitAndDeliver(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	later := msg(t, 2)
	later.Delay = 10 * time.Minute
	writes, _, err := f.box.Stage(msg(t, 1), later)
	require.NoError(t, err)
	require.NoError(t, f.commit(t, "a", writes))

	f.clock.Advance(outbox.DefaultGrace - time.Second)
	res, err := f.box.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, outbox.Result{}, res, "a fresh item may still be delivered by its request")
	assert.Empty(t, f.queue.Take())

	f.clock.Advance(time.Minute)
	res, err = f.box.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, outbox.Result{Delivered: 1}, res)
	sent := f.queue.Take()
	assert.Equal(t, []int{1, 2}, numbers(t, sent))
	assert.Zero(t, sent[0].Delay)
	assert.Equal(t, 10*time.Minute-outbox.DefaultGrace-59*time.Second, sent[1].Delay, "the delay left, not the whole delay again")
	assert.Zero(t, f.pending(t))

	res, err = f.box.Sweep(t.Context())
	require.NoError(t, err)
	assert.Zero(t, res.Delivered)
	assert.Empty(t, f.queue.Take(), "sent once")

	// A message due already when the sweep finds it goes without delay.
	late := msg(t, 3)
	late.Delay = time.Minute
	writes, _, err = f.box.Stage(late)
	require.NoError(t, err)
	require.NoError(t, f.commit(t, "b", writes))
	f.clock.Advance(2 * time.Minute)
	_, err = f.box.Sweep(t.Context())
	require.NoError(t, err)
	sent = f.queue.Take()
	require.Len(t, sent, 1)
	assert.Zero(t, sent[0].Delay)
}

// The queue refuses after the commit: the request's delivery logs and leaves the item; the
// sweep, while the queue still refuses, reports it as an error; once the queue is back, the
// sweep sends it.
func TestFailedSendIsSweptLater(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	writes, deliver, err := f.box.Stage(msg(t, 1))
	require.NoError(t, err)
	require.NoError(t, f.commit(t, "a", writes))
	f.queue.Fail(errors.New("queue down"))
	deliver(t.Context())
	assert.Equal(t, 1, f.pending(t))
	assert.Contains(t, f.log.String(), "level=WARN")
	assert.Contains(t, f.log.String(), "queue down")

	f.clock.Advance(time.Minute)
	res, err := f.box.Sweep(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "1 item(s) not delivered, the oldest staged 1m0s ago")
	assert.Contains(t, err.Error(), "queue down")
	assert.Equal(t, outbox.Result{Failed: 1}, res)
	assert.Equal(t, 1, f.pending(t))

	f.queue.Fail(nil)
	res, err = f.box.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, outbox.Result{Delivered: 1}, res)
	assert.Equal(t, []int{1}, numbers(t, f.queue.Take()))
	assert.Zero(t, f.pending(t))
}

// A sweep reads at most Batch items per shard, oldest first, and says when more are due;
// repeated sweeps send every item exactly once.
func TestSweepIsBounded(t *testing.T) {
	t.Parallel()
	const batch, total = 2, 100
	f := newFixture(t, outbox.Config{Batch: batch})
	for i := range total {
		writes, _, err := f.box.Stage(msg(t, i))
		require.NoError(t, err)
		require.NoError(t, f.commit(t, fmt.Sprint(i), writes))
		f.clock.Advance(time.Millisecond)
	}
	f.clock.Advance(time.Minute)
	seen := map[int]int{}
	for sweeps := 0; ; sweeps++ {
		require.Less(t, sweeps, total)
		res, err := f.box.Sweep(t.Context())
		require.NoError(t, err)
		assert.LessOrEqual(t, res.Delivered, batch*outbox.Shards)
		got := numbers(t, f.queue.Take())
		assert.Len(t, got, res.Delivered)
		for _, n := range got {
			seen[n]++
		}
		if !res.More {
			break
		}
	}
	assert.Len(t, seen, total)
	for n, times := range seen {
		assert.Equal(t, 1, times, "message %d", n)
	}
	assert.Zero(t, f.pending(t))
}

// Within a shard a sweep takes the oldest items first.
func TestSweepTakesTheOldestFirst(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{Batch: 1})
	for i := range 3 * outbox.Shards {
		writes, _, err := f.box.Stage(msg(t, i))
		require.NoError(t, err)
		require.NoError(t, f.commit(t, fmt.Sprint(i), writes))
		f.clock.Advance(time.Second)
	}
	f.clock.Advance(time.Minute)
	// The oldest item of each shard, read the way an operator would.
	oldest := map[int]bool{}
	for i := range outbox.Shards {
		page, err := f.store.Query(t.Context(), store.Query{PK: fmt.Sprintf("OUTBOX#%02d", i)})
		require.NoError(t, err)
		first := 1 << 30
		for _, it := range page.Items {
			var doc struct {
				Messages []struct{ Body struct{ N int } }
			}
			require.NoError(t, json.Unmarshal(it.Data, &doc))
			first = min(first, doc.Messages[0].Body.N)
		}
		if len(page.Items) > 0 {
			oldest[first] = true
		}
	}
	res, err := f.box.Sweep(t.Context())
	require.NoError(t, err)
	assert.True(t, res.More)
	got := map[int]bool{}
	for _, n := range numbers(t, f.queue.Take()) {
		got[n] = true
	}
	assert.Equal(t, oldest, got)
}

// deleteFailingStore fails the deletions of outbox items while fail is set.
type deleteFailingStore struct {
	store.Store
	mu   sync.Mutex
	fail bool
}

func (s *deleteFailingStore) Delete(ctx context.Context, key store.Key, cond store.Condition) error {
	s.mu.Lock()
	fail := s.fail
	s.mu.Unlock()
	if fail && strings.HasPrefix(key.PK, "OUTBOX#") {
		return store.ErrUnavailable
	}
	return s.Store.Delete(ctx, key, cond)
}

// Sent but not cleared (the deletion fails): the item stays, and the sweep sends it again.
// At least once, never lost.
func TestSentButNotClearedIsSentAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	st := &deleteFailingStore{Store: f.store, fail: true}
	box, err := outbox.New(st, f.queue, outbox.Config{Now: f.clock.Now, Log: slog.New(slog.NewTextHandler(f.log, nil))})
	require.NoError(t, err)
	writes, deliver, err := box.Stage(msg(t, 1))
	require.NoError(t, err)
	require.NoError(t, f.commit(t, "a", writes))
	deliver(t.Context())
	assert.Equal(t, []int{1}, numbers(t, f.queue.Take()))
	assert.Equal(t, 1, f.pending(t))
	assert.Contains(t, f.log.String(), "not cleared")

	st.mu.Lock()
	st.fail = false
	st.mu.Unlock()
	f.clock.Advance(time.Minute)
	res, err := box.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, res.Delivered)
	assert.Equal(t, []int{1}, numbers(t, f.queue.Take()), "sent a second time: handlers are idempotent")
	assert.Zero(t, f.pending(t))
}

// A delivery overtaken by a sweep (or two sweeps at once) deletes what is gone already
// without an error: the deletion is unconditional, and each message goes out at least once.
func TestConcurrentDeliveriesNeverFailOnTheDelete(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	var delivers []func(context.Context)
	for i := range 20 {
		writes, deliver, err := f.box.Stage(msg(t, i))
		require.NoError(t, err)
		require.NoError(t, f.commit(t, fmt.Sprint(i), writes))
		delivers = append(delivers, deliver)
	}
	f.clock.Advance(time.Minute) // every item is due for a sweep while its request still delivers
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			_, err := f.box.Sweep(t.Context())
			errs <- err
		})
	}
	for _, d := range delivers {
		wg.Go(func() { d(t.Context()) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	seen := map[int]bool{}
	for _, n := range numbers(t, f.queue.Take()) {
		seen[n] = true
	}
	assert.Len(t, seen, 20, "every message at least once")
	assert.Zero(t, f.pending(t))
	assert.NotContains(t, f.log.String(), "level=WARN")
}

// Messages that do not fit one item take several, each a write of the transaction; they are
// sent in order.
func TestLargeMessagesTakeSeveralItems(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	big := func(n int) queue.Message {
		m, err := queue.New("test.job", map[string]any{"n": n, "pad": strings.Repeat("x", 200<<10)})
		require.NoError(t, err)
		return m
	}
	writes, deliver, err := f.box.Stage(big(1), big(2), msg(t, 3), big(4))
	require.NoError(t, err)
	assert.Len(t, writes, 3, "200 KiB messages: one per item, the small one with a big one")
	require.NoError(t, f.commit(t, "a", writes))
	deliver(t.Context())
	assert.Equal(t, []int{1, 2, 3, 4}, numbers(t, f.queue.Take()))
	assert.Zero(t, f.pending(t))
}

func TestStageRefusesInvalidMessages(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	_, _, err := f.box.Stage(msg(t, 1), queue.Message{Type: "bad type!", Body: json.RawMessage(`{}`)})
	assert.ErrorContains(t, err, "message 1")
	tooLate := msg(t, 1)
	tooLate.Delay = queue.MaxScheduledDelay + time.Second
	_, _, err = f.box.Stage(tooLate)
	assert.Error(t, err)

	writes, deliver, err := f.box.Stage()
	require.NoError(t, err)
	assert.Empty(t, writes)
	deliver(t.Context()) // nothing to do, and no panic
}

// Without a queue, staging works and delivering is left to a process that has one.
func TestWithoutAQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t, outbox.Config{})
	box, err := outbox.New(f.store, nil, outbox.Config{Now: f.clock.Now})
	require.NoError(t, err)
	writes, deliver, err := box.Stage(msg(t, 1))
	require.NoError(t, err)
	require.NoError(t, f.commit(t, "a", writes))
	deliver(t.Context())
	assert.Equal(t, 1, f.pending(t))
	_, err = box.Sweep(t.Context())
	assert.Error(t, err)

	f.clock.Advance(time.Minute)
	res, err := f.box.Sweep(t.Context())
	require.NoError(t, err)
	assert.Equal(t, 1, res.Delivered, "the sweep of a process with the queue")
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	_, err := outbox.New(nil, nil, outbox.Config{})
	assert.Error(t, err)
	f := newFixture(t, outbox.Config{})
	_, err = outbox.New(f.store, nil, outbox.Config{Grace: -time.Second, Batch: store.MaxQueryLimit + 1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "grace")
	assert.Contains(t, err.Error(), "batch")
}
