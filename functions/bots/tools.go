package bots

import (
	"context"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// Tools are the bots family's MCP tools: the reads of GET /api/bots and GET
// /api/bots/{botID}, with those routes' access and answers.
func Tools(svc *Service, cursors *httpapi.Cursors) []mcptool.Tool {
	return []mcptool.Tool{
		mcptool.New("list_bots", "List the bots of your account, oldest first: each bot's id, name, settings and revision. "+
			"Every other tool acts on one bot, named by its id.",
			httpapi.NeedPAT("bots:read"),
			func(ctx context.Context, in mcptool.Page) (any, error) {
				account := mcptool.Caller(ctx).AccountID
				return mcptool.List(ctx, cursors, "/api/bots", nil, in, func(limit int, cursor string) ([]Bot, string, error) {
					return svc.List(ctx, account, limit, cursor)
				})
			}).Mirroring("GET /api/bots"),
		mcptool.New("get_bot", "Get one bot: its name, settings and revision.",
			httpapi.Need("bots:read"),
			func(ctx context.Context, in mcptool.Bot) (any, error) {
				// The kernel loaded the bot for the tenancy check; answer that read.
				if b, ok := mcptool.LoadedBot(ctx).(Bot); ok {
					return b, nil
				}
				return svc.Get(ctx, mcptool.Caller(ctx).AccountID, in.BotID)
			}).Mirroring("GET /api/bots/{botID}"),
	}
}
