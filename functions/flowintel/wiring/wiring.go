// Package wiring composes the flow intelligence family with what it reads of other
// families: reaction versions (reactions) and execution traces (runtime).
package wiring

import (
	"context"
	"encoding/json"

	"github.com/botplatform/api/functions/flowintel"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
)

// Family is the flow intelligence family: the overlay, samples, policy and reaggregation
// routes, their MCP tools, the reaggregation job and the purge of a bot's counters.
func Family() family.Family {
	return family.Family{Name: "flowintel", Build: func(env *family.Env) family.Parts {
		svc := Service(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { flowintel.Routes(mux, svc, env.Cursors) },
			Jobs:   map[string]jobs.Step{flowintel.JobReaggregate: svc.Step},
			Purge:  flowintel.PurgeStep(env.Store, env.Now),
			Tools:  flowintel.Tools(svc, env.Cursors),
		}
	}}
}

// Service builds the family's service on env.
func Service(env *family.Env) *flowintel.Service {
	return flowintel.NewService(flowintel.Config{
		Store:          env.Store,
		Flows:          Flows{reactions.NewService(env.Store, reactionswiring.Vocabulary(env), env.Now, env.Log)},
		Runs:           Runs{runtime.NewTraces(env.Store, nil, env.Now)},
		Jobs:           env.Jobs,
		Now:            env.Now,
		TraceRetention: runtime.Retention,
	})
}

// Flows reads reaction versions through the reactions family's service, as the JSON of
// docs/reactions.md.
type Flows struct{ Svc *reactions.Service }

// Flow implements flowintel.Flows.
func (f Flows) Flow(ctx context.Context, bot, reaction string, n int64) (flowintel.Flow, error) {
	if n == 0 {
		r, err := f.Svc.Get(ctx, bot, reaction)
		if err != nil {
			return flowintel.Flow{}, err
		}
		if r.PublishedVersion == nil {
			return flowintel.Flow{}, httpapi.E(httpapi.KindNotFound, "not_found", "the reaction has no published version; name a version")
		}
		n = *r.PublishedVersion
	}
	v, err := f.Svc.Version(ctx, bot, reaction, n)
	if err != nil {
		return flowintel.Flow{}, err
	}
	flow, err := runtime.FlowOf(v)
	if err != nil {
		return flowintel.Flow{}, err
	}
	steps := make([]flowintel.FlowStep, len(flow.Steps))
	for i, st := range flow.Steps {
		steps[i] = flowintel.FlowStep{ID: st.ID, Type: st.Type}
	}
	return flowintel.Flow{ReactionID: v.ReactionID, Version: v.Version, Steps: steps}, nil
}

// Runs reads the runtime's traces.
type Runs struct{ Traces *runtime.Traces }

// Recent implements flowintel.Runs.
func (r Runs) Recent(ctx context.Context, bot string, max int, fn func(flowintel.Run) (bool, error)) error {
	return r.Traces.RecentRuns(ctx, bot, max, func(e runtime.Execution) (bool, error) {
		trig, err := json.Marshal(e.Trigger)
		if err != nil {
			return false, err
		}
		run := flowintel.Run{ID: e.ID, ReactionID: e.ReactionID, Version: e.ReactionVersion, Channel: string(e.Channel),
			Status: string(e.Status), EndReason: e.EndReason, StartedAt: e.StartedAt, Trigger: trig}
		run.Load = func(ctx context.Context) (flowintel.RunDetail, error) {
			steps, err := r.Traces.Steps(ctx, bot, e.ID)
			if err != nil {
				return flowintel.RunDetail{}, err
			}
			out := flowintel.RunDetail{Counters: runtime.FlowWrites(runtime.Detail{Execution: e, Steps: steps}), Steps: make([]flowintel.Entry, len(steps))}
			for i, s := range steps {
				fe := flowintel.Entry{Seq: s.Seq, StepID: s.StepID, Type: s.Type, At: s.At, DurationMS: s.DurationMS,
					Attempts: s.Attempts, Input: s.Input, Decision: s.Decision, Outcome: s.Outcome}
				if s.Error != nil {
					fe.Error = &flowintel.StepError{Kind: s.Error.Kind, ProviderCode: s.Error.ProviderCode,
						ProviderReason: s.Error.ProviderReason, Message: s.Error.Message}
				}
				out.Steps[i] = fe
			}
			return out, nil
		}
		return fn(run)
	})
}
