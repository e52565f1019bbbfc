package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/store"
)

// The deployment's sending schedule. The provider's rate (Config.Rate: SES's sending quota)
// is the account's, not a campaign's: campaigns sending at once share it. Every send step,
// of every campaign of every bot, takes the slots of each batch it claims from one item,
// which keeps when the next free slot begins (the generic cell rate algorithm): a batch of n
// starts at that time or now, whichever is later, and moves it n/Rate seconds on. Alone, a
// campaign finds the slots where its own pacing would put them; beside others, its batches
// take turns with theirs. One conditional write per batch (a second's worth of messages at
// most) keeps the cost off the messages.

// paceKey is the schedule's item.
func paceKey() store.Key { return store.Key{PK: "EMAILPACE", SK: "SCHEDULE"} }

// paceRecord is the schedule: when its next free slot begins.
type paceRecord struct {
	Next time.Time `json:"next"`
}

// paceAttempts bounds how often a reservation that lost a race to another is tried again.
const paceAttempts = 16

// schedule reads the schedule and its revision (0: none yet).
func (s *Service) schedule(ctx context.Context) (paceRecord, int64, error) {
	it, err := s.d.Store.Get(ctx, paceKey())
	if errors.Is(err, store.ErrNotFound) {
		return paceRecord{}, 0, nil
	}
	if err != nil {
		return paceRecord{}, 0, err
	}
	r, err := store.Decode[paceRecord](it)
	return r, it.Revision, err
}

// from is when the schedule's next free slot begins as of now: its Next, or now when that
// has passed.
func (r paceRecord) from(now time.Time) time.Time {
	if r.Next.After(now) {
		return r.Next
	}
	return now
}

// reserve takes n consecutive slots of the schedule, one every 1/Rate seconds, and returns
// when the first begins. r and rev are the schedule as the caller read it: the first attempt
// writes on them, and a lost race reads it again.
func (s *Service) reserve(ctx context.Context, n int, r paceRecord, rev int64) (time.Time, error) {
	for attempt := range paceAttempts {
		if attempt > 0 {
			var err error
			if r, rev, err = s.schedule(ctx); err != nil {
				return time.Time{}, err
			}
		}
		start := r.from(s.d.Now())
		next := start.Add(time.Duration(float64(n) * float64(time.Second) / s.sendRate(ctx)))
		data, err := store.Encode(paceRecord{Next: next})
		if err != nil {
			return time.Time{}, err
		}
		cond := store.RevisionOrAbsent(rev)
		// It expires once long past: an idle deployment's schedule starts again from now.
		it := store.Item{Key: paceKey(), Revision: rev + 1, Data: data, ExpiresAt: store.SecondsPrecision(next.Add(time.Hour))}
		err = s.d.Store.Put(ctx, it, cond)
		if err == nil {
			return start, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return time.Time{}, err
		}
	}
	return time.Time{}, fmt.Errorf("emailcampaigns: the sending schedule keeps changing: %w", store.ErrUnavailable)
}
