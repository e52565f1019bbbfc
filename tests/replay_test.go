package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// replayRoutes are every replay route with a path for the demo bot, and a body for POSTs.
func replayRoutes(bot string) []req {
	b := "/api/bots/" + bot + "/replay"
	return []req{
		{Method: "GET", Path: b + "/executions"},
		{Method: "GET", Path: b + "/executions/exe_01jd0000000000000000000000"},
		{Method: "POST", Path: b + "/simulations", Body: map[string]any{"execution_id": "exe_01jd0000000000000000000000"}},
		{Method: "GET", Path: b + "/fixtures"},
		{Method: "POST", Path: b + "/fixtures", Body: map[string]any{"execution_id": "exe_01jd0000000000000000000000", "name": "x"}},
		{Method: "GET", Path: b + "/fixtures/rfx_01jd0000000000000000000000"},
		{Method: "DELETE", Path: b + "/fixtures/rfx_01jd0000000000000000000000"},
		{Method: "GET", Path: b + "/runs"},
		{Method: "POST", Path: b + "/runs", Body: map[string]any{"reaction_id": "rct_x", "target": "draft"}},
		{Method: "GET", Path: b + "/runs/rpr_01jd0000000000000000000000"},
		{Method: "GET", Path: b + "/runs/rpr_01jd0000000000000000000000/results/rfx_01jd0000000000000000000000"},
	}
}

// rawMember returns the raw bytes of one member of a JSON object, as the server wrote them.
func rawMember(t *testing.T, body []byte, name string) string {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(body, &m), "%s", body)
	require.Contains(t, m, name)
	return string(m[name])
}

// Explainable replay on the real local process: a Telegram conversation runs a published
// reaction; its run is listed (redacted), read (the trace GET: the only answer with the
// subscriber and provider ids), exported as a fixture without them, run against the
// published version (passes, twice byte-identical) and against a changed draft (reports the
// differences). Rollout off is 403 on every route and tool; 401, 403 and 404 as everywhere.
func TestReplay(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s := c.s
	bot := s.demo.BotID
	base := "/api/bots/" + bot + "/replay"

	// Rollout off (unassigned): every route and tool is 403 feature_not_enabled.
	for _, rq := range replayRoutes(bot) {
		rq.Token = s.demo.Token
		r := s.do(rq)
		assert.Equal(t, 403, r.Status, "%s %s: %s", rq.Method, rq.Path, r.Body)
		assert.Equal(t, "feature_not_enabled", r.Code(t), "%s %s", rq.Method, rq.Path)
		assert.Equal(t, "replay", r.JSON(t)["feature"])
	}
	cs := s.mcpClient(t, s.demo.Token, "")
	for _, tool := range []string{"list_replay_executions", "get_replay_execution", "simulate_replay", "list_replay_fixtures",
		"get_replay_fixture", "list_replay_runs", "get_replay_run"} {
		args := map[string]any{"bot_id": bot, "execution_id": "exe_01jd0000000000000000000000",
			"fixture_id": "rfx_01jd0000000000000000000000", "run_id": "rpr_01jd0000000000000000000000"}
		switch tool {
		case "list_replay_executions", "list_replay_fixtures", "list_replay_runs":
			args = map[string]any{"bot_id": bot}
		case "get_replay_execution", "simulate_replay":
			args = map[string]any{"bot_id": bot, "execution_id": "exe_01jd0000000000000000000000"}
		case "get_replay_fixture":
			args = map[string]any{"bot_id": bot, "fixture_id": "rfx_01jd0000000000000000000000"}
		case "get_replay_run":
			args = map[string]any{"bot_id": bot, "run_id": "rpr_01jd0000000000000000000000"}
		}
		out, isErr := callTool(t, cs, tool, args)
		assert.True(t, isErr, tool)
		assert.Equal(t, "feature_not_enabled", out["code"], tool)
	}
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "replay")
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]

	// A conversation: Ann starts the bot, has no label yet, gets tagged.
	r := s.post(tok, "/api/bots/"+bot+"/labels", map[string]any{"name": "welcomed"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	label := r.JSON(t)["id"].(string)
	welcome := c.publish(t, fmt.Sprintf(`{"name":"Welcome","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello!"},
		{"id":"check","type":"condition","conditions":[{"label_id":%q,"op":"has"}],"then":"back","else":"new"},
		{"id":"back","type":"send_text","text":"Welcome back"},
		{"id":"done","type":"end"},
		{"id":"new","type":"send_text","text":"Nice to meet you"},
		{"id":"tag","type":"add_label","label_id":%q}]}`, label, label))
	ann := fake.User{ID: 5101, FirstName: "Ann", LastName: "Lee", LanguageCode: "en"}
	c.deliver(t, c.tg.TextUpdate(ann, "/start"))
	eventually(t, 10*time.Second, "the welcome messages", func() bool { return len(c.tg.Sent(ann.ID)) >= 2 })
	sub := c.subscriber(t, ann)

	// The runs list: newest first, narrowed by reaction, redacted.
	var list struct {
		Data []map[string]any `json:"data"`
	}
	listPath := base + "/executions?reaction_id=" + welcome + "&status=completed"
	eventually(t, 10*time.Second, "the completed run is listed", func() bool {
		r = s.get(tok, listPath)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		require.NoError(t, json.Unmarshal(r.Body, &list))
		return len(list.Data) == 1
	})
	conforms(t, "GET", "/api/bots/{botID}/replay/executions", listPath, r)
	exe := list.Data[0]["id"].(string)
	assert.Equal(t, "", list.Data[0]["subscriber_id"], "the list is redacted")
	assert.NotContains(t, string(r.Body), sub)
	r = s.get(tok, base+"/executions?reaction_id=rct_01jd0000000000000000000000")
	require.Equal(t, 200, r.Status)
	assert.Empty(t, r.JSON(t)["data"])

	// The trace GET is the one answer with the identifying data.
	r = s.get(tok, base+"/executions/"+exe)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/replay/executions/{executionID}", base+"/executions/"+exe, r)
	var tr trace
	require.NoError(t, json.Unmarshal(r.Body, &tr))
	assert.Contains(t, string(r.Body), sub)
	require.Len(t, tr.Steps, 4)
	identifying := identifyingIDs(t, tr, sub)

	// The MCP trace tool answers the redacted form.
	cs = s.mcpClient(t, tok, "")
	out, isErr := callTool(t, cs, "get_replay_execution", map[string]any{"bot_id": bot, "execution_id": exe})
	require.False(t, isErr, "%v", out)
	b, _ := json.Marshal(out)
	for _, id := range identifying {
		assert.NotContains(t, string(b), `"`+id+`"`, "the MCP trace reveals no identifying data")
	}
	assert.Equal(t, "msg_1", out["steps"].([]any)[0].(map[string]any)["outcome"].(map[string]any)["message_id"])

	// Export as a fixture: no personal data.
	r = s.post(tok, base+"/fixtures", map[string]any{"execution_id": exe, "name": "New subscriber"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/replay/fixtures", base+"/fixtures", r)
	for _, id := range append(identifying, "Ann", "Lee", "5101", "/start") {
		assert.NotContains(t, string(r.Body), `"`+id+`"`, "the fixture holds no personal data")
	}
	fx := r.JSON(t)["id"].(string)
	r = s.get(tok, base+"/fixtures/"+fx)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/replay/fixtures/{fixtureID}", base+"/fixtures/"+fx, r)
	r = s.get(tok, base+"/fixtures?reaction_id="+welcome)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/replay/fixtures", base+"/fixtures?reaction_id="+welcome, r)
	assert.Len(t, r.JSON(t)["data"], 1)

	// Against the published version: passes; twice, byte-identical traces.
	var traces []string
	for range 2 {
		r = s.post(tok, base+"/runs", map[string]any{"reaction_id": welcome, "target": 1})
		require.Equal(t, 201, r.Status, "%s", r.Body)
		conforms(t, "POST", "/api/bots/{botID}/replay/runs", base+"/runs", r)
		assert.Equal(t, float64(1), r.JSON(t)["passed"], "%s", r.Body)
		run := r.JSON(t)["id"].(string)
		path := base + "/runs/" + run + "/results/" + fx
		r = s.get(tok, path)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		conforms(t, "GET", "/api/bots/{botID}/replay/runs/{runID}/results/{fixtureID}", path, r)
		traces = append(traces, rawMember(t, r.Body, "trace"))
	}
	assert.Equal(t, traces[0], traces[1], "the same fixture twice: byte-identical traces")
	assert.NotEqual(t, "null", traces[0])

	// A changed draft: everyone gets "Welcome back", nobody is tagged.
	r = s.get(tok, "/api/bots/"+bot+"/reactions/"+welcome)
	require.Equal(t, 200, r.Status)
	rev := r.JSON(t)["revision"]
	r = s.patch(tok, "/api/bots/"+bot+"/reactions/"+welcome, map[string]any{"expected_revision": rev, "steps": []any{
		map[string]any{"id": "hi", "type": "send_text", "text": "Hello!"},
		map[string]any{"id": "back", "type": "send_text", "text": "Welcome back"},
	}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.post(tok, base+"/runs", map[string]any{"reaction_id": welcome, "target": "draft"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	assert.Equal(t, float64(1), r.JSON(t)["changed"], "%s", r.Body)
	run := r.JSON(t)["id"].(string)
	r = s.get(tok, base+"/runs/"+run)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/replay/runs/{runID}", base+"/runs/"+run, r)
	var report struct {
		Target  any `json:"target"`
		Results []struct {
			Outcome     string `json:"outcome"`
			Differences []struct {
				Seq  int    `json:"seq"`
				Kind string `json:"kind"`
			} `json:"differences"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &report))
	assert.Equal(t, "draft", report.Target)
	require.Len(t, report.Results, 1)
	assert.Equal(t, "changed", report.Results[0].Outcome)
	require.NotEmpty(t, report.Results[0].Differences)
	assert.Equal(t, 2, report.Results[0].Differences[0].Seq)
	assert.Equal(t, "step_changed", report.Results[0].Differences[0].Kind)
	r = s.get(tok, base+"/runs?reaction_id="+welcome)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/replay/runs", base+"/runs?reaction_id="+welcome, r)
	assert.Len(t, r.JSON(t)["data"], 3)

	// A simulation against the draft: the same differences, the redacted input, and twice
	// the same bytes; the MCP tool answers the same.
	r = s.post(tok, base+"/simulations", map[string]any{"execution_id": exe, "version": "draft"})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/replay/simulations", base+"/simulations", r)
	assert.Equal(t, false, r.JSON(t)["matches"])
	for _, id := range identifying {
		assert.NotContains(t, string(r.Body), `"`+id+`"`)
	}
	again := s.post(tok, base+"/simulations", map[string]any{"execution_id": exe, "version": "draft"})
	assert.Equal(t, string(r.Body), string(again.Body))
	out, isErr = callTool(t, cs, "simulate_replay", map[string]any{"bot_id": bot, "execution_id": exe})
	require.False(t, isErr, "%v", out)
	assert.Equal(t, true, out["matches"], "against the version it ran")

	// 401, 403, 404.
	r = s.get("", base+"/fixtures")
	assert.Equal(t, 401, r.Status)
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "reactions:read")["token"]
	assert.Equal(t, 200, s.get(readOnly, base+"/fixtures").Status)
	r = s.post(readOnly, base+"/simulations", map[string]any{"execution_id": exe})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "insufficient_scope", r.Code(t))
	noRights := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "")["user_id"]
	noRightsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noRights, "--scopes", "*")["token"]
	r = s.post(noRightsTok, base+"/fixtures", map[string]any{"execution_id": exe, "name": "x"})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "missing_right", r.Code(t))
	assert.Equal(t, 200, s.get(noRightsTok, base+"/fixtures/"+fx).Status, "reads need no right")
	other := s.newAccount("Other")
	s.adminJSON("account", "rollout", "--account", other.ID, "--enable", "replay")
	otherTok := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]
	for _, path := range []string{base + "/fixtures/" + fx, base + "/executions/" + exe, base + "/runs/" + run} {
		r = s.get(otherTok, path)
		assert.Equal(t, 404, r.Status, "%s: %s", path, r.Body)
	}
	otherBase := "/api/bots/" + other.Bot + "/replay"
	for _, path := range []string{otherBase + "/fixtures/" + fx, otherBase + "/executions/" + exe, otherBase + "/runs/" + run} {
		r = s.get(otherTok, path)
		assert.Equal(t, 404, r.Status, "%s: %s", path, r.Body)
	}

	// Every write route refuses another account: its token on this account's bot, and on its
	// own bot naming this account's execution, fixture and reaction, is 404 and changes
	// nothing; a bad token is 401, a token without reactions:write or a user without the
	// Reactions right 403.
	type write struct {
		template string
		req      req
	}
	writes := func(b string) []write {
		return []write{
			{"/api/bots/{botID}/replay/simulations", req{Method: "POST", Path: b + "/simulations", Body: map[string]any{"execution_id": exe, "version": "draft"}}},
			{"/api/bots/{botID}/replay/fixtures", req{Method: "POST", Path: b + "/fixtures", Body: map[string]any{"execution_id": exe, "name": "Taken"}}},
			{"/api/bots/{botID}/replay/fixtures/{fixtureID}", req{Method: "DELETE", Path: b + "/fixtures/" + fx}},
			{"/api/bots/{botID}/replay/runs", req{Method: "POST", Path: b + "/runs", Body: map[string]any{"reaction_id": welcome, "target": "draft"}}},
		}
	}
	for _, w := range append(writes(base), writes(otherBase)...) {
		w.req.Token = otherTok
		problem(t, w.req.Method, w.template, w.req.Path, s.do(w.req), 404, "not_found")
	}
	for _, w := range writes(base) {
		for _, c := range []struct {
			token, code string
			status      int
		}{
			{"mbp_not_a_token", "invalid_token", 401},
			{auth.NewToken(auth.KindPAT), "invalid_token", 401},
			{readOnly, "insufficient_scope", 403},
			{noRightsTok, "missing_right", 403},
		} {
			w.req.Token = c.token
			problem(t, w.req.Method, w.template, w.req.Path, s.do(w.req), c.status, c.code)
		}
	}
	r = s.get(tok, base+"/fixtures/"+fx)
	assert.Equal(t, 200, r.Status, "the fixture survived every refused DELETE: %s", r.Body)
	assert.Equal(t, "New subscriber", r.JSON(t)["name"])
	r = s.get(tok, base+"/fixtures")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 1, "no fixture was exported by a refused request")
	r = s.get(tok, base+"/runs")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 3, "no run was started by a refused request")
	for _, path := range []string{otherBase + "/fixtures", otherBase + "/runs"} {
		r = s.get(otherTok, path)
		require.Equal(t, 200, r.Status, "%s: %s", path, r.Body)
		assert.Empty(t, r.JSON(t)["data"], "nothing was copied into the other account's bot: %s", path)
	}

	r = s.del(tok, base+"/fixtures/"+fx)
	assert.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
	r = s.get(tok, base+"/fixtures/"+fx)
	assert.Equal(t, 404, r.Status)
	assert.False(t, strings.Contains(s.stderr.String(), `"level":"ERROR"`) && strings.Contains(s.stderr.String(), "/replay/"),
		"no replay request failed with a 500")
}

// identifyingIDs are what identifies the subscriber behind a recorded run of two sent
// messages: the subscriber's id, the provider's message ids and the update id.
func identifyingIDs(t *testing.T, tr trace, sub string) []string {
	t.Helper()
	out := []string{sub}
	for _, st := range tr.Steps {
		if id, ok := st.Outcome["message_id"].(string); ok {
			out = append(out, id)
		}
	}
	require.Len(t, out, 3, "two messages sent")
	if u, ok := tr.Trigger["update_id"].(string); ok {
		out = append(out, u)
	}
	return out
}
