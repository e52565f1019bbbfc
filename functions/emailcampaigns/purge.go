package emailcampaigns

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's email campaigns (job purge.Job): first every sent row
// with its message-id pointer (found through the rows' GSI2 partition, as pointers live
// outside the bot's partitions), then each campaign after its send partition (rows,
// counters, address claims, link table, progress), and with the campaigns the limit
// counter. The test-send rate counters expire on their own within two minutes.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		bot := p.BotID
		return []purge.Part{
			{Index: store.GSI2, PK: sentIndexPK(bot), Delete: func(ctx context.Context, it store.Item) ([]store.Write, error) {
				r, err := decodeRow(it)
				if err != nil {
					return nil, err
				}
				return []store.Write{store.DeleteOp(it.Key, store.Always), store.DeleteOp(pointerKey(r.MessageID), store.Always)}, nil
			}},
			{PK: campaignsPK(bot), Dependents: func(_ context.Context, it store.Item) ([]string, error) {
				if it.SK == countKey(bot).SK {
					return nil, nil
				}
				return []string{dataPK(bot, it.SK[len(campaignPrefix):])}, nil
			}},
		}, nil
	})
}
