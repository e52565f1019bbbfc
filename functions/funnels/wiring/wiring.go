// Package wiring composes the funnels family with the segments family: a funnel's cohort
// is saved as a segment.
package wiring

import (
	"context"
	"encoding/json"

	"github.com/botplatform/api/functions/funnels"
	"github.com/botplatform/api/functions/segments"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the funnels family: funnel definitions, their reports over the bot's event log
// and their cohorts.
func Family() family.Family {
	return family.Family{Name: "funnels", Build: func(env *family.Env) family.Parts {
		// Saving needs no source lookups: a segment saved from a funnel's current
		// definition is current.
		segs := segments.NewService(segments.Config{Store: env.Store, Now: env.Now})
		svc := funnels.NewService(env.Store, env.Events, Cohorts{Segments: segs}, env.Now)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { funnels.Routes(mux, svc, env.Cursors) },
			Purge:  funnels.PurgeStep(env.Store),
		}
	}}
}

// Cohorts saves funnel cohorts as segments of kind funnel_cohort, whose revision is the
// funnel's definition revision.
type Cohorts struct{ Segments *segments.Service }

// SaveCohort implements funnels.CohortSaver.
func (c Cohorts) SaveCohort(ctx context.Context, bot string, co funnels.Cohort) (any, string, error) {
	def, err := json.Marshal(co.Definition)
	if err != nil {
		return nil, "", err
	}
	seg, err := c.Segments.Save(ctx, bot, segments.New{
		Name:    co.Name,
		Source:  segments.Source{Kind: segments.KindFunnelCohort, ID: co.FunnelID, Revision: co.DefinitionRevision, Definition: def},
		Members: co.Members,
	})
	if err != nil {
		return nil, "", err
	}
	return seg, seg.ID, nil
}
