package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/botplatform/api/shared/store"
)

// planner is the plan of a step running beside its send: it reports each page it
// commits on progress, and closes done once it has stopped (live and err then say how).
// The send sets stop when it ends, so that the plan stops after the page it is writing.
type planner struct {
	progress chan struct{}
	done     chan struct{}
	stop     atomic.Bool
	// live and err are the plan's result, c the last campaign record it read; all three
	// are read only once done is closed.
	live bool
	err  error
	c    record
}

func newPlanner() *planner {
	return &planner{progress: make(chan struct{}, 1), done: make(chan struct{})}
}

// ended reports whether the plan has stopped; when it has, every row it planned is
// committed.
func (pl *planner) ended() bool {
	select {
	case <-pl.done:
		return true
	default:
		return false
	}
}

// failed reports whether the plan has stopped with an error or found the run over.
func (pl *planner) failed() bool { return pl.ended() && (pl.err != nil || !pl.live) }

// wait waits for the plan to commit another page or stop.
func (pl *planner) wait(ctx context.Context) {
	select {
	case <-pl.progress:
	case <-pl.done:
	case <-ctx.Done():
	}
}

// plan writes the rows of audience pages of labels until the audience ends, the step's time
// is up or the send beside it has ended (pl.stop); Config.MaxAudience bounds the pages. It
// reports each page on pl.progress. It is the only one to touch st.r while it runs, and it
// reads the campaign into pl.c, never st.c, which the send beside it owns.
func (st *step) plan(ctx context.Context, labels []string, pl *planner) (bool, error) {
	s := st.s
	if st.r.Phase == "" {
		st.r.Phase = phasePlan
	}
	for {
		if pl.stop.Load() {
			return true, nil
		}
		c, live, err := st.check(ctx)
		if err != nil || !live {
			return false, err
		}
		pl.c = c
		room := s.cfg.MaxAudience - st.r.Seen
		if room <= 0 {
			st.r.Truncated = true
			break
		}
		people, next, err := s.d.Audience.Page(ctx, st.p.Bot, labels, min(planPage, room), st.r.Cursor)
		if err != nil {
			return false, err
		}
		if len(people) > room {
			people, st.r.Truncated = people[:room], true
		}
		for err := st.planPage(ctx, people, c.Revision); err != nil; err = st.planPage(ctx, people, c.Revision) {
			if !errors.Is(err, errCampaignChanged) {
				return false, err
			}
			// Paused, canceled or a newer run since it was read: none of this page's rows
			// was written after that. Anything else changed: plan the page again.
			if c, live, err = st.check(ctx); err != nil || !live {
				return false, err
			}
			pl.c = c
		}
		st.r.Seen += len(people)
		st.r.Cursor = next
		select {
		case pl.progress <- struct{}{}:
		default: // the send has a wake-up pending already
		}
		if next == "" || st.r.Truncated {
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

// errCampaignChanged is planPage's answer when the campaign record is no longer at the
// revision the plan read.
var errCampaignChanged = errors.New("emailcampaigns: the campaign changed while its audience was planned")

// planPage writes one page's rows: by chunks in one transaction each, or row by row when
// a chunk meets a row written before (a repeated step) or an address claimed before. Every
// transaction also checks that the campaign is still at revision rev (errCampaignChanged
// otherwise), so that no row is planned once a cancel has been saved: the cancel's run
// could have moved the campaign's planned rows to canceled already.
func (st *step) planPage(ctx context.Context, people []Person, rev int64) error {
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
		writes, err := st.planWrites(chunk, true, rev)
		if err != nil {
			return err
		}
		err = s.d.Store.Transact(ctx, writes)
		var ce *store.ConditionError
		switch {
		case err == nil:
			continue
		case errors.As(err, &ce) && ce.Index == 0:
			return errCampaignChanged
		case !errors.Is(err, store.ErrConditionFailed):
			return fmt.Errorf("plan recipients: %w", err)
		}
		for _, r := range chunk {
			if err := st.planRow(ctx, r, rev); err != nil {
				return err
			}
		}
	}
	return nil
}

// planWrites are the writes of new rows: the check that the campaign is at revision rev,
// then each row, the address claim of each planned one (when claim), the counters.
func (st *step) planWrites(rows []row, claim bool, rev int64) ([]store.Write, error) {
	bot, id := st.p.Bot, st.p.Campaign
	writes := []store.Write{store.CheckOp(campaignKey(bot, id), store.RevisionIs(rev))}
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
func (st *step) planRow(ctx context.Context, r row, rev int64) error {
	writes, err := st.planWrites([]row{r}, true, rev)
	if err != nil {
		return err
	}
	err = st.s.d.Store.Transact(ctx, writes)
	var ce *store.ConditionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce) && ce.Index == 0:
		return errCampaignChanged
	case errors.As(err, &ce) && ce.Index == 1:
		return nil // written by an earlier run of this step
	case errors.As(err, &ce) && ce.Index == 2 && r.State == RowPlanned:
		r.State, r.SkipReason = RowSkipped, SkipDuplicate
		if writes, err = st.planWrites([]row{r}, false, rev); err != nil {
			return err
		}
		err = st.s.d.Store.Transact(ctx, writes)
		switch {
		case errors.As(err, &ce) && ce.Index == 0:
			return errCampaignChanged
		case errors.As(err, &ce) && ce.Index == 1:
			return nil
		}
		return err
	default:
		return fmt.Errorf("plan recipient %s: %w", r.ID, err)
	}
}
