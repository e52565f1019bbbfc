package segments

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's segments (job purge.Job): the segments partition and
// the members partition, which also holds the chunks of segments whose deletion or save
// failed halfway.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: segmentsPK(p.BotID)}, {PK: membersPK(p.BotID)}}, nil
	})
}
