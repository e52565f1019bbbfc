package broadcasts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botplatform/api/shared/pace"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// The send job (JobSend) of a broadcast, one step at a time (SendStep). It follows the email
// campaigns' send (functions/emailcampaigns/send.go), per channel:
//
// Runs. Schedule starts run 1 (at send_at); resume and cancel start the next run (the
// broadcast's epoch). RUN holds the progress of the newest run: epoch, next step, phase and
// audience cursor. A step of run e numbered n works only when the broadcast's epoch is e and
// RUN is at step n of run e (or, for step 0, of an earlier run), and moves RUN to n+1 under
// RUN's revision: a step delivered twice does its work at most once in the end, and a step
// that crashed is retried from the same place (every write of a step is idempotent).
//
// Plan. Audience pages become rows, one per subscriber on a channel of the broadcast, with an
// id derived from the subscriber id, written MustNotExist with their counters in the same
// transaction: a repeated page writes nothing twice. RUN keeps the cursor of the next page,
// so a pause in the middle of the plan resumes there.
//
// Send. Each channel of the broadcast sends in its own goroutine, at its own rate: planned
// rows of the channel by batches of at most a quarter second's worth, claimed together
// (planned → sending under their revisions, in one transaction), handed to at most Workers
// sends at once, message k of the step no sooner than k/rate seconds after the step began,
// and settled together once the batch's sends are over. A row is claimed before its message
// leaves and never claimed twice, so no row is ever sent twice; a row left sending (a crash
// between claim and settle) becomes interrupted once its claim is older than ClaimGrace, and
// is never sent again. A provider's 429 puts the row back to planned and holds the channel
// for Retry-After (the other channels go on); a send without an answer is interrupted. The
// broadcast is read again before each batch: paused, canceled or a newer run, and the
// channel stops.
//
// Finish. Once no row is planned or sending the broadcast is completed.

const (
	// claimWindow bounds a batch by time: a quarter second of messages at the channel's rate.
	claimWindow = 250 * time.Millisecond
	// sendBatch bounds a batch: settling it (the rows, the blocked marks, the counters) fits
	// one transaction of store.MaxTransactWrites.
	sendBatch = 40
	// planChunk is the most rows one plan transaction writes.
	planChunk = 80
	// planPagesPerStep bounds the audience pages one step plans.
	planPagesPerStep = 400
	cancelChunk      = 90
	sendTimeout      = 30 * time.Second
	// unavailableBackoff holds a channel whose provider failed for now without Retry-After.
	unavailableBackoff = 2 * time.Second
	// whatsAppWindow is WhatsApp's customer service window.
	whatsAppWindow = 24 * time.Hour
)

const (
	phasePlan = "plan"
	phaseSend = "send"
)

type run struct {
	Epoch  int64  `json:"epoch"`
	Step   int64  `json:"step"`
	Phase  string `json:"phase"`
	Cursor string `json:"cursor,omitempty"`
	Seen   int    `json:"seen"`
	// Truncated: the audience had more than MaxAudience subscribers.
	Truncated bool `json:"truncated,omitempty"`
	// Held: a channel its provider told to wait longer than a step (a 429's Retry-After)
	// sends nothing before this time, in whichever step comes next.
	Held map[string]time.Time `json:"held,omitempty"`
	// OrderedIDs: the plan names rows in the subscribers' order (recipientID); runs planned
	// before it existed keep hashed ids, so that a repeated page writes no second row.
	OrderedIDs bool `json:"ordered_ids,omitempty"`
	// Failed counts the failed attempts of the step the run is at (step.failed); a step
	// that completes clears it.
	Failed *jobs.Failures `json:"failed,omitempty"`
	// Recent are each channel's answers of the last second, so that the next step's pacer
	// counts them and a step boundary never makes a second busier than the rate.
	Recent map[string]pace.Log `json:"recent,omitempty"`
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

// SendStep runs one step of a broadcast's send job.
func (s *Service) SendStep(ctx context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
	var p jobPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", false, fmt.Errorf("broadcasts: send payload: %w", err)
	}
	if p.Bot == "" || p.Broadcast == "" || p.Epoch < 1 {
		return "", false, errors.New("broadcasts: send payload needs bot_id, broadcast_id and epoch")
	}
	n, err := jobs.StepNumber(cursor, 0)
	if err != nil {
		return "", false, fmt.Errorf("broadcasts: send: %w", err)
	}
	now := s.d.Now()
	st := &step{s: s, p: p, n: n, start: now, deadline: now.Add(s.cfg.StepDuration)}
	next, done, err := jobs.Safely(func() (string, bool, error) { return st.run(ctx) })
	// The store unavailable for now (throttled, locked, an outage): the step runs again
	// later, however long that lasts, rather than count towards the dead-letter limit, which
	// would leave the broadcast running with nothing running it. What the step did is
	// settled or stays claimed (interrupted at worst): nothing is sent twice.
	if err, later := jobs.LaterWhenUnavailable(err, retryAfter); later {
		s.d.Log.WarnContext(ctx, "broadcast: the store failed for now; the send goes on later",
			"bot_id", p.Bot, "broadcast_id", p.Broadcast, "retry_in", retryAfter.String(), "error", err)
		return next, done, err
	}
	if err != nil && st.failed(ctx, err) {
		return "", true, nil // paused: a resume starts a new run
	}
	return next, done, err
}

// retryAfter is how long a step stopped by the store being unavailable waits before it runs
// again (jobs.Later).
const retryAfter = 30 * time.Second

// failed counts a failed attempt of the step (the queue runs it again), and once it has
// failed jobs.MaxStepFailures times pauses the broadcast with status_reason send_failed and
// reports true: the job ends there, and a resume starts a new run that continues where this
// one stopped. When the count cannot be kept (the store fails too, or the broadcast changed
// meanwhile) it reports false and the step fails as before.
func (st *step) failed(ctx context.Context, cause error) bool {
	s := st.s
	r, err := s.loadRun(ctx, st.p.Bot, st.p.Broadcast)
	if err != nil {
		return false
	}
	if r.Failed == nil {
		r.Failed = &jobs.Failures{}
	}
	count := r.Failed.Add(st.p.Epoch, st.n)
	b, err := store.Encode(r)
	if err != nil {
		return false
	}
	cond := store.RevisionOrAbsent(r.rev)
	if err := s.d.Store.Put(ctx, store.Item{Key: runKey(st.p.Bot, st.p.Broadcast), Revision: r.rev + 1, Data: b}, cond); err != nil {
		return false
	}
	if count < jobs.MaxStepFailures {
		return false
	}
	rec, err := s.loadKey(ctx, st.p.Bot, st.key())
	if err != nil || rec.Status != Running || rec.Epoch != st.p.Epoch {
		return false
	}
	s.pauseRecord(&rec)
	rec.StatusReason = ReasonSendFailed
	if err := s.save(ctx, &rec, rec.Revision, nil, 0); err != nil {
		return false
	}
	s.d.Log.WarnContext(ctx, "broadcast paused", "bot_id", st.p.Bot, "broadcast_id", st.p.Broadcast, "reason", ReasonSendFailed,
		"error", fmt.Errorf("step %d failed %d times, the last: %w", st.n, count, cause))
	return true
}

// ReasonSendFailed is the status_reason of a broadcast paused because a step of its send
// failed jobs.MaxStepFailures times in a row (the error is in the log).
const ReasonSendFailed = "send_failed"

type step struct {
	s        *Service
	p        jobPayload
	n        int64
	start    time.Time
	deadline time.Time
	rec      record
	r        run
	sent     atomic.Int64
	// held: a channel had nothing it could send this step (its WhatsApp tier is used up);
	// the step still lasts its time, so that held steps do not follow each other at once.
	held    atomic.Bool
	mu      sync.Mutex
	stopErr error
}

func (st *step) key() store.Key {
	if st.p.Legacy {
		return legacyKey(st.p.Bot, st.p.Broadcast)
	}
	return broadcastKey(st.p.Bot, st.p.Broadcast)
}

func (st *step) run(ctx context.Context) (string, bool, error) {
	s := st.s
	rec, err := s.loadKey(ctx, st.p.Bot, st.key())
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return "", true, nil // gone with its bot
	}
	if err != nil {
		return "", false, err
	}
	if rec.Epoch != st.p.Epoch {
		return "", true, nil // a newer run has taken over
	}
	if st.r, err = s.loadRun(ctx, st.p.Bot, st.p.Broadcast); err != nil {
		return "", false, err
	}
	if (st.r.Epoch == st.p.Epoch && st.r.Step != st.n) || (st.r.Epoch != st.p.Epoch && st.n != 0) {
		return "", true, nil // a copy of a step that has already run
	}
	st.rec = rec
	if rec.Status == Scheduled {
		if wait := rec.SendAt.Sub(s.d.Now()); wait > time.Second {
			// Delivered before its time: wait again, in a job of its own.
			writes, deliver, err := s.startJob(rec, wait)
			if err != nil {
				return "", false, err
			}
			if err := s.d.Store.Transact(ctx, writes); err != nil {
				return "", false, err
			}
			deliver(ctx)
			return "", true, nil
		}
		now := stamp(s.d.Now())
		rec.Status, rec.StartedAt = Running, &now
		if err := s.save(ctx, &rec, rec.Revision, nil, 0); err != nil {
			if httpapi.KindOf(err) == httpapi.KindConflict {
				return strconv.FormatInt(st.n, 10), false, nil // changed meanwhile: decide again
			}
			return "", false, err
		}
		st.rec = rec
	}
	var done bool
	switch st.rec.Status {
	case Running:
		done, err = st.sending(ctx)
	case Canceled:
		done, err = st.cancel(ctx)
	default:
		done = true // paused, completed, failed: nothing until a new run
	}
	if err != nil {
		return "", false, err
	}
	if !done && (st.sent.Load() > 0 || st.held.Load()) {
		st.wait(ctx) // keep the rate across steps
	}
	if err := st.advance(ctx); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return "", true, nil
		}
		return "", false, err
	}
	return strconv.FormatInt(st.n+1, 10), done, nil
}

// advance moves RUN to the next step of this run: store.ErrConditionFailed when another copy
// of the step, or a newer run, moved it first.
func (st *step) advance(ctx context.Context) error {
	r := st.r
	r.Epoch, r.Step, r.Failed = st.p.Epoch, st.n+1, nil
	b, err := store.Encode(r)
	if err != nil {
		return err
	}
	for range 3 {
		cond := store.RevisionOrAbsent(r.rev)
		err := st.s.d.Store.Put(ctx, store.Item{Key: runKey(st.p.Bot, st.p.Broadcast), Revision: r.rev + 1, Data: b}, cond)
		if !errors.Is(err, store.ErrConditionFailed) {
			return err
		}
		cur, err := st.s.loadRun(ctx, st.p.Bot, st.p.Broadcast)
		if err != nil {
			return err
		}
		if cur.Epoch >= st.p.Epoch {
			return store.ErrConditionFailed
		}
		r.rev = cur.rev
	}
	return fmt.Errorf("broadcasts: progress of %s keeps changing: %w", st.p.Broadcast, store.ErrUnavailable)
}

func (st *step) wait(ctx context.Context) {
	if d := st.deadline.Sub(st.s.d.Now()); d > 0 {
		_ = st.s.d.Sleep(ctx, d)
	}
}

// live reads the broadcast again: false when this run must stop.
func (st *step) live(ctx context.Context) (bool, error) {
	rec, err := st.s.loadKey(ctx, st.p.Bot, st.key())
	if err != nil {
		return false, err
	}
	return rec.Epoch == st.p.Epoch && rec.Status == Running, nil
}

// channels are the channel types a run sends on: the broadcast's, or every one for a legacy
// broadcast (the reaction runs on the subscriber's own channel).
func (st *step) channels() []channel.Kind {
	if st.rec.Legacy {
		return channel.Kinds()
	}
	return st.rec.Channels
}

// sending plans, then sends, until the step's time is up; done means no next step.
func (st *step) sending(ctx context.Context) (bool, error) {
	if st.r.Phase != phaseSend {
		live, err := st.plan(ctx)
		if err != nil || !live {
			return !live, err
		}
		if st.r.Phase != phaseSend {
			return false, nil
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(st.channels()))
	lives := make([]bool, len(st.channels()))
	for i, k := range st.channels() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lives[i], errs[i] = st.sendChannel(ctx, k)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return false, err
	}
	if slices.Contains(lives, false) {
		return true, nil // paused, canceled or a newer run: that run decides
	}
	return st.finish(ctx)
}

// plan writes the rows of audience pages until the audience ends or the step's time is up.
func (st *step) plan(ctx context.Context) (bool, error) {
	s := st.s
	if st.r.Phase == "" {
		st.r.Phase, st.r.OrderedIDs = phasePlan, true
	}
	src := s.audience(st.rec)
	for range planPagesPerStep {
		if live, err := st.live(ctx); err != nil || !live {
			return false, err
		}
		room := s.cfg.MaxAudience - st.r.Seen
		if room <= 0 {
			st.r.Truncated = true
			break
		}
		people, next, err := src(ctx, st.r.Cursor, min(audiencePage, room))
		if err != nil {
			return false, err
		}
		if len(people) > room {
			people, st.r.Truncated = people[:room], true
		}
		if err := st.planPage(ctx, people); err != nil {
			return false, err
		}
		st.r.Seen += len(people)
		st.r.Cursor = next
		if next == "" || st.r.Truncated {
			break
		}
		if !s.d.Now().Before(st.deadline) {
			return true, nil
		}
	}
	if st.r.Cursor == "" || st.r.Truncated {
		st.r.Phase, st.r.Cursor = phaseSend, ""
	}
	return true, nil
}

// planPage writes one page's rows, by chunks in one transaction each, or row by row when a
// chunk meets a row written before (a repeated step).
func (st *step) planPage(ctx context.Context, people []Person) error {
	bot, id := st.p.Bot, st.p.Broadcast
	now := stamp(st.s.d.Now())
	chans := st.channels()
	seen := map[string]bool{}
	var rows []row
	for _, p := range people {
		if p.SubscriberID == "" || seen[p.SubscriberID] || !slices.Contains(chans, p.Channel) {
			continue
		}
		seen[p.SubscriberID] = true
		rows = append(rows, row{Recipient: Recipient{ID: recipientID(p.SubscriberID, st.r.OrderedIDs), SubscriberID: p.SubscriberID,
			Channel: string(p.Channel), State: RowPlanned, PlannedAt: now}, rev: 1})
	}
	return PlanRows(ctx, st.s.d.Store, bot, id, rows)
}

// PlanRows writes new rows MustNotExist with their counters, chunk by chunk; a chunk that
// meets a row written before goes row by row. Exported for the benchmark (tests/bench).
func PlanRows(ctx context.Context, st store.Store, bot, id string, rows []row) error {
	writesOf := func(rows []row) ([]store.Write, error) {
		var writes []store.Write
		d := deltas{}
		for _, r := range rows {
			it, err := r.item(bot, id)
			if err != nil {
				return nil, err
			}
			writes = append(writes, store.PutOp(it, store.MustNotExist))
			d.move(bot, id, r.Channel, "", r.State, r.Reason)
		}
		return append(writes, d.writes()...), nil
	}
	for len(rows) > 0 {
		chunk := rows[:min(planChunk, len(rows))]
		rows = rows[len(chunk):]
		writes, err := writesOf(chunk)
		if err != nil {
			return err
		}
		err = st.Transact(ctx, writes)
		if !errors.Is(err, store.ErrConditionFailed) {
			if err != nil {
				return fmt.Errorf("plan recipients: %w", err)
			}
			continue
		}
		for _, r := range chunk {
			writes, err := writesOf([]row{r})
			if err != nil {
				return err
			}
			err = st.Transact(ctx, writes)
			if err != nil && !errors.Is(err, store.ErrConditionFailed) {
				return fmt.Errorf("plan recipient %s: %w", r.ID, err)
			}
		}
	}
	return nil
}

// outcome is how the send of one claimed row ended.
type outcome struct {
	state     RowState // where the row goes from sending ("" leaves it: not handed out)
	reason    string
	messageID string
	links     []string      // the targets of the message's tracked link buttons
	template  bool          // a WhatsApp template went (or may have gone) out: it counts against the tier
	blocked   bool          // mark the subscriber blocked
	hold      time.Duration // hold the channel this long (429, provider down)
	pause     string        // pause the broadcast for this reason
	err       error
}

// channelRun is one channel's sending within a step.
type channelRun struct {
	st      *step
	k       channel.Kind
	rate    float64
	adapter channel.Adapter
	conn    channel.Connection
	pace    *pace.Pacer
	stop    atomic.Bool
	// budget is what is left of the WhatsApp number's messaging tier (nil: unbounded).
	budget *atomic.Int64
}

// sendChannel sends the planned rows of channel k until the step's time is up or none is
// left; false when the run must stop.
func (st *step) sendChannel(ctx context.Context, k channel.Kind) (bool, error) {
	s := st.s
	cr := &channelRun{st: st, k: k, rate: s.cfg.Rates[k]}
	planned, err := s.counter(ctx, st.p.Bot, st.p.Broadcast, string(k), "state#"+string(RowPlanned))
	if err != nil || planned == 0 {
		return true, err
	}
	if !st.rec.Legacy {
		cr.adapter, cr.conn, err = s.d.Channels.Open(ctx, st.p.Bot, k)
		if errors.Is(err, ErrNoChannel) {
			return false, st.pause(ctx, "channel_not_connected")
		}
		if err != nil {
			return true, err
		}
		if k == channel.WhatsApp {
			left, bounded, err := s.tierBudget(ctx, st.p.Bot, cr.adapter, cr.conn)
			if err != nil {
				return true, err
			}
			if bounded && left == 0 {
				st.held.Store(true)
				return true, nil
			}
			if bounded {
				cr.budget = new(atomic.Int64)
				cr.budget.Store(left)
			}
		}
	}
	st.mu.Lock()
	until := st.r.Held[string(k)]
	st.mu.Unlock()
	if wait := until.Sub(s.d.Now()); wait > 0 {
		if !s.d.Now().Add(wait).Before(st.deadline) {
			st.held.Store(true)
			return true, nil
		}
		if err := s.d.Sleep(ctx, wait); err != nil {
			return true, err
		}
	}
	window := max(1, min(sendBatch, int(cr.rate*claimWindow.Seconds())))
	st.mu.Lock()
	recent := st.r.Recent[string(k)].Times()
	st.mu.Unlock()
	cr.pace = pace.PerSecond(cr.rate, s.d.Now(), recent)
	defer func() {
		// Every send of this channel has been answered (dispatch waits for them).
		l := pace.NewLog(cr.pace.Recent(s.d.Now()))
		st.mu.Lock()
		defer st.mu.Unlock()
		if st.r.Recent == nil {
			st.r.Recent = map[string]pace.Log{}
		}
		st.r.Recent[string(k)] = l
	}()
	for s.d.Now().Before(st.deadline) {
		page, err := s.d.Store.Query(ctx, store.Query{Index: store.GSI1, PK: rowStatePK(st.p.Bot, st.p.Broadcast, RowPlanned, string(k)), Limit: window})
		if err != nil {
			return true, err
		}
		if len(page.Items) == 0 {
			return true, nil
		}
		rows := make([]row, len(page.Items))
		for i, it := range page.Items {
			if rows[i], err = decodeRow(it); err != nil {
				return true, err
			}
		}
		// Claim at the batch's first slot, not before: a row a crash leaves claimed is never
		// sent again (interrupted), so rows wait unclaimed for their turn.
		if err := cr.pace.Ready(ctx, s.d.Now, s.d.Sleep); err != nil {
			return true, err
		}
		// Read the broadcast after the wait for the slot, not before it: a pause answered
		// while the batch waited for its turn must stop it (the pace can wait a fifth of a
		// second at 5 messages a second).
		if live, err := st.live(ctx); err != nil || !live {
			return false, err
		}
		rows, err = st.claim(ctx, rows)
		if err != nil {
			return true, err
		}
		outs := cr.dispatch(ctx, rows)
		if err := st.settle(ctx, rows, outs); err != nil {
			return true, err
		}
		var hold time.Duration
		var templates int64
		for _, o := range outs {
			if o.pause != "" {
				return false, st.pause(ctx, o.pause)
			}
			hold = max(hold, o.hold)
			if o.template && (o.state == RowSent || o.state == RowInterrupted) {
				templates++
			}
		}
		if err := s.countTemplates(ctx, st.p.Bot, templates); err != nil {
			return true, err
		}
		if hold > 0 {
			// The provider asked to slow down: hold this channel, then start its slots
			// afresh (no burst to catch up).
			if left := st.deadline.Sub(s.d.Now()); hold > left {
				st.mu.Lock()
				if st.r.Held == nil {
					st.r.Held = map[string]time.Time{}
				}
				st.r.Held[string(k)] = s.d.Now().Add(hold)
				st.mu.Unlock()
				st.held.Store(true)
				return true, nil // the next step goes on after the rest of the hold
			}
			if err := s.d.Sleep(ctx, hold); err != nil {
				return true, err
			}
			cr.stop.Store(false)
		}
	}
	return true, nil
}

// claim moves planned rows to sending and returns those this run claimed.
func (st *step) claim(ctx context.Context, rows []row) ([]row, error) {
	now := stamp(st.s.d.Now())
	claimed := make([]bool, len(rows))
	err := st.s.mutateRows(ctx, st.p.Bot, st.p.Broadcast, rows, func(i int, n *row) ([]store.Write, error) {
		claimed[i] = false
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

// workers is how many sends of the channel may be in flight at once: Workers, or enough for
// the rate when each answer takes 50 ms (a fast channel's sends are bound by their round
// trips otherwise: 8 at 10 ms each are 800 a second), at most 64.
func (cr *channelRun) workers() int {
	return max(cr.st.s.cfg.Workers, min(64, int(math.Ceil(cr.rate/20))))
}

// dispatch sends the claimed rows, each at its slot, at most Workers at once; a row not
// handed out (the channel was told to hold, or the step's time is up) goes back to planned.
func (cr *channelRun) dispatch(ctx context.Context, rows []row) []outcome {
	st, s := cr.st, cr.st.s
	outs := make([]outcome, len(rows))
	for i := range outs {
		outs[i] = outcome{state: RowPlanned}
	}
	workers := make(chan struct{}, cr.workers())
	var wg sync.WaitGroup
	for i := range rows {
		if cr.stop.Load() || !s.d.Now().Before(st.deadline.Add(time.Second)) {
			break
		}
		workers <- struct{}{}
		answered, err := cr.pace.Take(ctx, s.d.Now, s.d.Sleep)
		if err != nil {
			<-workers
			break
		}
		if cr.stop.Load() {
			answered() // nothing was sent; the turn counts as used, which only errs slower
			<-workers
			break
		}
		st.sent.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-workers }()
			defer answered()
			outs[i] = cr.sendOne(ctx, &rows[i])
			if outs[i].hold > 0 || outs[i].pause != "" {
				cr.stop.Store(true)
			}
		}()
	}
	wg.Wait()
	return outs
}

// sendOne reads the row's subscriber again and sends it the broadcast.
func (cr *channelRun) sendOne(ctx context.Context, r *row) outcome {
	st, s := cr.st, cr.st.s
	bot := st.p.Bot
	p, err := s.d.Audience.Person(ctx, bot, r.SubscriberID)
	switch {
	case httpapi.KindOf(err) == httpapi.KindNotFound:
		return outcome{state: RowSkipped, reason: "deleted"}
	case err != nil:
		return outcome{state: RowPlanned, hold: unavailableBackoff, err: err}
	case string(p.Channel) != r.Channel:
		return outcome{state: RowSkipped, reason: "channel_changed"}
	}
	if blocked, err := s.isBlocked(ctx, bot, p); err != nil {
		return outcome{state: RowPlanned, hold: unavailableBackoff, err: err}
	} else if blocked {
		return outcome{state: RowSkipped, reason: "blocked"}
	}
	cause := st.p.Broadcast + "/" + r.ID
	if st.rec.Legacy {
		writes, deliver, err := s.d.Reactions.Start(bot, p, st.rec.ReactionID, cause)
		if err == nil {
			err = s.d.Store.Transact(ctx, writes)
		}
		if err != nil {
			return outcome{state: RowPlanned, hold: unavailableBackoff, err: err}
		}
		deliver(ctx)
		return outcome{state: RowSent}
	}
	template := false
	doc, version := st.rec.Content.document(cr.k), st.rec.ContentVersions[string(cr.k)]
	m, err := s.d.Content.Render(ctx, bot, doc, version, p)
	if err != nil {
		if k := httpapi.KindOf(err); k == httpapi.KindNotFound || k == httpapi.KindUnprocessable {
			return outcome{state: RowPlanned, pause: "content_unavailable"}
		}
		return outcome{state: RowPlanned, hold: unavailableBackoff, err: err}
	}
	if cr.k == channel.WhatsApp && (p.LastSeenAt == nil || s.d.Now().Sub(*p.LastSeenAt) > whatsAppWindow) {
		t := st.rec.WhatsAppTemplate
		if t == nil {
			return outcome{state: RowFailed, reason: "outside_window"}
		}
		if cr.budget != nil && cr.budget.Add(-1) < 0 {
			// The number's tier is used up: wait for the next hour's room.
			next := s.d.Now().Truncate(time.Hour).Add(time.Hour)
			return outcome{state: RowPlanned, hold: next.Sub(s.d.Now())}
		}
		m = channel.Message{Template: &channel.Template{Name: t.Name, Language: t.Language}}
		template = true
	}
	m.Key = "bc/" + cause
	links := s.track(&m, bot, st.p.Broadcast, r.ID)
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	id, err := cr.adapter.Send(sendCtx, cr.conn, p.ExternalID, m)
	cancel()
	var ce *channel.Error
	errors.As(err, &ce)
	switch {
	case err == nil:
		return outcome{state: RowSent, messageID: id, links: links, template: template}
	case errors.Is(err, channel.ErrRateLimited):
		hold := time.Second
		if ce != nil && ce.RetryAfter > hold {
			hold = ce.RetryAfter
		}
		return outcome{state: RowPlanned, hold: hold}
	case errors.Is(err, channel.ErrBlocked):
		return outcome{state: RowFailed, reason: "blocked", blocked: true}
	case errors.Is(err, channel.ErrOutsideWindow):
		return outcome{state: RowFailed, reason: "outside_window"}
	case errors.Is(err, channel.ErrRejected):
		return outcome{state: RowFailed, reason: "rejected"}
	case errors.Is(err, channel.ErrInvalidCredentials):
		return outcome{state: RowPlanned, pause: "channel_credentials_invalid"}
	case errors.Is(err, channel.ErrUnavailable) && ce != nil && ce.Code != "":
		// The provider answered (and refused, for now): nothing went out.
		return outcome{state: RowPlanned, hold: unavailableBackoff}
	default:
		// No answer: the message may have gone out. Never sent again.
		s.d.Log.WarnContext(ctx, "broadcast send without an answer; the recipient is counted interrupted",
			"bot_id", bot, "broadcast_id", st.p.Broadcast, "recipient_id", r.ID, "error", err)
		return outcome{state: RowInterrupted, hold: unavailableBackoff, template: template}
	}
}

// blockMark is the stored mark of a subscriber who blocked the bot.
type blockMark struct {
	At time.Time `json:"at"`
}

// isBlocked reports whether the subscriber blocked the bot and has not written since.
func (s *Service) isBlocked(ctx context.Context, bot string, p Person) (bool, error) {
	it, err := s.d.Store.Get(ctx, blockedKey(bot, p.SubscriberID))
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m, err := store.Decode[blockMark](it)
	if err != nil {
		return false, err
	}
	return p.LastSeenAt == nil || !p.LastSeenAt.After(m.At), nil
}

// settle moves the claimed rows where their outcomes say, with the blocked marks, and
// records broadcast_sent for each message that went out.
func (st *step) settle(ctx context.Context, rows []row, outs []outcome) error {
	bot, id := st.p.Bot, st.p.Broadcast
	now := stamp(st.s.d.Now())
	err := st.s.mutateRows(ctx, bot, id, rows, func(i int, n *row) ([]store.Write, error) {
		o := outs[i]
		if n.State != RowSending && !(o.state == RowSent && n.State == RowInterrupted) {
			return nil, errNoChange
		}
		n.State, n.Reason, n.ClaimedAt = o.state, o.reason, nil
		if o.state == RowSent {
			n.SentAt, n.MessageID, n.Links = &now, o.messageID, o.links
			if n.Channel == string(channel.WhatsApp) && o.messageID != "" {
				// WhatsApp reports delivery and reads later, by message id.
				b, err := store.Encode(waMessage{Broadcast: id, Recipient: n.ID})
				if err != nil {
					return nil, err
				}
				return []store.Write{store.PutOp(store.Item{Key: waMsgKey(bot, o.messageID), Revision: 1, Data: b}, store.Always)}, nil
			}
		}
		if o.blocked {
			b, err := store.Encode(blockMark{At: now})
			if err != nil {
				return nil, err
			}
			return []store.Write{store.PutOp(store.Item{Key: blockedKey(bot, n.SubscriberID), Revision: 1, Data: b}, store.Always)}, nil
		}
		return nil, nil
	})
	if err != nil {
		return err
	}
	var sent []eventlog.Event
	for i, o := range outs {
		if o.state == RowSent {
			sent = append(sent, eventlog.Event{ID: "bcs_" + id + "_" + rows[i].ID, BotID: bot, SubscriberID: rows[i].SubscriberID,
				Name: eventlog.BroadcastSent, At: now, Channel: rows[i].Channel, Source: eventlog.SourceBroadcast,
				Properties: map[string]any{"broadcast_id": id}})
		}
		if o.err != nil {
			st.s.d.Log.WarnContext(ctx, "broadcast send held", "bot_id", bot, "broadcast_id", id, "error", o.err)
		}
	}
	eventlog.EmitAll(ctx, st.s.d.Events, st.s.d.Log, sent)
	return nil
}

// pause pauses the broadcast for reason (the send cannot go on until someone fixes it).
func (st *step) pause(ctx context.Context, reason string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, err := st.s.loadKey(ctx, st.p.Bot, st.key())
	if err != nil || rec.Status != Running || rec.Epoch != st.p.Epoch {
		return err
	}
	st.s.pauseRecord(&rec)
	rec.StatusReason = reason
	err = st.s.save(ctx, &rec, rec.Revision, nil, 0)
	if httpapi.KindOf(err) == httpapi.KindConflict {
		return nil
	}
	if err == nil {
		st.s.d.Log.WarnContext(ctx, "broadcast paused", "bot_id", st.p.Bot, "broadcast_id", st.p.Broadcast, "reason", reason)
	}
	return err
}

// sum adds a counter over the run's channels.
func (st *step) sum(ctx context.Context, name string) (int64, error) {
	var n int64
	for _, k := range st.channels() {
		c, err := st.s.counter(ctx, st.p.Bot, st.p.Broadcast, string(k), name)
		if err != nil {
			return 0, err
		}
		n += c
	}
	return n, nil
}

// settleStale counts the rows left sending whose claim is older than ClaimGrace interrupted;
// true once no row is sending.
func (st *step) settleStale(ctx context.Context) (bool, error) {
	s, bot, id := st.s, st.p.Bot, st.p.Broadcast
	n, err := st.sum(ctx, "state#"+string(RowSending))
	if err != nil || n == 0 {
		return n == 0, err
	}
	cutoff := s.d.Now().Add(-s.cfg.ClaimGrace)
	for _, k := range st.channels() {
		page, err := s.d.Store.Query(ctx, store.Query{Index: store.GSI1, PK: rowStatePK(bot, id, RowSending, string(k)), Limit: store.MaxTransactWrites / 2})
		if err != nil {
			return false, err
		}
		var stale []row
		for _, it := range page.Items {
			r, err := decodeRow(it)
			if err != nil {
				return false, err
			}
			if r.ClaimedAt == nil || !r.ClaimedAt.After(cutoff) {
				stale = append(stale, r)
			}
		}
		err = s.mutateRows(ctx, bot, id, stale, func(_ int, n *row) ([]store.Write, error) {
			if n.State != RowSending {
				return nil, errNoChange
			}
			n.State, n.ClaimedAt = RowInterrupted, nil
			return nil, nil
		})
		if err != nil {
			return false, err
		}
	}
	n, err = st.sum(ctx, "state#"+string(RowSending))
	return n == 0, err
}

// finish completes the broadcast once no row is planned or sending.
func (st *step) finish(ctx context.Context) (bool, error) {
	planned, err := st.sum(ctx, "state#"+string(RowPlanned))
	if err != nil || planned > 0 {
		return false, err
	}
	settled, err := st.settleStale(ctx)
	if err != nil {
		return false, err
	}
	if !settled {
		st.wait(ctx) // rows a crashed run claimed: look again in a while
		return false, nil
	}
	rec, err := st.s.loadKey(ctx, st.p.Bot, st.key())
	if err != nil {
		return false, err
	}
	if rec.Status != Running || rec.Epoch != st.p.Epoch {
		return true, nil
	}
	now := stamp(st.s.d.Now())
	rec.Status, rec.FinishedAt = Completed, &now
	err = st.s.save(ctx, &rec, rec.Revision, nil, 0)
	if httpapi.KindOf(err) == httpapi.KindConflict {
		return false, nil // paused or canceled at the last moment: the next step reads which
	}
	return err == nil, err
}

// cancel moves the rows still planned to canceled, then settles the rows left sending.
func (st *step) cancel(ctx context.Context) (bool, error) {
	s, bot, id := st.s, st.p.Bot, st.p.Broadcast
	for _, k := range st.channels() {
		for s.d.Now().Before(st.deadline) {
			page, err := s.d.Store.Query(ctx, store.Query{Index: store.GSI1, PK: rowStatePK(bot, id, RowPlanned, string(k)), Limit: cancelChunk / 2})
			if err != nil {
				return false, err
			}
			if len(page.Items) == 0 {
				break
			}
			rows := make([]row, len(page.Items))
			for i, it := range page.Items {
				if rows[i], err = decodeRow(it); err != nil {
					return false, err
				}
			}
			err = s.mutateRows(ctx, bot, id, rows, func(_ int, n *row) ([]store.Write, error) {
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
	planned, err := st.sum(ctx, "state#"+string(RowPlanned))
	if err != nil || planned > 0 {
		return false, err
	}
	settled, err := st.settleStale(ctx)
	if err == nil && !settled {
		st.wait(ctx)
	}
	return settled, err
}
