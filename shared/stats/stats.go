// Package stats keeps a bot's activity counters, maintained on write by the families that
// cause the activity (a new subscriber, a message in or out, a reaction started) and read as
// time series without scanning the activity itself.
//
// Counters are items of the single table, one per bot, granularity, UTC time bucket, metric
// and channel. Each event adds to its hour bucket and its day bucket, in the same
// transaction as the write that caused it where the caller has one. Days are UTC days.
package stats

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// Metric is one kind of counted activity.
type Metric string

// The metrics.
const (
	NewSubscribers    Metric = "new_subscribers"
	ActiveSubscribers Metric = "active_subscribers"
	MessagesIn        Metric = "messages_in"
	MessagesOut       Metric = "messages_out"
	ReactionsStarted  Metric = "reactions_started"
)

// Metrics lists every metric in response order.
func Metrics() []Metric {
	return []Metric{NewSubscribers, ActiveSubscribers, MessagesIn, MessagesOut, ReactionsStarted}
}

// Granularity is the width of a time bucket.
type Granularity string

// The granularities.
const (
	Hour Granularity = "hour"
	Day  Granularity = "day"
)

// Retention of counters: hourly detail for recent activity, daily for long ranges.
const (
	HourRetention = 93 * 24 * time.Hour
	DayRetention  = 3 * 366 * 24 * time.Hour
)

// Range limits of one query, so a query never reads more than a few thousand counters.
const (
	MaxDayRange  = 366 * 24 * time.Hour
	MaxHourRange = 31 * 24 * time.Hour
)

func (g Granularity) width() time.Duration {
	if g == Hour {
		return time.Hour
	}
	return 24 * time.Hour
}

// Bucket returns the start of the UTC bucket holding t.
func (g Granularity) Bucket(t time.Time) time.Time { return t.UTC().Truncate(g.width()) }

func (g Granularity) retention() time.Duration {
	if g == Hour {
		return HourRetention
	}
	return DayRetention
}

func partition(bot string, g Granularity) string { return "STATS#" + bot + "#" + string(g) }

// bucketFormat sorts lexically in time order.
const bucketFormat = "2006-01-02T15"

func counterKey(bot string, g Granularity, bucket time.Time, m Metric, channel string) store.Key {
	return store.Key{PK: partition(bot, g), SK: bucket.Format(bucketFormat) + "#" + string(m) + "#" + channel}
}

// Increments returns the writes that add n to metric on channel at t, in the hour and the
// day bucket; add them to the transaction of the write that caused the activity, so the
// counters can never disagree with it.
func Increments(bot, channel string, m Metric, n int64, t time.Time) []store.Write {
	var out []store.Write
	for _, g := range []Granularity{Hour, Day} {
		b := g.Bucket(t)
		out = append(out, store.AddOp(counterKey(bot, g, b, m, channel), n, b.Add(g.width()+g.retention())))
	}
	return out
}

// Add counts n events of metric on channel at t outside any transaction.
func Add(ctx context.Context, st store.Store, bot, channel string, m Metric, n int64, t time.Time) error {
	return st.Transact(ctx, Increments(bot, channel, m, n, t))
}

// activePartition holds the markers of the subscribers counted active in bucket b.
func activePartition(bot string, g Granularity, b time.Time) string {
	return "ACTIVE#" + bot + "#" + string(g) + "#" + b.Format(bucketFormat)
}

// TouchActive counts subscriber as active on channel at t once per hour and once per day:
// a marker item per subscriber and bucket, written only if absent, makes a repeat a no-op.
func TouchActive(ctx context.Context, st store.Store, bot, channel, subscriber string, t time.Time) error {
	for _, g := range []Granularity{Hour, Day} {
		b := g.Bucket(t)
		marker := store.Key{PK: activePartition(bot, g, b), SK: subscriber}
		err := st.Transact(ctx, []store.Write{
			// A day past the bucket, so late events (a queue retry) still find the marker.
			store.PutOp(store.Item{Key: marker, Revision: 1, ExpiresAt: b.Add(g.width() + 24*time.Hour)}, store.MustNotExist),
			store.AddOp(counterKey(bot, g, b, ActiveSubscribers, channel), 1, b.Add(g.width()+g.retention())),
		})
		if err != nil && !isCondition(err) {
			return fmt.Errorf("stats: count active subscriber: %w", err)
		}
	}
	return nil
}

// ActiveWrites returns TouchActive's writes for the caller to commit in a transaction of its
// own (one commit instead of three): for each bucket of t in which subscriber is not counted
// yet, its marker, written only if absent, and the count. created says the subscriber was
// created just now, so that no marker can exist and none is read. If another writer counts
// the subscriber between the read and the commit, the transaction fails at a marker
// (ActiveConflict): the caller commits without these writes and calls TouchActive.
func ActiveWrites(ctx context.Context, st store.Store, bot, channel, subscriber string, t time.Time, created bool) ([]store.Write, error) {
	var out []store.Write
	for _, g := range []Granularity{Hour, Day} {
		b := g.Bucket(t)
		marker := store.Key{PK: activePartition(bot, g, b), SK: subscriber}
		if !created {
			_, err := st.Get(ctx, marker)
			if err == nil {
				continue // counted in this bucket already
			}
			if !errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("stats: count active subscriber: %w", err)
			}
		}
		out = append(out,
			store.PutOp(store.Item{Key: marker, Revision: 1, ExpiresAt: b.Add(g.width() + 24*time.Hour)}, store.MustNotExist),
			store.AddOp(counterKey(bot, g, b, ActiveSubscribers, channel), 1, b.Add(g.width()+g.retention())))
	}
	return out, nil
}

// ActiveConflict reports that err is the failure of a transaction at one of ActiveWrites'
// writes, placed in it from index first on (only their markers carry a condition): the
// subscriber was counted meanwhile.
func ActiveConflict(err error, first int, writes []store.Write) bool {
	var ce *store.ConditionError
	return errors.As(err, &ce) && ce.Index >= first && ce.Index < first+len(writes)
}

// isCondition reports that the marker existed: already counted in this bucket.
func isCondition(err error) bool {
	var ce *store.ConditionError
	return errors.As(err, &ce) && ce.Index == 0
}

// Counts holds one value per metric.
type Counts map[Metric]int64

// Point is one bucket of a series.
type Point struct {
	Start    time.Time         `json:"start"`
	Total    Counts            `json:"total"`
	Channels map[string]Counts `json:"channels"`
}

// Series is the answer to a query: every bucket of the range, empty ones included, so a
// client can chart it without filling gaps.
type Series struct {
	Granularity Granularity       `json:"granularity"`
	From        time.Time         `json:"from"`
	To          time.Time         `json:"to"`
	Timezone    string            `json:"timezone"`
	Points      []Point           `json:"points"`
	Total       Counts            `json:"total"`
	Channels    map[string]Counts `json:"channels"`
}

// ErrRange is returned for a range the query cannot answer.
type ErrRange struct{ Reason string }

func (e *ErrRange) Error() string { return "stats: " + e.Reason }

// CheckRange validates a query range: from before to, within the granularity's limit.
func CheckRange(g Granularity, from, to time.Time) error {
	switch {
	case g != Hour && g != Day:
		return &ErrRange{Reason: "granularity must be day or hour"}
	case from.IsZero() || to.IsZero():
		return &ErrRange{Reason: "from and to are both required"}
	case !from.Before(to):
		return &ErrRange{Reason: "from must be before to"}
	case g == Day && to.Sub(from) > MaxDayRange:
		return &ErrRange{Reason: "a day range spans at most 366 days"}
	case g == Hour && to.Sub(from) > MaxHourRange:
		return &ErrRange{Reason: "an hour range spans at most 31 days; use granularity=day for longer ranges"}
	}
	return nil
}

// Query returns the bot's counters over [from, to) in buckets of g. Buckets are aligned to
// UTC: the first is the one holding from.
func Query(ctx context.Context, st store.Store, bot string, g Granularity, from, to time.Time) (Series, error) {
	if err := CheckRange(g, from, to); err != nil {
		return Series{}, err
	}
	first, last := g.Bucket(from), g.Bucket(to.Add(-time.Nanosecond))
	s := Series{Granularity: g, From: from.UTC(), To: to.UTC(), Timezone: "UTC", Total: zero(), Channels: map[string]Counts{}}
	index := map[string]int{}
	for b := first; !b.After(last); b = b.Add(g.width()) {
		index[b.Format(bucketFormat)] = len(s.Points)
		s.Points = append(s.Points, Point{Start: b, Total: zero(), Channels: map[string]Counts{}})
	}
	q := store.Query{PK: partition(bot, g), From: first.Format(bucketFormat), To: last.Format(bucketFormat) + "#\uffff"}
	for {
		page, err := st.Query(ctx, q)
		if err != nil {
			return Series{}, err
		}
		for _, it := range page.Items {
			parts := strings.SplitN(it.SK, "#", 3)
			if len(parts) != 3 {
				continue
			}
			i, ok := index[parts[0]]
			if !ok {
				continue
			}
			m, ch := Metric(parts[1]), parts[2]
			p := &s.Points[i]
			if p.Channels[ch] == nil {
				p.Channels[ch] = zero()
			}
			if s.Channels[ch] == nil {
				s.Channels[ch] = zero()
			}
			p.Channels[ch][m] += it.Count
			p.Total[m] += it.Count
			s.Channels[ch][m] += it.Count
			s.Total[m] += it.Count
		}
		if page.Next == "" {
			break
		}
		q.Cursor = page.Next
	}
	return s, nil
}

func zero() Counts {
	c := Counts{}
	for _, m := range Metrics() {
		c[m] = 0
	}
	return c
}

// PurgeStep erases a deleted bot's counters and active-subscriber markers (job purge.Job).
// Markers have a partition per bucket; the live ones are those of the buckets whose marker
// has not expired yet (a day past the bucket), which now locates, plus the next bucket for
// an event stamped by a clock slightly ahead.
func PurgeStep(st store.Store, now func() time.Time) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		parts := []purge.Part{{PK: partition(p.BotID, Hour)}, {PK: partition(p.BotID, Day)}}
		t := now()
		for _, g := range []Granularity{Hour, Day} {
			for b := g.Bucket(t.Add(-g.width() - 24*time.Hour)); !b.After(g.Bucket(t).Add(g.width())); b = b.Add(g.width()) {
				parts = append(parts, purge.Part{PK: activePartition(p.BotID, g, b)})
			}
		}
		return parts, nil
	})
}
