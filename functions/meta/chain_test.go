package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// chainPayload is the payload of a step of the refresh chain connection id's record names.
func (f *fixture) chainPayload(t *testing.T, id string) json.RawMessage {
	t.Helper()
	rec := f.record(t, id)
	require.NotEmpty(t, rec.RefreshChain, "the connection names its refresh chain")
	b, err := json.Marshal(refreshPayload{Account: "acct_a", Connection: id, Chain: rec.RefreshChain})
	require.NoError(t, err)
	return b
}

// record is connection id as stored.
func (f *fixture) record(t *testing.T, id string) record {
	t.Helper()
	rec, err := f.svc.load(context.Background(), "acct_a", id)
	require.NoError(t, err)
	return rec
}

// stepPayload is the payload of the refresh step queue message m carries.
func (f *fixture) stepPayload(t *testing.T, m queue.Message) json.RawMessage {
	t.Helper()
	var st jobs.State
	require.NoError(t, m.Decode(&st))
	require.Equal(t, JobRefresh, st.Kind)
	return st.Payload
}

// run runs the refresh step queue message m carries, as the jobs runner would.
func (f *fixture) run(t *testing.T, m queue.Message) error {
	t.Helper()
	_, done, err := f.svc.RefreshStep(context.Background(), f.stepPayload(t, m), "")
	if err == nil {
		assert.True(t, done, "a refresh is one step")
	}
	return err
}

// outboxItems counts the items staged in the outbox (shared/outbox: OUTBOX#00 to #15).
func (f *fixture) outboxItems(t *testing.T) int {
	t.Helper()
	n := 0
	for i := range outbox.Shards {
		page, err := f.st.Query(context.Background(), store.Query{PK: fmt.Sprintf("OUTBOX#%02d", i), Limit: store.MaxQueryLimit})
		require.NoError(t, err)
		n += len(page.Items)
	}
	return n
}

// chainOf is the chain a refresh step queue message belongs to.
func (f *fixture) chainOf(t *testing.T, m queue.Message) string {
	t.Helper()
	var p refreshPayload
	require.NoError(t, json.Unmarshal(f.stepPayload(t, m), &p))
	return p.Chain
}

// Connecting and reconnecting twice starts three chains, one after the other: only the
// last, the one the connection names, goes on. The earlier chains' queued steps end without
// calling Graph or rescheduling themselves, even once the token is due; the current one
// refreshes it once.
func TestReconnectLeavesOneRefreshChain(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	first := f.connect(t)
	f.clock.Advance(StartLimit.Window)
	require.Equal(t, first.ID, f.connect(t).ID)
	f.clock.Advance(StartLimit.Window)
	require.Equal(t, first.ID, f.connect(t).ID)

	starts := f.queue.Sent()
	require.Len(t, starts, 3, "each callback started a chain")
	current := f.record(t, first.ID).RefreshChain
	assert.Equal(t, current, f.chainOf(t, starts[2]), "the connection names the last one")
	assert.NotEqual(t, f.chainOf(t, starts[0]), f.chainOf(t, starts[1]))
	assert.NotEqual(t, f.chainOf(t, starts[1]), current)
	exchanges := len(f.fake.LongLived())

	// The three first steps run (at once, as queued): the old chains end, the current one
	// waits for the token to be due.
	for _, m := range starts {
		require.NoError(t, f.run(t, m))
	}
	msgs := f.queue.Sent()
	require.Len(t, msgs, 4, "one chain handed itself on")
	next := msgs[3]
	assert.Equal(t, f.record(t, first.ID).RefreshChain, f.chainOf(t, next), "to the step the connection now names")
	assert.InDelta(t, (53 * 24 * time.Hour).Seconds(), next.Delay.Seconds(), 600)
	assert.Len(t, f.fake.LongLived(), exchanges, "nothing was due")

	// The token due, the old chains' steps (had they rescheduled, as before chains were named)
	// call no Graph and schedule nothing; the current chain's step refreshes once.
	f.clock.Advance(54 * 24 * time.Hour)
	require.NoError(t, f.run(t, starts[0]))
	require.NoError(t, f.run(t, starts[1]))
	assert.Len(t, f.fake.LongLived(), exchanges, "no refresh by a superseded chain")
	assert.Len(t, f.queue.Sent(), 4, "no reschedule by a superseded chain")
	require.NoError(t, f.run(t, next))
	assert.Len(t, f.fake.LongLived(), exchanges+1, "one refresh")
	msgs = f.queue.Sent()
	require.Len(t, msgs, 5)
	assert.Equal(t, f.record(t, first.ID).RefreshChain, f.chainOf(t, msgs[4]), "the chain goes on")
}

// The queue refusing at connect and reconnect fails neither callback, and loses no chain:
// each chain's first step was staged in the outbox in the connection's own transaction, and
// the outbox's sweep sends it once the queue is back. Of the two, the step of the chain the
// reconnection started is the one that goes on.
func TestRefreshChainSurvivesAFailingQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.queue.Fail(errors.New("queue unavailable"))
	c := f.connect(t)
	assert.Equal(t, StatusActive, c.Status)
	f.clock.Advance(StartLimit.Window)
	require.Equal(t, c.ID, f.connect(t).ID, "a reconnection")
	assert.Empty(t, f.queue.Sent(), "nothing reached the queue")
	assert.Equal(t, 2, f.outboxItems(t), "both first steps are staged in the outbox")

	box, err := outbox.New(f.st, f.queue, outbox.Config{Now: f.clock.Now})
	require.NoError(t, err)
	f.clock.Advance(outbox.DefaultGrace)
	_, err = box.Sweep(ctx)
	require.Error(t, err, "the queue still down: the sweep reports the items it could not send")
	f.queue.Fail(nil)
	res, err := box.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, res.Delivered)
	assert.Zero(t, f.outboxItems(t))
	starts := f.queue.Sent()
	require.Len(t, starts, 2)

	for _, m := range starts {
		require.NoError(t, f.run(t, m))
	}
	msgs := f.queue.Sent()
	require.Len(t, msgs, 3, "one chain goes on")
	assert.Equal(t, f.record(t, c.ID).RefreshChain, f.chainOf(t, msgs[2]))
}

// A queue refusing the step a chain is handed on to fails nothing and loses nothing: the
// step was staged in the outbox with the connection's write, and the outbox's sweep sends
// it once the queue is back. A step that fails before it hands on (the store down) is
// retried by the queue and hands on then, without refreshing again.
func TestRefreshHandOnSurvivesAFailingQueue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	start := f.queue.Sent()[0]

	f.queue.Fail(errors.New("queue unavailable"))
	require.NoError(t, f.run(t, start))
	assert.Len(t, f.queue.Sent(), 1, "nothing reached the queue")
	assert.Equal(t, 1, f.outboxItems(t), "the next step is staged in the outbox")
	f.queue.Fail(nil)
	box, err := outbox.New(f.st, f.queue, outbox.Config{Now: f.clock.Now})
	require.NoError(t, err)
	f.clock.Advance(outbox.DefaultGrace)
	res, err := box.Sweep(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, res.Delivered)
	msgs := f.queue.Sent()
	require.Len(t, msgs, 2)
	next := msgs[1]
	assert.Equal(t, f.record(t, c.ID).RefreshChain, f.chainOf(t, next))
	assert.InDelta(t, (53 * 24 * time.Hour).Seconds(), next.Delay.Seconds(), 600, "what is left of its delay")

	// Due, refreshed, and then the store refuses the hand-on: the step fails, and its retry
	// hands on without refreshing again.
	f.clock.Advance(54 * 24 * time.Hour)
	exchanges := len(f.fake.LongLived())
	f.svc.store = &failingTransact{Store: f.st}
	_, done, err := f.svc.RefreshStep(ctx, f.stepPayload(t, next), "")
	require.Error(t, err)
	assert.False(t, done)
	require.Len(t, f.fake.LongLived(), exchanges+1, "refreshed and stored")
	f.svc.store = f.st
	require.NoError(t, f.run(t, next))
	assert.Len(t, f.fake.LongLived(), exchanges+1, "the retry does not refresh again")
	msgs = f.queue.Sent()
	require.Len(t, msgs, 3)
	assert.Equal(t, f.record(t, c.ID).RefreshChain, f.chainOf(t, msgs[2]))
	assert.InDelta(t, (53 * 24 * time.Hour).Seconds(), msgs[2].Delay.Seconds(), 600)
}

// failingTransact is a store whose transactions fail (the hand-on's), its other writes
// working.
type failingTransact struct{ store.Store }

func (failingTransact) Transact(context.Context, []store.Write) error {
	return fmt.Errorf("transact: %w", store.ErrUnavailable)
}

// Steps queued before chains were named carry none. On a connection that names a chain
// (activated or reconnected since) such a step ends without doing anything. On a connection
// of before, which names none and may have several such chains (one per reconnection of
// then), the first step to run adopts it: it names a new chain and stages that chain's
// first step in the same write, and ends without refreshing; the other old steps then end.
func TestRefreshStepOfBeforeChains(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	c := f.connect(t)
	require.Len(t, f.queue.Sent(), 1)
	old, err := json.Marshal(map[string]string{"account": "acct_a", "connection": c.ID}) // the payload of then
	require.NoError(t, err)
	exchanges := len(f.fake.LongLived())
	due := func() { f.clock.Advance(54 * 24 * time.Hour) }
	due()

	_, done, err := f.svc.RefreshStep(ctx, old, "")
	require.NoError(t, err)
	assert.True(t, done)
	assert.Len(t, f.queue.Sent(), 1, "a connection with a chain: the old step ends")
	assert.Len(t, f.fake.LongLived(), exchanges, "and calls no Graph")

	// A connection of before: its record names no chain.
	it, err := f.st.Get(ctx, connKey("acct_a", c.ID))
	require.NoError(t, err)
	rec, err := store.Decode[record](it)
	require.NoError(t, err)
	rec.RefreshChain = ""
	it, err = item(it.Key, it.Revision, rec)
	require.NoError(t, err)
	require.NoError(t, f.st.Put(ctx, it, store.RevisionIs(it.Revision)))

	// Two chains of then: the first step adopts the connection, the second ends.
	for range 2 {
		_, done, err = f.svc.RefreshStep(ctx, old, "")
		require.NoError(t, err)
		assert.True(t, done)
	}
	assert.Len(t, f.fake.LongLived(), exchanges, "the adoption refreshes nothing itself")
	msgs := f.queue.Sent()
	require.Len(t, msgs, 2, "one new chain started")
	adopted := f.record(t, c.ID).RefreshChain
	require.NotEmpty(t, adopted)
	assert.Equal(t, adopted, f.chainOf(t, msgs[1]))
	assert.Zero(t, msgs[1].Delay, "at once")

	// The new chain refreshes the due token, once, and goes on.
	require.NoError(t, f.run(t, msgs[1]))
	assert.Len(t, f.fake.LongLived(), exchanges+1)
	msgs = f.queue.Sent()
	require.Len(t, msgs, 3)
	assert.Equal(t, f.record(t, c.ID).RefreshChain, f.chainOf(t, msgs[2]))
	assert.NotEqual(t, adopted, f.chainOf(t, msgs[2]), "handed on to a chain of its own")
}
