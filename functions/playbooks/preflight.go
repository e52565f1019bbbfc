package playbooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Plan is what installing would do (POST .../preflight): ready when nothing blocks it.
type Plan struct {
	Ready bool `json:"ready"`
	// Creates are the resources the install creates, in the order it creates them.
	Creates []PlanItem `json:"creates"`
	// Changes are existing resources the install changes: none for an install (it only
	// creates); an upgrade's dry run lists its own.
	Changes []PlanItem `json:"changes"`
	// Conflicts are names the playbook would create that the bot already has: each blocks.
	Conflicts []Conflict `json:"conflicts"`
	// MissingAnswers are required questions without an answer or a default: each blocks.
	MissingAnswers []string `json:"missing_answers"`
	// Blockers are the other reasons the install cannot run: each blocks (a plan feature the
	// account lacks: feature_not_in_plan).
	Blockers []Blocker `json:"blockers"`
	// Warnings do not block (a bot without a channel the flows are written for).
	Warnings []Warning `json:"warnings"`
}

// PlanItem is one resource of a plan.
type PlanItem struct {
	Kind string `json:"kind"`
	Key  string `json:"key"`
	Name string `json:"name"`
}

// Conflict is a name the bot already has.
type Conflict struct {
	Kind       string `json:"kind"`
	Key        string `json:"key"`
	Name       string `json:"name"`
	ExistingID string `json:"existing_id"`
}

// Blocker is a reason, other than a conflict or a missing answer, that stops an install or an
// upgrade.
type Blocker struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Feature is the plan feature a feature_not_in_plan blocker needs.
	Feature string `json:"feature,omitempty"`
	// Resources are what needs it.
	Resources []PlanItem `json:"resources"`
}

// kindFeatures are the plan features a kind of resource needs: its family's routes answer
// 402 feature_not_in_plan without them, and an install, which calls the family's service in
// process, must not create what the account could not create itself. Content needs none
// (docs/content.md).
var kindFeatures = map[string]auth.Feature{catalog.KindPopup: auth.FeaturePopups}

// featureBlockers returns a feature_not_in_plan blocker per plan feature items need that
// ent lacks, in the order items first need them.
func featureBlockers(ent auth.Entitlements, items []PlanItem) []Blocker {
	out := []Blocker{}
	at := map[auth.Feature]int{}
	for _, it := range items {
		f, ok := kindFeatures[it.Kind]
		if !ok || ent.InPlan(f) {
			continue
		}
		i, seen := at[f]
		if !seen {
			i = len(out)
			at[f] = i
			out = append(out, Blocker{Code: "feature_not_in_plan", Feature: string(f), Resources: []PlanItem{},
				Message: fmt.Sprintf("your account's plan does not include %s, which this playbook's %ss need; upgrade the plan first", f, it.Kind)})
		}
		out[i].Resources = append(out[i].Resources, it)
	}
	return out
}

// Warning is something preflight reports without blocking.
type Warning struct {
	Code     string   `json:"code"`
	Message  string   `json:"message"`
	Channels []string `json:"channels,omitempty"`
}

func hash(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// sameName is how every family compares names for uniqueness: ignoring case.
func sameName(a, b string) bool { return strings.EqualFold(strings.TrimSpace(a), strings.TrimSpace(b)) }

// Preflight reports what installing the caller's install would do, without changing
// anything.
func (s *Service) Preflight(ctx context.Context, p *auth.Principal, id string) (Plan, error) {
	rec, err := s.locate(ctx, p, botWrite, id)
	if err != nil {
		return Plan{}, err
	}
	if rec.Status == StatusInstalling || rec.Status == StatusInstalled {
		return Plan{}, stateError(rec, "preflight it")
	}
	pb, ok := s.catalog.Get(rec.PlaybookID, rec.Version)
	if !ok {
		return Plan{}, fmt.Errorf("playbooks: install %s names %s v%d, not in the catalog", rec.ID, rec.PlaybookID, rec.Version)
	}
	return s.plan(ctx, rec, pb, p.Entitlements)
}

// plan computes the preflight of rec (status setup or failed, its rollback done) for an
// account with entitlements ent.
func (s *Service) plan(ctx context.Context, rec record, pb catalog.Playbook, ent auth.Entitlements) (Plan, error) {
	out := Plan{Creates: []PlanItem{}, Changes: []PlanItem{}, Conflicts: []Conflict{}, Warnings: []Warning{}}
	out.MissingAnswers = pb.Missing(rec.Answers)
	resources, err := pb.Render(pb.Answers(rec.Answers), nil)
	if err != nil {
		return Plan{}, err
	}
	existing := map[string][]Existing{}
	for _, res := range resources {
		out.Creates = append(out.Creates, PlanItem{Kind: res.Kind, Key: res.Key, Name: res.Name})
		list, ok := existing[res.Kind]
		if !ok {
			kind, err := s.kind(res.Kind)
			if err != nil {
				return Plan{}, err
			}
			if list, err = kind.List(ctx, rec.BotID); err != nil {
				return Plan{}, fmt.Errorf("playbooks: list %ss: %w", res.Kind, err)
			}
			existing[res.Kind] = list
		}
		if i := slices.IndexFunc(list, func(e Existing) bool { return sameName(e.Name, res.Name) }); i >= 0 {
			out.Conflicts = append(out.Conflicts, Conflict{Kind: res.Kind, Key: res.Key, Name: res.Name, ExistingID: list[i].ID})
		}
	}
	if s.channels != nil {
		kinds, err := s.channels.Kinds(ctx, rec.BotID)
		if err != nil {
			return Plan{}, fmt.Errorf("playbooks: read channels: %w", err)
		}
		if !slices.ContainsFunc(kinds, pb.SupportsChannel) {
			out.Warnings = append(out.Warnings, Warning{Code: "missing_channel",
				Message:  "the bot has no channel of a kind this playbook's flows are written for; they run once one is connected",
				Channels: pb.Channels})
		}
	}
	out.Blockers = featureBlockers(ent, out.Creates)
	out.Ready = len(out.Conflicts) == 0 && len(out.MissingAnswers) == 0 && len(out.Blockers) == 0
	return out, nil
}

func (s *Service) kind(name string) (Kind, error) {
	k, ok := s.kinds[name]
	if !ok {
		return nil, fmt.Errorf("playbooks: no service for %s resources", name)
	}
	return k, nil
}

// notReady is the 409 of an install whose preflight blocks it: the preflight's members.
func notReady(p Plan) error {
	return httpapi.E(httpapi.KindConflict, "playbook_not_ready", "the preflight is not ready: resolve its conflicts and blockers and answer its questions first").
		With("ready", false).With("creates", p.Creates).With("changes", p.Changes).With("conflicts", p.Conflicts).
		With("missing_answers", p.MissingAnswers).With("blockers", p.Blockers).With("warnings", p.Warnings)
}
