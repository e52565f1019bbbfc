package experiments

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's experiments (job purge.Job): the experiments partition
// (experiments, their versions, the counter of the limit; the status index follows the
// items). The exposures are in the event log, which the event log's own purge erases.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: experimentsPK(p.BotID)}}, nil
	})
}
