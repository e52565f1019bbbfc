package flowintel

import (
	"context"
	"time"

	"github.com/botplatform/api/shared/flowstats"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's flow counters (shared/flowstats: the runtime writes them,
// this family owns them) and reaggregation jobs (job purge.Job). The account's policy is the
// account's and stays.
func PurgeStep(st store.Store, now func() time.Time) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return append([]purge.Part{{PK: botPK(p.BotID)}}, flowstats.PurgeParts(p.BotID, now())...), nil
	})
}
