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
	return s.upsert(ctx, bot, channel, externalID, c, false, nil)
}

// With returns writes for an upsert to commit with its own, in one transaction, given the
// subscriber as the upsert leaves it and whether it creates it (UpsertWith).
type With func(sub Subscriber, created bool) ([]store.Write, error)

// UpsertWith is Upsert that commits the writes with returns in the upsert's own transaction,
// after the upsert's writes (the conversation runtime's claim of the update that names the
// subscriber: one commit instead of two). with is called once per attempt, so it may be
// called again when another writer changed the subscriber meanwhile; it must only plan. A
// condition of with's writes that fails fails the upsert with a *store.ConditionError whose
// Index counts from with's first write; nothing is committed then.
func (s *Service) UpsertWith(ctx context.Context, bot, channel, externalID string, c Changes, with With) (sub Subscriber, created bool, err error) {
	return s.upsert(ctx, bot, channel, externalID, c, false, with)
}

// upsert is Upsert; hooked (the route's) adds the LabelHook's writes to a change that adds
// labels; with (UpsertWith) adds the caller's.
func (s *Service) upsert(ctx context.Context, bot, channel, externalID string, c Changes, hooked bool, with With) (sub Subscriber, created bool, err error) {
	var p httpapi.Problems
	checkIdentity(&p, channel, externalID)
	values, err := s.prepare(ctx, bot, &c, &p, labelsPath)
	if err != nil {
		return Subscriber{}, false, err
	}
	if err := p.Err(); err != nil {
		return Subscriber{}, false, err
	}
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return Subscriber{}, false, err
		}
		id, err := s.nameHolder(ctx, identityKey(bot, channel, externalID))
		if errors.Is(err, store.ErrNotFound) {
			sub, err := s.create(ctx, bot, channel, externalID, c, values, hooked, with)
			if errors.Is(err, errRetry) {
				continue // created by someone else meanwhile: update theirs
			}
			if err != nil {
				return Subscriber{}, false, err
			}
			return sub, true, nil
		}
		if err != nil {
			return Subscriber{}, false, err
		}
		rec, err := s.load(ctx, bot, id)
		if isNotFound(err) {
			continue // erased between the two reads
		}
		if err != nil {
			return Subscriber{}, false, err
		}
		sub, err := s.change(ctx, bot, rec, c, values, hooked, with)
		if errors.Is(err, errRetry) {
			continue
		}
		if err != nil {
			return Subscriber{}, false, err
		}
		return sub, false, nil
	}
	return Subscriber{}, false, busy("subscriber " + channel + " " + externalID)
}

// addedLabels returns the labels after has that before has not.
func addedLabels(before, after []string) []string {
	var out []string
	for _, l := range after {
		if !slices.Contains(before, l) {
			out = append(out, l)
		}
	}
	return out
}

func (s *Service) create(ctx context.Context, bot, channel, externalID string, c Changes, values map[string]any, hooked bool, with With) (Subscriber, error) {
	now := s.now()
	rec := record{ID: ids.At("sub", now), Channel: channel, ExternalID: externalID, CreatedAt: stamp(now), UpdatedAt: stamp(now)}
	c.apply(&rec, values)
	pl, err := planChange(bot, nil, rec, now)
	if err != nil {
		return Subscriber{}, err
	}
	committed, err := s.hookWrites(ctx, bot, &pl, hooked,
		LabelAddition{SubscriberID: rec.ID, Channel: channel, LabelIDs: slices.Clone(rec.Labels), Revision: 1})
	if err != nil {
		return Subscriber{}, err
	}
	rec.revision = 1
	sub, err := s.renderOne(ctx, bot, rec)
	if err != nil {
		return Subscriber{}, err
	}
	if err := s.commit(ctx, &pl, with, sub, true); err != nil {
		return Subscriber{}, err
	}
	committed(ctx)
	s.recordChange(ctx, bot, nil, rec, 1, now)
	return sub, nil
}

// commit commits pl with the writes of with (UpsertWith) for sub, in one transaction.
func (s *Service) commit(ctx context.Context, pl *plan, with With, sub Subscriber, created bool) error {
	writes := pl.writes
	if with != nil {
		theirs, err := with(sub, created)
		if err != nil {
			return err
		}
		writes = append(slices.Clip(writes), theirs...)
	}
	if len(writes) == 0 {
		return nil
	}
	err := s.store.Transact(ctx, writes)
	if i := failedAt(err); i >= len(pl.writes) {
		return &store.ConditionError{Index: i - len(pl.writes)} // one of with's
	}
	return pl.explain(err)
}

// change applies c to rec in one conditional transaction; errRetry when rec moved on. With
// hooked, a change that adds labels carries the LabelHook's writes.
func (s *Service) change(ctx context.Context, bot string, rec record, c Changes, values map[string]any, hooked bool, with With) (Subscriber, error) {
	after := rec.clone()
	c.apply(&after, values)
	if len(after.Labels) > MaxLabelsPerSubscriber && len(after.Labels) > len(rec.Labels) {
		return Subscriber{}, limitReached("a subscriber may have at most %d labels", MaxLabelsPerSubscriber)
	}
	if after.sameAs(rec) {
		// Nothing changes, so no new revision; with's writes commit alone.
		sub, err := s.renderOne(ctx, bot, rec)
		if err != nil {
			return Subscriber{}, err
		}
		return sub, s.commit(ctx, &plan{}, with, sub, false)
	}
	now := s.now()
	after.UpdatedAt = stamp(now)
	pl, err := planChange(bot, &rec, after, now)
	if err != nil {
		return Subscriber{}, err
	}
	committed, err := s.hookWrites(ctx, bot, &pl, hooked, LabelAddition{SubscriberID: rec.ID, Channel: rec.Channel,
		LabelIDs: addedLabels(rec.Labels, after.Labels), Revision: rec.revision + 1})
	if err != nil {
		return Subscriber{}, err
	}
	after.revision = rec.revision + 1
	sub, err := s.renderOne(ctx, bot, after)
	if err != nil {
		return Subscriber{}, err
	}
	if err := s.commit(ctx, &pl, with, sub, false); err != nil {
		return Subscriber{}, err
	}
	committed(ctx)
	s.recordChange(ctx, bot, &rec, after, after.revision, now)
	return sub, nil
}

// Update applies the changes to a subscriber if its revision is still expected.
func (s *Service) Update(ctx context.Context, bot, id string, expected int64, c Changes) (Subscriber, error) {
	return s.modify(ctx, bot, id, &expected, c, labelsPath, false)
}

// SetFields sets custom field values (keyed by field name or id; nil clears) at whatever
// revision the subscriber has: the conversation runtime's "set field" step.
func (s *Service) SetFields(ctx context.Context, bot, id string, values map[string]any) (Subscriber, error) {
	return s.modify(ctx, bot, id, nil, Changes{Fields: values}, labelsPath, false)
}

// AddLabel gives a subscriber a label. Adding a label it has already changes nothing.
func (s *Service) AddLabel(ctx context.Context, bot, id, label string) (Subscriber, error) {
	return s.addLabel(ctx, bot, id, label, false)
}

// addLabel is AddLabel; hooked (the route's) adds the LabelHook's writes when the label is
// new to the subscriber.
func (s *Service) addLabel(ctx context.Context, bot, id, label string, hooked bool) (Subscriber, error) {
	if !ids.Valid("lbl", label) {
		var p httpapi.Problems
		p.Add("label_id", "must be a label id such as lbl_...")
		if _, err := s.load(ctx, bot, id); err != nil {
			return Subscriber{}, err // a missing subscriber is the first thing to report
		}
		return Subscriber{}, p.Err()
	}
	return s.modify(ctx, bot, id, nil, Changes{AddLabels: []string{label}}, func(int) string { return "label_id" }, hooked)
}

// RemoveLabel takes a label from a subscriber. Removing a label it does not have changes
// nothing.
func (s *Service) RemoveLabel(ctx context.Context, bot, id, label string) (Subscriber, error) {
	if !ids.Valid("lbl", label) {
		return Subscriber{}, labelNotFound()
	}
	return s.modify(ctx, bot, id, nil, Changes{RemoveLabels: []string{label}}, labelsPath, false)
}

// modify is a read-modify-write of one subscriber: at revision expected when given, else at
// whatever revision it has (retrying when another writer is first). It returns the
// subscriber after the change; hooked is change's.
func (s *Service) modify(ctx context.Context, bot, id string, expected *int64, c Changes, labelPath func(int) string, hooked bool) (Subscriber, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Subscriber{}, err
	}
	var p httpapi.Problems
	values, err := s.prepare(ctx, bot, &c, &p, labelPath)
	if err != nil {
		return Subscriber{}, err
	}
	if err := p.Err(); err != nil {
		return Subscriber{}, err
	}
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return Subscriber{}, err
		}
		if expected != nil && rec.revision != *expected {
			return Subscriber{}, httpapi.StaleRevision(rec.revision)
		}
		sub, err := s.change(ctx, bot, rec, c, values, hooked, nil)
		if err == nil {
			return sub, nil
		}
		if !errors.Is(err, errRetry) {
			return Subscriber{}, err
		}
		if rec, err = s.load(ctx, bot, id); err != nil {
			return Subscriber{}, err
		}
	}
	return Subscriber{}, busy("subscriber " + id)
}

func labelsPath(i int) string { return fmt.Sprintf("labels[%d]", i) }

// prepare checks c and resolves its field values against the bot's fields (by id, in stored
// form), adding every problem to p. Labels to add must exist; the transaction checks again.
// When the values set or clear the field named email, c remembers its id (the email index).
func (s *Service) prepare(ctx context.Context, bot string, c *Changes, p *httpapi.Problems, labelPath func(int) string) (map[string]any, error) {
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
		if f, ok := cat.byName[EmailFieldName]; ok {
			if _, set := values[f.ID]; set {
				c.emailField = f.ID
			}
		}
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
