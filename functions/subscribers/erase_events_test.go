package subscribers

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue/queuetest"
)

// withEvents gives f's service an event log holding, for each subscriber of externalIDs
// (created here), their subscriber_created event and n custom events, and one event of no
// subscriber; it returns the log and the subscribers.
func withEvents(t *testing.T, f *fixture, n int, externalIDs ...string) (*eventlogtest.Memory, []Subscriber) {
	t.Helper()
	log := eventlogtest.NewMemory()
	f.svc = f.svc.WithEvents(log, nil)
	var subs []Subscriber
	for _, x := range externalIDs {
		sub := f.subscriber(t, x, "Ann", "Lee")
		subs = append(subs, sub)
		var evs []eventlog.Event
		for i := range n {
			evs = append(evs, eventlog.Event{ID: fmt.Sprintf("cev_%s_%d", sub.ID, i), BotID: f.bot, SubscriberID: sub.ID,
				Name: "purchase", At: t0.Add(time.Duration(i) * time.Minute), Channel: ChannelTelegram, Source: eventlog.SourceCustom,
				Properties: map[string]any{"email": "ann@example.com"}, Revenue: &eventlog.Revenue{Minor: 500, Currency: "EUR"}})
			if len(evs) == eventlog.MaxEventsPerAppend || i == n-1 {
				_, err := log.Append(t.Context(), evs...)
				require.NoError(t, err)
				evs = nil
			}
		}
	}
	_, err := log.Append(t.Context(), eventlog.Event{ID: "ev_anon", BotID: f.bot, Name: "reaction_published", At: t0, Source: eventlog.SourceBuilder})
	require.NoError(t, err)
	return log, subs
}

// eventsOf returns the ids of the bot's events of subscriber sub ("": every event).
func eventsOf(t *testing.T, log eventlog.Log, bot, sub string) []string {
	t.Helper()
	var out []string
	q := eventlog.Query{BotID: bot, SubscriberID: sub, From: t0.AddDate(0, 0, -1), To: t0.AddDate(0, 0, 30)}
	require.NoError(t, log.Scan(t.Context(), q, func(e eventlog.Event) error {
		out = append(out, e.ID)
		return nil
	}))
	return out
}

// Erasing a subscriber erases their events, over several bounded calls, and nobody else's.
// Without a job runner the erasure runs in the erasing call.
func TestEraseErasesTheSubscribersEvents(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	n := 3*eventlogtest.MemoryDeleteBatch + 7 // several calls of DeleteSubscriber
	log, subs := withEvents(t, f, n, "1", "2")
	ann, bob := subs[0].ID, subs[1].ID
	require.Len(t, eventsOf(t, log, f.bot, ann), n+1, "the custom events and subscriber_created")
	bobs := eventsOf(t, log, f.bot, bob)
	require.Len(t, bobs, n+1)

	require.NoError(t, f.svc.Delete(t.Context(), f.bot, ann, nil))
	assert.Empty(t, eventsOf(t, log, f.bot, ann), "the erased subscriber's events are gone")
	assert.Equal(t, bobs, eventsOf(t, log, f.bot, bob), "another subscriber's stay")
	assert.Len(t, eventsOf(t, log, f.bot, ""), n+1+1, "bob's and the event of no one")
	counts, err := log.Counts(t.Context(), eventlog.Query{BotID: f.bot, Names: []string{"purchase"}, From: t0.AddDate(0, 0, -1), To: t0.AddDate(0, 0, 30)})
	require.NoError(t, err)
	var total int64
	for _, c := range counts {
		total += c.Count
	}
	assert.Equal(t, int64(n), total, "the counts no longer count them")
}

// With a job runner but no outbox, the erasure is a job started once the erasure commits:
// the events stay until it runs.
func TestEraseStartsTheEventErasureJob(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	log, subs := withEvents(t, f, 2*eventlogtest.MemoryDeleteBatch, "1", "2")
	ann, bob := subs[0].ID, subs[1].ID
	bobs := eventsOf(t, log, f.bot, bob)

	require.NoError(t, f.svc.Delete(t.Context(), f.bot, ann, nil))
	require.Len(t, f.jobs.started, 1)
	assert.Equal(t, jobEraseEvents, f.jobs.started[0].Kind)
	assert.NotEmpty(t, eventsOf(t, log, f.bot, ann), "not before the job runs")
	assert.GreaterOrEqual(t, f.jobs.runAll(t, f.svc), 2, "one bounded call a step")
	assert.Empty(t, eventsOf(t, log, f.bot, ann))
	assert.Equal(t, bobs, eventsOf(t, log, f.bot, bob))

	// A service without an event log (another family's) starts no job.
	g := newFixture(t, true)
	sub := g.subscriber(t, "1", "Ann", "Lee")
	require.NoError(t, g.svc.Delete(t.Context(), g.bot, sub.ID, nil))
	assert.Empty(t, g.jobs.started)
}

// With an outbox, the start of the job purge.EraseJob is staged in the erasure's own
// transaction: a process that ends right after the commit (here: one whose outbox cannot
// deliver) leaves it to the outbox's sweep, which starts it, at once and again
// purge.SweepDelay later. The family's step of it (EraseStep, which the platform chains with
// the other families') erases the events.
func TestEraseStagesTheEventErasureInItsTransaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	log, subs := withEvents(t, f, 10, "1", "2")
	ann, bob := subs[0].ID, subs[1].ID
	bobs := eventsOf(t, log, f.bot, bob)
	dying, err := outbox.New(f.store, nil, outbox.Config{Now: f.clock.Now}) // stages only
	require.NoError(t, err)
	svc := f.svc.WithOutbox(dying)

	require.NoError(t, svc.Delete(t.Context(), f.bot, ann, nil))
	assert.Empty(t, f.jobs.started, "nothing started outside the transaction")
	assert.Len(t, eventsOf(t, log, f.bot, ann), 11, "nothing erased yet")

	q := &queuetest.Sender{}
	sweeper, err := outbox.New(f.store, q, outbox.Config{Now: f.clock.Now})
	require.NoError(t, err)
	f.clock.Advance(outbox.DefaultGrace + time.Second)
	res, err := sweeper.Sweep(t.Context())
	require.NoError(t, err)
	require.Equal(t, 1, res.Delivered)
	sent := q.Sent()
	require.Len(t, sent, 2)
	assert.Zero(t, sent[0].Delay)
	assert.InDelta(t, purge.SweepDelay-outbox.DefaultGrace, sent[1].Delay, float64(2*time.Second), "the second pass, still delayed")

	reg := jobs.NewRegistry()
	reg.Register(purge.EraseJob, svc.EraseStep)
	for _, st := range queuetest.Decode[jobs.State](t, sent) {
		assert.Equal(t, purge.EraseJob, st.Kind)
		assert.JSONEq(t, `{"bot_id":"`+f.bot+`","subscriber_id":"`+ann+`"}`, string(st.Payload))
		for !st.Done {
			st, err = reg.RunStep(t.Context(), st)
			require.NoError(t, err)
		}
		assert.Empty(t, eventsOf(t, log, f.bot, ann))
	}
	assert.Equal(t, bobs, eventsOf(t, log, f.bot, bob))
}

// The job's step refuses to run without an event log rather than report an erasure done.
func TestEraseEventsStepNeedsTheLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	_, _, err := f.svc.eraseEventsStep(t.Context(), purgeJob{Bot: f.bot, ID: "sub_1"}, "")
	assert.Error(t, err)
}
