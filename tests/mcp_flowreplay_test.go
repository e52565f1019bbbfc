package tests

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// toolCall is one call of a read tool and the REST GET it mirrors.
type toolCall struct {
	tool    string
	args    map[string]any
	path    string
	feature string
}

// withoutRequestID is a problem document without its request id, which differs per call.
func withoutRequestID(p map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range p {
		if k != "request_id" {
			out[k] = v
		}
	}
	return out
}

// The read tools of flow intelligence (overlay, samples, policy, reaggregation jobs) and
// replay's per-fixture result, over the real process: without the account's rollout each
// is 403 feature_not_enabled, as its route is; with it, each answers what its route answers
// for a real run (the result's trace redacted, as every replay answer but the trace GET);
// another account's bot is the not-found every tool answers, and a token without the scope
// is refused.
func TestMCPFlowIntelligenceAndReplayReads(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s := c.s
	bot := s.demo.BotID
	flow := "/api/bots/" + bot + "/flow-intelligence"
	replay := "/api/bots/" + bot + "/replay"
	reaction := c.publish(t, `{"name":"hello","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello"},
		{"id":"bye","type":"send_text","text":"Bye"}]}`)

	// Rollout off (unassigned): every tool is refused as its route is.
	const (
		job     = "job_01hx7y9k2m3n4p5q6r7s8t9v0w"
		run     = "rpr_01jd0000000000000000000000"
		fixture = "rfx_01jd0000000000000000000000"
	)
	// An explicit range: the default ends at the clock of each call.
	now := time.Now().UTC()
	from, to := now.Add(-24*time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)
	calls := func(job, run, fixture string) []toolCall {
		return []toolCall{
			{"get_flow_overlay", map[string]any{"bot_id": bot, "reaction_id": reaction, "from": from, "to": to},
				flow + "/reactions/" + reaction + "/overlay?from=" + from + "&to=" + to, "flow_intelligence"},
			{"list_flow_samples", map[string]any{"bot_id": bot, "reaction_id": reaction, "step_id": "hi"}, flow + "/reactions/" + reaction + "/samples?step_id=hi", "flow_intelligence"},
			{"get_flow_policy", map[string]any{"bot_id": bot}, flow + "/policy", "flow_intelligence"},
			{"list_flow_reaggregations", map[string]any{"bot_id": bot}, flow + "/reaggregations", "flow_intelligence"},
			{"get_flow_reaggregation", map[string]any{"bot_id": bot, "job_id": job}, flow + "/reaggregations/" + job, "flow_intelligence"},
			{"get_replay_run_result", map[string]any{"bot_id": bot, "run_id": run, "fixture_id": fixture}, replay + "/runs/" + run + "/results/" + fixture, "replay"},
		}
	}
	demo := s.mcpClient(t, s.demo.Token, "")
	for _, call := range calls(job, run, fixture) {
		p, isError := callTool(t, demo, call.tool, call.args)
		require.True(t, isError, "%s answered without its rollout: %v", call.tool, p)
		r := s.get(s.demo.Token, call.path)
		require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
		for _, member := range []string{"status", "code", "feature"} {
			assert.Equal(t, r.JSON(t)[member], p[member], "%s: %s as its route's", call.tool, member)
		}
		assert.Equal(t, "feature_not_enabled", p["code"], call.tool)
		assert.Equal(t, call.feature, p["feature"], call.tool)
	}

	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "flow_intelligence,replay")
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	cs := s.mcpClient(t, tok, "")

	// One run: Ann starts the bot and gets both messages.
	ann := fake.User{ID: 9101, FirstName: "Ann"}
	c.deliver(t, c.tg.TextUpdate(ann, "/start"))
	eventually(t, 10*time.Second, "both messages", func() bool { return len(c.tg.Sent(ann.ID)) >= 2 })
	sub := c.subscriber(t, ann)
	eventually(t, 10*time.Second, "the run completes", func() bool { return c.executions(t, sub)[0].Status == "completed" })

	// The identifying data of the run, which only the trace GET shows.
	var runs struct {
		Data []map[string]any `json:"data"`
	}
	eventually(t, 10*time.Second, "the run is listed", func() bool {
		r := s.get(tok, replay+"/executions?reaction_id="+reaction)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		require.NoError(t, json.Unmarshal(r.Body, &runs))
		return len(runs.Data) == 1
	})
	exe := runs.Data[0]["id"].(string)
	r := s.get(tok, replay+"/executions/"+exe)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var tr trace
	require.NoError(t, json.Unmarshal(r.Body, &tr))
	identifying := identifyingIDs(t, tr, sub)

	// A reaggregation job, finished, and a regression run of the run exported as a fixture.
	r = s.post(tok, flow+"/reaggregations", map[string]any{"from": from, "to": to})
	require.Equal(t, http.StatusAccepted, r.Status, "%s", r.Body)
	jobID := r.JSON(t)["id"].(string)
	eventually(t, 20*time.Second, "the job finishes", func() bool {
		r := s.get(tok, flow+"/reaggregations/"+jobID)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		st := r.JSON(t)["status"]
		return st == "succeeded" || st == "failed"
	})
	r = s.post(tok, replay+"/fixtures", map[string]any{"execution_id": exe, "name": "Ann starts"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	fixtureID := r.JSON(t)["id"].(string)
	r = s.post(tok, replay+"/runs", map[string]any{"reaction_id": reaction, "target": 1})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	runID := r.JSON(t)["id"].(string)

	// Each tool answers what its route answers.
	answers := map[string]map[string]any{}
	for _, call := range calls(jobID, runID, fixtureID) {
		got, isError := callTool(t, cs, call.tool, call.args)
		require.False(t, isError, "%s: %v", call.tool, got)
		want := s.get(tok, call.path)
		require.Equal(t, http.StatusOK, want.Status, "%s: %s", call.path, want.Body)
		if call.tool == "list_flow_reaggregations" {
			// A cursor is sealed afresh each time: both lists are complete.
			assert.Equal(t, want.JSON(t)["data"], got["data"], call.tool)
			assert.Nil(t, want.JSON(t)["next_cursor"])
			assert.Nil(t, got["next_cursor"], call.tool)
		} else {
			assert.Equal(t, want.JSON(t), got, "%s answers what GET %s answers", call.tool, call.path)
		}
		answers[call.tool] = got
	}

	// What they answer: the run's numbers, its redacted sample, the default policy, the job.
	var overlay flowOverlay
	remarshal(t, answers["get_flow_overlay"], &overlay)
	got := map[string][4]int{}
	for _, st := range overlay.Steps {
		got[st.StepID] = [4]int{st.Entered, st.Completed, st.Continued, st.Dropped}
	}
	assert.Equal(t, map[string][4]int{"hi": {1, 1, 1, 0}, "bye": {1, 1, 1, 0}}, got)
	assert.Equal(t, 2, overlay.Totals["entered"])

	samples := answers["list_flow_samples"]
	assert.Len(t, samples["data"], 1)
	raw, err := json.Marshal(samples)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), `"message_id"`, "the sample is redacted")
	assert.NotContains(t, string(raw), `"update_id"`)
	for _, id := range append([]string{exe}, identifying...) {
		assert.NotContains(t, string(raw), `"`+id+`"`, "the sample is redacted")
	}
	assert.Contains(t, string(raw), `"message_sent":true`)

	policy := answers["get_flow_policy"]
	assert.Equal(t, float64(0), policy["revision"], "never saved: the default")
	assert.Equal(t, "enabled", policy["sampling"])

	job1 := answers["get_flow_reaggregation"]
	assert.Equal(t, jobID, job1["id"])
	assert.Equal(t, "succeeded", job1["status"], "%v", job1)
	assert.Equal(t, float64(1), job1["runs_scanned"])
	assert.NotEmpty(t, job1["days"])
	jobs := answers["list_flow_reaggregations"]["data"].([]any)
	require.Len(t, jobs, 1)
	assert.Equal(t, job1, jobs[0], "the list shows the job as the get does")

	result := answers["get_replay_run_result"]
	assert.Equal(t, runID, result["run_id"])
	assert.Equal(t, fixtureID, result["fixture_id"])
	assert.Equal(t, "passed", result["outcome"])
	assert.Equal(t, false, result["result_omitted"])
	assert.Len(t, result["result_sha256"], 64)
	var simulated trace
	remarshal(t, result["trace"], &simulated)
	assert.Equal(t, "completed", simulated.Status)
	require.Len(t, simulated.Steps, 2)
	assert.Equal(t, "msg_1", simulated.Steps[0].Outcome["message_id"], "a placeholder, not the provider's id")
	raw, err = json.Marshal(result)
	require.NoError(t, err)
	for _, id := range identifying {
		assert.NotContains(t, string(raw), `"`+id+`"`, "the result reveals no identifying data")
	}

	// Another account's bot: the not-found every tool answers (get_bot's), whatever the
	// tool; and that account finds neither the job nor the run under its own bot.
	other := s.newAccount("Other")
	s.adminJSON("account", "rollout", "--account", other.ID, "--enable", "flow_intelligence,replay")
	notFound, isError := callTool(t, cs, "get_bot", map[string]any{"bot_id": other.Bot})
	require.True(t, isError)
	require.Equal(t, float64(http.StatusNotFound), notFound["status"], "%v", notFound)
	for _, call := range calls(jobID, runID, fixtureID) {
		call.args["bot_id"] = other.Bot
		p, isError := callTool(t, cs, call.tool, call.args)
		assert.True(t, isError, call.tool)
		assert.Equal(t, withoutRequestID(notFound), withoutRequestID(p), "%s on another account's bot", call.tool)
	}
	otherTok := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]
	theirs := s.mcpClient(t, otherTok, "")
	for tool, args := range map[string]map[string]any{
		"get_flow_reaggregation": {"bot_id": other.Bot, "job_id": jobID},
		"get_replay_run_result":  {"bot_id": other.Bot, "run_id": runID, "fixture_id": fixtureID},
	} {
		p, isError := callTool(t, theirs, tool, args)
		assert.True(t, isError, tool)
		assert.Equal(t, float64(http.StatusNotFound), p["status"], "%s: %v", tool, p)
		assert.Equal(t, "not_found", p["code"], tool)
	}

	// A token without the tools' scope is refused, naming the scope its route needs.
	narrow := s.mcpClient(t, s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"], "")
	for _, call := range calls(jobID, runID, fixtureID) {
		p, isError := callTool(t, narrow, call.tool, call.args)
		assert.True(t, isError, call.tool)
		assert.Equal(t, float64(http.StatusForbidden), p["status"], "%s: %v", call.tool, p)
		assert.Equal(t, "insufficient_scope", p["code"], call.tool)
		want := map[string]string{"flow_intelligence": "analytics:read", "replay": "reactions:read"}[call.feature]
		assert.Equal(t, want, p["required_scope"], call.tool)
	}
}

// remarshal decodes v (a decoded JSON value) into out.
func remarshal(t *testing.T, v, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, out))
}
