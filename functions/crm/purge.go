package crm

import (
	"context"
	"errors"
	"fmt"
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

// eraseConnections bounds the connections one step of an erasure looks at.
const eraseConnections = 25

// EraseStep erases what the CRM sync keeps about an erased subscriber (job purge.EraseJob),
// in each of the bot's connections: the link (the subscriber's CRM record and the field values
// both sides last agreed on), the record's and the deal's pointers to the subscriber, and the
// subscriber's open conflicts (both sides' values). Nothing is deleted in the CRM, whose
// record is the customer's: its later changes are a record of no subscriber's, which the sync
// leaves alone. Conflicts already resolved keep their values until the connection or the bot
// goes (nothing finds them by subscriber). The connections a page at a time, the cursor the
// query's.
func EraseStep(st store.Store) jobs.Step {
	return purge.EraseEach(st, func(e purge.Erasure) store.Query {
		return store.Query{PK: crmPK(e.BotID), Prefix: connPrefix, Limit: eraseConnections}
	}, func(ctx context.Context, e purge.Erasure, it store.Item) error {
		conn := strings.TrimPrefix(it.Key.SK, connPrefix)
		if err := eraseLink(ctx, st, e.BotID, conn, e.SubscriberID); err != nil {
			return fmt.Errorf("erase subscriber %s from connection %s: %w", e.SubscriberID, conn, err)
		}
		return nil
	})
}

// eraseLink deletes the subscriber's link in one connection with the pointers that lead to
// it, and its open conflicts with their markers.
func eraseLink(ctx context.Context, st store.Store, bot, conn, sub string) error {
	var writes []store.Write
	it, err := st.Get(ctx, linkKey(bot, conn, sub))
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return err
	default:
		l, err := store.Decode[link](it)
		if err != nil {
			return err
		}
		writes = append(writes, store.DeleteOp(it.Key, store.Always))
		keys := []store.Key{}
		if l.RecordID != "" {
			keys = append(keys, recordKey(bot, conn, l.RecordID))
		}
		if l.Deal != nil && l.Deal.ID != "" {
			keys = append(keys, dealKey(bot, conn, l.Deal.ID))
		}
		for _, k := range keys {
			ref, err := st.Get(ctx, k)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			r, err := store.Decode[recordRef](ref)
			if err != nil {
				return err
			}
			if r.SubscriberID != sub {
				continue // another subscriber's now
			}
			writes = append(writes, store.DeleteOp(k, store.RevisionIs(ref.Revision)))
		}
	}
	q := store.Query{PK: syncPK(bot, conn), Prefix: "OPEN#" + sub + "#"}
	for {
		page, err := st.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, m := range page.Items {
			marker, err := store.Decode[map[string]string](m)
			if err != nil {
				return err
			}
			writes = append(writes, store.DeleteOp(m.Key, store.Always))
			if id := marker["conflict_id"]; id != "" {
				writes = append(writes, store.DeleteOp(conflictKey(bot, conn, id), store.Always))
			}
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	for len(writes) > 0 {
		n := min(len(writes), store.MaxTransactWrites)
		if err := st.Transact(ctx, writes[:n]); err != nil {
			if errors.Is(err, store.ErrConditionFailed) {
				return fmt.Errorf("a pointer changed meanwhile: %w", store.ErrUnavailable) // the step runs again
			}
			return err
		}
		writes = writes[n:]
	}
	return nil
}
