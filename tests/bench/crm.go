package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/tests/apiclient"
	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
)

// crmWindow is Pipedrive's rate window: its limits are so many requests per 2 seconds.
const crmWindow = 2 * time.Second

// crmBench measures a CRM initial sync (functions/crm's sync job) on the local process, over
// HTTP, against the Pipedrive fake (tests/fakes/crm/pipedrive) in this process, behind a
// recording proxy that stamps each request's answer:
//
//  1. the fake enforcing rate requests per 2 s (429 beyond it) and the sync paced at the same
//     (CRM_RATE_LIMITS): the goal's run;
//  2. the fake not enforcing, the sync paced at rate: the pacing alone;
//  3. the fake not enforcing, the sync paced at 10 times rate (at least 6,000 per 2 s, as
//     Dataverse's default limit is): the platform's own ceiling on this machine, which says
//     whether the limit is what binds in 1 and 2. Not unpaced: a job keeps its pacer's last
//     window with its progress, one time per call of the window, so an absurd pace would
//     make that item too large for the store.
//
// The baseline, in the same run, is the fake's limit: rate/2 requests a second. The ratio
// reported is the API requests a second achieved (first → last request of the job, on the
// proxy's clock) to it; the goal is at least 0.9 (within 10 %). A new person costs two
// requests (a search by email, a create), so records/s is about half the requests/s.
//
// Subscribers are written straight into the process's store (the subscribers service, the
// process stopped), as the broadcast bench does: creating them over HTTP would measure the
// API, not the sync.
func crmBench(records, rate int) error {
	if records < 10 || rate < 2 {
		return errors.New("-crm-records must be at least 10, -crm-rate at least 2")
	}
	dir, err := os.MkdirTemp("", "botapi-crm-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildLocal(dir)
	if err != nil {
		return err
	}
	runs := []struct {
		name    string
		enforce bool
		pace    int
	}{
		{fmt.Sprintf("enforcing %d per 2 s (429), paced at %d", rate, rate), true, rate},
		{fmt.Sprintf("not enforcing, paced at %d per 2 s", rate), false, rate},
		{fmt.Sprintf("not enforcing, paced at %d per 2 s (the platform's ceiling)", max(10*rate, 6000)), false, max(10*rate, 6000)},
	}
	var results []crmResult
	for i, r := range runs {
		res, err := crmRun(bin, filepath.Join(dir, strconv.Itoa(i)), records, r.pace, r.enforce)
		if err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
		res.name = r.name
		results = append(results, res)
		fmt.Fprintf(os.Stderr, "crm bench: %s: %d requests in %.1f s\n", r.name, res.requests, res.phase.Seconds())
	}

	limit := float64(rate) / crmWindow.Seconds()
	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, --durability full (the default); load average at the end: %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), loadAverage())
	fmt.Printf("\nInitial sync of %d subscribers (new persons) to the Pipedrive fake, whose limit is %d requests per 2 s (%.0f/s, the baseline):\n\n",
		records, rate, limit)
	fmt.Println("| the fake | records | sync phase s | records/s | requests | requests/s | vs limit | 429s | busiest 2 s | start → first | CPU |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range results {
		fmt.Printf("| %s | %d | %.2f | %.1f | %d | %.1f | %.3f | %d | %d | %.2f s | %.0f %% |\n", r.name, records, r.phase.Seconds(),
			float64(records)/r.phase.Seconds(), r.requests, r.rps, r.rps/limit, r.limited, r.busiest, r.toFirst.Seconds(),
			100*r.cpu.Seconds()/r.wall.Seconds())
	}
	fmt.Println("\n(requests/s: (n−1) over the first → last request answered, on the proxy's clock; records/s: records over the same;")
	fmt.Println("busiest 2 s: the most requests answered within any sliding 2 s; CPU: the local process's, job start → succeeded, of one core.)")
	verdict := "met"
	if results[0].rps/limit < 0.9 {
		verdict = "NOT met"
	}
	fmt.Printf("goal: requests/s at least 0.9 of the limit (%.0f/s) against the limit-enforcing fake: %.3f, %s\n", limit, results[0].rps/limit, verdict)
	return nil
}

// crmResult is one sync's measure.
type crmResult struct {
	name              string
	requests, limited int
	phase             time.Duration
	rps               float64
	busiest           int
	toFirst           time.Duration
	cpu, wall         time.Duration
}

// crmRun prepares a data directory with n subscribers with an email, starts the process
// paced at pace requests per 2 s against a fresh fake (enforcing pace per 2 s or not),
// connects it, maps persons by email and runs an initial sync to the end.
func crmRun(bin, data string, n, pace int, enforce bool) (crmResult, error) {
	var res crmResult
	pd, closePD := pipedrivefake.Listen()
	defer closePD()
	rec, proxyURL, closeProxy, err := recordingProxy(pd.URL())
	if err != nil {
		return res, err
	}
	defer closeProxy()

	// A first start writes the demo bot and its token; the email field is the API's to make.
	api, base, err := startProc(exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data), `API listening on (http://\S+)`)
	if err != nil {
		return res, err
	}
	var demo struct {
		Token string `json:"token"`
		BotID string `json:"bot_id"`
	}
	b, err := os.ReadFile(filepath.Join(data, "bootstrap.json"))
	if err == nil {
		err = json.Unmarshal(b, &demo)
	}
	if err == nil {
		c := &apiclient.Client{HTTP: &http.Client{Timeout: time.Minute}, Base: base + "/api/bots/" + demo.BotID, Token: demo.Token}
		err = c.Call("POST", "/fields", map[string]any{"name": "email", "type": "string"}, nil)
	}
	stopProc(api)
	if err != nil {
		return res, err
	}
	if err := seedCRMSubscribers(filepath.Join(data, "store.db"), demo.BotID, n); err != nil {
		return res, fmt.Errorf("seed subscribers: %w", err)
	}

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data)
	cmd.Env = append(os.Environ(), "CRM_PRIVATE_PROVIDER_ADDRESSES=allow", "CRM_PIPEDRIVE_API_BASE_URL="+proxyURL,
		fmt.Sprintf("CRM_RATE_LIMITS=pipedrive=%d/%s", pace, crmWindow))
	api, base, err = startProc(cmd, `API listening on (http://\S+)`)
	if err != nil {
		return res, err
	}
	defer stopProc(api)
	c := &apiclient.Client{HTTP: &http.Client{Timeout: time.Minute}, Base: base + "/api/bots/" + demo.BotID, Token: demo.Token}
	var conn struct {
		ID string `json:"id"`
	}
	if err := c.Call("POST", "/crm/connections/pipedrive", map[string]any{"api_key": pipedrivefake.APIToken, "company_domain": "bench"}, &conn); err != nil {
		return res, err
	}
	path := "/crm/connections/" + conn.ID
	if err := c.Call("PUT", path+"/mapping", map[string]any{"object": "persons", "key": "email", "fields": []any{
		map[string]any{"source": "subscriber:first_name", "target": "first_name", "direction": "push"}}}, nil); err != nil {
		return res, err
	}
	if enforce {
		pd.SetRateLimit(pace, crmWindow)
	}
	rec.reset()
	var job struct {
		ID       string `json:"id"`
		Status   string `json:"status"`
		Progress struct {
			Processed int `json:"processed"`
			Written   int `json:"written"`
			Failed    int `json:"failed"`
		} `json:"progress"`
	}
	cpu0 := procCPU(api.Process.Pid)
	start := time.Now()
	if err := c.Call("POST", path+"/jobs", map[string]any{"kind": "initial_sync"}, &job); err != nil {
		return res, err
	}
	for deadline := start.Add(30 * time.Minute); job.Status != "succeeded"; time.Sleep(250 * time.Millisecond) {
		if err := c.Call("GET", path+"/jobs/"+job.ID, nil, &job); err != nil {
			return res, err
		}
		if job.Status == "failed" || job.Status == "cancelled" {
			return res, fmt.Errorf("the job %s", job.Status)
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("the job is still %s after 30 minutes (%d processed)", job.Status, job.Progress.Processed)
		}
	}
	res.cpu, res.wall = procCPU(api.Process.Pid)-cpu0, time.Since(start)
	if job.Progress.Written != n || job.Progress.Failed != 0 {
		return res, fmt.Errorf("the job wrote %d of %d (%d failed)", job.Progress.Written, n, job.Progress.Failed)
	}
	if got := pd.Count("persons"); got != n {
		return res, fmt.Errorf("the fake holds %d persons for %d subscribers", got, n)
	}
	at, limited := rec.answers()
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	res.requests, res.limited = len(at), limited
	if len(at) < 2 {
		return res, errors.New("fewer than two requests reached the fake")
	}
	res.phase = at[len(at)-1].Sub(at[0])
	res.rps = float64(len(at)-1) / res.phase.Seconds()
	res.toFirst = at[0].Sub(start)
	for i, j := 0, 0; i < len(at); i++ {
		for at[i].Sub(at[j]) >= crmWindow {
			j++
		}
		res.busiest = max(res.busiest, i-j+1)
	}
	return res, nil
}

// seedCRMSubscribers creates n Telegram subscribers, each with a first name and an email
// (the email field must exist), through the subscribers service on the store file, 4 at a
// time. Normal durability: setup, not measured.
func seedCRMSubscribers(path, bot string, n int) error {
	st, err := sqlite.Open(path, sqlite.WithDurability(sqlite.Normal))
	if err != nil {
		return err
	}
	defer st.Close()
	svc := subscribers.NewService(st, time.Now, nil)
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
				name := "Sub " + strconv.Itoa(i)
				ch := subscribers.Changes{FirstName: &name, Fields: map[string]any{"email": fmt.Sprintf("bench%06d@example.org", i)}}
				if _, _, err := svc.Upsert(context.Background(), bot, "telegram", strconv.Itoa(3_000_000+i), ch); err != nil {
					errs[w] = err
					next.Store(int64(n))
					return
				}
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// answerLog records when each proxied request was answered, and how many were 429s.
type answerLog struct {
	mu      sync.Mutex
	at      []time.Time
	limited int
}

func (l *answerLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.at, l.limited = nil, 0
}

func (l *answerLog) answers() ([]time.Time, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.at), l.limited
}

// recordingProxy forwards to target and logs each answer's time: the fake counts requests
// but keeps no times.
func recordingProxy(target string) (*answerLog, string, func(), error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, "", nil, err
	}
	l := &answerLog{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = &http.Transport{MaxIdleConnsPerHost: 64}
	rp.ModifyResponse = func(r *http.Response) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.at = append(l.at, time.Now())
		if r.StatusCode == http.StatusTooManyRequests {
			l.limited++
		}
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return l, "http://" + ln.Addr().String(), func() { srv.Close() }, nil
}
