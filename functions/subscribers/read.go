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
