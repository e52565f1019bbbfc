// Package wiring composes the reactions family with what it calls in other families: the
// bot's labels and fields (subscribers), template catalog and connected channels (channels).
// Families never import each other; these adapters are where they meet.
package wiring

import (
	"context"
	"errors"
	"fmt"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Family is the reactions family.
func Family() family.Family {
	return family.Family{Name: "reactions", Build: func(env *family.Env) family.Parts {
		svc := Service(env)
		return family.Parts{
			Routes: func(mux *httpapi.Mux) { reactions.Routes(mux, svc, env.Cursors) },
			Purge:  reactions.PurgeStep(env.Store),
			Tools:  reactions.Tools(svc, env.Cursors),
		}
	}}
}

// Service is the reactions family's service as every process builds it: publishing checks
// send_template steps against the WhatsApp template catalog and warns about what connected
// channels cannot send. Both are read from the store alone (channels.Catalog,
// channels.BotChannels), so they work where no key opens channel credentials: the reactions
// Lambda holds none, and needs none.
func Service(env *family.Env) *reactions.Service {
	return reactions.NewService(env.Store, Vocabulary(env), env.Now, env.Log).
		WithTemplates(templateCatalogReader{channels.NewCatalog(env.Store)}).
		WithChannels(connectedChannels{store: env.Store, adapters: env.Adapters}).
		WithEvents(env.Events)
}

// Vocabulary gives the reactions family the bot's labels and custom fields, which the
// subscribers family owns.
func Vocabulary(env *family.Env) reactions.Vocabulary {
	return subscriberVocabulary{svc: subscribers.NewService(env.Store, env.Now, env.Jobs)}
}

// subscriberVocabulary adapts *subscribers.Service to reactions.Vocabulary.
type subscriberVocabulary struct {
	svc *subscribers.Service
}

// Labels returns every label of the bot.
func (v subscriberVocabulary) Labels(ctx context.Context, bot string) ([]reactions.Label, error) {
	labels, err := v.svc.Labels(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]reactions.Label, len(labels))
	for i, l := range labels {
		out[i] = reactions.Label{ID: l.ID, Name: l.Name}
	}
	return out, nil
}

// Fields returns every custom field of the bot.
func (v subscriberVocabulary) Fields(ctx context.Context, bot string) ([]reactions.Field, error) {
	fields, err := v.svc.Fields(ctx, bot)
	if err != nil {
		return nil, err
	}
	out := make([]reactions.Field, len(fields))
	for i, f := range fields {
		out[i] = reactions.Field{ID: f.ID, Name: f.Name, Type: reactions.FieldType(f.Type)}
	}
	return out, nil
}

// EnsureLabels returns the ids of the named labels, creating missing ones.
func (v subscriberVocabulary) EnsureLabels(ctx context.Context, bot string, names []string) (map[string]string, error) {
	return v.svc.EnsureLabels(ctx, bot, names)
}

// EnsureFields returns the ids of the named fields, creating missing ones; a name of another
// type is reactions.ErrFieldTypeConflict (and still the subscribers family's 409).
func (v subscriberVocabulary) EnsureFields(ctx context.Context, bot string, fields []reactions.Field) (map[string]string, error) {
	specs := make([]subscribers.FieldSpec, len(fields))
	for i, f := range fields {
		specs[i] = subscribers.FieldSpec{Name: f.Name, Type: subscribers.FieldType(f.Type)}
	}
	ids, err := v.svc.EnsureFields(ctx, bot, specs)
	if errors.Is(err, subscribers.ErrFieldTypeConflict) {
		return nil, fmt.Errorf("%w: %w", reactions.ErrFieldTypeConflict, err)
	}
	return ids, err
}

// connectedChannels gives the reactions family the bot's connected channels with their
// type's capabilities, from the store alone (like the template catalog: the reactions
// Lambda opens no credentials).
type connectedChannels struct {
	store    store.Store
	adapters []channel.Adapter
}

func (c connectedChannels) Connected(ctx context.Context, bot string) ([]reactions.ConnectedChannel, error) {
	list, err := channels.BotChannels(ctx, c.store, bot)
	if err != nil {
		return nil, err
	}
	out := make([]reactions.ConnectedChannel, 0, len(list))
	for _, ch := range list {
		for _, a := range c.adapters {
			if a.Kind() == ch.Type {
				out = append(out, reactions.ConnectedChannel{ID: ch.ID, Name: ch.Name, Capabilities: a.Capabilities()})
			}
		}
	}
	return out, nil
}

// templateCatalogReader adapts *channels.Catalog to reactions.Templates.
type templateCatalogReader struct{ catalog *channels.Catalog }

func (t templateCatalogReader) Catalog(ctx context.Context, bot string) (reactions.Catalog, bool, error) {
	ch, list, ok, err := t.catalog.BotTemplates(ctx, bot)
	if err != nil || !ok {
		return reactions.Catalog{}, false, err
	}
	out := reactions.Catalog{ChannelID: ch, Templates: make([]reactions.CatalogTemplate, len(list))}
	for i, tpl := range list {
		ct := reactions.CatalogTemplate{Name: tpl.Name, Language: tpl.Language, Status: tpl.Status, BodyParams: -1}
		// Components the adapter cannot read leave the count unknown: publishing then
		// checks the template's existence and status only.
		if p, err := whatsapp.ParametersOf(tpl.Components); err == nil {
			ct.BodyParams, ct.Unsupported = p.Body, p.Other
		}
		out.Templates[i] = ct
	}
	return out, true, nil
}
