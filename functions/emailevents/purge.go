package emailevents

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's suppression list (job purge.Job): one partition (the
// reason index follows the items). The Mailgun token markers belong to no bot and expire on
// their own within minutes.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: suppressPK(p.BotID)}}, nil
	})
}
