package replay

import (
	"context"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's replay data (job purge.Job): its fixtures and their
// counters, and every regression run found through the runs partition (its results, then
// its report). Runs also expire on their own (RunRetention); fixtures do not.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{
			{PK: fixturesPK(p.BotID)},
			{PK: runsPK(p.BotID), Dependents: func(_ context.Context, it store.Item) ([]string, error) {
				if !ids.Valid(runPrefix, it.SK) {
					return nil, nil
				}
				return []string{resultsPK(p.BotID, it.SK)}, nil
			}},
		}, nil
	})
}
