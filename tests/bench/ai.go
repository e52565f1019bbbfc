package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"time"

	openaifake "github.com/botplatform/api/tests/fakes/ai/openai"
)

// aiBench measures what POST /api/v1/ai/responses adds to a generation: the same request
// (one user message, provider openai) n times in turn through the local process, against
// the OpenAI fake in this process called directly with the body the client sends, in the
// same run and interleaved (so that both see the same machine). The route's added latency is
// the difference of the p50s (and of the p99s); the goal is under 2 ms at p50. Each request
// has an Idempotency-Key of its own: every one is claimed, generated, stored and metered,
// and audited: three commits, each an fsync under --durability full (the default), which is
// most of what the route adds on a disk like this one's (-durability normal shows the rest).
func aiBench(n int, durability string) error {
	if n < 100 {
		return errors.New("-ai-requests must be at least 100")
	}
	dir, err := os.MkdirTemp("", "botapi-ai-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := buildLocal(dir)
	if err != nil {
		return err
	}
	fake, closeFake := openaifake.Listen()
	defer closeFake()
	const key = "sk-bench-managed"
	fake.AddKey(key)
	data := filepath.Join(dir, "data")
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data, "--durability", durability)
	cmd.Env = append(os.Environ(), "AI_PRIVATE_PROVIDER_ADDRESSES=allow", "AI_OPENAI_BASE_URL="+fake.URL(), "AI_OPENAI_API_KEY="+key)
	api, base, err := startProc(cmd, `API listening on (http://\S+)`)
	if err != nil {
		return err
	}
	defer stopProc(api)
	var demo struct {
		Token string `json:"token"`
	}
	b, err := os.ReadFile(filepath.Join(data, "bootstrap.json"))
	if err == nil {
		err = json.Unmarshal(b, &demo)
	}
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	route := func(i int) error {
		body := `{"provider":"openai","profile":"fast","max_output_tokens":64,"input":[{"role":"user","content":"summarize the order and its delivery status in two sentences"}]}`
		req, _ := http.NewRequest(http.MethodPost, base+"/api/v1/ai/responses", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+demo.Token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(i))
		return expect200(client, req)
	}
	direct := func(int) error {
		body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"summarize the order and its delivery status in two sentences"}],"max_completion_tokens":64}`
		req, _ := http.NewRequest(http.MethodPost, fake.URL()+"/v1/chat/completions", bytes.NewBufferString(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		return expect200(client, req)
	}
	for i := range 50 { // warm-up: connections, the store's pages, the JIT-less Go's caches
		if err := route(-1 - i); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		if err := direct(i); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}
	var viaRoute, viaDirect []time.Duration
	for i := range n {
		for _, m := range []struct {
			call func(int) error
			into *[]time.Duration
		}{{route, &viaRoute}, {direct, &viaDirect}} {
			t0 := time.Now()
			if err := m.call(i); err != nil {
				return err
			}
			*m.into = append(*m.into, time.Since(t0))
		}
	}
	pct := func(ds []time.Duration, p float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(p*float64(len(s))))]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	fmt.Printf("\n%d cores (GOMAXPROCS %d), %s, --durability %s; load average at the end: %s\n",
		runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version(), durability, loadAverage())
	fmt.Printf("\nPOST /api/v1/ai/responses (provider openai, a new Idempotency-Key each) against the same request to the OpenAI fake directly, %d each, interleaved:\n\n", n)
	fmt.Println("| | p50 ms | p99 ms |")
	fmt.Println("|---|---:|---:|")
	fmt.Printf("| the fake directly (baseline) | %.2f | %.2f |\n", ms(pct(viaDirect, 0.5)), ms(pct(viaDirect, 0.99)))
	fmt.Printf("| through the route | %.2f | %.2f |\n", ms(pct(viaRoute, 0.5)), ms(pct(viaRoute, 0.99)))
	added50, added99 := pct(viaRoute, 0.5)-pct(viaDirect, 0.5), pct(viaRoute, 0.99)-pct(viaDirect, 0.99)
	fmt.Printf("| added by the route | %.2f | %.2f |\n", ms(added50), ms(added99))
	verdict := "met"
	if added50 >= 2*time.Millisecond {
		verdict = "NOT met"
	}
	fmt.Printf("goal: under 2 ms added at p50: %.2f ms, %s (ratio of p50s %.2f)\n", ms(added50), verdict,
		float64(pct(viaRoute, 0.5))/float64(pct(viaDirect, 0.5)))
	return nil
}

func expect200(client *http.Client, req *http.Request) error {
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, res.StatusCode, b)
	}
	return nil
}
