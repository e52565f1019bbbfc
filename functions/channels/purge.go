package channels

import (
	"context"
	"errors"
	"time"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// A deleted bot's channels go in the bot's own deletion transaction (BotDeletes): from the
// moment the bot is gone, Resolve, ResolveKey and ResolveBot fail for them, so the webhooks
// refuse their updates and the runtime cannot act for them. What their adapters registered
// with the providers (a Telegram webhook) is released by the bot's purge (PurgeStep), which
// runs in the jobs worker, where the secrets key is: the deletion leaves a release item per
// channel (a copy of its record, credentials still sealed) in the same transaction, so no
// release is lost to a crash, and the bots Lambda needs no key to open credentials with.
// The purge also catches a channel connected while the deletion was under way.

// typePartition is the partition of the bot's typeKey items.
func typePartition(bot string) string { return typeKey(bot, "").PK }

// releasePartition holds a deleted bot's channels until the purge released them with their
// providers: the channels' records, one item each.
func releasePartition(bot string) string { return "BOT#" + bot + "#CHANNELRELEASE" }

// releaseTTL bounds how long a release item may outlive a purge that never ran to it: its
// credentials are sealed, but nothing should keep them once the bot is gone.
const releaseTTL = 30 * 24 * time.Hour

// BotDeletes returns, for the bots family, what deleting a bot must delete in the same
// transaction: every channel of the bot with its type and lookup keys, each leaving its
// record in the release partition for the purge (PurgeStep) to release with its provider.
func BotDeletes(st store.Store, now func() time.Time) func(ctx context.Context, bot string) ([]store.Write, error) {
	return func(ctx context.Context, bot string) ([]store.Write, error) {
		// One channel per type: a page holds them all.
		page, err := st.Query(ctx, store.Query{PK: typePartition(bot)})
		if err != nil {
			return nil, err
		}
		var writes []store.Write
		for _, it := range page.Items {
			writes = append(writes, store.DeleteOp(it.Key, store.Always))
			p, err := store.Decode[pointer](it)
			if err != nil {
				return nil, err
			}
			rit, err := st.Get(ctx, recordKey(p.ChannelID))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			rec, err := store.Decode[record](rit)
			if err != nil {
				return nil, err
			}
			if rec.BotID != bot {
				continue // a pointer only ever names its own bot's channel
			}
			// At the revision read, so that the lookup key deleted with it is this
			// channel's: a key is only claimed again once its channel is gone.
			writes = append(writes, store.DeleteOp(rit.Key, store.RevisionIs(rit.Revision)),
				store.PutOp(store.Item{Key: store.Key{PK: releasePartition(bot), SK: rec.ID}, Data: rit.Data,
					Revision: 1, ExpiresAt: now().Add(releaseTTL)}, store.Always))
			if rec.LookupKey != "" {
				writes = append(writes, store.DeleteOp(lookupKey(rec.Type, rec.LookupKey), store.Always))
			}
		}
		return writes, nil
	}
}

// PurgeStep erases a deleted bot's channels (job purge.Job). First the channels its
// deletion left for release: each is released with its provider (as Disconnect does, best
// effort: the provider may be down or the credentials revoked, and the channel is gone
// either way) and then deleted. Then each channel record still found through the bot's
// index partition (one connected while the deletion was under way), released the same way
// and deleted in one transaction with its type and lookup keys (a lookup key is the
// channel's while its record exists); then any type key left; then the template catalogs of
// the bot's channels (one partition per bot). With a nil svc (a process without the
// secrets key) nothing is released.
func PurgeStep(st store.Store, svc *Service) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		bot := p.BotID
		return []purge.Part{
			{PK: releasePartition(bot), Delete: func(ctx context.Context, it store.Item) ([]store.Write, error) {
				rec, err := store.Decode[record](it)
				if err != nil {
					return nil, err
				}
				svc.releaseRecord(ctx, rec)
				return []store.Write{store.DeleteOp(it.Key, store.MustExist)}, nil
			}},
			{Index: store.GSI1, PK: botPartition(bot), Delete: func(ctx context.Context, it store.Item) ([]store.Write, error) {
				rec, err := store.Decode[record](it)
				if err != nil {
					return nil, err
				}
				svc.releaseRecord(ctx, rec)
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

// releaseRecord releases, best effort, what the adapter of the channel of rec registered
// with its provider; credentials that cannot be opened (a key rotated away) leave nothing to
// release with. A nil s releases nothing.
func (s *Service) releaseRecord(ctx context.Context, rec record) {
	if s == nil {
		return
	}
	a, ok := s.adapters[rec.Type]
	if !ok {
		return
	}
	if r, err := s.open(ctx, rec); err == nil {
		release(ctx, a, r.Conn)
	}
}
