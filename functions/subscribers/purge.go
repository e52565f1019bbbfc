package subscribers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/store"
)

// Deleting a label or a field is one small transaction; what it leaves in subscribers is
// removed afterwards by a background job, in steps of purgeBatch subscribers, each step
// idempotent. Until a job finishes, responses already hide what it removes: a deleted label
// is listed under labelGoneKey and filtered out, and values are only ever shown for fields
// that exist. Each subscriber the job changes gets a new revision, as any change does.

// The job kinds of this family.
const (
	jobPurgeLabel = "subscribers.remove_deleted_label"
	jobPurgeField = "subscribers.erase_deleted_field"
	// jobEraseEvents erases an erased subscriber's events from the event log (erase.go). An
	// erasure now starts purge.EraseJob, whose first step does the same; the kind stays for
	// the messages staged before that, and for an erasure without a job runner.
	jobEraseEvents = "subscribers.erase_events"
)

// purgeBatch is how many subscribers one step handles: well inside one Lambda invocation
// even at DynamoDB's latency.
const purgeBatch = 100

type purgeJob struct {
	Bot string `json:"bot_id"`
	ID  string `json:"id"`
}

type purgeStep func(ctx context.Context, job purgeJob, cursor string) (next string, done bool, err error)

// Jobs returns the family's job kinds with their steps.
func (s *Service) Jobs() map[string]jobs.Step {
	out := map[string]jobs.Step{}
	for kind, step := range s.purgeSteps() {
		out[kind] = func(ctx context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
			var job purgeJob
			if err := json.Unmarshal(payload, &job); err != nil {
				return "", false, fmt.Errorf("%s: payload: %w", kind, err)
			}
			return step(ctx, job, cursor)
		}
	}
	return out
}

// RegisterJobs adds the family's job kinds to reg.
func (s *Service) RegisterJobs(reg *jobs.Registry) {
	for kind, step := range s.Jobs() {
		reg.Register(kind, step)
	}
}

func (s *Service) purgeSteps() map[string]purgeStep {
	return map[string]purgeStep{jobPurgeLabel: s.removeLabelStep, jobPurgeField: s.eraseFieldStep, jobEraseEvents: s.eraseEventsStep}
}

// startPurge starts the job that finishes a deletion, or runs it to the end here when the
// Service has no job runner.
func (s *Service) startPurge(ctx context.Context, kind, bot, id string) error {
	job := purgeJob{Bot: bot, ID: id}
	if s.jobs != nil {
		return s.jobs.Start(ctx, kind, job)
	}
	step := s.purgeSteps()[kind]
	cursor := ""
	for {
		next, done, err := step(ctx, job, cursor)
		if err != nil || done {
			return err
		}
		cursor = next
	}
}

// removeLabelStep removes a deleted label from the next batch of its members. Members it
// has handled have no membership item any more, so every step reads the partition from the
// top; the label's memberships only shrink, since adding a deleted label fails its check.
func (s *Service) removeLabelStep(ctx context.Context, job purgeJob, _ string) (string, bool, error) {
	page, err := s.store.Query(ctx, store.Query{PK: memberPartition(job.Bot, job.ID), Limit: purgeBatch})
	if err != nil {
		return "", false, err
	}
	for _, it := range page.Items {
		if err := s.dropLabel(ctx, job.Bot, it.SK, job.ID); err != nil {
			return "", false, err
		}
	}
	if page.Next != "" {
		return "", false, nil
	}
	// No subscriber holds the label any more. The marker stays a while: a read that loaded a
	// subscriber just before the last removal and reads the markers just after it must
	// still hide the label.
	done, err := store.Encode(goneMarker{Done: true})
	if err != nil {
		return "", false, err
	}
	marker := store.Item{Key: labelGoneKey(job.Bot, job.ID), Data: done, Revision: 2, ExpiresAt: s.now().Add(goneLinger)}
	return "", true, s.store.Put(ctx, marker, store.Always)
}

// goneMarker is the document of a labelGoneKey item.
type goneMarker struct {
	// Done: every subscriber is rid of the label; the marker lingers for goneLinger.
	Done bool `json:"done,omitempty"`
}

// goneLinger outlasts any request by far: it bounds how stale a subscriber a request has
// read may be when it reads the markers.
const goneLinger = time.Hour

func (s *Service) goneMarker(ctx context.Context, bot, label string) (goneMarker, error) {
	it, err := s.store.Get(ctx, labelGoneKey(bot, label))
	if err != nil || len(it.Data) == 0 {
		return goneMarker{}, err
	}
	return store.Decode[goneMarker](it)
}

func (s *Service) dropLabel(ctx context.Context, bot, id, label string) error {
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return err
		}
		rec, err := s.load(ctx, bot, id)
		if isNotFound(err) || err == nil && !containsLabel(rec, label) {
			return s.store.Delete(ctx, memberKey(bot, label, id), store.Always)
		}
		if err != nil {
			return err
		}
		err = s.rewrite(ctx, bot, rec, Changes{RemoveLabels: []string{label}}, nil)
		if !errors.Is(err, errRetry) {
			return err
		}
	}
	return busy("subscriber " + id)
}

// eraseFieldStep erases a deleted field's values from the next batch of subscribers. Values
// are not indexed, so the job walks every subscriber of the bot, cursor by cursor.
func (s *Service) eraseFieldStep(ctx context.Context, job purgeJob, cursor string) (string, bool, error) {
	page, err := s.store.Query(ctx, store.Query{PK: botPrefix(job.Bot), Limit: purgeBatch, Cursor: cursor})
	if err != nil {
		return "", false, err
	}
	for _, it := range page.Items {
		rec, err := decodeRecord(it)
		if err != nil {
			return "", false, err
		}
		if _, ok := rec.Values[job.ID]; ok {
			if err := s.dropValue(ctx, job.Bot, rec.ID, job.ID); err != nil {
				return "", false, err
			}
		}
	}
	if page.Next != "" {
		return page.Next, false, nil
	}
	return "", true, s.store.Delete(ctx, fieldGoneKey(job.Bot, job.ID), store.Always)
}

func (s *Service) dropValue(ctx context.Context, bot, id, field string) error {
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return err
		}
		rec, err := s.load(ctx, bot, id)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if _, ok := rec.Values[field]; !ok {
			return nil
		}
		err = s.rewrite(ctx, bot, rec, Changes{}, map[string]any{field: nil})
		if !errors.Is(err, errRetry) {
			return err
		}
	}
	return busy("subscriber " + id)
}

// rewrite applies a change the system makes (not a client), without the checks a client's
// change passes: the change only removes.
func (s *Service) rewrite(ctx context.Context, bot string, rec record, c Changes, values map[string]any) error {
	after := rec.clone()
	c.apply(&after, values)
	now := s.now()
	after.UpdatedAt = stamp(now)
	pl, err := planChange(bot, &rec, after, now)
	if err != nil {
		return err
	}
	return pl.explain(s.store.Transact(ctx, pl.writes))
}
