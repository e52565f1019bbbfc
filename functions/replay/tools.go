package replay

import (
	"context"
	"encoding/json"
	"net/url"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the replay family's MCP tools, with their routes' access (the replay rollout
// feature included). No tool reveals a run's identifying data: get_replay_execution answers
// the redacted form (Redact), so it mirrors no route; the trace GET, which shows the
// subscriber id and the provider's ids, is REST only (docs/replay.md, "What is revealed,
// and to whom"). Fixtures, regression runs and their results hold only redacted data.
// simulate_replay runs a flow and is audited like its POST; the rest read.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	return []mcptool.Tool{
		mcptool.New("list_replay_executions", "List a bot's recorded runs of published reactions, newest first, "+
			"without their steps and redacted (no subscriber id, no provider update id): each run's id (exe_...), reaction_id "+
			"and reaction_version, trigger, status (running, waiting, completed, failed), end_reason, error and times. "+
			"reaction_id and status narrow the list; a page reads at most 200 runs, so a narrowed page may come back "+
			"short, even empty, with a next_cursor to go on from.",
			readAccess, func(ctx context.Context, in listExecutionsArgs) (any, error) {
				q := url.Values{}
				if in.ReactionID != "" {
					q.Set("reaction_id", in.ReactionID)
				}
				if in.Status != "" {
					q.Set("status", in.Status)
				}
				return mcptool.List(ctx, cursors, botPath(in.BotID, "/executions"), q, in.Page,
					func(limit int, cursor string) ([]runtime.Execution, string, error) {
						return svc.Executions(ctx, in.BotID, ExecutionFilter{ReactionID: in.ReactionID, Status: in.Status}, limit, cursor)
					})
			}).Mirroring("GET " + executions),
		mcptool.New("get_replay_execution", "Get one recorded run with its steps, redacted: the trace of what the bot "+
			"did and why (each step's input, decision and outcome), with the subscriber id removed, the provider's update id "+
			"and an inbound email's id dropped, and every provider message id replaced by a placeholder (msg_1, msg_2, ... "+
			"in order of appearance). The unredacted trace is REST only.",
			readAccess, func(ctx context.Context, in executionArgs) (any, error) {
				return svc.RedactedExecution(ctx, in.BotID, in.ExecutionID)
			}),
		mcptool.New("simulate_replay", "Re-run a recorded run's input deterministically (fixed clock, recorded condition "+
			"results, presses and provider answers) against the version it ran (default), another published version, or the "+
			"reaction's current draft (version \"draft\"), and compare the simulated path with the recorded one. Answers "+
			"{execution_id, reaction_id, recorded_version, version, draft_revision, input (redacted), result (status, "+
			"end_reason, error, steps, notes), matches, differences}. Stores nothing.",
			writeAccess, func(ctx context.Context, in simulateArgs) (any, error) {
				return svc.Simulate(ctx, in.BotID, in.request())
			}).Mirroring("POST " + simulation).Mutating(),
		mcptool.New("list_replay_fixtures", "List a bot's regression fixtures, newest first (of one reaction with "+
			"reaction_id): each fixture's id (rfx_...), name, reaction_id, version, source_execution_id, the expected "+
			"status, end_reason and step_count.",
			readAccess, func(ctx context.Context, in listByReactionArgs) (any, error) {
				return mcptool.List(ctx, cursors, botPath(in.BotID, "/fixtures"), in.query(), in.Page,
					func(limit int, cursor string) ([]FixtureSummary, string, error) {
						return svc.Fixtures(ctx, in.BotID, in.ReactionID, limit, cursor)
					})
			}).Mirroring("GET " + fixtures),
		mcptool.New("get_replay_fixture", "Get one regression fixture: its redacted input (trigger, start, recorded "+
			"condition results, presses and provider answers; no subscriber id, no provider ids) and its expected trace.",
			readAccess, func(ctx context.Context, in fixtureArgs) (any, error) {
				return svc.Fixture(ctx, in.BotID, in.FixtureID)
			}).Mirroring("GET " + fixture),
		mcptool.New("list_replay_runs", "List a bot's regression runs, newest first (of one reaction with reaction_id): "+
			"each run's id (rpr_...), reaction_id, target (a version or \"draft\" with draft_revision), fixture_count, "+
			"passed, changed and created_at.",
			readAccess, func(ctx context.Context, in listByReactionArgs) (any, error) {
				return mcptool.List(ctx, cursors, botPath(in.BotID, "/runs"), in.query(), in.Page,
					func(limit int, cursor string) ([]Run, string, error) {
						return svc.Runs(ctx, in.BotID, in.ReactionID, limit, cursor)
					})
			}).Mirroring("GET " + runs),
		mcptool.New("get_replay_run", "Get one regression run with each fixture's result: passed or changed, with "+
			"the differences per entry (step_changed, decision_changed, outcome_changed, missing, extra) and at the end "+
			"(status_changed, end_reason_changed, error_changed), and the SHA-256 of the simulated trace.",
			readAccess, func(ctx context.Context, in runArgs) (any, error) {
				return svc.Run(ctx, in.BotID, in.RunID)
			}).Mirroring("GET " + run),
		// The result's trace is the simulation of the fixture's input, which is redacted
		// (FixtureInput): its message ids are placeholders or made up (sim_<seq>), so the
		// route's answer reveals nothing and the tool answers it as it is.
		mcptool.New("get_replay_run_result", "Get one fixture's result in a regression run with the simulated trace: "+
			"run_id, fixture_id, fixture_name, outcome (passed or changed), differences (at most 50; differences_total "+
			"counts them all), result_sha256 (the SHA-256 of the trace's JSON) and trace, the simulated run (status, "+
			"end_reason, error, steps, notes) from the fixture's redacted input: no subscriber id, no provider ids "+
			"(message ids are placeholders). A trace over 300 KiB is not kept (trace null, result_omitted true).",
			readAccess, func(ctx context.Context, in resultArgs) (any, error) {
				return svc.RunResult(ctx, in.BotID, in.RunID, in.FixtureID)
			}).Mirroring("GET " + result),
	}
}

func botPath(bot, rest string) string { return "/api/bots/" + url.PathEscape(bot) + "/replay" + rest }

type listExecutionsArgs struct {
	mcptool.Bot
	mcptool.Page
	ReactionID string `json:"reaction_id,omitempty" jsonschema:"only runs of this reaction"`
	Status     string `json:"status,omitempty" jsonschema:"only runs in this status: running, waiting, completed or failed"`
}

type executionArgs struct {
	mcptool.Bot
	ExecutionID string `json:"execution_id" jsonschema:"the run's id (exe_...), as list_replay_executions returns it"`
}

// Validate requires the run.
func (a *executionArgs) Validate() error {
	var p httpapi.Problems
	p.Require("execution_id", a.ExecutionID)
	return p.Err()
}

type simulateArgs struct {
	mcptool.Bot
	ExecutionID string `json:"execution_id" jsonschema:"the recorded run to re-run (exe_...)"`
	Version     any    `json:"version,omitempty" jsonschema:"a published version number, or \"draft\" for the reaction's current draft; absent: the version the run ran"`
}

func (a *simulateArgs) request() SimulationRequest {
	r := SimulationRequest{ExecutionID: a.ExecutionID}
	if a.Version != nil {
		r.Version, _ = json.Marshal(a.Version)
	}
	return r
}

// Validate checks the arguments as the route checks its body.
func (a *simulateArgs) Validate() error {
	r := a.request()
	return r.Validate()
}

type listByReactionArgs struct {
	mcptool.Bot
	mcptool.Page
	ReactionID string `json:"reaction_id,omitempty" jsonschema:"only those of this reaction"`
}

func (a *listByReactionArgs) query() url.Values {
	if a.ReactionID == "" {
		return nil
	}
	return url.Values{"reaction_id": {a.ReactionID}}
}

type fixtureArgs struct {
	mcptool.Bot
	FixtureID string `json:"fixture_id" jsonschema:"the fixture's id (rfx_...), as list_replay_fixtures returns it"`
}

// Validate requires the fixture.
func (a *fixtureArgs) Validate() error {
	var p httpapi.Problems
	p.Require("fixture_id", a.FixtureID)
	return p.Err()
}

type runArgs struct {
	mcptool.Bot
	RunID string `json:"run_id" jsonschema:"the run's id (rpr_...), as list_replay_runs returns it"`
}

// Validate requires the run.
func (a *runArgs) Validate() error {
	var p httpapi.Problems
	p.Require("run_id", a.RunID)
	return p.Err()
}

type resultArgs struct {
	mcptool.Bot
	RunID     string `json:"run_id" jsonschema:"the run's id (rpr_...), as list_replay_runs returns it"`
	FixtureID string `json:"fixture_id" jsonschema:"the fixture's id (rfx_...), as get_replay_run lists it in results"`
}

// Validate requires the run and the fixture.
func (a *resultArgs) Validate() error {
	var p httpapi.Problems
	p.Require("run_id", a.RunID)
	p.Require("fixture_id", a.FixtureID)
	return p.Err()
}
