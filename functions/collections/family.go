package collections

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
)

// Family is the collections family: its routes and the purge of deleted collections share
// one service.
func Family() family.Family {
	return family.Family{Name: "collections", Build: func(env *family.Env) family.Parts {
		svc := NewService(env.Store, env.Jobs, env.Now, env.Log)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { Routes(mux, svc, env.Cursors) },
			Jobs:   map[string]jobs.Step{PurgeJob: svc.PurgeStep},
			Purge:  PurgeBotStep(env.Store),
		}
	}}
}
