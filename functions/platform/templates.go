package platform

import (
	"context"

	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/store"
)

// reactionTemplates gives the reactions family the bot's stored WhatsApp template catalog,
// which the channels family owns, to check send_template steps against when a reaction is
// published. It reads the store only (channels.Catalog), so it works where env.Channels is
// nil: the reactions Lambda holds no key to open channel credentials, and needs none.
func reactionTemplates(env *Env) reactions.Templates {
	return templateCatalogReader{channels.NewCatalog(env.Store)}
}

// reactionService is the reactions family's service as every process builds it.
func reactionService(env *Env) *reactions.Service {
	return reactions.NewService(env.Store, reactionVocabulary(env), env.Now, env.Log).
		WithTemplates(reactionTemplates(env)).
		WithChannels(connectedChannels{store: env.Store, adapters: env.Adapters})
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
