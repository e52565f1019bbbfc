package channels

import (
	"context"
	"errors"
	"sync"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// A deleted bot's channels go in the bot's own deletion transaction (BotDeletes): from the
// moment the bot is gone, Resolve, ResolveKey and ResolveBot fail for them, so the webhooks
// refuse their updates and the runtime cannot act for them. The bot's purge (PurgeStep)
// then catches a channel connected while the deletion was under way.

// typePartition is the partition of the bot's typeKey items.
func typePartition(bot string) string { return typeKey(bot, "").PK }

// BotDeletes returns, for the bots family, what deleting a bot must delete in the same
// transaction: every channel of the bot with its type and lookup keys. The function it
// returns with them is to run once that transaction committed: it releases, best effort and
// concurrently, what each channel's adapter registered with its provider (as Disconnect
// does); with a nil svc (a process without the secrets to act for a channel) it does nothing.
func BotDeletes(st store.Store, svc *Service) func(ctx context.Context, bot string) ([]store.Write, func(context.Context), error) {
	return func(ctx context.Context, bot string) ([]store.Write, func(context.Context), error) {
		// One channel per type: a page holds them all.
		page, err := st.Query(ctx, store.Query{PK: typePartition(bot)})
		if err != nil {
			return nil, nil, err
		}
		var writes []store.Write
		var gone []record
		for _, it := range page.Items {
			writes = append(writes, store.DeleteOp(it.Key, store.Always))
			p, err := store.Decode[pointer](it)
			if err != nil {
				return nil, nil, err
			}
			rit, err := st.Get(ctx, recordKey(p.ChannelID))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, nil, err
			}
			rec, err := store.Decode[record](rit)
			if err != nil {
				return nil, nil, err
			}
			if rec.BotID != bot {
				continue // a pointer only ever names its own bot's channel
			}
			// At the revision read, so that the lookup key deleted with it is this
			// channel's: a key is only claimed again once its channel is gone.
			writes = append(writes, store.DeleteOp(rit.Key, store.RevisionIs(rit.Revision)))
			if rec.LookupKey != "" {
				writes = append(writes, store.DeleteOp(lookupKey(rec.Type, rec.LookupKey), store.Always))
			}
			gone = append(gone, rec)
		}
		committed := func(ctx context.Context) {
			if svc == nil {
				return
			}
			var wg sync.WaitGroup
			for _, rec := range gone {
				a, ok := svc.adapters[rec.Type]
				if !ok {
					continue
				}
				r, err := svc.open(ctx, rec)
				if err != nil {
					continue
				}
				wg.Go(func() { release(ctx, a, r.Conn) })
			}
			wg.Wait()
		}
		return writes, committed, nil
	}
}

// PurgeStep erases a deleted bot's channels (job purge.Job): each channel record found
// through the bot's index partition, in one transaction with its type and lookup keys (a
// lookup key is the channel's while its record exists), then any type key left, then the
// template catalogs of the bot's channels (one partition per bot). Providers
// are not told: a channel only gets here if it was connected while its bot was being
// deleted, and the jobs worker holds no secrets to act for it.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		bot := p.BotID
		return []purge.Part{
			{Index: store.GSI1, PK: botPartition(bot), Delete: func(it store.Item) ([]store.Write, error) {
				rec, err := store.Decode[record](it)
				if err != nil {
					return nil, err
				}
				writes := []store.Write{store.DeleteOp(it.Key, store.MustExist), store.DeleteOp(typeKey(bot, rec.Type), store.Always)}
				if rec.LookupKey != "" {
					writes = append(writes, store.DeleteOp(lookupKey(rec.Type, rec.LookupKey), store.Always))
				}
				return writes, nil
			}},
			{PK: typePartition(bot)},
			// The template catalogs of every channel the bot had (templates.go).
			{PK: templatesPartition(bot)},
		}, nil
	})
}
