package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// eraseBatch bounds the campaigns one step of an erasure looks at: a read and at most two
// small writes each.
const eraseBatch = 50

// EraseStep is the family's step of the job purge.EraseJob. A campaign keeps, in an erased
// subscriber's recipient row, the address it planned or sent to: the row keeps what the
// report counts (its state, opens, clicks, bounce, the message id) and its subscriber id,
// which now names no one, and loses the address and the provider's refusal text (which may
// quote the address); it is marked erased. The address's claim in the campaign goes too. A
// row being sent meanwhile is sent to no one: the send reads the subscriber again first.
// The campaigns are looked at a page at a time, the cursor the query's; it needs only the
// store, as the purge does.
func EraseStep(st store.Store) jobs.Step {
	return purge.EraseEach(st, func(e purge.Erasure) store.Query {
		return store.Query{PK: campaignsPK(e.BotID), Prefix: campaignPrefix, Limit: eraseBatch}
	}, func(ctx context.Context, e purge.Erasure, it store.Item) error {
		campaign, rcp := strings.TrimPrefix(it.Key.SK, campaignPrefix), recipientID(e.SubscriberID)
		if err := eraseRow(ctx, st, e.BotID, campaign, rcp); err != nil {
			return fmt.Errorf("erase recipient %s of %s: %w", rcp, campaign, err)
		}
		return nil
	})
}

// eraseRow removes the address from one campaign's row of the recipient (if it has one),
// and the address's claim when it is this row's.
func eraseRow(ctx context.Context, st store.Store, bot, campaign, rcp string) error {
	_, err := mutateRow(ctx, st, bot, campaign, rcp, nil, func(r *row, _ deltas) ([]store.Write, error) {
		if r.Erased {
			return nil, errNoChange
		}
		release, err := claimRelease(ctx, st, bot, campaign, *r)
		if err != nil {
			return nil, err
		}
		r.Address, r.Erased = "", true
		if r.Error != nil {
			r.Error = &SendFailure{Code: r.Error.Code, Message: "(erased with the subscriber)"}
		}
		return release, nil
	})
	if httpapi.KindOf(err) == httpapi.KindNotFound {
		return nil // not in this campaign's audience
	}
	return err
}

// claimRelease returns the write that deletes the claim of r's address, when the claim is
// r's (a duplicate row of the same address holds none). A claim never changes hands.
func claimRelease(ctx context.Context, st store.Store, bot, campaign string, r row) ([]store.Write, error) {
	if r.Address == "" {
		return nil, nil
	}
	key := addressKey(bot, campaign, strings.ToLower(r.Address))
	it, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	claim, err := store.Decode[map[string]string](it)
	if err != nil || claim["recipient"] != r.ID {
		return nil, err
	}
	return []store.Write{store.DeleteOp(key, store.Always)}, nil
}
