package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// An event (an inbound update, a label added by a run, a direct run) is handled once: the
// first handler decides what it does (its plan: end a run waiting for buttons, resume one,
// start one) and writes that decision as the event's claim, conditioned on the claim not
// existing, in the same transaction as the event's messages_in counter. Every later delivery
// of the event reads the claim: done, nothing to do; not done (the first handler failed or
// crashed), it carries the same plan out, each action idempotent, then marks the claim done.

// claim is the stored decision of an event.
type claim struct {
	SubscriberID string    `json:"subscriber_id,omitempty"`
	Plan         []action  `json:"plan"`
	Done         bool      `json:"done"`
	ClaimedAt    time.Time `json:"claimed_at"`
	rev          int64
}

// The kinds of action.
const (
	actEnd    = "end"    // end a run waiting for buttons
	actResume = "resume" // resume a run waiting for buttons at a step
	actStart  = "start"  // start a run
)

// action is one thing an event does.
type action struct {
	Kind        string `json:"kind"`
	ExecutionID string `json:"execution_id,omitempty"`
	// Seq identifies the wait the action ends or resumes (the run's entry count then).
	Seq int `json:"seq,omitempty"`
	// PointerRev is the revision of the subscriber's buttons pointer the plan read.
	PointerRev int64 `json:"pointer_rev,omitempty"`
	// Reason (end) says why the wait ended.
	Reason string `json:"reason,omitempty"`
	// Step (resume) is where the run continues; Button the press that resumes it.
	Step   int        `json:"step,omitempty"`
	Button *pressed   `json:"button,omitempty"`
	Start  *startSpec `json:"start,omitempty"`
}

// pressed is a button press that resumes a run.
type pressed struct {
	Index  int    `json:"index"`
	Title  string `json:"title"`
	StepID string `json:"step_id"`
	// QuickReply: the subscriber typed the button's title rather than pressing it.
	QuickReply bool `json:"quick_reply,omitempty"`
}

// event is what a handler works on.
type event struct {
	key  store.Key
	bot  string
	kind channel.Kind
	// delivery is set for an inbound update, label for a label_added event.
	delivery *channel.Delivery
	label    *labelEvent
	// attempt is the queue's delivery count of the message.
	attempt int
}

// labelEvent is the body of a TriggerMessage: a label was added to a subscriber, by a run
// or over the API (LabelAddedMessage); or, with ReactionID instead of LabelID, a reaction is
// to run for a subscriber (RunReactionMessage).
type labelEvent struct {
	BotID        string       `json:"bot_id"`
	SubscriberID string       `json:"subscriber_id"`
	Kind         channel.Kind `json:"kind"`
	LabelID      string       `json:"label_id"`
	// Cause identifies the addition (run, entry, label; or subscriber, revision, label), or
	// the direct run's occasion (trigger:cause), so the event is handled once.
	Cause string `json:"cause"`
	// FromExecutionID is the run that added the label ("" for the API); Hops its place in
	// the chain (0 for the API: a new chain).
	FromExecutionID string `json:"from_execution_id"`
	Hops            int    `json:"hops"`
	// ReactionID (a direct run) is the reaction whose published version starts, and Trigger
	// the trigger type its run records (TriggerInboundEmail).
	ReactionID string `json:"reaction_id,omitempty"`
	Trigger    string `json:"trigger,omitempty"`
}

// LabelAddedMessage is the TriggerMessage of a label added to a subscriber outside a run:
// over the API, where the subscribers family stored the change as the subscriber's revision
// rev. The label's label_added reaction starts in a new chain (trigger reason "api"). The
// event's cause is (subscriber, revision, label), which names that one addition: however
// often the message is sent or delivered, the reaction runs once. k is the subscriber's
// channel type, which the run answers on.
func LabelAddedMessage(bot, subscriberID string, k channel.Kind, labelID string, rev int64) (queue.Message, error) {
	if bot == "" || subscriberID == "" || labelID == "" || rev < 1 {
		return queue.Message{}, fmt.Errorf("runtime: a label event needs a bot, subscriber, label and revision")
	}
	return queue.New(TriggerMessage, labelEvent{BotID: bot, SubscriberID: subscriberID, Kind: k, LabelID: labelID,
		Cause: subscriberID + "." + strconv.FormatInt(rev, 10) + "." + labelID})
}

func (r *Runtime) handleInbound(ctx context.Context, m queue.Message) error {
	var d channel.Delivery
	if err := m.Decode(&d); err != nil {
		return err
	}
	in := d.Inbound
	if d.BotID == "" || d.ChannelID == "" || in.UserID == "" {
		r.log.WarnContext(ctx, "runtime: inbound update without a bot, channel or sender ignored", "message_id", m.ID, "channel_id", d.ChannelID)
		return nil
	}
	update := in.UpdateID
	if update == "" || len(update) > 512 {
		// No usable provider id: the update's own content identifies it.
		sum := sha256.Sum256(m.Body)
		update = "sha256:" + hex.EncodeToString(sum[:16])
	}
	ev := &event{key: inboundKey(d.BotID, d.ChannelID, update), bot: d.BotID, kind: d.Kind, delivery: &d, attempt: m.Attempt}
	return r.handleEvent(ctx, &handling{token: token(), extended: r.now(), touched: true}, ev)
}

func (r *Runtime) handleTrigger(ctx context.Context, m queue.Message) error {
	var le labelEvent
	if err := m.Decode(&le); err != nil {
		return err
	}
	if le.BotID == "" || le.SubscriberID == "" || le.Cause == "" || (le.LabelID == "") == (le.ReactionID == "") ||
		(le.ReactionID != "" && !directTrigger(le.Trigger)) {
		r.log.WarnContext(ctx, "runtime: incomplete trigger event ignored", "message_id", m.ID)
		return nil
	}
	ev := &event{key: triggerKey(le.BotID, le.Cause), bot: le.BotID, kind: le.Kind, label: &le}
	return r.handleEvent(ctx, &handling{token: token(), extended: r.now()}, ev)
}

func (r *Runtime) loadClaim(ctx context.Context, key store.Key) (*claim, error) {
	it, err := r.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	c, err := store.Decode[claim](it)
	if err != nil {
		return nil, err
	}
	c.rev = it.Revision
	return &c, nil
}

// handleEvent claims ev (or reads its claim) and carries its plan out.
func (r *Runtime) handleEvent(ctx context.Context, h *handling, ev *event) error {
	cl, err := r.loadClaim(ctx, ev.key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if cl, err = r.claim(ctx, h, ev); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if cl.Done {
		return nil
	}
	done := *cl
	done.Done = true
	data, err := store.Encode(done)
	if err != nil {
		return err
	}
	it := store.Item{Key: ev.key, Data: data, Revision: cl.rev + 1, ExpiresAt: cl.ClaimedAt.Add(ClaimRetention)}
	for i, a := range cl.Plan {
		if i == len(cl.Plan)-1 && (a.Kind == actStart || a.Kind == actResume) {
			// The run this last action drives may mark the event done in its own last
			// write (driver.commit), which is then the handler's last write too.
			w := store.PutOp(it, store.Always)
			h.done = &w
		}
		if err := r.apply(ctx, h, ev, cl, a); err != nil {
			return err
		}
	}
	if h.doneWritten {
		return nil
	}
	if err := r.store.Put(ctx, it, store.RevisionIs(cl.rev)); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		// The work is done; a redelivery finds every action already applied.
		return fmt.Errorf("runtime: mark event done: %w", err)
	}
	return nil
}

// claim decides what ev does and writes the decision. When another handler claimed it
// first, its claim is returned. An inbound update's claim commits in the transaction of its
// sender's upsert, with the sender counted active; a plan that only starts a run creates the
// run in it too, for h to drive (h.started).
func (r *Runtime) claim(ctx context.Context, h *handling, ev *event) (*claim, error) {
	now := r.now()
	cause := ev.key.PK + "/" + ev.key.SK
	var cl *claim
	var run *record
	var events []eventlog.Event // the update's events, appended once its claim is stored
	var active []store.Write
	var sender *Subscriber // as the upsert that commits the claim leaves them
	// decide makes the claim of ev, given its sender (nil: none, or one the subscribers
	// family refuses), and returns its writes, the claim's first. It only plans: it runs
	// again when the upsert it commits with meets another writer.
	decide := func(sub *Subscriber, first, countActive bool) ([]store.Write, error) {
		cl = &claim{ClaimedAt: now.UTC(), Plan: []action{}}
		run, events, active, sender = nil, nil, nil, sub
		var extra []store.Write
		switch {
		case ev.delivery != nil:
			d := ev.delivery
			if sub == nil {
				cl.Done = true // a sender the subscribers family refuses: counted, nothing to run
			} else {
				cl.SubscriberID = sub.ID
				var err error
				if countActive {
					if active, err = stats.ActiveWrites(ctx, r.store, d.BotID, string(d.Kind), sub.ID, now, first); err != nil {
						return nil, err
					}
				}
				if cl.Plan, err = r.planInbound(ctx, ev, *sub, first); err != nil {
					return nil, err
				}
				events = r.inboundEvents(d.BotID, sub.ID, string(d.Kind), cause, first)
			}
			extra = stats.Increments(d.BotID, string(d.Kind), stats.MessagesIn, 1, now)
		case ev.label != nil:
			cl.SubscriberID = ev.label.SubscriberID
			plan := r.planLabel
			if ev.label.ReactionID != "" {
				plan = r.planReaction
			}
			p, err := plan(ctx, ev)
			if err != nil {
				return nil, err
			}
			cl.Plan = p
		}
		if len(cl.Plan) == 1 && cl.Plan[0].Kind == actStart && !cl.Done {
			run = r.newRecord(h, ev.bot, cl.SubscriberID, ev.kind, *cl.Plan[0].Start, cause, now)
			runWrites, _, err := r.saveWrites(run, nil, stats.Increments(ev.bot, string(ev.kind), stats.ReactionsStarted, 1, now)...)
			if err != nil {
				return nil, err
			}
			extra = append(extra, runWrites...)
		}
		data, err := store.Encode(cl)
		if err != nil {
			return nil, err
		}
		put := store.PutOp(store.Item{Key: ev.key, Data: data, Revision: 1, ExpiresAt: now.Add(ClaimRetention)}, store.MustNotExist)
		return append(append([]store.Write{put}, active...), extra...), nil
	}
	commit := func(countActive bool) error {
		if d := ev.delivery; d != nil {
			ok, err := r.upsert(ctx, d, ev.attempt, func(sub Subscriber, first bool) ([]store.Write, error) {
				return decide(&sub, first, countActive)
			})
			if err != nil || ok {
				return err
			}
		}
		writes, err := decide(nil, false, false)
		if err != nil {
			return err
		}
		return r.store.Transact(ctx, writes)
	}

	if d := ev.delivery; d != nil {
		// The channel (or its whole bot) may be gone since the webhook accepted the update.
		// Then nothing of it may be written back, least of all a subscriber of a deleted bot
		// whose data the purge is erasing: the update is settled as done.
		a, conn, err := r.channels.Open(ctx, d.BotID, d.Kind)
		if errors.Is(err, ErrNotFound) {
			r.log.InfoContext(ctx, "runtime: update for a channel that is gone ignored", "channel_id", d.ChannelID)
			cl = &claim{ClaimedAt: now.UTC(), Plan: []action{}, Done: true}
			data, err := store.Encode(cl)
			if err != nil {
				return nil, err
			}
			err = r.store.Put(ctx, store.Item{Key: ev.key, Data: data, Revision: 1, ExpiresAt: now.Add(ClaimRetention)}, store.MustNotExist)
			if errors.Is(err, store.ErrConditionFailed) {
				return r.loadClaim(ctx, ev.key)
			}
			if err != nil {
				return nil, fmt.Errorf("runtime: claim event: %w", err)
			}
			cl.rev = 1
			return cl, nil
		}
		if err != nil {
			return nil, err
		}
		r.answerCallback(ctx, d, a, conn)
		h.channel = &openChannel{bot: d.BotID, kind: d.Kind, adapter: a, conn: conn}
	}
	err := commit(true)
	if stats.ActiveConflict(err, 1, active) {
		// Another update of the sender counted them meanwhile: count apart (idempotent).
		if err = commit(false); err == nil {
			if err := stats.TouchActive(ctx, r.store, ev.bot, string(ev.kind), cl.SubscriberID, now); err != nil {
				r.log.WarnContext(ctx, "runtime: could not count an active subscriber", "error", err)
			}
		}
	}
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 0 {
		return r.loadClaim(ctx, ev.key) // claimed concurrently: follow that decision
	}
	if err != nil {
		return nil, fmt.Errorf("runtime: claim event: %w", err)
	}
	h.sender = sender
	if run != nil {
		run.rev = 1
		h.started = run
		events = append(events, r.savedEvents(run, true, nil)...)
	}
	if r.events != nil {
		eventlog.EmitAll(ctx, r.events, r.log, events)
	}
	cl.rev = 1
	return cl, nil
}

// answerCallback acknowledges a button press to providers that want it (Telegram shows a
// spinner until then). It is cosmetic: a failure is logged, never retried.
func (r *Runtime) answerCallback(ctx context.Context, d *channel.Delivery, a channel.Adapter, conn channel.Connection) {
	if d.Inbound.CallbackID == "" {
		return
	}
	if ca, ok := a.(channel.CallbackAnswerer); ok {
		if err := ca.AnswerCallback(ctx, conn, d.Inbound.CallbackID); err != nil {
			r.log.WarnContext(ctx, "runtime: answering a button press failed", "channel_id", d.ChannelID, "error", err)
		}
	}
}

// upsert creates or updates the sender and commits with it the writes with returns, given
// the sender as the upsert leaves it and whether this is a first contact: the subscriber was
// created by this update, or, on a retry (attempt > 1) that finds it created by an earlier
// attempt, created after the update was received. ok is false, and nothing is written, when
// the subscribers family refuses the identity itself (a malformed user id): such an update
// is counted and otherwise ignored.
func (r *Runtime) upsert(ctx context.Context, d *channel.Delivery, attempt int, with func(sub Subscriber, first bool) ([]store.Write, error)) (ok bool, err error) {
	in := d.Inbound
	seen := in.At
	if now := r.now(); seen.IsZero() || seen.After(now) {
		seen = now
	}
	received := d.ReceivedAt.UTC().Truncate(time.Second)
	withFirst := func(sub Subscriber, created bool) ([]store.Write, error) {
		return with(sub, created || (attempt > 1 && !d.ReceivedAt.IsZero() && !sub.CreatedAt.Before(received)))
	}
	p := Profile{FirstName: personName(in.FirstName), LastName: personName(in.LastName), Locale: in.Locale, SeenAt: seen}
	_, _, err = r.subs.Upsert(ctx, d.BotID, d.Kind, in.UserID, p, withFirst)
	if errors.Is(err, ErrInvalid) {
		// A profile value the subscribers family refuses (an odd locale): keep the identity.
		_, _, err = r.subs.Upsert(ctx, d.BotID, d.Kind, in.UserID, Profile{SeenAt: seen}, withFirst)
	}
	if errors.Is(err, ErrInvalid) {
		r.log.WarnContext(ctx, "runtime: the subscribers family refuses this sender's identity; update ignored", "channel_id", d.ChannelID)
		return false, nil
	}
	return err == nil, err
}

// personName keeps a messenger user's name within the subscribers family's rules: at most
// 100 characters of what a name may hold (text.Name; a user's name is theirs, so what
// does not fit is left out rather than the name refused).
func personName(s string) string {
	s = strings.TrimSpace(text.Strip(s, text.Name))
	if utf8.RuneCountInString(s) > 100 {
		s = string([]rune(s)[:100])
	}
	return s
}

// planInbound decides what an inbound update does (docs/runtime.md, "Which run an update
// starts").
func (r *Runtime) planInbound(ctx context.Context, ev *event, sub Subscriber, first bool) ([]action, error) {
	in := ev.delivery.Inbound
	base := TriggerInfo{UpdateID: in.UpdateID}
	if in.Payload != "" {
		base.Message = &Redacted{Kind: "button"}
	} else {
		base.Message = &Redacted{Kind: "text", Length: utf8.RuneCountInString(in.Text)}
	}
	ptr, err := r.loadPointer(ctx, ev.bot, sub.ID)
	if err != nil {
		return nil, err
	}
	plan := []action{}
	// A button of a run's own (one whose press resumes the run at a step).
	if exe, seq, idx, ok := parseRunPayload(in.Payload); ok {
		if ptr != nil && ptr.ExecutionID == exe && ptr.Seq == seq && idx < len(ptr.Targets) && ptr.Targets[idx] >= 0 {
			b := ptr.Buttons[idx]
			return append(plan, ptr.resume(idx, b, false)), nil
		}
		return plan, nil // a button of an earlier message: its run has moved on
	}
	payload, text := in.Payload, in.Text
	reason := ""
	if ptr != nil {
		end := action{Kind: actEnd, ExecutionID: ptr.ExecutionID, Seq: ptr.Seq, PointerRev: ptr.rev, Reason: EndReply}
		if payload == "" {
			// A quick reply arrives as its title on some channels (Telegram's reply keyboard).
			if i := ptr.titled(text); i >= 0 {
				b := ptr.Buttons[i]
				switch {
				case b.StepID != "" && i < len(ptr.Targets) && ptr.Targets[i] >= 0:
					return append(plan, ptr.resume(i, b, true)), nil
				case b.Payload != "":
					payload, text, reason = b.Payload, "", "quick_reply"
				}
			}
		}
		if payload != "" {
			end.Reason = EndButtonPayload
		}
		plan = append(plan, end)
	}
	published, err := r.reactions.Published(ctx, ev.bot)
	if err != nil {
		return nil, err
	}
	p, info, ok := r.match(published, payload, text, first)
	if !ok {
		return plan, nil
	}
	info.UpdateID, info.Message = base.UpdateID, base.Message
	if reason != "" {
		info.Reason = reason
	}
	spec := startSpec{ExecutionID: newExecutionID(r.now()), ReactionID: p.ReactionID, Version: p.Version, Trigger: info, Hops: 1}
	return append(plan, action{Kind: actStart, Start: &spec}), nil
}

// planLabel decides what a label_added event does: start the oldest published reaction
// whose trigger is that label, unless the chain is already MaxHops long.
func (r *Runtime) planLabel(ctx context.Context, ev *event) ([]action, error) {
	le := ev.label
	published, err := r.reactions.Published(ctx, ev.bot)
	if err != nil {
		return nil, err
	}
	for _, p := range published {
		if p.Trigger.Type != TriggerLabelAdded || p.Trigger.LabelID != le.LabelID {
			continue
		}
		if le.Hops+1 > MaxHops {
			r.log.WarnContext(ctx, "runtime: label_added reaction not started: the chain started too many reactions without suspending",
				"bot_id", le.BotID, "execution_id", le.FromExecutionID, "reaction_id", p.ReactionID, "max_hops", MaxHops)
			return []action{}, nil
		}
		spec := startSpec{
			ExecutionID: newExecutionID(r.now()), ReactionID: p.ReactionID, Version: p.Version, Hops: le.Hops + 1,
			Trigger: TriggerInfo{Type: TriggerLabelAdded, LabelID: le.LabelID, FromExecutionID: le.FromExecutionID},
		}
		if le.FromExecutionID == "" {
			spec.Trigger.Reason = "api"
		}
		return []action{{Kind: actStart, Start: &spec}}, nil
	}
	return []action{}, nil
}

// apply carries out one action of an event's plan; each is idempotent.
func (r *Runtime) apply(ctx context.Context, h *handling, ev *event, cl *claim, a action) error {
	cause := ev.key.PK + "/" + ev.key.SK
	switch a.Kind {
	case actEnd:
		rec, err := r.loadRun(ctx, ev.bot, a.ExecutionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		if !rec.waitingFor(waitButton, a.Seq) {
			return nil
		}
		rec.finish(StatusCompleted, a.Reason, r.now())
		rec.Cause = cause
		if err := r.save(ctx, rec, nil); err != nil {
			return err
		}
		r.dropPointer(ctx, ev.bot, cl.SubscriberID, a.PointerRev)
		return nil
	case actResume:
		rec, err := r.loadRun(ctx, ev.bot, a.ExecutionID)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		switch {
		case rec.waitingFor(waitButton, a.Seq):
			stepID := rec.Waiting.StepID
			rec.Status, rec.Waiting, rec.Cause, rec.Hops = StatusRunning, nil, cause, 1
			rec.Cursor = a.Step
			rec.LeaseToken, rec.LeaseUntil = h.token, r.now().Add(leaseFor)
			decision := map[string]any{"button": a.Button.Index, "title": a.Button.Title, "next_step_id": a.Button.StepID}
			if a.Button.QuickReply {
				decision["quick_reply"] = true
			}
			e := &Entry{StepID: stepID, Type: StepButtons, At: ms(r.now()), Attempts: 1, Decision: decision,
				Outcome: map[string]any{"resumed": true}}
			if err := r.save(ctx, rec, e); err != nil {
				return err
			}
			r.dropPointer(ctx, ev.bot, cl.SubscriberID, a.PointerRev)
		case rec.Cause != cause:
			return nil // resumed by another event meanwhile
		}
		return r.drive(ctx, h, rec)
	case actStart:
		rec, err := r.startRun(ctx, h, ev.bot, cl.SubscriberID, ev.kind, *a.Start, cause)
		if err != nil {
			return err
		}
		return r.drive(ctx, h, rec)
	}
	return fmt.Errorf("runtime: unknown action %q", a.Kind)
}

// startRun creates the run spec describes (counting reactions_started with it), or loads it
// when an earlier attempt (or this handler's claim, h.started) created it.
func (r *Runtime) startRun(ctx context.Context, h *handling, bot, sub string, k channel.Kind, spec startSpec, cause string) (*record, error) {
	if rec := h.started; rec != nil && rec.ID == spec.ExecutionID {
		h.started = nil
		return rec, nil
	}
	rec, err := r.loadRun(ctx, bot, spec.ExecutionID)
	if err == nil {
		return rec, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	now := r.now()
	rec = r.newRecord(h, bot, sub, k, spec, cause, now)
	err = r.save(ctx, rec, nil, stats.Increments(bot, string(k), stats.ReactionsStarted, 1, now)...)
	if errors.Is(err, errConflict) {
		return r.loadRun(ctx, bot, spec.ExecutionID)
	}
	return rec, err
}

// newRecord is the record of the run spec describes, starting now for cause, leased to h.
func (r *Runtime) newRecord(h *handling, bot, sub string, k channel.Kind, spec startSpec, cause string, now time.Time) *record {
	rec := newRun(bot, Subscriber{ID: sub, Channel: k}, spec, now)
	rec.Cause = cause
	rec.LeaseToken, rec.LeaseUntil = h.token, now.Add(leaseFor)
	return rec
}

// waitingFor reports whether the run waits for what (time or button) at entry count seq.
func (rec *record) waitingFor(what string, seq int) bool {
	return rec.Status == StatusWaiting && rec.Waiting != nil && rec.Waiting.For == what && rec.Seq == seq
}

// finish ends the run.
func (rec *record) finish(s Status, reason string, now time.Time) {
	rec.Status, rec.Waiting = s, nil
	if reason != "" {
		rec.EndReason = &reason
	}
	t := now.UTC().Truncate(time.Second)
	rec.EndedAt = &t
	rec.LeaseToken, rec.LeaseUntil = "", time.Time{}
}

func ms(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }
