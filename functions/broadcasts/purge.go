package broadcasts

import (
	"context"
	"strings"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's broadcasts (job purge.Job): each broadcast of either
// generation after its send partition (rows, counters, progress), the limit counter, the
// blocked marks, the WhatsApp message index and tier counts. The test-send rate counters expire on their own.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		bot := p.BotID
		return []purge.Part{
			{PK: broadcastsPK(bot), Dependents: func(_ context.Context, it store.Item) ([]string, error) {
				for _, prefix := range []string{broadcastPrefix, "LBC#"} {
					if id, ok := strings.CutPrefix(it.SK, prefix); ok {
						return []string{dataPK(bot, id)}, nil
					}
				}
				return nil, nil
			}},
			{PK: blockedPK(bot)},
			{PK: waMsgPK(bot)},
			{PK: tierPK(bot)},
		}, nil
	})
}
