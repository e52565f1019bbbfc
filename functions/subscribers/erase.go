package subscribers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// tombstone is what remains of an erased subscriber: nothing about the person, only what the
// bot's activity counters were derived from (the channel and when they arrived), so that
// counts rebuilt from stored items agree with the counters, and the time of the erasure.
type tombstone struct {
	Channel   string    `json:"channel"`
	CreatedAt time.Time `json:"created_at"`
	ErasedAt  time.Time `json:"erased_at"`
}

// Delete erases a subscriber (at revision expected, when given): the record with the
// person's names, external id, locale, time zone and field values, the identity, the search
// entries and the label memberships go in one transaction; a tombstone keeps the anonymous
// facts. The activity counters keep counting them. A later upsert of the same identity
// creates a new subscriber with a new id.
//
// What other items hold about the subscriber, the events in the event log (WithEvents, this
// family's EraseStep) and other families' copies (their Erase steps), is erased afterwards by
// the job purge.EraseJob, whose start is staged in the same transaction when the Service has
// an outbox (WithOutbox): an erasure that commits always starts it, even when the process
// ends right after the commit. Without them, the events alone are erased (erasure).
func (s *Service) Delete(ctx context.Context, bot, id string, expected *int64) error {
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return err
		}
		rec, err := s.load(ctx, bot, id)
		if err != nil {
			return err
		}
		if expected != nil && rec.revision != *expected {
			return httpapi.StaleRevision(rec.revision)
		}
		tomb, err := store.Encode(tombstone{Channel: rec.Channel, CreatedAt: rec.CreatedAt, ErasedAt: stamp(s.now())})
		if err != nil {
			return err
		}
		// The revision condition makes the deletes below exactly the record's derived items:
		// a record renamed or relabelled meanwhile fails it and is read again.
		writes := []store.Write{
			store.DeleteOp(subscriberKey(bot, id), store.RevisionIs(rec.revision)),
			store.DeleteOp(identityKey(bot, rec.Channel, rec.ExternalID), store.Always),
			store.PutOp(store.Item{Key: tombstoneKey(bot, id), Data: tomb, Revision: 1}, store.Always),
		}
		for _, w := range rec.indexWords() {
			writes = append(writes, store.DeleteOp(nameWordKey(bot, w, id), store.Always))
		}
		for _, l := range rec.Labels {
			writes = append(writes, store.DeleteOp(memberKey(bot, l, id), store.Always))
		}
		staged, committed, err := s.erasure(bot, id)
		if err != nil {
			return fmt.Errorf("erase subscriber: %w", err)
		}
		err = s.store.Transact(ctx, append(writes, staged...))
		if failedAt(err) == 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("erase subscriber: %w", err)
		}
		return committed(ctx)
	}
	return busy("subscriber " + id)
}

// WithOutbox returns a copy of the Service that stages the start of an erased subscriber's
// event erasure in the erasure's own transaction (see Delete).
func (s *Service) WithOutbox(o outbox.Stager) *Service {
	c := *s
	c.outbox = o
	return &c
}

// erasure returns what the erasure of subscriber id must write in its transaction so that
// what other items hold about the subscriber is erased too (the job purge.EraseJob), and
// what to call once it has committed.
//
// With an outbox and a job runner, the transaction stages the job's start twice: at once,
// and again purge.SweepDelay later (as a deleted bot's purge does), to erase what was
// written for the subscriber after the first pass went by: events of work already under
// way when the erasure committed (a change that committed just before it recording its
// events, a run's step), and, on DynamoDB, events its subscriber index listed late. The
// outbox delivers them at least once; the job is idempotent. A Service without an outbox or
// without a job runner (never so in a Lambda or the local process, whose family wiring has
// both) erases the events alone: the job jobEraseEvents after the commit, or to the end in
// the erasing call.
func (s *Service) erasure(bot, id string) ([]store.Write, func(context.Context) error, error) {
	e := purge.Erasure{BotID: bot, SubscriberID: id}
	if s.outbox == nil || s.jobs == nil {
		if s.events == nil {
			return nil, func(context.Context) error { return nil }, nil
		}
		return nil, func(ctx context.Context) error { return s.startPurge(ctx, jobEraseEvents, bot, id) }, nil
	}
	var msgs []queue.Message
	for _, delay := range []time.Duration{0, purge.SweepDelay} {
		m, err := jobs.StartMessage(delay, purge.EraseJob, e)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, m)
	}
	writes, deliver, err := s.outbox.Stage(msgs...)
	if err != nil {
		return nil, nil, err
	}
	return writes, func(ctx context.Context) error { deliver(ctx); return nil }, nil
}

// EraseStep is the family's step of the job purge.EraseJob: the erased subscriber's events
// (eraseEventsStep). Without an event log there is nothing to erase.
func (s *Service) EraseStep(ctx context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
	e, err := purge.DecodeErasure(payload)
	if err != nil {
		return "", false, err
	}
	if s.events == nil {
		return "", true, nil
	}
	return s.eraseEventsStep(ctx, purgeJob{Bot: e.BotID, ID: e.SubscriberID}, cursor)
}

// eraseEventsStep erases the next part of an erased subscriber's events (a bounded amount:
// eventlog's DeleteSubscriber) and is done when none is left.
func (s *Service) eraseEventsStep(ctx context.Context, job purgeJob, _ string) (string, bool, error) {
	if s.events == nil {
		return "", false, errors.New("subscribers: no event log to erase the events of " + job.ID + " from")
	}
	done, err := s.events.DeleteSubscriber(ctx, job.Bot, job.ID)
	if err != nil {
		return "", false, fmt.Errorf("erase the events of subscriber %s: %w", job.ID, err)
	}
	return "", done, nil
}
