package reactions

import (
	"context"
	"net/url"
	"strconv"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the reactions family's MCP tools: the reads of GET .../reactions and GET
// .../reactions/{reactionID}, with those routes' access (reactions:read; reads need no
// right) and answers.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	read := httpapi.Need("reactions:read")
	return []mcptool.Tool{
		mcptool.New("list_reactions", "List a bot's reactions (its automated flows), oldest first: each one's id, name, "+
			"trigger, revision and whether it has a published version. Filters: trigger_type, published.",
			read, func(ctx context.Context, in listArgs) (any, error) {
				f, q, err := in.filter()
				if err != nil {
					return nil, err
				}
				path := "/api/bots/" + url.PathEscape(in.BotID) + "/reactions"
				return mcptool.List(ctx, cursors, path, q, in.Page, func(limit int, cursor string) ([]Summary, string, error) {
					return svc.List(ctx, in.BotID, f, limit, cursor)
				})
			}).Mirroring("GET /api/bots/{botID}/reactions"),
		mcptool.New("get_reaction", "Get one reaction of a bot: its draft (name, trigger, steps), revision and published version.",
			read, func(ctx context.Context, in getArgs) (any, error) {
				return svc.Get(ctx, in.BotID, in.ReactionID)
			}).Mirroring("GET /api/bots/{botID}/reactions/{reactionID}"),
	}
}

type listArgs struct {
	mcptool.Bot
	mcptool.Page
	TriggerType *string `json:"trigger_type,omitempty" jsonschema:"keep the reactions whose draft has this trigger type: start, keyword, label_added, button or api"`
	Published   *bool   `json:"published,omitempty" jsonschema:"keep the reactions with (true) or without (false) a published version"`
}

// filter is the list's filter, and the query the REST list takes it as (its cursors are
// bound to it).
func (a listArgs) filter() (Filter, url.Values, error) {
	var f Filter
	q := url.Values{}
	if a.TriggerType != nil {
		if !knownTrigger(TriggerType(*a.TriggerType)) {
			return f, nil, httpapi.InvalidParam("trigger_type", "trigger_type must be one of start, keyword, label_added, button, api")
		}
		f.TriggerType = TriggerType(*a.TriggerType)
		q.Set("trigger_type", *a.TriggerType)
	}
	if a.Published != nil {
		f.Published = a.Published
		q.Set("published", strconv.FormatBool(*a.Published))
	}
	return f, q, nil
}

type getArgs struct {
	mcptool.Bot
	ReactionID string `json:"reaction_id" jsonschema:"the reaction's id (rct_...), as list_reactions returns it"`
}

// Validate requires the reaction.
func (a *getArgs) Validate() error {
	var p httpapi.Problems
	p.Require("reaction_id", a.ReactionID)
	return p.Err()
}
