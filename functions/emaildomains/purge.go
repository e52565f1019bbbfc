package emaildomains

import (
	"context"
	"errors"
	"strings"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's email data (job purge.Job): its domains, each in one
// transaction with the deployment-wide claim of its name when the claim is the domain's (so
// another bot can verify the name), then everything else of the configuration partition,
// then the inbound messages (which also expire on their own). Domains registered with the
// provider are not deregistered: the jobs worker holds no provider client.
func PurgeStep(st store.Store) jobs.Step {
	return purge.Step(st, func(ctx context.Context, p purge.Payload) ([]purge.Part, error) {
		bot := p.BotID
		return []purge.Part{
			{PK: emailPK(bot), Delete: func(ctx context.Context, it store.Item) ([]store.Write, error) {
				writes := []store.Write{store.DeleteOp(it.Key, store.MustExist)}
				if !strings.HasPrefix(it.SK, domainPrefix) {
					return writes, nil
				}
				rec, err := store.Decode[domainRecord](it)
				if err != nil {
					return nil, err
				}
				cit, err := st.Get(ctx, claimKey(rec.Name))
				if errors.Is(err, store.ErrNotFound) {
					return writes, nil
				}
				if err != nil {
					return nil, err
				}
				c, err := store.Decode[claim](cit)
				if err != nil {
					return nil, err
				}
				if c.BotID == bot {
					writes = append(writes, store.DeleteOp(cit.Key, store.RevisionIs(cit.Revision)))
				}
				return writes, nil
			}},
			{PK: inboundPK(bot)},
		}, nil
	})
}
