// Package wiring composes the copilot family with the families it calls: the reactions
// family (drafts, validation, updates, the reaction index) as every process builds it, the
// subscribers family's labels and fields, the bots family's account bots, and the managed AI
// family, built from the same configuration as the ai Lambda's (functions/ai/wiring: the
// providers' base URLs, routes, prices and the managed keys, which on AWS the platform reads
// from SSM for this Lambda too), so that a proposal is metered, routed and billed as any
// generation is.
package wiring

import (
	"context"
	"errors"
	"os"

	"github.com/botplatform/api/functions/ai"
	aiwiring "github.com/botplatform/api/functions/ai/wiring"
	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/copilot"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the copilot family.
func Family() family.Family {
	return family.Family{Name: "copilot", Build: func(env *family.Env) family.Parts {
		svc := Service(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { copilot.Routes(mux, svc, env.Cursors) },
			Purge:  copilot.PurgeStep(env.Store),
			Tools:  copilot.Tools(svc, env.Cursors),
		}
	}}
}

// Service builds the copilot service on env.
func Service(env *family.Env) *copilot.Service {
	gen, err := aiwiring.Service(env, os.Getenv)
	if err != nil {
		// As the ai family does: a malformed operator configuration answers 503
		// ai_not_configured, and the log says why.
		env.Log.Error("copilot: the managed AI configuration is refused", "error", err)
		gen = ai.New(ai.Config{Store: env.Store, Now: env.Now, Log: env.Log})
	}
	return copilot.New(copilot.Config{
		Store:      env.Store,
		Reactions:  reactionswiring.Service(env),
		Vocabulary: reactionswiring.Vocabulary(env),
		Bots:       accountBots{loader: env.Tenancy, bots: bots.NewService(env.Store, env.Auth, env.Now)},
		AI:         gen,
		Now:        env.Now,
		Log:        env.Log,
	})
}

// accountBots gives the family the tenancy check and the account's bots.
type accountBots struct {
	loader httpapi.BotLoader
	bots   *bots.Service
}

// LoadBot is the kernel's tenancy check.
func (a accountBots) LoadBot(ctx context.Context, account, bot string) (any, error) {
	return a.loader.LoadBot(ctx, account, bot)
}

// Owns reports whether bot is account's.
func (a accountBots) Owns(ctx context.Context, account, bot string) (bool, error) {
	_, err := a.loader.LoadBot(ctx, account, bot)
	var e *httpapi.Error
	if errors.As(err, &e) && e.Kind == httpapi.KindNotFound {
		return false, nil
	}
	return err == nil, err
}

// BotIDs lists the ids of account's bots.
func (a accountBots) BotIDs(ctx context.Context, account string) ([]string, error) {
	var out []string
	cursor := ""
	for {
		page, next, err := a.bots.List(ctx, account, 200, cursor)
		if err != nil {
			return nil, err
		}
		for _, b := range page {
			out = append(out, b.ID)
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}
