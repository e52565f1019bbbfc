package subscribers

import (
	"context"
	"errors"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

func subscriberNotFound() error { return httpapi.NotFound("subscriber") }

// load reads one record. A malformed id is not found without a lookup.
func (s *Service) load(ctx context.Context, bot, id string) (record, error) {
	if !ids.Valid("sub", id) {
		return record{}, subscriberNotFound()
	}
	it, err := s.store.Get(ctx, subscriberKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, subscriberNotFound()
	}
	if err != nil {
		return record{}, err
	}
	return decodeRecord(it)
}

// Get returns one subscriber of the bot.
func (s *Service) Get(ctx context.Context, bot, id string) (Subscriber, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Subscriber{}, err
	}
	return s.renderOne(ctx, bot, rec)
}

// Reader reads many subscribers of one bot in a short time, with the bot's field catalog
// and the labels under removal read once, when the reader was made: a campaign's send step
// reads its recipients through one, a few at a time. A field created or deleted after that
// shows as it was then (a deleted field's values are still shown by the reader, a new
// field's are not), so a reader is meant to live seconds, not longer.
type Reader struct {
	s   *Service
	bot string
	v   view
}

// Reader returns a reader of the bot's subscribers.
func (s *Service) Reader(ctx context.Context, bot string) (*Reader, error) {
	cat, err := s.catalog(ctx, bot)
	if err != nil {
		return nil, err
	}
	gone, err := s.goneLabels(ctx, bot)
	if err != nil {
		return nil, err
	}
	return &Reader{s: s, bot: bot, v: view{fields: cat.byID, gone: gone}}, nil
}

// GetMany returns the bot's subscribers among ids, by id, as Get would (with the reader's
// catalog); an id that names no subscriber (erased, or malformed) is absent from the map.
// It reads only the subscribers, store.MaxGetMany to a read.
func (r *Reader) GetMany(ctx context.Context, ids []string) (map[string]Subscriber, error) {
	recs, err := r.s.loadMany(ctx, r.bot, ids)
	if err != nil {
		return nil, err
	}
	subs := make([]Subscriber, len(recs))
	for i, rec := range recs {
		subs[i] = r.v.render(rec)
	}
	return byID(subs), nil
}

// loadMany reads the records among ids that exist.
func (s *Service) loadMany(ctx context.Context, bot string, ids []string) ([]record, error) {
	found, err := s.loadAt(ctx, bot, ids)
	if err != nil {
		return nil, err
	}
	recs := make([]record, 0, len(ids))
	for _, r := range found {
		if r != nil {
			recs = append(recs, *r)
		}
	}
	return recs, nil
}

// loadAt reads the records of ids, store.MaxGetMany to a read: found[i] is ids[i]'s
// record, nil when it names no subscriber (erased after an index was read, or malformed).
func (s *Service) loadAt(ctx context.Context, bot string, subIDs []string) ([]*record, error) {
	found := make([]*record, len(subIDs))
	for from := 0; from < len(subIDs); from += store.MaxGetMany {
		chunk := subIDs[from:min(from+store.MaxGetMany, len(subIDs))]
		keys := make([]store.Key, 0, len(chunk))
		at := make([]int, 0, len(chunk)) // at[j]: the index in subIDs of keys[j]
		for i, id := range chunk {
			if ids.Valid("sub", id) {
				keys = append(keys, subscriberKey(bot, id))
				at = append(at, from+i)
			}
		}
		items, err := s.store.GetMany(ctx, keys)
		if err != nil {
			return nil, err
		}
		for j, it := range items {
			if it.PK == "" {
				continue
			}
			r, err := decodeRecord(it)
			if err != nil {
				return nil, err
			}
			found[at[j]] = &r
		}
	}
	return found, nil
}

func byID(subs []Subscriber) map[string]Subscriber {
	out := make(map[string]Subscriber, len(subs))
	for _, sub := range subs {
		out[sub.ID] = sub
	}
	return out
}

// GetByIdentity returns the subscriber of a channel identity: how the conversation runtime
// finds who wrote.
func (s *Service) GetByIdentity(ctx context.Context, bot, channel, externalID string) (Subscriber, error) {
	rec, err := s.loadByIdentity(ctx, bot, channel, externalID)
	if err != nil {
		return Subscriber{}, err
	}
	return s.renderOne(ctx, bot, rec)
}

func (s *Service) loadByIdentity(ctx context.Context, bot, channel, externalID string) (record, error) {
	var p httpapi.Problems
	if checkIdentity(&p, channel, externalID); len(p) > 0 {
		return record{}, subscriberNotFound() // an identity that cannot exist
	}
	id, err := s.nameHolder(ctx, identityKey(bot, channel, externalID))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, subscriberNotFound()
	}
	if err != nil {
		return record{}, err
	}
	return s.load(ctx, bot, id)
}

func (s *Service) renderOne(ctx context.Context, bot string, rec record) (Subscriber, error) {
	out, err := s.render(ctx, bot, []record{rec})
	if err != nil {
		return Subscriber{}, err
	}
	return out[0], nil
}

// render turns records into responses. It reads the field catalog only when a record has
// values and the labels under removal only when one has labels, so plain subscribers cost
// no extra read.
func (s *Service) render(ctx context.Context, bot string, recs []record) ([]Subscriber, error) {
	var v view
	for _, r := range recs {
		if len(r.Values) > 0 && v.fields == nil {
			cat, err := s.catalog(ctx, bot)
			if err != nil {
				return nil, err
			}
			v.fields = cat.byID
		}
		if len(r.Labels) > 0 && v.gone == nil {
			gone, err := s.goneLabels(ctx, bot)
			if err != nil {
				return nil, err
			}
			v.gone = gone
		}
	}
	out := make([]Subscriber, len(recs))
	for i, r := range recs {
		out[i] = v.render(r)
	}
	return out, nil
}

// goneLabels are the deleted labels still being removed from subscribers.
func (s *Service) goneLabels(ctx context.Context, bot string) (map[string]bool, error) {
	items, err := s.queryAll(ctx, store.Query{PK: labelGonePartition(bot)})
	if err != nil {
		return nil, err
	}
	gone := make(map[string]bool, len(items))
	for _, it := range items {
		gone[it.SK] = true
	}
	return gone, nil
}
