package requestlogs

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/reqlog"
)

// Family is the request log family.
func Family() family.Family {
	return family.Family{Name: "requestlogs", Build: func(env *family.Env) family.Parts {
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { Routes(mux, env.RequestLog, env.Cursors) },
			Purge:  reqlog.PurgeStep(env.Store),
		}
	}}
}
