package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// drive runs rec until it suspends or ends, settles what that leaves to do (queue messages,
// the run a goto starts), and continues with that run.
func (r *Runtime) drive(ctx context.Context, h *handling, rec *record) error {
	for {
		if rec.Status == StatusRunning {
			var err error
			if rec, err = r.run(ctx, h, rec); err != nil {
				return err
			}
		}
		if len(rec.Outbox) > 0 {
			if err := r.send(ctx, rec.Outbox); err != nil {
				return err
			}
			rec.Outbox = nil
			if err := r.save(ctx, rec, nil); err != nil && !errors.Is(err, errConflict) {
				return err // the messages went out; a retry sends them again, harmlessly
			}
		}
		if rec.Next == nil {
			return nil
		}
		next, err := r.startRun(ctx, h, rec.BotID, rec.SubscriberID, rec.Channel, *rec.Next, rec.ID)
		if err != nil {
			return err
		}
		rec = next
	}
}

// errBusy: another handler holds the run for longer than this one should wait.
var errBusy = errors.New("runtime: the execution is being run by another handler")

// lease makes rec this handler's to run, waiting while another handler holds it (polling,
// since the holder lets go as soon as the run suspends or ends).
func (r *Runtime) lease(ctx context.Context, h *handling, rec *record) (*record, error) {
	poll := 20 * time.Millisecond
	for rec.Status == StatusRunning && rec.LeaseToken != h.token {
		now := r.now()
		if rec.LeaseToken != "" && rec.LeaseUntil.After(now) {
			if rec.LeaseUntil.Sub(now) > leaseFor+5*time.Second {
				return nil, errBusy // a clock far ahead wrote it: let the queue retry later
			}
			r.keepVisible(ctx, h)
			t := time.NewTimer(min(poll, rec.LeaseUntil.Sub(now)+time.Millisecond))
			poll = min(2*poll, time.Second)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			next, err := r.loadRun(ctx, rec.BotID, rec.ID)
			if err != nil {
				return nil, err
			}
			rec = next
			continue
		}
		rec.LeaseToken, rec.LeaseUntil = h.token, now.Add(leaseFor)
		if err := r.save(ctx, rec, nil); err != nil {
			return nil, err
		}
	}
	return rec, nil
}

// driver is the state of one run being executed by one handler.
type driver struct {
	r     *Runtime
	h     *handling
	rec   *record
	flow  Flow
	index map[string]int
	sub   Subscriber
	// Read when first needed.
	fields  map[string]Field
	labels  map[string]bool
	adapter channel.Adapter
	conn    channel.Connection
	opened  bool
	touched bool
	// superseded is the run whose buttons pointer this run's buttons step replaced.
	superseded *pointer
}

// retryable is a provider failure the queue retries (channel.Retryable).
type retryable struct {
	err   error
	after time.Duration
	se    StepError
}

func (e *retryable) Error() string { return e.err.Error() }
func (e *retryable) Unwrap() error { return e.err }

// run executes rec's steps from its cursor, writing the run (and an entry) after each, and
// returns the run as it left it.
func (r *Runtime) run(ctx context.Context, h *handling, rec *record) (*record, error) {
	rec, err := r.lease(ctx, h, rec)
	if err != nil || rec.Status != StatusRunning {
		return rec, err
	}
	return rec, r.steps(ctx, h, rec)
}

func (r *Runtime) steps(ctx context.Context, h *handling, rec *record) error {
	d := &driver{r: r, h: h, rec: rec, touched: h.touched}
	flow, err := r.reactions.Flow(ctx, rec.BotID, rec.ReactionID, rec.ReactionVersion)
	if errors.Is(err, ErrNotFound) {
		return d.stop(ctx, "reaction_gone", "the reaction was deleted while the run was in progress")
	}
	if err != nil {
		return err
	}
	d.flow = flow
	d.index = make(map[string]int, len(flow.Steps))
	for i, s := range flow.Steps {
		d.index[s.ID] = i
	}
	if sender := h.sender; sender != nil && sender.ID == rec.SubscriberID {
		h.sender = nil // read anew by a later run, which may follow steps that changed them
		d.sub = *sender
	} else if d.sub, err = r.subs.Get(ctx, rec.BotID, rec.SubscriberID); errors.Is(err, ErrNotFound) {
		return d.stop(ctx, "subscriber_gone", "the subscriber was erased")
	} else if err != nil {
		return err
	}
	for rec.Status == StatusRunning {
		r.keepVisible(ctx, h)
		if rec.Cursor < 0 || rec.Cursor >= len(flow.Steps) {
			rec.finish(StatusCompleted, EndLastStep, r.now())
			return d.commit(ctx, nil, nil)
		}
		if rec.Seq >= MaxEntries {
			return d.stop(ctx, "step_limit", fmt.Sprintf("the run executed %d steps, the most one run may", MaxEntries))
		}
		if err := d.step(ctx, flow.Steps[rec.Cursor]); err != nil {
			return err
		}
	}
	return nil
}

// stop fails the run without an entry (nothing of a step ran).
func (d *driver) stop(ctx context.Context, kind, msg string) error {
	d.rec.Error = &StepError{Kind: kind, Message: msg}
	d.rec.finish(StatusFailed, "", d.r.now())
	return d.commit(ctx, nil, nil)
}

// step executes one step and writes its outcome.
func (d *driver) step(ctx context.Context, s Step) error {
	rec := d.rec
	start := d.r.now()
	e := &Entry{StepID: s.ID, Type: s.Type, At: ms(start), Attempts: 1}
	if rec.Retry != nil && rec.Retry.StepID == s.ID {
		e.Attempts = rec.Retry.Attempts + 1
	}
	extra, err := d.exec(ctx, s, e)
	var re *retryable
	if errors.As(err, &re) {
		// Keep the cursor: the retried message runs this step again. Record the attempt
		// and let go of the run, so the retry need not wait out the lease.
		se := re.se
		se.StepID, se.Attempts = s.ID, e.Attempts
		rec.Retry = &se
		rec.LeaseToken, rec.LeaseUntil = "", time.Time{}
		if serr := d.r.save(ctx, rec, nil); serr != nil {
			d.r.log.WarnContext(ctx, "runtime: could not record a step's failed attempt", "execution_id", rec.ID, "error", serr)
		}
		d.r.log.WarnContext(ctx, "runtime: step failed, will be retried", "execution_id", rec.ID, "step_id", s.ID,
			"kind", se.Kind, "provider_code", se.ProviderCode, "attempt", e.Attempts, "error", re.err)
		return queue.RetryAfter(fmt.Errorf("runtime: execution %s step %s: %w", rec.ID, s.ID, re.err), re.after)
	}
	if err != nil {
		return err
	}
	rec.Retry = nil
	e.DurationMS = float64(d.r.now().Sub(start).Microseconds()) / 1000
	if rec.Status == StatusRunning && (rec.Cursor < 0 || rec.Cursor >= len(d.flow.Steps)) {
		// The last step: the run ends in the step's write rather than in one of its own.
		rec.finish(StatusCompleted, EndLastStep, d.r.now())
	}
	return d.commit(ctx, e, extra)
}

// commit writes the run with entry e. When the run leaves the running state, it first
// turns what it leaves to do into outbox messages and lets go of its lease.
func (d *driver) commit(ctx context.Context, e *Entry, extra []store.Write) error {
	rec := d.rec
	now := d.r.now()
	if rec.Status == StatusRunning {
		rec.LeaseUntil = now.Add(leaseFor)
	} else {
		rec.LeaseToken, rec.LeaseUntil = "", time.Time{}
		seq := rec.Seq
		if e != nil {
			seq++
		}
		for _, l := range rec.Added {
			m, err := message(TriggerMessage, labelEvent{
				BotID: rec.BotID, SubscriberID: rec.SubscriberID, Kind: rec.Channel, LabelID: l,
				Cause: rec.ID + "." + strconv.Itoa(seq) + "." + l, FromExecutionID: rec.ID, Hops: rec.Hops,
			}, 0)
			if err != nil {
				return err
			}
			rec.Outbox = append(rec.Outbox, m)
		}
		rec.Added = nil
	}
	// The run's last write of this handler: nothing left to send, no run to start next.
	last := d.h.done != nil && rec.Status != StatusRunning && len(rec.Outbox) == 0 && rec.Next == nil
	if last {
		extra = append(slices.Clip(extra), *d.h.done)
	}
	if err := d.r.save(ctx, rec, e, extra...); err != nil {
		return err
	}
	if last {
		d.h.done, d.h.doneWritten = nil, true
	}
	if p := d.superseded; p != nil {
		d.superseded = nil
		d.r.supersede(ctx, rec.BotID, p)
	}
	return nil
}

// supersede ends the run a newer buttons wait replaced, if it still waits.
func (r *Runtime) supersede(ctx context.Context, bot string, p *pointer) {
	rec, err := r.loadRun(ctx, bot, p.ExecutionID)
	if err != nil || !rec.waitingFor(waitButton, p.Seq) {
		return
	}
	rec.finish(StatusCompleted, EndSuperseded, r.now())
	if err := r.save(ctx, rec, nil); err != nil && !errors.Is(err, errConflict) {
		r.log.WarnContext(ctx, "runtime: could not end a superseded run; it reads as expired later", "execution_id", rec.ID, "error", err)
	}
}

// fail ends the run as failed at the step of e.
func (d *driver) fail(e *Entry, se StepError) {
	se.StepID = e.StepID
	e.Error = &se
	run := se
	d.rec.Error = &run
	d.rec.finish(StatusFailed, "", d.r.now())
}

// failed reports whether the step failed the run.
func (d *driver) failed(e *Entry) bool { return e.Error != nil }

// changed settles a subscriber change a step asked for: the updated subscriber (true), a
// label or field the bot no longer has (the step is skipped as missing), or an erased
// subscriber (the run fails). Any other error is the caller's to return.
func (d *driver) changed(e *Entry, sub Subscriber, err error, missing string) (bool, error) {
	switch {
	case errors.Is(err, ErrInvalid):
		e.Outcome = map[string]any{"skipped": missing}
		return false, nil
	case errors.Is(err, ErrNotFound):
		d.fail(e, StepError{Kind: "subscriber_gone", Message: "the subscriber was erased"})
		return false, nil
	case err != nil:
		return false, err
	}
	d.sub = sub
	return true, nil
}

// exec performs step s, filling e and moving the run on; it returns the writes that go
// with the step's outcome. A returned error leaves the run where it was: a *retryable for
// a provider failure worth retrying, anything else for an infrastructure failure.
func (d *driver) exec(ctx context.Context, s Step, e *Entry) ([]store.Write, error) {
	rec := d.rec
	next := rec.Cursor + 1
	switch s.Type {
	case StepSendText:
		e.Input = map[string]any{"text": clip(s.Text)}
		return d.deliver(ctx, e, channel.Message{Text: s.Text}, next)
	case StepSendMedia:
		e.Input = map[string]any{"media_type": s.MediaType, "url": s.URL}
		if s.Caption != "" {
			e.Input["caption"] = clip(s.Caption)
		}
		return d.deliver(ctx, e, channel.Message{Media: &channel.Media{Type: channel.MediaType(s.MediaType), URL: s.URL, Caption: s.Caption}}, next)
	case StepSendTemplate:
		return d.sendTemplate(ctx, s, e, next)
	case StepButtons:
		return d.buttons(ctx, s, e)
	case StepSetField, StepClearField:
		var v any
		if s.Type == StepSetField {
			if err := json.Unmarshal(s.Value, &v); err != nil {
				return nil, fmt.Errorf("runtime: step %s value: %w", s.ID, err)
			}
			e.Input = map[string]any{"field_id": s.FieldID, "value": v}
		} else {
			e.Input = map[string]any{"field_id": s.FieldID}
		}
		sub, err := d.r.subs.SetField(ctx, rec.BotID, rec.SubscriberID, s.FieldID, v)
		if changed, err := d.changed(e, sub, err, "field_missing"); err != nil || d.failed(e) {
			return nil, err
		} else if changed {
			e.Outcome = map[string]any{"done": true}
		}
	case StepAddLabel, StepRemoveLabel:
		e.Input = map[string]any{"label_id": s.LabelID}
		had := slices.Contains(d.sub.Labels, s.LabelID)
		var sub Subscriber
		var err error
		if s.Type == StepAddLabel {
			sub, err = d.r.subs.AddLabel(ctx, rec.BotID, rec.SubscriberID, s.LabelID)
		} else {
			sub, err = d.r.subs.RemoveLabel(ctx, rec.BotID, rec.SubscriberID, s.LabelID)
		}
		if changed, err := d.changed(e, sub, err, "label_missing"); err != nil || d.failed(e) {
			return nil, err
		} else if changed {
			if s.Type == StepAddLabel {
				e.Outcome = map[string]any{"added": !had}
				if !had && !slices.Contains(rec.Added, s.LabelID) {
					rec.Added = append(rec.Added, s.LabelID)
				}
			} else {
				e.Outcome = map[string]any{"removed": had}
			}
		}
	case StepCondition:
		ok, details, err := d.evaluate(ctx, s)
		if err != nil {
			return nil, err
		}
		branch, target := "then", s.Then
		if !ok {
			branch, target = "else", s.Else
		}
		e.Decision = map[string]any{"match": s.Match, "result": ok, "branch": branch, "next_step_id": target, "conditions": details}
		return nil, d.jump(e, target)
	case StepWait:
		now := d.r.now()
		until := now.Add(time.Duration(s.Seconds) * time.Second).UTC()
		e.Input = map[string]any{"seconds": s.Seconds}
		e.Outcome = map[string]any{"until": until}
		rec.Status = StatusWaiting
		rec.Waiting = &Waiting{For: waitTime, StepID: s.ID, Until: until}
		rec.Cursor = next
		m, err := message(ResumeMessage, wake{BotID: rec.BotID, ExecutionID: rec.ID, Seq: rec.Seq + 1, Due: until}, hop(until.Sub(now)))
		if err != nil {
			return nil, err
		}
		rec.Outbox = append(rec.Outbox, m)
	case StepGoto:
		if s.StepID != "" {
			e.Decision = map[string]any{"next_step_id": s.StepID}
			return nil, d.jump(e, s.StepID)
		}
		return nil, d.gotoReaction(ctx, s, e)
	case StepEnd:
		rec.finish(StatusCompleted, EndStep, d.r.now())
	default:
		d.fail(e, StepError{Kind: "unsupported_step", Message: fmt.Sprintf("this runtime cannot execute %q steps", s.Type)})
	}
	if rec.Status == StatusRunning && s.Type != StepCondition && s.Type != StepGoto {
		rec.Cursor = next
	}
	return nil, nil
}

// jump continues the run at step id.
func (d *driver) jump(e *Entry, id string) error {
	i, ok := d.index[id]
	if !ok {
		d.fail(e, StepError{Kind: "unsupported_step", Message: fmt.Sprintf("no step %q in this version", id)})
		return nil
	}
	d.rec.Cursor = i
	return nil
}

// gotoReaction ends this run and plans the run of the target's published version.
func (d *driver) gotoReaction(ctx context.Context, s Step, e *Entry) error {
	rec := d.rec
	e.Input = map[string]any{"reaction_id": s.ReactionID}
	published, err := d.r.reactions.Published(ctx, rec.BotID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(published, func(p Published) bool { return p.ReactionID == s.ReactionID })
	if i < 0 {
		e.Outcome = map[string]any{"started": false}
		rec.finish(StatusCompleted, EndGotoNothing, d.r.now())
		return nil
	}
	if rec.Hops+1 > MaxHops {
		d.fail(e, StepError{Kind: "hop_limit", Message: fmt.Sprintf("the chain started %d reactions without suspending, the most it may", MaxHops)})
		return nil
	}
	p := published[i]
	spec := startSpec{
		ExecutionID: newExecutionID(d.r.now()), ReactionID: p.ReactionID, Version: p.Version, Hops: rec.Hops + 1, Previous: rec.ID,
		Trigger: TriggerInfo{Type: StepGoto, FromExecutionID: rec.ID},
	}
	e.Outcome = map[string]any{"started": true, "execution_id": spec.ExecutionID, "reaction_version": p.Version}
	rec.Next, rec.NextExecutionID = &spec, &spec.ExecutionID
	rec.finish(StatusCompleted, EndGoto, d.r.now())
	return nil
}

// wake is the body of a ResumeMessage.
type wake struct {
	BotID       string    `json:"bot_id"`
	ExecutionID string    `json:"execution_id"`
	Seq         int       `json:"seq"`
	Due         time.Time `json:"due"`
}

// hop is the delay of the continuation toward a time d away: whole seconds rounded up (SQS
// delays and Scheduler's times are whole seconds, so a wake never comes early). A wait
// longer than SQS can delay a message travels as one scheduled message (queue.MaxDelay),
// not in 15-minute hops; handleResume still sends an early continuation on, for a clock
// that disagrees.
func hop(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return min((d+time.Second-1)/time.Second*time.Second, queue.MaxScheduledDelay)
}

// open resolves the run's channel once per handler.
func (d *driver) open(ctx context.Context) (bool, error) {
	if d.opened {
		return true, nil
	}
	if c := d.h.channel; c != nil && c.bot == d.rec.BotID && c.kind == d.rec.Channel {
		d.adapter, d.conn, d.opened = c.adapter, c.conn, true // opened by the claim
		return true, nil
	}
	a, conn, err := d.r.channels.Open(ctx, d.rec.BotID, d.rec.Channel)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	d.adapter, d.conn, d.opened = a, conn, true
	return true, nil
}

// deliver sends m and moves the run to next; it records the provider's message id.
func (d *driver) deliver(ctx context.Context, e *Entry, m channel.Message, next int) ([]store.Write, error) {
	id, err := d.sendMessage(ctx, e, m)
	if err != nil || e.Error != nil {
		return nil, err
	}
	e.Outcome = map[string]any{"message_id": id}
	d.rec.Cursor = next
	return d.sent(ctx), nil
}

// sendMessage sends m to the subscriber. A provider's refusal fails the run (e.Error); a
// failure worth retrying is returned as *retryable. m goes with the idempotency key of the
// step's send (sendKey); quick replies go as inline buttons to a channel without them.
func (d *driver) sendMessage(ctx context.Context, e *Entry, m channel.Message) (string, error) {
	ok, err := d.open(ctx)
	if err != nil {
		return "", err
	}
	if !ok {
		d.channelMissing(e)
		return "", nil
	}
	if m.QuickReplies && !d.adapter.Capabilities().Sends(channel.MessageKindQuickReplies) {
		m.QuickReplies = false
	}
	m.Key = sendKey(d.rec.ID, d.rec.Seq+1, e.StepID)
	// What decided this send (the event's claim, the run's state) is on disk before the
	// provider sees it (deferSyncs).
	if err := store.DeferralOf(ctx).Sync(ctx); err != nil {
		return "", fmt.Errorf("runtime: sync before sending: %w", err)
	}
	id, err := d.adapter.Send(ctx, d.conn, d.sub.ExternalID, m)
	if err == nil {
		return id, nil
	}
	se := StepError{Kind: "unavailable", Message: "the provider could not be reached"}
	var ce *channel.Error
	if errors.As(err, &ce) {
		se.ProviderCode, se.ProviderReason = ce.Code, clipReason(ce.Message)
	}
	switch {
	case errors.Is(err, channel.ErrRateLimited):
		se.Kind, se.Message = "rate_limited", "the provider throttled the channel"
		var after time.Duration
		if ce != nil {
			after = ce.RetryAfter
		}
		return "", &retryable{err: err, after: after, se: se}
	case errors.Is(err, channel.ErrBlocked):
		se.Kind, se.Message = "blocked", "the subscriber blocked the bot or cannot receive messages"
	case errors.Is(err, channel.ErrOutsideWindow):
		se.Kind, se.Message = "outside_window", "outside the channel's session window: only a template may be sent"
	case errors.Is(err, channel.ErrRejected):
		se.Kind, se.Message = "rejected", "the provider refused the message"
	case errors.Is(err, channel.ErrInvalidCredentials):
		se.Kind, se.Message = "invalid_credentials", "the provider refused the channel's credentials; reconnect the channel"
	default:
		// ErrUnavailable, a timeout, or a failure the adapter did not classify: retried.
		return "", &retryable{err: err, se: se}
	}
	d.r.log.WarnContext(ctx, "runtime: the provider refused a message", "execution_id", d.rec.ID, "step_id", e.StepID,
		"kind", se.Kind, "provider_code", se.ProviderCode, "error", err)
	d.fail(e, se)
	return "", nil
}

// channelMissing fails the run at the step of e: the bot has no channel of the run's type.
func (d *driver) channelMissing(e *Entry) {
	d.fail(e, StepError{Kind: "channel_missing", Message: fmt.Sprintf("the bot has no %s channel connected", d.rec.Channel)})
}

// sendKey is the idempotency key (channel.Message.Key) of the message one step execution
// sends: the run, the entry the step will be written as, and the step ("exe_.../3/ask"). It
// is the same on every retry of that send, since a run's entry count moves only when a step
// is written, and differs for every other send, the same step executed again included (a
// menu shown twice is entry 3, then a later one). A step type that sends several messages
// must tell them apart by appending "/<part>" (1, 2, ...).
func sendKey(exe string, entry int, step string) string {
	return exe + "/" + strconv.Itoa(entry) + "/" + step
}

// sent is what a sent message counts: messages_out in the step's transaction, and the
// subscriber as active (once per handler; the counter dedupes per bucket).
func (d *driver) sent(ctx context.Context) []store.Write {
	now := d.r.now()
	if !d.touched {
		d.touched, d.h.touched = true, true
		if err := stats.TouchActive(ctx, d.r.store, d.rec.BotID, string(d.rec.Channel), d.rec.SubscriberID, now); err != nil {
			d.r.log.WarnContext(ctx, "runtime: could not count an active subscriber", "error", err)
		}
	}
	return stats.Increments(d.rec.BotID, string(d.rec.Channel), stats.MessagesOut, 1, now)
}

// buttons sends the step's message and suspends the run until a press (or ButtonsWait).
func (d *driver) buttons(ctx context.Context, s Step, e *Entry) ([]store.Write, error) {
	rec := d.rec
	seq := rec.Seq + 1 // this step's entry: the wait a press must name
	list := make([]map[string]any, len(s.Buttons))
	for i, b := range s.Buttons {
		item := map[string]any{"title": b.Title}
		switch {
		case b.Payload != "":
			item["payload"] = b.Payload
		case b.URL != "":
			item["url"] = b.URL
		default:
			item["step_id"] = b.StepID
		}
		list[i] = item
	}
	e.Input = map[string]any{"text": clip(s.Text), "style": s.Style, "buttons": list}
	old, err := d.r.loadPointer(ctx, rec.BotID, rec.SubscriberID)
	if err != nil {
		return nil, err
	}
	m := channel.Message{Text: s.Text, Buttons: channelButtons(rec.ID, seq, s.Buttons), QuickReplies: s.Style == styleQuickReplies}
	id, err := d.sendMessage(ctx, e, m)
	if err != nil || e.Error != nil {
		return nil, err
	}
	until := d.r.now().Add(ButtonsWait).UTC()
	e.Outcome = map[string]any{"message_id": id, "waiting_until": until}
	if m.QuickReplies && !d.adapter.Capabilities().Sends(channel.MessageKindQuickReplies) {
		e.Outcome["sent_as"] = styleInline // the channel has no quick replies
	}
	rec.Status = StatusWaiting
	rec.Waiting = &Waiting{For: waitButton, StepID: s.ID, Until: until}
	var prev int64
	if old != nil {
		prev = old.rev
		if old.ExecutionID != rec.ID {
			d.superseded = old
		}
	}
	targets := make([]int, len(s.Buttons))
	for i, b := range s.Buttons {
		targets[i] = -1
		if j, ok := d.index[b.StepID]; ok && b.StepID != "" {
			targets[i] = j
		}
	}
	pw, err := pointerWrite(rec.BotID, rec.SubscriberID, pointer{ExecutionID: rec.ID, Seq: seq, StepID: s.ID, Buttons: s.Buttons, Targets: targets}, prev, until)
	if err != nil {
		return nil, err
	}
	return append(d.sent(ctx), pw), nil
}

// clipAt bounds the texts a trace keeps of a step's input.
const clipAt = 200

// clipReason bounds a provider's reason for the trace.
func clipReason(s string) string {
	s = text.Strip(s, text.Line)
	if utf8.RuneCountInString(s) > 300 {
		return string([]rune(s)[:300]) + "…"
	}
	return s
}

// clip shortens a bot-authored text for the trace.
func clip(s string) string {
	if utf8.RuneCountInString(s) <= clipAt {
		return s
	}
	return string([]rune(s)[:clipAt]) + "…"
}

// handleResume wakes a run suspended by a wait step. A continuation that arrives before the
// wait is due (its sender's clock ran ahead) is sent on again.
func (r *Runtime) handleResume(ctx context.Context, m queue.Message) error {
	var w wake
	if err := m.Decode(&w); err != nil {
		return err
	}
	if now := r.now(); now.Before(w.Due) {
		next, err := message(ResumeMessage, w, hop(w.Due.Sub(now)))
		if err != nil {
			return err
		}
		return r.send(ctx, []outMessage{next})
	}
	rec, err := r.loadRun(ctx, w.BotID, w.ExecutionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil // expired or deleted with its bot
	}
	if err != nil {
		return err
	}
	h := &handling{token: token(), extended: r.now()}
	cause := "wake/" + w.ExecutionID + "/" + strconv.Itoa(w.Seq)
	switch {
	case rec.waitingFor(waitTime, w.Seq):
		rec.Status, rec.Waiting, rec.Cause, rec.Hops = StatusRunning, nil, cause, 1
		rec.LeaseToken, rec.LeaseUntil = h.token, r.now().Add(leaseFor)
		if err := r.save(ctx, rec, nil); err != nil {
			return err
		}
	case rec.Cause != cause:
		return nil // a duplicate continuation: the run has moved on
	}
	return r.drive(ctx, h, rec)
}
