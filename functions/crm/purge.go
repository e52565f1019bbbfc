package crm

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's CRM connections (job purge.Job): its partition (the
// connections, their sealed credentials, the account reservations). Nothing is revoked at
// the providers: the bot's owner deleted the bot, not the CRM's grant, and a purge must not
// depend on third parties. Pending OAuth starts expire within 5 minutes, and their
// callback refuses a deleted bot; the start rate-limit items expire on their own.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: crmPK(p.BotID)}}, nil
	})
}
