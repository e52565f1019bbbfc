package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/functions/webhooks"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

// The conversation families, webhooks and runtime, meet the channels, subscribers and
// reactions families only through interfaces they declare; these adapters are where they
// meet, as vocabulary.go is for reactions and subscribers.

// registerRuntime adds the runtime's queue handlers. A process without a channels service
// (no credentials sealer) cannot send, so its handlers fail every message (retried, then
// dead-lettered: never lost).
func registerRuntime(mux *queue.Mux, env *Env) {
	if env.Channels == nil || env.Queue == nil {
		runtime.Unavailable(mux, "no channels service or queue in this process (SECRETS_KEY_ID, JOBS_QUEUE_URL)", env.Log)
		return
	}
	rt, err := runtime.New(runtime.Deps{
		Store:       env.Store,
		Queue:       env.Queue,
		Channels:    runtimeChannels{env.Channels},
		Subscribers: runtimeSubscribers{subscribers.NewService(env.Store, env.Now, env.Jobs)},
		Reactions:   runtimeReactions{reactions.NewService(env.Store, reactionVocabulary(env), env.Now, env.Log)},
		Now:         env.Now,
		Log:         env.Log,
	})
	if err != nil {
		runtime.Unavailable(mux, err.Error(), env.Log)
		return
	}
	rt.Register(mux)
}

// traceRoutes registers the runtime's HTTP routes (execution traces).
func traceRoutes(mux *httpapi.Mux, env *Env) {
	subs := runtimeSubscribers{subscribers.NewService(env.Store, env.Now, env.Jobs)}
	runtime.Routes(mux, runtime.NewTraces(env.Store, subs, env.Now), env.Cursors)
}

// webhookRoutes registers the providers' webhooks.
func webhookRoutes(mux *httpapi.Mux, env *Env) {
	cfg := webhooks.Config{Store: env.Store, Queue: env.Queue, Now: env.Now, Log: env.Log,
		WhatsAppVerifyToken: env.WhatsAppVerifyToken}
	if env.Channels != nil {
		cfg.Channels = webhookChannels{env.Channels}
	}
	if t := templateStatuses(env); t != nil {
		cfg.Templates = t
	}
	s, err := webhooks.New(cfg)
	if err != nil {
		panic(err) // Store, Now and Log are always in an Env (NewEnv refuses without them)
	}
	webhooks.Routes(mux, s)
}

// templateStatuses is the channels family's template catalog, which takes WhatsApp's
// template status webhook; nil without a channels service (the updates are logged and
// dropped).
func templateStatuses(env *Env) webhooks.Templates {
	if env.Channels == nil {
		return nil
	}
	return templateCatalog{env.Channels}
}

// templateCatalog adapts *channels.Service to webhooks.Templates.
type templateCatalog struct{ svc *channels.Service }

func (t templateCatalog) TemplateStatus(ctx context.Context, s whatsapp.TemplateStatus) error {
	return t.svc.ApplyTemplateStatus(ctx, s)
}

// httpKind is the kind of an *httpapi.Error in err, or -1.
func httpKind(err error) httpapi.Kind {
	var he *httpapi.Error
	if errors.As(err, &he) {
		return he.Kind
	}
	return -1
}

// webhookChannels adapts *channels.Service to webhooks.Channels.
type webhookChannels struct{ svc *channels.Service }

func webhookChannel(r channels.Resolved, err error) (webhooks.Channel, error) {
	if httpKind(err) == httpapi.KindNotFound {
		return webhooks.Channel{}, webhooks.ErrUnknownChannel
	}
	if err != nil {
		return webhooks.Channel{}, err
	}
	return webhooks.Channel{ID: r.ID, BotID: r.BotID, AccountID: r.AccountID, Kind: r.Type, Conn: r.Conn}, nil
}

func (c webhookChannels) Resolve(ctx context.Context, id string) (webhooks.Channel, error) {
	return webhookChannel(c.svc.Resolve(ctx, id))
}

func (c webhookChannels) ResolveKey(ctx context.Context, k channel.Kind, key string) (webhooks.Channel, error) {
	return webhookChannel(c.svc.ResolveKey(ctx, k, key))
}

func (c webhookChannels) Adapter(k channel.Kind) (channel.Adapter, bool) { return c.svc.Adapter(k) }

// labelTriggers is the subscribers family's LabelHook: labels added over the API start their
// label_added reactions, as labels a run adds do. It stages one runtime.trigger message per
// label in the outbox, within the change's own transaction, with the body the runtime's own
// label events have, caused by the subscriber's revision that added the label, so the
// runtime runs each addition once however often it is delivered (the outbox delivers at
// least once).
func labelTriggers(env *Env) subscribers.LabelHook { return labelTrigger{env.Outbox} }

type labelTrigger struct{ outbox *outbox.Outbox }

func (l labelTrigger) LabelsAdded(_ context.Context, bot string, a subscribers.LabelAddition) ([]store.Write, func(context.Context), error) {
	msgs := make([]queue.Message, 0, len(a.LabelIDs))
	for _, label := range a.LabelIDs {
		m, err := runtime.LabelAddedMessage(bot, a.SubscriberID, channel.Kind(a.Channel), label, a.Revision)
		if err != nil {
			return nil, nil, err
		}
		msgs = append(msgs, m)
	}
	return l.outbox.Stage(msgs...)
}

// subscriberRoutes registers the subscribers family's routes, whose label additions start
// label_added reactions.
func subscriberRoutes(mux *httpapi.Mux, env *Env) {
	svc := subscribers.NewService(env.Store, env.Now, env.Jobs).WithLabelHook(labelTriggers(env))
	subscribers.Routes(mux, svc, env.Cursors)
}

// runtimeChannels adapts *channels.Service to runtime.Channels.
type runtimeChannels struct{ svc *channels.Service }

func (c runtimeChannels) Open(ctx context.Context, bot string, k channel.Kind) (channel.Adapter, channel.Connection, error) {
	r, err := c.svc.ResolveBot(ctx, bot, k)
	if httpKind(err) == httpapi.KindNotFound {
		return nil, channel.Connection{}, runtime.ErrNotFound
	}
	if err != nil {
		return nil, channel.Connection{}, err
	}
	a, ok := c.svc.Adapter(k)
	if !ok {
		// A deployment without the adapter is misconfigured: fail (the queue retries, then
		// dead-letters), never drop the update as if the channel were gone.
		return nil, channel.Connection{}, fmt.Errorf("platform: no %s adapter in this process", k)
	}
	return a, r.Conn, nil
}

// runtimeSubscribers adapts *subscribers.Service to runtime.Subscribers.
type runtimeSubscribers struct{ svc *subscribers.Service }

// subscriberErr maps the subscribers family's answers: 404 is a subscriber (or label) that
// is gone, 400 a change it refuses (a label or field the bot no longer has).
func subscriberErr(err error) error {
	switch httpKind(err) {
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

func (a runtimeSubscribers) Upsert(ctx context.Context, bot string, k channel.Kind, externalID string, p runtime.Profile) (runtime.Subscriber, bool, error) {
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
	s, created, err := a.svc.Upsert(ctx, bot, string(k), externalID, c)
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
	if httpKind(err) == httpapi.KindNotFound {
		return runtime.Flow{}, fmt.Errorf("%w: %w", runtime.ErrNotFound, err)
	}
	if err != nil {
		return runtime.Flow{}, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return runtime.Flow{}, err
	}
	var f runtime.Flow
	if err := json.Unmarshal(b, &f); err != nil {
		return runtime.Flow{}, fmt.Errorf("platform: reaction %s version %d as a runtime flow: %w", reaction, version, err)
	}
	return f, nil
}
