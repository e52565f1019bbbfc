// Package lambdaruntime is a fake of the AWS Lambda Runtime API, enough to boot a real
// `bootstrap` binary on this machine and invoke it: the process polls for the next
// invocation and posts its response or error, as it does inside Lambda. Tests and the
// cold-start benchmark use it; no Lambda emulator is installable here.
package lambdaruntime

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Result is what the function answered to one invocation.
type Result struct {
	Payload []byte
	// Error is true when the function posted to /error (a handler error or panic).
	Error bool
}

type invocation struct {
	id      string
	payload []byte
	result  chan Result
}

// Runtime serves the Runtime API for one function process at a time.
type Runtime struct {
	srv      *http.Server
	addr     string
	next     chan *invocation
	mu       sync.Mutex
	pending  map[string]*invocation
	seq      atomic.Int64
	polled   sync.Once
	polledCh chan struct{}
	// InitErrors counts posts to /runtime/init/error.
	InitErrors atomic.Int64
}

// Start listens on 127.0.0.1 on a free port.
func Start() (*Runtime, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rt := &Runtime{addr: ln.Addr().String(), next: make(chan *invocation), pending: map[string]*invocation{}, polledCh: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", rt.serveNext)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", rt.serveResult(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", rt.serveResult(true))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		rt.InitErrors.Add(1)
		w.WriteHeader(http.StatusAccepted)
	})
	rt.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go rt.srv.Serve(ln)
	return rt, nil
}

// Close stops the server.
func (rt *Runtime) Close() error { return rt.srv.Close() }

func (rt *Runtime) serveNext(w http.ResponseWriter, r *http.Request) {
	rt.polled.Do(func() { close(rt.polledCh) })
	select {
	case inv := <-rt.next:
		h := w.Header()
		h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(30*time.Second).UnixMilli(), 10))
		h.Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:test")
		h.Set("Lambda-Runtime-Trace-Id", "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")
		h.Set("Content-Type", "application/json")
		w.Write(inv.payload)
	case <-r.Context().Done():
	}
}

func (rt *Runtime) serveResult(isErr bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rt.mu.Lock()
		inv, ok := rt.pending[r.PathValue("id")]
		delete(rt.pending, r.PathValue("id"))
		rt.mu.Unlock()
		if !ok {
			http.Error(w, "unknown request id", http.StatusBadRequest)
			return
		}
		inv.result <- Result{Payload: b, Error: isErr}
		w.WriteHeader(http.StatusAccepted)
	}
}

// AwaitPoll waits until the function first asks for an invocation: its init is done.
func (rt *Runtime) AwaitPoll(ctx context.Context) error {
	select {
	case <-rt.polledCh:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("lambdaruntime: the function never polled: %w", ctx.Err())
	}
}

// Invoke hands payload to the function and waits for its answer.
func (rt *Runtime) Invoke(ctx context.Context, payload []byte) (Result, error) {
	inv := &invocation{id: fmt.Sprintf("req-%d", rt.seq.Add(1)), payload: payload, result: make(chan Result, 1)}
	rt.mu.Lock()
	rt.pending[inv.id] = inv
	rt.mu.Unlock()
	select {
	case rt.next <- inv:
	case <-ctx.Done():
		return Result{}, fmt.Errorf("lambdaruntime: the function never asked for the invocation: %w", ctx.Err())
	}
	select {
	case res := <-inv.result:
		return res, nil
	case <-ctx.Done():
		return Result{}, fmt.Errorf("lambdaruntime: no answer: %w", ctx.Err())
	}
}

// Build compiles functions/<name>/lambda (relative to the repository root) for this
// machine, as make build does for Lambda (lambda.norpc, trimmed, stripped), into dir/<name>.
func Build(root, dir, name string) (string, error) {
	out := dir + "/" + name
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w", "-o", out, "./functions/"+name+"/lambda")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s: %v\n%s", name, err, b)
	}
	return out, nil
}

// Process is a running function binary.
type Process struct {
	cmd    *exec.Cmd
	exited chan error
	Stderr *strings.Builder
	mu     *sync.Mutex
}

// Launch starts binary against rt with the given extra environment.
func (rt *Runtime) Launch(binary string, env ...string) (*Process, error) {
	cmd := exec.Command(binary)
	cmd.Env = append([]string{
		"AWS_LAMBDA_RUNTIME_API=" + rt.addr,
		"AWS_LAMBDA_FUNCTION_NAME=test",
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=256",
		"AWS_REGION=us-east-1",
		"PATH=" + os.Getenv("PATH"),
	}, env...)
	p := &Process{cmd: cmd, exited: make(chan error, 1), Stderr: &strings.Builder{}, mu: &sync.Mutex{}}
	cmd.Stdout = io.Discard
	cmd.Stderr = lockedWriter{p.mu, p.Stderr}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- cmd.Wait() }()
	return p, nil
}

// Logs returns what the process wrote to stderr so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Stderr.String()
}

// Stop kills the process (Lambda freezes and reaps; there is no graceful path to test).
func (p *Process) Stop() {
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
	}
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case err := <-p.exited:
		p.exited <- err
		return true, err
	default:
		return false, nil
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
