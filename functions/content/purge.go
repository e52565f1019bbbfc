package content

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's content (job purge.Job): one partition holds every
// document, version, template and counter (the indexes follow the items). The test-send
// counters expire on their own within two minutes.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: contentPK(p.BotID)}}, nil
	})
}
