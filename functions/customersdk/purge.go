package customersdk

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's customer SDK data (job purge.Job): the SDK partition
// (project, installations, push tokens, receipts, counters) and the installation tokens'
// lookup items, found through their GSI1 partition. The rate-limit counters of the device
// routes expire on their own.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{Index: store.GSI1, PK: tokensIndexPK(p.BotID)}, {PK: sdkPK(p.BotID)}}, nil
	})
}
