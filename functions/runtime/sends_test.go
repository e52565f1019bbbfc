package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Every send carries an idempotency key: the same on each retry of one step's send, another
// for every other send (the same step run again included). With a provider that
// de-duplicates by key, a send retried after its answer was lost reaches the user once.
func TestSendsCarryAStableIdempotencyKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.adapter.dedupe = true
	f.adapter.lose = map[int]bool{2: true} // "two" is delivered, its answer lost
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[
		{"id":"a","type":"send_text","text":"one"},
		{"id":"b","type":"send_text","text":"two"},
		{"id":"menu","type":"buttons","text":"again?","buttons":[{"title":"Yes","step_id":"menu"}]}]}`)
	m := f.inbound("/start", "")
	require.Error(t, f.deliver(m), "the lost answer is retried")
	m.Attempt = 2
	require.NoError(t, f.deliver(m))
	assert.Equal(t, []string{"one", "two", "again?"}, f.adapter.texts(), "each once")

	sub := f.subs.only(t)
	run := f.runs(sub.ID)[0]
	require.Len(t, run.Steps, 3)
	assert.Equal(t, 2, run.Steps[1].Attempts)
	assert.Equal(t, "m2", run.Steps[1].Outcome["message_id"], "the retry got the first message's id")

	// Pressing Yes shows the menu again: a new send of the same step, with a new key.
	require.NoError(t, f.deliver(f.inbound("", f.adapter.last().Msg.Buttons[0].Payload)))
	assert.Equal(t, []string{"one", "two", "again?", "again?"}, f.adapter.texts())
	keys := f.adapter.sendKeys()
	require.Len(t, keys, 5)
	for i, want := range []string{"/1/a", "/2/b", "/2/b", "/3/menu", "/5/menu"} {
		assert.Equal(t, run.ID+want, keys[i], "send %d", i)
	}
}

// A quick_replies buttons step goes out as quick replies where the channel has them, and as
// inline buttons (said in the trace) where it does not; a tapped quick reply arrives as its
// title (Telegram) and resumes the run.
func TestQuickReplies(t *testing.T) {
	t.Parallel()
	const flow = `{"name":"Q","trigger":{"type":"start"},"steps":[
		{"id":"ask","type":"buttons","style":"quick_replies","text":"Tea?","buttons":[{"title":"Yes","step_id":"yes"},{"title":"Shop","payload":"shop"}]},
		{"id":"yes","type":"send_text","text":"Tea it is"}]}`
	for _, quick := range []bool{true, false} {
		t.Run(fmt.Sprint("channel has quick replies: ", quick), func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			if quick {
				f.adapter.kinds = []string{channel.MessageKindText, channel.MessageKindButtons, channel.MessageKindQuickReplies}
			}
			f.publish(flow)
			require.NoError(t, f.deliver(f.inbound("/start", "")))
			m := f.adapter.last().Msg
			assert.Equal(t, quick, m.QuickReplies)
			require.Len(t, m.Buttons, 2)
			assert.True(t, strings.HasPrefix(m.Buttons[0].Payload, "~"))
			sub := f.subs.only(t)
			ask := f.runs(sub.ID)[0].Steps[0]
			assert.Equal(t, "quick_replies", ask.Input["style"])
			if quick {
				assert.NotContains(t, ask.Outcome, "sent_as")
			} else {
				assert.Equal(t, "inline", ask.Outcome["sent_as"])
			}

			require.NoError(t, f.deliver(f.inbound(" yes ", ""))) // the tapped reply's title
			assert.Equal(t, "Tea it is", f.adapter.last().Msg.Text)
			run := f.runs(sub.ID)[0]
			assert.Equal(t, StatusCompleted, run.Status)
			assert.Equal(t, true, run.Steps[1].Decision["quick_reply"])
		})
	}
}

// A label added over the API starts the label's label_added reaction once, however often
// its event is delivered, in a new chain whose trace says so.
func TestLabelAddedOverTheAPI(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.label()
	f.publish(fmt.Sprintf(`{"name":"vip","trigger":{"type":"label_added","label_id":%q},"steps":[{"id":"s","type":"send_text","text":"welcome, vip"}]}`, vip))
	require.NoError(t, f.deliver(f.inbound("hello", ""))) // the subscriber, matching nothing
	sub := f.subs.only(t)
	require.Empty(t, f.adapter.texts())

	m, err := LabelAddedMessage(f.bot, sub.ID, channel.Telegram, vip, 2)
	require.NoError(t, err)
	assert.Equal(t, TriggerMessage, m.Type)
	m.ID, m.Attempt = "msg_1", 1
	require.NoError(t, f.deliver(m))
	require.NoError(t, f.deliver(m), "a redelivery")
	again, err := LabelAddedMessage(f.bot, sub.ID, channel.Telegram, vip, 2)
	require.NoError(t, err)
	again.ID = "msg_2"
	require.NoError(t, f.deliver(again), "the same addition sent again")
	assert.Equal(t, []string{"welcome, vip"}, f.adapter.texts())
	runs := f.runs(sub.ID)
	require.Len(t, runs, 1)
	assert.Equal(t, TriggerInfo{Type: "label_added", Reason: "api", LabelID: vip}, runs[0].Trigger)

	// Another addition of the label (removed and added again: a later revision) runs again.
	later, err := LabelAddedMessage(f.bot, sub.ID, channel.Telegram, vip, 4)
	require.NoError(t, err)
	require.NoError(t, f.deliver(later))
	assert.Len(t, f.adapter.texts(), 2)

	_, err = LabelAddedMessage(f.bot, sub.ID, channel.Telegram, vip, 0)
	assert.Error(t, err)
}

// A handler's writes skip their own disk syncs (deferSyncs), but whatever decided a send is
// on disk before the provider sees it, and everything the handler wrote is on disk when it
// returns (before the queue deletes the message).
func TestWritesAreSyncedBeforeASendAndBeforeTheHandlerReturns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := f.st.(*sqlitetest.Store)
	var atSend []uint64
	f.adapter.before = func(ctx context.Context) {
		require.NotNil(t, store.DeferralOf(ctx), "the handler's writes are deferred")
		atSend = append(atSend, st.Unsynced())
	}
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[
		{"id":"a","type":"send_text","text":"one"},
		{"id":"b","type":"send_text","text":"two"}]}`)
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	assert.Equal(t, []uint64{0, 0}, atSend, "synced before each send")
	assert.Zero(t, st.Unsynced(), "synced before the handler returned")
	assert.Equal(t, []string{"one", "two"}, f.adapter.texts())
}

// writeCounter counts the writes made on a store, each its own commit.
type writeCounter struct {
	store.Store
	n atomic.Int64
}

func (w *writeCounter) Put(ctx context.Context, it store.Item, c store.Condition) error {
	w.n.Add(1)
	return w.Store.Put(ctx, it, c)
}

func (w *writeCounter) Delete(ctx context.Context, k store.Key, c store.Condition) error {
	w.n.Add(1)
	return w.Store.Delete(ctx, k, c)
}

func (w *writeCounter) Add(ctx context.Context, k store.Key, d int64, exp time.Time) (int64, error) {
	w.n.Add(1)
	return w.Store.Add(ctx, k, d, exp)
}

func (w *writeCounter) Transact(ctx context.Context, writes []store.Write) error {
	w.n.Add(1)
	return w.Store.Transact(ctx, writes)
}

// An update that starts a one-step reaction commits twice: the sender's upsert with the
// claim, the sender counted active and the run created, then the step with the run's end
// and the event's done mark. Its events go in two appends (the subscribers family's own, on
// a first contact, are that family's).
func TestAnUpdateCommitsTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	wc := &writeCounter{Store: f.st}
	f.subs.st = wc
	events := &appendCounter{Log: f.events}
	rt, err := New(Deps{Store: wc, Queue: f.q, Channels: f.chans, Subscribers: f.subs, Reactions: f.rx, Events: events,
		Now: f.clock.Now, Log: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	f.mux = queue.NewMux()
	rt.Register(f.mux)
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"hi"}]}`)

	for i := range 2 { // a first contact, then the same subscriber again
		wc.n.Store(0)
		events.n.Store(0)
		m := f.inbound("/start", "")
		require.NoError(t, f.deliver(m))
		assert.Equal(t, int64(2), wc.n.Load(), "update %d", i)
		assert.Equal(t, int64(2), events.n.Load(), "update %d", i)
		require.NoError(t, f.deliver(m), "a redelivery")
		assert.Equal(t, int64(2), wc.n.Load(), "a redelivery finds the event done: no write")
	}
	assert.Equal(t, []string{"hi", "hi"}, f.adapter.texts())
	runs := f.runs(f.subs.only(t).ID)
	require.Len(t, runs, 2)
	for _, r := range runs {
		assert.Equal(t, StatusCompleted, r.Status)
		assert.Equal(t, EndLastStep, *r.EndReason)
		assert.Len(t, r.Steps, 1)
	}
	assert.Equal(t, int64(2), f.counter("messages_in"))
	assert.Equal(t, int64(2), f.counter("messages_out"))
	assert.Equal(t, int64(2), f.counter("reactions_started"))
	assert.Equal(t, int64(1), f.counter("active_subscribers"))
}

// appendCounter counts the appends made to an event log.
type appendCounter struct {
	eventlog.Log
	n atomic.Int64
}

func (a *appendCounter) Append(ctx context.Context, events ...eventlog.Event) (int, error) {
	a.n.Add(1)
	return a.Log.Append(ctx, events...)
}
