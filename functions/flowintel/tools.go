package flowintel

import (
	"context"
	"net/url"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the family's MCP tools: every read (overlay, samples, policy, reaggregation jobs)
// with its route's access (analytics:read, the Analytics right, the flow_intelligence
// rollout) and answer. None changes anything, so none is audited; changing the policy and
// starting a reaggregation are REST only. cursors are the REST lists' (the jobs list tool
// and its route continue each other's pages).
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	return []mcptool.Tool{
		mcptool.New("get_flow_overlay", "Get a reaction version's steps with their flow numbers over a range of UTC days: "+
			"per step (in the version's order) entered, completed (executed without error), continued (the run went on to "+
			"another step or ended normally after it), dropped (completed - continued: still waiting there or abandoned), "+
			"errors (the step failed the run) and median_ms, the median time from entering the step to the run's next step, "+
			"estimated from a histogram (within a factor 1.41 of the truth, bounded by median_low_ms and median_high_ms); "+
			"plus totals. version defaults to the newest published one; the range to the last 30 days, at most 366 (400 "+
			"range_too_long). A reaction or version that does not exist is 404.",
			readAccess, func(ctx context.Context, in overlayArgs) (any, error) {
				q := url.Values{}
				if in.From != "" {
					q.Set("from", in.From)
				}
				if in.To != "" {
					q.Set("to", in.To)
				}
				rg, err := parseRange(q, svc.now())
				if err != nil {
					return nil, err
				}
				return svc.Overlay(ctx, in.BotID, in.ReactionID, in.Version, rg)
			}).Mirroring("GET " + Base + "/reactions/{reactionID}/overlay"),
		mcptool.New("list_flow_samples", "List up to limit (1..20, default 5) recent runs of a reaction that entered a "+
			"step, newest first, redacted: no run, subscriber, update or provider message id; the bot-authored inputs, "+
			"decisions and outcomes of each step, and failures' kinds. At most the bot's 1,000 newest runs are read, and "+
			"none older than the account policy's retention_days. 409 sampling_disabled when the account's policy disables "+
			"sampling.",
			readAccess, func(ctx context.Context, in samplesArgs) (any, error) {
				limit := DefaultSamples
				if in.Limit != nil {
					limit = *in.Limit
				}
				return svc.Samples(ctx, mcptool.Caller(ctx).AccountID, in.BotID, in.ReactionID, in.StepID, in.Version, limit)
			}).Mirroring("GET " + Base + "/reactions/{reactionID}/samples"),
		mcptool.New("get_flow_policy", "Get the account's flow intelligence policy (the same for every bot of the "+
			"account): sampling (enabled or disabled), sample_trigger_details (whether samples show the keyword, pattern, "+
			"payload or label that started a run), retention_days (1..30: how old a sampled run may be) and revision (0: "+
			"the default, never saved). Changing it is REST only (PUT .../flow-intelligence/policy).",
			readAccess, func(ctx context.Context, _ policyArgs) (any, error) {
				return svc.Policy(ctx, mcptool.Caller(ctx).AccountID)
			}).Mirroring("GET " + Base + "/policy"),
		mcptool.New("list_flow_reaggregations", "List a bot's reaggregation jobs (rebuilds of its flow counters from "+
			"the execution traces), newest first, kept 30 days: each job's id (job_...), status (queued, running, "+
			"succeeded, failed), from and to (the range rebuilt), runs_scanned, days (per UTC day: rebuilt with the "+
			"counters corrected, unchanged, or skipped with its reason: traces_expired, future, busy), error (code and "+
			"message of a failed job) and times. Starting a job is REST only (POST .../flow-intelligence/reaggregations).",
			readAccess, func(ctx context.Context, in listJobsArgs) (any, error) {
				path := "/api/bots/" + url.PathEscape(in.BotID) + "/flow-intelligence/reaggregations"
				return mcptool.List(ctx, cursors, path, nil, in.Page, func(limit int, cursor string) ([]Job, string, error) {
					return svc.Reaggregations(ctx, in.BotID, limit, cursor)
				})
			}).Mirroring("GET " + Base + "/reaggregations"),
		mcptool.New("get_flow_reaggregation", "Get one reaggregation job of a bot, as list_flow_reaggregations shows "+
			"it: its status (queued, running, succeeded, failed), the range, runs_scanned, what it did to each UTC day "+
			"(rebuilt with the counters corrected, unchanged, or skipped with its reason) and, when it failed, why. A "+
			"job that does not exist (or expired after 30 days) is 404.",
			readAccess, func(ctx context.Context, in jobArgs) (any, error) {
				return svc.Reaggregation(ctx, in.BotID, in.JobID)
			}).Mirroring("GET " + Base + "/reaggregations/{jobID}"),
	}
}

type overlayArgs struct {
	mcptool.Bot
	ReactionID string `json:"reaction_id" jsonschema:"the reaction's id (rct_...)"`
	Version    int64  `json:"version,omitempty" jsonschema:"the version number (default: the newest published)"`
	From       string `json:"from,omitempty" jsonschema:"start of the range, RFC 3339 (default: 30 days before to)"`
	To         string `json:"to,omitempty" jsonschema:"end of the range, RFC 3339 (default: now)"`
}

// Validate requires the reaction and a valid version.
func (a *overlayArgs) Validate() error {
	var p httpapi.Problems
	p.Require("reaction_id", a.ReactionID)
	if a.Version < 0 {
		p.Add("version", "must be a version number of at least 1")
	}
	return p.Err()
}

type samplesArgs struct {
	mcptool.Bot
	ReactionID string `json:"reaction_id" jsonschema:"the reaction's id (rct_...)"`
	StepID     string `json:"step_id" jsonschema:"the step whose runs to show"`
	Version    int64  `json:"version,omitempty" jsonschema:"only runs of this version (default: any)"`
	Limit      *int   `json:"limit,omitempty" jsonschema:"how many runs, 1 to 20 (default 5)"`
}

// Validate requires the reaction and step and bounds the limit.
func (a *samplesArgs) Validate() error {
	var p httpapi.Problems
	p.Require("reaction_id", a.ReactionID)
	p.Require("step_id", a.StepID)
	if a.Version < 0 {
		p.Add("version", "must be a version number of at least 1")
	}
	if a.Limit != nil && (*a.Limit < 1 || *a.Limit > MaxSamples) {
		p.Add("limit", "must be 1 to 20")
	}
	return p.Err()
}

type policyArgs struct {
	mcptool.Bot
}

type listJobsArgs struct {
	mcptool.Bot
	mcptool.Page
}

type jobArgs struct {
	mcptool.Bot
	JobID string `json:"job_id" jsonschema:"the job's id (job_...), as list_flow_reaggregations returns it"`
}

// Validate requires the job.
func (a *jobArgs) Validate() error {
	var p httpapi.Problems
	p.Require("job_id", a.JobID)
	return p.Err()
}
