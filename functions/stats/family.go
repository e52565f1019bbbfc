package stats

import (
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	counters "github.com/botplatform/api/shared/stats"
)

// Family is the stats family.
func Family() family.Family {
	return family.Family{Name: "stats", Build: func(env *family.Env) family.Parts {
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { Routes(mux, env.Store) },
			Purge:  counters.PurgeStep(env.Store, env.Now),
		}
	}}
}
