package reactions

import (
	"context"
	"strings"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's reactions (job purge.Job): the bot's partition, and
// before each reaction or tombstone in it, that reaction's versions and index entry.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{
			PK: reactionsPK(p.BotID),
			Dependents: func(_ context.Context, it store.Item) ([]string, error) {
				id := strings.TrimPrefix(it.SK, goneSKPrefix)
				if !ids.Valid("rct", id) {
					return nil, nil // the registry, the publication counter
				}
				return []string{versionsPK(p.BotID, id), indexPK(id)}, nil
			},
		}}, nil
	})
}
