package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/local"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// openStore opens a sqlite store at path, closed when the test ends.
func openStore(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newQueue(t *testing.T, st store.Store, cfg local.Config) *local.Queue {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "jobs"
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	q, err := local.New(st, cfg)
	require.NoError(t, err)
	return q
}

// start runs q's workers with h and stops them when the test ends.
func start(t *testing.T, q *local.Queue, h queue.HandlerFunc) {
	t.Helper()
	require.NoError(t, q.Start(h))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		assert.NoError(t, q.Stop(ctx))
	})
}

func msg(t *testing.T, n int) queue.Message {
	t.Helper()
	m, err := queue.New("test.job", map[string]int{"n": n})
	require.NoError(t, err)
	return m
}

func bodyN(t *testing.T, m queue.Message) int {
	var b struct{ N int }
	require.NoError(t, m.Decode(&b))
	return b.N
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// pending counts the messages left in the queue's partition.
func pending(t *testing.T, st store.Store, name string) int {
	t.Helper()
	p, err := st.Query(context.Background(), store.Query{PK: "QUEUE#" + name, Prefix: "MSG#"})
	require.NoError(t, err)
	return len(p.Items)
}

// counter records deliveries per body number and checks that no message is handled by two
// workers at the same time.
type counter struct {
	mu       sync.Mutex
	seen     map[int]int
	running  map[string]bool
	overlaps int
}

func newCounter() *counter { return &counter{seen: map[int]int{}, running: map[string]bool{}} }

func (c *counter) handler(t *testing.T, work time.Duration) queue.HandlerFunc {
	return func(ctx context.Context, m queue.Message) error {
		c.mu.Lock()
		if c.running[m.ID] {
			c.overlaps++
		}
		c.running[m.ID] = true
		c.mu.Unlock()
		time.Sleep(work)
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.running, m.ID)
		c.seen[bodyN(t, m)]++
		return nil
	}
}

func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.seen {
		n += v
	}
	return n
}

func TestEveryMessageOnceWithManyWorkers(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	// Two queue instances on two store handles of one file, four workers each: the claim
	// must hold across goroutines and across store connections.
	st1, st2 := openStore(t, path), openStore(t, path)
	q1 := newQueue(t, st1, local.Config{Concurrency: 4})
	q2 := newQueue(t, st2, local.Config{Concurrency: 4})

	const n = 150 // more than one transaction's worth
	msgs := make([]queue.Message, n)
	for i := range msgs {
		msgs[i] = msg(t, i)
	}
	c := newCounter()
	start(t, q1, c.handler(t, time.Millisecond))
	start(t, q2, c.handler(t, time.Millisecond))
	require.NoError(t, q1.Send(context.Background(), msgs...))

	waitFor(t, "every message", 10*time.Second, func() bool { return c.total() >= n })
	// The handler counts a message before the worker acknowledges it, so the last deletes
	// may still be on their way: wait for them rather than assume a fixed pause suffices.
	waitFor(t, "every acknowledgement", 10*time.Second, func() bool { return pending(t, st1, "jobs") == 0 })
	time.Sleep(50 * time.Millisecond) // a double delivery would show up now
	c.mu.Lock()
	defer c.mu.Unlock()
	assert.Len(t, c.seen, n)
	for i := range n {
		assert.Equal(t, 1, c.seen[i], "message %d deliveries", i)
	}
	assert.Zero(t, c.overlaps, "a message ran on two workers at once")
}

func TestRetryWithBackoffThenSuccess(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
	// A long poll interval: the retries must come from the scheduled wake-ups, on time.
	q := newQueue(t, st, local.Config{
		Backoff: backoff.Policy{Base: 80 * time.Millisecond, Max: time.Second}, PollInterval: time.Minute,
	})
	var mu sync.Mutex
	var attempts []int
	var times []time.Time
	start(t, q, func(ctx context.Context, m queue.Message) error {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, m.Attempt)
		times = append(times, time.Now())
		if m.Attempt < 3 {
			return errors.New("downstream unavailable")
		}
		return nil
	})
	require.NoError(t, q.Send(context.Background(), msg(t, 1)))
	waitFor(t, "third attempt", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(attempts) == 3 })
	time.Sleep(100 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{1, 2, 3}, attempts)
	// Equal jitter: the n-th wait is at least half of Min*2^(n-1).
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), 40*time.Millisecond)
	assert.GreaterOrEqual(t, times[2].Sub(times[1]), 80*time.Millisecond)
	mu.Unlock()
	waitFor(t, "the ack", 5*time.Second, func() bool { return pending(t, st, "jobs") == 0 })
	mu.Lock()
}

func TestDeadLetterAfterMaxAttemptsAndRedrive(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
	q := newQueue(t, st, local.Config{MaxAttempts: 3, Backoff: backoff.Policy{Base: time.Millisecond, Max: 5 * time.Millisecond}})
	var calls atomic.Int32
	var fixed atomic.Bool
	start(t, q, func(ctx context.Context, m queue.Message) error {
		calls.Add(1)
		if fixed.Load() {
			return nil
		}
		if m.Attempt == 2 {
			panic("handler bug") // a panic is a failure like any other, not a crash
		}
		return fmt.Errorf("attempt %d failed", m.Attempt)
	})
	require.NoError(t, q.Send(context.Background(), msg(t, 7)))

	var dead []local.DeadLetter
	waitFor(t, "a dead letter", 5*time.Second, func() bool {
		var err error
		dead, _, err = q.DeadLetters(context.Background(), 10, "")
		require.NoError(t, err)
		return len(dead) == 1
	})
	time.Sleep(50 * time.Millisecond)
	assert.EqualValues(t, 3, calls.Load(), "no delivery after the last attempt")
	assert.Equal(t, 3, dead[0].Message.Attempt)
	assert.Equal(t, "attempt 3 failed", dead[0].LastError)
	assert.Equal(t, 7, bodyN(t, dead[0].Message))
	assert.Zero(t, pending(t, st, "jobs"), "a dead letter is no longer on the queue")

	fixed.Store(true)
	require.NoError(t, q.Redrive(context.Background(), dead[0].Message.ID))
	waitFor(t, "the redriven delivery", 5*time.Second, func() bool { return calls.Load() == 4 })
	waitFor(t, "the ack", 5*time.Second, func() bool { return pending(t, st, "jobs") == 0 })
	dead, _, err := q.DeadLetters(context.Background(), 10, "")
	require.NoError(t, err)
	assert.Empty(t, dead)
	assert.ErrorIs(t, q.Redrive(context.Background(), "msg_nope"), store.ErrNotFound)
}

func TestMessagesSurviveARestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	st, err := sqlite.Open(path)
	require.NoError(t, err)
	before, err := local.New(st, local.Config{Name: "jobs"})
	require.NoError(t, err)
	for i := range 5 {
		require.NoError(t, before.Send(context.Background(), msg(t, i)))
	}
	require.NoError(t, st.Close()) // the process exits before any worker ran

	after := newQueue(t, openStore(t, path), local.Config{})
	c := newCounter()
	start(t, after, c.handler(t, 0))
	waitFor(t, "the five messages", 5*time.Second, func() bool { return c.total() == 5 })
}

func TestExpiredLeaseIsRedeliveredAndTheLateAckLoses(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	// "crashed" holds a message and never settles in time, as a killed process would.
	crashed := newQueue(t, openStore(t, path), local.Config{Concurrency: 1, VisibilityTimeout: 150 * time.Millisecond})
	release := make(chan struct{})
	got := make(chan queue.Message, 1)
	start(t, crashed, func(ctx context.Context, m queue.Message) error {
		got <- m
		<-release
		return nil
	})
	require.NoError(t, crashed.Send(context.Background(), msg(t, 1)))
	first := <-got

	survivor := newQueue(t, openStore(t, path), local.Config{Concurrency: 2, VisibilityTimeout: time.Minute})
	redelivered := make(chan queue.Message, 1)
	start(t, survivor, func(ctx context.Context, m queue.Message) error { redelivered <- m; return nil })
	select {
	case m := <-redelivered:
		assert.Equal(t, first.ID, m.ID)
		assert.Equal(t, 2, m.Attempt)
	case <-time.After(5 * time.Second):
		t.Fatal("the message was not redelivered after its lease expired")
	}
	close(release) // the first worker's late ack fails its condition; nothing breaks
}

func TestExtendVisibilityKeepsTheLease(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "s.db")
	st := openStore(t, path)
	a := newQueue(t, st, local.Config{Concurrency: 1, VisibilityTimeout: 100 * time.Millisecond})
	b := newQueue(t, openStore(t, path), local.Config{Concurrency: 2})
	var deliveries atomic.Int32
	done := make(chan struct{})
	handler := func(ctx context.Context, m queue.Message) error {
		if deliveries.Add(1) > 1 {
			return nil
		}
		for range 3 {
			if err := queue.ExtendVisibility(ctx, 600*time.Millisecond); err != nil {
				return err
			}
			time.Sleep(100 * time.Millisecond) // longer, in total, than the visibility timeout
		}
		close(done)
		return nil
	}
	start(t, a, handler)
	require.NoError(t, a.Send(context.Background(), msg(t, 1)))
	waitFor(t, "the first delivery", 5*time.Second, func() bool { return deliveries.Load() == 1 })
	start(t, b, handler)
	<-done
	waitFor(t, "the ack", 5*time.Second, func() bool { return pending(t, st, "jobs") == 0 })
	assert.EqualValues(t, 1, deliveries.Load())
	assert.ErrorIs(t, queue.ExtendVisibility(context.Background(), time.Second), queue.ErrNotHandling)
}

func TestDelayedMessageWaits(t *testing.T) {
	t.Parallel()
	q := newQueue(t, openStore(t, filepath.Join(t.TempDir(), "s.db")), local.Config{PollInterval: time.Minute})
	at := make(chan time.Time, 1)
	start(t, q, func(ctx context.Context, m queue.Message) error { at <- time.Now(); return nil })
	m := msg(t, 1)
	m.Delay = 150 * time.Millisecond
	sent := time.Now()
	require.NoError(t, q.Send(context.Background(), m))
	select {
	case got := <-at:
		assert.GreaterOrEqual(t, got.Sub(sent), 150*time.Millisecond)
	case <-time.After(5 * time.Second):
		t.Fatal("the delayed message never came")
	}
}

// A wait of 30 days is one message due in 30 days, longer than SQS could delay it: kept
// (retention counts from its due time, not from when it was sent) and delivered once due,
// not before.
func TestLongDelayIsKeptUntilDue(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2031, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(clock))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	q := newQueue(t, st, local.Config{Now: clock})
	var got atomic.Int32
	start(t, q, func(context.Context, queue.Message) error { got.Add(1); return nil })
	m := msg(t, 1)
	m.Delay = 30 * 24 * time.Hour
	require.NoError(t, q.Send(context.Background(), m))

	advance(30*24*time.Hour - time.Minute)
	time.Sleep(100 * time.Millisecond) // several polls
	assert.Zero(t, got.Load(), "not before it is due")
	assert.Equal(t, 1, pending(t, st, "jobs"), "still kept after the 14 days of retention")
	advance(2 * time.Minute)
	waitFor(t, "the delivery once due", 5*time.Second, func() bool { return got.Load() == 1 })
}

func TestStopDrainsInFlightWork(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
	q := newQueue(t, st, local.Config{Concurrency: 2})
	began := make(chan struct{})
	var finished atomic.Bool
	require.NoError(t, q.Start(queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
		close(began)
		time.Sleep(150 * time.Millisecond)
		finished.Store(true)
		return ctx.Err()
	})))
	require.NoError(t, q.Send(context.Background(), msg(t, 1)))
	<-began
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, q.Stop(ctx))
	assert.True(t, finished.Load(), "Stop returned before the handler finished")
	assert.Zero(t, pending(t, st, "jobs"), "the drained message was acknowledged")
	assert.Error(t, q.Start(queue.HandlerFunc(func(context.Context, queue.Message) error { return nil })))
}

func TestStopCancelsHandlersAtItsDeadline(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
	q := newQueue(t, st, local.Config{Concurrency: 1, Backoff: backoff.Policy{Base: time.Hour, Max: time.Hour}})
	began := make(chan struct{})
	cancelled := make(chan struct{})
	require.NoError(t, q.Start(queue.HandlerFunc(func(ctx context.Context, m queue.Message) error {
		close(began)
		<-ctx.Done()
		close(cancelled)
		return ctx.Err()
	})))
	require.NoError(t, q.Send(context.Background(), msg(t, 1)))
	<-began
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, q.Stop(ctx), context.DeadlineExceeded)
	<-cancelled
	// The cancelled attempt is settled as a failure: the message stays, for a later retry.
	waitFor(t, "the settled failure", 5*time.Second, func() bool {
		it, err := st.Get(context.Background(), store.Key{PK: "QUEUE#jobs", SK: "MSG#" + firstID(t, st)})
		return err == nil && it.Revision == 3 // sent, leased, retry scheduled
	})
}

func firstID(t *testing.T, st store.Store) string {
	t.Helper()
	p, err := st.Query(context.Background(), store.Query{PK: "QUEUE#jobs", Prefix: "MSG#"})
	require.NoError(t, err)
	require.Len(t, p.Items, 1)
	var rec struct{ ID string }
	require.NoError(t, json.Unmarshal(p.Items[0].Data, &rec))
	return rec.ID
}

func TestSendRefusesBadMessagesAndConfig(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
	q := newQueue(t, st, local.Config{})
	for name, m := range map[string]queue.Message{
		"no type":       {Body: json.RawMessage(`{}`)},
		"bad type":      {Type: "a b", Body: json.RawMessage(`{}`)},
		"not json":      {Type: "t", Body: json.RawMessage(`{`)},
		"too big":       {Type: "t", Body: json.RawMessage(`"` + strings.Repeat("a", queue.MaxMessageBytes) + `"`)},
		"delay too big": {Type: "t", Body: json.RawMessage(`1`), Delay: queue.MaxScheduledDelay + time.Second},
	} {
		assert.Error(t, q.Send(context.Background(), msg(t, 1), m), name)
	}
	assert.Zero(t, pending(t, st, "jobs"), "a batch with a bad message sends nothing")

	_, err := local.New(st, local.Config{Concurrency: -1, MaxAttempts: -1})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "name is required")
	assert.Contains(t, err.Error(), "concurrency")
	assert.Contains(t, err.Error(), "max attempts")
}

// A handler's error made with queue.RetryAfter (a provider's Retry-After) delays the next
// attempt by at least that much, even when the backoff is shorter.
func TestRetryAfterOutlastsTheBackoff(t *testing.T) {
	t.Parallel()
	st := openStore(t, filepath.Join(t.TempDir(), "s.db"))
	q := newQueue(t, st, local.Config{Backoff: backoff.Policy{Base: time.Millisecond, Max: time.Millisecond}, PollInterval: time.Minute})
	var mu sync.Mutex
	var times []time.Time
	start(t, q, func(ctx context.Context, m queue.Message) error {
		mu.Lock()
		defer mu.Unlock()
		times = append(times, time.Now())
		if m.Attempt == 1 {
			return queue.RetryAfter(errors.New("429"), 300*time.Millisecond)
		}
		return nil
	})
	require.NoError(t, q.Send(context.Background(), msg(t, 1)))
	waitFor(t, "second attempt", 5*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return len(times) == 2 })
	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, times[1].Sub(times[0]), 300*time.Millisecond)
}
