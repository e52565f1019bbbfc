// Package wiring composes the replay family with the families it reads: the runtime's
// execution traces (runtime) and the reactions' published versions and drafts (reactions,
// built as its own wiring builds it, which reads the bot's labels and fields).
package wiring

import (
	"context"
	"fmt"

	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/replay"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// Family is the replay family.
func Family() family.Family {
	return family.Family{Name: "replay", Build: func(env *family.Env) family.Parts {
		svc := Service(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { replay.Routes(mux, svc, env.Cursors) },
			Purge:  replay.PurgeStep(env.Store),
			Tools:  replay.Tools(svc, env.Cursors),
		}
	}}
}

// Service is the replay service as every process builds it. The traces are read by id and
// through the bot's run index, never per subscriber, so the reader needs no subscribers.
func Service(env *family.Env) *replay.Service {
	rx := reactions.NewService(env.Store, reactionswiring.Vocabulary(env), env.Now, env.Log)
	return replay.NewService(env.Store, runtime.NewTraces(env.Store, nil, env.Now), Flows{rx}, env.Now)
}

// Flows adapts *reactions.Service to replay.Flows. Flows cross as the JSON of
// docs/reactions.md, as the runtime's wiring reads them.
type Flows struct{ Reactions *reactions.Service }

// Version implements replay.Flows.
func (f Flows) Version(ctx context.Context, bot, reaction string, n int64) (runtime.Flow, error) {
	v, err := f.Reactions.Version(ctx, bot, reaction, n)
	if err != nil {
		return runtime.Flow{}, err
	}
	return asFlow(v, reaction, n)
}

// Draft implements replay.Flows: the draft runs as a version would (Version 0).
func (f Flows) Draft(ctx context.Context, bot, reaction string) (runtime.Flow, int64, error) {
	r, err := f.Reactions.Get(ctx, bot, reaction)
	if err != nil {
		return runtime.Flow{}, 0, err
	}
	flow, err := asFlow(r.Content, reaction, 0)
	return flow, r.Revision, err
}

func asFlow(v any, reaction string, n int64) (runtime.Flow, error) {
	flow, err := runtime.FlowOf(v)
	if err != nil {
		return runtime.Flow{}, fmt.Errorf("replay wiring: reaction %s version %d: %w", reaction, n, err)
	}
	flow.ReactionID, flow.Version = reaction, n
	return flow, nil
}
