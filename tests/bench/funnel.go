package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, for the baseline's read-only query

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/sqlitelog"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/tests/apiclient"
)

// The funnel benchmark's data set: events of three step names and a fourth the funnel does
// not read, over 30 days, each subscriber's events within two days of their first (a visit
// that converts or not), on three channels.
var (
	funnelFrom   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	funnelTo     = funnelFrom.AddDate(0, 0, 30)
	funnelWindow = 24 * time.Hour
	funnelNames  = []struct {
		name  string
		share int
	}{{"visit", 40}, {"cart", 30}, {"purchase", 15}, {"other", 15}}
	funnelChannels = []string{"telegram", "web", "whatsapp"}
)

// eventsFile is the local process's event log beside its store, in its data directory.
const eventsFile = "events.db"

// funnelRuns is how often each side runs; the median is reported.
const funnelRuns = 5

// funnelBench measures a 3-step funnel report over n events of about subs subscribers on
// the local process, over HTTP, against a hand-written SQL query over the same table that
// computes the same counts, in the same run. The events are appended to the process's
// event log file directly (through sqlitelog, the code the process appends with) while the
// process is stopped: posting a million events through the events API would measure the
// API's ingestion, not the report.
//
// keep, when not empty, is a directory the data is kept in between runs: a run that finds
// the events of the same n and subs there reuses them (generating them takes minutes).
func funnelBench(n, subs int, keep string) error {
	if n < 1 || subs < 1 {
		return errors.New("-events and -subscribers must be at least 1")
	}
	dir := keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "botapi-funnel-bench-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin, err := buildLocal(dir)
	if err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	serve := func() (*exec.Cmd, string, error) {
		return startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data), `API listening on (http://\S+)`)
	}

	marker := filepath.Join(dir, "generated")
	want := fmt.Sprintf("%d events of %d subscribers\n", n, subs)
	if b, err := os.ReadFile(marker); err != nil || string(b) != want {
		os.RemoveAll(data)
		os.Remove(marker)
		// A first start creates the data directory, the demo bot and its token.
		api, _, err := serve()
		if err != nil {
			return err
		}
		stopProc(api)
	}
	var demo struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(data, "bootstrap.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &demo); err != nil {
		return err
	}
	path := filepath.Join(data, eventsFile)
	if b, _ := os.ReadFile(marker); string(b) == want {
		fmt.Printf("reusing the %s in %s\n", want[:len(want)-1], dir)
	} else {
		started := time.Now()
		if err := generateEvents(path, demo.BotID, n, subs); err != nil {
			return fmt.Errorf("generate events: %w", err)
		}
		fmt.Printf("appended %d events of %d subscribers in %.1f s\n", n, subs, time.Since(started).Seconds())
		if err := os.WriteFile(marker, []byte(want), 0o644); err != nil {
			return err
		}
	}

	api, base, err := serve()
	if err != nil {
		return err
	}
	defer stopProc(api)
	c := &apiclient.Client{HTTP: &http.Client{Timeout: 5 * time.Minute}, Base: base + "/api/bots/" + demo.BotID, Token: demo.Token}
	var f struct {
		ID string `json:"id"`
	}
	if err := c.Call("POST", "/funnels", map[string]any{"name": "Bench", "conversion_window": int64(funnelWindow / time.Second),
		"steps": []map[string]any{{"event": "visit"}, {"event": "cart"}, {"event": "purchase"}}}, &f); err != nil {
		return err
	}
	type stepStats struct {
		Subscribers int64 `json:"subscribers"`
	}
	var report struct {
		Steps []stepStats `json:"steps"`
	}
	body := map[string]any{"from": funnelFrom.Format(time.RFC3339), "to": funnelTo.Format(time.RFC3339)}
	if err := c.Call("POST", "/funnels/"+f.ID+"/report", body, &report); err != nil { // warm-up: caches, page cache
		return err
	}
	load := loadAverage()
	reportTimes := make([]time.Duration, funnelRuns)
	reportCPU := make([]time.Duration, funnelRuns)
	for i := range reportTimes {
		cpu, t := procCPU(api.Process.Pid), time.Now()
		if err := c.Call("POST", "/funnels/"+f.ID+"/report", body, &report); err != nil {
			return err
		}
		reportTimes[i], reportCPU[i] = time.Since(t), procCPU(api.Process.Pid)-cpu
	}

	counts, sqlTimes, sqlCPU, err := sqlFunnel(path, demo.BotID)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	got := make([]int64, len(report.Steps))
	for i, s := range report.Steps {
		got[i] = s.Subscribers
	}
	if !slices.Equal(got, counts[:]) {
		return fmt.Errorf("the report counts %v, the SQL query %v: they must agree", got, counts)
	}
	rep, base2 := median(reportTimes), median(sqlTimes)
	repCPU, baseCPU := median(reportCPU), median(sqlCPU)
	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, %d events (%d of the funnel's three names) of %d subscribers over 30 days, window 1 day; median of %d runs after a warm-up\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), n, stepEvents(n), subs, funnelRuns)
	fmt.Printf("load average before the runs (/proc/loadavg): %s\n\n", load)
	fmt.Println("| scenario | seconds | vs SQL | CPU seconds | CPU vs SQL |")
	fmt.Println("|---|---:|---:|---:|---:|")
	fmt.Printf("| hand-written SQL over the events table, read-only (baseline): counts per step | %.3f | 1.00 | %.2f | 1.00 |\n", base2.Seconds(), baseCPU.Seconds())
	fmt.Printf("| POST .../funnels/{id}/report over HTTP: counts, conversions, medians | %.3f | %.2f | %.2f | %.2f |\n",
		rep.Seconds(), rep.Seconds()/base2.Seconds(), repCPU.Seconds(), repCPU.Seconds()/baseCPU.Seconds())
	fmt.Println("\n(CPU: the local process's user and system time during the request, from /proc; the query's, this process's own.")
	fmt.Println("On a busy machine wall time stretches and CPU time much less.)")
	fmt.Printf("\nsubscribers per step: %v (both agree)\n", got)
	fmt.Printf("goal: within 2x of the SQL query and under 2 s: %s\n", verdict(rep, base2))
	return nil
}

func verdict(rep, base time.Duration) string {
	switch {
	case rep <= 2*base && rep < 2*time.Second:
		return "met"
	case rep < 2*time.Second:
		return "under 2 s met, within 2x NOT met"
	case rep <= 2*base:
		return "within 2x met, under 2 s NOT met"
	}
	return "NOT met"
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// stepEvents is about how many of n generated events have a step's name.
func stepEvents(n int) int { return n * (100 - funnelNames[3].share) / 100 }

// generateEvents appends n events of about subs subscribers of bot to the event log file at
// path, in batches of eventlog.MaxEventsPerAppend. Deterministic: the same arguments give the
// same events.
func generateEvents(path, bot string, n, subs int) error {
	log, err := sqlitelog.Open(path, sqlitelog.WithDurability(sqlite.Normal))
	if err != nil {
		return err
	}
	defer log.Close()
	rng := rand.New(rand.NewPCG(42, 7))
	span := int64(funnelTo.Sub(funnelFrom) / time.Millisecond)
	starts := make([]int64, subs)
	channels := make([]string, subs)
	for i := range starts {
		starts[i] = rng.Int64N(span)
		channels[i] = funnelChannels[rng.IntN(len(funnelChannels))]
	}
	visit := int64(48 * time.Hour / time.Millisecond)
	batch := make([]eventlog.Event, 0, eventlog.MaxEventsPerAppend)
	for i := range n {
		pick, name := rng.IntN(100), ""
		for _, nm := range funnelNames {
			if pick -= nm.share; pick < 0 {
				name = nm.name
				break
			}
		}
		s := rng.IntN(subs)
		at := min(starts[s]+rng.Int64N(visit), span-1)
		batch = append(batch, eventlog.Event{ID: fmt.Sprintf("ev_%09d", i), BotID: bot, SubscriberID: fmt.Sprintf("sub_%07d", s),
			Name: name, At: funnelFrom.Add(time.Duration(at) * time.Millisecond), Channel: channels[s], Source: eventlog.SourceCustom})
		if len(batch) == cap(batch) || i == n-1 {
			if _, err := log.Append(context.Background(), batch...); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

// funnelSQL is the same funnel as one query: the engine's rule (functions/funnels/engine.go,
// docs/funnels.md) in window functions. A cart event is a step when a visit came strictly
// before it (RANGE ... 1 PRECEDING: times are whole milliseconds) within the window, and
// its entry is the latest such visit; a purchase is a step when such a cart came strictly
// before it and the latest of those carts' entries is within the window. A subscriber's depth
// is the deepest step any of their events reached.
const funnelSQL = `
WITH ev AS (
	SELECT subscriber, name, at FROM events
	WHERE bot = (SELECT id FROM bots WHERE bot = :bot) AND subscriber <> ''
	  AND ((name = 'visit' AND at >= :from AND at < :to) OR (name IN ('cart', 'purchase') AND at >= :from AND at < :to + :window))
), visits AS (
	SELECT subscriber, name, at,
		MAX(CASE WHEN name = 'visit' THEN at END) OVER (PARTITION BY subscriber ORDER BY at RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS last_visit
	FROM ev
), carts AS (
	SELECT subscriber, name, at,
		CASE WHEN name = 'cart' AND at - last_visit <= :window THEN last_visit END AS cart_entry
	FROM visits
), purchases AS (
	SELECT subscriber, name, at, cart_entry,
		MAX(cart_entry) OVER (PARTITION BY subscriber ORDER BY at RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS last_cart_entry
	FROM carts
), depths AS (
	SELECT MAX(CASE
		WHEN name = 'purchase' AND at - last_cart_entry <= :window THEN 3
		WHEN cart_entry IS NOT NULL THEN 2
		WHEN name = 'visit' THEN 1 END) AS depth
	FROM purchases GROUP BY subscriber
)
SELECT COUNT(*) FILTER (WHERE depth >= 1), COUNT(*) FILTER (WHERE depth >= 2), COUNT(*) FILTER (WHERE depth >= 3) FROM depths`

// sqlFunnel runs funnelSQL on the event log file opened read-only, once to warm up and then
// funnelRuns times.
func sqlFunnel(path, bot string) ([3]int64, []time.Duration, []time.Duration, error) {
	var counts [3]int64
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=query_only(1)")
	if err != nil {
		return counts, nil, nil, err
	}
	defer db.Close()
	args := []any{sql.Named("bot", bot), sql.Named("from", funnelFrom.UnixMilli()), sql.Named("to", funnelTo.UnixMilli()),
		sql.Named("window", funnelWindow.Milliseconds())}
	run := func() error {
		return db.QueryRow(funnelSQL, args...).Scan(&counts[0], &counts[1], &counts[2])
	}
	if err := run(); err != nil {
		return counts, nil, nil, err
	}
	times := make([]time.Duration, funnelRuns)
	cpus := make([]time.Duration, funnelRuns)
	for i := range times {
		cpu, t := procCPU(os.Getpid()), time.Now()
		if err := run(); err != nil {
			return counts, nil, nil, err
		}
		times[i], cpus[i] = time.Since(t), procCPU(os.Getpid())-cpu
	}
	return counts, times, cpus, nil
}

// loadAverage is the first line of /proc/loadavg ("" where it cannot be read).
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
