package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requestLog reads a bot's whole request log (following cursors); each read has a request id
// starting with "poll-" so the test can tell its reads from the requests under test.
func requestLog(t *testing.T, s *server, token, bot, query string) []map[string]any {
	t.Helper()
	var out []map[string]any
	cursor := ""
	for i := 0; ; i++ {
		path := "/api/bots/" + bot + "/request-logs?limit=200" + query
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := s.do(req{Method: "GET", Path: path, Token: token, Headers: map[string]string{"X-Request-Id": fmt.Sprintf("poll-%d-%d", time.Now().UnixNano(), i)}})
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		body := r.JSON(t)
		for _, e := range body["data"].([]any) {
			out = append(out, e.(map[string]any))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return out
		}
		cursor = next
	}
}

// The request log holds exactly the requests made against the bot by its account, reads
// included, and nothing else.
func TestRequestLogsRecordExactlyTheRequestsMade(t *testing.T) {
	t.Parallel()
	s := start(t)
	other := s.newAccount("Other")
	bot := "/api/bots/" + s.demo.BotID
	second := s.post(s.demo.Token, "/api/bots", map[string]any{"name": "Second"}).JSON(t)["id"].(string)
	mint := req{Method: "POST", Path: bot + "/api-tokens", Token: s.demo.Token, Body: map[string]any{"name": "ci"},
		Headers: map[string]string{"X-Request-Id": "rl-setup"}}
	botTok := s.do(mint).JSON(t)
	noRights := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "")["user_id"]
	noRightsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noRights, "--scopes", "*")["token"]

	type call struct {
		r      req
		status int
		route  string
		kind   string
		logged bool
	}
	calls := []call{
		{req{Method: "GET", Path: bot, Token: s.demo.Token}, 200, "GET /api/bots/{botID}", "pat", true},
		{req{Method: "PATCH", Path: bot, Token: s.demo.Token, Body: map[string]any{"expected_revision": 9, "name": "x"}}, 409, "PATCH /api/bots/{botID}", "pat", true},
		{req{Method: "PATCH", Path: bot, Token: noRightsTok, Body: map[string]any{"expected_revision": 1, "name": "x"}}, 403, "PATCH /api/bots/{botID}", "pat", true},
		{req{Method: "GET", Path: bot + "/api-tokens", Token: s.demo.Token}, 200, "GET /api/bots/{botID}/api-tokens", "pat", true},
		{req{Method: "GET", Path: bot, Token: botTok["token"].(string)}, 200, "GET /api/bots/{botID}", "bot", true},
		{req{Method: "PATCH", Path: bot, Token: s.demo.Token, Body: `{"bogus":1}`}, 400, "PATCH /api/bots/{botID}", "pat", true},
		// Not against this bot by its account: never in its log.
		{req{Method: "GET", Path: bot, Token: other.Token}, 404, "", "", false},
		{req{Method: "GET", Path: bot}, 401, "", "", false},
		{req{Method: "GET", Path: "/api/bots", Token: s.demo.Token}, 200, "", "", false},
		{req{Method: "GET", Path: "/api/bots/" + second, Token: s.demo.Token}, 200, "", "", false},
		{req{Method: "GET", Path: bot, Token: s.demo.Token[:10]}, 401, "", "", false},
	}
	want := map[string]call{"rl-setup": {mint, 201, "POST /api/bots/{botID}/api-tokens", "pat", true}}
	for i, c := range calls {
		id := fmt.Sprintf("rl-%d", i)
		c.r.Headers = map[string]string{"X-Request-Id": id}
		r := s.do(c.r)
		require.Equal(t, c.status, r.Status, "call %d: %s", i, r.Body)
		if c.logged {
			want[id] = c
		}
	}

	// Entries are written in the background within a fraction of a second.
	var entries []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries = requestLog(t, s, s.demo.Token, s.demo.BotID, "")
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e["request_id"].(string), "rl-") {
				n++
			}
		}
		if n >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var got []string
	for _, e := range entries {
		id := e["request_id"].(string)
		if strings.HasPrefix(id, "poll-") {
			assert.Equal(t, "GET /api/bots/{botID}/request-logs", e["route"], "reading the log is a request against the bot too")
			continue
		}
		got = append(got, id)
		c, ok := want[id]
		if !assert.True(t, ok, "unexpected entry %v", e) {
			continue
		}
		assert.Equal(t, c.r.Method, e["method"], id)
		assert.Equal(t, c.route, e["route"], id)
		assert.Equal(t, float64(c.status), e["status"], id)
		assert.Equal(t, c.kind, e["token_kind"], id)
		assert.Equal(t, s.demo.BotID, e["bot_id"], id)
		assert.NotEmpty(t, e["token_id"], id)
		assert.GreaterOrEqual(t, e["latency_ms"], 0.0, id)
		assert.Regexp(t, `^rlg_`, e["id"])
	}
	var wantIDs []string
	for id := range want {
		wantIDs = append(wantIDs, id)
	}
	sort.Strings(got)
	sort.Strings(wantIDs)
	assert.Equal(t, wantIDs, got, "exactly the requests made against the bot")
	for i := 1; i < len(entries); i++ {
		assert.GreaterOrEqual(t, entries[i-1]["id"], entries[i]["id"], "newest first")
	}
	for _, e := range requestLog(t, s, s.demo.Token, second, "") {
		id := e["request_id"].(string)
		assert.True(t, id == "rl-9" || strings.HasPrefix(id, "poll-"), "the second bot's log has its own requests only: %s", id)
	}

	// Filters.
	for _, e := range requestLog(t, s, s.demo.Token, s.demo.BotID, "&status=4xx") {
		assert.Equal(t, "4", fmt.Sprint(e["status"])[:1])
	}
	patches := requestLog(t, s, s.demo.Token, s.demo.BotID, "&route="+url.QueryEscape("PATCH /api/bots/{botID}"))
	assert.Len(t, patches, 3)
	conflicts := requestLog(t, s, s.demo.Token, s.demo.BotID, "&status=4xx&route="+url.QueryEscape("PATCH /api/bots/{botID}"))
	assert.Len(t, conflicts, 3)
	for q, param := range map[string]string{"?status=2XX": "status", "?status=600": "status", "?route=nope": "route"} {
		r := s.get(s.demo.Token, bot+"/request-logs"+q)
		assert.Equal(t, http.StatusBadRequest, r.Status, q)
		assert.Equal(t, param, r.JSON(t)["parameter"], q)
	}
	// The bot token reads its own bot's log; the logs need the analytics right and logs:read.
	assert.Equal(t, http.StatusOK, s.get(botTok["token"].(string), bot+"/request-logs").Status)
	assert.Equal(t, "missing_right", s.get(noRightsTok, bot+"/request-logs").Code(t))
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	assert.Equal(t, "insufficient_scope", s.get(readOnly, bot+"/request-logs").Code(t))
	assert.Equal(t, http.StatusNotFound, s.get(other.Token, bot+"/request-logs").Status)
}
