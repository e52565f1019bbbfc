package emaildomains

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// PurgeStep erases a deleted bot's email data (job purge.Job): its configuration partition,
// each domain in one transaction with the deployment-wide claim of its name when the claim
// is the bot's (so another bot can verify the name), then the inbound messages (which also
// expire on their own).
//
// A domain whose name the bot claims is first deregistered from the provider through ids
// (on AWS its SES identity, with the DKIM key SES signs with), before its record and claim
// are deleted: while the claim is the bot's no other bot can have verified, and so
// registered, the name, and once it is deleted one may, so the identity is removed first and
// never after. A domain whose name another bot claims (it verified the name first, or
// after this bot's claim went) is not deregistered: the identity is theirs. Deregistering a name that
// is not registered (a domain deregistered by an earlier attempt, or one never registered)
// is not an error, so the step is safe to repeat.
//
// A deregistration that fails fails the step, which the jobs runner tries again (the
// queue's backoff, then the purge's second pass), and the domain, with its claim, stays
// until the provider confirms: SES throttles its identity APIs at a low rate, and a
// best-effort call would lose the deregistration of a bot with many domains without
// a trace other than a log line. The price is that a provider failure that lasts beyond the
// retries (or a missing grant) dead-letters the purge, which the jobs queue's dead-letter
// alarm reports (docs/purge.md); this family's step runs last (shared/family), so every other
// family's data is erased by then. With a nil ids (a
// process without a provider client: the local process) nothing is deregistered.
func PurgeStep(st store.Store, ids Identities) jobs.Step {
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
				if c.BotID != bot {
					return writes, nil
				}
				if ids != nil {
					if err := ids.Deregister(ctx, rec.Name); err != nil {
						return nil, fmt.Errorf("deregister email domain %s (%s): %w", rec.Name, rec.ID, err)
					}
				}
				return append(writes, store.DeleteOp(cit.Key, store.RevisionIs(cit.Revision))), nil
			}},
			{PK: inboundPK(bot)},
		}, nil
	})
}
