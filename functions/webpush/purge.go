package webpush

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's browser push (job purge.Job): its partition (the
// configuration with the sealed key, the send counters). The subscriptions are the customer
// SDK's, which erases them. The test-send rate-limit counters expire on their own.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: webpushPK(p.BotID)}}, nil
	})
}
