package subscribers

import (
	"errors"
	"slices"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store"
)

// A subscriber's record and everything derived from it (identity, search entries, label
// memberships, activity counters) change in one transaction, so that the indexes can never
// disagree with the records they lead to. plan builds that transaction and remembers what
// each write guards, to explain a failed condition.

type guard int

const (
	guardNone guard = iota
	// guardRecord: the record's revision (or absence, on create); another writer was first.
	guardRecord
	// guardIdentity: the identity is free; another create of the same identity was first.
	guardIdentity
	// guardLabel and guardField: a label or field the change refers to still exists.
	guardLabel
	guardField
)

type plan struct {
	writes []store.Write
	guards []guard
	ids    []string // the label or field id of guardLabel and guardField writes
}

func (p *plan) add(w store.Write, g guard, id string) {
	p.writes = append(p.writes, w)
	p.guards = append(p.guards, g)
	p.ids = append(p.ids, id)
}

// errRetry means the record moved on between the read and the write: read it again.
var errRetry = errors.New("subscribers: record changed meanwhile")

// planChange returns the writes that take a subscriber from before (nil: a new subscriber)
// to after.
func planChange(bot string, before *record, after record, now time.Time) (plan, error) {
	var p plan
	rev, cond := int64(1), store.MustNotExist
	if before != nil {
		rev, cond = before.revision+1, store.RevisionIs(before.revision)
	}
	it, err := after.item(bot, rev)
	if err != nil {
		return p, err
	}
	p.add(store.PutOp(it, cond), guardRecord, "")
	var old record
	if before == nil {
		ref, err := nameItem(identityKey(bot, after.Channel, after.ExternalID), after.ID)
		if err != nil {
			return p, err
		}
		p.add(store.PutOp(ref, store.MustNotExist), guardIdentity, "")
		for _, w := range stats.Increments(bot, after.Channel, stats.NewSubscribers, 1, now) {
			p.add(w, guardNone, "")
		}
	} else {
		old = *before
	}

	oldWords, newWords := old.indexWords(), after.indexWords()
	for _, w := range oldWords {
		if !slices.Contains(newWords, w) {
			p.add(store.DeleteOp(nameWordKey(bot, w, after.ID), store.Always), guardNone, "")
		}
	}
	for _, w := range newWords {
		if !slices.Contains(oldWords, w) {
			p.add(store.PutOp(store.Item{Key: nameWordKey(bot, w, after.ID), Revision: 1}, store.Always), guardNone, "")
		}
	}

	for _, l := range after.Labels {
		if !slices.Contains(old.Labels, l) {
			// The label must still exist when the membership is written: a label deleted
			// meanwhile has its memberships removed by a job that may already have passed.
			p.add(store.CheckOp(labelKey(bot, l), store.MustExist), guardLabel, l)
			p.add(store.PutOp(store.Item{Key: memberKey(bot, l, after.ID), Revision: 1}, store.Always), guardNone, "")
		}
	}
	for _, l := range old.Labels {
		if !slices.Contains(after.Labels, l) {
			p.add(store.DeleteOp(memberKey(bot, l, after.ID), store.Always), guardNone, "")
		}
	}

	for id, v := range after.Values {
		if prev, ok := old.Values[id]; !ok || prev != v {
			// Likewise a field deleted meanwhile must not receive a value its erasure misses.
			p.add(store.CheckOp(fieldKey(bot, id), store.MustExist), guardField, id)
		}
	}
	return p, nil
}

// explain turns the transaction's outcome into the caller's answer.
func (p plan) explain(err error) error {
	i := failedAt(err)
	if i < 0 || i >= len(p.guards) {
		return err
	}
	switch p.guards[i] {
	case guardRecord, guardIdentity:
		return errRetry
	case guardLabel:
		var pr httpapi.Problems
		pr.Add("labels", "label %s was deleted meanwhile", p.ids[i])
		return pr.Err()
	case guardField:
		var pr httpapi.Problems
		pr.Add("fields", "field %s was deleted meanwhile", p.ids[i])
		return pr.Err()
	}
	return err
}
