package copilot

import (
	"context"
	"strings"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's proposals (job purge.Job), each with its account's
// pointer to it, in one transaction.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{
			PK: proposalsPK(p.BotID),
			Delete: func(ctx context.Context, it store.Item) ([]store.Write, error) {
				_, id, _ := strings.Cut(it.SK, "#")
				return []store.Write{
					store.DeleteOp(it.Key, store.Always),
					store.DeleteOp(pointerKey(p.AccountID, id), store.Always),
				}, nil
			},
		}}, nil
	})
}
