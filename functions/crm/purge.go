package crm

import (
	"context"
	"strings"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's CRM connections (job purge.Job): its partition (the
// connections, their sealed credentials, the account reservations, the mappings) and each
// connection's sync partition. Nothing is revoked at
// the providers: the bot's owner deleted the bot, not the CRM's grant, and a purge must not
// depend on third parties. Pending OAuth starts expire within 5 minutes, and their
// callback refuses a deleted bot; the start rate-limit items expire on their own.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return []purge.Part{{PK: crmPK(p.BotID), Dependents: func(_ context.Context, it store.Item) ([]string, error) {
			// A connection leads to its sync state (links, jobs, conflicts).
			if id, ok := strings.CutPrefix(it.Key.SK, connPrefix); ok {
				return []string{syncPK(p.BotID, id)}, nil
			}
			return nil, nil
		}}}, nil
	})
}
