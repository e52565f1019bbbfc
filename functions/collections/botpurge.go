package collections

import (
	"context"
	"strings"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeBotStep erases a deleted bot's collections (job purge.Job). The bot's collections
// partition lists every collection, live (COL#) or deleted with its purge unfinished
// (PURGE#, the tombstone that names its partitions); before each, its records, external key
// claims, batch statuses and the index partition of every field key it ever had (removed
// fields included, since field keys are never reused) are erased.
func PurgeBotStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		bot := p.BotID
		return []purge.Part{{
			PK: collectionsPK(bot),
			Dependents: func(_ context.Context, it store.Item) ([]string, error) {
				switch {
				case strings.HasPrefix(it.SK, "COL#"):
					c, err := store.Decode[collectionDoc](it)
					if err != nil {
						return nil, err
					}
					return purgePayload{Bot: bot, Collection: c.ID, Fields: allKeys(c.NextKey), Whole: true}.partitions(), nil
				case strings.HasPrefix(it.SK, "PURGE#"):
					t, err := store.Decode[purgePayload](it)
					if err != nil {
						return nil, err
					}
					t.Bot = bot
					return t.partitions(), nil
				}
				return nil, nil
			},
		}}, nil
	})
}
