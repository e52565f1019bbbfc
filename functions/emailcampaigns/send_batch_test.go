package emailcampaigns

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// sequential sends one message at a time: for the tests whose mailer numbers its calls or
// reads the clock, where several sends in flight would make the numbering a race. The
// tests in this file cover the same ground with several workers.
func sequential(c *Config) { c.Workers = 1 }

// plannedOnly plans a campaign to the fixture's audience without sending anything: the
// domain is no longer verified once scheduled, so the first send pauses the campaign and its claimed row is
// planned again. The plan runs beside the send and stops at the pause, so the campaign is
// resumed (and paused again) until every page is planned. It returns the campaign and a
// step of its run, as a copy of a step would be.
func (f *fixture) plannedOnly(t *testing.T) (Campaign, *step) {
	t.Helper()
	c := f.schedule(t, f.create(t))
	f.domains.mu.Lock()
	f.domains.verified["shop.example"] = false
	f.domains.mu.Unlock()
	f.drain(t)
	got := f.get(t, c.ID)
	for range 20 {
		require.Equal(t, Paused, got.State)
		if got.Counts.Planned == int64(len(f.aud.people)) {
			break
		}
		_, err := f.svc.Resume(t.Context(), f.bot, c.ID, got.Revision)
		require.NoError(t, err)
		f.drain(t)
		got = f.get(t, c.ID)
	}
	require.Empty(t, f.mail.all())
	require.Equal(t, int64(len(f.aud.people)), got.Counts.Planned)
	rec, err := f.svc.load(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	now := f.clock.Now()
	return got, &step{s: f.svc, p: jobPayload{Bot: f.bot, Campaign: c.ID, Epoch: rec.Epoch}, c: rec, start: now, deadline: now.Add(f.cfg.StepDuration)}
}

// planned reads up to limit planned rows of a campaign, in the order the send reads them.
func (f *fixture) planned(t *testing.T, id string, limit int) []row {
	t.Helper()
	page, err := f.st.Query(sqlitetest.Unrecorded(t.Context()), store.Query{Index: store.GSI1, PK: rowStatePK(f.bot, id, RowPlanned), Limit: limit})
	require.NoError(t, err)
	rows := make([]row, len(page.Items))
	for i, it := range page.Items {
		rows[i], err = decodeRow(it)
		require.NoError(t, err)
	}
	return rows
}

// A claim batch where one row was claimed by another run since it was read and another
// merely changed (still planned): the first is left to the other run, the second and the
// rest are claimed; the counters stay exact.
func TestClaimBatchWithARowLost(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	c, st := f.plannedOnly(t)
	rows := f.planned(t, c.ID, 10)
	require.Len(t, rows, 10)

	other := &step{s: st.s, p: st.p, c: st.c, start: st.start, deadline: st.deadline} // a copy of the step, as a redelivered one
	mine, err := other.claim(jobCtx(t), []row{rows[3]})
	require.NoError(t, err)
	require.Len(t, mine, 1)
	_, err = mutateRow(jobCtx(t), f.svc.d.Store, f.bot, c.ID, rows[5].ID, nil, func(n *row, _ deltas) ([]store.Write, error) {
		n.PlannedAt = n.PlannedAt.Add(time.Millisecond) // a change that leaves it planned
		return nil, nil
	})
	require.NoError(t, err)

	claimed, err := st.claim(jobCtx(t), rows) // rows 3 and 5 are stale
	require.NoError(t, err)
	var ids []string
	for _, r := range claimed {
		assert.Equal(t, RowSending, r.State)
		assert.NotNil(t, r.ClaimedAt)
		ids = append(ids, r.ID)
	}
	assert.Len(t, claimed, 9)
	assert.NotContains(t, ids, rows[3].ID, "the row the other run claimed is its row")
	assert.Contains(t, ids, rows[5].ID, "the row that changed but stayed planned is claimed after all")
	counts := f.assertCounts(t, c.ID)
	assert.Equal(t, int64(10), counts.Sending)
	assert.Equal(t, int64(20), counts.Planned)
}

// Settling a batch whose rows need more writes than one transaction takes (120 sent
// rows, each with its message-id pointer), one of them already moved to sent by an
// event (an open before the mark): every row ends sent with its pointer, the counters
// exact.
func TestSettleBatchSplitsAndSurvivesAnEvent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 120)
	c, st := f.plannedOnly(t)
	rows, err := st.claim(jobCtx(t), f.planned(t, c.ID, 200))
	require.NoError(t, err)
	require.Len(t, rows, 120)
	require.NoError(t, f.svc.Record(eventsCtx(t), emaillinks.Ref{Bot: f.bot, Campaign: c.ID, Recipient: rows[70].ID}, Event{Type: EventOpen}))

	outs := make([]outcome, len(rows))
	for i, r := range rows {
		outs[i] = outcome{state: RowSent, receipt: email.Receipt{MessageID: "<m-" + r.ID + "@shop.example>"}}
	}
	require.NoError(t, st.settleBatch(jobCtx(t), rows, outs))
	counts := f.assertCounts(t, c.ID)
	assert.Equal(t, int64(120), counts.Sent)
	assert.Equal(t, int64(1), counts.Opened)
	for _, r := range f.rows(t, c.ID) {
		ref, err := f.svc.ByMessageID(eventsCtx(t), "m-"+r.ID+"@shop.example")
		require.NoError(t, err, r.ID)
		assert.Equal(t, r.ID, ref.Recipient)
		assert.Equal(t, "<m-"+r.ID+"@shop.example>", r.MessageID)
	}
}

// With several messages in flight, pacing still holds: message n leaves no sooner than
// n/Rate after the send began, and 250 messages at 20 a second take at least 12 s.
func TestSendIsPacedWithWorkers(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 250)
	require.Equal(t, DefaultWorkers, f.svc.cfg.Workers)
	var (
		mu sync.Mutex
		at []time.Time
	)
	f.mail.before = func(int, email.Message) error {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, f.clock.Now())
		return nil
	}
	f.schedule(t, f.create(t))
	began := f.clock.Now()
	f.drain(t)
	require.Len(t, at, 250)
	for n, tm := range at {
		assert.False(t, tm.Before(began.Add(time.Duration(n)*time.Second/20)), "message %d left at %s", n, tm.Sub(began))
	}
	assert.GreaterOrEqual(t, at[249].Sub(began), 12*time.Second)
}

// A temporary failure while other sends are in flight: those finish and are recorded
// sent, the failing row is planned again (the provider answered) or interrupted (it did
// not), the rows claimed but not yet handed out are planned again, nothing is left
// sending; the retries send everyone else exactly once.
func TestTemporaryFailureWithSendsInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		err   error
		state RowState
	}{
		{"refused for now", &email.SendError{Code: 451, Err: errors.New("try again later")}, RowPlanned},
		{"no answer", &email.SendError{Err: errors.New("read: connection reset by peer")}, RowInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 200, func(c *Config) { c.Rate = 100 }) // batches of 48
			const failing = "p00060@mail.example"
			var once sync.Once
			f.mail.before = func(_ int, m email.Message) error {
				runtime.Gosched() // let the other workers interleave
				var err error
				if m.To.Address == failing {
					once.Do(func() { err = tc.err })
				}
				return err
			}
			c := f.schedule(t, f.create(t))
			m, err, _ := f.deliver(t)
			f.later(t, m, err, "the provider failed for now")

			mid := f.assertCounts(t, c.ID)
			assert.Zero(t, mid.Sending, "every claimed row is settled")
			assert.Equal(t, int64(len(f.mail.all())), mid.Sent, "every message that went out is recorded sent")
			for _, r := range f.rows(t, c.ID) {
				if r.Address == failing {
					assert.Equal(t, tc.state, r.State)
				}
			}

			f.drain(t)
			done := f.get(t, c.ID)
			assert.Equal(t, Sent, done.State)
			f.assertEachOnce(t)
			if tc.state == RowInterrupted {
				assert.Equal(t, int64(199), done.Counts.Sent)
				assert.Equal(t, int64(1), done.Counts.Interrupted)
				assert.NotContains(t, f.sentTo(), failing, "an interrupted row is never sent again")
			} else {
				assert.Equal(t, int64(200), done.Counts.Sent)
				assert.Equal(t, 1, f.sentTo()[failing])
			}
			f.assertCounts(t, c.ID)
		})
	}
}

// A send that panics among others in flight is a crash for its row alone: the step still
// settles the others (sent, or planned again) before it panics on, the row is left
// sending and becomes interrupted, and no one gets two messages.
func TestPanicInOneSendOfManyInFlight(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100, func(c *Config) { c.Rate = 100 })
	const crashing = "p00030@mail.example"
	f.mail.before = func(_ int, m email.Message) error {
		runtime.Gosched()
		if m.To.Address == crashing {
			panic("crash while sending")
		}
		return nil
	}
	c := f.schedule(t, f.create(t))
	_, err, _ := f.deliver(t)
	require.ErrorContains(t, err, "crash while sending")
	mid := f.assertCounts(t, c.ID)
	assert.Equal(t, int64(1), mid.Sending, "only the row that crashed is left sending")
	assert.Equal(t, int64(len(f.mail.all())), mid.Sent)

	f.mail.mu.Lock()
	f.mail.before = nil
	f.mail.mu.Unlock()
	f.drain(t)
	done := f.get(t, c.ID)
	assert.Equal(t, Sent, done.State)
	assert.Equal(t, int64(99), done.Counts.Sent)
	assert.Equal(t, int64(1), done.Counts.Interrupted)
	assert.NotContains(t, f.sentTo(), crashing)
	f.assertEachOnce(t)
	f.assertCounts(t, c.ID)
}

// Concurrency never sends a row twice: every step is delivered twice at the same time,
// each copy with eight workers, and every 37th send is refused for now (the row goes
// back to planned and the step is retried). Run with -race.
func TestConcurrentSendsNeverSendTwice(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 600, func(c *Config) { c.Rate = 50 })
	f.mail.before = func(n int, _ email.Message) error {
		runtime.Gosched()
		if n%37 == 0 {
			return &email.SendError{Code: 421, Err: fmt.Errorf("throttled")}
		}
		return nil
	}
	c := f.schedule(t, f.create(t))
	for delivered := 0; ; delivered++ {
		require.Less(t, delivered, 2000)
		m, ok := f.q.Pop()
		if !ok {
			break
		}
		f.clock.Advance(m.Delay)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = queue.Call(jobCtx(t), f.jobs, m) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				require.Equal(t, retryAfter, queue.RetryDelay(err), "only the throttled sends fail: %v", err)
				require.NoError(t, f.q.Send(t.Context(), m))
				break
			}
		}
	}
	done := f.get(t, c.ID)
	assert.Equal(t, Sent, done.State)
	assert.Equal(t, int64(600), done.Counts.Sent)
	sent := f.sentTo()
	assert.Len(t, sent, 600)
	for addr, n := range sent {
		assert.Equal(t, 1, n, "%s got %d messages", addr, n)
	}
	f.assertCounts(t, c.ID)
}

// Workers is 1 to MaxWorkers; 0 is the default.
func TestConfigWorkers(t *testing.T) {
	t.Parallel()
	base := Config{Rate: 14, PublicURL: publicURL, StepDuration: time.Second, MaxAudience: 10}
	for _, n := range []int{1, DefaultWorkers, MaxWorkers} {
		c := base
		c.Workers = n
		assert.NoError(t, c.Validate(), n)
	}
	for _, n := range []int{-1, 0, MaxWorkers + 1} {
		c := base
		c.Workers = n
		assert.ErrorContains(t, c.Validate(), "workers", n)
	}
	c := base
	c.setDefaults()
	assert.Equal(t, DefaultWorkers, c.Workers)
}

// The plan runs beside the send: the first message leaves while the plan is still on the
// audience's second page (the test holds that page until then), and everyone still gets
// exactly one message.
func TestPlanRunsBesideTheSend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 450, func(c *Config) { c.Rate = 100 })
	firstSent := make(chan struct{})
	var once sync.Once
	f.mail.before = func(int, email.Message) error {
		once.Do(func() { close(firstSent) })
		return nil
	}
	c := f.schedule(t, f.create(t)) // its readiness check reads the audience too
	var overlapped bool
	f.aud.mu.Lock()
	second := f.aud.pages + 2
	f.aud.onPage = func(n int) error {
		if n == second {
			select {
			case <-firstSent:
				overlapped = true
			case <-time.After(time.Minute): // the send waited for the whole plan
			}
		}
		return nil
	}
	f.aud.mu.Unlock()
	f.drain(t)
	assert.True(t, overlapped, "a message left while the plan was reading its second page")
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	assert.Len(t, f.mail.all(), 450)
	f.assertEachOnce(t)
	assert.Equal(t, int64(450), f.assertCounts(t, c.ID).Sent)
}

// A plan that fails beside the send (the audience unreadable for a moment) fails the step
// once the sends in flight are settled; the retried step plans the rest, and no one gets
// two messages.
func TestPlanFailureBesideTheSend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 450, func(c *Config) { c.Rate = 100 })
	c := f.schedule(t, f.create(t)) // its readiness check reads the audience too
	f.aud.mu.Lock()
	third := f.aud.pages + 3
	f.aud.onPage = func(n int) error {
		if n == third {
			return errors.New("the subscribers are unreadable for a moment")
		}
		return nil
	}
	f.aud.mu.Unlock()
	_, err, _ := f.deliver(t)
	require.ErrorContains(t, err, "unreadable")
	counts := f.assertCounts(t, c.ID)
	assert.Equal(t, int64(200), counts.Recipients, "the two pages before the failure are planned")
	assert.Zero(t, counts.Sending, "the sends of the failed step are settled")
	f.drain(t)
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	assert.Len(t, f.mail.all(), 450)
	f.assertEachOnce(t)
	assert.Equal(t, int64(450), f.assertCounts(t, c.ID).Sent)
}

// The subscribers are read again a few at a time, never more than Workers at once and each
// once, rather than one by one, through one reader a step (which reads the field catalog
// once).
func TestSubscribersAreReadAgainAChunkAtATime(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 100, func(c *Config) { c.Rate = 100; c.Workers = 8 })
	c := f.schedule(t, f.create(t))
	f.drain(t)
	assert.Equal(t, int64(100), f.assertCounts(t, c.ID).Sent)
	f.aud.mu.Lock()
	reads, readers := slices.Clone(f.aud.reads), f.aud.readers
	f.aud.mu.Unlock()
	assert.Equal(t, 1, readers, "one reader for the step that sent them all")
	total := 0
	for _, n := range reads {
		assert.LessOrEqual(t, n, 8)
		total += n
	}
	assert.Equal(t, 100, total, "each subscriber is read once")
	assert.Less(t, len(reads), 30, "in chunks: %v", reads)
}
