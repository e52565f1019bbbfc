package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// plan writes the rows of audience pages until the audience ends or the step's time is up.
func (st *step) plan(ctx context.Context) (bool, error) {
	s := st.s
	if st.r.Phase == "" {
		st.r.Phase = phasePlan
	}
	for range planPagesPerStep {
		if live, err := st.live(ctx); err != nil || !live {
			return false, err
		}
		room := s.cfg.MaxAudience - st.r.Seen
		if room <= 0 {
			st.r.Truncated = true
			break
		}
		people, next, err := s.d.Audience.Page(ctx, st.p.Bot, st.c.Audience.LabelIDs, min(planPage, room), st.r.Cursor)
		if err != nil {
			return false, err
		}
		if len(people) > room {
			people, st.r.Truncated = people[:room], true
		}
		if err := st.planPage(ctx, people); err != nil {
			return false, err
		}
		st.r.Seen += len(people)
		st.r.Cursor = next
		if next == "" || len(people) == 0 || st.r.Truncated {
			break
		}
		if !s.d.Now().Before(st.deadline) {
			return true, nil
		}
	}
	if st.r.Cursor == "" || st.r.Truncated {
		st.r.Phase, st.r.Cursor = phaseSend, ""
	}
	return true, nil
}

// planPage writes one page's rows: by chunks in one transaction each, or row by row when
// a chunk meets a row written before (a repeated step) or an address claimed before.
func (st *step) planPage(ctx context.Context, people []Person) error {
	s := st.s
	// A subscriber listed twice on a page would be one row written twice in a transaction.
	ids := map[string]bool{}
	people = slices.DeleteFunc(slices.Clone(people), func(p Person) bool {
		dup := p.SubscriberID == "" || ids[p.SubscriberID]
		ids[p.SubscriberID] = true
		return dup
	})
	verdicts, err := s.classify(ctx, st.p.Bot, people, map[string]bool{})
	if err != nil {
		return err
	}
	now := stamp(s.d.Now())
	rows := make([]row, len(people))
	for i, p := range people {
		v := verdicts[i]
		r := row{Recipient: Recipient{ID: recipientID(p.SubscriberID), SubscriberID: p.SubscriberID, Address: v.address,
			State: RowPlanned, SkipReason: v.reason, PlannedAt: now, Clicks: []LinkClicks{}}, rev: 1}
		if v.reason != "" {
			r.State = RowSkipped
		}
		rows[i] = r
	}
	for len(rows) > 0 {
		chunk := rows[:min(planChunk, len(rows))]
		rows = rows[len(chunk):]
		writes, err := st.planWrites(chunk, true)
		if err != nil {
			return err
		}
		err = s.d.Store.Transact(ctx, writes)
		if !errors.Is(err, store.ErrConditionFailed) {
			if err != nil {
				return fmt.Errorf("plan recipients: %w", err)
			}
			continue
		}
		for _, r := range chunk {
			if err := st.planRow(ctx, r); err != nil {
				return err
			}
		}
	}
	return nil
}

// planWrites are the writes of new rows: each row, the address claim of each planned one
// (when claim), the counters.
func (st *step) planWrites(rows []row, claim bool) ([]store.Write, error) {
	bot, id := st.p.Bot, st.p.Campaign
	var writes []store.Write
	d := deltas{}
	for _, r := range rows {
		it, err := r.item(bot, id)
		if err != nil {
			return nil, err
		}
		writes = append(writes, store.PutOp(it, store.MustNotExist))
		if r.State == RowPlanned && claim {
			b, err := store.Encode(map[string]string{"recipient": r.ID})
			if err != nil {
				return nil, err
			}
			writes = append(writes, store.PutOp(store.Item{Key: addressKey(bot, id, strings.ToLower(r.Address)), Revision: 1, Data: b}, store.MustNotExist))
		}
		d.move(bot, id, "", r.State)
		if r.State == RowSkipped {
			d.add(bot, id, "skip#"+r.SkipReason, 1)
		}
	}
	return append(writes, d.writes()...), nil
}

// planRow writes one row unless it exists; a planned row whose address is claimed by
// another row is written skipped as duplicate.
func (st *step) planRow(ctx context.Context, r row) error {
	writes, err := st.planWrites([]row{r}, true)
	if err != nil {
		return err
	}
	err = st.s.d.Store.Transact(ctx, writes)
	var ce *store.ConditionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && ce.Index == 0:
		return nil // written by an earlier run of this step
	case errors.As(err, &ce) && ce.Index == 1 && r.State == RowPlanned:
		r.State, r.SkipReason = RowSkipped, SkipDuplicate
		if writes, err = st.planWrites([]row{r}, false); err != nil {
			return err
		}
		err = st.s.d.Store.Transact(ctx, writes)
		if errors.As(err, &ce) && ce.Index == 0 {
			return nil
		}
		return err
	default:
		return fmt.Errorf("plan recipient %s: %w", r.ID, err)
	}
}
