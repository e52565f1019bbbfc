// Package wiring composes the onboarding family: its service on the kernel's store and
// tenancy check. It recommends from the playbook catalog, which is data (playbooks/catalog),
// not the playbooks family's service.
package wiring

import (
	"github.com/botplatform/api/functions/onboarding"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the onboarding family. Its sessions are the account's: nothing to purge with a
// bot.
func Family() family.Family {
	return family.Family{Name: "onboarding", Build: func(env *family.Env) family.Parts {
		svc := onboarding.New(env.Store, env.Tenancy, env.Now)
		return family.Parts{Routes: func(mux *httpapi.Mux) { onboarding.Routes(mux, svc) }}
	}}
}
