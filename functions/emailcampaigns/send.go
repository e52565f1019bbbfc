package emailcampaigns

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// The send job (JobSend) of a campaign, one step at a time (SendStep):
//
// Runs. Schedule starts run 1 of the job (at send_at); resume and cancel start the next run
// (the campaign's epoch). The RUN item holds the progress of the newest run that made any:
// its epoch, the number of the next step, the phase and the audience cursor. A step of run
// e numbered n (its cursor) works only when the campaign's epoch is e and RUN is at step n of
// run e (or, for step 0, of an earlier run), and it moves RUN to step n+1 when done, under
// RUN's revision. So a step delivered twice (at-least-once queues) does its work at most
// once in the end: the copy that comes after the step finished sees RUN moved on and stops;
// two copies at once both work (the row claims keep each row to one of them) and one loses
// the write to RUN and stops. A step that crashed left RUN where it was, and its retry does
// the same work again: every write of a step is idempotent.
//
// Phase plan. Pages of the audience become recipient rows, one per subscriber, with an id
// derived from the subscriber id and written MustNotExist: a repeated page writes nothing
// twice. A row is planned, or skipped with its reason; a planned row claims its
// lower-cased address (ADDR#) in the same transaction, so an address is planned once (a
// second subscriber with it is skipped as duplicate). Counters move in the same
// transactions. RUN keeps the cursor of the next page, so a pause in the middle of the plan
// resumes there. The plan runs beside the send of the same step (sending): the rows of the
// pages already committed are sent while the next pages are written, and the send waits
// for the plan only when it has sent every row planned so far. Phase send begins once the
// audience is planned.
//
// Send. Planned rows, by batches of at most sendBatch rows and claimWindow's worth
// of slots. The rows whose address was suppressed meanwhile are skipped; the others are
// claimed together (planned → sending, each under its revision, in one transaction; when
// one of them changed since it was read, row by row, so a claim lost to another run is
// that run's row and costs the others nothing). Then up to Workers at a time, each
// claimed row's subscriber is read again (deleted, no address, address changed, consent
// withdrawn: skipped; Workers rows at once, when the first of them is handed out), its
// message rendered, built and sent. Once the batch's sends are over, its rows are settled
// together, in as few transactions as the store takes (row by row when one changed
// meanwhile, say an event for a message already out): sent (message id, the message-id
// pointer), skipped, failed, or planned again. The settling of a batch and the claim of
// the next one happen in the background while the batch between them is handed out. A
// row is claimed before its message leaves and never claimed twice, so no row is ever
// sent twice. A row left sending (a crash between claim and settle: every row of the
// batches claimed and not yet settled, at most two, whether its message left or not)
// becomes interrupted once its claim is older than ClaimGrace, and is never sent again. A
// send that panics is a crash for its row alone: the others are settled before the step
// panics on. The campaign is re-read before each batch is claimed, and again before a
// batch claimed in the background is handed out: paused, canceled or a newer run, and the
// step stops without a next step (the batch already out finishes; the rows of one claimed
// and not handed out go back to planned).
//
// Pacing. A step sends at most Rate × StepDuration messages, and hands message k to a
// worker no sooner than k/Rate seconds after the step began; when it sent any it returns
// only at the end of its StepDuration, so that the next step, which the runner starts at
// once, keeps the rate. With Workers messages in flight at once, the provider's latency
// bounds the rate at Workers messages per round trip rather than one.
//
// Failures. A permanent refusal fails the row (the campaign goes on). A temporary one
// stops the step with an error that runs it again after retryAfter (jobs.Later: however
// long the provider stays down, the job is never dead-lettered for it): no further row
// is handed out (the rows claimed and never handed out are planned again), the sends in
// flight finish and are settled, and when the provider answered (it refused, for now) or
// the connection never opened, the row is planned again; when the answer never came, the
// message may have gone out, and the row becomes interrupted. A From domain no longer
// verified, or content no longer renderable, pauses the campaign with its pause_reason
// (the batch stops as for a temporary failure, and its unsent rows are planned again).

// ClaimGrace is how old a claim must be before its row counts as interrupted: longer than
// a step can live (the jobs Lambda's timeout, 5 minutes), so the run that claimed it is
// certainly gone.
const ClaimGrace = 10 * time.Minute

const (
	// sendBatch is the most planned rows read, claimed and settled at once: 48, so that
	// settling a batch sent (each row and its message-id pointer, and the counters) takes
	// one transaction of store.MaxTransactWrites.
	sendBatch = 48
	// claimWindow bounds a batch by time as well: at most this long's worth of slots at
	// the configured rate (a second of messages at 14 a second: 14 rows). A claimed row
	// waits for its slot, and a crash leaves the batch's unsent rows interrupted.
	claimWindow = time.Second
	// planPage is the audience page the plan reads: one suppression call per page.
	planPage = MaxSuppressionBatch
	// planChunk is the most rows one plan transaction writes (two writes each, with room for
	// the counters).
	planChunk = 40
	// cancelChunk is the most rows one cancel transaction moves.
	cancelChunk = 90
	// sendTimeout bounds one message's send.
	sendTimeout = time.Minute
	// retryAfter is how long a step stopped by a temporary send failure (provider
	// throttling, or down) waits before it runs again (jobs.Later).
	retryAfter = 30 * time.Second
)

// The phases of a run.
const (
	phasePlan = "plan"
	phaseSend = "send"
)

// run is the send job's progress.
type run struct {
	Epoch int64 `json:"epoch"`
	Step  int64 `json:"step"`
	// Phase is plan ("" before the first step) or send.
	Phase string `json:"phase"`
	// Cursor is the audience cursor of the next page to plan.
	Cursor string `json:"cursor,omitempty"`
	// Seen counts the subscribers planned (or skipped) so far.
	Seen int `json:"seen"`
	// Truncated: the audience had more than MaxAudience subscribers; the rest were left out.
	Truncated bool `json:"truncated,omitempty"`
	// Failed counts the failed attempts of the step the run is at (stepFailed); a step
	// that completes clears it.
	Failed *jobs.Failures `json:"failed,omitempty"`
	rev    int64
}

func (s *Service) loadRun(ctx context.Context, bot, id string) (run, error) {
	it, err := s.d.Store.Get(ctx, runKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return run{}, nil
	}
	if err != nil {
		return run{}, err
	}
	r, err := store.Decode[run](it)
	r.rev = it.Revision
	return r, err
}

// Jobs are the family's job kinds with their steps.
func (s *Service) Jobs() map[string]jobs.Step { return map[string]jobs.Step{JobSend: s.SendStep} }

// SendStep runs one step of a campaign's send job (see the comment above ClaimGrace).
func (s *Service) SendStep(ctx context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
	var p jobPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", false, fmt.Errorf("emailcampaigns: send payload: %w", err)
	}
	if p.Bot == "" || p.Campaign == "" || p.Epoch < 1 {
		return "", false, errors.New("emailcampaigns: send payload needs bot_id, campaign_id and epoch")
	}
	n, err := jobs.StepNumber(cursor, 0)
	if err != nil {
		return "", false, fmt.Errorf("emailcampaigns: send: %w", err)
	}
	now := s.d.Now()
	st := &step{s: s, p: p, n: n, start: now, deadline: now.Add(s.cfg.StepDuration), rate: s.sendRate(ctx)}
	// A panic of the step (on its goroutine, or the plan's raised there) is an error that
	// counts as a failure (stepFailed); a panic of one send is its row's alone.
	next, done, err := jobs.Safely(func() (string, bool, error) { return st.run(ctx) })
	what := "the provider"
	// The store unavailable for now (throttled, locked, an outage): as for a provider's,
	// the step runs again later rather than count towards the dead-letter limit, which would
	// leave the campaign sending with nothing running. Everything the step did is settled
	// or stays claimed (interrupted at worst): nothing is sent twice.
	if e, later := jobs.LaterWhenUnavailable(err, retryAfter); later {
		err, what = e, "the store"
	}
	if d, ok := jobs.LaterDelay(err); ok {
		// It failed for now: the step runs again after d, however long the outage lasts
		// (never dead-lettered for it); pause or cancel stop it.
		s.d.Log.WarnContext(ctx, "email campaign: "+what+" failed for now; the send goes on later",
			"bot_id", p.Bot, "campaign_id", p.Campaign, "retry_in", d.String(), "error", err)
	} else if err != nil && s.stepFailed(ctx, p, n, err) {
		return "", true, nil // paused: a resume starts a new run
	}
	return next, done, err
}

// stepFailed counts a failed attempt of step n (the queue runs it again), and once the
// step has failed jobs.MaxStepFailures times pauses the campaign with pause_reason send_failed
// and reports true: the job ends there, and a resume starts a new run that continues
// where this one stopped. Whatever the step did before failing is settled or stays
// claimed (interrupted at worst), so nothing is sent twice. When the count cannot be kept
// (the store fails too, or the campaign changed meanwhile) it reports false and the step
// fails as before.
func (s *Service) stepFailed(ctx context.Context, p jobPayload, n int64, cause error) bool {
	r, err := s.loadRun(ctx, p.Bot, p.Campaign)
	if err != nil {
		return false
	}
	if r.Failed == nil {
		r.Failed = &jobs.Failures{}
	}
	count := r.Failed.Add(p.Epoch, n)
	b, err := store.Encode(r)
	if err != nil {
		return false
	}
	cond := store.RevisionOrAbsent(r.rev)
	if err := s.d.Store.Put(ctx, store.Item{Key: runKey(p.Bot, p.Campaign), Revision: r.rev + 1, Data: b}, cond); err != nil {
		return false
	}
	if count < jobs.MaxStepFailures {
		return false
	}
	c, err := s.load(ctx, p.Bot, p.Campaign)
	if err != nil || c.Epoch != p.Epoch {
		return false
	}
	paused, err := s.pauseSend(ctx, c, PauseSendFailed, fmt.Errorf("step %d failed %d times, the last: %w", n, count, cause))
	return err == nil && paused.State == Paused
}

// step is one step of a run.
type step struct {
	s        *Service
	p        jobPayload
	n        int64
	start    time.Time
	deadline time.Time
	c        record
	r        run
	// links are read once per step; doc and version are the content the run sends.
	links   []string
	doc     string
	version int
	// people reads the recipients again, made once per step (by dispatch).
	people People
	// audience is the campaign's audience labels, read once per step (fixed once it is
	// scheduled): the workers read it while the step reads the campaign again into c.
	audience []string
	// rate is the sending rate (Service.sendRate), messages a second.
	rate float64
	// signers are looked up once per step and From address; mu guards them.
	mu      sync.Mutex
	signers map[string]*email.Signer
	// sent counts the rows this step handed out to send (a slot each), for pacing;
	// examined counts the planned rows it read (prepare).
	sent     int
	examined int
	// workers holds a token for each send in flight (at most Config.Workers); stop is set
	// by a send that stops the step, so that no further row is handed out.
	workers chan struct{}
	stop    atomic.Bool
}

func (st *step) run(ctx context.Context) (string, bool, error) {
	s, bot, id := st.s, st.p.Bot, st.p.Campaign
	c, err := s.load(ctx, bot, id)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return "", true, nil // the campaign is gone (its bot was deleted)
	}
	if err != nil {
		return "", false, err
	}
	if c.Epoch != st.p.Epoch {
		return "", true, nil // a newer run has taken over
	}
	if st.r, err = s.loadRun(ctx, bot, id); err != nil {
		return "", false, err
	}
	if (st.r.Epoch == st.p.Epoch && st.r.Step != st.n) || (st.r.Epoch != st.p.Epoch && st.n != 0) {
		return "", true, nil // a copy of a step that has already run
	}
	st.c, st.audience = c, c.Audience.LabelIDs
	if c.State == Scheduled {
		if wait := c.SendAt.Sub(s.d.Now()); wait > time.Second {
			// Delivered before its time (a queue may hold a message at most so long): wait
			// again, in a job of its own.
			return "", true, st.rearm(ctx, wait)
		}
		now := stamp(s.d.Now())
		c.State, c.StartedAt = Sending, &now
		if err := s.save(ctx, &c, c.Revision, nil, 0); err != nil {
			if httpapi.KindOf(err) == httpapi.KindConflict {
				return st.cursor(st.n), false, nil // changed meanwhile (canceled): decide again
			}
			return "", false, err
		}
		st.c = c
	}
	var done bool
	switch st.c.State {
	case Sending:
		done, err = st.sending(ctx)
	case Canceled, Archived:
		done, err = st.cancel(ctx)
	default: // paused, sent, draft: nothing to do until a new run
		done = true
	}
	if err != nil {
		return "", false, err
	}
	if !done {
		st.pace(ctx)
	}
	if err := st.advance(ctx); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return "", true, nil // another copy of this step got there first
		}
		return "", false, err
	}
	return st.cursor(st.n + 1), done, nil
}

func (st *step) cursor(n int64) string { return strconv.FormatInt(n, 10) }

// rearm starts the run again after wait.
func (st *step) rearm(ctx context.Context, wait time.Duration) error {
	writes, deliver, err := st.s.startJob(st.c, wait)
	if err != nil {
		return err
	}
	if err := st.s.d.Store.Transact(ctx, writes); err != nil {
		return err
	}
	deliver(ctx)
	return nil
}

// advance moves RUN to the next step of this run: store.ErrConditionFailed when another
// copy of the step, or a newer run, moved it first. A step of an older run that moved it
// meanwhile (it had not yet seen the new epoch) does not count: this run goes on.
func (st *step) advance(ctx context.Context) error {
	if st.c.Epoch != st.p.Epoch {
		return store.ErrConditionFailed // a newer run owns RUN now
	}
	r := st.r
	r.Epoch, r.Step, r.Failed = st.p.Epoch, st.n+1, nil
	b, err := store.Encode(r)
	if err != nil {
		return err
	}
	for range 3 {
		cond := store.RevisionOrAbsent(r.rev)
		err := st.s.d.Store.Put(ctx, store.Item{Key: runKey(st.p.Bot, st.p.Campaign), Revision: r.rev + 1, Data: b}, cond)
		if !errors.Is(err, store.ErrConditionFailed) {
			return err
		}
		cur, err := st.s.loadRun(ctx, st.p.Bot, st.p.Campaign)
		if err != nil {
			return err
		}
		if cur.Epoch >= st.p.Epoch {
			return store.ErrConditionFailed
		}
		r.rev = cur.rev
	}
	return fmt.Errorf("emailcampaigns: progress of %s keeps changing: %w", st.p.Campaign, store.ErrUnavailable)
}

// pace ends a step that sent anything at the end of its duration, so that the rate holds
// across steps.
func (st *step) pace(ctx context.Context) {
	if st.sent > 0 {
		st.wait(ctx)
	}
}

// wait sleeps until the end of the step's duration.
func (st *step) wait(ctx context.Context) {
	if d := st.deadline.Sub(st.s.d.Now()); d > 0 {
		_ = st.s.d.Sleep(ctx, d)
	}
}

// live re-reads the campaign into st.c: false when this run must stop (paused, canceled, a
// newer run).
func (st *step) live(ctx context.Context) (bool, error) {
	c, live, err := st.check(ctx)
	if err != nil {
		return false, err
	}
	st.c = c
	return live, nil
}

// check re-reads the campaign: live is false when this run must stop.
func (st *step) check(ctx context.Context) (c record, live bool, err error) {
	c, err = st.s.load(ctx, st.p.Bot, st.p.Campaign)
	if err != nil {
		return record{}, false, err
	}
	return c, c.Epoch == st.p.Epoch && c.State == Sending, nil
}

// sending runs the plan and the send until the step's time is up, and finishes the
// campaign once the audience is planned and every row settled. done means no next step.
//
// While the audience is being planned, the plan runs beside the send: the send sends the
// rows of the pages already committed while the next pages are written, instead of
// waiting for the whole audience (the plan's synced commits then overlap sends). Nothing
// changes for a row: planned once (MustNotExist), claimed before it leaves, settled after.
func (st *step) sending(ctx context.Context) (bool, error) {
	if st.r.Phase == phaseSend {
		live, err := st.send(ctx, nil)
		if err != nil || !live {
			return !live, err
		}
		return st.finish(ctx)
	}
	pl := newPlanner()
	labels := st.c.Audience.LabelIDs
	var panicked any
	go func() {
		defer close(pl.done)
		defer func() {
			// A panic of the plan is the step's, raised on the step's goroutine below.
			if p := recover(); p != nil {
				panicked, pl.err = fmt.Sprintf("%v [planning]\n%s", p, debug.Stack()), errors.New("the plan panicked")
			}
		}()
		pl.live, pl.err = st.plan(ctx, labels, pl)
	}()
	live, err := st.send(ctx, pl)
	pl.stop.Store(true)
	<-pl.done
	if panicked != nil {
		panic(panicked)
	}
	if pl.c.Revision > st.c.Revision {
		st.c = pl.c // the plan saw a newer campaign (paused, canceled, a newer run)
	}
	switch {
	case err != nil:
		return false, err
	case pl.err != nil:
		return false, pl.err
	case !live || !pl.live:
		return true, nil
	case st.r.Phase != phaseSend:
		return false, nil // more pages next step
	}
	return st.finish(ctx)
}

// send sends planned rows, a batch at a time, until the step's budget or time is up or
// none is left (with a plan beside it, pl: none is left once the plan has stopped, and a
// plan that failed stops the send). It reports whether the run may go on.
//
// The batches overlap. While a batch is handed out to the workers, the batch before it
// (its last sends finishing) is settled and then the next one is read and claimed, in the
// background; so the workers never wait for the store's synced commits between batches,
// and at most two batches are claimed and not yet settled at any time (the next one is
// claimed only once the one before the current one is settled). The campaign is read again
// right before each batch is claimed and, for a batch claimed in the background, again
// right before its first row is handed out: a pause or cancel meanwhile puts its rows back
// to planned, none of them sent.
func (st *step) send(ctx context.Context, pl *planner) (bool, error) {
	s := st.s
	budget := max(1, int(st.rate*s.cfg.StepDuration.Seconds()))
	// A batch is claimed at once: at most claimWindow's worth of slots, so that its rows
	// wait little for their slots and a crash leaves few of them interrupted.
	window := max(1, int(st.rate*claimWindow.Seconds()))
	if st.links == nil {
		var err error
		if st.links, err = s.linkTable(ctx, st.p.Bot, st.p.Campaign); err != nil {
			return false, err
		}
	}
	// The workers read what they need of the campaign here, not in st.c, which live()
	// replaces meanwhile; a run sends one version of one document.
	st.doc, st.version = st.c.ContentID, *st.c.ContentVersion
	st.workers = make(chan struct{}, s.cfg.Workers)
	// out holds the batches claimed and not yet settled, oldest first: at most two.
	var out []*batch
	// end ends the send: the batches out are landed first (the rows of one never handed
	// out go back to planned), and a send of theirs that stopped the step decides.
	end := func(live bool, err error) (bool, error) {
		if e := st.land(ctx, out...); e != nil {
			return false, e
		}
		if ok, e := st.verdict(ctx, out...); e != nil || !ok {
			return ok, e
		}
		return live, err
	}
	planFailed := func() bool { return pl != nil && pl.failed() }
	more := func(limit int) bool {
		return limit > 0 && st.examined < 4*budget+sendBatch && s.d.Now().Before(st.deadline) && !st.stop.Load() && !planFailed()
	}
	var cur *batch // the batch to hand out next
send:
	for {
		if cur == nil {
			limit := min(sendBatch, window, budget-st.sent)
			if !more(limit) {
				break
			}
			p := st.prepare(ctx, pl, limit)
			if p.read {
				st.c = p.c
			}
			if p.b != nil {
				out = append(out, p.b) // landed by end, whatever comes next
			}
			switch {
			case p.err != nil || !p.live:
				return end(false, p.err)
			case !p.busy.IsZero():
				st.await(ctx, p.busy) // for room in the deployment's schedule
				continue
			case p.b == nil && p.planned:
				break send // none left
			case p.b == nil:
				pl.wait(ctx) // for the plan's next page
				st.rebase()
				continue
			}
			cur = p.b
		} else if !more(1) {
			break // the batch claimed ahead goes back to planned
		}
		// In the background: settle the batch before (once its last sends are over), then
		// claim the next one, while this one is handed out.
		var prev *batch
		if len(out) == 2 {
			prev = out[0]
		}
		limit := min(sendBatch, window, budget-st.sent-len(cur.rows))
		ahead := more(limit)
		bg := make(chan background, 1)
		go func() {
			var r background
			defer func() {
				if p := recover(); p != nil {
					r.panicked = fmt.Sprintf("%v [settling and claiming in the background]\n%s", p, debug.Stack())
				}
				bg <- r
			}()
			if prev != nil {
				if r.landErr = st.land(ctx, prev); r.landErr != nil || prev.stopped() {
					return
				}
			}
			if ahead && !st.stop.Load() {
				r.p, r.prepared = st.prepare(ctx, pl, limit), true
			}
		}()
		slotErr := st.dispatch(ctx, cur)
		r := <-bg
		if r.panicked != nil {
			panic(r.panicked)
		}
		if r.p.b != nil {
			out = append(out, r.p.b)
		}
		if r.p.read {
			st.c = r.p.c
		}
		if r.landErr != nil {
			return end(false, r.landErr)
		}
		if prev != nil {
			if prev.stopped() {
				return end(true, nil)
			}
			out = out[1:]
		}
		if slotErr != nil {
			return end(false, slotErr)
		}
		cur = nil
		if st.stop.Load() || !r.prepared {
			continue // the loop's conditions decide
		}
		switch p := r.p; {
		case p.err != nil || !p.live:
			return end(false, p.err)
		case !p.busy.IsZero():
			st.await(ctx, p.busy)
			continue
		case p.b == nil && p.planned:
			break send
		case p.b == nil:
			pl.wait(ctx)
			st.rebase()
			continue
		}
		// Claimed while the batch before was handed out: read the campaign again right
		// before any of it leaves.
		if live, err := st.live(ctx); err != nil || !live {
			return end(false, err)
		}
		cur = r.p.b
	}
	return end(true, nil)
}

// background is what the background work beside a batch's hand-out did: settled the batch
// before (landErr), prepared the next one (when prepared), or panicked.
type background struct {
	landErr  error
	p        prepared
	prepared bool
	panicked any
}

// prepared is what prepare found.
type prepared struct {
	// c is the campaign as read right before the claim (when read); live is false when
	// the run must stop.
	c          record
	read, live bool
	// b is the claimed batch, nil when no row was planned; planned then says that none is
	// left (a plan beside the send had stopped before the query).
	b       *batch
	planned bool
	// busy, when set, is when the deployment's next free slot begins (pace.go): after the
	// step's end, so nothing was claimed.
	busy time.Time
	err  error
}

// prepare reads the campaign and, when the run may go on, up to limit planned rows: it
// skips those suppressed meanwhile and claims the others (a batch may end up empty: every
// row skipped or claimed by another run). It touches neither st.c nor the pacing, so that
// it can run beside a batch's hand-out.
func (st *step) prepare(ctx context.Context, pl *planner, limit int) prepared {
	s := st.s
	c, live, err := st.check(ctx)
	if err != nil || !live {
		return prepared{c: c, read: err == nil, err: err}
	}
	p := prepared{c: c, read: true, live: true}
	// No more rows than the deployment's schedule has slots for before the step ends: a
	// slot reserved and not used is lost to every campaign.
	sched, schedRev, err := s.schedule(ctx)
	if err != nil {
		p.err = err
		return p
	}
	from := sched.from(s.d.Now())
	if fit := int(st.deadline.Sub(from).Seconds() * st.rate); fit < limit {
		if fit < 1 {
			p.busy = from
			return p
		}
		limit = fit
	}
	// Whether the plan had stopped before the query: then the query sees all it wrote.
	p.planned = pl == nil || pl.ended()
	page, err := s.d.Store.Query(ctx, store.Query{Index: store.GSI1, PK: rowStatePK(st.p.Bot, st.p.Campaign, RowPlanned), Limit: limit})
	if err != nil || len(page.Items) == 0 {
		p.err = err
		return p
	}
	st.examined += len(page.Items)
	rows := make([]row, len(page.Items))
	addrs := make([]string, 0, len(rows))
	for i, it := range page.Items {
		if rows[i], p.err = decodeRow(it); p.err != nil {
			return p
		}
		addrs = append(addrs, strings.ToLower(rows[i].Address))
	}
	suppressed, err := s.suppressed(ctx, st.p.Bot, addrs)
	if err != nil {
		p.err = err
		return p
	}
	if rows, p.err = st.skipSuppressed(ctx, rows, suppressed); p.err != nil {
		return p
	}
	if rows, p.err = st.claim(ctx, rows); p.err != nil {
		return p
	}
	p.b = newBatch(rows)
	if len(rows) > 0 {
		// The batch's slots in the deployment's schedule; a failure lands it unsent.
		p.b.notBefore, p.err = s.reserve(ctx, len(rows), sched, schedRev)
	}
	return p
}

// skipSuppressed moves the rows whose address was suppressed meanwhile to skipped (a row
// another run moved first is left) and returns the others.
func (st *step) skipSuppressed(ctx context.Context, rows []row, suppressed map[string]string) ([]row, error) {
	bot, id := st.p.Bot, st.p.Campaign
	var skip, keep []row
	for _, r := range rows {
		if _, ok := suppressed[strings.ToLower(r.Address)]; ok {
			skip = append(skip, r)
		} else {
			keep = append(keep, r)
		}
	}
	if len(skip) == 0 {
		return keep, nil
	}
	err := st.s.mutateRows(ctx, bot, id, skip, func(_ int, n *row, d deltas) ([]store.Write, error) {
		if n.State != RowPlanned {
			return nil, errNoChange
		}
		reason := suppressionReason(suppressed[strings.ToLower(n.Address)])
		n.State, n.SkipReason = RowSkipped, reason
		d.add(bot, id, "skip#"+reason, 1)
		return nil, nil
	})
	return keep, err
}

// claim moves planned rows to sending, in one transaction when none of them changed since
// it was read, and returns those this run claimed: a row another run moved first is left
// out, and does not cost the others their claim (mutateRows).
func (st *step) claim(ctx context.Context, rows []row) ([]row, error) {
	now := stamp(st.s.d.Now())
	claimed := make([]bool, len(rows))
	err := st.s.mutateRows(ctx, st.p.Bot, st.p.Campaign, rows, func(i int, n *row, _ deltas) ([]store.Write, error) {
		claimed[i] = false // the last attempt decides
		if n.State != RowPlanned {
			return nil, errNoChange
		}
		n.State, n.ClaimedAt = RowSending, &now
		claimed[i] = true
		return nil, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]row, 0, len(rows))
	for i, r := range rows {
		if claimed[i] {
			out = append(out, r)
		}
	}
	return out, nil
}

// outcome is how the send of one claimed row ended.
type outcome struct {
	// state is where the row goes from sending: sent, skipped, failed, planned (nothing
	// went out) or interrupted (nothing known); "" leaves it sending (a panic: as a crash).
	state   RowState
	reason  string        // skipped: why
	receipt email.Receipt // sent
	failure *SendFailure  // failed
	// err stops the step with this error, or, with pause, pauses the campaign for that
	// reason.
	err   error
	pause string
	// panicked is what the send panicked with: the step panics with it once the other
	// rows out are settled.
	panicked any
}

func (o outcome) stops() bool { return o.err != nil || o.pause != "" || o.panicked != nil }

// batch is a claimed batch of rows on its way out, with the outcome of each row's send
// (planned again until the row is handed out).
type batch struct {
	rows   []row
	outs   []outcome
	wg     sync.WaitGroup // the sends in flight
	landed bool           // settled
	// notBefore is when the batch's slots in the deployment's schedule begin (pace.go).
	notBefore time.Time
}

// newBatch is a batch of claimed rows, none handed out yet: each goes back to planned
// unless it is.
func newBatch(rows []row) *batch {
	b := &batch{rows: rows, outs: make([]outcome, len(rows))}
	for i := range b.outs {
		b.outs[i].state = RowPlanned
	}
	return b
}

// stopped reports whether a send of the landed batch stopped the step.
func (b *batch) stopped() bool {
	return slices.ContainsFunc(b.outs, outcome.stops)
}

// dispatch hands the batch's rows to workers, each no sooner than its slot and only when
// one of the step's Workers is free, and returns once every row is handed out, or when a
// send stopped the step (stop), the step's time is up or the wait for a slot ended (its
// error). The rows not handed out stay planned in b.outs.
func (st *step) dispatch(ctx context.Context, b *batch) error {
	st.align(b.notBefore)
	// The subscribers are read again a chunk of Workers rows at a time, once the first of
	// them has its worker and slot: one read (and one field catalog) for a chunk, and none
	// of them read more than Workers messages before its own.
	var (
		people  map[string]Person
		readErr error
		readTo  int
	)
	for i := range b.rows {
		if st.stop.Load() || !st.s.d.Now().Before(st.deadline) {
			return nil
		}
		st.workers <- struct{}{} // a worker first, then the slot: a message leaves at its slot
		if st.stop.Load() {
			<-st.workers
			return nil
		}
		if err := st.slot(ctx); err != nil {
			<-st.workers
			return err
		}
		if i >= readTo {
			readTo = min(len(b.rows), i+cap(st.workers))
			ids := make([]string, 0, readTo-i)
			for _, r := range b.rows[i:readTo] {
				ids = append(ids, r.SubscriberID)
			}
			if st.people == nil {
				st.people, readErr = st.s.d.Audience.People(ctx, st.p.Bot)
			}
			if st.people != nil {
				people, readErr = st.people.Get(ctx, ids)
			}
		}
		p, found := people[b.rows[i].SubscriberID]
		pErr := readErr
		st.sent++
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { <-st.workers }()
			defer func() {
				if p := recover(); p != nil {
					b.outs[i] = outcome{panicked: fmt.Sprintf("%v [sending to recipient %s]\n%s", p, b.rows[i].ID, debug.Stack())}
				}
				if b.outs[i].stops() {
					st.stop.Store(true)
				}
			}()
			b.outs[i] = st.sendOne(ctx, &b.rows[i], p, found, pErr)
		}()
	}
	return nil
}

// land waits for the sends of each batch and settles its rows (settleBatch), once.
func (st *step) land(ctx context.Context, bs ...*batch) error {
	var errs []error
	for _, b := range bs {
		if !b.landed {
			b.wg.Wait()
			b.landed = true
			errs = append(errs, st.settleBatch(ctx, b.rows, b.outs))
		}
	}
	return errors.Join(errs...)
}

// verdict says whether the run may go on after the landed batches' sends: a send that
// stopped the step decides, a panic first, then in batch and row order.
func (st *step) verdict(ctx context.Context, bs ...*batch) (bool, error) {
	for _, b := range bs {
		for _, o := range b.outs {
			if o.panicked != nil {
				panic(o.panicked)
			}
		}
	}
	for _, b := range bs {
		for _, o := range b.outs {
			switch {
			case o.pause != "":
				return false, st.pause(ctx, o.pause, o.err)
			case o.err != nil:
				return false, o.err
			}
		}
	}
	return true, nil
}

// rebase moves the origin of the step's slots so that the next one is no sooner than now:
// the time spent waiting for the plan banks no slots, which would otherwise go out at once.
func (st *step) rebase() { st.align(st.s.d.Now()) }

// align moves the origin of the step's slots so that the next one is no sooner than at (the
// first slot the deployment's schedule gave a batch, or now).
func (st *step) align(at time.Time) {
	next := st.start.Add(time.Duration(float64(st.sent) * float64(time.Second) / st.rate))
	if late := at.Sub(next); late > 0 {
		st.start = st.start.Add(late)
	}
}

// await waits for room in the deployment's schedule, whose next free slot begins at busy,
// after the step's end: until a step's length before busy, when a step beginning then
// could use it, else (busy is near) until the step's end, for the next step.
func (st *step) await(ctx context.Context, busy time.Time) {
	until := busy.Add(-st.s.cfg.StepDuration)
	if !until.After(st.s.d.Now()) || until.After(st.deadline) {
		until = st.deadline
	}
	if d := until.Sub(st.s.d.Now()); d > 0 {
		_ = st.s.d.Sleep(ctx, d)
	}
	st.rebase()
}

// slot waits for the slot of the step's next message: one every 1/Rate seconds from the
// step's start.
func (st *step) slot(ctx context.Context) error {
	at := st.start.Add(time.Duration(float64(st.sent) * float64(time.Second) / st.rate))
	if wait := at.Sub(st.s.d.Now()); wait > 0 {
		return st.s.d.Sleep(ctx, wait)
	}
	return nil
}

// sendOne sends a claimed row's message to its subscriber p as just read again (found:
// not gone; readErr: the read failed), rendered for p.
func (st *step) sendOne(ctx context.Context, r *row, p Person, found bool, readErr error) outcome {
	s, bot, id := st.s, st.p.Bot, st.p.Campaign
	switch {
	case readErr != nil:
		return outcome{state: RowPlanned, err: readErr}
	case !found:
		return outcome{state: RowSkipped, reason: SkipDeleted}
	}
	a, lower := address(p)
	switch {
	case a == "":
		return outcome{state: RowSkipped, reason: SkipNoEmail}
	case lower != strings.ToLower(r.Address):
		return outcome{state: RowSkipped, reason: SkipAddressChanged}
	case !p.Consent:
		return outcome{state: RowSkipped, reason: SkipNoConsent}
	case !st.inAudience(p):
		return outcome{state: RowSkipped, reason: SkipLeftAudience}
	}
	ref := emaillinks.Ref{Bot: bot, Campaign: id, Recipient: r.ID}
	p.UnsubscribeURL = s.d.Links.UnsubscribeURL(s.cfg.PublicURL, ref)
	out, err := s.d.Content.Render(ctx, bot, st.doc, st.version, p)
	if clientError(err) {
		return outcome{state: RowPlanned, pause: PauseContentUnavailable, err: err}
	}
	if err != nil {
		return outcome{state: RowPlanned, err: err}
	}
	signer, err := st.signer(ctx, out.From.Address)
	if errors.Is(err, ErrNotVerified) || clientError(err) {
		return outcome{state: RowPlanned, pause: PauseDomainNotVerified, err: err}
	}
	if err != nil {
		return outcome{state: RowPlanned, err: err}
	}
	msg := s.message(ref, mail.Address{Name: p.Name, Address: r.Address}, out, st.links)
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	rc, err := s.d.Mail.Send(sendCtx, msg, signer)
	cancel()
	switch {
	case err == nil:
		return outcome{state: RowSent, receipt: rc}
	case email.IsPermanent(err):
		return outcome{state: RowFailed, failure: failure(err)}
	case notSent(err):
		return outcome{state: RowPlanned, err: jobs.Later(fmt.Errorf("emailcampaigns: send to recipient %s of %s: %w", r.ID, id, err), retryAfter)}
	default:
		return outcome{state: RowInterrupted, err: jobs.Later(fmt.Errorf("emailcampaigns: send to recipient %s of %s ended without an answer; it is counted interrupted: %w", r.ID, id, err), retryAfter)}
	}
}

// inAudience reports whether p, read again at the send, is still in the campaign's
// audience: everyone when it names no label, else the subscribers having any of its labels.
func (st *step) inAudience(p Person) bool {
	labels := st.audience
	return len(labels) == 0 || slices.ContainsFunc(p.Labels, func(l string) bool { return slices.Contains(labels, l) })
}

// settleBatch moves the claimed rows where their outcomes say, in as few transactions as
// the store takes (mutateRows): sent with the message-id pointer, skipped, failed, planned
// again or interrupted. A row no longer sending is left as it is (but a message that
// went out is recorded sent whatever happened to its row: markSent).
func (st *step) settleBatch(ctx context.Context, rows []row, outs []outcome) error {
	bot, id := st.p.Bot, st.p.Campaign
	now := stamp(st.s.d.Now())
	err := st.s.mutateRows(ctx, bot, id, rows, func(i int, n *row, d deltas) ([]store.Write, error) {
		o := outs[i]
		switch {
		case o.state == "":
			return nil, errNoChange
		case o.state == RowSent:
			return st.markSent(n, o.receipt, now)
		case n.State != RowSending:
			return nil, errNoChange
		}
		n.State, n.Error, n.ClaimedAt = o.state, o.failure, nil
		if o.state == RowSkipped {
			n.SkipReason = o.reason
			d.add(bot, id, "skip#"+o.reason, 1)
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	var sent []eventlog.Event
	for i, o := range outs {
		if o.state == RowSent {
			sent = append(sent, st.s.recipientEvent(bot, id, rows[i].Recipient, eventlog.EmailSent, 0, now, nil))
		}
	}
	eventlog.EmitAll(ctx, st.s.d.Events, st.s.d.Log, sent)
	return nil
}

// notSent reports whether a temporary failure certainly sent nothing: the provider
// answered (and refused, for now), the sender was misconfigured, or the connection never
// opened. Anything else (a timeout, a connection lost) may have sent the message.
func notSent(err error) bool {
	var se *email.SendError
	if errors.As(err, &se) && se.Code != 0 {
		return true
	}
	var op *net.OpError
	return errors.Is(err, email.ErrConfig) || (errors.As(err, &op) && op.Op == "dial")
}

// failure is a permanent refusal as the row keeps it: the reply code and a short message.
func failure(err error) *SendFailure {
	f := &SendFailure{Message: err.Error()}
	var se *email.SendError
	if errors.As(err, &se) {
		f.Code = se.Code
	}
	if r := []rune(f.Message); len(r) > 300 {
		f.Message = string(r[:300])
	}
	return f
}

// signer returns the DKIM signer of a From address, looked up once per step (the workers
// share it).
func (st *step) signer(ctx context.Context, from string) (*email.Signer, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if k, ok := st.signers[from]; ok {
		return k, nil
	}
	k, err := st.s.d.Domains.Signer(ctx, st.p.Bot, from)
	if err != nil {
		return nil, err
	}
	if st.signers == nil {
		st.signers = map[string]*email.Signer{}
	}
	st.signers[from] = k
	return k, nil
}

// pause pauses the campaign for reason (the send cannot go on until someone fixes it).
func (st *step) pause(ctx context.Context, reason string, cause error) error {
	c, err := st.s.pauseSend(ctx, st.c, reason, cause)
	if err == nil {
		st.c = c
	}
	return err
}

// The pause reasons of a campaign the send paused by itself.
const (
	PauseDomainNotVerified  = "domain_not_verified"
	PauseContentUnavailable = "content_unavailable"
	PauseSendFailed         = "send_failed"
)

// pauseSend pauses campaign c, read as sending, for reason and returns it as saved. A
// campaign not sending, or changed since c was read, is returned as it was, unchanged
// (whoever changed it decides; the send reads it again).
func (s *Service) pauseSend(ctx context.Context, c record, reason string, cause error) (record, error) {
	if c.State != Sending {
		return c, nil
	}
	next := c
	now := stamp(s.d.Now())
	next.State, next.PausedAt, next.PauseReason = Paused, &now, reason
	err := s.save(ctx, &next, c.Revision, nil, 0)
	if httpapi.KindOf(err) == httpapi.KindConflict {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	s.d.Log.WarnContext(ctx, "email campaign paused", "bot_id", c.bot, "campaign_id", c.ID, "reason", reason, "error", cause)
	return next, nil
}

// markSent is the change that records a sent message on its row: sent, with its message
// id, and the pointer from the message id to the row. A row another run meanwhile counted
// interrupted is sent after all (the message did go out); one an event already moved to
// sent gets its message id.
func (st *step) markSent(n *row, rc email.Receipt, now time.Time) ([]store.Write, error) {
	bot, id := st.p.Bot, st.p.Campaign
	switch n.State {
	case RowSending, RowInterrupted:
		n.State, n.SentAt, n.ClaimedAt = RowSent, &now, nil
	case RowSent:
		if n.MessageID != "" {
			return nil, errNoChange
		}
	default:
		return nil, errNoChange
	}
	n.MessageID = rc.MessageID
	if n.MessageID == "" {
		return nil, nil
	}
	b, err := store.Encode(pointer{Bot: bot, Campaign: id, Recipient: n.ID})
	if err != nil {
		return nil, err
	}
	return []store.Write{store.PutOp(store.Item{Key: pointerKey(n.MessageID), Revision: 1, Data: b}, store.Always)}, nil
}

// settleRow moves a row this run claimed (sending) to state: failed (with f), planned
// again or interrupted. A row no longer sending is left as it is.
func (st *step) settleRow(ctx context.Context, r *row, state RowState, f *SendFailure) error {
	_, err := mutateRow(ctx, st.s.d.Store, st.p.Bot, st.p.Campaign, r.ID, r, func(n *row, _ deltas) ([]store.Write, error) {
		if n.State != RowSending {
			return nil, errNoChange
		}
		n.State, n.Error, n.ClaimedAt = state, f, nil
		return nil, nil
	})
	return err
}

// pointer is the item that leads from a message id to its recipient row.
type pointer struct {
	Bot       string `json:"bot_id"`
	Campaign  string `json:"campaign_id"`
	Recipient string `json:"recipient_id"`
}

// settle counts the rows left sending whose claim is older than ClaimGrace interrupted;
// true once no row is sending.
func (st *step) settle(ctx context.Context) (bool, error) {
	s, bot, id := st.s, st.p.Bot, st.p.Campaign
	n, err := s.counter(ctx, bot, id, "state#"+string(RowSending))
	if err != nil || n == 0 {
		return n == 0, err
	}
	page, err := s.d.Store.Query(ctx, store.Query{Index: store.GSI1, PK: rowStatePK(bot, id, RowSending), Limit: store.MaxTransactWrites})
	if err != nil {
		return false, err
	}
	cutoff := s.d.Now().Add(-ClaimGrace)
	for _, it := range page.Items {
		r, err := decodeRow(it)
		if err != nil {
			return false, err
		}
		if r.ClaimedAt != nil && r.ClaimedAt.After(cutoff) {
			continue // a run may still be sending it
		}
		if err := st.settleRow(ctx, &r, RowInterrupted, nil); err != nil {
			return false, err
		}
	}
	n, err = s.counter(ctx, bot, id, "state#"+string(RowSending))
	return n == 0, err
}

// finish marks the campaign sent once no row is planned or sending. false: not yet.
func (st *step) finish(ctx context.Context) (bool, error) {
	s := st.s
	planned, err := s.counter(ctx, st.p.Bot, st.p.Campaign, "state#"+string(RowPlanned))
	if err != nil || planned > 0 {
		return false, err
	}
	settled, err := st.settle(ctx)
	if err != nil {
		return false, err
	}
	if !settled {
		// Rows a run may still be sending: look again in a while, not in a busy loop.
		st.wait(ctx)
		return false, nil
	}
	c := st.c
	if c.State != Sending || c.Epoch != st.p.Epoch {
		return true, nil
	}
	now := stamp(s.d.Now())
	c.State, c.FinishedAt = Sent, &now
	err = s.save(ctx, &c, c.Revision, nil, 0)
	if httpapi.KindOf(err) == httpapi.KindConflict {
		// Paused or canceled at the last moment: the next step reads which.
		return false, nil
	}
	return err == nil, err
}

// cancel moves the rows of a canceled campaign still planned to canceled, then settles
// the rows left sending. true once none is left.
func (st *step) cancel(ctx context.Context) (bool, error) {
	s, bot, id := st.s, st.p.Bot, st.p.Campaign
	for s.d.Now().Before(st.deadline) {
		page, err := s.d.Store.Query(ctx, store.Query{Index: store.GSI1, PK: rowStatePK(bot, id, RowPlanned), Limit: cancelChunk})
		if err != nil {
			return false, err
		}
		if len(page.Items) == 0 {
			break
		}
		writes := make([]store.Write, 0, len(page.Items)+2)
		rows := make([]row, len(page.Items))
		for i, it := range page.Items {
			if rows[i], err = decodeRow(it); err != nil {
				return false, err
			}
			r := rows[i]
			r.State, r.rev = RowCanceled, rows[i].rev+1
			nit, err := r.item(bot, id)
			if err != nil {
				return false, err
			}
			writes = append(writes, store.PutOp(nit, store.RevisionIs(rows[i].rev)))
		}
		d := deltas{}
		d.add(bot, id, "state#"+string(RowPlanned), -int64(len(rows)))
		d.add(bot, id, "state#"+string(RowCanceled), int64(len(rows)))
		err = s.d.Store.Transact(ctx, append(writes, d.writes()...))
		if !errors.Is(err, store.ErrConditionFailed) {
			if err != nil {
				return false, err
			}
			continue
		}
		for i := range rows { // one of them moved meanwhile: row by row
			_, err := mutateRow(ctx, s.d.Store, bot, id, rows[i].ID, &rows[i], func(n *row, _ deltas) ([]store.Write, error) {
				if n.State != RowPlanned {
					return nil, errNoChange
				}
				n.State = RowCanceled
				return nil, nil
			})
			if err != nil {
				return false, err
			}
		}
	}
	planned, err := s.counter(ctx, bot, id, "state#"+string(RowPlanned))
	if err != nil || planned > 0 {
		return false, err
	}
	settled, err := st.settle(ctx)
	if err == nil && !settled {
		st.wait(ctx) // rows a run may still be sending: look again in a while
	}
	return settled, err
}
