package playbooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// JobRecover is the job kind that rolls back an install or an upgrade its process
// abandoned: started when either begins, it runs the stuck time (Config.StuckAfter) later
// and finds it finished (nothing to do), still running with a recent heartbeat (it looks
// again later) or with an old one (rolled back, or undone).
const JobRecover = "playbooks.recover"

// recoverPayload names the install a JobRecover job looks at.
type recoverPayload struct {
	BotID     string `json:"bot_id"`
	InstallID string `json:"install_id"`
}

// delayedStarter is a jobs.Starter that can start a job later (the queue runner).
type delayedStarter interface {
	StartAfter(ctx context.Context, delay time.Duration, kind string, payload any) error
}

// InstallRequest is the body of POST .../install.
type InstallRequest struct {
	ExpectedRevision *int64 `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (r *InstallRequest) Validate() error {
	var p httpapi.Problems
	p.RequireRevision(r.ExpectedRevision)
	return p.Err()
}

// Install installs the caller's install: every resource of its playbook version, created
// through the family that owns it, all or nothing. Before each create the install's journal
// records the intent (kind and name), after it the id: a failure deletes what was created,
// newest first, and leaves the install failed with the error (installing again is allowed);
// a process that dies mid-way leaves a journal that the next read, or JobRecover, rolls back
// the same way once the install has been silent for Config.StuckAfter.
func (s *Service) Install(ctx context.Context, p *auth.Principal, id string, req InstallRequest) (Install, error) {
	rec, err := s.locate(ctx, p, botWrite, id)
	if err != nil {
		return Install{}, err
	}
	if err := checkRevision(rec, req.ExpectedRevision); err != nil {
		return Install{}, err
	}
	if rec.Status == StatusInstalling || rec.Status == StatusInstalled {
		return Install{}, stateError(rec, "install it again")
	}
	if len(unfinished(rec.Journal)) > 0 {
		if err := s.rollback(ctx, &rec); err != nil {
			return Install{}, err
		}
	}
	pb, ok := s.catalog.Get(rec.PlaybookID, rec.Version)
	if !ok {
		return Install{}, fmt.Errorf("playbooks: install %s names %s v%d, not in the catalog", rec.ID, rec.PlaybookID, rec.Version)
	}
	plan, err := s.plan(ctx, rec, pb, p.Entitlements)
	if err != nil {
		return Install{}, err
	}
	if !plan.Ready {
		return Install{}, notReady(plan)
	}
	answers := pb.Answers(rec.Answers)
	resources, err := pb.Render(answers, nil)
	if err != nil {
		return Install{}, err
	}
	rec.Status, rec.Journal, rec.Error, rec.Resources = StatusInstalling, []JournalEntry{}, nil, nil
	s.beat(&rec)
	if err := s.save(ctx, &rec); err != nil {
		return Install{}, err
	}
	s.scheduleRecovery(ctx, rec)

	refs := map[string]string{}
	var created []Resource
	for _, res := range resources {
		kind, err := s.kind(res.Kind)
		if err != nil {
			return Install{}, s.fail(ctx, &rec, nil, err)
		}
		spec, err := catalog.RenderBody(res.Spec, answers, refs)
		if err != nil {
			return Install{}, s.fail(ctx, &rec, nil, err)
		}
		entry := JournalEntry{Kind: res.Kind, Key: res.Key, Name: res.Name, State: JournalIntent, At: stamp(s.now())}
		rec.Journal = append(rec.Journal, entry)
		s.beat(&rec)
		if err := s.save(ctx, &rec); err != nil {
			rec.Journal = rec.Journal[:len(rec.Journal)-1]
			return Install{}, s.fail(ctx, &rec, nil, err)
		}
		ex, err := kind.Create(ctx, rec.BotID, spec)
		if err != nil {
			// The family refused the create: nothing of this entry exists.
			rec.Journal = rec.Journal[:len(rec.Journal)-1]
			return Install{}, s.fail(ctx, &rec, &entry, err)
		}
		last := &rec.Journal[len(rec.Journal)-1]
		last.State, last.ID = JournalCreated, ex.ID
		refs[catalog.Ref(res.Kind, res.Key)] = ex.ID
		created = append(created, Resource{Kind: res.Kind, Key: res.Key, ID: ex.ID, Name: ex.Name, Fingerprint: ex.Fingerprint})
		s.beat(&rec)
		if err := s.save(ctx, &rec); err != nil {
			return Install{}, s.fail(ctx, &rec, nil, err)
		}
	}
	now := stamp(s.now())
	rec.Status, rec.Resources, rec.Journal, rec.InstalledAt, rec.HeartbeatAt = StatusInstalled, created, nil, &now, nil
	if err := s.save(ctx, &rec); err != nil {
		return Install{}, s.fail(ctx, &rec, nil, err)
	}
	return s.view(rec), nil
}

// beat records that the installing process is alive.
func (s *Service) beat(rec *record) {
	t := s.now().UTC()
	rec.HeartbeatAt = &t
}

// busy reports whether a process is (or was, until it died) installing or upgrading rec.
func busy(rec record) bool { return rec.Status == StatusInstalling || rec.Upgrading != nil }

// stuck reports whether rec is installing or upgrading without a heartbeat for the stuck
// time.
func (s *Service) stuck(rec record) bool {
	return busy(rec) && (rec.HeartbeatAt == nil || s.now().Sub(*rec.HeartbeatAt) > s.stuckAfter)
}

// scheduleRecovery starts JobRecover for rec the stuck time from now. Without a job runner (or
// when it refuses) reads still recover the install: the failure is logged, not returned.
func (s *Service) scheduleRecovery(ctx context.Context, rec record) {
	if s.jobs == nil {
		return
	}
	payload := recoverPayload{BotID: rec.BotID, InstallID: rec.ID}
	var err error
	if d, ok := s.jobs.(delayedStarter); ok {
		err = d.StartAfter(ctx, s.stuckAfter+5*time.Second, JobRecover, payload)
	} else {
		err = s.jobs.Start(ctx, JobRecover, payload)
	}
	if err != nil {
		s.log.WarnContext(ctx, "playbooks: the recovery job did not start; reads recover the install", "install_id", rec.ID, "error", err)
	}
}

// fail rolls back what rec's journal created and leaves the install failed with cause. It
// returns the error the request answers: 409 install_failed with the family's own error
// code and detail (an internal cause is only logged).
func (s *Service) fail(ctx context.Context, rec *record, at *JournalEntry, cause error) error {
	ctx = context.WithoutCancel(ctx)
	f := Failure{Code: "internal_error", Message: "an internal error stopped the install; try again", Resource: at, At: stamp(s.now())}
	var he *httpapi.Error
	if errors.As(cause, &he) && he.Kind != httpapi.KindInternal {
		f.Code, f.Message = he.Code, he.Detail
	} else {
		s.log.ErrorContext(ctx, "playbooks: install failed", "install_id", rec.ID, "error", cause)
	}
	if err := s.rollback(ctx, rec); err != nil {
		s.log.ErrorContext(ctx, "playbooks: rollback incomplete; the next read or install finishes it", "install_id", rec.ID, "error", err)
		f.Message += " (the rollback is incomplete: it finishes on the next install or delete)"
	}
	rec.Status, rec.Error, rec.HeartbeatAt = StatusFailed, &f, nil
	if err := s.save(ctx, rec); err != nil {
		s.log.ErrorContext(ctx, "playbooks: saving a failed install", "install_id", rec.ID, "error", err)
	}
	e := httpapi.Errorf(httpapi.KindConflict, "install_failed", "the install failed and was rolled back: %s", f.Message).
		With("install_id", rec.ID).With("cause", f.Code).Wrap(cause)
	if at != nil {
		e = e.With("resource", at)
	}
	return e
}

// unfinished returns the indexes of journal entries a rollback has not dealt with.
func unfinished(j []JournalEntry) []int {
	var out []int
	for i, e := range j {
		if e.State != JournalRolledBack {
			out = append(out, i)
		}
	}
	return out
}

// rollback deletes what rec's journal says was (or may have been) created, newest first,
// marking each entry rolled back and saving after each, so that a rollback interrupted in
// turn goes on where it stopped. An intent without an id is looked up by its name, and only
// a resource created at or after the intent is taken for the install's: a customer's
// resource of the same name made before it is never deleted.
func (s *Service) rollback(ctx context.Context, rec *record) error {
	idx := unfinished(rec.Journal)
	for i := len(idx) - 1; i >= 0; i-- {
		e := &rec.Journal[idx[i]]
		kind, err := s.kind(e.Kind)
		if err != nil {
			return err
		}
		if err := s.undoCreate(ctx, kind, rec.BotID, e); err != nil {
			return err
		}
		e.State = JournalRolledBack
		if err := s.save(ctx, rec); err != nil {
			return err
		}
	}
	return nil
}

// undoCreate deletes what the journaled create e made, recording its id in e. An intent
// without an id (its process died during the create) is looked up by its name, and only a
// resource created at or after the intent is taken for it, so that a customer's older
// resource of the same name is never deleted.
func (s *Service) undoCreate(ctx context.Context, kind Kind, bot string, e *JournalEntry) error {
	if e.State == JournalIntent && e.ID == "" {
		list, err := kind.List(ctx, bot)
		if err != nil {
			return err
		}
		for _, ex := range list {
			if sameName(ex.Name, e.Name) && !ex.CreatedAt.Before(e.At) {
				e.ID = ex.ID
			}
		}
	}
	if e.ID == "" {
		return nil
	}
	if err := kind.Delete(ctx, bot, e.ID); err != nil && !errors.Is(err, ErrGone) {
		return fmt.Errorf("playbooks: undo the create of %s %s: %w", e.Kind, e.ID, err)
	}
	return nil
}

// recover rolls back an install its process abandoned and leaves it failed, or undoes an
// abandoned upgrade and leaves the install at its version.
func (s *Service) recover(ctx context.Context, rec record) (record, error) {
	undo, f := s.rollback, Failure{Code: "install_interrupted", Message: "the install was interrupted and rolled back; install again", At: stamp(s.now())}
	if rec.Upgrading != nil {
		undo = s.undoUpgrade
		f = Failure{Code: "upgrade_interrupted", Message: fmt.Sprintf("the upgrade to version %d was interrupted and undone; upgrade again", rec.Upgrading.ToVersion), At: f.At}
	}
	s.log.WarnContext(ctx, "playbooks: undoing an abandoned install or upgrade", "install_id", rec.ID, "code", f.Code)
	if err := undo(ctx, &rec); err != nil {
		if httpapi.KindOf(err) == httpapi.KindConflict {
			// Another reader recovered it meanwhile.
			it, gerr := s.store.Get(ctx, installKey(rec.BotID, rec.ID))
			if gerr != nil {
				return record{}, gerr
			}
			return store.Decode[record](it)
		}
		return record{}, err
	}
	if rec.Status == StatusInstalling {
		rec.Status = StatusFailed
	}
	rec.Error, rec.HeartbeatAt = &f, nil
	if err := s.save(ctx, &rec); err != nil {
		return record{}, err
	}
	return rec, nil
}

// RecoverStep is JobRecover's step: one look at one install.
func (s *Service) RecoverStep(ctx context.Context, payload json.RawMessage, _ string) (string, bool, error) {
	var p recoverPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return "", true, fmt.Errorf("playbooks: recover payload: %w", err)
	}
	it, err := s.store.Get(ctx, installKey(p.BotID, p.InstallID))
	if errors.Is(err, store.ErrNotFound) {
		return "", true, nil
	}
	if err != nil {
		return "", false, err
	}
	rec, err := store.Decode[record](it)
	if err != nil {
		return "", true, err
	}
	switch {
	case s.stuck(rec):
		_, err := s.recover(ctx, rec)
		return "", err == nil, err
	case busy(rec):
		// Still alive: look again later.
		s.scheduleRecovery(ctx, rec)
	}
	return "", true, nil
}
