package auditlog

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the audit trail family.
func Family() family.Family {
	return family.Family{Name: "auditlog", Build: func(env *family.Env) family.Parts {
		return family.Parts{Routes: func(mux *httpapi.Mux) { Routes(mux, env.Trail, env.Cursors) }}
	}}
}
