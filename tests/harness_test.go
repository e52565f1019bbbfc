// Package tests holds the end-to-end tests: they build the real local binary, start it on a
// free port with a fresh data directory, and speak HTTP to it as a customer would.
package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/logtest"
)

// binary is the local process, built once for the whole package.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "botapi-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "local")
	build := exec.Command("go", "build", "-o", binary, "../functions/local")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build local binary:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// server is one running local process with its own data directory.
type server struct {
	t       *testing.T
	base    string
	dataDir string
	cmd     *exec.Cmd
	stdout  *logtest.Buffer
	stderr  *logtest.Buffer
	exited  chan error
	demo    bootstrapFile
	client  *http.Client

	stopOnce sync.Once
	mu       sync.Mutex
	// secrets are token values minted during the test; shown counts the responses
	// that contained each one.
	secrets map[string]int
}

type bootstrapFile struct {
	AccountID string `json:"account_id"`
	UserID    string `json:"user_id"`
	BotID     string `json:"bot_id"`
	Token     string `json:"token"`
	TokenID   string `json:"token_id"`
}

var listeningRe = regexp.MustCompile(`API listening on (http://127\.0\.0\.1:\d+)`)

// start runs `local serve` on a free port with JSON logs and waits until it listens.
// At cleanup it stops the process with SIGTERM, requires a clean exit, and checks that no
// minted token ever reached the log and that each was shown exactly once.
func start(t *testing.T) *server {
	t.Helper()
	return startIn(t, t.TempDir())
}

// startIn is start on a given data directory (to restart over existing data).
func startIn(t *testing.T, dataDir string) *server {
	t.Helper()
	return startWith(t, dataDir)
}

// startWith is startIn with more serve flags; a repeated flag overrides the default
// (`--addr 127.0.0.1:PORT`).
func startWith(t *testing.T, dataDir string, args ...string) *server {
	t.Helper()
	return startWithEnv(t, dataDir, nil, args...)
}

// startWithEnv is startWith with more environment variables ("NAME=value"), for the
// settings that are secrets and so are never flags (WHATSAPP_APP_SECRET).
func startWithEnv(t *testing.T, dataDir string, env []string, args ...string) *server {
	t.Helper()
	s := &server{
		t:       t,
		dataDir: dataDir,
		stdout:  &logtest.Buffer{},
		stderr:  &logtest.Buffer{},
		exited:  make(chan error, 1),
		client:  &http.Client{Timeout: 30 * time.Second},
		secrets: map[string]int{},
	}
	s.cmd = exec.Command(binary, append([]string{"serve", "--addr", "127.0.0.1:0", "--data", s.dataDir, "--log-format", "json"}, args...)...)
	if env != nil {
		s.cmd.Env = append(os.Environ(), env...)
	}
	s.cmd.Stdout, s.cmd.Stderr = s.stdout, s.stderr
	require.NoError(t, s.cmd.Start())
	go func() { s.exited <- s.cmd.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if m := listeningRe.FindStringSubmatch(s.stdout.String()); m != nil {
			s.base = m[1]
			break
		}
		select {
		case err := <-s.exited:
			t.Fatalf("server exited before listening: %v\nstdout:\n%s\nstderr:\n%s", err, s.stdout, s.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.cmd.Process.Kill()
			t.Fatalf("server did not start\nstdout:\n%s\nstderr:\n%s", s.stdout, s.stderr)
		}
	}
	b, err := os.ReadFile(filepath.Join(s.dataDir, "bootstrap.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &s.demo))
	// The banner shows the demo token to the person at the terminal: that is its one showing.
	s.secrets[s.demo.Token] = 1
	t.Cleanup(s.stop)
	return s
}

// stop terminates the process once and runs the end-of-life checks.
func (s *server) stop() { s.stopOnce.Do(s.doStop) }

func (s *server) doStop() {
	t := s.t
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case err := <-s.exited:
		if err != nil && !t.Failed() {
			t.Errorf("server exited with %v after SIGTERM\nstderr:\n%s", err, s.stderr)
		}
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		t.Errorf("server did not stop within 20s of SIGTERM")
	}
	logs := s.stderr.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, shown := range s.secrets {
		if strings.Contains(logs, tok) {
			t.Errorf("token %s... appears in the server log", tok[:8])
		}
		if shown != 1 {
			t.Errorf("token %s... was shown in %d responses, want exactly 1", tok[:8], shown)
		}
	}
}

// secret registers a token value minted outside an HTTP response (admin CLI): it counts as shown once.
func (s *server) secret(tok string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[tok]++
	return tok
}

// admin runs `local admin args...` against the server's data directory and returns its JSON.
func (s *server) admin(args ...string) map[string]string {
	s.t.Helper()
	out, code := s.adminRaw(args...)
	require.Equal(s.t, 0, code, "admin %v: %s", args, out)
	var m map[string]string
	require.NoError(s.t, json.Unmarshal(out, &m), "admin output: %s", out)
	if tok := m["token"]; tok != "" {
		s.secret(tok)
	}
	return m
}

func (s *server) adminRaw(args ...string) ([]byte, int) {
	s.t.Helper()
	cmd := exec.Command(binary, append(append([]string{"admin"}, args...), "--data", s.dataDir)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else {
		require.NoError(s.t, err)
	}
	return out, code
}

// resp is a response read whole.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r resp) JSON(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.Body, &m), "body: %s", r.Body)
	return m
}

// Code is the problem code of an error response.
func (r resp) Code(t *testing.T) string {
	t.Helper()
	require.Equal(t, "application/problem+json", r.Header.Get("Content-Type"), "body: %s", r.Body)
	code, _ := r.JSON(t)["code"].(string)
	return code
}

// problem asserts that r is the problem status and code, as the operation (method and path
// template) documents it, and returns the problem's members.
func problem(t *testing.T, method, template, path string, r resp, status int, code string) map[string]any {
	t.Helper()
	require.Equal(t, status, r.Status, "%s %s: %s", method, path, r.Body)
	assert.Equal(t, code, r.Code(t), "%s %s", method, path)
	conforms(t, method, template, path, r)
	return r.JSON(t)
}

// req describes one request.
type req struct {
	Method  string
	Path    string
	Token   string
	Body    any // string and []byte are sent raw; anything else as JSON
	Headers map[string]string
}

// do sends r and records which minted tokens the response shows.
func (s *server) do(r req) resp {
	s.t.Helper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(s.t, err)
		body = bytes.NewReader(j)
	}
	hr, err := http.NewRequest(r.Method, s.base+r.Path, body)
	require.NoError(s.t, err)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.Token != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Token)
	}
	for k, v := range r.Headers {
		hr.Header.Set(k, v)
	}
	res, err := s.client.Do(hr)
	require.NoError(s.t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(s.t, err)
	out := resp{Status: res.StatusCode, Header: res.Header, Body: b}
	s.scan(out)
	return out
}

// scan counts minted tokens in a response and registers tokens it creates.
func (s *server) scan(r resp) {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := string(r.Body)
	for tok := range s.secrets {
		if strings.Contains(text, tok) {
			s.secrets[tok]++
		}
	}
	var created struct {
		Token string `json:"token"`
	}
	if json.Unmarshal(r.Body, &created) == nil && created.Token != "" {
		if _, known := s.secrets[created.Token]; !known {
			s.secrets[created.Token] = 1
		}
	}
}

// Shorthands for the common verbs.
func (s *server) get(token, path string) resp {
	return s.do(req{Method: http.MethodGet, Path: path, Token: token})
}

func (s *server) post(token, path string, body any) resp {
	return s.do(req{Method: http.MethodPost, Path: path, Token: token, Body: body})
}

func (s *server) patch(token, path string, body any) resp {
	return s.do(req{Method: http.MethodPatch, Path: path, Token: token, Body: body})
}

func (s *server) del(token, path string) resp {
	return s.do(req{Method: http.MethodDelete, Path: path, Token: token})
}

// account is a second tenant with its owner's full-access token and a bot.
type account struct {
	ID, Owner, Token, Bot string
}

func (s *server) newAccount(name string) account {
	s.t.Helper()
	a := s.admin("account", "create", "--name", name)
	tok := s.admin("pat", "create", "--account", a["account_id"], "--scopes", "*")["token"]
	bot := s.admin("bot", "create", "--account", a["account_id"], "--name", name+" bot")["bot_id"]
	return account{ID: a["account_id"], Owner: a["user_id"], Token: tok, Bot: bot}
}

// logLines returns the server's JSON log records.
func (s *server) logLines() []map[string]any {
	s.t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(s.t, json.Unmarshal(sc.Bytes(), &m), "log line is not JSON: %s", sc.Text())
		out = append(out, m)
	}
	return out
}
