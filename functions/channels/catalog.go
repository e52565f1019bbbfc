package channels

import (
	"context"
	"errors"
	"fmt"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/store"
)

// Catalog reads a bot's stored template catalog with nothing but the store: it opens no
// credentials, so it also serves processes that hold no key to open them (the reactions
// family's Lambda, which checks send_template steps against the catalog when a reaction is
// published). It reads what create, sync and the status webhook stored; it never asks the
// provider.
type Catalog struct {
	store store.Store
}

// NewCatalog returns a Catalog over st.
func NewCatalog(st store.Store) *Catalog { return &Catalog{store: st} }

// BotTemplates returns the bot's WhatsApp channel (the only channel type with templates) and
// every template stored for it, oldest first; ok is false when the bot has no WhatsApp
// channel.
func (c *Catalog) BotTemplates(ctx context.Context, bot string) (channelID string, list []Template, ok bool, err error) {
	it, err := c.store.Get(ctx, typeKey(bot, channel.WhatsApp))
	if errors.Is(err, store.ErrNotFound) {
		return "", nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	p, err := store.Decode[pointer](it)
	if err != nil {
		return "", nil, false, err
	}
	items, err := catalogItems(ctx, c.store, bot, p.ChannelID)
	if err != nil {
		return "", nil, false, fmt.Errorf("channels: read the catalog of %s: %w", p.ChannelID, err)
	}
	list = make([]Template, 0, len(items))
	for _, it := range items {
		rec, err := store.Decode[templateRecord](it)
		if err != nil {
			return "", nil, false, err
		}
		rec.Revision = it.Revision
		list = append(list, rec.Template)
	}
	return p.ChannelID, list, true, nil
}
