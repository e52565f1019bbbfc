package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver, for the bare insert loop

	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/tests/apiclient"
	faketg "github.com/botplatform/api/tests/fakes/telegram"
)

// planChunk is the plan's rows per transaction (functions/broadcasts/fanout.go's planChunk):
// the baselines commit as often as the plan.
const planChunk = 80

// broadcastBench measures the broadcasts' fan-out on the local process, over HTTP, with a
// Telegram channel connected to the fake Bot API (tests/fakes/telegram) in this process:
//
//  1. Planning: a broadcast to planN Telegram subscribers, from the schedule request until
//     the report counts planN recipient rows; against, in the same run and the same SQLite
//     file (the process stopped), a bare insert loop writing the very rows the plan wrote,
//     in the order it wrote them (database/sql, planChunk rows a transaction); the same loop
//     in the rows' key order; and the plan's writes through the store
//     (sqlite.Store.Transact: each row MustNotExist and the counter).
//  2. Sending: a broadcast to sendN subscribers with BROADCAST_RATE_TELEGRAM=rate while the
//     fake enforces rate messages a sliding second (429 with retry_after 1 beyond it), the
//     achieved rate from the fake's first to its last accepted message; then the same
//     broadcast again with the fake not enforcing (the pacing alone).
//
// Subscribers are written straight into the process's store (through the subscribers
// service, the process stopped): creating 100,000 over HTTP would measure the API.
func broadcastBench(planN, sendN, rate int) error {
	if planN < 1 || sendN < 2 || rate < 1 {
		return errors.New("-plan-recipients must be at least 1, -send-recipients at least 2, -rate at least 1")
	}
	dir, err := os.MkdirTemp("", "botapi-broadcast-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildLocal(dir)
	if err != nil {
		return err
	}
	tg, closeTG := faketg.Listen()
	defer closeTG()

	pl, err := planRun(bin, filepath.Join(dir, "plan"), tg, planN)
	if err != nil {
		return fmt.Errorf("planning: %w", err)
	}
	sends, err := sendRuns(bin, filepath.Join(dir, "send"), tg, sendN, rate)
	if err != nil {
		return fmt.Errorf("sending: %w", err)
	}

	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, --durability full (the default); load average at the end: %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), loadAverage())
	fmt.Printf("\nPlanning %d recipients (subscribers seeded in %.1f s):\n\n", planN, pl.seeded.Seconds())
	fmt.Println("| scenario | rows | seconds | rows/s | vs bare |")
	fmt.Println("|---|---:|---:|---:|---:|")
	base := pl.bare[0]
	for _, b := range pl.bare {
		fmt.Printf("| %s | %d | %.2f | %.0f | %.2f |\n", b.name, planN, b.took.Seconds(), b.rate(planN), b.rate(planN)/base.rate(planN))
	}
	r := float64(planN) / pl.total.Seconds()
	fmt.Printf("| broadcast plan over HTTP: schedule request → the report counts %d rows | %d | %.2f | %.0f | %.2f |\n",
		planN, planN, pl.total.Seconds(), r, r/base.rate(planN))
	r = float64(planN) / pl.span.Seconds()
	fmt.Printf("| of which the plan itself (first row planned → all planned) | %d | %.2f | %.0f | %.2f |\n",
		planN, pl.span.Seconds(), r, r/base.rate(planN))
	fmt.Printf("\nThe schedule request took %.2f s (its preflight walks the audience); the first row was planned %.2f s after it answered.\n",
		pl.schedule.Seconds(), pl.firstRow.Sub(pl.scheduled).Seconds())
	if pl.cpu > 0 {
		fmt.Printf("The local process used %.1f s of CPU from the schedule request to the last row (%.0f %% of one core).\n",
			pl.cpu.Seconds(), 100*pl.cpu.Seconds()/pl.total.Seconds())
	}

	fmt.Printf("\nSending to %d recipients at BROADCAST_RATE_TELEGRAM=%d:\n\n", sendN, rate)
	fmt.Println("| the fake Bot API | messages | send phase s | messages/s | vs limit | 429s | busiest second | longest gap | schedule → first | CPU |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, s := range sends {
		fmt.Printf("| %s | %d | %.2f | %.1f | %.3f | %d | %d | %d ms | %.2f s | %.0f %% |\n", s.name, sendN, s.phase.Seconds(), s.rate,
			s.rate/float64(rate), s.refused, s.busiest, s.gap.Milliseconds(), s.toFirst.Seconds(), 100*s.cpu.Seconds()/s.wall.Seconds())
	}
	for _, s := range sends {
		var b strings.Builder
		for i, p := range s.pauses {
			if i == 12 {
				fmt.Fprintf(&b, " … (%d in all)", len(s.pauses))
				break
			}
			fmt.Fprintf(&b, " +%.1fs %dms", p[0].Seconds(), p[1].Milliseconds())
		}
		fmt.Printf("\npauses over %s, %s:%s\n", pauseOver, s.name, b.String())
	}
	fmt.Println("\n(messages/s: (n−1) over first → last message accepted, on the fake's clock; busiest second: the most messages")
	fmt.Println("the fake accepted within any sliding second; CPU: the local process's, schedule → completed, of one core.)")
	verdict := "met"
	if d := sends[0].rate/float64(rate) - 1; d < -0.05 || d > 0.05 {
		verdict = "NOT met"
	}
	fmt.Printf("goal: the achieved rate within 5 %% of %d/s against the limit-enforcing fake: %s\n", rate, verdict)
	return nil
}

// benchProc is a local process on a data directory with n Telegram subscribers and its demo
// bot's Telegram channel connected to the fake.
type benchProc struct {
	cmd  *exec.Cmd
	c    *apiclient.Client
	data string
	bot  string
	tgID int64 // the fake's id of the Telegram bot
}

// prepare creates the data directory (a first start writes the demo bot and its token),
// seeds n subscribers, connects a fresh Telegram bot of the fake, and starts the process
// with env; it returns how long seeding took.
func prepare(bin, data string, tg *faketg.Server, n int, env []string) (*benchProc, time.Duration, error) {
	api, _, err := startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data), `API listening on (http://\S+)`)
	if err != nil {
		return nil, 0, err
	}
	stopProc(api)
	var demo struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(data, "bootstrap.json"))
	if err != nil {
		return nil, 0, err
	}
	if err := json.Unmarshal(b, &demo); err != nil {
		return nil, 0, err
	}
	t := time.Now()
	if err := seedSubscribers(filepath.Join(data, "store.db"), demo.BotID, n); err != nil {
		return nil, 0, fmt.Errorf("seed subscribers: %w", err)
	}
	seeded := time.Since(t)
	bot := tg.AddBot(fmt.Sprintf("bench%d_bot", n))
	out, err := exec.Command(bin, "admin", "channel", "connect", "--data", data, "--bot", demo.BotID, "--type", "telegram",
		"--token", bot.Token, "--base-url", tg.URL).CombinedOutput()
	if err != nil {
		return nil, 0, fmt.Errorf("connect the Telegram channel: %w: %s", err, out)
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data, "--telegram-base-url", tg.URL)
	cmd.Env = append(os.Environ(), env...)
	api, base, err := startProc(cmd, `API listening on (http://\S+)`)
	if err != nil {
		return nil, 0, err
	}
	return &benchProc{cmd: api, data: data, bot: demo.BotID, tgID: bot.ID,
		c: &apiclient.Client{HTTP: &http.Client{Timeout: 5 * time.Minute}, Base: base + "/api/bots/" + demo.BotID, Token: demo.Token}}, seeded, nil
}

// seedSubscribers creates n Telegram subscribers (chat ids 1000000 up, each with a first
// name) through the subscribers service on the store file, 4 at a time: what the API's
// import would write, without the HTTP around it. Normal durability: setup, not measured.
func seedSubscribers(path, bot string, n int) error {
	st, err := sqlite.Open(path, sqlite.WithDurability(sqlite.Normal))
	if err != nil {
		return err
	}
	defer st.Close()
	svc := subscribers.NewService(st, time.Now, nil)
	names := []string{"Anna", "Boris", "Chen", "Dana", "Emil", "Fatima", "Georg", "Hana", "Ivan", "Julia"}
	var next atomic.Int64
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for w := range errs {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				name := names[i%len(names)]
				if _, _, err := svc.Upsert(context.Background(), bot, "telegram", strconv.Itoa(1_000_000+i), subscribers.Changes{FirstName: &name}); err != nil {
					errs[w] = err
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// newBroadcast publishes a one-line message with a merge field and creates a Telegram
// broadcast of it to every subscriber; it returns the broadcast's path under the bot.
func (p *benchProc) newBroadcast(name string) (string, error) {
	var doc struct {
		ID string `json:"id"`
	}
	if err := p.c.Call("POST", "/content", map[string]any{"type": "message", "name": name,
		"draft": map[string]any{"text": "Spring sale, {{ subscriber.first_name }}: 20 % off everything this week."}}, &doc); err != nil {
		return "", err
	}
	if err := p.c.Call("POST", "/content/"+doc.ID+"/publish", map[string]any{"expected_revision": 1}, nil); err != nil {
		return "", err
	}
	var bc struct {
		ID string `json:"id"`
	}
	if err := p.c.Call("POST", "/broadcasts", map[string]any{"name": name, "channels": []string{"telegram"},
		"content": map[string]any{"document_id": doc.ID}}, &bc); err != nil {
		return "", err
	}
	return "/broadcasts/" + bc.ID, nil
}

// schedule launches the broadcast now.
func (p *benchProc) schedule(path string) error {
	return p.c.Call("POST", path+"/schedule", map[string]any{"expected_revision": 1, "confirm": true}, nil)
}

type bcReport struct {
	Status   string `json:"status"`
	Channels []struct {
		Planned int64 `json:"planned"`
		Sent    int64 `json:"sent"`
		Pending int64 `json:"pending"`
	} `json:"channels"`
}

// bareRun is one baseline's time.
type bareRun struct {
	name string
	took time.Duration
}

func (b bareRun) rate(n int) float64 { return float64(n) / b.took.Seconds() }

// planResult is what the planning run measured.
type planResult struct {
	seeded, schedule, total, span time.Duration
	scheduled, firstRow           time.Time
	cpu                           time.Duration
	bare                          []bareRun
}

// planRun times the plan of a broadcast to n subscribers, then the baselines on the same
// store file once the process has stopped.
func planRun(bin, data string, tg *faketg.Server, n int) (planResult, error) {
	var res planResult
	p, seeded, err := prepare(bin, data, tg, n, nil)
	if err != nil {
		return res, err
	}
	res.seeded = seeded
	stopped := false
	defer func() {
		if !stopped {
			stopProc(p.cmd)
		}
	}()
	path, err := p.newBroadcast("Bench plan")
	if err != nil {
		return res, err
	}
	cpu0 := procCPU(p.cmd.Process.Pid)
	start := time.Now()
	if err := p.schedule(path); err != nil {
		return res, err
	}
	res.scheduled = time.Now()
	res.schedule = res.scheduled.Sub(start)
	var rep bcReport
	for deadline := start.Add(10 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if err := p.c.Call("GET", path+"/report", nil, &rep); err != nil {
			return res, err
		}
		if len(rep.Channels) == 1 && rep.Channels[0].Planned >= int64(n) {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the report counts %+v rows of %d after 10 minutes", rep.Channels, n)
		}
	}
	res.total = time.Since(start)
	if cpu0 > 0 {
		res.cpu = procCPU(p.cmd.Process.Pid) - cpu0
	}
	if rep.Channels[0].Planned != int64(n) {
		return res, fmt.Errorf("the report counts %d rows for %d subscribers", rep.Channels[0].Planned, n)
	}
	stopProc(p.cmd)
	stopped = true

	bcID := strings.TrimPrefix(path, "/broadcasts/")
	rows, err := readRows(filepath.Join(data, "store.db"), p.bot, bcID)
	if err != nil {
		return res, err
	}
	if len(rows) != n {
		return res, fmt.Errorf("the store holds %d rows for %d subscribers", len(rows), n)
	}
	first, last := rows[0].plannedAt, rows[0].plannedAt
	for _, r := range rows {
		first, last = minTime(first, r.plannedAt), maxTime(last, r.plannedAt)
	}
	res.firstRow = first
	// The span ends when the report saw the last row (planned_at is stamped before a page's
	// writes, at whole milliseconds).
	res.span = res.total - first.Sub(start)
	if res.span <= 0 {
		res.span = last.Sub(first)
	}

	// The plan wrote the rows in the audience's order (subscriber ids, oldest first), which is
	// not their keys' order: recipient ids are hashes of the subscriber ids.
	planned := slices.Clone(rows)
	slices.SortStableFunc(planned, func(a, b storedRow) int { return strings.Compare(a.subscriber, b.subscriber) })
	storePath := filepath.Join(data, "store.db")
	for _, b := range []struct {
		name string
		run  func() (time.Duration, error)
	}{
		{fmt.Sprintf("bare insert loop, database/sql: the same rows in the same order, %d a transaction (baseline)", planChunk),
			func() (time.Duration, error) { return bareInserts(storePath, planned, "BENCH#bare", planChunk) }},
		{fmt.Sprintf("bare insert loop, database/sql: the same rows in their keys' order, %d a transaction", planChunk),
			func() (time.Duration, error) { return bareInserts(storePath, rows, "BENCH#sorted", planChunk) }},
		{fmt.Sprintf("the plan's writes through the store (sqlite.Store.Transact: rows MustNotExist + the counter), same order, %d a transaction", planChunk),
			func() (time.Duration, error) { return storeInserts(storePath, planned, "BENCH#store", planChunk) }},
	} {
		took, err := b.run()
		if err != nil {
			return res, fmt.Errorf("%s: %w", b.name, err)
		}
		res.bare = append(res.bare, bareRun{name: b.name, took: took})
	}
	return res, nil
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// storedRow is a recipient row as the plan stored it.
type storedRow struct {
	sk, gsi1sk, subscriber string
	data                   []byte
	plannedAt              time.Time
}

// dataPK is the partition of a broadcast's send (functions/broadcasts/keys.go).
func dataPK(bot, id string) string { return "BOT#" + bot + "#BCAST#" + id }

// readRows reads a broadcast's recipient rows from the store file, read-only.
func readRows(path, bot, id string) ([]storedRow, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=query_only(1)")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	q, err := db.Query(`SELECT sk, gsi1sk, data FROM items WHERE pk = ? AND sk >= 'RCP#' AND sk < 'RCP$' ORDER BY sk`, dataPK(bot, id))
	if err != nil {
		return nil, err
	}
	defer q.Close()
	var out []storedRow
	for q.Next() {
		var r storedRow
		var gsi sql.NullString
		if err := q.Scan(&r.sk, &gsi, &r.data); err != nil {
			return nil, err
		}
		r.gsi1sk = gsi.String
		var d struct {
			SubscriberID string    `json:"subscriber_id"`
			PlannedAt    time.Time `json:"planned_at"`
		}
		if err := json.Unmarshal(r.data, &d); err != nil {
			return nil, err
		}
		r.subscriber, r.plannedAt = d.SubscriberID, d.PlannedAt
		out = append(out, r)
	}
	return out, q.Err()
}

// bareInserts writes rows under partition pk with plain INSERTs, perTx a transaction, on a
// connection with the store's settings (WAL, synchronous FULL): the simplest loop that
// writes what the plan writes, with its index entries.
func bareInserts(path string, rows []storedRow, pk string, perTx int) (time.Duration, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	ctx := context.Background()
	start := time.Now()
	for len(rows) > 0 {
		chunk := rows[:min(perTx, len(rows))]
		rows = rows[len(chunk):]
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return 0, err
		}
		ins, err := tx.PrepareContext(ctx, `INSERT INTO items (pk, sk, revision, data, gsi1pk, gsi1sk) VALUES (?, ?, 1, ?, ?, ?)`)
		if err != nil {
			tx.Rollback()
			return 0, err
		}
		for _, r := range chunk {
			if _, err := ins.ExecContext(ctx, pk, r.sk, r.data, pk+"#S#planned#telegram", r.gsi1sk); err != nil {
				tx.Rollback()
				return 0, err
			}
		}
		ins.Close()
		if err := tx.Commit(); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// storeInserts writes rows under partition pk through the store, as the plan does: each row
// MustNotExist, and the planned counter added once a transaction.
func storeInserts(path string, rows []storedRow, pk string, perTx int) (time.Duration, error) {
	st, err := sqlite.Open(path) // Full durability, as the process
	if err != nil {
		return 0, err
	}
	defer st.Close()
	ctx := context.Background()
	start := time.Now()
	for len(rows) > 0 {
		chunk := rows[:min(perTx, len(rows))]
		rows = rows[len(chunk):]
		writes := make([]store.Write, 0, len(chunk)+1)
		for _, r := range chunk {
			writes = append(writes, store.PutOp(store.Item{Key: store.Key{PK: pk, SK: r.sk},
				GSI1: store.IndexKey{PK: pk + "#S#planned#telegram", SK: r.gsi1sk}, Revision: 1, Data: r.data}, store.MustNotExist))
		}
		writes = append(writes, store.AddOp(store.Key{PK: pk, SK: "N#telegram#state#planned"}, int64(len(chunk)), time.Time{}))
		if err := st.Transact(ctx, writes); err != nil {
			return 0, err
		}
	}
	return time.Since(start), nil
}

// sendResult is one send run's figures.
type sendResult struct {
	name             string
	phase            time.Duration
	rate             float64
	refused, busiest int
	gap, toFirst     time.Duration
	// cpu is the process's CPU time from the schedule request to completed (wall).
	cpu, wall time.Duration
	// pauses are the gaps between two messages longer than pauseOver, in order: when (from
	// the first message) and how long.
	pauses [][2]time.Duration
}

// pauseOver is the shortest gap between two messages the bench lists: a quarter of a
// second, far longer than the slot of any rate it is run with.
const pauseOver = 250 * time.Millisecond

// sendRuns sends a broadcast to n subscribers at rate, first with the fake enforcing rate,
// then with the fake not enforcing.
func sendRuns(bin, data string, tg *faketg.Server, n, rate int) ([]sendResult, error) {
	p, _, err := prepare(bin, data, tg, n, []string{"BROADCAST_RATE_TELEGRAM=" + strconv.Itoa(rate)})
	if err != nil {
		return nil, err
	}
	defer stopProc(p.cmd)
	var out []sendResult
	for _, limit := range []bool{true, false} {
		name := fmt.Sprintf("enforcing %d a sliding second (429, retry_after 1)", rate)
		tg.Limit(rate)
		if !limit {
			name = "not enforcing (the platform's pacing alone)"
			tg.Limit(0)
		}
		r, err := sendOnce(p, tg, n, name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out = append(out, r)
	}
	tg.Limit(0)
	return out, nil
}

// sendOnce runs one broadcast to every subscriber until it is completed, checks that each
// chat received it once and the report says so, and measures the send phase from the fake's
// records.
func sendOnce(p *benchProc, tg *faketg.Server, n int, name string) (sendResult, error) {
	res := sendResult{name: name}
	path, err := p.newBroadcast("Bench send")
	if err != nil {
		return res, err
	}
	before := len(tg.AllSent())
	callsBefore := len(tg.Calls())
	cpu0 := procCPU(p.cmd.Process.Pid)
	start := time.Now()
	if err := p.schedule(path); err != nil {
		return res, err
	}
	var bc struct {
		Status string `json:"status"`
	}
	for deadline := start.Add(10 * time.Minute); ; time.Sleep(250 * time.Millisecond) {
		if err := p.c.Call("GET", path, nil, &bc); err != nil {
			return res, err
		}
		if bc.Status == "completed" {
			break
		}
		if bc.Status != "scheduled" && bc.Status != "running" {
			return res, fmt.Errorf("the broadcast is %s", bc.Status)
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the broadcast is still %s after 10 minutes (%d messages)", bc.Status, len(tg.AllSent())-before)
		}
	}
	res.cpu = procCPU(p.cmd.Process.Pid) - cpu0
	res.wall = time.Since(start)
	var msgs []faketg.Message
	for _, m := range tg.AllSent()[before:] {
		if m.BotID == p.tgID {
			msgs = append(msgs, m)
		}
	}
	if len(msgs) != n {
		return res, fmt.Errorf("the fake accepted %d messages for %d recipients", len(msgs), n)
	}
	chats := map[int64]bool{}
	for _, m := range msgs {
		if chats[m.ChatID] {
			return res, fmt.Errorf("chat %d received the broadcast twice", m.ChatID)
		}
		chats[m.ChatID] = true
	}
	var rep bcReport
	if err := p.c.Call("GET", path+"/report", nil, &rep); err != nil {
		return res, err
	}
	if len(rep.Channels) != 1 || rep.Channels[0].Sent != int64(n) {
		return res, fmt.Errorf("the report says %+v for %d recipients", rep.Channels, n)
	}
	for _, c := range tg.Calls()[callsBefore:] {
		if c.BotID == p.tgID && c.Status == http.StatusTooManyRequests {
			res.refused++
		}
	}
	at := make([]time.Time, len(msgs))
	for i, m := range msgs {
		at[i] = m.At
	}
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	res.phase = at[n-1].Sub(at[0])
	res.rate = float64(n-1) / res.phase.Seconds()
	res.toFirst = at[0].Sub(start)
	for i, j := 0, 0; i < n; i++ {
		for at[i].Sub(at[j]) >= time.Second {
			j++
		}
		res.busiest = max(res.busiest, i-j+1)
		if i > 0 {
			g := at[i].Sub(at[i-1])
			res.gap = max(res.gap, g)
			if g > pauseOver {
				res.pauses = append(res.pauses, [2]time.Duration{at[i-1].Sub(at[0]), g})
			}
		}
	}
	return res, nil
}
