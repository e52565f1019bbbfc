package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/botplatform/api/shared/auth"
)

// The entitlement commands: an account's plan and rollout, a bot's paid broadcasts. Tokens in
// use see a change within the principal cache's 30 s (docs/access.md).
func init() {
	adminCommands["account plan"] = accountPlan
	adminCommands["account rollout"] = accountRollout
	adminCommands["bot paid-broadcasts"] = botPaidBroadcasts
}

func accountPlan(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	account := fs.String("account", "", "account id")
	features := fs.String("features", "", `the plan's features, comma-separated ("" for none); "standard" for every plan feature`)
	return func(ctx context.Context, a *app) (any, error) {
		if *account == "" {
			return nil, usageError("--account is required")
		}
		var plan []auth.Feature // nil: the standard plan
		if *features != "standard" {
			var err error
			if plan, err = auth.ParseFeatures(*features, auth.PlanFeatures); err != nil {
				return nil, usageError("--features: " + err.Error())
			}
		}
		acct, err := a.Auth.SetPlan(ctx, *account, plan)
		if err != nil {
			return nil, notFoundAs(err, "account "+*account)
		}
		return entitlementsOut(acct), nil
	}
}

func accountRollout(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	account := fs.String("account", "", "account id")
	enable := fs.String("enable", "", "rollout features to enable, comma-separated")
	disable := fs.String("disable", "", "rollout features to disable, comma-separated")
	return func(ctx context.Context, a *app) (any, error) {
		if *account == "" || *enable == "" && *disable == "" {
			return nil, usageError("--account and at least one of --enable, --disable are required")
		}
		on, err := auth.ParseFeatures(*enable, auth.RolloutFeatures)
		if err != nil {
			return nil, usageError("--enable: " + err.Error())
		}
		off, err := auth.ParseFeatures(*disable, auth.RolloutFeatures)
		if err != nil {
			return nil, usageError("--disable: " + err.Error())
		}
		for _, f := range on {
			for _, g := range off {
				if f == g {
					return nil, usageError(fmt.Sprintf("%s is both enabled and disabled", f))
				}
			}
		}
		acct, err := a.Auth.SetRollout(ctx, *account, on, off)
		if err != nil {
			return nil, notFoundAs(err, "account "+*account)
		}
		return entitlementsOut(acct), nil
	}
}

func botPaidBroadcasts(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	account := fs.String("account", "", "the bot's account (default: the demo account)")
	bot := fs.String("bot", "", "bot id")
	enable := fs.Bool("enable", false, "enable paid broadcasts")
	disable := fs.Bool("disable", false, "disable paid broadcasts")
	return func(ctx context.Context, a *app) (any, error) {
		if *bot == "" || *enable == *disable {
			return nil, usageError("--bot and exactly one of --enable, --disable are required")
		}
		acct, err := a.botAccount(ctx, *account, *bot)
		if err != nil {
			return nil, err
		}
		out, err := a.Auth.SetPaidBroadcasts(ctx, acct, *bot, *enable)
		if err != nil {
			return nil, notFoundAs(err, "account "+acct)
		}
		return map[string]any{"account_id": acct, "bot_id": *bot, "paid_broadcasts": out.Entitlements.PaidBroadcasts(*bot)}, nil
	}
}

// entitlementsOut is the account's entitlements as the commands print them: the plan spelled
// out even when it is the standard one.
func entitlementsOut(acct auth.Account) map[string]any {
	plan := []auth.Feature{}
	for _, f := range auth.PlanFeatures {
		if acct.Entitlements.InPlan(f) {
			plan = append(plan, f)
		}
	}
	rollout := acct.Entitlements.Rollout
	if rollout == nil {
		rollout = []auth.Feature{}
	}
	return map[string]any{"account_id": acct.ID, "plan": plan, "standard_plan": acct.Entitlements.Plan == nil, "rollout": rollout}
}
