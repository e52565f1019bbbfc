package subscribers

import (
	"context"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's subscribers, labels and fields (job purge.Job). The
// personal data goes first: the records (names, external ids, field values, with their
// channel index entries), the identities and the name search entries. Each label's
// membership partition is erased before the label, or its deletion marker, that leads to it:
// a membership is only ever written while its label exists (planChange checks it), and a
// deleted label keeps its marker until its memberships are gone.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		bot := p.BotID
		members := func(_ context.Context, it store.Item) ([]string, error) {
			return []string{memberPartition(bot, it.SK)}, nil
		}
		return []purge.Part{
			{PK: botPrefix(bot)},
			{PK: botPrefix(bot) + "#IDENT"},
			{PK: namePartition(bot)},
			{PK: labelsPartition(bot), Dependents: members},
			{PK: labelGonePartition(bot), Dependents: members},
			{PK: botPrefix(bot) + "#LABELNAMES"},
			{PK: fieldsPartition(bot)},
			{PK: botPrefix(bot) + "#FIELDNAMES"},
			{PK: botPrefix(bot) + "#FIELDGONE"},
			{PK: botPrefix(bot) + "#GONE"},
			{PK: botPrefix(bot) + "#COUNTS"},
		}, nil
	})
}
