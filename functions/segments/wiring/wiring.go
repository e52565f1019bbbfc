// Package wiring composes the segments family with the families whose definitions segments
// are computed from: a segment is stale once its source's definition has changed.
package wiring

import (
	"context"

	"github.com/botplatform/api/functions/experiments"
	"github.com/botplatform/api/functions/funnels"
	"github.com/botplatform/api/functions/segments"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the segments family: the saved segments, their members, their staleness.
func Family() family.Family {
	return family.Family{Name: "segments", Build: func(env *family.Env) family.Parts {
		svc := Service(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { segments.Routes(mux, svc, env.Cursors) },
			Purge:  segments.PurgeStep(env.Store),
		}
	}}
}

// Service is the segments service with the revision lookup of every source kind: what
// reads segments (their routes, a broadcast's audience) builds it here, so that each tells
// staleness alike.
func Service(env *family.Env) *segments.Service {
	fnl := funnels.NewService(env.Store, nil, nil, env.Now) // revisions only: no reports, no cohorts
	return segments.NewService(segments.Config{
		Store: env.Store,
		Now:   env.Now,
		Sources: map[string]func(ctx context.Context, bot, id string) (int64, error){
			segments.KindFunnelCohort:     fnl.DefinitionRevision,
			segments.KindExperimentCohort: experiments.CohortRevision(env.Store),
		},
	})
}
