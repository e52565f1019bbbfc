package popups

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's popups (job purge.Job): the popups partition (popups,
// their origin items, the counter of the limit; the status index follows the items) and the
// stats partition, which also holds the counters of popups deleted before. The rate-limit
// counters of the event route expire on their own within two minutes.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: popupsPK(p.BotID)}, {PK: statsPK(p.BotID)}}, nil
	})
}
