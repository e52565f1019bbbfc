package subscribers

import (
	"context"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// tombstone is what remains of an erased subscriber: nothing about the person, only what the
// bot's activity counters were derived from (the channel and when they arrived), so that
// counts rebuilt from stored items agree with the counters, and the time of the erasure.
type tombstone struct {
	Channel   string    `json:"channel"`
	CreatedAt time.Time `json:"created_at"`
	ErasedAt  time.Time `json:"erased_at"`
}

// Delete erases a subscriber (at revision expected, when given): the record with the
// person's names, external id, locale, time zone and field values, the identity, the search
// entries and the label memberships go in one transaction; a tombstone keeps the anonymous
// facts. The activity counters keep counting them. A later upsert of the same identity
// creates a new subscriber with a new id.
func (s *Service) Delete(ctx context.Context, bot, id string, expected *int64) error {
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return err
		}
		rec, err := s.load(ctx, bot, id)
		if err != nil {
			return err
		}
		if expected != nil && rec.revision != *expected {
			return httpapi.StaleRevision(rec.revision)
		}
		tomb, err := store.Encode(tombstone{Channel: rec.Channel, CreatedAt: rec.CreatedAt, ErasedAt: stamp(s.now())})
		if err != nil {
			return err
		}
		// The revision condition makes the deletes below exactly the record's derived items:
		// a record renamed or relabelled meanwhile fails it and is read again.
		writes := []store.Write{
			store.DeleteOp(subscriberKey(bot, id), store.RevisionIs(rec.revision)),
			store.DeleteOp(identityKey(bot, rec.Channel, rec.ExternalID), store.Always),
			store.PutOp(store.Item{Key: tombstoneKey(bot, id), Data: tomb, Revision: 1}, store.Always),
		}
		for _, w := range rec.indexWords() {
			writes = append(writes, store.DeleteOp(nameWordKey(bot, w, id), store.Always))
		}
		for _, l := range rec.Labels {
			writes = append(writes, store.DeleteOp(memberKey(bot, l, id), store.Always))
		}
		err = s.store.Transact(ctx, writes)
		if failedAt(err) == 0 {
			continue
		}
		if err != nil {
			return fmt.Errorf("erase subscriber: %w", err)
		}
		return nil
	}
	return busy("subscriber " + id)
}
