package subscribers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Filter narrows a subscriber list. Zero members do not filter.
type Filter struct {
	// Label keeps subscribers with this label id.
	Label string
	// Channel keeps subscribers of this channel type.
	Channel string
	// ExternalID, with Channel, keeps the one subscriber of that identity.
	ExternalID string
	// Query keeps subscribers whose name words start with every word of it (see search.go).
	Query string
	// CreatedFrom (inclusive) and CreatedTo (exclusive) bound created_at.
	CreatedFrom, CreatedTo time.Time
}

// maxScan bounds the index entries one list request reads when some filters are checked on
// the subscribers found rather than by the index read: such a page may come back shorter
// than the limit (even empty) with a next_cursor, as with DynamoDB's own filters. It keeps
// every request's cost bounded whatever the data.
const maxScan = 500

// List returns one page of the bot's subscribers that pass the filter, and the store cursor
// of the next page ("" on the last). The order is oldest first, except with Query: then by
// the matching name word, then oldest first.
//
// One index leads each list, chosen by the filter: the label's memberships, else the
// search entries of Query, else the channel's index, else the subscribers themselves. The
// creation range is a sort-key range on every index but the search entries (ids sort by
// creation time); the other filters are checked on the subscribers read.
func (s *Service) List(ctx context.Context, bot string, f Filter, limit int, cursor string) ([]Subscriber, string, error) {
	var recs []record
	var next string
	var err error
	switch {
	case f.ExternalID != "":
		recs, err = s.listIdentity(ctx, bot, f)
	default:
		recs, next, err = s.listIndexed(ctx, bot, f, limit, cursor)
	}
	if err != nil {
		return nil, "", err
	}
	out, err := s.render(ctx, bot, recs)
	return out, next, err
}

func (s *Service) listIdentity(ctx context.Context, bot string, f Filter) ([]record, error) {
	rec, err := s.loadByIdentity(ctx, bot, f.Channel, f.ExternalID)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	srch, hasQ := parseSearch(f.Query)
	keep := (f.Label == "" || containsLabel(rec, f.Label)) && (!hasQ || srch.matches(rec)) && inRange(rec, f)
	if f.Label != "" && keep {
		// A label under removal is not one the subscriber has any more.
		if _, err := s.store.Get(ctx, labelKey(bot, f.Label)); errors.Is(err, store.ErrNotFound) {
			keep = false
		} else if err != nil {
			return nil, err
		}
	}
	if !keep {
		return nil, nil
	}
	return []record{rec}, nil
}

// source is the index a list reads and how its entries lead to subscribers.
type source struct {
	query store.Query
	// loads: the entries are not the records; their sort keys name the subscriber.
	loads bool
	// keep checks the filters the index did not apply; word is the entry's search word.
	keep func(r record, word string) bool
}

func (s *Service) listIndexed(ctx context.Context, bot string, f Filter, limit int, cursor string) ([]record, string, error) {
	srch, hasQ := parseSearch(f.Query)
	from, to := idRange(f)
	if from != "" && to != "" && from > to {
		return nil, "", nil // a range within one second holds no whole-second created_at
	}
	var src source
	switch {
	case f.Label != "":
		// A label that does not exist (or is being removed) has no members to show.
		if _, err := s.store.Get(ctx, labelKey(bot, f.Label)); errors.Is(err, store.ErrNotFound) {
			return nil, "", nil
		} else if err != nil {
			return nil, "", err
		}
		src = source{
			query: store.Query{PK: memberPartition(bot, f.Label), From: from, To: to},
			loads: true,
			keep: func(r record, _ string) bool {
				return containsLabel(r, f.Label) && (f.Channel == "" || r.Channel == f.Channel) && (!hasQ || srch.matches(r))
			},
		}
	case hasQ:
		src = source{
			query: store.Query{PK: namePartition(bot), Prefix: srch.drive},
			loads: true,
			keep: func(r record, word string) bool {
				return srch.canonical(r, word) && srch.matches(r) && (f.Channel == "" || r.Channel == f.Channel) && inRange(r, f)
			},
		}
	case f.Channel != "":
		src = source{query: store.Query{Index: store.GSI1, PK: botPrefix(bot) + "#CH#" + f.Channel, From: from, To: to}}
	default:
		src = source{query: store.Query{PK: botPrefix(bot), From: from, To: to}}
	}
	return s.scan(ctx, bot, src, limit, cursor)
}

// scan reads src's entries from cursor until it holds limit subscribers that pass, has read
// maxScan entries, or reaches the end; the cursor it returns continues right after the last
// entry read, so nothing is skipped or repeated between pages.
func (s *Service) scan(ctx context.Context, bot string, src source, limit int, cursor string) ([]record, string, error) {
	q := src.query
	q.Cursor = cursor
	var out []record
	scanned := 0
	for {
		q.Limit = limit - len(out)
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		recs, words, err := s.entries(ctx, bot, src, page.Items)
		if err != nil {
			return nil, "", err
		}
		for i, r := range recs {
			if src.keep == nil || src.keep(r, words[i]) {
				out = append(out, r)
			}
		}
		scanned += len(page.Items)
		if page.Next == "" {
			return out, "", nil
		}
		if len(out) >= limit || scanned >= maxScan {
			return out, page.Next, nil
		}
		q.Cursor = page.Next
	}
}

// entries turns index entries into records (and their search words). An entry whose
// subscriber was erased after the index was read is dropped.
func (s *Service) entries(ctx context.Context, bot string, src source, items []store.Item) ([]record, []string, error) {
	if !src.loads {
		recs := make([]record, len(items))
		for i, it := range items {
			r, err := decodeRecord(it)
			if err != nil {
				return nil, nil, err
			}
			recs[i] = r
		}
		return recs, make([]string, len(items)), nil
	}
	ids := make([]string, len(items))
	words := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.SK
		if cut := strings.LastIndexByte(it.SK, '#'); cut >= 0 {
			words[i], ids[i] = it.SK[:cut], it.SK[cut+1:]
		}
	}
	found, err := s.loadAt(ctx, bot, ids)
	if err != nil {
		return nil, nil, err
	}
	var recs []record
	var ws []string
	for i, r := range found {
		if r != nil {
			recs = append(recs, *r)
			ws = append(ws, words[i])
		}
	}
	return recs, ws, nil
}

func containsLabel(r record, label string) bool { return slices.Contains(r.Labels, label) }

func inRange(r record, f Filter) bool {
	return (f.CreatedFrom.IsZero() || !r.CreatedAt.Before(ceilSecond(f.CreatedFrom))) &&
		(f.CreatedTo.IsZero() || r.CreatedAt.Before(ceilSecond(f.CreatedTo)))
}

// ceilSecond rounds up to a whole second: created_at is kept in whole seconds, so
// created_at >= t exactly when created_at >= ceil(t).
func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// idRange turns the creation range into a range of subscriber ids, whose first 13
// characters after the prefix encode the creation time. A subscriber created at instant i
// shows created_at = floor(i), so created_at in [from, to) is i in [ceil(from), ceil(to)).
func idRange(f Filter) (from, to string) {
	const idTime = len("sub_") + 13
	if !f.CreatedFrom.IsZero() {
		from = ids.At("sub", ceilSecond(f.CreatedFrom))[:idTime] + strings.Repeat("0", 13)
	}
	if !f.CreatedTo.IsZero() {
		to = ids.At("sub", ceilSecond(f.CreatedTo).Add(-time.Nanosecond))[:idTime] + strings.Repeat("z", 13)
	}
	return from, to
}
