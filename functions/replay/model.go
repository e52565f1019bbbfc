package replay

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/httpapi"
)

// Limits (docs/replay.md states each).
const (
	// MaxFixtures bounds one reaction's fixtures, and so the fixtures one run re-runs.
	MaxFixtures = 200
	// MaxNameLen bounds a fixture's name, in characters after trimming.
	MaxNameLen = 100
	// MaxFixtureBytes bounds a fixture as stored JSON (its input and expected trace), well
	// inside one item.
	MaxFixtureBytes = 256 << 10
	// maxResultBytes bounds the trace kept with one fixture's result in a run; a larger one
	// is left out (result_omitted).
	maxResultBytes = 300 << 10
	// MaxDifferences bounds the differences one fixture's result lists (differences_total
	// counts them all).
	MaxDifferences = 50
	// RunRetention is how long a regression run's report is kept.
	RunRetention = 90 * 24 * time.Hour
)

// Target is what a simulation or a run runs against: a published version, or the
// reaction's current draft. In JSON: a version number, or "draft".
type Target struct {
	Draft   bool
	Version int64
}

// MarshalJSON writes "draft" or the version number.
func (t Target) MarshalJSON() ([]byte, error) {
	if t.Draft {
		return []byte(`"draft"`), nil
	}
	return []byte(strconv.FormatInt(t.Version, 10)), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (t *Target) UnmarshalJSON(b []byte) error {
	var p httpapi.Problems
	if v, ok := parseTarget(&p, "target", b); ok {
		*t = v
		return nil
	}
	return p.Err()
}

// parseTarget reads a target member (raw JSON), adding its problem to p.
func parseTarget(p *httpapi.Problems, field string, raw json.RawMessage) (Target, bool) {
	raw = bytes.TrimSpace(raw)
	if string(raw) == `"draft"` {
		return Target{Draft: true}, true
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil || n < 1 {
		p.Add(field, `must be a published version number (1 or more) or "draft"`)
		return Target{}, false
	}
	return Target{Version: n}, true
}

// Difference is one way a run's path differs from the expected one. Seq is the entry
// number (0 for the run's end); Kind is step_changed (another step or step type ran at this
// place), decision_changed (a condition or a press decided otherwise), outcome_changed (the
// step did another kind of thing: sent, skipped, failed with another kind, added or not),
// missing (the expected entry did not happen), extra (an entry that was not expected),
// status_changed, end_reason_changed or error_changed. Expected and Actual are the values
// compared.
type Difference struct {
	Seq      int    `json:"seq"`
	Kind     string `json:"kind"`
	StepID   string `json:"step_id,omitempty"`
	Expected any    `json:"expected"`
	Actual   any    `json:"actual"`
}

// The kinds of Difference.
const (
	DiffStep      = "step_changed"
	DiffDecision  = "decision_changed"
	DiffOutcome   = "outcome_changed"
	DiffMissing   = "missing"
	DiffExtra     = "extra"
	DiffStatus    = "status_changed"
	DiffEndReason = "end_reason_changed"
	DiffError     = "error_changed"
)

// Simulation is the answer of POST .../replay/simulations: the recorded run's input (redacted,
// as a fixture holds it), the simulated run, and how it differs from the recorded one.
type Simulation struct {
	ExecutionID     string `json:"execution_id"`
	ReactionID      string `json:"reaction_id"`
	RecordedVersion int64  `json:"recorded_version"`
	// Version is what ran: a version number, or "draft" (then DraftRevision says which).
	Version       Target            `json:"version"`
	DraftRevision *int64            `json:"draft_revision"`
	Input         runtime.SimInput  `json:"input"`
	Result        runtime.SimResult `json:"result"`
	Matches       bool              `json:"matches"`
	Differences   []Difference      `json:"differences"`
}

// Fixture is a regression fixture: a recorded run's input with personal data removed, and
// the trace its version gives for it.
type Fixture struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	ReactionID string `json:"reaction_id"`
	Version    int64  `json:"version"`
	// SourceExecutionID is the run it was exported from (which expires on its own).
	SourceExecutionID string            `json:"source_execution_id"`
	Input             runtime.SimInput  `json:"input"`
	Expected          runtime.SimResult `json:"expected"`
	CreatedAt         time.Time         `json:"created_at"`
}

// FixtureSummary is a fixture as lists show it: without its input and trace.
type FixtureSummary struct {
	ID                string         `json:"id"`
	Name              string         `json:"name"`
	ReactionID        string         `json:"reaction_id"`
	Version           int64          `json:"version"`
	SourceExecutionID string         `json:"source_execution_id"`
	Status            runtime.Status `json:"status"`
	EndReason         *string        `json:"end_reason"`
	StepCount         int            `json:"step_count"`
	CreatedAt         time.Time      `json:"created_at"`
}

// Summary is the list form of f.
func (f Fixture) Summary() FixtureSummary {
	return FixtureSummary{ID: f.ID, Name: f.Name, ReactionID: f.ReactionID, Version: f.Version,
		SourceExecutionID: f.SourceExecutionID, Status: f.Expected.Status, EndReason: f.Expected.EndReason,
		StepCount: len(f.Expected.Steps), CreatedAt: f.CreatedAt}
}

// Outcomes of a fixture in a run.
const (
	OutcomePassed  = "passed"
	OutcomeChanged = "changed"
)

// Run is a regression run's report: a reaction's fixtures re-run against a target.
type Run struct {
	ID            string    `json:"id"`
	ReactionID    string    `json:"reaction_id"`
	Target        Target    `json:"target"`
	DraftRevision *int64    `json:"draft_revision"`
	FixtureCount  int       `json:"fixture_count"`
	Passed        int       `json:"passed"`
	Changed       int       `json:"changed"`
	CreatedAt     time.Time `json:"created_at"`
	// Results (GET of one run only) are the fixtures' results, in the order they ran
	// (fixture ids, that is oldest fixture first).
	Results []Result `json:"results,omitempty"`
}

// Result is one fixture's result in a run: passed (the same path as expected) or changed,
// with the differences (at most MaxDifferences; DifferencesTotal counts them all).
type Result struct {
	FixtureID        string       `json:"fixture_id"`
	FixtureName      string       `json:"fixture_name"`
	Outcome          string       `json:"outcome"`
	Differences      []Difference `json:"differences"`
	DifferencesTotal int          `json:"differences_total"`
	// ResultSHA256 is the SHA-256 of the simulated trace's JSON (Trace): two runs of one
	// fixture on one flow give the same.
	ResultSHA256 string `json:"result_sha256"`
}

// ResultDetail is one fixture's result with the simulated trace (GET .../results/{id}).
type ResultDetail struct {
	RunID string `json:"run_id"`
	Result
	// Trace is the simulated run, null when it was too large to keep (ResultOmitted).
	Trace         json.RawMessage `json:"trace"`
	ResultOmitted bool            `json:"result_omitted"`
}
