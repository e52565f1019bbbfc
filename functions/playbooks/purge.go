package playbooks

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's installs (job purge.Job), each with its account's
// pointer to it, in one transaction. What the installs created belongs to the families
// that own it, whose own purge steps erase it.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{
			PK: installsPK(p.BotID),
			Delete: func(ctx context.Context, it store.Item) ([]store.Write, error) {
				return []store.Write{
					store.DeleteOp(it.Key, store.Always),
					store.DeleteOp(pointerKey(p.AccountID, it.SK), store.Always),
				}, nil
			},
		}}, nil
	})
}
