package runtime

import (
	"context"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases what the runtime keeps for a deleted bot (job purge.Job): every run found
// through the bot's run index (its head and entries, then the index item), the event claims
// and the buttons pointers. Everything also expires on its own (Retention, ClaimRetention).
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{
			{PK: runsPK(p.BotID), Dependents: func(_ context.Context, it store.Item) ([]string, error) {
				if !ids.Valid("exe", it.SK) {
					return nil, nil
				}
				return []string{exePK(p.BotID, it.SK)}, nil
			}},
			{PK: inboundPK(p.BotID)},
			{PK: triggerPK(p.BotID)},
			{PK: buttonsPK(p.BotID)},
		}, nil
	})
}

// EraseStep erases the runs of an erased subscriber (job purge.EraseJob): each run found
// through the subscriber's run list (GSI1), its head and entries, which hold what the
// subscriber sent and the steps' inputs and outcomes. A run of theirs still under way may
// write after the first pass; the erasure's second pass, purge.SweepDelay later, erases
// that. The bot's run index keeps the run's id, which names nothing once the run is gone
// and expires with it.
func EraseStep(st store.Store) jobs.Step {
	return purge.EraseStep(st, func(_ context.Context, e purge.Erasure) ([]purge.Part, error) {
		return []purge.Part{
			{Index: store.GSI1, PK: subscriberRuns(e.BotID, e.SubscriberID), Dependents: func(_ context.Context, it store.Item) ([]string, error) {
				if it.SK != "HEAD" {
					return nil, nil
				}
				return []string{it.PK}, nil
			}},
		}, nil
	})
}
