package bots

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Tenancy is the tenancy check every {botID} route goes through (family.Deps.Tenancy): the
// bot must be one of the caller's account. It is the bots family's lookup, which every
// process links.
func Tenancy(env *family.Env) httpapi.BotLoader { return NewService(env.Store, env.Auth, env.Now) }
