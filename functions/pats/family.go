package pats

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the personal access token family.
func Family() family.Family {
	return family.Family{Name: "pats", Build: func(env *family.Env) family.Parts {
		return family.Parts{Routes: func(mux *httpapi.Mux) { Routes(mux, env.Auth, env.Cursors, env.Now) }}
	}}
}
