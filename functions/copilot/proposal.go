package copilot

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/functions/ai"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/shared/httpapi"
)

// The statuses of a proposal. Only an open one may be applied or rejected; applying one
// supersedes the reaction's other open proposals, and so does a draft that moved past a
// proposal's base (found when it is applied).
const (
	StatusOpen       = "open"
	StatusApplied    = "applied"
	StatusRejected   = "rejected"
	StatusSuperseded = "superseded"
)

// Bounds of a proposal request.
const (
	MaxGoalLen    = 2000
	MinSamples    = 1
	MaxSamples    = 20
	maxAnswerSize = 256 << 10
)

// Proposal is a change to a reaction's draft that the model proposed for a goal: the
// proposed draft, its difference from the draft it was proposed against (BaseRevision),
// and what became of it.
type Proposal struct {
	ID         string `json:"id"`
	BotID      string `json:"bot_id"`
	ReactionID string `json:"reaction_id"`
	// Revision counts the proposal's changes (its status, its last validation and
	// simulation); send it as expected_revision to apply or reject.
	Revision int64 `json:"revision"`
	// BaseRevision is the draft revision the proposal was made against: applying it needs
	// the draft to be there still.
	BaseRevision int64  `json:"base_revision"`
	Goal         string `json:"goal"`
	Profile      string `json:"profile"`
	Provider     string `json:"provider"`
	// Summary is the model's one-paragraph account of the change.
	Summary string `json:"summary"`
	// Draft is the proposed draft: name, trigger and steps, whole.
	Draft reactions.Content `json:"draft"`
	Diff  Diff              `json:"diff"`
	// Status is open, applied, rejected or superseded.
	Status string `json:"status"`
	// AppliedRevision is the draft revision applying it made (applied only).
	AppliedRevision *int64     `json:"applied_revision"`
	DecidedAt       *time.Time `json:"decided_at"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	// Usage is the managed AI generation the proposal cost.
	Usage Usage `json:"usage"`
	// LastValidation and LastSimulation are the outcomes of the latest validate and
	// simulate calls (null before the first).
	LastValidation *Validation        `json:"last_validation"`
	LastSimulation *SimulationOutcome `json:"last_simulation"`
}

// Usage is the managed AI generation behind a proposal, as functions/ai metered it.
type Usage struct {
	ResponseID   string  `json:"response_id"`
	Provider     string  `json:"provider"`
	Model        string  `json:"model"`
	Billing      string  `json:"billing"`
	InputTokens  int64   `json:"input_tokens"`
	OutputTokens int64   `json:"output_tokens"`
	Cost         ai.Cost `json:"cost"`
}

// Validation is what validating the proposed draft found.
type Validation struct {
	Valid    bool                 `json:"valid"`
	Problems []httpapi.FieldError `json:"problems"`
	// CheckedAt is when it was checked: the bot's labels, fields, reactions and templates
	// change, and with them the answer.
	CheckedAt time.Time `json:"checked_at"`
}

// SimulationOutcome is the gist of the latest simulation (its traces are the simulate
// call's answer, not kept).
type SimulationOutcome struct {
	Samples     int       `json:"samples"`
	PathChanged int       `json:"path_changed"`
	SimulatedAt time.Time `json:"simulated_at"`
}

// Diff is how the proposed draft differs from the draft it was proposed against. Steps are
// matched by id.
type Diff struct {
	// Name is the name's change, null when it keeps its name.
	Name *Change[string] `json:"name"`
	// Trigger is the trigger's change, null when it keeps its trigger.
	Trigger *Change[reactions.Trigger] `json:"trigger"`
	// Steps lists the steps added, removed or changed, in the proposed order, then the
	// removed ones in the base draft's order.
	Steps []StepChange `json:"steps"`
	// OrderChanged is true when the steps both drafts have run in another order.
	OrderChanged bool `json:"order_changed"`
	// BaseOrder is the ids of the base draft's steps, in its order: with the changes above
	// and the proposed draft, the base draft, whole.
	BaseOrder []string `json:"base_order"`
	// Counts sums Steps by kind; unchanged counts the steps both have, equal.
	Counts DiffCounts `json:"counts"`
}

// Change is a member's value before and after.
type Change[T any] struct {
	Before T `json:"before"`
	After  T `json:"after"`
}

// The kinds of StepChange.
const (
	StepAdded   = "added"
	StepRemoved = "removed"
	StepChanged = "changed"
)

// StepChange is one step that differs: added (After only), removed (Before only) or
// changed (both), with its index in each draft (null where it is not).
type StepChange struct {
	StepID      string          `json:"step_id"`
	Change      string          `json:"change"`
	Before      *reactions.Step `json:"before"`
	After       *reactions.Step `json:"after"`
	BeforeIndex *int            `json:"before_index"`
	AfterIndex  *int            `json:"after_index"`
}

// DiffCounts sums a diff's steps.
type DiffCounts struct {
	Added     int `json:"added"`
	Removed   int `json:"removed"`
	Changed   int `json:"changed"`
	Unchanged int `json:"unchanged"`
}

// sameJSON compares two values as stored.
func sameJSON(a, b any) bool {
	x, errA := json.Marshal(a)
	y, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(x, y)
}

// diff is the difference from base to proposed (both normalized).
func diff(base, proposed reactions.Content) Diff {
	d := Diff{Steps: []StepChange{}}
	if base.Name != proposed.Name {
		d.Name = &Change[string]{Before: base.Name, After: proposed.Name}
	}
	if !sameJSON(base.Trigger, proposed.Trigger) {
		d.Trigger = &Change[reactions.Trigger]{Before: base.Trigger, After: proposed.Trigger}
	}
	at := make(map[string]int, len(base.Steps))
	d.BaseOrder = make([]string, len(base.Steps))
	for i, s := range base.Steps {
		at[s.ID] = i
		d.BaseOrder[i] = s.ID
	}
	kept := map[string]bool{}
	var order []int // base indexes of the common steps, in proposed order
	for i, s := range proposed.Steps {
		after := s
		ai := i
		j, ok := at[s.ID]
		if !ok {
			d.Steps = append(d.Steps, StepChange{StepID: s.ID, Change: StepAdded, After: &after, AfterIndex: &ai})
			d.Counts.Added++
			continue
		}
		kept[s.ID] = true
		order = append(order, j)
		if sameJSON(base.Steps[j], s) {
			d.Counts.Unchanged++
			continue
		}
		before, bi := base.Steps[j], j
		d.Steps = append(d.Steps, StepChange{StepID: s.ID, Change: StepChanged, Before: &before, After: &after, BeforeIndex: &bi, AfterIndex: &ai})
		d.Counts.Changed++
	}
	for j, s := range base.Steps {
		if kept[s.ID] {
			continue
		}
		before, bi := s, j
		d.Steps = append(d.Steps, StepChange{StepID: s.ID, Change: StepRemoved, Before: &before, BeforeIndex: &bi})
		d.Counts.Removed++
	}
	d.OrderChanged = !slices.IsSorted(order)
	return d
}

// answer is what the model is asked to answer: JSON only.
type answer struct {
	Summary string             `json:"summary"`
	Name    *string            `json:"name"`
	Trigger *reactions.Trigger `json:"trigger"`
	Steps   *[]reactions.Step  `json:"steps"`
}

// unusable is the 502 of an answer that is not the JSON asked for; the generation stays
// metered, and nothing is stored.
func unusable(detail string, problems []httpapi.FieldError) error {
	e := httpapi.E(httpapi.KindBadGateway, "copilot_unusable_answer",
		"the model's answer was not a usable proposal: "+detail+"; nothing was stored (the generation is metered); retry, perhaps with a clearer goal")
	if len(problems) > 0 {
		e = e.With("errors", problems)
	}
	return e
}

// parseAnswer reads the model's answer strictly: one JSON object (a ```json fence around it
// tolerated) with a summary and the steps, and optionally a name and a trigger, each a valid
// reaction body member. What it leaves out is base's. The content is normalized.
func parseAnswer(text string, base reactions.Content, self string) (string, reactions.Content, error) {
	body := strings.TrimSpace(text)
	if len(body) > maxAnswerSize {
		return "", reactions.Content{}, unusable("it is too long", nil)
	}
	body = unfence(body)
	if !strings.HasPrefix(body, "{") {
		return "", reactions.Content{}, unusable("it is not a JSON object", nil)
	}
	var a answer
	if err := httpapi.DecodeJSON([]byte(body), &a, ""); err != nil {
		e := httpapi.AsError(err)
		return "", reactions.Content{}, unusable("it is not the JSON asked for ("+e.Detail+")", nil)
	}
	var p httpapi.Problems
	a.Summary = strings.TrimSpace(a.Summary)
	p.Require("summary", a.Summary)
	if a.Steps == nil {
		p.Add("steps", "is required")
	}
	if len(p) > 0 {
		return "", reactions.Content{}, unusable("members are missing", p)
	}
	c := base
	c.Steps = *a.Steps
	if a.Name != nil {
		c.Name = *a.Name
	}
	if a.Trigger != nil {
		c.Trigger = *a.Trigger
	}
	if shape := reactions.CheckShape(&c, self); len(shape) > 0 {
		return "", reactions.Content{}, unusable("it is not a valid reaction", shape)
	}
	return a.Summary, c, nil
}

// unfence strips one Markdown code fence (```json ... ``` or ``` ... ```) around s.
func unfence(s string) string {
	if !strings.HasPrefix(s, "```") || !strings.HasSuffix(s, "```") || len(s) < 6 {
		return s
	}
	inner := strings.TrimSuffix(s[3:], "```")
	first, rest, ok := strings.Cut(inner, "\n")
	if !ok {
		return strings.TrimSpace(inner)
	}
	if lang := strings.TrimSpace(first); lang != "" && lang != "json" && lang != "JSON" {
		return s
	}
	return strings.TrimSpace(rest)
}

// base is the draft pr was proposed against, rebuilt from its diff and its draft.
func (pr Proposal) base() reactions.Content {
	c := pr.Draft
	if pr.Diff.Name != nil {
		c.Name = pr.Diff.Name.Before
	}
	if pr.Diff.Trigger != nil {
		c.Trigger = pr.Diff.Trigger.Before
	}
	before := map[string]reactions.Step{}
	for _, ch := range pr.Diff.Steps {
		if ch.Before != nil {
			before[ch.StepID] = *ch.Before
		}
	}
	proposed := map[string]reactions.Step{}
	for _, st := range pr.Draft.Steps {
		proposed[st.ID] = st
	}
	c.Steps = make([]reactions.Step, 0, len(pr.Diff.BaseOrder))
	for _, id := range pr.Diff.BaseOrder {
		if st, ok := before[id]; ok {
			c.Steps = append(c.Steps, st)
		} else {
			c.Steps = append(c.Steps, proposed[id])
		}
	}
	return c
}
