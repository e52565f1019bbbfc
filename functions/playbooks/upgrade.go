package playbooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// The actions of an upgrade's diff.
const (
	// ActionCreate: the new version adds the resource; it is created.
	ActionCreate = "create"
	// ActionUpdate: the new version changes it and the customer has not: it is changed.
	ActionUpdate = "update"
	// ActionUnchanged: both versions render it the same.
	ActionUnchanged = "unchanged"
	// ActionKeptCustomerEdit: the new version changes it but the customer edited it since
	// it was installed: the customer's version stays.
	ActionKeptCustomerEdit = "kept_customer_edit"
	// ActionKeptCustomerDelete: the customer deleted it: it is not made again.
	ActionKeptCustomerDelete = "kept_customer_delete"
	// ActionRemovedKept: the new version no longer has it: it stays in the bot (an upgrade
	// never deletes the customer's data) and is no longer the install's.
	ActionRemovedKept = "removed_kept"
)

// UpgradeRequest is the body of POST .../upgrade.
type UpgradeRequest struct {
	ToVersion int  `json:"to_version"`
	DryRun    bool `json:"dry_run"`
	// Answers answers the target version's questions (its new ones, typically), merged into
	// the install's as PATCH merges them and saved with the upgrade: an installed install
	// takes no PATCH, so this is where a new required question is answered.
	Answers          map[string]json.RawMessage `json:"answers"`
	ExpectedRevision *int64                     `json:"expected_revision"`
}

// Validate checks what decoding cannot.
func (r *UpgradeRequest) Validate() error {
	var p httpapi.Problems
	if r.ToVersion < 1 {
		p.Add("to_version", "is required: the catalog version to upgrade to")
	}
	if !r.DryRun {
		p.RequireRevision(r.ExpectedRevision)
	}
	return p.Err()
}

// Upgrade is the answer of POST .../upgrade: the diff and, unless a dry run, the install
// after it.
type Upgrade struct {
	FromVersion int          `json:"from_version"`
	ToVersion   int          `json:"to_version"`
	DryRun      bool         `json:"dry_run"`
	Diff        []DiffEntry  `json:"diff"`
	Install     *Install     `json:"install"`
	Counts      UpgradeCount `json:"counts"`
}

// UpgradeCount counts the diff's actions.
type UpgradeCount struct {
	Create           int `json:"create"`
	Update           int `json:"update"`
	Unchanged        int `json:"unchanged"`
	KeptCustomerEdit int `json:"kept_customer_edit"`
	KeptDeleted      int `json:"kept_customer_delete"`
	RemovedKept      int `json:"removed_kept"`
}

// DiffEntry is one resource of an upgrade's diff. Before and After are the family bodies
// the two versions render (After alone for a create, Before alone for a removal).
type DiffEntry struct {
	Kind   string          `json:"kind"`
	Key    string          `json:"key"`
	Name   string          `json:"name"`
	ID     string          `json:"id,omitempty"`
	Action string          `json:"action"`
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// Upgrade moves the caller's installed install to catalog version req.ToVersion: each
// resource the new version changes is changed unless the customer edited it since it was
// installed (its current fingerprint is not the installed one), new ones are created, ones
// the new version dropped are left in place. A dry run answers the diff alone.
func (s *Service) Upgrade(ctx context.Context, p *auth.Principal, id string, req UpgradeRequest) (Upgrade, error) {
	rec, err := s.locate(ctx, p, botWrite, id)
	if err != nil {
		return Upgrade{}, err
	}
	if rec.Upgrading != nil {
		return Upgrade{}, httpapi.Errorf(httpapi.KindConflict, "upgrade_in_progress",
			"an upgrade to version %d is under way; try again once it is done", rec.Upgrading.ToVersion).With("to_version", rec.Upgrading.ToVersion)
	}
	if !req.DryRun {
		if err := checkRevision(rec, req.ExpectedRevision); err != nil {
			return Upgrade{}, err
		}
	}
	if rec.Status != StatusInstalled {
		return Upgrade{}, stateError(rec, "upgrade it")
	}
	target, ok := s.catalog.Get(rec.PlaybookID, req.ToVersion)
	if !ok {
		return Upgrade{}, httpapi.NotFound("playbook version")
	}
	if req.ToVersion <= rec.Version {
		return Upgrade{}, httpapi.Errorf(httpapi.KindConflict, "playbook_version_not_newer",
			"the install is at version %d; upgrade to a newer version", rec.Version).With("version", rec.Version)
	}
	from, ok := s.catalog.Get(rec.PlaybookID, rec.Version)
	if !ok {
		return Upgrade{}, fmt.Errorf("playbooks: install %s names %s v%d, not in the catalog", rec.ID, rec.PlaybookID, rec.Version)
	}
	given, err := mergeAnswers(target, rec.Answers, req.Answers)
	if err != nil {
		return Upgrade{}, err
	}
	if missing := target.Missing(given); len(missing) > 0 {
		return Upgrade{}, httpapi.E(httpapi.KindConflict, "playbook_not_ready",
			"the new version asks required questions without an answer; answer them in the upgrade's answers").
			With("ready", false).With("missing_answers", missing).With("blockers", []Blocker{})
	}
	refs := map[string]string{}
	installed := map[string]Resource{}
	for _, r := range rec.Resources {
		refs[catalog.Ref(r.Kind, r.Key)] = r.ID
		installed[catalog.Ref(r.Kind, r.Key)] = r
	}
	oldAnswers, newAnswers := from.Answers(rec.Answers), target.Answers(given)
	before, err := from.Render(oldAnswers, refs)
	if err != nil {
		return Upgrade{}, err
	}
	after, err := target.Render(newAnswers, refs)
	if err != nil {
		return Upgrade{}, err
	}
	old := map[string]catalog.Resource{}
	for _, r := range before {
		old[catalog.Ref(r.Kind, r.Key)] = r
	}
	out := Upgrade{FromVersion: rec.Version, ToVersion: target.Version, DryRun: req.DryRun, Diff: []DiffEntry{}}
	seen := map[string]bool{}
	for _, r := range after {
		ref := catalog.Ref(r.Kind, r.Key)
		seen[ref] = true
		d := DiffEntry{Kind: r.Kind, Key: r.Key, Name: r.Name, After: r.Spec}
		inst, had := installed[ref]
		if !had {
			d.Action = ActionCreate
			if slices.Contains(rec.Deleted, ref) {
				d.Action = ActionKeptCustomerDelete
			}
			out.Diff = append(out.Diff, d)
			continue
		}
		d.ID, d.Before = inst.ID, old[ref].Spec
		kind, err := s.kind(r.Kind)
		if err != nil {
			return Upgrade{}, err
		}
		cur, err := kind.Get(ctx, rec.BotID, inst.ID)
		switch {
		case errors.Is(err, ErrGone):
			d.Action = ActionKeptCustomerDelete
		case err != nil:
			return Upgrade{}, err
		case bytes.Equal(old[ref].Spec, r.Spec):
			d.Action = ActionUnchanged
		case cur.Fingerprint != inst.Fingerprint:
			d.Action = ActionKeptCustomerEdit
		default:
			d.Action = ActionUpdate
		}
		out.Diff = append(out.Diff, d)
	}
	for _, r := range rec.Resources {
		if ref := catalog.Ref(r.Kind, r.Key); !seen[ref] {
			out.Diff = append(out.Diff, DiffEntry{Kind: r.Kind, Key: r.Key, Name: r.Name, ID: r.ID, Action: ActionRemovedKept, Before: old[ref].Spec})
		}
	}
	for _, d := range out.Diff {
		switch d.Action {
		case ActionCreate:
			out.Counts.Create++
		case ActionUpdate:
			out.Counts.Update++
		case ActionUnchanged:
			out.Counts.Unchanged++
		case ActionKeptCustomerEdit:
			out.Counts.KeptCustomerEdit++
		case ActionKeptCustomerDelete:
			out.Counts.KeptDeleted++
		case ActionRemovedKept:
			out.Counts.RemovedKept++
		}
	}
	var creates []PlanItem
	for _, d := range out.Diff {
		if d.Action == ActionCreate {
			creates = append(creates, PlanItem{Kind: d.Kind, Key: d.Key, Name: d.Name})
		}
	}
	if blockers := featureBlockers(p.Entitlements, creates); len(blockers) > 0 {
		return Upgrade{}, httpapi.E(httpapi.KindConflict, "playbook_not_ready",
			"the new version creates what your account's plan does not include; upgrade the plan first").
			With("ready", false).With("missing_answers", []string{}).With("blockers", blockers)
	}
	if req.DryRun {
		return out, nil
	}
	rec.Answers = given
	if err := s.apply(ctx, &rec, target, newAnswers, refs, out.Diff); err != nil {
		return Upgrade{}, err
	}
	in := s.view(rec)
	out.Install = &in
	return out, nil
}

// apply carries out an upgrade's diff: creates first (the new resources updated ones may
// refer to), then updates, each written to the install's upgrade journal before and after
// it. Its first write claims the install: a second upgrade, or one that read an older
// revision, is refused before it changes anything. A failure undoes what the journal holds,
// newest first (created resources deleted, updated ones set back to what the old version
// rendered), and answers 409 upgrade_failed; the install stays at its version. A process
// that dies mid-way leaves the journal to the next read or JobRecover, as an install does.
func (s *Service) apply(ctx context.Context, rec *record, target catalog.Playbook, answers map[string]any, refs map[string]string, diff []DiffEntry) error {
	resources := map[string]Resource{}
	for _, r := range rec.Resources {
		resources[catalog.Ref(r.Kind, r.Key)] = r
	}
	rec.Upgrading, rec.Error = &upgradeRun{ToVersion: target.Version, Steps: []upgradeStep{}}, nil
	s.beat(rec)
	if err := s.save(ctx, rec); err != nil {
		return err
	}
	s.scheduleRecovery(ctx, *rec)
	run := rec.Upgrading
	fail := func(cause error, d DiffEntry) error {
		if err := s.undoUpgrade(context.WithoutCancel(ctx), rec); err != nil {
			s.log.ErrorContext(ctx, "playbooks: undoing an upgrade is incomplete; the next read or the recovery job finishes it", "install_id", rec.ID, "error", err)
		}
		code, msg := "internal_error", "an internal error stopped the upgrade"
		var he *httpapi.Error
		if errors.As(cause, &he) && he.Kind != httpapi.KindInternal {
			code, msg = he.Code, he.Detail
		} else {
			s.log.ErrorContext(ctx, "playbooks: upgrade failed", "install_id", rec.ID, "error", cause)
		}
		return httpapi.Errorf(httpapi.KindConflict, "upgrade_failed", "the upgrade failed at %s %s and was undone: %s", d.Kind, d.Key, msg).
			With("cause", code).With("resource", PlanItem{Kind: d.Kind, Key: d.Key, Name: d.Name}).Wrap(cause)
	}
	for _, pass := range []string{ActionCreate, ActionUpdate} {
		for _, d := range diff {
			if d.Action != pass {
				continue
			}
			kind, err := s.kind(d.Kind)
			if err != nil {
				return fail(err, d)
			}
			spec, err := catalog.RenderBody(d.After, answers, refs)
			if err != nil {
				return fail(err, d)
			}
			step := upgradeStep{JournalEntry: JournalEntry{Kind: d.Kind, Key: d.Key, Name: d.Name, State: JournalIntent, At: stamp(s.now())}, Action: pass}
			if pass == ActionUpdate {
				step.ID, step.Before = d.ID, d.Before
			}
			run.Steps = append(run.Steps, step)
			s.beat(rec)
			if err := s.save(ctx, rec); err != nil {
				run.Steps = run.Steps[:len(run.Steps)-1]
				return fail(err, d)
			}
			var ex Existing
			if pass == ActionCreate {
				ex, err = kind.Create(ctx, rec.BotID, spec)
			} else {
				ex, err = kind.Update(ctx, rec.BotID, d.ID, spec)
			}
			if err != nil {
				// The family refused it: this step changed nothing.
				run.Steps = run.Steps[:len(run.Steps)-1]
				return fail(err, d)
			}
			last := &run.Steps[len(run.Steps)-1]
			last.State, last.ID = JournalCreated, ex.ID
			s.beat(rec)
			if err := s.save(ctx, rec); err != nil {
				return fail(err, d)
			}
			ref := catalog.Ref(d.Kind, d.Key)
			refs[ref] = ex.ID
			resources[ref] = Resource{Kind: d.Kind, Key: d.Key, ID: ex.ID, Name: ex.Name, Fingerprint: ex.Fingerprint}
		}
	}
	// The install's resources: the new version's, in its order (kept edits keep their
	// installed fingerprint, so a later upgrade still sees the edit); dropped ones are no
	// longer the install's.
	var next []Resource
	deleted := slices.Clone(rec.Deleted)
	for _, d := range diff {
		ref := catalog.Ref(d.Kind, d.Key)
		switch d.Action {
		case ActionRemovedKept:
		case ActionKeptCustomerDelete:
			if !slices.Contains(deleted, ref) {
				deleted = append(deleted, ref)
			}
		default:
			next = append(next, resources[ref])
		}
	}
	prevResources, prevVersion, prevDeleted := rec.Resources, rec.Version, rec.Deleted
	rec.Resources, rec.Version, rec.Deleted, rec.Upgrading, rec.HeartbeatAt = next, target.Version, deleted, nil, nil
	if err := s.save(ctx, rec); err != nil {
		rec.Resources, rec.Version, rec.Deleted, rec.Upgrading = prevResources, prevVersion, prevDeleted, run
		return fail(err, DiffEntry{Kind: "install", Key: rec.ID})
	}
	return nil
}

// undoUpgrade undoes what rec's upgrade journal says was (or may have been) done, newest
// first, saving after each step so that an undo interrupted in turn goes on where it
// stopped, and then ends the upgrade. A create's intent without an id is looked up by its
// name, as an install's rollback does; an update is set back to its old rendering whether
// or not it happened (setting it back is the same either way).
func (s *Service) undoUpgrade(ctx context.Context, rec *record) error {
	run := rec.Upgrading
	if run == nil {
		return nil
	}
	for i := len(run.Steps) - 1; i >= 0; i-- {
		st := &run.Steps[i]
		if st.State == JournalRolledBack {
			continue
		}
		kind, err := s.kind(st.Kind)
		if err != nil {
			return err
		}
		switch st.Action {
		case ActionCreate:
			if err := s.undoCreate(ctx, kind, rec.BotID, &st.JournalEntry); err != nil {
				return err
			}
		case ActionUpdate:
			if _, err := kind.Update(ctx, rec.BotID, st.ID, st.Before); err != nil && !errors.Is(err, ErrGone) {
				return fmt.Errorf("playbooks: undo the update of %s %s: %w", st.Kind, st.ID, err)
			}
		}
		st.State = JournalRolledBack
		if err := s.save(ctx, rec); err != nil {
			return err
		}
	}
	rec.Upgrading, rec.HeartbeatAt = nil, nil
	return s.save(ctx, rec)
}
