package tests

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// auditEvents reads the whole trail (all pages), newest first.
func auditEvents(t *testing.T, s *server, token, query string) []map[string]any {
	t.Helper()
	var out []map[string]any
	path := "/api/audit-events?limit=7" + query
	for {
		r := s.get(token, path)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		body := r.JSON(t)
		for _, e := range body["data"].([]any) {
			out = append(out, e.(map[string]any))
		}
		next, _ := body["next_cursor"].(string)
		if next == "" {
			return out
		}
		path = "/api/audit-events?limit=7" + query + "&cursor=" + next
	}
}

// Every authenticated mutation leaves exactly one event with its outcome, whatever the
// outcome; reads and unauthenticated calls leave none; no event carries a secret.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	s := start(t)
	other := s.newAccount("Other")
	bot := "/api/bots/" + s.demo.BotID
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]

	type call struct {
		req    req
		status int
		route  string
		bot    string
	}
	calls := []call{
		{req{Method: "POST", Path: "/api/bots", Body: map[string]any{"name": "Audited"}}, 201, "POST /api/bots", ""},
		{req{Method: "PATCH", Path: bot, Body: map[string]any{"expected_revision": 1, "name": "Renamed"}}, 200, "PATCH /api/bots/{botID}", s.demo.BotID},
		{req{Method: "PATCH", Path: bot, Body: map[string]any{"expected_revision": 1, "name": "Stale"}}, 409, "PATCH /api/bots/{botID}", s.demo.BotID},
		{req{Method: "PATCH", Path: bot, Body: `{"bogus":1}`}, 400, "PATCH /api/bots/{botID}", s.demo.BotID},
		{req{Method: "POST", Path: bot + "/api-tokens", Body: map[string]any{"name": "audited token"}}, 201, "POST /api/bots/{botID}/api-tokens", s.demo.BotID},
		{req{Method: "POST", Path: "/api/personal-access-tokens", Body: map[string]any{"name": "audited pat", "scopes": []string{"*"}, "expires_in_days": 1}}, 201, "POST /api/personal-access-tokens", ""},
		{req{Method: "DELETE", Path: "/api/bots/" + other.Bot}, 404, "DELETE /api/bots/{botID}", other.Bot},
		{req{Method: "POST", Path: "/api/bots", Token: readOnly, Body: map[string]any{"name": "no scope"}}, 403, "POST /api/bots", ""},
	}
	for i, c := range calls {
		if c.req.Token == "" {
			c.req.Token = s.demo.Token
		}
		c.req.Headers = map[string]string{"X-Request-Id": fmt.Sprintf("audit-mut-%d", i)}
		r := s.do(c.req)
		require.Equal(t, c.status, r.Status, "call %d: %s", i, r.Body)
		assert.Equal(t, fmt.Sprintf("audit-mut-%d", i), r.Header.Get("X-Request-Id"))
	}
	// Reads and refused credentials leave nothing.
	for i, p := range []string{"/api/bots", bot, bot + "/api-tokens", "/api/personal-access-tokens", "/api/nothing"} {
		s.do(req{Method: "GET", Path: p, Token: s.demo.Token, Headers: map[string]string{"X-Request-Id": fmt.Sprintf("audit-read-%d", i)}})
	}
	s.do(req{Method: "POST", Path: "/api/bots", Body: map[string]any{"name": "x"}, Headers: map[string]string{"X-Request-Id": "audit-unauth"}})

	events := auditEvents(t, s, s.demo.Token, "")
	byReq := map[string][]map[string]any{}
	for _, e := range events {
		byReq[e["request_id"].(string)] = append(byReq[e["request_id"].(string)], e)
	}
	for i, c := range calls {
		got := byReq[fmt.Sprintf("audit-mut-%d", i)]
		require.Len(t, got, 1, "call %d (%s) must have exactly one event", i, c.route)
		e := got[0]
		assert.Equal(t, c.req.Method, e["method"])
		assert.Equal(t, c.route, e["route"], "route template, not path")
		assert.Equal(t, float64(c.status), e["status"])
		assert.Equal(t, s.demo.AccountID, e["account_id"])
		assert.Equal(t, s.demo.UserID, e["actor_user_id"])
		assert.Equal(t, "pat", e["token_kind"])
		assert.NotEmpty(t, e["token_id"])
		assert.NotEmpty(t, e["time"])
		assert.Regexp(t, `^evt_`, e["id"])
		if c.bot != "" {
			assert.Equal(t, c.bot, e["bot_id"])
		} else {
			assert.NotContains(t, e, "bot_id")
		}
	}
	for id := range byReq {
		assert.NotRegexp(t, `^audit-(read|unauth)`, id, "reads and 401s are not audited")
	}
	require.Len(t, events, len(calls))
	for i := 1; i < len(events); i++ {
		assert.GreaterOrEqual(t, events[i-1]["id"], events[i]["id"], "newest first")
	}
	// The other account's trail has none of it, and ours none of theirs.
	assert.Empty(t, auditEvents(t, s, other.Token, ""))

	// Filter by bot.
	filtered := auditEvents(t, s, s.demo.Token, "&bot_id="+s.demo.BotID)
	assert.Len(t, filtered, 4)
	for _, e := range filtered {
		assert.Equal(t, s.demo.BotID, e["bot_id"])
	}
	r := s.get(s.demo.Token, "/api/audit-events?bot_id=nope")
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, "invalid_parameter", r.Code(t))
}
