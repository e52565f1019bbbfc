package subscribers

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Upsert creates the subscriber of a channel identity or, when it exists, applies the
// changes to it. created tells which happened. An upsert that changes nothing makes no new
// revision. This is the import route's operation and the conversation runtime's first step
// for every incoming message.
func (s *Service) Upsert(ctx context.Context, bot, channel, externalID string, c Changes) (sub Subscriber, created bool, err error) {
	sub, created, _, err = s.upsert(ctx, bot, channel, externalID, c)
	return sub, created, err
}

// upsert is Upsert that also returns the labels the stored change added.
func (s *Service) upsert(ctx context.Context, bot, channel, externalID string, c Changes) (sub Subscriber, created bool, added []string, err error) {
	var p httpapi.Problems
	checkIdentity(&p, channel, externalID)
	values, err := s.prepare(ctx, bot, c, &p, labelsPath)
	if err != nil {
		return Subscriber{}, false, nil, err
	}
	if err := p.Err(); err != nil {
		return Subscriber{}, false, nil, err
	}
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return Subscriber{}, false, nil, err
		}
		id, err := s.nameHolder(ctx, identityKey(bot, channel, externalID))
		if errors.Is(err, store.ErrNotFound) {
			sub, err := s.create(ctx, bot, channel, externalID, c, values)
			if errors.Is(err, errRetry) {
				continue // created by someone else meanwhile: update theirs
			}
			if err != nil {
				return Subscriber{}, false, nil, err
			}
			return sub, true, slices.Clone(sub.Labels), nil
		}
		if err != nil {
			return Subscriber{}, false, nil, err
		}
		rec, err := s.load(ctx, bot, id)
		if isNotFound(err) {
			continue // erased between the two reads
		}
		if err != nil {
			return Subscriber{}, false, nil, err
		}
		sub, err := s.change(ctx, bot, rec, c, values)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return Subscriber{}, false, nil, err
		}
		return sub, false, addedBy(rec, sub), nil
	}
	return Subscriber{}, false, nil, busy("subscriber " + channel + " " + externalID)
}

// addedBy returns the labels sub has that rec, the subscriber before the change that made
// sub, did not: the labels the change added (none when nothing changed).
func addedBy(rec record, sub Subscriber) []string {
	if sub.Revision == rec.revision {
		return nil
	}
	var out []string
	for _, l := range sub.Labels {
		if !slices.Contains(rec.Labels, l) {
			out = append(out, l)
		}
	}
	return out
}

func (s *Service) create(ctx context.Context, bot, channel, externalID string, c Changes, values map[string]any) (Subscriber, error) {
	now := s.now()
	rec := record{ID: ids.At("sub", now), Channel: channel, ExternalID: externalID, CreatedAt: stamp(now), UpdatedAt: stamp(now)}
	c.apply(&rec, values)
	pl, err := planChange(bot, nil, rec, now)
	if err != nil {
		return Subscriber{}, err
	}
	if err := pl.explain(s.store.Transact(ctx, pl.writes)); err != nil {
		return Subscriber{}, err
	}
	rec.revision = 1
	return s.renderOne(ctx, bot, rec)
}

// change applies c to rec in one conditional transaction; errRetry when rec moved on.
func (s *Service) change(ctx context.Context, bot string, rec record, c Changes, values map[string]any) (Subscriber, error) {
	after := rec.clone()
	c.apply(&after, values)
	if len(after.Labels) > MaxLabelsPerSubscriber && len(after.Labels) > len(rec.Labels) {
		return Subscriber{}, limitReached("a subscriber may have at most %d labels", MaxLabelsPerSubscriber)
	}
	if after.sameAs(rec) {
		return s.renderOne(ctx, bot, rec) // nothing changes, so no new revision
	}
	now := s.now()
	after.UpdatedAt = stamp(now)
	pl, err := planChange(bot, &rec, after, now)
	if err != nil {
		return Subscriber{}, err
	}
	if err := pl.explain(s.store.Transact(ctx, pl.writes)); err != nil {
		return Subscriber{}, err
	}
	after.revision = rec.revision + 1
	return s.renderOne(ctx, bot, after)
}

// Update applies the changes to a subscriber if its revision is still expected.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, c Changes) (Subscriber, error) {
	sub, _, err := s.modify(ctx, bot, id, &expected, c, labelsPath)
	return sub, err
}

// SetFields sets custom field values (keyed by field name or id; nil clears) at whatever
// revision the subscriber has: the conversation runtime's "set field" step.
func (s *Service) SetFields(ctx context.Context, bot, id string, values map[string]any) (Subscriber, error) {
	sub, _, err := s.modify(ctx, bot, id, nil, Changes{Fields: values}, labelsPath)
	return sub, err
}

// AddLabel gives a subscriber a label. Adding a label it has already changes nothing.
func (s *Service) AddLabel(ctx context.Context, bot, id, label string) (Subscriber, error) {
	sub, _, err := s.addLabel(ctx, bot, id, label)
	return sub, err
}

// addLabel is AddLabel that also tells whether the label was added (it was not there).
func (s *Service) addLabel(ctx context.Context, bot, id, label string) (Subscriber, []string, error) {
	if !ids.Valid("lbl", label) {
		var p httpapi.Problems
		p.Add("label_id", "must be a label id such as lbl_...")
		if _, err := s.load(ctx, bot, id); err != nil {
			return Subscriber{}, nil, err // a missing subscriber is the first thing to report
		}
		return Subscriber{}, nil, p.Err()
	}
	return s.modify(ctx, bot, id, nil, Changes{AddLabels: []string{label}}, func(int) string { return "label_id" })
}

// RemoveLabel takes a label from a subscriber. Removing a label it does not have changes
// nothing.
func (s *Service) RemoveLabel(ctx context.Context, bot, id, label string) (Subscriber, error) {
	if !ids.Valid("lbl", label) {
		return Subscriber{}, labelNotFound()
	}
	sub, _, err := s.modify(ctx, bot, id, nil, Changes{RemoveLabels: []string{label}}, labelsPath)
	return sub, err
}

// modify is a read-modify-write of one subscriber: at revision expected when given, else at
// whatever revision it has (retrying when another writer is first). It returns the
// subscriber after the change and the labels the change added.
func (s *Service) modify(ctx context.Context, bot, id string, expected *int64, c Changes, labelPath func(int) string) (Subscriber, []string, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Subscriber{}, nil, err
	}
	var p httpapi.Problems
	values, err := s.prepare(ctx, bot, c, &p, labelPath)
	if err != nil {
		return Subscriber{}, nil, err
	}
	if err := p.Err(); err != nil {
		return Subscriber{}, nil, err
	}
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return Subscriber{}, nil, err
		}
		if expected != nil && rec.revision != *expected {
			return Subscriber{}, nil, httpapi.StaleRevision(rec.revision)
		}
		sub, err := s.change(ctx, bot, rec, c, values)
		if err == nil {
			return sub, addedBy(rec, sub), nil
		}
		if !errors.Is(err, errRetry) {
			return Subscriber{}, nil, err
		}
		if rec, err = s.load(ctx, bot, id); err != nil {
			return Subscriber{}, nil, err
		}
	}
	return Subscriber{}, nil, busy("subscriber " + id)
}

func labelsPath(i int) string { return fmt.Sprintf("labels[%d]", i) }

// prepare checks c and resolves its field values against the bot's fields (by id, in stored
// form), adding every problem to p. Labels to add must exist; the transaction checks again.
func (s *Service) prepare(ctx context.Context, bot string, c Changes, p *httpapi.Problems, labelPath func(int) string) (map[string]any, error) {
	c.check(p, s.now())
	if len(*p) > 0 {
		return nil, nil
	}
	var values map[string]any
	if len(c.Fields) > 0 {
		cat, err := s.catalog(ctx, bot)
		if err != nil {
			return nil, err
		}
		values = cat.resolve(p, c.Fields)
	}
	for i, l := range c.AddLabels {
		_, err := s.store.Get(ctx, labelKey(bot, l))
		if errors.Is(err, store.ErrNotFound) {
			p.Add(labelPath(i), "no label of this bot has this id")
		} else if err != nil {
			return nil, err
		}
	}
	return values, nil
}
