// Package wiring composes the bots family with the channels family: a bot's channels are
// deleted in the bot's own deletion transaction, so their webhooks stop with the bot.
package wiring

import (
	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the bots family.
func Family() family.Family {
	return family.Family{Name: "bots", Build: func(env *family.Env) family.Parts {
		svc := bots.NewService(env.Store, env.Auth, env.Now).
			WithDependents(channels.BotDeletes(env.Store, env.Now)).
			WithPurge(env.Outbox, env.Log)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { bots.Routes(mux, svc, env.Auth, env.Cursors) },
			Tools:  bots.Tools(svc, env.Cursors),
		}
	}}
}
