package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/botplatform/api/shared/queue"
	localqueue "github.com/botplatform/api/shared/queue/local"
	"github.com/botplatform/api/shared/store/sqlite"
	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// conversationBench measures inbound messages processed per second end to end on the local
// process: n Telegram updates (each from its own user, "/start", which runs a published
// one-step send_text reaction) are POSTed to the webhook by conc concurrent clients, and the
// clock stops when the fake Bot API has received n sendMessage calls. The baseline, in the
// same run on the same machine, is the local queue itself: n no-op messages sent by conc
// goroutines to a queue over its own SQLite file, with the local process's settings, until
// the handler has seen all n.
func conversationBench(n, conc int) error {
	dir, err := os.MkdirTemp("", "botapi-conversation-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	base, err := queueBaseline(filepath.Join(dir, "baseline"), n, conc)
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	e2e, err := endToEnd(dir, n, conc)
	if err != nil {
		return err
	}
	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, %d updates, %d concurrent webhook clients\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), n, conc)
	fmt.Println("| scenario | messages | seconds | messages/s | vs queue no-op | webhook p50 | webhook p99 | process CPU per message | process wait for a CPU |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	fmt.Printf("| local queue, no-op handler (baseline) | %d | %.2f | %.0f | 1.00 | | | | |\n", n, base.Seconds(), float64(n)/base.Seconds())
	perMsg := func(d time.Duration) string {
		if d <= 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000/float64(n))
	}
	fmt.Printf("| webhook → queue → runtime → send_text (end to end) | %d | %.2f | %.0f | %.2f | %s | %s | %s | %s |\n", n, e2e.total.Seconds(),
		float64(n)/e2e.total.Seconds(), base.Seconds()/e2e.total.Seconds(), e2e.p50.Round(time.Microsecond), e2e.p99.Round(time.Microsecond),
		perMsg(e2e.cpu), perMsg(e2e.wait))
	return nil
}

// queueBaseline is the time the local queue takes to hand n no-op messages to a handler.
func queueBaseline(dir string, n, conc int) (time.Duration, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	st, err := sqlite.Open(filepath.Join(dir, "store.db"))
	if err != nil {
		return 0, err
	}
	defer st.Close()
	q, err := localqueue.New(st, localqueue.Config{Name: "jobs", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return 0, err
	}
	var seen atomic.Int64
	done := make(chan struct{})
	if err := q.Start(queue.HandlerFunc(func(context.Context, queue.Message) error {
		if seen.Add(1) == int64(n) {
			close(done)
		}
		return nil
	})); err != nil {
		return 0, err
	}
	defer q.Stop(context.Background())
	start := time.Now()
	var wg sync.WaitGroup
	var sendErr atomic.Value
	next := atomic.Int64{}
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				m, _ := queue.New("bench.noop", map[string]int{"i": 1})
				if err := q.Send(context.Background(), m); err != nil {
					sendErr.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := sendErr.Load().(error); err != nil {
		return 0, err
	}
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		return 0, fmt.Errorf("the queue handled %d of %d messages", seen.Load(), n)
	}
	return time.Since(start), nil
}

type e2eResult struct {
	total    time.Duration
	p50, p99 time.Duration
	// cpu is the CPU time (user and system) the local process spent while the clock ran,
	// and wait how long its threads waited, runnable, for a CPU (procCPU, procWait; 0 where
	// /proc cannot tell): on a machine shared with other work, the first varies less than
	// the rate, and the second says how much of the time the machine took.
	cpu, wait time.Duration
}

// endToEnd runs the local process against a fake Bot API and measures n conversations.
func endToEnd(dir string, n, conc int) (e2eResult, error) {
	var res e2eResult
	bin, err := buildLocal(dir)
	if err != nil {
		return res, err
	}
	tb := &benchTB{}
	defer tb.cleanup()
	tg := fake.New(tb)
	bot := tg.AddBot("bench_bot")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	data := filepath.Join(dir, "data")
	api, apiURL, err := startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:"+port, "--data", data,
		"--public-url", "http://127.0.0.1:"+port, "--telegram-base-url", tg.URL), `API listening on (http://\S+)`)
	if err != nil {
		return res, err
	}
	defer stopProc(api)
	var demo struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(data, "bootstrap.json"))
	if err != nil {
		return res, err
	}
	if err := json.Unmarshal(b, &demo); err != nil {
		return res, err
	}
	connect := exec.Command(bin, "admin", "channel", "connect", "--bot", demo.BotID, "--type", "telegram",
		"--token", "-", "--base-url", tg.URL, "--data", data)
	connect.Stdin = bytes.NewReader([]byte(bot.Token + "\n"))
	if out, err := connect.CombinedOutput(); err != nil {
		return res, fmt.Errorf("connect the channel: %v: %s", err, out)
	}
	hook, ok := tg.Webhook(bot)
	if !ok {
		return res, errors.New("the channel registered no webhook")
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}, Timeout: 30 * time.Second}
	if err := publishReaction(client, apiURL, demo.Token, demo.BotID); err != nil {
		return res, err
	}

	updates := make([][]byte, n)
	for i := range updates {
		updates[i] = tg.TextUpdate(fake.User{ID: int64(1_000_000 + i), FirstName: "User", LanguageCode: "en"}, "/start")
	}
	lats := make([]time.Duration, n)
	var failed atomic.Int64
	var next atomic.Int64
	cpu0, wait0 := procCPU(api.Process.Pid), procWait(api.Process.Pid)
	start := time.Now()
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, hook.URL, bytes.NewReader(updates[i]))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("X-Telegram-Bot-Api-Secret-Token", hook.SecretToken)
				t0 := time.Now()
				r, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				io.Copy(io.Discard, r.Body)
				r.Body.Close()
				lats[i] = time.Since(t0)
				if r.StatusCode != http.StatusOK {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		return res, fmt.Errorf("%d webhook deliveries failed", f)
	}
	deadline := time.Now().Add(5 * time.Minute)
	for len(tg.AllSent()) < n {
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the fake received %d of %d messages", len(tg.AllSent()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	res.total = time.Since(start)
	if cpu0 > 0 {
		res.cpu = procCPU(api.Process.Pid) - cpu0
	}
	if wait0 > 0 {
		res.wait = procWait(api.Process.Pid) - wait0
	}
	slices.Sort(lats)
	res.p50, res.p99 = lats[n/2], lats[min(n-1, n*99/100)]
	if got := len(tg.AllSent()); got != n {
		return res, fmt.Errorf("the fake received %d messages for %d updates", got, n)
	}
	return res, nil
}

// publishReaction creates and publishes the start reaction every update runs.
func publishReaction(client *http.Client, base, token, bot string) error {
	call := func(path string, body any) (map[string]any, error) {
		b, _ := json.Marshal(body)
		r, _ := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(b))
		r.Header.Set("Authorization", "Bearer "+token)
		r.Header.Set("Content-Type", "application/json")
		res, err := client.Do(r)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(res.Body).Decode(&out); err != nil || res.StatusCode >= 300 {
			return nil, fmt.Errorf("POST %s: status %d: %v %v", path, res.StatusCode, err, out)
		}
		return out, nil
	}
	created, err := call("/api/bots/"+bot+"/reactions", map[string]any{"name": "Welcome", "trigger": map[string]any{"type": "start"},
		"steps": []any{map[string]any{"id": "hi", "type": "send_text", "text": "Hello!"}}})
	if err != nil {
		return err
	}
	_, err = call("/api/bots/"+bot+"/reactions/"+created["id"].(string)+"/publish", map[string]any{"expected_revision": 1})
	return err
}

// benchTB is the testing.TB the fakes take, outside a test: it keeps their cleanups. Only
// Helper and Cleanup are called by the fakes; the embedded nil TB is never reached.
type benchTB struct {
	testing.TB
	cleanups []func()
}

func (b *benchTB) Helper()          {}
func (b *benchTB) Cleanup(f func()) { b.cleanups = append(b.cleanups, f) }

func (b *benchTB) cleanup() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
}
