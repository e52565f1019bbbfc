// Package storelog is the event log over the single table (store.Store): what the AWS
// deployment runs on DynamoDB, with per-day aggregate counters beside the events (keys.go).
// It passes the conformance suite on both stores.
package storelog

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/store"
)

// Log is an eventlog.Log over st.
type Log struct {
	st store.Store
}

var (
	_ eventlog.Log      = (*Log)(nil)
	_ eventlog.Reporter = (*Log)(nil)
)

// New returns the log over st.
func New(st store.Store) *Log { return &Log{st: st} }

// appendConcurrency bounds the transactions one Append runs at once: each event is its own
// (its id, the event and its counter), and a hundred in a row would take a hundred round
// trips.
const appendConcurrency = 8

// Append implements eventlog.Log.
func (l *Log) Append(ctx context.Context, events ...eventlog.Event) (int, error) {
	added, err := l.AppendNew(ctx, events...)
	return eventlog.Count(added), err
}

// AppendNew implements eventlog.Reporter. Each event is one transaction: its id item (MustNotExist:
// a stored id fails it, and the event is a duplicate), the event, and an increment of its
// day's counter, so a counter never counts an event that is not there, nor misses one.
func (l *Log) AppendNew(ctx context.Context, events ...eventlog.Event) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(events) > eventlog.MaxEventsPerAppend {
		return nil, fmt.Errorf("%w: %d events in one append, more than %d", eventlog.ErrInvalid, len(events), eventlog.MaxEventsPerAppend)
	}
	writes := make([][]store.Write, len(events))
	for i, e := range events {
		if err := eventlog.Validate(e); err != nil {
			return nil, err
		}
		w, err := eventWrites(e)
		if err != nil {
			return nil, err
		}
		writes[i] = w
	}
	// Duplicates within the batch: the first stands, the others would only fail their
	// condition, concurrently with it.
	seen := map[store.Key]bool{}
	added := make([]bool, len(events))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(appendConcurrency)
	for i, w := range writes {
		k := *w[0].Check
		if seen[k] {
			continue
		}
		seen[k] = true
		g.Go(func() error {
			err := l.st.Transact(gctx, writes[i][1:])
			if ce := (*store.ConditionError)(nil); errors.As(err, &ce) && ce.Index == 0 {
				return nil // stored already
			}
			if err != nil {
				return fmt.Errorf("storelog: append %s: %w", events[i].ID, err)
			}
			added[i] = true
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		// Those that were added stay (a retry skips them): report them.
		return added, err
	}
	return added, nil
}

// eventWrites are the transaction of e, after a Check of its id key (not part of it: the
// key the batch's duplicates are found by).
func eventWrites(e eventlog.Event) ([]store.Write, error) {
	e.At = e.At.UTC().Truncate(eventlog.Precision)
	data, err := store.Encode(e)
	if err != nil {
		return nil, err
	}
	s := shard(e.ID)
	day := e.At.Format(dayLayout)
	id := idKey(e.BotID, e.ID)
	item := store.Item{Key: store.Key{PK: eventPK(e.BotID, day, e.Name, s), SK: eventSK(e.At, e.ID)}, Data: data}
	if e.SubscriberID != "" {
		item.GSI1 = store.IndexKey{PK: subPK(e.BotID, e.SubscriberID), SK: item.SK}
	}
	return []store.Write{
		{Check: &id},
		store.PutOp(store.Item{Key: id}, store.MustNotExist),
		store.PutOp(item, store.Always),
		store.AddOp(aggKey(e.BotID, s, day, e.Name, e.Channel), 1, time.Time{}),
	}, nil
}

// counter is one aggregate item.
type counter struct {
	shard              int
	day, name, channel string
	count              int64
}

// counters reads the bot's counters of the days [first, last] in every shard, keeping the
// names wanted (every name when empty) and those that count something.
func (l *Log) counters(ctx context.Context, bot, first, last string, names []string) ([]counter, error) {
	var out []counter
	for s := range Shards {
		q := store.Query{PK: aggPK(bot, s), From: first, To: last + "$"}
		for {
			page, err := l.st.Query(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("storelog: counters: %w", err)
			}
			for _, it := range page.Items {
				day, name, channel, ok := parseAgg(it.SK)
				if !ok || it.Count <= 0 || len(names) > 0 && !slices.Contains(names, name) {
					continue
				}
				out = append(out, counter{shard: s, day: day, name: name, channel: channel, count: it.Count})
			}
			if page.Next == "" {
				break
			}
			q.Cursor = page.Next
		}
	}
	return out, nil
}

// dayRange is the first and last UTC day [from, to) touches.
func dayRange(from, to time.Time) (first, last string) {
	return from.UTC().Format(dayLayout), to.Add(-time.Millisecond).UTC().Format(dayLayout)
}

// Counts implements eventlog.Log: Shards queries of the counters, summed over the shards.
func (l *Log) Counts(ctx context.Context, q eventlog.Query) ([]eventlog.DayCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if !q.From.Before(q.To) {
		return nil, nil
	}
	first, last := dayRange(q.From, q.To)
	cs, err := l.counters(ctx, q.BotID, first, last, q.Names)
	if err != nil {
		return nil, err
	}
	type key struct{ day, name, channel string }
	sum := map[key]int64{}
	for _, c := range cs {
		sum[key{c.day, c.name, c.channel}] += c.count
	}
	out := make([]eventlog.DayCount, 0, len(sum))
	for k, n := range sum {
		out = append(out, eventlog.DayCount{Day: k.day, Name: k.name, Channel: k.channel, Count: n})
	}
	slices.SortFunc(out, func(a, b eventlog.DayCount) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Channel, b.Channel))
	})
	return out, nil
}

// Scan implements eventlog.Log. A subscriber's events are one range of GSI1; otherwise each
// day of the range is a merge of the ranges of its partitions that the counters say hold
// events of the names asked for.
func (l *Log) Scan(ctx context.Context, q eventlog.Query, fn func(eventlog.Event) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !q.From.Before(q.To) {
		return nil
	}
	lo, hi := rangeKeys(q.From.UnixMilli(), q.To.UnixMilli(), q.AfterID)
	skip := ""
	if q.AfterID != "" {
		skip = lo // the event the range starts at was returned before
	}
	if q.SubscriberID != "" {
		st := &stream{l: l, q: store.Query{Index: store.GSI1, PK: subPK(q.BotID, q.SubscriberID), From: lo, To: hi}}
		return l.merge(ctx, []*stream{st}, skip, q.Names, fn)
	}
	first, last := dayRange(q.From, q.To)
	cs, err := l.counters(ctx, q.BotID, first, last, q.Names)
	if err != nil {
		return err
	}
	// The partitions to read, by day.
	type part struct {
		day, name string
		shard     int
	}
	parts := map[part]bool{}
	for _, c := range cs {
		parts[part{c.day, c.name, c.shard}] = true
	}
	byDay := map[string][]*stream{}
	for p := range parts {
		byDay[p.day] = append(byDay[p.day], &stream{l: l, q: store.Query{PK: eventPK(q.BotID, p.day, p.name, p.shard), From: lo, To: hi}})
	}
	days := make([]string, 0, len(byDay))
	for d := range byDay {
		days = append(days, d)
	}
	slices.Sort(days)
	for _, d := range days {
		if err := l.merge(ctx, byDay[d], skip, nil, fn); err != nil {
			return err
		}
	}
	return nil
}

// merge calls fn with the events of streams in sort key order (time, then id), leaving out
// the item at skip and, when names is not empty, the events of other names.
func (l *Log) merge(ctx context.Context, streams []*stream, skip string, names []string, fn func(eventlog.Event) error) error {
	h := make(streamHeap, 0, len(streams))
	for _, s := range streams {
		ok, err := s.next(ctx)
		if err != nil {
			return err
		}
		if ok {
			h = append(h, s)
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		s := h[0]
		it := s.head()
		if it.SK != skip {
			e, err := store.Decode[eventlog.Event](it)
			if err != nil {
				return err
			}
			if len(names) == 0 || slices.Contains(names, e.Name) {
				if err := fn(e); err != nil {
					return err
				}
			}
		}
		ok, err := s.next(ctx)
		if err != nil {
			return err
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	return nil
}

// stream reads one range of items page by page.
type stream struct {
	l     *Log
	q     store.Query
	page  []store.Item
	i     int
	ended bool
}

// next moves to the next item, reading the next page when needed; false at the end.
func (s *stream) next(ctx context.Context) (bool, error) {
	s.i++
	for s.i >= len(s.page) {
		if s.ended {
			return false, nil
		}
		p, err := s.l.st.Query(ctx, s.q)
		if err != nil {
			return false, fmt.Errorf("storelog: scan: %w", err)
		}
		s.page, s.i = p.Items, 0
		s.q.Cursor, s.ended = p.Next, p.Next == ""
	}
	return true, nil
}

func (s *stream) head() store.Item { return s.page[s.i] }

// streamHeap orders streams by their current item's sort key.
type streamHeap []*stream

func (h streamHeap) Len() int           { return len(h) }
func (h streamHeap) Less(i, j int) bool { return h[i].head().SK < h[j].head().SK }
func (h streamHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)        { *h = append(*h, x.(*stream)) }
func (h *streamHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}
