package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// broadcastTools are the MCP tools of the broadcasts family, and whether each changes
// something.
var broadcastTools = map[string]bool{
	"start_broadcast": true, "get_broadcast": false, "pause_broadcast": true, "resume_broadcast": true,
	"cancel_broadcast": true, "list_content_broadcasts": false, "get_content_broadcast_report": false,
}

// legacyReport is the Telegram channel of a legacy broadcast's report, as get_broadcast
// answers it.
func legacyReport(t *testing.T, b map[string]any) fanoutReport {
	t.Helper()
	raw, err := json.Marshal(b["report"])
	require.NoError(t, err)
	var rep struct {
		Channels []struct {
			Channel string `json:"channel"`
			fanoutReport
		} `json:"channels"`
	}
	require.NoError(t, json.Unmarshal(raw, &rep))
	for _, c := range rep.Channels {
		if c.Channel == "telegram" {
			return c.fanoutReport
		}
	}
	return fanoutReport{}
}

// The broadcast tools over the real process, with the SDK's client: listed with strict
// schemas; a legacy reaction broadcast started over MCP really sends (the fake Telegram gets
// the reaction's message), is paused mid-send, resumed and completes with everyone served
// exactly once; another is canceled; pause, resume and cancel refuse a second-generation
// broadcast (422 unsupported_broadcast_type, nothing changes), which get_broadcast,
// list_content_broadcasts and get_content_broadcast_report read as their routes do; every
// call of a mutating tool is audited, reads are not.
func TestMCPBroadcastTools(t *testing.T) {
	t.Parallel()
	// Slow sending (5 a second), so that a pause lands in the middle of a send.
	f := startFanout(t, "BROADCAST_RATE_TELEGRAM=5")
	s, tok, bot := f.s, f.tok, f.s.demo.BotID
	r := s.post(tok, f.api+"/labels", map[string]any{"name": "vip"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	vip := r.JSON(t)["id"].(string)
	const n = 20
	vips := f.subscribe(t, 31000, n, map[string]any{"labels": []string{vip}})
	others := f.subscribe(t, 31100, 2, nil)
	sale := f.publish(t, `{"name":"Sale","trigger":{"type":"api"},"steps":[{"id":"s","type":"send_text","text":"Flash sale"}]}`)
	closing := f.publish(t, `{"name":"Closing","trigger":{"type":"api"},"steps":[{"id":"s","type":"send_text","text":"We close early"}]}`)

	cs := s.mcpClient(t, tok, "mcp-bc")
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	listed := map[string]*mcpsdk.Tool{}
	for _, tool := range list.Tools {
		listed[tool.Name] = tool
	}
	for name, mutates := range broadcastTools {
		tool := listed[name]
		if !assert.NotNil(t, tool, "tools/list has %s", name) {
			continue
		}
		assert.Equal(t, !mutates, tool.Annotations.ReadOnlyHint, name)
		assert.Contains(t, tool.Description, "Scope: `broadcasts:write`. Bot rights: `reactions`. Plan feature: `broadcasts`.", name)
		schema, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		assert.Contains(t, string(schema), `"additionalProperties":false`, "%s: strict input schema", name)
	}
	assert.Contains(t, listed["pause_broadcast"].Description, "legacy reaction broadcasts", "the tool says what it acts on")

	// An unknown argument is refused and named, before anything is done.
	p, isError := callTool(t, cs, "start_broadcast", map[string]any{"bot_id": bot, "reaction_id": sale, "audience": "all"})
	require.True(t, isError)
	assert.Equal(t, "unknown_field", p["code"])
	assert.Contains(t, p["detail"], `unknown argument "audience"`)
	// The route's own checks: paid broadcasts are not enabled for the bot.
	p, isError = callTool(t, cs, "start_broadcast", map[string]any{"bot_id": bot, "reaction_id": sale, "paid": true, "labels": []string{vip}})
	require.True(t, isError)
	assert.Equal(t, float64(403), p["status"])
	assert.Equal(t, "paid_broadcasts_not_enabled", p["code"])

	// Start: the answer is the legacy broadcast.
	started, isError := callTool(t, cs, "start_broadcast", map[string]any{"bot_id": bot, "reaction_id": sale, "labels": []string{vip}})
	require.False(t, isError, "%v", started)
	id := started["id"].(string)
	assert.True(t, strings.HasPrefix(id, "lbc_"), id)
	assert.Equal(t, "reaction_broadcast", started["type"])
	assert.Equal(t, []any{vip}, started["labels"])
	one := map[string]any{"bot_id": bot, "broadcast_id": id}

	// Pause mid-send.
	paused, isError := callTool(t, cs, "pause_broadcast", one)
	require.False(t, isError, "the broadcast finished before it could be paused (raise n): %v", paused)
	assert.Equal(t, map[string]any{"status": "pausing"}, paused)
	b, isError := callTool(t, cs, "get_broadcast", one)
	require.False(t, isError, "%v", b)
	assert.Equal(t, "paused", b["status"])
	assert.Less(t, legacyReport(t, b).Sent, int64(n), "the pause landed mid-send")
	p, isError = callTool(t, cs, "pause_broadcast", one)
	require.True(t, isError)
	assert.Equal(t, "invalid_transition", p["code"], "a paused broadcast is not paused again")
	assert.Equal(t, "paused", p["state"])

	// Resume: it continues where it stopped, and everyone with the label gets the message once.
	resumed, isError := callTool(t, cs, "resume_broadcast", one)
	require.False(t, isError, "%v", resumed)
	assert.Equal(t, map[string]any{"status": "resuming"}, resumed)
	eventually(t, 60*time.Second, "the resumed broadcast completes and every run has sent", func() bool {
		b, _ = callTool(t, cs, "get_broadcast", one)
		return b["status"] == "completed" && len(f.tg.AllSent()) >= n
	})
	got := f.received()
	for _, sub := range vips {
		assert.Equal(t, 1, got[f.chats[sub]], "subscriber %s got the broadcast once", sub)
	}
	for _, sub := range others {
		assert.Zero(t, got[f.chats[sub]], "subscriber %s has no vip label", sub)
	}
	assert.EqualValues(t, n, legacyReport(t, b).Sent)
	rest := s.get(tok, f.api+"/broadcasts/"+id)
	require.Equal(t, 200, rest.Status, "%s", rest.Body)
	assert.Equal(t, rest.JSON(t), b, "get_broadcast answers what the shared GET answers")
	p, isError = callTool(t, cs, "cancel_broadcast", one)
	require.True(t, isError)
	assert.Equal(t, float64(409), p["status"])
	assert.Equal(t, "invalid_transition", p["code"])
	assert.Equal(t, "completed", p["state"])

	// Cancel another before it is done: it stops, and nobody gets it twice.
	second, isError := callTool(t, cs, "start_broadcast", map[string]any{"bot_id": bot, "reaction_id": closing})
	require.False(t, isError, "%v", second)
	two := map[string]any{"bot_id": bot, "broadcast_id": second["id"]}
	canceled, isError := callTool(t, cs, "cancel_broadcast", two)
	require.False(t, isError, "the broadcast finished before it could be canceled: %v", canceled)
	assert.Equal(t, map[string]any{"status": "canceled"}, canceled)
	b, _ = callTool(t, cs, "get_broadcast", two)
	assert.Equal(t, "canceled", b["status"])
	eventually(t, 30*time.Second, "the canceled send settles", func() bool {
		b, _ = callTool(t, cs, "get_broadcast", two)
		return legacyReport(t, b).Pending == 0
	})
	for chat, times := range f.received() {
		assert.LessOrEqual(t, times, 2, "chat %d: at most the sale and the closing message", chat)
	}

	// A second-generation broadcast: read by the tools as by its routes; never paused,
	// resumed or canceled by them.
	draft := f.draft(t, "Spring")
	bc := draft[len(f.api+"/broadcasts/"):]
	gen2 := map[string]any{"bot_id": bot, "broadcast_id": bc}
	before := s.get(tok, draft)
	require.Equal(t, 200, before.Status, "%s", before.Body)
	for _, tool := range []string{"pause_broadcast", "resume_broadcast", "cancel_broadcast"} {
		p, isError := callTool(t, cs, tool, gen2)
		require.True(t, isError, tool)
		assert.Equal(t, float64(422), p["status"], tool)
		assert.Equal(t, "unsupported_broadcast_type", p["code"], tool)
		assert.Contains(t, p["detail"], "POST /api/bots/"+bot+"/broadcasts/"+bc+"/", "%s says where it is done", tool)
	}
	got2, isError := callTool(t, cs, "get_broadcast", gen2)
	require.False(t, isError, "%v", got2)
	assert.Equal(t, before.JSON(t), got2, "unchanged, and get_broadcast answers the shared GET")
	report, isError := callTool(t, cs, "get_content_broadcast_report", gen2)
	require.False(t, isError, "%v", report)
	rest = s.get(tok, draft+"/report")
	require.Equal(t, 200, rest.Status, "%s", rest.Body)
	assert.Equal(t, rest.JSON(t), report)
	p, isError = callTool(t, cs, "get_content_broadcast_report", one)
	require.True(t, isError)
	assert.Equal(t, float64(404), p["status"], "the report tool is the second generation's, as its route")
	listed2, isError := callTool(t, cs, "list_content_broadcasts", map[string]any{"bot_id": bot, "archived": true})
	require.False(t, isError, "%v", listed2)
	rest = s.get(tok, f.api+"/broadcasts?archived=true")
	require.Equal(t, 200, rest.Status, "%s", rest.Body)
	assert.Equal(t, rest.JSON(t)["data"], listed2["data"])
	require.Len(t, listed2["data"], 1, "legacy broadcasts are not listed")
	p, isError = callTool(t, cs, "pause_broadcast", map[string]any{"bot_id": bot, "broadcast_id": "lbc_00000000000000000000000000"})
	require.True(t, isError)
	assert.Equal(t, "not_found", p["code"])

	// The audit trail: one event per call of a mutating tool, with its outcome; none for reads.
	var calls []string
	for _, e := range auditEvents(t, s, tok, "") {
		rid, _ := e["request_id"].(string)
		if !strings.HasPrefix(rid, "mcp-bc") {
			continue
		}
		route := e["route"].(string)
		tool, ok := strings.CutPrefix(route, "POST /mcp/tools/")
		require.True(t, ok, "an MCP request audited as %s", route)
		assert.True(t, broadcastTools[tool], "%s is a read: not audited", tool)
		assert.Equal(t, "POST", e["method"])
		if e["status"] == float64(400) {
			assert.Nil(t, e["bot_id"], "arguments that do not decode name no bot")
		} else {
			assert.Equal(t, bot, e["bot_id"], tool)
		}
		calls = append(calls, tool+" "+jsonNumber(e["status"]))
	}
	// Newest first.
	assert.Equal(t, []string{
		"pause_broadcast 404",
		"cancel_broadcast 422", "resume_broadcast 422", "pause_broadcast 422",
		"cancel_broadcast 200", "start_broadcast 200",
		"cancel_broadcast 409", "resume_broadcast 200", "pause_broadcast 409", "pause_broadcast 200",
		"start_broadcast 200", "start_broadcast 403", "start_broadcast 400",
	}, calls)
}

func jsonNumber(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// The broadcast tools need what their routes need, and fail closed over MCP as they do over
// REST: a token without broadcasts:write (403 insufficient_scope), a user without the
// Reactions right (403 missing_right), another account's bot (404), and an account whose plan
// lacks broadcasts (402 feature_not_in_plan), for reads and changes alike; a refused change
// is audited with its status.
func TestMCPBroadcastToolsRefused(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := s.demo.BotID
	other := s.newAccount("Other")
	botsOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	noReactions := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "dialogs")["user_id"]
	noReactionsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noReactions, "--scopes", "*")["token"]
	rct := mustCreate(t, s.post(s.demo.Token, "/api/bots/"+bot+"/reactions", map[string]any{"name": "Menu", "trigger": map[string]any{"type": "api"}}))
	narrow := s.mcpClient(t, botsOnly, "")
	full := s.mcpClient(t, s.demo.Token, "mcp-refused")

	cases := []struct {
		name   string
		cs     *mcpsdk.ClientSession
		tool   string
		args   map[string]any
		status float64
		code   string
	}{
		{"narrow PAT, read", narrow, "list_content_broadcasts", map[string]any{"bot_id": bot}, 403, "insufficient_scope"},
		{"narrow PAT, change", narrow, "start_broadcast", map[string]any{"bot_id": bot, "reaction_id": rct}, 403, "insufficient_scope"},
		{"user without the reactions right", s.mcpClient(t, noReactionsTok, ""), "get_broadcast", map[string]any{"bot_id": bot, "broadcast_id": "lbc_00000000000000000000000000"}, 403, "missing_right"},
		{"another account's bot", full, "pause_broadcast", map[string]any{"bot_id": other.Bot, "broadcast_id": "lbc_00000000000000000000000000"}, 404, "not_found"},
		{"unknown argument", full, "list_content_broadcasts", map[string]any{"bot_id": bot, "status": "running"}, 400, "unknown_field"},
		{"missing broadcast", full, "get_content_broadcast_report", map[string]any{"bot_id": bot}, 400, "validation_failed"},
		{"unpublished reaction", full, "start_broadcast", map[string]any{"bot_id": bot, "reaction_id": rct}, 409, "broadcast_not_ready"},
	}
	for _, c := range cases {
		p, isError := callTool(t, c.cs, c.tool, c.args)
		assert.True(t, isError, c.name)
		assert.Equal(t, c.status, p["status"], "%s: %v", c.name, p)
		assert.Equal(t, c.code, p["code"], c.name)
	}
	p, _ := callTool(t, narrow, "get_broadcast", map[string]any{"bot_id": bot, "broadcast_id": "lbc_00000000000000000000000000"})
	assert.Equal(t, "broadcasts:write", p["required_scope"], "the scope the tool needs is named")
	p, _ = callTool(t, full, "list_content_broadcasts", map[string]any{"bot_id": bot, "status": "running"})
	assert.Contains(t, p["detail"], `unknown argument "status"`)

	// The plan without broadcasts: every broadcast tool fails closed with the REST answer.
	s.adminJSON("account", "plan", "--account", s.demo.AccountID, "--features", "analytics")
	eventually(t, 40*time.Second, "the narrowed plan reaches the token", func() bool {
		p, _ := callTool(t, full, "list_content_broadcasts", map[string]any{"bot_id": bot})
		return p["status"] == float64(402)
	})
	rest := s.get(s.demo.Token, "/api/bots/"+bot+"/broadcasts")
	require.Equal(t, 402, rest.Status, "%s", rest.Body)
	for name := range broadcastTools {
		args := map[string]any{"bot_id": bot, "broadcast_id": "lbc_00000000000000000000000000"}
		switch name {
		case "start_broadcast":
			args = map[string]any{"bot_id": bot, "reaction_id": rct}
		case "list_content_broadcasts":
			args = map[string]any{"bot_id": bot}
		}
		p, isError := callTool(t, full, name, args)
		assert.True(t, isError, name)
		assert.Equal(t, float64(402), p["status"], "%s: %v", name, p)
		assert.Equal(t, "feature_not_in_plan", p["code"], name)
		assert.Equal(t, "broadcasts", p["feature"], name)
		assert.Equal(t, rest.JSON(t)["code"], p["code"], "%s refuses as the route does", name)
	}

	var refused []string
	for _, e := range auditEvents(t, s, s.demo.Token, "") {
		if rid, _ := e["request_id"].(string); strings.HasPrefix(rid, "mcp-refused") && e["route"] == "POST /mcp/tools/start_broadcast" {
			refused = append(refused, jsonNumber(e["status"]))
		}
	}
	assert.Equal(t, []string{"402", "409"}, refused, "a refused change is audited with the status REST would answer")
}
