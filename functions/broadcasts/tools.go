package broadcasts

import (
	"context"
	"net/url"
	"strconv"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the broadcasts family's MCP tools (spec section 5): start a legacy reaction
// broadcast, read a broadcast of either generation, pause, resume and cancel legacy ones, list
// the second-generation ones and read their reports. Each mirrors its REST route, with the
// routes' access (broadcasts:write for reads too, the Reactions right, the broadcasts plan
// feature) and answers. Creating, editing, preflight, schedule, test-send and archive of
// second-generation broadcasts stay REST only.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	return tools(svc, cursors, nil)
}

// UnavailableTools are the same tools in a process that cannot send broadcasts: each answers
// 503 saying why, after the access checks, as the routes of Unavailable do.
func UnavailableTools(reason string) []mcptool.Tool {
	return tools(nil, nil, httpapi.Errorf(httpapi.KindUnavailable, "broadcasts_unavailable", "this deployment cannot send broadcasts: %s", reason))
}

// legacyOnly is what the pause, resume and cancel tools say of the generations they act on.
const legacyOnly = " Acts on legacy reaction broadcasts (those start_broadcast starts) only: a second-generation " +
	"broadcast's id is refused with 422 unsupported_broadcast_type and nothing changes (second-generation broadcasts are " +
	"paused, resumed and canceled over REST, under their expected_revision). An unknown id is 404 not_found."

func tools(svc *Service, cursors *httpapi.Cursors, down error) []mcptool.Tool {
	access := httpapi.Need("broadcasts:write", auth.RightReactions).InPlan(auth.FeatureBroadcasts)
	act := func(name, action, description string) mcptool.Tool {
		return mcptool.New(name, description+legacyOnly, access, guard(down, func(ctx context.Context, in broadcastArgs) (any, error) {
			return svc.ActLegacy(ctx, in.BotID, in.BroadcastID, action)
		})).Mirroring("POST /api/bots/{botID}/broadcasts/{broadcastID}/" + action).Mutating()
	}
	return []mcptool.Tool{
		mcptool.New("start_broadcast", "Start a legacy reaction broadcast: the reaction's published version runs now for every "+
			"subscriber of the bot having any of labels (every subscriber when labels is empty or absent), each once, at the "+
			"channels' pace. Answers the broadcast (id lbc_..., status, report); follow it with get_broadcast. The reaction must "+
			"be published (409 broadcast_not_ready); paid: true needs paid broadcasts enabled for the bot (403 "+
			"paid_broadcasts_not_enabled); a label the bot lacks is 422 unknown_label.",
			access, guard(down, func(ctx context.Context, in startArgs) (any, error) {
				paid := in.Paid != nil && *in.Paid
				if p := mcptool.Caller(ctx); paid && (p == nil || !p.Entitlements.PaidBroadcasts(in.BotID)) {
					return nil, httpapi.E(httpapi.KindForbidden, "paid_broadcasts_not_enabled", "paid broadcasts are not enabled for this bot")
				}
				return svc.StartLegacy(ctx, in.BotID, in.ReactionID, paid, in.Labels)
			})).Mirroring("POST /api/bots/{botID}/reactions/{reactionID}/broadcast").Mutating(),
		mcptool.New("get_broadcast", "Get one broadcast of a bot, of either generation (the second generation is looked up "+
			"first): a second-generation broadcast (type broadcast: name, content, audience, channels, status, revision) or a "+
			"legacy reaction broadcast (type reaction_broadcast: reaction_id, paid, labels, status and its report).",
			access, guard(down, func(ctx context.Context, in broadcastArgs) (any, error) {
				return svc.Lookup(ctx, in.BotID, in.BroadcastID)
			})).Mirroring("GET /api/bots/{botID}/broadcasts/{broadcastID}"),
		act("pause_broadcast", "pause", "Pause a running or scheduled legacy reaction broadcast: sending stops at its next batch; "+
			"resume_broadcast continues where it stopped. Answers {\"status\": \"pausing\"}; a broadcast that is not running or "+
			"scheduled is 409 invalid_transition."),
		act("resume_broadcast", "resume", "Resume a paused legacy reaction broadcast: it continues where pause stopped, never "+
			"sending anyone twice. Answers {\"status\": \"resuming\"}; a broadcast that is not paused is 409 invalid_transition."),
		act("cancel_broadcast", "cancel", "Cancel a legacy reaction broadcast that has not finished: the recipients not yet sent "+
			"to are canceled, what was sent stays sent. Answers {\"status\": \"canceled\"}; a finished broadcast is 409 "+
			"invalid_transition."),
		mcptool.New("list_content_broadcasts", "List a bot's second-generation (content) broadcasts, oldest first: each one's "+
			"id, name, content, audience, channels, status and revision. Archived ones are left out unless archived is true. "+
			"Legacy reaction broadcasts are not listed.",
			access, guard(down, func(ctx context.Context, in listArgs) (any, error) {
				q := url.Values{}
				archived := in.Archived != nil && *in.Archived
				if in.Archived != nil {
					q.Set("archived", strconv.FormatBool(archived))
				}
				path := "/api/bots/" + url.PathEscape(in.BotID) + "/broadcasts"
				return mcptool.List(ctx, cursors, path, q, in.Page, func(limit int, cursor string) ([]Broadcast, string, error) {
					return svc.List(ctx, in.BotID, archived, limit, cursor)
				})
			})).Mirroring("GET /api/bots/{botID}/broadcasts"),
		mcptool.New("get_content_broadcast_report", "Get the report of a second-generation (content) broadcast: per channel, "+
			"how many recipients were planned, sent, delivered, read (where the provider reports it), clicked, and failed by "+
			"reason. A legacy reaction broadcast's report is part of get_broadcast's answer; its id here is 404 not_found.",
			access, guard(down, func(ctx context.Context, in broadcastArgs) (any, error) {
				return svc.Report(ctx, in.BotID, in.BroadcastID)
			})).Mirroring("GET /api/bots/{botID}/broadcasts/{broadcastID}/report"),
	}
}

// guard answers down, when the process cannot send broadcasts, instead of running h.
func guard[In any](down error, h func(context.Context, In) (any, error)) func(context.Context, In) (any, error) {
	if down == nil {
		return h
	}
	return func(context.Context, In) (any, error) { return nil, down }
}

type startArgs struct {
	mcptool.Bot
	ReactionID string   `json:"reaction_id" jsonschema:"the reaction to broadcast (rct_...), as list_reactions returns it; it must have a published version"`
	Paid       *bool    `json:"paid,omitempty" jsonschema:"a paid broadcast (default false); needs paid broadcasts enabled for the bot"`
	Labels     []string `json:"labels,omitempty" jsonschema:"send to the subscribers having any of these labels (lbl_..., at most 20); absent or empty: every subscriber"`
}

// Validate requires the reaction and checks the labels as the route checks its body.
func (a *startArgs) Validate() error {
	if a.ReactionID == "" {
		var p httpapi.Problems
		p.Add("reaction_id", "is required")
		return p.Err()
	}
	req := LegacyRequest{Paid: a.Paid, Labels: a.Labels}
	return req.Validate()
}

type broadcastArgs struct {
	mcptool.Bot
	BroadcastID string `json:"broadcast_id" jsonschema:"the broadcast's id: lbc_... (a legacy reaction broadcast) or bc_... (second generation)"`
}

// Validate requires the broadcast.
func (a *broadcastArgs) Validate() error {
	var p httpapi.Problems
	p.Require("broadcast_id", a.BroadcastID)
	return p.Err()
}

type listArgs struct {
	mcptool.Bot
	mcptool.Page
	Archived *bool `json:"archived,omitempty" jsonschema:"include the archived broadcasts (default false)"`
}
