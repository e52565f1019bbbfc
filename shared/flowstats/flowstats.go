// Package flowstats keeps per-step counters of reaction runs (flow intelligence), maintained
// on write by the conversation runtime in the transaction of each step it records, and read
// per reaction version and day range without scanning the runs.
//
// A step visit is counted on the UTC day it was entered: entered, then completed (executed
// without error) or errors (the step failed the run); later, when the run goes on to another
// step or ends normally right after it, continued, plus one count in the histogram bucket of
// the time from entering the step to that moment. Every counter of a visit is on the day of
// the entry, so over any range of days continued never exceeds completed and
// completed - continued is the visits that went no further.
package flowstats

import (
	"context"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
)

// Mark is one step visit of a run: the step, of which reaction version, entered when.
type Mark struct {
	Bot, Reaction string
	Version       int64
	StepID        string
	At            time.Time
}

// Metric names one counter of a step visit.
type Metric string

// The metrics; the time histogram's buckets are metrics too ("t00".."t29", Buckets).
const (
	Entered   Metric = "entered"
	Completed Metric = "completed"
	Errors    Metric = "errors"
	Continued Metric = "continued"
)

// Retention is how long a day's counters are kept: longer than the longest range a query
// may span (MaxRange), so a year-long overlay always has its first day.
const Retention = 400 * 24 * time.Hour

// MaxRange is the longest range one query spans.
const MaxRange = 366 * 24 * time.Hour

// Day is the UTC day holding t.
func Day(t time.Time) time.Time { return t.UTC().Truncate(24 * time.Hour) }

const dayFormat = "2006-01-02"

// Storage layout: one partition per bot and UTC day, so that a day's counters (what a
// rebuild replaces) are one query, and a version's range is one query per day.
//
//	BOT#<bot>#FLOWSTATS#<yyyy-mm-dd>   <reaction>#<version, 10 digits>#<step>#<metric>   Count
func dayPK(bot string, day time.Time) string {
	return "BOT#" + bot + "#FLOWSTATS#" + day.Format(dayFormat)
}

func versionPrefix(reaction string, version int64) string {
	return reaction + "#" + fmt.Sprintf("%010d", version) + "#"
}

func counterKey(m Mark, metric Metric) store.Key {
	return store.Key{PK: dayPK(m.Bot, Day(m.At)), SK: versionPrefix(m.Reaction, m.Version) + m.StepID + "#" + string(metric)}
}

// expiry is when a counter of the day holding t may go.
func expiry(t time.Time) time.Time { return Day(t).Add(24*time.Hour + Retention) }

func add(m Mark, metric Metric) store.Write {
	return store.AddOp(counterKey(m, metric), 1, expiry(m.At))
}

// EntryWrites are the counter writes of one executed step (cur): entered, completed or
// errors; and when prev is not nil (the run's previous step) prev's continued and its time
// to cur.
func EntryWrites(cur Mark, failed bool, prev *Mark) []store.Write {
	out := []store.Write{add(cur, Entered)}
	if failed {
		out = append(out, add(cur, Errors))
	} else {
		out = append(out, add(cur, Completed))
	}
	if prev != nil {
		out = append(out, ContinueWrites(*prev, cur.At)...)
	}
	return Merge(out)
}

// EndWrites are the counter writes of a run that ended normally at `at` right after step
// last (an end step, the last step, a goto to another reaction): last's continued and its
// time to the end.
func EndWrites(last Mark, at time.Time) []store.Write { return ContinueWrites(last, at) }

// ContinueWrites count that the visit of step m went on at `at`: continued, and the time
// from m.At to at in its histogram bucket. (The runtime also uses it for the press that
// resumes a run waiting at a buttons step: the press is the buttons step's continuation.)
func ContinueWrites(m Mark, at time.Time) []store.Write {
	return []store.Write{add(m, Continued), add(m, BucketMetric(Bucket(at.Sub(m.At))))}
}

// Merge folds increments of the same counter into one write: a transaction may touch an
// item once (store.ValidateTransaction).
func Merge(writes []store.Write) []store.Write {
	out := make([]store.Write, 0, len(writes))
	at := map[store.Key]int{}
	for _, w := range writes {
		if w.Add != nil {
			if i, ok := at[w.Add.Key]; ok {
				inc := *out[i].Add
				inc.Delta += w.Add.Delta
				out[i].Add = &inc
				continue
			}
			at[w.Add.Key] = len(out)
		}
		out = append(out, w)
	}
	return out
}

// The time histogram: bucket 0 holds times under 10 ms; bucket i (1..28) holds
// [10 ms * 2^(i-1), 10 ms * 2^i); bucket 29 everything from 10 ms * 2^28 (about 31 days) on.
const (
	Buckets     = 30
	bucketUnit  = 10 // milliseconds
	lastBucket  = Buckets - 1
	metricTimes = "t"
)

// Bucket returns the histogram bucket of d (negative durations, from clocks that disagree,
// count as 0).
func Bucket(d time.Duration) int {
	ms := d.Milliseconds()
	if ms < bucketUnit {
		return 0
	}
	return min(bits.Len64(uint64(ms/bucketUnit)), lastBucket)
}

// BucketBounds returns bucket i's range in milliseconds, [low, high); high is +Inf for the
// last bucket.
func BucketBounds(i int) (low, high float64) {
	switch {
	case i <= 0:
		return 0, bucketUnit
	case i >= lastBucket:
		return bucketUnit * math.Ldexp(1, lastBucket-1), math.Inf(1)
	}
	return bucketUnit * math.Ldexp(1, i-1), bucketUnit * math.Ldexp(1, i)
}

// BucketMetric is the counter name of bucket i.
func BucketMetric(i int) Metric { return Metric(fmt.Sprintf("%s%02d", metricTimes, i)) }

// bucketOf parses a bucket metric.
func bucketOf(m Metric) (int, bool) {
	s, ok := strings.CutPrefix(string(m), metricTimes)
	if !ok || len(s) != 2 {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	if err != nil || i < 0 || i >= Buckets {
		return 0, false
	}
	return i, true
}

// Median is the estimate of a histogram's median.
type Median struct {
	// MS is the estimate in milliseconds: the geometric middle of the bucket holding the
	// median (low * sqrt 2), 5 for the first bucket, the bucket's low end for the last.
	MS float64
	// Low and High bound the true median: it lies in [Low, High). High is nil for the
	// open last bucket. Within buckets 1..28 the estimate is within a factor sqrt 2 (about
	// 41%) of the truth; within bucket 0, within 5 ms.
	Low  float64
	High *float64
}

// EstimateMedian returns the median of the times counted in hist (counts by bucket), the
// lower median for an even count: false when hist is empty.
func EstimateMedian(hist [Buckets]int64) (Median, bool) {
	var n int64
	for _, c := range hist {
		n += c
	}
	if n == 0 {
		return Median{}, false
	}
	rank := (n + 1) / 2
	for i, c := range hist {
		if rank > c {
			rank -= c
			continue
		}
		low, high := BucketBounds(i)
		m := Median{Low: low}
		switch {
		case i == 0:
			m.MS = bucketUnit / 2
		case i == lastBucket:
			m.MS = low
		default:
			m.MS = math.Round(low*math.Sqrt2*10) / 10
		}
		if !math.IsInf(high, 1) {
			m.High = &high
		}
		return m, true
	}
	return Median{}, false // unreachable: rank <= n
}

// Counts are one step's counters over a range.
type Counts struct {
	Entered, Completed, Errors, Continued int64
	Times                                 [Buckets]int64
}

func (c *Counts) add(m Metric, n int64) {
	switch m {
	case Entered:
		c.Entered += n
	case Completed:
		c.Completed += n
	case Errors:
		c.Errors += n
	case Continued:
		c.Continued += n
	default:
		if i, ok := bucketOf(m); ok {
			c.Times[i] += n
		}
	}
}

// Days lists the UTC days of [from, to): the day holding from up to the day holding the
// instant before to.
func Days(from, to time.Time) []time.Time {
	var out []time.Time
	for d := Day(from); d.Before(to); d = d.Add(24 * time.Hour) {
		out = append(out, d)
	}
	return out
}

// queryConcurrency bounds the day partitions one query reads at once.
const queryConcurrency = 8

// Query sums a reaction version's counters, by step id, over the days of [from, to)
// (at most MaxRange).
func Query(ctx context.Context, st store.Store, bot, reaction string, version int64, from, to time.Time) (map[string]*Counts, error) {
	if !from.Before(to) || to.Sub(from) > MaxRange {
		return nil, fmt.Errorf("flowstats: range %s..%s is empty or longer than %s", from, to, MaxRange)
	}
	days := Days(from, to)
	results := make([][]store.Item, len(days))
	errs := make([]error, len(days))
	sem := make(chan struct{}, queryConcurrency)
	var wg sync.WaitGroup
	for i, d := range days {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			results[i], errs[i] = queryAll(ctx, st, store.Query{PK: dayPK(bot, d), Prefix: versionPrefix(reaction, version)})
		}()
	}
	wg.Wait()
	out := map[string]*Counts{}
	prefix := versionPrefix(reaction, version)
	for i := range days {
		if errs[i] != nil {
			return nil, errs[i]
		}
		for _, it := range results[i] {
			step, metric, ok := splitSK(strings.TrimPrefix(it.SK, prefix))
			if !ok {
				continue
			}
			c := out[step]
			if c == nil {
				c = &Counts{}
				out[step] = c
			}
			c.add(metric, it.Count)
		}
	}
	return out, nil
}

// splitSK splits "<step>#<metric>" at its last '#' (a step id never holds one, a metric
// never does either).
func splitSK(s string) (string, Metric, bool) {
	i := strings.LastIndexByte(s, '#')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	return s[:i], Metric(s[i+1:]), true
}

func queryAll(ctx context.Context, st store.Store, q store.Query) ([]store.Item, error) {
	var out []store.Item
	for {
		page, err := st.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// Tally sums counter writes by counter: what a set of runs counted, for a rebuild.
type Tally map[store.Key]int64

// Add sums the increments of writes into t.
func (t Tally) Add(writes []store.Write) {
	for _, w := range writes {
		if w.Add != nil {
			t[w.Add.Key] += w.Add.Delta
		}
	}
}

// DayCounters reads every counter of the bot's day: the state a rebuild compares with.
func DayCounters(ctx context.Context, st store.Store, bot string, day time.Time) (Tally, error) {
	items, err := queryAll(ctx, st, store.Query{PK: dayPK(bot, Day(day))})
	if err != nil {
		return nil, err
	}
	out := Tally{}
	for _, it := range items {
		out[it.Key] = it.Count
	}
	return out, nil
}

// Partition is the partition of the bot's counters of day (every counter of that day).
func Partition(bot string, day time.Time) string { return dayPK(bot, Day(day)) }

// OnDay reports whether counter k is one of the bot's counters of day.
func OnDay(k store.Key, bot string, day time.Time) bool { return k.PK == dayPK(bot, Day(day)) }

// Corrections are the increments that bring the counters of have to want (both one day's
// counters): a counter absent from want goes to 0. Applied as increments, they keep
// whatever a live writer adds meanwhile.
func Corrections(have, want Tally, day time.Time) []store.Write {
	var out []store.Write
	exp := expiry(day)
	for k, n := range want {
		if d := n - have[k]; d != 0 {
			out = append(out, store.AddOp(k, d, exp))
		}
	}
	for k, n := range have {
		if _, ok := want[k]; !ok && n != 0 {
			out = append(out, store.AddOp(k, -n, exp))
		}
	}
	return out
}

// Equal reports whether two tallies hold the same non-zero counts.
func Equal(a, b Tally) bool {
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	for k, n := range b {
		if a[k] != n {
			return false
		}
	}
	return true
}

// PurgeParts are the partitions of a bot's counters a purge erases: the days of the
// retention window up to tomorrow (a clock slightly ahead).
func PurgeParts(bot string, now time.Time) []purge.Part {
	var parts []purge.Part
	end := Day(now).Add(24 * time.Hour)
	for d := Day(now.Add(-Retention - 24*time.Hour)); !d.After(end); d = d.Add(24 * time.Hour) {
		parts = append(parts, purge.Part{PK: dayPK(bot, d)})
	}
	return parts
}

// PurgeStep erases a deleted bot's counters (job purge.Job).
func PurgeStep(st store.Store, now func() time.Time) jobs.Step {
	return purge.Step(st, func(_ context.Context, p purge.Payload) ([]purge.Part, error) {
		return PurgeParts(p.BotID, now()), nil
	})
}
