package subscribers

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// Audience returns a page of the bot's subscribers that have any of labels (every
// subscriber when labels is empty), each once, oldest first, and the cursor of the next page
// ("" after the last): the walk a campaign or a broadcast plans its recipients with, and
// counts its audience by.
//
// With labels, the labels' memberships (each sorted by subscriber id) are merged: every
// page reads up to limit memberships of each label after the cursor, the last subscriber
// id listed, and lists the ids up to the first point where a label's read stopped short of
// its end. A subscriber with two of the labels is so listed once, whatever is labelled or
// unlabelled while the walk goes on (a walk one label after another would skip one that
// gained an earlier label meanwhile, or list one twice). A page may be shorter than limit,
// even empty, with a next cursor: memberships whose subscriber is gone, or no longer has
// the label, are dropped. A label that does not exist, or is being removed, has no members.
//
// Cursors of the walk one label after another ("<label index>:<store cursor>"), which
// walks under way before this one may hold, are still read, and go on that way.
func (s *Service) Audience(ctx context.Context, bot string, labels []string, limit int, cursor string) ([]Subscriber, string, error) {
	if limit < 1 || limit >= store.MaxQueryLimit {
		return nil, "", fmt.Errorf("subscribers: audience page of %d", limit)
	}
	if len(labels) == 0 {
		inner, ok := strings.CutPrefix(cursor, "0:")
		if cursor != "" && !ok {
			return nil, "", fmt.Errorf("subscribers: audience cursor %q", cursor)
		}
		list, next, err := s.List(ctx, bot, Filter{}, limit, inner)
		if next != "" {
			next = "0:" + next
		}
		return list, next, err
	}
	if i, inner, ok := byLabelCursor(cursor, len(labels)); ok {
		return s.audienceByLabel(ctx, bot, labels, limit, i, inner)
	}
	after, ok := strings.CutPrefix(cursor, mergedCursor)
	if cursor != "" && (!ok || after == "") {
		return nil, "", fmt.Errorf("subscribers: audience cursor %q", cursor)
	}
	return s.audienceMerged(ctx, bot, labels, limit, after)
}

// mergedCursor prefixes the cursor of the merged walk: the last subscriber id listed.
const mergedCursor = "m:"

func (s *Service) audienceMerged(ctx context.Context, bot string, labels []string, limit int, after string) ([]Subscriber, string, error) {
	live, err := s.liveLabels(ctx, bot, labels)
	if err != nil {
		return nil, "", err
	}
	var candidates []string
	bound, more := "", false // when a label's read stopped short of its end: the least id any such read ended at
	for _, l := range live {
		// One more than limit: From is inclusive, and the cursor's own id, listed before,
		// may come first.
		page, err := s.store.Query(ctx, store.Query{PK: memberPartition(bot, l), From: after, Limit: limit + 1})
		if err != nil {
			return nil, "", err
		}
		items := page.Items
		if len(items) > 0 && items[0].SK == after {
			items = items[1:]
		}
		if page.Next != "" && len(items) > 0 {
			// The label goes on past its last id read: nothing beyond it can be listed yet.
			if last := items[len(items)-1].SK; !more || last < bound {
				bound = last
			}
			more = true
		}
		for _, it := range items {
			candidates = append(candidates, it.SK)
		}
	}
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)
	if more {
		candidates = candidates[:sortedCount(candidates, bound)]
	}
	next := ""
	if len(candidates) > limit {
		candidates, more = candidates[:limit], true
	}
	if more && len(candidates) > 0 {
		next = mergedCursor + candidates[len(candidates)-1]
	}
	found, err := s.loadAt(ctx, bot, candidates)
	if err != nil {
		return nil, "", err
	}
	var recs []record
	for _, r := range found {
		if r != nil && slices.ContainsFunc(live, func(l string) bool { return containsLabel(*r, l) }) {
			recs = append(recs, *r)
		}
	}
	out, err := s.render(ctx, bot, recs)
	return out, next, err
}

// sortedCount is how many of the sorted ids are at most bound.
func sortedCount(ids []string, bound string) int {
	n, _ := slices.BinarySearch(ids, bound+"\x00")
	return n
}

// liveLabels are those of labels that exist and are not being removed.
func (s *Service) liveLabels(ctx context.Context, bot string, labels []string) ([]string, error) {
	keys := make([]store.Key, len(labels))
	for i, l := range labels {
		keys[i] = labelKey(bot, l)
	}
	items, err := s.store.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	var live []string
	for i, it := range items {
		if it.PK != "" && !slices.Contains(live, labels[i]) {
			live = append(live, labels[i])
		}
	}
	return live, nil
}

// byLabelCursor reads a cursor of the walk one label after another: the label's index and
// the store cursor within its memberships.
func byLabelCursor(cursor string, labels int) (int, string, bool) {
	n, inner, ok := strings.Cut(cursor, ":")
	i, err := strconv.Atoi(n)
	if !ok || err != nil || i < 0 || i >= labels {
		return 0, "", false
	}
	return i, inner, true
}

// audienceByLabel goes on with a walk one label after another (a subscriber with two of the
// labels comes twice).
func (s *Service) audienceByLabel(ctx context.Context, bot string, labels []string, limit, i int, inner string) ([]Subscriber, string, error) {
	list, next, err := s.List(ctx, bot, Filter{Label: labels[i]}, limit, inner)
	if err != nil {
		return nil, "", err
	}
	switch {
	case next != "":
		return list, strconv.Itoa(i) + ":" + next, nil
	case i+1 < len(labels):
		return list, strconv.Itoa(i+1) + ":", nil
	}
	return list, "", nil
}
