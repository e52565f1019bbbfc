package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// mixedAudience makes some of the fixture's people unsendable: 10 without an address, 10
// without consent, 5 unsubscribed, and 5 later ones sharing an earlier one's address (in
// capitals). It returns how many can be sent to.
func (f *fixture) mixedAudience(t *testing.T) int {
	t.Helper()
	for i := range 10 {
		f.aud.people[i].Email = ""
		f.aud.people[10+i].Consent = false
		if i < 5 {
			f.supp.add(f.aud.people[20+i].Email, "unsubscribed")
			f.aud.people[len(f.aud.people)-100+i].Email = strings.ToUpper(f.aud.people[25+i].Email)
		}
	}
	return len(f.aud.people) - 30
}

// A thousand recipients, each sent exactly once although steps are delivered twice (one
// copy after the next step, one copy at the same time as itself), and although the
// campaign is paused in the middle of a step and resumed: the resumed run goes on with the
// rows left, never from the start.
func TestSendExactlyOnceThroughRedeliveryPauseAndResume(t *testing.T) {
	t.Parallel()
	// 50 messages a step: about 20 steps, a third of them delivered twice at once.
	f := newFixture(t, 1000, func(c *Config) { c.Rate = 10 })
	sendable := f.mixedAudience(t)
	c := f.schedule(t, f.create(t))
	assert.Equal(t, Scheduled, c.State)
	assert.Equal(t, 3, *c.ContentVersion, "the newest published version is frozen")

	const pauseAt = 300
	f.mail.after = func(n int, _ email.Message) error {
		if n == pauseAt {
			cur, err := f.svc.Get(t.Context(), f.bot, c.ID)
			if err == nil {
				_, err = f.svc.Pause(t.Context(), f.bot, c.ID, cur.Revision)
			}
			assert.NoError(t, err) // on the goroutine of a step: no require
		}
		return nil
	}
	delivered := 0
	for {
		m, ok := f.q.Pop()
		if !ok {
			break
		}
		delivered++
		switch delivered % 3 {
		case 0: // delivered again later, after the step that followed it
			require.NoError(t, queue.Call(jobCtx(t), f.jobs, m))
			require.NoError(t, f.q.Send(t.Context(), m))
		case 1: // delivered twice at the same time
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for i := range errs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = queue.Call(jobCtx(t), f.jobs, m)
				}()
			}
			wg.Wait()
			require.NoError(t, errs[0])
			require.NoError(t, errs[1])
		default:
			require.NoError(t, queue.Call(jobCtx(t), f.jobs, m))
		}
		require.Less(t, delivered, 500)
	}
	paused := f.get(t, c.ID)
	require.Equal(t, Paused, paused.State, "the step saw the pause and scheduled no next step")
	atPause := len(f.mail.all())
	assert.GreaterOrEqual(t, atPause, pauseAt)
	// A running step stops at its next batch (two copies of one step: two batches).
	assert.LessOrEqual(t, atPause, pauseAt+2*sendBatch)
	assert.Equal(t, int64(atPause), paused.Counts.Sent)
	assert.Equal(t, int64(sendable-atPause), paused.Counts.Planned)
	f.assertCounts(t, c.ID)

	// Paused means paused: a stray copy of a step sends nothing.
	f.clock.Advance(time.Hour)
	assert.Equal(t, atPause, len(f.mail.all()))

	resumed, err := f.svc.Resume(t.Context(), f.bot, c.ID, paused.Revision)
	require.NoError(t, err)
	assert.Equal(t, Sending, resumed.State)
	f.drain(t)

	done := f.get(t, c.ID)
	assert.Equal(t, Sent, done.State)
	require.NotNil(t, done.FinishedAt)
	all := f.mail.all()
	assert.Len(t, all, sendable, "one message per sendable recipient")
	f.assertEachOnce(t)
	counts := f.assertCounts(t, c.ID)
	assert.Equal(t, Counts{Recipients: 1000, Sent: int64(sendable), Skipped: 30,
		SkippedBy: map[string]int64{SkipNoEmail: 10, SkipNoConsent: 10, SkipUnsubscribed: 5, SkipDuplicate: 5, SkipBounced: 0,
			SkipComplained: 0, SkipDeleted: 0, SkipAddressChanged: 0, SkipLeftAudience: 0}}, counts)
	assert.LessOrEqual(t, f.supp.maxBatch, MaxSuppressionBatch)
	for _, m := range all {
		assert.Equal(t, f.domains.key, m.DKIM, "signed with the bot's domain key")
	}
}

// The pacing: a step sends Rate x StepDuration messages at most, one every 1/Rate seconds,
// and the send as a whole keeps the rate.
func TestSendIsPaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 250, sequential) // the mailer reads the clock: see TestSendIsPacedWithWorkers
	var at []time.Time
	f.mail.before = func(int, email.Message) error { at = append(at, f.clock.Now()); return nil }
	f.schedule(t, f.create(t))
	f.drain(t)
	require.Len(t, at, 250)
	// 20 a second: message n leaves no sooner than n/20 s after the first.
	for n, tm := range at {
		assert.False(t, tm.Before(at[0].Add(time.Duration(n)*time.Second/20)), "message %d left at %s", n, tm.Sub(at[0]))
	}
	assert.GreaterOrEqual(t, at[249].Sub(at[0]), 12*time.Second)
}

// A step plans as far as its time allows, not a fixed number of pages: at a rate that
// sends a large audience within one step, that step plans and sends all of it and the
// campaign is sent. (A step used to plan 20 pages of 100 and then wait out its time,
// which held every campaign to 2,000 messages a step whatever its rate.)
func TestOneStepPlansAndSendsWhatItsTimeAllows(t *testing.T) {
	t.Parallel()
	const people = 25*planPage + 7
	f := newFixture(t, people, func(c *Config) { c.Rate = MaxRate })
	c := f.schedule(t, f.create(t))
	_, err, ok := f.deliver(t)
	require.True(t, ok)
	require.NoError(t, err)
	assert.Len(t, f.mail.all(), people, "every recipient in the first step")
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	f.drain(t)
	assert.Len(t, f.mail.all(), people)
}

// A crash between the claim of a row and its mark leaves the row sending: it becomes
// interrupted once its claim is older than ClaimGrace, and is never sent again, whether
// the message had left or not. An event for it later proves it had.
func TestCrashAfterClaimLeavesTheRowInterrupted(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 20, sequential) // the mailer numbers its calls: see TestPanicInOneSendOfManyInFlight
	f.mail.before = func(n int, _ email.Message) error {
		if n == 5 {
			panic("crash before the message leaves")
		}
		return nil
	}
	f.mail.after = func(n int, _ email.Message) error {
		if n == 9 {
			panic("crash after the message left")
		}
		return nil
	}
	c := f.schedule(t, f.create(t))
	_, err, _ := f.deliver(t)
	require.ErrorContains(t, err, "crash before")
	_, err, _ = f.deliver(t) // the queue's retry: the same step again
	require.ErrorContains(t, err, "crash after")
	f.drain(t)

	done := f.get(t, c.ID)
	assert.Equal(t, Sent, done.State)
	assert.Equal(t, int64(2), done.Counts.Interrupted)
	assert.Equal(t, int64(18), done.Counts.Sent)
	assert.Len(t, f.mail.all(), 19, "the message that had left is not sent again, the other one never")
	f.assertEachOnce(t)
	var interrupted []row
	for _, r := range f.rows(t, c.ID) {
		if r.State == RowInterrupted {
			interrupted = append(interrupted, r)
		}
	}
	require.Len(t, interrupted, 2)
	f.assertCounts(t, c.ID)
	assert.GreaterOrEqual(t, f.clock.Now().Sub(t0), ClaimGrace, "rows wait out the grace before they count interrupted")

	// The one that went out is opened: it was sent after all.
	for _, r := range interrupted {
		if f.sentTo()[r.Address] == 1 {
			require.NoError(t, f.svc.Record(eventsCtx(t), emaillinks.Ref{Bot: f.bot, Campaign: c.ID, Recipient: r.ID}, Event{Type: EventOpen}))
		}
	}
	counts := f.assertCounts(t, c.ID)
	assert.Equal(t, int64(1), counts.Interrupted)
	assert.Equal(t, int64(19), counts.Sent)
	assert.Equal(t, int64(1), counts.Opened)
}

// Failures: a permanent refusal fails the row and the send goes on; a temporary one with
// the provider's answer puts the row back and stops the step, to run again later; one
// without an answer counts the row interrupted.
func TestSendFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 10, sequential) // the mailer numbers its calls: see TestTemporaryFailureWithSendsInFlight
	f.mail.before = func(n int, _ email.Message) error {
		switch n {
		case 2:
			return &email.SendError{Permanent: true, Code: 550, Err: fmt.Errorf("smtp RCPT TO: 550 5.1.1 no such user")}
		case 4:
			return &email.SendError{Code: 454, Err: fmt.Errorf("throttled")}
		case 6:
			return &email.SendError{Err: fmt.Errorf("read: connection reset by peer")}
		}
		return nil
	}
	c := f.schedule(t, f.create(t))
	m, err, _ := f.deliver(t)
	f.later(t, m, err, "throttled") // throttled: the same step again after a while
	m, err, _ = f.deliver(t)
	f.later(t, m, err, "without an answer")
	f.drain(t)

	done := f.get(t, c.ID)
	assert.Equal(t, Sent, done.State)
	assert.Equal(t, int64(1), done.Counts.Failed)
	assert.Equal(t, int64(1), done.Counts.Interrupted)
	assert.Equal(t, int64(8), done.Counts.Sent, "the throttled one went out on the retry")
	f.assertCounts(t, c.ID)
	failed, _, err := f.svc.Recipients(t.Context(), f.bot, c.ID, RowFailed, 10, "")
	require.NoError(t, err)
	require.Len(t, failed, 1)
	assert.Equal(t, 550, failed[0].Error.Code)
	assert.Contains(t, failed[0].Error.Message, "no such user")
}

// unavailableStore answers every query with store.ErrUnavailable while fail is set, as a
// throttled or locked store does.
type unavailableStore struct {
	store.Store
	fail atomic.Bool
}

func (s *unavailableStore) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if s.fail.Load() {
		return store.Page{}, fmt.Errorf("store busy: %w", store.ErrUnavailable)
	}
	return s.Store.Query(ctx, q)
}

// A store unavailable for now stops the step as a provider's outage does: the same step
// runs again later, the attempt never counts towards the dead-letter limit (which would
// leave the campaign sending with nothing running), and once the store is back everyone
// gets the message once.
func TestStoreUnavailableSendsLater(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	flaky := &unavailableStore{Store: f.st}
	f.seen = flaky
	f.build(t, f.clock.Now, func(_ context.Context, d time.Duration) error { f.clock.Advance(d); return nil })
	c := f.schedule(t, f.create(t))
	flaky.fail.Store(true)
	m, err, _ := f.deliver(t)
	f.later(t, m, err, "store busy")
	flaky.fail.Store(false)
	f.drain(t)
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	f.assertEachOnce(t)
	assert.Len(t, f.sentTo(), 30)
}

// A step that keeps failing for a reason that does not pass (here the audience answers
// with an error that is not the store's being unavailable: a bug) is retried by the queue;
// on its jobs.MaxStepFailures-th failure the campaign is paused with pause_reason send_failed
// and the job ends, instead of the step being dead-lettered with the campaign left
// sending. A resume then sends everyone exactly once.
func TestFailingStepPausesTheCampaign(t *testing.T) {
	t.Parallel()
	for name, fail := range map[string]func() error{
		"an error": func() error { return errors.New("audience: a bug") },
		"a panic":  func() error { panic("audience: a bug") },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, 30)
			c := f.schedule(t, f.create(t))
			var broken atomic.Bool
			broken.Store(true)
			f.aud.mu.Lock()
			f.aud.onPage = func(int) error {
				if broken.Load() {
					return fail()
				}
				return nil
			}
			f.aud.mu.Unlock()
			for i := 1; i < jobs.MaxStepFailures; i++ {
				_, err, ok := f.deliver(t)
				require.True(t, ok)
				require.ErrorContains(t, err, "a bug", "attempt %d fails as it did: the queue runs it again", i)
				assert.Equal(t, Sending, f.get(t, c.ID).State)
				r, err := f.svc.loadRun(t.Context(), f.bot, c.ID)
				require.NoError(t, err)
				require.NotNil(t, r.Failed)
				assert.Equal(t, i, r.Failed.Count)
			}
			_, err, ok := f.deliver(t)
			require.True(t, ok)
			require.NoError(t, err, "the last failure pauses the campaign and ends the job")
			paused := f.get(t, c.ID)
			assert.Equal(t, Paused, paused.State)
			assert.Equal(t, PauseSendFailed, paused.PauseReason)
			assert.Empty(t, f.q.Sent(), "nothing is left running")
			assert.Contains(t, f.logs.String(), "send_failed")
			assert.Contains(t, f.logs.String(), "a bug")

			broken.Store(false)
			_, err = f.svc.Resume(t.Context(), f.bot, c.ID, paused.Revision)
			require.NoError(t, err)
			f.drain(t)
			assert.Equal(t, Sent, f.get(t, c.ID).State)
			assert.Len(t, f.sentTo(), 30)
			f.assertEachOnce(t)
			f.assertCounts(t, c.ID)
		})
	}
}

// A step that fails fewer than jobs.MaxStepFailures times and then completes clears its count:
// failures of different steps never add up to a pause.
func TestAStepThatCompletesClearsItsFailures(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30)
	c := f.schedule(t, f.create(t))
	var fails atomic.Int32
	fails.Store(jobs.MaxStepFailures - 1)
	f.aud.mu.Lock()
	f.aud.onPage = func(int) error {
		if fails.Add(-1) >= 0 {
			return errors.New("audience: a bug")
		}
		return nil
	}
	f.aud.mu.Unlock()
	for range jobs.MaxStepFailures - 1 {
		_, err, _ := f.deliver(t)
		require.Error(t, err)
	}
	_, err, _ := f.deliver(t)
	require.NoError(t, err)
	r, err := f.svc.loadRun(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Nil(t, r.Failed, "the step completed: its failures are cleared")
	f.drain(t)
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	assert.Len(t, f.sentTo(), 30)
}

// Cancel in the middle of the send: the rows still planned become canceled; what was sent
// stays sent; the counts add up. (The plan runs beside the send: the cancel waits for the
// whole audience to be planned; TestCancelWhilePlanning cancels before.)
func TestCancelDuringSend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 300)
	c := f.schedule(t, f.create(t))
	f.mail.after = func(n int, _ email.Message) error {
		if n == 30 {
			assert.Eventually(t, func() bool { return f.get(t, c.ID).Counts.Recipients == 300 }, time.Minute, time.Millisecond)
			_, err := f.svc.Cancel(t.Context(), f.bot, c.ID, f.get(t, c.ID).Revision)
			require.NoError(t, err)
		}
		return nil
	}
	f.drain(t)
	done := f.get(t, c.ID)
	assert.Equal(t, Canceled, done.State)
	sent := len(f.mail.all())
	assert.GreaterOrEqual(t, sent, 30)
	assert.LessOrEqual(t, sent, 30+sendBatch)
	assert.Equal(t, int64(sent), done.Counts.Sent)
	assert.Equal(t, int64(300-sent), done.Counts.Canceled)
	assert.Zero(t, done.Counts.Planned)
	f.assertCounts(t, c.ID)
}

// Cancel while the plan beside the send is still on the audience: the plan writes no row
// once the cancel is saved, the rows planned and not sent are canceled, the rest of the
// audience never gets a row, and none is left planned.
func TestCancelWhilePlanning(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 450, func(c *Config) { c.Rate = 100 })
	c := f.schedule(t, f.create(t)) // its readiness check reads the audience too
	canceled := make(chan struct{})
	f.aud.mu.Lock()
	third := f.aud.pages + 3
	f.aud.onPage = func(n int) error {
		if n == third { // the plan's third page waits for the cancel
			select {
			case <-canceled:
			case <-time.After(time.Minute):
			}
		}
		return nil
	}
	f.aud.mu.Unlock()
	var once sync.Once
	f.mail.after = func(n int, _ email.Message) error {
		if n == 10 {
			once.Do(func() {
				_, err := f.svc.Cancel(t.Context(), f.bot, c.ID, f.get(t, c.ID).Revision)
				assert.NoError(t, err)
				close(canceled)
			})
		}
		return nil
	}
	f.drain(t)
	done := f.get(t, c.ID)
	assert.Equal(t, Canceled, done.State)
	sent := int64(len(f.mail.all()))
	assert.GreaterOrEqual(t, sent, int64(10))
	// The third page was read before the cancel and would be written after it: its rows
	// are not (the plan's transactions check the campaign's revision).
	assert.LessOrEqual(t, done.Counts.Recipients, int64(200), "no row of the third page")
	assert.Equal(t, done.Counts.Recipients-sent, done.Counts.Canceled)
	assert.Zero(t, done.Counts.Planned)
	assert.Zero(t, done.Counts.Sending)
	f.assertEachOnce(t)
	f.assertCounts(t, c.ID)
}

// A campaign scheduled for later sends nothing before its time, however early the queue
// delivers its job.
func TestScheduledForLater(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	var first time.Time
	f.mail.before = func(n int, _ email.Message) error {
		if n == 1 {
			first = f.clock.Now()
		}
		return nil
	}
	c := f.create(t)
	sendAt := t0.Add(2 * time.Hour)
	c, err := f.svc.Schedule(t.Context(), f.bot, c.ID, c.Revision, &sendAt)
	require.NoError(t, err)
	assert.Equal(t, sendAt, *c.SendAt)
	f.drain(t)
	assert.False(t, first.Before(sendAt), "first message at %s, due %s", first, sendAt)
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	assert.Len(t, f.mail.all(), 5)
}

// Subscribers changed after the plan are read again before their message: deleted,
// consent withdrawn, address changed or suppressed meanwhile, they get nothing.
func TestSendReadsSubscribersAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8, sequential) // changes people at the first send, before the second one's read
	c := f.schedule(t, f.create(t))
	// The first step plans and sends; change people between the plan and their send.
	f.mail.before = func(n int, _ email.Message) error {
		if n == 1 {
			f.aud.mu.Lock()
			f.aud.gone["sub_00004"] = true
			f.aud.mu.Unlock()
			f.aud.set("sub_00005", func(p *Person) { p.Consent = false })
			f.aud.set("sub_00006", func(p *Person) { p.Email = "new@mail.example" })
		}
		return nil
	}
	f.supp.add("p00007@mail.example", "complained")
	f.drain(t)
	got := f.get(t, c.ID)
	assert.Equal(t, int64(1), got.Counts.SkippedBy[SkipComplained], "suppressed between schedule and plan")
	// 4, 5, 6 were planned and may have been sent before the change (batch order is the
	// recipient id's); those not sent yet were skipped.
	skippedLate := got.Counts.SkippedBy[SkipDeleted] + got.Counts.SkippedBy[SkipNoConsent] + got.Counts.SkippedBy[SkipAddressChanged]
	assert.Equal(t, int64(7), got.Counts.Sent+skippedLate)
	assert.Positive(t, skippedLate)
	assert.NotContains(t, f.sentTo(), "new@mail.example")
	f.assertCounts(t, c.ID)
}

// A subscriber who lost every label of the audience after the plan is skipped at the send
// (left_audience): the audience is read again with the subscriber, as consent is. One who
// keeps any of the audience's labels is still sent to.
func TestSendSkipsWhoLeftTheAudience(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 8, sequential)
	for i := range 8 {
		f.aud.labels[fmt.Sprintf("sub_%05d", i)] = []string{"lbl_other", "lbl_vip"}
	}
	c := f.schedule(t, f.create(t, "lbl_vip", "lbl_gold"))
	f.mail.before = func(n int, _ email.Message) error {
		if n == 1 {
			f.aud.mu.Lock()
			for i := 2; i < 8; i++ {
				f.aud.labels[fmt.Sprintf("sub_%05d", i)] = []string{"lbl_other"}
			}
			f.aud.labels["sub_00001"] = []string{"lbl_gold"} // still in: another of the audience's labels
			f.aud.mu.Unlock()
		}
		return nil
	}
	f.drain(t)
	got := f.get(t, c.ID)
	left := got.Counts.SkippedBy[SkipLeftAudience]
	assert.Equal(t, int64(8), got.Counts.Sent+left)
	assert.Positive(t, left, "those not sent before the change are skipped")
	assert.LessOrEqual(t, left, int64(6))
	assert.Contains(t, f.sentTo(), "p00001@mail.example", "a label of the audience kept: sent")
	for _, r := range f.rows(t, c.ID) {
		if r.State == RowSkipped {
			assert.Equal(t, SkipLeftAudience, r.SkipReason)
			assert.NotContains(t, []string{"sub_00000", "sub_00001"}, r.Recipient)
		}
	}
	f.assertCounts(t, c.ID)
}

// The domain no longer verified pauses the campaign with its reason; fixed and resumed, it
// goes on.
func TestSendPausesWhenTheDomainIsNoLongerVerified(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	c := f.schedule(t, f.create(t))
	f.domains.mu.Lock()
	f.domains.verified["shop.example"] = false
	f.domains.mu.Unlock()
	f.drain(t)
	got := f.get(t, c.ID)
	assert.Equal(t, Paused, got.State)
	assert.Equal(t, "domain_not_verified", got.PauseReason)
	assert.Empty(t, f.mail.all())

	f.domains.mu.Lock()
	f.domains.verified["shop.example"] = true
	f.domains.mu.Unlock()
	_, err := f.svc.Resume(t.Context(), f.bot, c.ID, got.Revision)
	require.NoError(t, err)
	f.drain(t)
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	assert.Len(t, f.mail.all(), 5)
}

// A step delivered again after it finished does nothing: the progress moved on.
func TestRepeatedStepIsANoOp(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	c := f.schedule(t, f.create(t))
	m, err, _ := f.deliver(t)
	require.NoError(t, err)
	require.Len(t, f.mail.all(), 3)
	queued := len(f.q.Sent())
	require.NoError(t, queue.Call(jobCtx(t), f.jobs, m))
	assert.Len(t, f.mail.all(), 3)
	assert.Equal(t, queued, len(f.q.Sent()), "the copy scheduled no next step")
	f.drain(t)
	assert.Equal(t, Sent, f.get(t, c.ID).State)
	r, err := f.svc.loadRun(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, phaseSend, r.Phase)
	assert.Equal(t, int64(1), r.Epoch)
}

// The audience is planned at most MaxAudience subscribers deep.
func TestPlanStopsAtMaxAudience(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 30, func(c *Config) { c.MaxAudience = 40 })
	c := f.schedule(t, f.create(t))
	f.aud.mu.Lock()
	for i := 30; i < 60; i++ { // the audience grows after the check
		f.aud.people = append(f.aud.people, Person{SubscriberID: fmt.Sprintf("sub_%05d", i), Email: fmt.Sprintf("p%05d@mail.example", i), Consent: true})
	}
	f.aud.mu.Unlock()
	f.drain(t)
	rep, err := f.svc.Report(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.True(t, rep.Truncated)
	assert.Equal(t, int64(40), rep.Counts.Recipients)
	assert.Len(t, f.mail.all(), 40)
}

// The purge erases the campaigns, their rows and the message-id pointers.
func TestPurge(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 5)
	c := f.schedule(t, f.create(t))
	f.drain(t)
	m := f.mail.all()[0]
	ref, err := f.svc.ByMessageID(eventsCtx(t), "ses-"+strings.Trim(m.Msg.MessageID, "<>"))
	require.NoError(t, err)
	assert.Equal(t, c.ID, ref.Campaign)

	payload := []byte(`{"account_id":"acct_x","bot_id":"` + f.bot + `"}`)
	cursor, done := "", false
	for !done {
		cursor, done, err = PurgeStep(f.st)(jobCtx(t), payload, cursor)
		require.NoError(t, err)
	}
	for _, pk := range []string{campaignsPK(f.bot), dataPK(f.bot, c.ID)} {
		page, err := f.st.Query(sqlitetest.Unrecorded(t.Context()), store.Query{PK: pk})
		require.NoError(t, err)
		assert.Empty(t, page.Items, pk)
	}
	_, err = f.svc.ByMessageID(eventsCtx(t), "ses-"+strings.Trim(m.Msg.MessageID, "<>"))
	assert.Error(t, err, "the pointer is gone")
}

// Pause and resume while a step is sending: the old run's step finishes its batch and
// stops at the next (a newer run owns the campaign), the new run goes on; everyone gets
// one message.
func TestResumeWhileAStepRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 400)
	c := f.schedule(t, f.create(t))
	f.mail.after = func(n int, _ email.Message) error {
		if n == 130 {
			cur, err := f.svc.Get(t.Context(), f.bot, c.ID)
			if err == nil {
				cur, err = f.svc.Pause(t.Context(), f.bot, c.ID, cur.Revision)
			}
			if err == nil {
				_, err = f.svc.Resume(t.Context(), f.bot, c.ID, cur.Revision)
			}
			assert.NoError(t, err)
		}
		return nil
	}
	f.drain(t)
	done := f.get(t, c.ID)
	assert.Equal(t, Sent, done.State)
	assert.Len(t, f.mail.all(), 400)
	f.assertEachOnce(t)
	f.assertCounts(t, c.ID)
	r, err := f.svc.loadRun(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Epoch)
}
