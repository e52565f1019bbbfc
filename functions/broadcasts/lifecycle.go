package broadcasts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Status is where a broadcast is in its life.
type Status string

// The statuses and the transitions between them; every other transition answers 409
// invalid_transition with the current status. Archived is a flag beside the status.
//
//	draft                        → scheduled  schedule (confirm: true, every check passed)
//	scheduled                    → running    the send job, at send_at
//	scheduled, running           → paused     pause: the running step stops at its next batch
//	paused                       → running    resume: a new run continues where pause stopped
//	                                          (scheduled again when send_at is still ahead)
//	running                      → completed  the send job, once no row is planned or sending
//	running                      → failed     the send job, when nothing can be sent (every
//	                                          channel of the broadcast is gone)
//	scheduled, running, paused   → canceled   cancel: the rows still planned become canceled
//
// Only a draft changes (PATCH). Archive applies to draft, completed, canceled and failed.
const (
	Draft     Status = "draft"
	Scheduled Status = "scheduled"
	Running   Status = "running"
	Paused    Status = "paused"
	Completed Status = "completed"
	Canceled  Status = "canceled"
	Failed    Status = "failed"
)

// Statuses lists every status.
func Statuses() []Status {
	return []Status{Draft, Scheduled, Running, Paused, Completed, Canceled, Failed}
}

var from = map[string][]Status{
	"schedule": {Draft},
	"pause":    {Scheduled, Running},
	"resume":   {Paused},
	"cancel":   {Scheduled, Running, Paused},
	"archive":  {Draft, Completed, Canceled, Failed},
}

var pastTense = map[string]string{"schedule": "scheduled", "pause": "paused", "resume": "resumed", "cancel": "canceled", "archive": "archived"}

func can(action string, rec record) error {
	if slices.Contains(from[action], rec.Status) && !rec.Archived {
		return nil
	}
	state := string(rec.Status)
	if rec.Archived {
		state = "archived"
	}
	return httpapi.Errorf(httpapi.KindConflict, "invalid_transition", "a %s broadcast cannot be %s", state, pastTense[action]).
		With("state", rec.Status)
}

// transit loads a second-generation broadcast for action under expected: 404, 409
// stale_revision, 409 invalid_transition in that order.
func (s *Service) transit(ctx context.Context, bot, id string, expected int64, action string) (record, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return record{}, err
	}
	if rec.Revision != expected {
		return record{}, httpapi.StaleRevision(rec.Revision)
	}
	return rec, can(action, rec)
}

// JobSend is the job kind of a broadcast's send (SendStep).
const JobSend = "broadcasts.send"

type jobPayload struct {
	Bot       string `json:"bot_id"`
	Broadcast string `json:"broadcast_id"`
	Legacy    bool   `json:"legacy,omitempty"`
	Epoch     int64  `json:"epoch"`
}

// startJob returns the writes that start run rec.Epoch of the send job after delay, to
// commit with the change that starts it, and what delivers the message afterwards.
func (s *Service) startJob(rec record, delay time.Duration) ([]store.Write, func(context.Context), error) {
	m, err := jobs.StartMessage(min(max(delay, 0), queue.MaxScheduledDelay), JobSend,
		jobPayload{Bot: rec.bot, Broadcast: rec.ID, Legacy: rec.Legacy, Epoch: rec.Epoch})
	if err != nil {
		return nil, nil, err
	}
	return s.d.Outbox.Stage(m)
}

// Schedule bounds.
const (
	pastGrace = time.Minute
	// MaxScheduleAhead is how far ahead a broadcast may be scheduled.
	MaxScheduleAhead = 365 * 24 * time.Hour
)

// Schedule launches a draft at sendAt (now when nil) once every check passes: 422
// broadcast_content_invalid naming each channel whose content is missing or invalid, else
// 409 broadcast_not_ready naming every reason. The content versions are frozen and the send
// job started in the same transaction.
func (s *Service) Schedule(ctx context.Context, bot, id string, expected int64, sendAt *time.Time) (Broadcast, error) {
	now := stamp(s.d.Now())
	at := now
	if sendAt != nil {
		var p httpapi.Problems
		switch {
		case sendAt.Before(now.Add(-pastGrace)):
			p.Add("send_at", "is in the past: give a time from now on, or leave it out to send now")
		case sendAt.After(now.Add(MaxScheduleAhead)):
			p.Add("send_at", "at most %d days ahead", int(MaxScheduleAhead/(24*time.Hour)))
		case sendAt.After(now):
			at = stamp(*sendAt)
		}
		if err := p.Err(); err != nil {
			return Broadcast{}, err
		}
	}
	rec, err := s.transit(ctx, bot, id, expected, "schedule")
	if err != nil {
		return Broadcast{}, err
	}
	pf, err := s.preflight(ctx, rec, false)
	if err != nil {
		return Broadcast{}, err
	}
	if err := pf.launchError(); err != nil {
		return Broadcast{}, err
	}
	rec.Status, rec.ContentVersions, rec.SendAt, rec.ScheduledAt = Scheduled, pf.versions, &at, &now
	rec.Epoch++
	start, deliver, err := s.startJob(rec, at.Sub(now))
	if err != nil {
		return Broadcast{}, err
	}
	if err := s.save(ctx, &rec, expected, start, 0); err != nil {
		return Broadcast{}, err
	}
	deliver(ctx)
	return rec.Broadcast, nil
}

// Pause stops a broadcast: the running step stops at its next batch.
func (s *Service) Pause(ctx context.Context, bot, id string, expected int64) (Broadcast, error) {
	rec, err := s.transit(ctx, bot, id, expected, "pause")
	if err != nil {
		return Broadcast{}, err
	}
	s.pauseRecord(&rec)
	if err := s.save(ctx, &rec, expected, nil, 0); err != nil {
		return Broadcast{}, err
	}
	return rec.Broadcast, nil
}

func (s *Service) pauseRecord(rec *record) {
	now := stamp(s.d.Now())
	rec.Status, rec.PausedAt, rec.StatusReason = Paused, &now, ""
}

// Resume continues a paused broadcast: a new run sends the rows still planned (or plans on
// where the plan stopped), never from the start.
func (s *Service) Resume(ctx context.Context, bot, id string, expected int64) (Broadcast, error) {
	rec, err := s.transit(ctx, bot, id, expected, "resume")
	if err != nil {
		return Broadcast{}, err
	}
	return s.restart(ctx, rec, expected, func(r *record) bool { s.resumeRecord(r); return true })
}

func (s *Service) resumeRecord(rec *record) {
	rec.Status, rec.PausedAt, rec.StatusReason = Running, nil, ""
	if rec.StartedAt == nil {
		rec.Status = Scheduled
	}
}

// Cancel ends a broadcast that has not finished: the rows still planned become canceled,
// what was sent stays sent.
func (s *Service) Cancel(ctx context.Context, bot, id string, expected int64) (Broadcast, error) {
	rec, err := s.transit(ctx, bot, id, expected, "cancel")
	if err != nil {
		return Broadcast{}, err
	}
	return s.restart(ctx, rec, expected, s.cancelRecord)
}

func (s *Service) cancelRecord(rec *record) bool {
	started := rec.StartedAt != nil
	now := stamp(s.d.Now())
	rec.Status, rec.FinishedAt, rec.PausedAt, rec.StatusReason = Canceled, &now, nil, ""
	return started
}

// restart applies change and starts a new run of the send job when change says so, in one
// transaction; the new epoch stops every step of the run before.
func (s *Service) restart(ctx context.Context, rec record, expected int64, change func(*record) bool) (Broadcast, error) {
	run := change(&rec)
	rec.Epoch++
	var extra []store.Write
	deliver := func(context.Context) {}
	if run {
		delay := time.Duration(0)
		if rec.SendAt != nil {
			delay = rec.SendAt.Sub(s.d.Now())
		}
		var err error
		if extra, deliver, err = s.startJob(rec, delay); err != nil {
			return Broadcast{}, err
		}
	}
	if err := s.save(ctx, &rec, expected, extra, 0); err != nil {
		return Broadcast{}, err
	}
	deliver(ctx)
	return rec.Broadcast, nil
}

// Archive retires a draft or finished broadcast: it stays readable with its report and no
// longer counts toward MaxBroadcasts, nor lists without archived=true.
func (s *Service) Archive(ctx context.Context, bot, id string, expected int64) (Broadcast, error) {
	rec, err := s.transit(ctx, bot, id, expected, "archive")
	if err != nil {
		return Broadcast{}, err
	}
	now := stamp(s.d.Now())
	rec.Archived, rec.ArchivedAt = true, &now
	if err := s.save(ctx, &rec, expected, nil, -1); err != nil {
		return Broadcast{}, err
	}
	return rec.Broadcast, nil
}

// LegacyStatus is the answer of pause, resume and cancel on a legacy broadcast.
type LegacyStatus struct {
	Status string `json:"status"`
}

// legacyAnswers are the statuses the spec names for each action.
var legacyAnswers = map[string]string{"pause": "pausing", "resume": "resuming", "cancel": "canceled"}

// Act runs pause, resume or cancel on the broadcast id names, second generation first (body
// {expected_revision}, read by revision; the broadcast in return), else legacy (body
// ignored, a LegacyStatus in return).
func (s *Service) Act(ctx context.Context, bot, id, action string, revision func() (int64, error)) (any, error) {
	rec, err := s.lookup(ctx, bot, id)
	if err != nil {
		return nil, err
	}
	if !rec.Legacy {
		expected, err := revision()
		if err != nil {
			return nil, err
		}
		switch action {
		case "pause":
			return s.Pause(ctx, bot, id, expected)
		case "resume":
			return s.Resume(ctx, bot, id, expected)
		default:
			return s.Cancel(ctx, bot, id, expected)
		}
	}
	for range 5 {
		if err := can(action, rec); err != nil {
			return nil, err
		}
		expected := rec.Revision
		switch action {
		case "pause":
			s.pauseRecord(&rec)
			err = s.save(ctx, &rec, expected, nil, 0)
		case "resume":
			_, err = s.restart(ctx, rec, expected, func(r *record) bool { s.resumeRecord(r); return true })
		default:
			_, err = s.restart(ctx, rec, expected, s.cancelRecord)
		}
		if httpapi.KindOf(err) != httpapi.KindConflict || !isStale(err) {
			if err != nil {
				return nil, err
			}
			return LegacyStatus{Status: legacyAnswers[action]}, nil
		}
		if rec, err = s.loadKey(ctx, bot, legacyKey(bot, id)); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("broadcast %s keeps changing: %w", id, store.ErrUnavailable)
}

func isStale(err error) bool {
	var he *httpapi.Error
	return errors.As(err, &he) && he.Code == "stale_revision"
}
