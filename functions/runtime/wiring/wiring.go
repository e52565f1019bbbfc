// Package wiring composes the conversation runtime with the families it drives: it opens
// channels (channels), reads and changes subscribers (subscribers) and runs published
// reactions (reactions). The runtime's HTTP routes (execution traces) need only the
// subscribers; its queue handlers, which run in the jobs Lambda, need all three.
package wiring

import (
	"context"
	"fmt"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// Family is the runtime family: the execution traces over HTTP, and the handlers of inbound
// updates, resumptions and label triggers on the queue. A process without a channels service
// (no credentials sealer) or without a queue cannot send, so its handlers fail every message
// (retried, then dead-lettered: never lost).
func Family() family.Family {
	return family.Family{Name: "runtime", Build: func(env *family.Env) family.Parts {
		subs := runtimeSubscribers{subscribers.NewService(env.Store, env.Now, env.Jobs).WithEvents(env.Events, env.Log)}
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { runtime.Routes(mux, runtime.NewTraces(env.Store, subs, env.Now), env.Cursors) },
			Queue:  func(mux *queue.Mux) { registerRuntime(mux, env, subs) },
			Purge:  runtime.PurgeStep(env.Store),
			Erase:  runtime.EraseStep(env.Store),
		}
	}}
}

func registerRuntime(mux *queue.Mux, env *family.Env, subs runtimeSubscribers) {
	chans := channels.FromEnv(env)
	if chans == nil || env.Queue == nil {
		runtime.Unavailable(mux, "no channels service or queue in this process (SECRETS_KEY_ID, JOBS_QUEUE_URL)", env.Log)
		return
	}
	rt, err := runtime.New(runtime.Deps{
		Store:       env.Store,
		Queue:       env.Queue,
		Channels:    runtimeChannels{chans},
		Subscribers: subs,
		Reactions:   runtimeReactions{reactions.NewService(env.Store, reactionswiring.Vocabulary(env), env.Now, env.Log)},
		Events:      env.Events,
		Now:         env.Now,
		Log:         env.Log,
	})
	if err != nil {
		runtime.Unavailable(mux, err.Error(), env.Log)
		return
	}
	rt.Register(mux)
}

// runtimeChannels adapts *channels.Service to runtime.Channels.
type runtimeChannels struct{ svc *channels.Service }

func (c runtimeChannels) Open(ctx context.Context, bot string, k channel.Kind) (channel.Adapter, channel.Connection, error) {
	r, err := c.svc.ResolveBot(ctx, bot, k)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return nil, channel.Connection{}, runtime.ErrNotFound
	}
	if err != nil {
		return nil, channel.Connection{}, err
	}
	a, ok := c.svc.Adapter(k)
	if !ok {
		// A deployment without the adapter is misconfigured: fail (the queue retries, then
		// dead-letters), never drop the update as if the channel were gone.
		return nil, channel.Connection{}, fmt.Errorf("runtime wiring: no %s adapter in this process", k)
	}
	return a, r.Conn, nil
}

// runtimeSubscribers adapts *subscribers.Service to runtime.Subscribers.
type runtimeSubscribers struct{ svc *subscribers.Service }

// subscriberErr maps the subscribers family's answers: 404 is a subscriber (or label) that
// is gone, 400 a change it refuses (a label or field the bot no longer has).
func subscriberErr(err error) error {
	switch httpapi.KindOf(err) {
	case httpapi.KindNotFound:
		return fmt.Errorf("%w: %w", runtime.ErrNotFound, err)
	case httpapi.KindInvalid:
		return fmt.Errorf("%w: %w", runtime.ErrInvalid, err)
	}
	return err
}

func runtimeSubscriber(s subscribers.Subscriber) runtime.Subscriber {
	return runtime.Subscriber{ID: s.ID, Channel: channel.Kind(s.Channel), ExternalID: s.ExternalID,
		Labels: s.Labels, Fields: s.Fields, CreatedAt: s.CreatedAt}
}

func (a runtimeSubscribers) Upsert(ctx context.Context, bot string, k channel.Kind, externalID string, p runtime.Profile,
	with func(runtime.Subscriber, bool) ([]store.Write, error)) (runtime.Subscriber, bool, error) {
	c := subscribers.Changes{LastSeenAt: &p.SeenAt}
	if p.FirstName != "" {
		c.FirstName = &p.FirstName
	}
	if p.LastName != "" {
		c.LastName = &p.LastName
	}
	if p.Locale != "" {
		c.Locale = &p.Locale
	}
	var w subscribers.With
	if with != nil {
		w = func(s subscribers.Subscriber, created bool) ([]store.Write, error) {
			return with(runtimeSubscriber(s), created)
		}
	}
	s, created, err := a.svc.UpsertWith(ctx, bot, string(k), externalID, c, w)
	if err != nil {
		return runtime.Subscriber{}, false, subscriberErr(err)
	}
	return runtimeSubscriber(s), created, nil
}

func (a runtimeSubscribers) Get(ctx context.Context, bot, id string) (runtime.Subscriber, error) {
	s, err := a.svc.Get(ctx, bot, id)
	if err != nil {
		return runtime.Subscriber{}, subscriberErr(err)
	}
	return runtimeSubscriber(s), nil
}

func (a runtimeSubscribers) SetField(ctx context.Context, bot, id, field string, value any) (runtime.Subscriber, error) {
	s, err := a.svc.SetFields(ctx, bot, id, map[string]any{field: value})
	if err != nil {
		return runtime.Subscriber{}, subscriberErr(err)
	}
	return runtimeSubscriber(s), nil
}

func (a runtimeSubscribers) AddLabel(ctx context.Context, bot, id, label string) (runtime.Subscriber, error) {
	s, err := a.svc.AddLabel(ctx, bot, id, label)
	if err != nil {
		return runtime.Subscriber{}, subscriberErr(err)
	}
	return runtimeSubscriber(s), nil
}

func (a runtimeSubscribers) RemoveLabel(ctx context.Context, bot, id, label string) (runtime.Subscriber, error) {
	s, err := a.svc.RemoveLabel(ctx, bot, id, label)
	if err != nil {
		return runtime.Subscriber{}, subscriberErr(err)
	}
	return runtimeSubscriber(s), nil
}

func (a runtimeSubscribers) Fields(ctx context.Context, bot string) ([]runtime.Field, error) {
	list, err := a.svc.Fields(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Field, len(list))
	for i, f := range list {
		out[i] = runtime.Field{ID: f.ID, Name: f.Name, Type: string(f.Type)}
	}
	return out, nil
}

func (a runtimeSubscribers) Labels(ctx context.Context, bot string) ([]string, error) {
	list, err := a.svc.Labels(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(list))
	for i, l := range list {
		out[i] = l.ID
	}
	return out, nil
}

// runtimeReactions adapts *reactions.Service to runtime.Reactions. Flows cross as the JSON
// of docs/reactions.md, the format both sides document.
type runtimeReactions struct{ svc *reactions.Service }

func (a runtimeReactions) Published(ctx context.Context, bot string) ([]runtime.Published, error) {
	list, err := a.svc.Published(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Published, len(list))
	for i, p := range list {
		out[i] = runtime.Published{ReactionID: p.ReactionID, Version: p.Version, Trigger: runtime.Trigger{
			Type: string(p.Trigger.Type), Keywords: p.Trigger.Keywords, Pattern: p.Trigger.Pattern,
			LabelID: p.Trigger.LabelID, Payload: p.Trigger.Payload,
		}}
	}
	return out, nil
}

func (a runtimeReactions) Flow(ctx context.Context, bot, reaction string, version int64) (runtime.Flow, error) {
	v, err := a.svc.PublishedVersion(ctx, bot, reaction, version)
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return runtime.Flow{}, fmt.Errorf("%w: %w", runtime.ErrNotFound, err)
	}
	if err != nil {
		return runtime.Flow{}, err
	}
	f, err := runtime.FlowOf(v)
	if err != nil {
		return runtime.Flow{}, fmt.Errorf("runtime wiring: reaction %s version %d: %w", reaction, version, err)
	}
	return f, nil
}
