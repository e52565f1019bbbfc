package copilot

import (
	"context"
	"net/url"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the copilot family's MCP tools: the reads of a proposal and of a reaction's
// proposals, and validating and simulating one, each the MCP form of its route with the
// route's access and answer. A proposal names its bot only once loaded, so the tools take no
// bot_id (the kernel checks the scope and the rollout) and the service checks the
// Reactions right of validate and simulate on the proposal's bot, as the routes do.
// Creating (it spends managed AI), applying and rejecting are left to the REST routes: a
// change to a draft is the user's decision.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	return []mcptool.Tool{
		mcptool.New("get_copilot_proposal", "Get one copilot proposal (cpp_...): the goal, the model's summary, the "+
			"proposed draft (name, trigger, steps), the diff against the draft it was proposed against (name, trigger, "+
			"steps added, removed or changed with before and after), its status (open, applied, rejected, superseded), "+
			"its base and applied revisions, the AI usage and the last validation and simulation.",
			readAccess, func(ctx context.Context, in proposalArgs) (any, error) {
				return svc.Get(ctx, mcptool.Caller(ctx), in.ProposalID)
			}).Mirroring("GET " + proposalPath),
		mcptool.New("list_copilot_proposals", "List the copilot proposals of a reaction (rct_...), newest first, each "+
			"as get_copilot_proposal answers it.",
			readAccess, func(ctx context.Context, in listArgs) (any, error) {
				path := "/api/reactions/" + url.PathEscape(in.ReactionID) + "/copilot/proposals"
				return mcptool.List(ctx, cursors, path, nil, in.Page, func(limit int, cursor string) ([]Proposal, string, error) {
					return svc.List(ctx, mcptool.Caller(ctx), in.ReactionID, limit, cursor)
				})
			}).Mirroring("GET " + reactionProposals),
		mcptool.New("validate_copilot_proposal", "Validate a copilot proposal's draft as publishing it would be "+
			"validated, against the bot as it is now: answers {valid, problems: [{field, message}], checked_at}. Changes "+
			"nothing but the proposal's record of its last validation. Needs the Reactions right on the proposal's bot.",
			writeAccess, func(ctx context.Context, in proposalArgs) (any, error) {
				return svc.Validate(ctx, mcptool.Caller(ctx), in.ProposalID)
			}).Mirroring("POST " + proposalPath + "/validate").Mutating(),
		mcptool.New("simulate_copilot_proposal", "Simulate a copilot proposal: run its draft and the draft it was "+
			"proposed against on 1 to 20 sample subscribers (labels, field values by field id, button presses, trigger) "+
			"with the runtime's step semantics and a fixed clock, nothing sent or stored. Answers each sample's two "+
			"traces and paths and whether the path changed; the same call always gives the same answer. Needs the "+
			"Reactions right on the proposal's bot.",
			writeAccess, func(ctx context.Context, in simulateArgs) (any, error) {
				req := SimulateRequest{Channel: in.Channel, Samples: in.Samples}
				return svc.Simulate(ctx, mcptool.Caller(ctx), in.ProposalID, req)
			}).Mirroring("POST " + proposalPath + "/simulate").Mutating(),
	}
}

type proposalArgs struct {
	ProposalID string `json:"proposal_id" jsonschema:"the proposal's id (cpp_...)"`
}

type listArgs struct {
	mcptool.Page
	ReactionID string `json:"reaction_id" jsonschema:"the reaction's id (rct_...)"`
}

type simulateArgs struct {
	ProposalID string   `json:"proposal_id" jsonschema:"the proposal's id (cpp_...)"`
	Channel    string   `json:"channel,omitempty" jsonschema:"telegram (default), vk or whatsapp"`
	Samples    []Sample `json:"samples,omitempty" jsonschema:"1 to 20 samples (required): {subscriber: {labels: [label ids], fields: {field id: value}}, presses: [{step_id, button (index; -1: none)}], trigger: {type}}"`
}
