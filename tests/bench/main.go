// Command bench measures the local API against a bare net/http JSON handler in the same run
// on the same machine: requests per second, p50 and p99 latency, and the ratio to the bare
// handler. Both servers run as separate processes; this process is the load generator.
//
//	go run ./tests/bench [-duration 5s] [-concurrency 16]
//	go run ./tests/bench -lambda [-starts 5]   (Lambda cold starts and sizes)
//	go run ./tests/bench -conversation [-updates 1000] [-concurrency 16]   (inbound messages end to end)
//	go run ./tests/bench -email [-recipients 10000] [-durability full]   (an email campaign against a bare SMTP client)
//	go run ./tests/bench -funnel [-events 1000000] [-subscribers 100000] [-keep dir]   (a funnel report against a hand-written SQL query)
//	go run ./tests/bench -broadcast [-plan-recipients 100000] [-send-recipients 20000] [-rate 1000]   (a broadcast's plan against a bare insert loop; its send rate against a rate-limited fake Telegram)
//	go run ./tests/bench -webpush [-messages 2000] [-durability full]   (browser push encryption and signing per message against webpush-go alone)
//	go run ./tests/bench -crm [-crm-records 2000] [-crm-rate 80]   (a CRM initial sync's requests/s against the Pipedrive fake's rate limit)
//	go run ./tests/bench -ai [-ai-requests 1000] [-durability full]   (the managed AI route's added latency over a direct call to the OpenAI fake)
//	go run ./tests/bench -scale [-scale-sizes 1k,10k,100k,1M] [-scale-out docs/scale.png]   (list pages, label pages and a conversation as the subscribers grow)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botplatform/api/shared/store/sqlite"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "bare" {
		serveBare(os.Args[2])
		return
	}
	duration := flag.Duration("duration", 5*time.Second, "measurement time per scenario")
	warmup := flag.Duration("warmup", time.Second, "warm-up time per scenario")
	conc := flag.Int("concurrency", 16, "concurrent keep-alive connections")
	lambdas := flag.Bool("lambda", false, "measure Lambda cold starts and sizes instead")
	starts := flag.Int("starts", 5, "with -lambda: cold starts per function")
	conversations := flag.Bool("conversation", false, "measure inbound messages processed end to end instead")
	updates := flag.Int("updates", 1000, "with -conversation: updates to deliver")
	emails := flag.Bool("email", false, "measure an email campaign against a bare SMTP client instead")
	recipients := flag.Int("recipients", 10000, "with -email: recipients of the campaign")
	durability := flag.String("durability", "full", "with -email, -webpush, -ai and -scale: the local process's --durability (full or normal)")
	funnels := flag.Bool("funnel", false, "measure a funnel report against a hand-written SQL query instead")
	events := flag.Int("events", 1_000_000, "with -funnel: events in the bot's event log")
	subscribers := flag.Int("subscribers", 100_000, "with -funnel: subscribers the events are of")
	keep := flag.String("keep", "", "with -funnel: keep the generated events in this directory and reuse them in the next run")
	broadcasts := flag.Bool("broadcast", false, "measure a broadcast's planning against a bare insert loop and its sending against a rate-limited fake Telegram instead")
	planRecipients := flag.Int("plan-recipients", 100_000, "with -broadcast: recipients of the broadcast whose planning is measured")
	sendRecipients := flag.Int("send-recipients", 20_000, "with -broadcast: recipients of the broadcast whose sending is measured")
	sendRate := flag.Int("rate", 1000, "with -broadcast: BROADCAST_RATE_TELEGRAM and the fake's limit, messages a second")
	webpushes := flag.Bool("webpush", false, "measure browser push encryption and signing per message against webpush-go alone instead")
	messages := flag.Int("messages", 2000, "with -webpush: messages per run")
	crms := flag.Bool("crm", false, "measure a CRM initial sync's request rate against the Pipedrive fake's rate limit instead")
	crmRecords := flag.Int("crm-records", 2000, "with -crm: subscribers synced (new persons)")
	crmRate := flag.Int("crm-rate", 80, "with -crm: the fake's limit and CRM_RATE_LIMITS, requests per 2 s (Pipedrive's Essential plan: 80)")
	ais := flag.Bool("ai", false, "measure the managed AI route's latency against a direct call to the OpenAI fake instead")
	aiRequests := flag.Int("ai-requests", 1000, "with -ai: requests through the route and directly, each")
	flag.StringVar(&serveCPUProfile, "cpuprofile", "", "write a CPU profile of each local API process the run starts to this file (the last one started wins; go tool pprof reads it)")
	scales := flag.Bool("scale", false, "measure list pages, label pages and a conversation as one bot's subscribers grow instead")
	scaleSizes := flag.String("scale-sizes", "1k,10k,100k,1M", "with -scale: the sizes, ascending, seeded one after the other into one store")
	scalePages := flag.Int("scale-pages", 200, "with -scale: pages timed per list and size, at random cursors")
	scaleConvs := flag.Int("scale-conversations", 100, "with -scale: conversations timed per size, one at a time")
	scaleOut := flag.String("scale-out", "docs/scale.png", "with -scale: the chart to write (\"\": none)")
	flag.Parse()
	if *scales {
		sizes, err := parseSizes(*scaleSizes)
		if err == nil {
			err = scaleBench(sizes, *scalePages, *scaleConvs, *durability, *scaleOut)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *ais {
		if err := aiBench(*aiRequests, *durability); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *crms {
		if err := crmBench(*crmRecords, *crmRate); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *webpushes {
		d, err := sqlite.ParseDurability(*durability)
		if err == nil {
			err = webpushBench(*messages, d)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *broadcasts {
		if err := broadcastBench(*planRecipients, *sendRecipients, *sendRate); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *funnels {
		if err := funnelBench(*events, *subscribers, *keep); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *emails {
		if err := emailBench(*recipients, *durability); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *conversations {
		if err := conversationBench(*updates, *conc); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *lambdas {
		if err := lambdaBench(*starts); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*duration, *warmup, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// serveBare is the baseline: net/http, one route, a JSON body of the same size as a bot.
func serveBare(addr string) {
	type settings struct {
		Timezone              string   `json:"timezone"`
		DefaultLocale         string   `json:"default_locale"`
		SupportedLocales      []string `json:"supported_locales"`
		SessionTimeoutMinutes int      `json:"session_timeout_minutes"`
	}
	type bot struct {
		ID        string    `json:"id"`
		Name      string    `json:"name"`
		Settings  settings  `json:"settings"`
		Revision  int64     `json:"revision"`
		CreatedAt time.Time `json:"created_at"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/bots/{botID}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := json.Marshal(bot{ID: r.PathValue("botID"), Name: "Demo bot", Revision: 1, CreatedAt: time.Now(), UpdatedAt: time.Now(),
			Settings: settings{Timezone: "UTC", DefaultLocale: "en", SupportedLocales: []string{"en"}, SessionTimeoutMinutes: 30}})
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening on http://" + ln.Addr().String())
	http.Serve(ln, mux)
}

type result struct {
	name      string
	requests  int
	errors    int
	rps       float64
	p50, p99  time.Duration
	statusBad map[int]int
}

func run(duration, warmup time.Duration, conc int) error {
	dir, err := os.MkdirTemp("", "botapi-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildLocal(dir)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}

	bare, bareURL, err := startProc(exec.Command(self, "bare", "127.0.0.1:0"), `listening on (http://\S+)`)
	if err != nil {
		return err
	}
	defer stopProc(bare)
	api, apiURL, err := startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", filepath.Join(dir, "data")), `API listening on (http://\S+)`)
	if err != nil {
		return err
	}
	defer stopProc(api)
	var demo struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "data", "bootstrap.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, &demo); err != nil {
		return err
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxConnsPerHost: conc}, Timeout: 10 * time.Second}

	// Each PATCH worker owns a bot, so every revisioned write succeeds instead of racing.
	bots := make([]string, conc)
	for i := range bots {
		id, err := createBot(client, apiURL, demo.Token, fmt.Sprintf("bench %d", i))
		if err != nil {
			return err
		}
		bots[i] = id
	}

	// The same writes against a process that syncs only at checkpoints (--durability normal):
	// what the default, a sync at every commit, costs.
	fast, fastURL, err := startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--durability", "normal", "--data", filepath.Join(dir, "fast")), `API listening on (http://\S+)`)
	if err != nil {
		return err
	}
	defer stopProc(fast)
	var fastDemo struct {
		Token string `json:"token"`
	}
	if b, err = os.ReadFile(filepath.Join(dir, "fast", "bootstrap.json")); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &fastDemo); err != nil {
		return err
	}
	fastBots := make([]string, conc)
	for i := range fastBots {
		if fastBots[i], err = createBot(client, fastURL, fastDemo.Token, fmt.Sprintf("bench %d", i)); err != nil {
			return err
		}
	}
	patch := func(base, token string, bots []string) func(int, *int64) (*http.Request, int) {
		return func(w int, rev *int64) (*http.Request, int) {
			body := fmt.Sprintf(`{"expected_revision":%d,"settings":{"session_timeout_minutes":%d}}`, *rev, 1+*rev%600)
			r, _ := http.NewRequest(http.MethodPatch, base+"/api/bots/"+bots[w], strings.NewReader(body))
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("Content-Type", "application/json")
			*rev++
			return r, 200
		}
	}

	auth := "Bearer " + demo.Token
	scenarios := []struct {
		name string
		next func(worker int, rev *int64) (*http.Request, int)
		revs []int64
	}{
		{"bare net/http GET (baseline)", func(int, *int64) (*http.Request, int) {
			r, _ := http.NewRequest(http.MethodGet, bareURL+"/api/bots/"+demo.BotID, nil)
			return r, 200
		}, nil},
		{"GET /api/bots/{botID} (PAT)", func(int, *int64) (*http.Request, int) {
			r, _ := http.NewRequest(http.MethodGet, apiURL+"/api/bots/"+demo.BotID, nil)
			r.Header.Set("Authorization", auth)
			return r, 200
		}, nil},
		{"PATCH /api/bots/{botID} (expected_revision; --durability full, the default)", patch(apiURL, demo.Token, bots), nil},
		{"PATCH /api/bots/{botID} (expected_revision; --durability normal)", patch(fastURL, fastDemo.Token, fastBots), nil},
	}
	var results []result
	for _, sc := range scenarios {
		if sc.revs == nil {
			sc.revs = make([]int64, conc)
			for i := range sc.revs {
				sc.revs[i] = 1
			}
		}
		load(client, conc, warmup, sc.next, sc.revs)
		res := load(client, conc, duration, sc.next, sc.revs)
		res.name = sc.name
		results = append(results, res)
	}

	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, %d connections, %s per scenario after %s warm-up\n\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), conc, duration, warmup)
	fmt.Println("| scenario | requests/s | p50 | p99 | vs bare | errors |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Printf("| %s | %.0f | %s | %s | %.2f | %d |\n", r.name, r.rps, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.rps/results[0].rps, r.errors)
	}
	for _, r := range results {
		if r.errors > 0 {
			return fmt.Errorf("%s: %d failed requests (unexpected statuses %v)", r.name, r.errors, r.statusBad)
		}
	}
	return nil
}

// load drives conc workers in closed loop for d and returns throughput and latency.
func load(client *http.Client, conc int, d time.Duration, next func(int, *int64) (*http.Request, int), revs []int64) result {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		lats    []time.Duration
		total   atomic.Int64
		errs    atomic.Int64
		badMu   sync.Mutex
		bad     = map[int]int{}
		stopAt  = time.Now().Add(d)
		started = time.Now()
	)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			local := make([]time.Duration, 0, 1<<14)
			for time.Now().Before(stopAt) {
				req, want := next(w, &revs[w])
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					errs.Add(1)
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				local = append(local, time.Since(t0))
				total.Add(1)
				if res.StatusCode != want {
					errs.Add(1)
					badMu.Lock()
					bad[res.StatusCode]++
					badMu.Unlock()
				}
			}
			mu.Lock()
			lats = append(lats, local...)
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(started)
	slices.Sort(lats)
	pct := func(p float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(len(lats)-1, int(float64(len(lats))*p))]
	}
	return result{requests: int(total.Load()), errors: int(errs.Load()), rps: float64(total.Load()) / elapsed.Seconds(),
		p50: pct(0.50), p99: pct(0.99), statusBad: bad}
}

func createBot(client *http.Client, base, token, name string) (string, error) {
	body, _ := json.Marshal(map[string]string{"name": name})
	r, _ := http.NewRequest(http.MethodPost, base+"/api/bots", bytes.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	r.Header.Set("Content-Type", "application/json")
	res, err := client.Do(r)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	var b struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&b); err != nil || res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("create bot: status %d: %v", res.StatusCode, err)
	}
	return b.ID, nil
}

// startProc starts cmd and waits for its stdout to announce the base URL.
// serveCPUProfile is the -cpuprofile flag: startProc passes it to every `local serve`.
var serveCPUProfile string

func startProc(cmd *exec.Cmd, announce string) (*exec.Cmd, string, error) {
	re := regexp.MustCompile(announce)
	if serveCPUProfile != "" && len(cmd.Args) > 1 && cmd.Args[1] == "serve" {
		cmd.Args = append(cmd.Args, "--cpuprofile", serveCPUProfile)
	}
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = io.Discard // request logs are written, as in production, but not kept
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	found := make(chan string, 1)
	go func() {
		var seen bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			seen.Write(buf[:n])
			if m := re.FindSubmatch(seen.Bytes()); m != nil {
				found <- string(m[1])
				io.Copy(io.Discard, pr)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case u := <-found:
		return cmd, u, nil
	case <-ctx.Done():
		cmd.Process.Kill()
		return nil, "", errors.New("server did not announce its address")
	}
}

func stopProc(cmd *exec.Cmd) {
	cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
	}
}

// buildLocal builds the local process into dir and returns the binary's path.
func buildLocal(dir string) (string, error) {
	bin := filepath.Join(dir, "local")
	build := exec.Command("go", "build", "-o", bin, "./functions/local")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		return "", fmt.Errorf("build local: %w (run from the repository root)", err)
	}
	return bin, nil
}
