// Package replay serves explainable replay (issue 15, part 4): a bot's execution traces,
// deterministic simulations of a recorded run against a reaction version or its draft,
// regression fixtures exported from runs with personal data removed, and regression runs
// that re-run a reaction's fixtures against a target and report what changed. The
// simulator is the runtime's (runtime.Simulate): the same flow and input give the same
// trace, byte for byte. docs/replay.md.
package replay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Traces reads the bot's recorded runs (runtime.Traces).
type Traces interface {
	Get(ctx context.Context, bot, id string) (runtime.Detail, error)
	Runs(ctx context.Context, bot string, f runtime.RunFilter, limit int, cursor string) ([]runtime.Execution, string, error)
}

// Flows reads a reaction's published versions and its draft as the runtime runs them. Both
// answer 404 problems (not_found) for a reaction or version the bot does not have.
type Flows interface {
	Version(ctx context.Context, bot, reaction string, n int64) (runtime.Flow, error)
	// Draft returns the reaction's current draft and its revision.
	Draft(ctx context.Context, bot, reaction string) (runtime.Flow, int64, error)
}

// Service is the replay of every bot.
type Service struct {
	store  store.Store
	traces Traces
	flows  Flows
	now    func() time.Time
}

// NewService returns the service.
func NewService(st store.Store, traces Traces, flows Flows, now func() time.Time) *Service {
	return &Service{store: st, traces: traces, flows: flows, now: now}
}

// statuses are the run statuses the executions list filters on.
var statuses = []runtime.Status{runtime.StatusRunning, runtime.StatusWaiting, runtime.StatusCompleted, runtime.StatusFailed}

// ExecutionFilter narrows the executions list.
type ExecutionFilter struct {
	ReactionID string
	Status     string
}

// Executions returns one page of the bot's runs, newest first, redacted (Redact: the trace
// GET alone shows a run's identifying data). At most runtime.MaxRunsScanned runs are read
// per page, so a filtered page may come back short.
func (s *Service) Executions(ctx context.Context, bot string, f ExecutionFilter, limit int, cursor string) ([]runtime.Execution, string, error) {
	if f.Status != "" && !slices.Contains(statuses, runtime.Status(f.Status)) {
		return nil, "", httpapi.InvalidParam("status", "status must be running, waiting, completed or failed")
	}
	list, next, err := s.traces.Runs(ctx, bot, runtime.RunFilter{ReactionID: f.ReactionID, Status: runtime.Status(f.Status)}, limit, cursor)
	if err != nil {
		return nil, "", err
	}
	for i := range list {
		list[i] = Redact(runtime.Detail{Execution: list[i]}).Execution
	}
	return list, next, nil
}

// Execution returns one run with its steps, unredacted (the trace GET).
func (s *Service) Execution(ctx context.Context, bot, id string) (runtime.Detail, error) {
	return s.traces.Get(ctx, bot, id)
}

// RedactedExecution returns one run in its redacted form (Redact): what the MCP tool shows.
func (s *Service) RedactedExecution(ctx context.Context, bot, id string) (runtime.Detail, error) {
	d, err := s.traces.Get(ctx, bot, id)
	if err != nil {
		return runtime.Detail{}, err
	}
	return Redact(d), nil
}

// flow returns the flow of target (version n, or the draft with its revision).
func (s *Service) flow(ctx context.Context, bot, reaction string, t Target) (runtime.Flow, *int64, error) {
	if t.Draft {
		f, rev, err := s.flows.Draft(ctx, bot, reaction)
		if err != nil {
			return runtime.Flow{}, nil, err
		}
		return f, &rev, nil
	}
	f, err := s.flows.Version(ctx, bot, reaction, t.Version)
	return f, nil, err
}

// SimulationRequest is the body of POST .../replay/simulations.
type SimulationRequest struct {
	ExecutionID string `json:"execution_id"`
	// Version is a published version number or "draft"; absent, the version the run ran.
	Version json.RawMessage `json:"version"`

	target *Target
}

// Validate checks what decoding cannot.
func (r *SimulationRequest) Validate() error {
	var p httpapi.Problems
	if r.ExecutionID == "" {
		p.Add("execution_id", "is required: the run to re-run (exe_...)")
	}
	if r.Version != nil && string(r.Version) != "null" {
		if t, ok := parseTarget(&p, "version", r.Version); ok {
			r.target = &t
		}
	}
	return p.Err()
}

// Simulate re-runs a recorded run's input (FixtureInput: redacted) against the version it
// ran, another published version or the reaction's draft, and compares the simulated path
// with the recorded one. Nothing is stored.
func (s *Service) Simulate(ctx context.Context, bot string, req SimulationRequest) (Simulation, error) {
	if err := req.Validate(); err != nil {
		return Simulation{}, err
	}
	d, err := s.traces.Get(ctx, bot, req.ExecutionID)
	if err != nil {
		return Simulation{}, err
	}
	t := Target{Version: d.ReactionVersion}
	if req.target != nil {
		t = *req.target
	}
	flow, rev, err := s.flow(ctx, bot, d.ReactionID, t)
	if err != nil {
		return Simulation{}, err
	}
	in := FixtureInput(d)
	res := runtime.Simulate(flow, in)
	diffs := Compare(recordedPath(Redact(d)), res)
	return Simulation{ExecutionID: d.ID, ReactionID: d.ReactionID, RecordedVersion: d.ReactionVersion, Version: t,
		DraftRevision: rev, Input: in, Result: res, Matches: len(diffs) == 0, Differences: diffs}, nil
}

// FixtureRequest is the body of POST .../replay/fixtures.
type FixtureRequest struct {
	ExecutionID string `json:"execution_id"`
	Name        string `json:"name"`
}

// Validate checks what decoding cannot.
func (r *FixtureRequest) Validate() error {
	var p httpapi.Problems
	if r.ExecutionID == "" {
		p.Add("execution_id", "is required: the run to export (exe_...)")
	}
	r.Name = strings.TrimSpace(r.Name)
	switch n := utf8.RuneCountInString(r.Name); {
	case n == 0:
		p.Add("name", "is required")
	case n > MaxNameLen:
		p.Add("name", "is %d characters; at most %d", n, MaxNameLen)
	}
	return p.Err()
}

// ExportFixture exports a run as a fixture: its input with personal data removed
// (FixtureInput) and, as the expected trace, the simulation of that input on the version
// the run ran, which must follow the recorded path (else 422 replay_diverged). A run still
// running is not exported (409 execution_running).
func (s *Service) ExportFixture(ctx context.Context, bot string, req FixtureRequest) (Fixture, error) {
	if err := req.Validate(); err != nil {
		return Fixture{}, err
	}
	d, err := s.traces.Get(ctx, bot, req.ExecutionID)
	if err != nil {
		return Fixture{}, err
	}
	if d.Status == runtime.StatusRunning {
		return Fixture{}, httpapi.E(httpapi.KindConflict, "execution_running",
			"the run is still running; export it once it has completed, failed or waits")
	}
	flow, err := s.flows.Version(ctx, bot, d.ReactionID, d.ReactionVersion)
	if err != nil {
		return Fixture{}, err
	}
	in := FixtureInput(d)
	expected := runtime.Simulate(flow, in)
	if diffs := Compare(recordedPath(Redact(d)), expected); len(diffs) > 0 {
		return Fixture{}, httpapi.Errorf(httpapi.KindUnprocessable, "replay_diverged",
			"the simulation of the run on version %d does not follow its recorded path (%d differences), so it cannot be a fixture",
			d.ReactionVersion, len(diffs)).With("differences", capped(diffs))
	}
	at := s.now()
	f := Fixture{ID: ids.At(fixturePrefix, at), Name: req.Name, ReactionID: d.ReactionID, Version: d.ReactionVersion,
		SourceExecutionID: d.ID, Input: in, Expected: expected, CreatedAt: at.UTC().Truncate(time.Second)}
	data, err := store.Encode(f)
	if err != nil {
		return Fixture{}, err
	}
	if len(data) > MaxFixtureBytes {
		return Fixture{}, httpapi.Errorf(httpapi.KindTooLarge, "resource_too_large",
			"the fixture would be %d bytes of JSON; a fixture is at most %d", len(data), MaxFixtureBytes)
	}
	it := store.Item{Key: fixtureKey(bot, f.ID), GSI1: store.IndexKey{PK: reactionFixtures(bot, f.ReactionID), SK: f.ID},
		Revision: 1, Data: data}
	err = store.Counted(ctx, s.store, countKey(bot, f.ReactionID), 1, func(c store.Counter) error {
		if c.Count >= MaxFixtures {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached",
				"a reaction has at most %d fixtures; delete one first", MaxFixtures).With("limit", MaxFixtures)
		}
		return s.store.Transact(ctx, []store.Write{c.Write, store.PutOp(it, store.MustNotExist)})
	})
	if err != nil {
		return Fixture{}, fmt.Errorf("export fixture: %w", err)
	}
	return f, nil
}

// Fixture returns one fixture.
func (s *Service) Fixture(ctx context.Context, bot, id string) (Fixture, error) {
	if !ids.Valid(fixturePrefix, id) {
		return Fixture{}, httpapi.NotFound("fixture")
	}
	it, err := s.store.Get(ctx, fixtureKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Fixture{}, httpapi.NotFound("fixture")
	}
	if err != nil {
		return Fixture{}, err
	}
	return store.Decode[Fixture](it)
}

// Fixtures returns a page of the bot's fixtures (of one reaction when reaction is set),
// newest first.
func (s *Service) Fixtures(ctx context.Context, bot, reaction string, limit int, cursor string) ([]FixtureSummary, string, error) {
	q := store.Query{PK: fixturesPK(bot), Prefix: fixturePrefix + "_", Reverse: true, Limit: limit, Cursor: cursor}
	if reaction != "" {
		q = store.Query{Index: store.GSI1, PK: reactionFixtures(bot, reaction), Reverse: true, Limit: limit, Cursor: cursor}
	}
	page, err := s.store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]FixtureSummary, 0, len(page.Items))
	for _, it := range page.Items {
		f, err := store.Decode[Fixture](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, f.Summary())
	}
	return out, page.Next, nil
}

// DeleteFixture deletes a fixture (the runs that ran it keep their results).
func (s *Service) DeleteFixture(ctx context.Context, bot, id string) error {
	f, err := s.Fixture(ctx, bot, id)
	if err != nil {
		return err
	}
	err = store.Counted(ctx, s.store, countKey(bot, f.ReactionID), -1, func(c store.Counter) error {
		return s.store.Transact(ctx, []store.Write{c.Write, store.DeleteOp(fixtureKey(bot, id), store.MustExist)})
	})
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 1 {
		return httpapi.NotFound("fixture") // deleted concurrently
	}
	if err != nil {
		return fmt.Errorf("delete fixture: %w", err)
	}
	return nil
}

// reactionFixtureList reads every fixture of a reaction, oldest first (at most MaxFixtures
// are kept).
func (s *Service) reactionFixtureList(ctx context.Context, bot, reaction string) ([]Fixture, error) {
	out := []Fixture{}
	q := store.Query{Index: store.GSI1, PK: reactionFixtures(bot, reaction)}
	for len(out) < MaxFixtures {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			f, err := store.Decode[Fixture](it)
			if err != nil {
				return nil, err
			}
			out = append(out, f)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return out, nil
}

// RunRequest is the body of POST .../replay/runs.
type RunRequest struct {
	ReactionID string          `json:"reaction_id"`
	Target     json.RawMessage `json:"target"`
	FixtureIDs *[]string       `json:"fixture_ids"`

	target Target
}

// Validate checks what decoding cannot.
func (r *RunRequest) Validate() error {
	var p httpapi.Problems
	p.Require("reaction_id", r.ReactionID)
	if r.Target == nil || string(r.Target) == "null" {
		p.Add("target", `is required: a published version number or "draft"`)
	} else if t, ok := parseTarget(&p, "target", r.Target); ok {
		r.target = t
	}
	if r.FixtureIDs != nil {
		list := *r.FixtureIDs
		switch {
		case len(list) == 0:
			p.Add("fixture_ids", "must name at least one fixture, or be left out for all of the reaction's")
		case len(list) > MaxFixtures:
			p.Add("fixture_ids", "names %d fixtures; at most %d", len(list), MaxFixtures)
		}
		seen := map[string]bool{}
		for i, id := range list {
			if seen[id] {
				p.Add(fmt.Sprintf("fixture_ids[%d]", i), "names %s twice", id)
			}
			seen[id] = true
		}
	}
	return p.Err()
}

// StartRun re-runs fixtures of a reaction (the ones named, or all of them) against a target
// and stores the report: synchronously, since a simulation is pure computation and a run
// has at most MaxFixtures fixtures.
func (s *Service) StartRun(ctx context.Context, bot string, req RunRequest) (Run, error) {
	if err := req.Validate(); err != nil {
		return Run{}, err
	}
	flow, rev, err := s.flow(ctx, bot, req.ReactionID, req.target)
	if err != nil {
		return Run{}, err
	}
	var fixtures []Fixture
	if req.FixtureIDs == nil {
		if fixtures, err = s.reactionFixtureList(ctx, bot, req.ReactionID); err != nil {
			return Run{}, err
		}
		if len(fixtures) == 0 {
			return Run{}, httpapi.E(httpapi.KindUnprocessable, "no_fixtures",
				"the reaction has no fixtures: export runs as fixtures first (POST .../replay/fixtures)")
		}
	} else {
		var p httpapi.Problems
		for i, id := range *req.FixtureIDs {
			f, err := s.Fixture(ctx, bot, id)
			if httpapi.KindOf(err) == httpapi.KindNotFound || (err == nil && f.ReactionID != req.ReactionID) {
				p.Add(fmt.Sprintf("fixture_ids[%d]", i), "no fixture %s of reaction %s", id, req.ReactionID)
				continue
			}
			if err != nil {
				return Run{}, err
			}
			fixtures = append(fixtures, f)
		}
		if err := p.Err(); err != nil {
			return Run{}, err
		}
		slices.SortFunc(fixtures, func(a, b Fixture) int { return strings.Compare(a.ID, b.ID) })
	}

	at := s.now()
	run := Run{ID: ids.At(runPrefix, at), ReactionID: req.ReactionID, Target: req.target, DraftRevision: rev,
		FixtureCount: len(fixtures), CreatedAt: at.UTC().Truncate(time.Second)}
	expires := at.Add(RunRetention)
	var writes []store.Write
	for _, f := range fixtures {
		r, trace := runFixture(flow, f)
		run.Results = append(run.Results, r)
		if r.Outcome == OutcomePassed {
			run.Passed++
		} else {
			run.Changed++
		}
		stored := ResultDetail{RunID: run.ID, Result: r, Trace: trace}
		if len(trace) > maxResultBytes {
			stored.Trace, stored.ResultOmitted = nil, true
		}
		data, err := store.Encode(stored)
		if err != nil {
			return Run{}, err
		}
		writes = append(writes, store.PutOp(store.Item{Key: resultKey(bot, run.ID, f.ID), Revision: 1, Data: data, ExpiresAt: expires}, store.MustNotExist))
	}
	// The results first, the report last: a report that exists is complete.
	for chunk := range slices.Chunk(writes, store.MaxTransactWrites) {
		if err := s.store.Transact(ctx, chunk); err != nil {
			return Run{}, fmt.Errorf("replay run: results: %w", err)
		}
	}
	head := run
	head.Results = nil
	data, err := store.Encode(head)
	if err != nil {
		return Run{}, err
	}
	if err := s.store.Put(ctx, store.Item{Key: runKey(bot, run.ID), GSI1: store.IndexKey{PK: reactionRuns(bot, run.ReactionID), SK: run.ID},
		Revision: 1, Data: data, ExpiresAt: expires}, store.MustNotExist); err != nil {
		return Run{}, fmt.Errorf("replay run: report: %w", err)
	}
	return run, nil
}

// runFixture simulates f on flow: its result and the simulated trace's JSON.
func runFixture(flow runtime.Flow, f Fixture) (Result, json.RawMessage) {
	res := runtime.Simulate(flow, f.Input)
	trace, err := json.Marshal(res)
	if err != nil {
		// A SimResult holds JSON values only; this cannot happen.
		trace = []byte("null")
	}
	sum := sha256.Sum256(trace)
	diffs := Compare(f.Expected, res)
	r := Result{FixtureID: f.ID, FixtureName: f.Name, Outcome: OutcomePassed, Differences: capped(diffs),
		DifferencesTotal: len(diffs), ResultSHA256: hex.EncodeToString(sum[:])}
	if len(diffs) > 0 {
		r.Outcome = OutcomeChanged
	}
	return r, trace
}

func capped(d []Difference) []Difference {
	if len(d) > MaxDifferences {
		return d[:MaxDifferences]
	}
	return d
}

// Runs returns a page of the bot's regression runs (of one reaction when reaction is set),
// newest first, without their results.
func (s *Service) Runs(ctx context.Context, bot, reaction string, limit int, cursor string) ([]Run, string, error) {
	q := store.Query{PK: runsPK(bot), Reverse: true, Limit: limit, Cursor: cursor}
	if reaction != "" {
		q = store.Query{Index: store.GSI1, PK: reactionRuns(bot, reaction), Reverse: true, Limit: limit, Cursor: cursor}
	}
	page, err := s.store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Run, 0, len(page.Items))
	for _, it := range page.Items {
		r, err := store.Decode[Run](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, r)
	}
	return out, page.Next, nil
}

// Run returns one regression run with its results (without their traces).
func (s *Service) Run(ctx context.Context, bot, id string) (Run, error) {
	if !ids.Valid(runPrefix, id) {
		return Run{}, httpapi.NotFound("run")
	}
	it, err := s.store.Get(ctx, runKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Run{}, httpapi.NotFound("run")
	}
	if err != nil {
		return Run{}, err
	}
	run, err := store.Decode[Run](it)
	if err != nil {
		return Run{}, err
	}
	run.Results = []Result{}
	q := store.Query{PK: resultsPK(bot, id), Prefix: resultPrefix}
	for len(run.Results) < run.FixtureCount {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return Run{}, err
		}
		for _, it := range page.Items {
			r, err := store.Decode[ResultDetail](it)
			if err != nil {
				return Run{}, err
			}
			run.Results = append(run.Results, r.Result)
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return run, nil
}

// RunResult returns one fixture's result in a run, with the simulated trace.
func (s *Service) RunResult(ctx context.Context, bot, run, fixture string) (ResultDetail, error) {
	if !ids.Valid(runPrefix, run) || !ids.Valid(fixturePrefix, fixture) {
		return ResultDetail{}, httpapi.NotFound("result")
	}
	if _, err := s.store.Get(ctx, runKey(bot, run)); errors.Is(err, store.ErrNotFound) {
		return ResultDetail{}, httpapi.NotFound("run")
	} else if err != nil {
		return ResultDetail{}, err
	}
	it, err := s.store.Get(ctx, resultKey(bot, run, fixture))
	if errors.Is(err, store.ErrNotFound) {
		return ResultDetail{}, httpapi.NotFound("result")
	}
	if err != nil {
		return ResultDetail{}, err
	}
	return store.Decode[ResultDetail](it)
}
