// Package wiring composes the onboarding family: its service on the kernel's store and
// tenancy check, and the playbooks family's look-up of an install (by its pointer and
// record, without the playbooks service). It recommends from the playbook catalog, which is
// data (playbooks/catalog).
package wiring

import (
	"context"

	"github.com/botplatform/api/functions/onboarding"
	"github.com/botplatform/api/functions/playbooks"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the onboarding family. Its sessions are the account's: nothing to purge with a
// bot.
func Family() family.Family {
	return family.Family{Name: "onboarding", Build: func(env *family.Env) family.Parts {
		installs := func(ctx context.Context, account, id string) (onboarding.Install, error) {
			bot, status, err := playbooks.InstallState(ctx, env.Store, account, id)
			return onboarding.Install{BotID: bot, Status: status, Installed: status == playbooks.StatusInstalled}, err
		}
		svc := onboarding.New(env.Store, env.Tenancy, installs, env.Now)
		return family.Parts{Routes: func(mux *httpapi.Mux) { onboarding.Routes(mux, svc) }}
	}}
}
