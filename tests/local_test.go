package tests

import (
	"cmp"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

var curlRe = regexp.MustCompile(`curl -H "Authorization: Bearer (mbp_\w+)" (http://\S+)`)

// The first start creates the demo account and prints a curl line that works as printed.
func TestFirstStartPrintsWorkingCurl(t *testing.T) {
	t.Parallel()
	s := start(t)
	out := s.stdout.String()
	m := curlRe.FindStringSubmatch(out)
	require.NotNil(t, m, "no curl line in:\n%s", out)
	assert.Equal(t, s.demo.Token, m[1])
	hr, err := http.NewRequest(http.MethodGet, m[2], nil)
	require.NoError(t, err)
	hr.Header.Set("Authorization", "Bearer "+m[1])
	res, err := http.DefaultClient.Do(hr)
	require.NoError(t, err)
	defer res.Body.Close()
	var bot map[string]any
	require.NoError(t, json.NewDecoder(res.Body).Decode(&bot))
	assert.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, s.demo.BotID, bot["id"])

	// Every file of the data directory holds account data or keys: the owner's alone.
	files, err := os.ReadDir(s.dataDir)
	require.NoError(t, err)
	var names []string
	for _, f := range files {
		fi, err := f.Info()
		require.NoError(t, err)
		names = append(names, f.Name())
		if f.IsDir() {
			assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), f.Name())
			continue
		}
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f.Name())
	}
	assert.Subset(t, names, []string{"bootstrap.json", "master.key", "store.db", "store.db-wal", "store.db-shm"})
	for _, k := range []string{"account_id", "user_id", "bot_id", "token"} {
		assert.Contains(t, out, map[string]string{"account_id": s.demo.AccountID, "user_id": s.demo.UserID, "bot_id": s.demo.BotID, "token": s.demo.Token}[k])
	}
}

// A restart over existing data keeps the demo account and its token, and creates nothing new.
func TestRestartKeepsData(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1 := startIn(t, dir)
	created := s1.post(s1.demo.Token, "/api/bots", map[string]any{"name": "Persisted"}).JSON(t)["id"].(string)
	s1.stop()
	require.Contains(t, s1.stderr.String(), `"msg":"stopped"`, "graceful shutdown")

	s2 := startIn(t, dir)
	assert.Contains(t, s2.stdout.String(), "Using the existing data")
	assert.NotContains(t, s2.stdout.String(), "token:")
	assert.Equal(t, s1.demo, s2.demo)
	s2.secrets[s2.demo.Token] = 1
	r := s2.get(s2.demo.Token, "/api/bots/"+created)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "Persisted", r.JSON(t)["name"])
	assert.Len(t, s2.get(s2.demo.Token, "/api/bots").JSON(t)["data"], 2)
}

// Asking for help is not a mistake: usage on stdout, exit 0, for admin and each command.
func TestAdminHelp(t *testing.T) {
	t.Parallel()
	s := start(t)
	for _, h := range []string{"--help", "-h", "help"} {
		out, code := s.adminRaw(h)
		assert.Equal(t, 0, code, h)
		assert.Contains(t, string(out), "local admin pat create", h)
	}
	out, code := s.adminRaw("pat", "create", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, string(out), "-scopes")
	assert.Contains(t, string(out), "-expires-in")
	out, code = s.adminRaw("channel", "connect", "-h")
	assert.Equal(t, 0, code)
	assert.Contains(t, string(out), "-token")

	// A mistake still answers one JSON error with exit 2.
	out, code = s.adminRaw("pat", "create", "--nope")
	assert.Equal(t, 2, code)
	var m map[string]string
	require.NoError(t, json.Unmarshal(out, &m), "%s", out)
	assert.Contains(t, m["error"], "nope")
}

// A path with an empty or dot segment is a problem like any unknown route, not an HTML
// redirect to another path.
func TestNonCanonicalPathIsProblem(t *testing.T) {
	t.Parallel()
	s := start(t)
	for _, p := range []string{"/api//bots", "/api/bots/" + s.demo.BotID + "/../" + s.demo.BotID} {
		r := s.get(s.demo.Token, p)
		assert.Equal(t, http.StatusNotFound, r.Status, p)
		assert.Equal(t, "not_found", r.Code(t), p)
		assert.Empty(t, r.Header.Get("Location"), p)
	}
}

// The admin CLI's contract: exact command names, one JSON object each, working while serve runs.
func TestAdminCLI(t *testing.T) {
	t.Parallel()
	s := start(t)
	b1 := s.admin("bootstrap")
	b2 := s.admin("bootstrap")
	assert.Equal(t, s.demo.AccountID, b1["account_id"], "reuses the demo account")
	assert.Equal(t, s.demo.BotID, b1["bot_id"], "reuses the demo bot")
	assert.Equal(t, s.demo.UserID, b1["user_id"])
	assert.NotEqual(t, b1["token"], b2["token"], "a new token each call")
	assert.Len(t, b1, 4)
	assert.Equal(t, http.StatusOK, s.get(b2["token"], "/api/personal-access-tokens").Status, "full access")

	acct := s.admin("account", "create", "--name", "Acme")
	assert.Regexp(t, `^acct_`, acct["account_id"])
	assert.Regexp(t, `^usr_`, acct["user_id"])
	user := s.admin("user", "create", "--account", acct["account_id"], "--rights", "reactions,analytics")
	assert.Regexp(t, `^usr_`, user["user_id"])
	bot := s.admin("bot", "create", "--account", acct["account_id"], "--name", "Acme bot")
	assert.Regexp(t, `^bot_`, bot["bot_id"])
	pat := s.admin("pat", "create", "--account", acct["account_id"], "--scopes", "bots:read,bots:write", "--expires-in", "1h")
	assert.Regexp(t, `^pat_`, pat["token_id"])
	assert.Regexp(t, `^mbp_`, pat["token"])
	assert.NotEmpty(t, pat["expires_at"])
	r := s.get(pat["token"], "/api/bots")
	require.Equal(t, http.StatusOK, r.Status)
	assert.Len(t, r.JSON(t)["data"], 1)

	// The member's rights apply on every bot of the account.
	memberTok := s.admin("pat", "create", "--account", acct["account_id"], "--user", user["user_id"], "--scopes", "bots:write,bots:read")["token"]
	assert.Equal(t, http.StatusOK, s.patch(memberTok, "/api/bots/"+bot["bot_id"], map[string]any{"expected_revision": 1, "name": "x"}).Status)
	r = s.post(memberTok, "/api/bots/"+bot["bot_id"]+"/api-tokens", map[string]any{"name": "x"})
	assert.Equal(t, http.StatusForbidden, r.Status, "no dialogs right")

	// Errors are one JSON object too, with a non-zero exit.
	for _, args := range [][]string{
		{"user", "create", "--account", "acct_missing", "--rights", ""},
		{"pat", "create", "--account", acct["account_id"], "--scopes", "bots:fly"},
		{"pat", "create", "--account", acct["account_id"], "--scopes", "*", "--expires-in", "400d"},
		{"user", "create", "--account", acct["account_id"], "--rights", "root"},
		{"bot", "create", "--account", "acct_missing", "--name", "x"},
	} {
		out, code := s.adminRaw(args...)
		assert.NotEqual(t, 0, code, "%v", args)
		var m map[string]string
		require.NoError(t, json.Unmarshal(out, &m), "%v: %s", args, out)
		assert.NotEmpty(t, m["error"], "%v", args)
	}
}

// One JSON log line per request, with its id; never a token.
func TestRequestLogsAndIDs(t *testing.T) {
	t.Parallel()
	s := start(t)
	r := s.do(req{Method: "GET", Path: "/api/bots", Token: s.demo.Token, Headers: map[string]string{"X-Request-Id": "trace-123"}})
	assert.Equal(t, "trace-123", r.Header.Get("X-Request-Id"))
	for _, bad := range []string{strings.Repeat("a", 200), "has spaces", "semi;colon", "x" + s.demo.Token} {
		r := s.do(req{Method: "GET", Path: "/api/bots", Token: s.demo.Token, Headers: map[string]string{"X-Request-Id": bad}})
		assert.Regexp(t, `^req_`, r.Header.Get("X-Request-Id"), "replaced %q", bad)
	}
	r = s.get("", "/api/bots")
	assert.Regexp(t, `^req_`, r.Header.Get("X-Request-Id"))
	assert.Equal(t, r.Header.Get("X-Request-Id"), r.JSON(t)["request_id"], "the problem names the request")

	var found bool
	for _, l := range s.logLines() {
		if l["msg"] == "request" && l["request_id"] == "trace-123" {
			found = true
			assert.Equal(t, "GET /api/bots", l["route"])
			assert.Equal(t, float64(200), l["status"])
			assert.Equal(t, s.demo.AccountID, l["account_id"])
			assert.Equal(t, s.demo.TokenID, l["token_id"])
		}
	}
	assert.True(t, found, "request log line for trace-123")
	assert.NotContains(t, s.stderr.String(), "Bearer")
}

// Every documented create operation's example succeeds as sent to a fresh process's demo bot.
// The process talks to a fake WhatsApp, whose account is the one the channel example connects.
func TestOpenAPIExamplesSucceed(t *testing.T) {
	t.Parallel()
	wa := fakewhatsapp.New(t)
	s := startWith(t, t.TempDir(), "--whatsapp-base-url", wa.URL(), "--whatsapp-app-id", fakewhatsapp.AppID)
	r := s.get("", "/openapi.yaml")
	require.Equal(t, http.StatusOK, r.Status)
	doc, err := openapi3.NewLoader().LoadFromData(r.Body)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	// Creates first, parents before children, so that the ids their Location headers
	// reveal fill the path parameters of the examples that follow.
	type operation struct {
		method, path string
		op           *openapi3.Operation
	}
	var ops []operation
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			ops = append(ops, operation{method, path, op})
		}
	}
	creates := func(o operation) bool { _, ok := o.op.Responses.Map()["201"]; return ok && o.op.RequestBody != nil }
	slices.SortFunc(ops, func(a, b operation) int {
		if ca, cb := creates(a), creates(b); ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return cmp.Or(strings.Compare(a.path, b.path), strings.Compare(a.method, b.method))
	})
	params := map[string]string{"botID": s.demo.BotID}
	sent := 0
	for _, o := range ops {
		method, path, op := o.method, o.path, o.op
		if op.RequestBody == nil || op.RequestBody.Value == nil {
			continue
		}
		mt := op.RequestBody.Value.Content.Get("application/json")
		if mt == nil {
			continue
		}
		var examples []any
		if mt.Example != nil {
			examples = append(examples, mt.Example)
		}
		for _, ex := range mt.Examples {
			if ex.Value != nil {
				examples = append(examples, ex.Value.Value)
			}
		}
		if _, creates := op.Responses.Map()["201"]; creates {
			assert.NotEmpty(t, examples, "%s %s creates a resource but has no request example", method, path)
		}
		if needs, ok := op.Extensions["x-example-needs"].(string); ok {
			// Documented, but its precondition lies outside the API (published DNS records).
			t.Logf("%s %s: not sent: the example needs %s", method, path, needs)
			continue
		}
		for _, ex := range examples {
			target := path
			for name, v := range params {
				target = strings.ReplaceAll(target, "{"+name+"}", v)
			}
			res := s.do(req{Method: method, Path: target, Token: s.demo.Token, Body: ex})
			assert.True(t, res.Status >= 200 && res.Status < 300, "example of %s %s: %d %s", method, path, res.Status, res.Body)
			if res.Status == http.StatusCreated {
				learnParams(doc, res.Header.Get("Location"), params)
			}
			sent++
		}
	}
	assert.GreaterOrEqual(t, sent, 3)
}

// learnParams binds the path parameters a created resource's Location fills
// ("/api/bots/bot_1/collections/col_2" gives collectionID); bound ones keep their value.
func learnParams(doc *openapi3.T, location string, params map[string]string) {
	got := strings.Split(location, "/")
	for template := range doc.Paths.Map() {
		want := strings.Split(template, "/")
		if location == "" || len(want) != len(got) {
			continue
		}
		bound := map[string]string{}
		for i, w := range want {
			if name, ok := strings.CutPrefix(w, "{"); ok {
				bound[strings.TrimSuffix(name, "}")] = got[i]
			} else if w != got[i] {
				bound = nil
				break
			}
		}
		for name, v := range bound {
			if _, ok := params[name]; !ok {
				params[name] = v
			}
		}
	}
}

// Per-bot rights: a user with no account-wide right gets one on one bot only.
func TestAdminUserGrantIsPerBot(t *testing.T) {
	t.Parallel()
	s := start(t)
	other := s.post(s.demo.Token, "/api/bots", map[string]any{"name": "Other"}).JSON(t)["id"].(string)
	user := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "")["user_id"]
	out, code := s.adminRaw("user", "grant", "--account", s.demo.AccountID, "--user", user, "--bot", s.demo.BotID, "--rights", "reactions")
	require.Equal(t, 0, code, "%s", out)
	var granted map[string]any
	require.NoError(t, json.Unmarshal(out, &granted))
	assert.Equal(t, []any{"reactions"}, granted["rights"])
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", user, "--scopes", "bots:*")["token"]

	assert.Equal(t, http.StatusOK, s.patch(tok, "/api/bots/"+s.demo.BotID, map[string]any{"expected_revision": 1, "name": "Granted"}).Status)
	r := s.patch(tok, "/api/bots/"+other, map[string]any{"expected_revision": 1, "name": "Not granted"})
	assert.Equal(t, http.StatusForbidden, r.Status)
	assert.Equal(t, "missing_right", r.Code(t))

	for _, args := range [][]string{
		{"user", "grant", "--account", s.demo.AccountID, "--user", user, "--bot", "bot_00000000000000000000000000", "--rights", "reactions"},
		{"user", "grant", "--account", s.demo.AccountID, "--user", "usr_00000000000000000000000000", "--bot", s.demo.BotID, "--rights", "reactions"},
		{"user", "grant", "--account", s.demo.AccountID, "--user", user, "--bot", s.demo.BotID, "--rights", "root"},
	} {
		out, code := s.adminRaw(args...)
		assert.NotEqual(t, 0, code, "%v", args)
		assert.Contains(t, string(out), `"error"`, "%v", args)
	}
}
