package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/tests/fakes/ai/aifake"
	anthropicfake "github.com/botplatform/api/tests/fakes/ai/anthropic"
	geminifake "github.com/botplatform/api/tests/fakes/ai/gemini"
	openaifake "github.com/botplatform/api/tests/fakes/ai/openai"
)

// Managed AI end to end (docs/ai.md): the local process in front of the three providers'
// fakes, with managed keys of its own and an account's own key set by the operator.
type aiE2E struct {
	s                 *server
	openai            *openaifake.Server
	anthropic         *anthropicfake.Server
	gemini            *geminifake.Server
	managed           map[string]string
	tok, ownAnthropic string
}

const (
	aiResponses = "/api/v1/ai/responses"
	aiUsage     = "/api/v1/ai/usage"
)

func startAI(t *testing.T) *aiE2E {
	t.Helper()
	e := &aiE2E{openai: openaifake.New(t), anthropic: anthropicfake.New(t), gemini: geminifake.New(t),
		managed:      map[string]string{"openai": "sk-managed-openai-0001", "anthropic": "sk-ant-managed-0001", "gemini": "AIza-managed-0001"},
		ownAnthropic: "sk-ant-customer-own-4242"}
	e.openai.AddKey(e.managed["openai"])
	e.anthropic.AddKey(e.managed["anthropic"])
	e.gemini.AddKey(e.managed["gemini"])
	e.anthropic.AddKey(e.ownAnthropic)
	e.s = startWithEnv(t, t.TempDir(), []string{
		"AI_PRIVATE_PROVIDER_ADDRESSES=allow",
		"AI_OPENAI_BASE_URL=" + e.openai.URL(), "AI_ANTHROPIC_BASE_URL=" + e.anthropic.URL(), "AI_GEMINI_BASE_URL=" + e.gemini.URL(),
		"AI_OPENAI_API_KEY=" + e.managed["openai"], "AI_ANTHROPIC_API_KEY=" + e.managed["anthropic"], "AI_GEMINI_API_KEY=" + e.managed["gemini"],
	})
	for _, k := range e.managed {
		e.s.secret(k)
	}
	e.s.secret(e.ownAnthropic)
	e.tok = e.s.demo.Token
	return e
}

func (e *aiE2E) respond(t *testing.T, key string, body any) resp {
	t.Helper()
	h := map[string]string{}
	if key != "" {
		h["Idempotency-Key"] = key
	}
	res := e.s.do(req{Method: http.MethodPost, Path: aiResponses, Token: e.tok, Body: body, Headers: h})
	if res.Header.Get("Content-Type") != "text/event-stream" { // the validator reads JSON bodies only
		conforms(t, http.MethodPost, aiResponses, aiResponses, res)
	}
	return res
}

func aiBody(profile, text string) map[string]any {
	return map[string]any{"profile": profile, "input": []any{map[string]any{"role": "user", "content": text}}}
}

// setKey runs the operator's admin command with the key on stdin.
func (e *aiE2E) setKey(t *testing.T, provider, key string) map[string]any {
	t.Helper()
	cmd := exec.Command(binary, "admin", "ai", "set-key", "--account", e.s.demo.AccountID, "--provider", provider, "--data", e.s.dataDir)
	cmd.Stdin = strings.NewReader(key + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s %s", out, stderr.String())
	assert.NotContains(t, string(out)+stderr.String(), key, "the key is never printed")
	var m map[string]any
	require.NoError(t, json.Unmarshal(out, &m))
	return m
}

func TestAIResponses(t *testing.T) {
	t.Parallel()
	e := startAI(t)

	// Idempotency: replay, another body, a missing key.
	first := e.respond(t, "order-42-summary", aiBody("fast", "summarize order 42"))
	require.Equal(t, http.StatusOK, first.Status, "%s", first.Body)
	got := first.JSON(t)
	assert.Equal(t, "gemini", got["provider"])
	assert.Equal(t, "echo: summarize order 42", got["output_text"])
	assert.Equal(t, "managed", got["billing"])
	assert.Equal(t, 1, e.gemini.Requests())
	again := e.respond(t, "order-42-summary", aiBody("fast", "summarize order 42"))
	require.Equal(t, http.StatusOK, again.Status)
	assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	assert.JSONEq(t, string(first.Body), string(again.Body))
	assert.Equal(t, 1, e.gemini.Requests(), "a replay reaches no provider")
	res := e.respond(t, "order-42-summary", aiBody("fast", "summarize order 43"))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "idempotency_key_reused", res.Code(t))
	res = e.respond(t, "", aiBody("fast", "hi"))
	assert.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "idempotency_key_required", res.Code(t))

	// Two requests with one key at once: exactly one reaches the provider.
	e.gemini.Hold()
	var wg sync.WaitGroup
	var held resp
	wg.Go(func() { held = e.respond(t, "concurrent", aiBody("fast", "one at a time")) })
	eventually(t, 10*time.Second, "the first request reaches the provider", func() bool { return e.gemini.Requests() == 2 })
	res = e.respond(t, "concurrent", aiBody("fast", "one at a time"))
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "idempotency_in_flight", res.Code(t))
	e.gemini.Release()
	wg.Wait()
	require.Equal(t, http.StatusOK, held.Status, "%s", held.Body)
	assert.Equal(t, 2, e.gemini.Requests(), "the second request never reached it")

	// auto falls back across managed providers on a provider's failure.
	e.gemini.FailNext(1, http.StatusServiceUnavailable)
	res = e.respond(t, "fallback", aiBody("fast", "are you there"))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	got = res.JSON(t)
	assert.Equal(t, "openai", got["provider"])
	assert.Equal(t, []any{map[string]any{"provider": "gemini", "model": "gemini-2.0-flash", "error": "provider_unavailable"}}, got["attempts"])

	// Streaming over HTTP: the deltas make the text.
	b := aiBody("quality", "stream me a few words")
	b["stream"] = true
	res = e.respond(t, "stream-1", b)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, "text/event-stream", res.Header.Get("Content-Type"))
	var text strings.Builder
	var completed map[string]any
	sc := bufio.NewScanner(bytes.NewReader(res.Body))
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: ") && event == "response.delta":
			var d map[string]string
			require.NoError(t, json.Unmarshal([]byte(line[6:]), &d))
			text.WriteString(d["delta"])
		case strings.HasPrefix(line, "data: ") && event == "response.completed":
			require.NoError(t, json.Unmarshal([]byte(line[6:]), &completed))
		}
	}
	require.NotNil(t, completed)
	assert.Equal(t, "anthropic", completed["provider"])
	assert.Equal(t, "echo: stream me a few words", text.String())
	assert.Equal(t, text.String(), completed["output_text"])

	// The usage report adds up to what the providers billed the managed keys.
	res = e.s.get(e.tok, aiUsage)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, aiUsage, aiUsage, res)
	var rep struct {
		Total struct {
			Requests     int64 `json:"requests"`
			InputTokens  int64 `json:"input_tokens"`
			OutputTokens int64 `json:"output_tokens"`
		} `json:"total"`
	}
	require.NoError(t, json.Unmarshal(res.Body, &rep))
	var billed aifake.Usage
	for _, u := range []aifake.Usage{e.openai.Billed(), e.anthropic.Billed(), e.gemini.Billed()} {
		billed.InputTokens += u.InputTokens
		billed.OutputTokens += u.OutputTokens
	}
	assert.Equal(t, int64(4), rep.Total.Requests)
	assert.Equal(t, billed.InputTokens, rep.Total.InputTokens)
	assert.Equal(t, billed.OutputTokens, rep.Total.OutputTokens)
	assert.Positive(t, billed.InputTokens)
}

// An account's own key is never silently replaced by paid managed AI; the routes' access.
func TestAIOwnKeyAndAccess(t *testing.T) {
	t.Parallel()
	e := startAI(t)
	info := e.setKey(t, "anthropic", e.ownAnthropic)
	assert.Equal(t, "anthropic", info["provider"])
	assert.Len(t, info["fingerprint"], 12)

	res := e.respond(t, "own-1", aiBody("quality", "use my key"))
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, "byok", res.JSON(t)["billing"])
	assert.Equal(t, "anthropic", res.JSON(t)["provider"])

	// The provider refuses the account's key: that is the answer, no managed provider is tried.
	e.anthropic.FailNext(1, http.StatusUnauthorized)
	before := e.openai.Requests() + e.gemini.Requests()
	res = e.respond(t, "own-2", aiBody("quality", "use my key"))
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "byok_key_rejected", res.Code(t))
	e.anthropic.FailNext(1, http.StatusInternalServerError)
	res = e.respond(t, "own-3", aiBody("quality", "use my key"))
	assert.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
	assert.Equal(t, before, e.openai.Requests()+e.gemini.Requests(), "no managed key was used in its place")

	// Access: no token, a token without the scope, a plan without managed AI.
	noScope := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--scopes", "managed_ai:usage:read")["token"]
	fresh := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--scopes", "*")["token"]
	for _, c := range []struct {
		name, token string
		status      int
		code        string
	}{
		{"no token", "", 401, ""},
		{"without managed_ai:invoke", noScope, 403, "insufficient_scope"},
	} {
		res := e.s.do(req{Method: http.MethodPost, Path: aiResponses, Token: c.token, Body: aiBody("fast", "hi"),
			Headers: map[string]string{"Idempotency-Key": "access-" + c.name}})
		assert.Equal(t, c.status, res.Status, "%s: %s", c.name, res.Body)
		if c.code != "" {
			assert.Equal(t, c.code, res.Code(t), c.name)
		}
		conforms(t, http.MethodPost, aiResponses, aiResponses, res)
	}
	res = e.s.get(noScope, aiUsage)
	assert.Equal(t, http.StatusOK, res.Status, "managed_ai:usage:read reads the usage: %s", res.Body)
	e.s.adminJSON("account", "plan", "--account", e.s.demo.AccountID, "--features", "analytics")
	res = e.s.do(req{Method: http.MethodPost, Path: aiResponses, Token: fresh, Body: aiBody("fast", "hi"),
		Headers: map[string]string{"Idempotency-Key": "no-plan"}})
	assert.Equal(t, http.StatusPaymentRequired, res.Status, "%s", res.Body)
	assert.Equal(t, "feature_not_in_plan", res.Code(t))
	conforms(t, http.MethodPost, aiResponses, aiResponses, res)
	res = e.s.get(fresh, aiUsage)
	assert.Equal(t, http.StatusPaymentRequired, res.Status, "%s", res.Body)
}

// The operator reconciles the platform's ledger of managed usage with what the providers
// billed: here the fakes' own bills, written as an invoice file.
func TestAIReconcile(t *testing.T) {
	t.Parallel()
	e := startAI(t)
	for i, text := range []string{"one two three", "four five", "six"} {
		res := e.respond(t, "rec-"+string(rune('a'+i)), aiBody("fast", text))
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	}
	billed := e.gemini.Billed()
	require.Positive(t, billed.InputTokens)
	day := time.Now().UTC().Format(time.DateOnly)
	reconcile := func(invoice string) map[string]any {
		t.Helper()
		path := t.TempDir() + "/invoice.csv"
		require.NoError(t, os.WriteFile(path, []byte(invoice), 0o600))
		cmd := exec.Command(binary, "admin", "ai", "reconcile", "--from", day, "--to", day, "--invoice", path, "--data", e.s.dataDir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "%s %s", out, stderr.String())
		var m map[string]any
		require.NoError(t, json.Unmarshal(out, &m), "%s", out)
		return m
	}
	// gemini-2.0-flash's default price: 100 and 400 nano-USD a token.
	cost := func(in, out int64) string {
		return strconv.FormatFloat(float64(in*100+out*400)/1e9, 'f', 9, 64)
	}
	line := func(in, out int64) string {
		return fmt.Sprintf("%s,gemini,gemini-2.0-flash,%d,%d,%s\n", day, in, out, cost(in, out))
	}
	head := "date,provider,model,input_tokens,output_tokens,cost_usd\n"
	got := reconcile(head + line(billed.InputTokens, billed.OutputTokens))
	assert.Equal(t, float64(0), got["differences"], "%v", got)
	rows := got["rows"].([]any)
	require.Len(t, rows, 1)
	assert.Equal(t, "match", rows[0].(map[string]any)["status"])
	assert.Equal(t, float64(3), rows[0].(map[string]any)["metered"].(map[string]any)["requests"])

	// The provider billed a request the platform never metered.
	got = reconcile(head + line(billed.InputTokens+7, billed.OutputTokens+2))
	assert.Equal(t, float64(1), got["differences"])
	row := got["rows"].([]any)[0].(map[string]any)
	assert.Equal(t, "mismatch", row["status"])
	assert.Equal(t, float64(7), row["input_tokens_delta"])
}

// Both managed AI routes refuse a missing, malformed or unknown token with 401, and a token
// without the route's own scope with 403, each with its problem code.
func TestAIAuthentication(t *testing.T) {
	t.Parallel()
	e := startAI(t)
	invokeOnly := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--scopes", "managed_ai:invoke")["token"]
	usageOnly := e.s.admin("pat", "create", "--account", e.s.demo.AccountID, "--scopes", "managed_ai:usage:read")["token"]
	for _, c := range []struct {
		name, method, path, token string
		status                    int
		code                      string
	}{
		{"no token", http.MethodGet, aiUsage, "", 401, "missing_credentials"},
		{"malformed token", http.MethodGet, aiUsage, "mbp_not_a_token", 401, "invalid_token"},
		{"unknown token", http.MethodGet, aiUsage, auth.NewToken(auth.KindPAT), 401, "invalid_token"},
		{"without managed_ai:usage:read", http.MethodGet, aiUsage, invokeOnly, 403, "insufficient_scope"},
		{"no token", http.MethodPost, aiResponses, "", 401, "missing_credentials"},
		{"malformed token", http.MethodPost, aiResponses, "mbp_not_a_token", 401, "invalid_token"},
		{"unknown token", http.MethodPost, aiResponses, auth.NewToken(auth.KindPAT), 401, "invalid_token"},
		{"without managed_ai:invoke", http.MethodPost, aiResponses, usageOnly, 403, "insufficient_scope"},
	} {
		rq := req{Method: c.method, Path: c.path, Token: c.token}
		if c.method == http.MethodPost {
			rq.Body = aiBody("fast", "hi")
			rq.Headers = map[string]string{"Idempotency-Key": "auth-" + strings.ReplaceAll(c.name, " ", "-")}
		}
		problem(t, c.method, c.path, c.path, e.s.do(rq), c.status, c.code)
	}
	assert.Zero(t, e.openai.Requests()+e.anthropic.Requests()+e.gemini.Requests(), "no refused request reached a provider")

	// The same tokens do what their scope allows.
	res := e.s.get(usageOnly, aiUsage)
	assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.s.do(req{Method: http.MethodPost, Path: aiResponses, Token: invokeOnly, Body: aiBody("fast", "hi"),
		Headers: map[string]string{"Idempotency-Key": "auth-allowed"}})
	assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
}

// A generation is audited once, committed with its answer; its replay is audited too (a
// request like any other), the refused changed body as well; reads are not. No event holds
// the prompt, the answer or a key.
func TestAIAudit(t *testing.T) {
	t.Parallel()
	e := startAI(t)
	send := func(id, key string, b any) resp {
		return e.s.do(req{Method: http.MethodPost, Path: aiResponses, Token: e.tok, Body: b,
			Headers: map[string]string{"Idempotency-Key": key, "X-Request-Id": id}})
	}
	secretPrompt := "the customer's private question 5417"
	first := send("ai-audit-1", "k1", aiBody("fast", secretPrompt))
	require.Equal(t, 200, first.Status, "%s", first.Body)
	answer, _ := first.JSON(t)["output_text"].(string)
	require.NotEmpty(t, answer)
	replay := send("ai-audit-2", "k1", aiBody("fast", secretPrompt))
	require.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	require.Equal(t, 422, send("ai-audit-3", "k1", aiBody("fast", "another question")).Status)
	e.s.do(req{Method: http.MethodGet, Path: aiUsage, Token: e.tok, Headers: map[string]string{"X-Request-Id": "ai-audit-read"}})

	byReq := map[string][]map[string]any{}
	for _, ev := range auditEvents(t, e.s, e.tok, "") {
		if id, _ := ev["request_id"].(string); strings.HasPrefix(id, "ai-audit") {
			byReq[id] = append(byReq[id], ev)
		}
		b, err := json.Marshal(ev)
		require.NoError(t, err)
		assert.NotContains(t, string(b), secretPrompt)
		assert.NotContains(t, string(b), answer)
		for _, k := range e.managed {
			assert.NotContains(t, string(b), k)
		}
	}
	for id, status := range map[string]float64{"ai-audit-1": 200, "ai-audit-2": 200, "ai-audit-3": 422} {
		require.Len(t, byReq[id], 1, id)
		assert.Equal(t, "POST /api/v1/ai/responses", byReq[id][0]["route"], id)
		assert.Equal(t, status, byReq[id][0]["status"], id)
	}
	assert.Empty(t, byReq["ai-audit-read"], "reads are not audited")
}
