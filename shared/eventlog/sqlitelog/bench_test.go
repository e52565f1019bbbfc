package sqlitelog

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/store/sqlite"
)

// benchEvents is how many events the scan benchmarks read over: the funnel
// benchmark is over 1,000,000 (go test -bench Scan -benchevents 1000000).
var benchEvents = flag.Int("benchevents", 200_000, "events in the benchmarks' log")

const benchBot = "bot_bench"

var benchDay = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// benchNames are the names of the generated events with their shares: the funnel's three
// steps and a fourth name the scans of the steps skip.
var benchNames = []struct {
	name  string
	share int
}{{"view", 50}, {"cart", 25}, {"buy", 10}, {"other", 15}}

var (
	benchOnce sync.Once
	benchLog  *Log
	benchErr  error
)

// loaded returns a log of *benchEvents events of one bot over 30 days from 20,000
// subscribers, built once per run.
func loaded(b *testing.B) *Log {
	benchOnce.Do(func() {
		dir, err := mkdirTemp()
		if err != nil {
			benchErr = err
			return
		}
		benchLog, benchErr = Open(filepath.Join(dir, "events.db"), WithDurability(sqlite.Normal))
		if benchErr != nil {
			return
		}
		rng := rand.New(rand.NewPCG(1, 2))
		batch := make([]eventlog.Event, 0, eventlog.MaxEventsPerAppend)
		span := int64(30 * 24 * time.Hour / time.Millisecond)
		for i := range *benchEvents {
			pick, name := rng.IntN(100), ""
			for _, n := range benchNames {
				if pick -= n.share; pick < 0 {
					name = n.name
					break
				}
			}
			batch = append(batch, eventlog.Event{ID: fmt.Sprintf("ev_%012d", i), BotID: benchBot,
				SubscriberID: fmt.Sprintf("sub_%08d", rng.IntN(20_000)), Name: name,
				At: benchDay.Add(time.Duration(rng.Int64N(span)) * time.Millisecond), Channel: "telegram", Source: eventlog.SourceRuntime})
			if len(batch) == cap(batch) {
				if _, benchErr = benchLog.Append(context.Background(), batch...); benchErr != nil {
					return
				}
				batch = batch[:0]
			}
		}
		if len(batch) > 0 {
			_, benchErr = benchLog.Append(context.Background(), batch...)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchLog
}

func funnelQuery() eventlog.Query {
	return eventlog.Query{BotID: benchBot, Names: []string{"view", "cart", "buy"}, From: benchDay, To: benchDay.AddDate(0, 0, 30)}
}

// BenchmarkScan reads the three steps' events through Scan, in order, and keeps each
// subscriber's first time per step: the part of a funnel report that reads the log.
func BenchmarkScan(b *testing.B) {
	l := loaded(b)
	b.ResetTimer()
	for b.Loop() {
		first := map[string][3]int64{}
		step := map[string]int{"view": 0, "cart": 1, "buy": 2}
		n := 0
		err := l.Scan(context.Background(), funnelQuery(), func(e eventlog.Event) error {
			n++
			f := first[e.SubscriberID]
			if i := step[e.Name]; f[i] == 0 {
				f[i] = e.At.UnixMilli()
				first[e.SubscriberID] = f
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(n), "events/op")
	}
}

// BenchmarkSQL is the same work as one hand-written query in SQLite over the same table:
// each subscriber's first time per step, grouped inside SQLite.
func BenchmarkSQL(b *testing.B) {
	l := loaded(b)
	bot, _, err := l.bot(context.Background(), benchBot)
	if err != nil {
		b.Fatal(err)
	}
	q := funnelQuery()
	b.ResetTimer()
	for b.Loop() {
		rows, err := l.read.QueryContext(context.Background(), `SELECT subscriber, name, MIN(at) FROM events
			WHERE bot = ?1 AND name IN ('view', 'cart', 'buy') AND at >= ?2 AND at < ?3 GROUP BY subscriber, name`,
			bot, q.From.UnixMilli(), q.To.UnixMilli())
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var sub, name string
			var at int64
			if err := rows.Scan(&sub, &name, &at); err != nil {
				b.Fatal(err)
			}
			n++
		}
		if err := rows.Err(); err != nil {
			b.Fatal(err)
		}
		rows.Close()
		b.ReportMetric(float64(n), "rows/op")
	}
}

// BenchmarkAppend appends batches of 100 new events to a log that grows as it runs, with
// the store's default durability (synchronous=FULL): what a busy bot's runtime pays.
func BenchmarkAppend(b *testing.B) {
	l := open(b)
	rng := rand.New(rand.NewPCG(3, 4))
	batch := make([]eventlog.Event, eventlog.MaxEventsPerAppend)
	i := 0
	for b.Loop() {
		for j := range batch {
			i++
			batch[j] = eventlog.Event{ID: fmt.Sprintf("ev_%012d", i), BotID: benchBot, SubscriberID: fmt.Sprintf("sub_%08d", rng.IntN(20_000)),
				Name: benchNames[rng.IntN(len(benchNames))].name, At: benchDay.Add(time.Duration(rng.Int64N(int64(30 * 24 * time.Hour)))),
				Channel: "telegram", Source: eventlog.SourceRuntime}
		}
		if _, err := l.Append(context.Background(), batch...); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(i), "µs/event")
}
