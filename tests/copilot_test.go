package tests

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copilotAnswer is a model's answer as the copilot asks for it: a fenced JSON object.
const copilotAnswer = "```json\n" + `{"summary": "Greets subscribers with a question first.", "name": "Welcome (asks)", "steps": [
  {"id": "ask", "type": "buttons", "text": "Are you new here?", "buttons": [{"title": "Yes", "step_id": "hi"}, {"title": "No", "step_id": "back"}]},
  {"id": "back", "type": "send_text", "text": "Welcome back"},
  {"id": "stop", "type": "end"},
  {"id": "hi", "type": "send_text", "text": "Hello there"}]}` + "\n```"

// Copilot proposals end to end (docs/copilot.md): the local process asks the OpenAI fake,
// scripted, for proposals; a proposal validates, simulates deterministically, applies as a
// new draft revision without publishing, and the access rules (rollout, scope, right,
// tenancy, token kinds) hold on every route.
func TestCopilot(t *testing.T) {
	t.Parallel()
	e := startAI(t)
	s := e.s
	bot := s.demo.BotID
	rx := s.post(e.tok, "/api/bots/"+bot+"/reactions", json.RawMessage(`{"name": "Welcome", "trigger": {"type": "start"},
		"steps": [{"id": "hi", "type": "send_text", "text": "Hello"}, {"id": "bye", "type": "send_text", "text": "Bye"}]}`))
	require.Equal(t, 201, rx.Status, "%s", rx.Body)
	rid := rx.JSON(t)["id"].(string)
	pub := s.post(e.tok, "/api/bots/"+bot+"/reactions/"+rid+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, pub.Status, "%s", pub.Body)

	proposals := "/api/reactions/" + rid + "/copilot/proposals"
	fake := "/api/copilot/proposals/cpp_1h1kjnx9zk5mj9aft8y6g9yxnn"
	goal := map[string]any{"goal": "Ask whether the subscriber is new before greeting", "provider": "openai"}
	routes := []req{
		{Method: "POST", Path: proposals, Body: goal}, {Method: "GET", Path: proposals}, {Method: "GET", Path: fake},
		{Method: "POST", Path: fake + "/validate"}, {Method: "POST", Path: fake + "/simulate", Body: map[string]any{"samples": []any{map[string]any{}}}},
		{Method: "POST", Path: fake + "/apply"}, {Method: "POST", Path: fake + "/reject"},
	}

	// Rollout off: 403 feature_not_enabled on every route.
	for _, rq := range routes {
		rq.Token = e.tok
		r := s.do(rq)
		require.Equal(t, 403, r.Status, "%s %s: %s", rq.Method, rq.Path, r.Body)
		assert.Equal(t, "feature_not_enabled", r.Code(t))
		assert.Equal(t, "copilot", r.JSON(t)["feature"])
	}
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "copilot")
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]

	// A proposal from a scripted answer.
	e.openai.ReplyNext(copilotAnswer)
	r := s.post(tok, proposals, goal)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/reactions/{rootID}/copilot/proposals", proposals, r)
	p := r.JSON(t)
	id := p["id"].(string)
	assert.Equal(t, "/api/copilot/proposals/"+id, r.Header.Get("Location"))
	assert.Equal(t, "open", p["status"])
	assert.Equal(t, float64(2), p["base_revision"])
	assert.Equal(t, "Greets subscribers with a question first.", p["summary"])
	diff := p["diff"].(map[string]any)
	assert.Equal(t, map[string]any{"before": "Welcome", "after": "Welcome (asks)"}, diff["name"])
	assert.Equal(t, map[string]any{"added": float64(3), "removed": float64(1), "changed": float64(1), "unchanged": float64(0)}, diff["counts"])
	usage := p["usage"].(map[string]any)
	assert.Equal(t, "openai", usage["provider"])
	assert.Equal(t, "managed", usage["billing"])
	assert.Positive(t, usage["output_tokens"])

	path := "/api/copilot/proposals/" + id
	r = s.get(tok, path)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/copilot/proposals/{proposalID}", path, r)
	assert.Equal(t, id, r.JSON(t)["id"])
	r = s.get(tok, proposals)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/reactions/{rootID}/copilot/proposals", proposals, r)
	assert.Len(t, r.JSON(t)["data"], 1)

	// Validate: valid.
	r = s.post(tok, path+"/validate", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/copilot/proposals/{proposalID}/validate", path+"/validate", r)
	assert.Equal(t, true, r.JSON(t)["valid"], "%s", r.Body)

	// Simulate: the same call twice is the same bytes; pressing "No" changes the path.
	sim := map[string]any{"samples": []any{
		map[string]any{"subscriber": map[string]any{"labels": []any{}, "fields": map[string]any{}}, "presses": []any{map[string]any{"step_id": "ask", "button": 1}}},
		map[string]any{"presses": []any{map[string]any{"step_id": "ask", "button": 0}}},
	}}
	a := s.post(tok, path+"/simulate", sim)
	require.Equal(t, 200, a.Status, "%s", a.Body)
	conforms(t, http.MethodPost, "/api/copilot/proposals/{proposalID}/simulate", path+"/simulate", a)
	b := s.post(tok, path+"/simulate", sim)
	require.Equal(t, 200, b.Status, "%s", b.Body)
	assert.Equal(t, string(a.Body), string(b.Body), "deterministic")
	var out struct {
		PathChanged int `json:"path_changed"`
		Samples     []struct {
			PathChanged bool `json:"path_changed"`
			Proposed    struct {
				Path   []string `json:"path"`
				Status string   `json:"status"`
			} `json:"proposed"`
			Base struct {
				Path []string `json:"path"`
			} `json:"base"`
		} `json:"samples"`
	}
	require.NoError(t, json.Unmarshal(a.Body, &out))
	require.Len(t, out.Samples, 2)
	// A buttons step is in the trace twice: when it sends, and when it is pressed.
	assert.Equal(t, []string{"ask", "ask", "back", "stop"}, out.Samples[0].Proposed.Path)
	assert.Equal(t, []string{"ask", "ask", "hi"}, out.Samples[1].Proposed.Path)
	assert.Equal(t, []string{"hi", "bye"}, out.Samples[0].Base.Path)
	assert.Equal(t, 2, out.PathChanged)

	// The MCP tools answer what the routes answer, with the same access.
	cs := s.mcpClient(t, tok, "")
	got, isError := callTool(t, cs, "simulate_copilot_proposal", map[string]any{"proposal_id": id, "samples": sim["samples"]})
	require.False(t, isError, "%v", got)
	assert.Equal(t, float64(2), got["path_changed"])
	got, isError = callTool(t, cs, "get_copilot_proposal", map[string]any{"proposal_id": id})
	require.False(t, isError, "%v", got)
	assert.Equal(t, "open", got["status"])
	got, isError = callTool(t, cs, "list_copilot_proposals", map[string]any{"reaction_id": rid})
	require.False(t, isError, "%v", got)
	assert.Len(t, got["data"], 1)
	got, isError = callTool(t, cs, "validate_copilot_proposal", map[string]any{"proposal_id": id})
	require.False(t, isError, "%v", got)
	assert.Equal(t, true, got["valid"])

	// An invalid proposal: validate says why, as publishing would.
	e.openai.ReplyNext(`{"summary": "Tags the subscriber.", "steps": [{"id": "tag", "type": "add_label", "label_id": "lbl_1h1kjnx9zk5mj9aft8y6g9yxnn"}]}`)
	r = s.post(tok, proposals, goal)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	invalid := "/api/copilot/proposals/" + r.JSON(t)["id"].(string)
	r = s.post(tok, invalid+"/validate", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, false, r.JSON(t)["valid"])
	problems := r.JSON(t)["problems"].([]any)
	require.Len(t, problems, 1)
	assert.Equal(t, "steps[0].label_id", problems[0].(map[string]any)["field"])

	// Apply: a new draft revision, the published version unchanged.
	r = s.post(tok, path+"/apply", map[string]any{})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/copilot/proposals/{proposalID}/apply", path+"/apply", r)
	applied := r.JSON(t)
	assert.Equal(t, "applied", applied["proposal"].(map[string]any)["status"])
	assert.Equal(t, float64(3), applied["proposal"].(map[string]any)["applied_revision"])
	r = s.get(tok, "/api/bots/"+bot+"/reactions/"+rid)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	reaction := r.JSON(t)
	assert.Equal(t, float64(3), reaction["revision"], "the draft moved")
	assert.Equal(t, float64(1), reaction["published_version"], "nothing published")
	assert.Equal(t, true, reaction["has_unpublished_changes"])
	assert.Equal(t, "Welcome (asks)", reaction["name"])
	assert.Len(t, reaction["steps"], 4)

	// Apply again, reject it: 409 proposal_not_open. The other open proposal was superseded.
	for _, action := range []string{"/apply", "/reject"} {
		r = s.post(tok, path+action, nil)
		require.Equal(t, 409, r.Status, "%s", r.Body)
		assert.Equal(t, "proposal_not_open", r.Code(t))
		assert.Equal(t, "applied", r.JSON(t)["proposal_status"])
	}
	r = s.get(tok, invalid)
	assert.Equal(t, "superseded", r.JSON(t)["status"])

	// Reject an open proposal; a draft moved since a proposal: 409 proposal_stale.
	e.openai.ReplyNext(copilotAnswer, copilotAnswer)
	r = s.post(tok, proposals, goal)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	toReject := "/api/copilot/proposals/" + r.JSON(t)["id"].(string)
	r = s.post(tok, proposals, goal)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	stale := "/api/copilot/proposals/" + r.JSON(t)["id"].(string)
	r = s.post(tok, toReject+"/reject", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/copilot/proposals/{proposalID}/reject", toReject+"/reject", r)
	assert.Equal(t, "rejected", r.JSON(t)["status"])
	r = s.patch(tok, "/api/bots/"+bot+"/reactions/"+rid, map[string]any{"expected_revision": 3, "name": "Welcome 2"})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.post(tok, stale+"/apply", nil)
	require.Equal(t, 409, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/copilot/proposals/{proposalID}/apply", stale+"/apply", r)
	assert.Equal(t, "proposal_stale", r.Code(t))
	assert.Equal(t, float64(3), r.JSON(t)["base_revision"])
	assert.Equal(t, float64(4), r.JSON(t)["current_revision"])

	// A garbage answer: 502, nothing stored, the generation metered.
	before := e.openai.Requests()
	r = s.post(tok, proposals, goal) // the fake echoes: not JSON
	require.Equal(t, 502, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/reactions/{rootID}/copilot/proposals", proposals, r)
	assert.Equal(t, "copilot_unusable_answer", r.Code(t))
	assert.Equal(t, before+1, e.openai.Requests())
	r = s.get(tok, proposals)
	assert.Len(t, r.JSON(t)["data"], 4)
	r = s.get(tok, "/api/v1/ai/usage")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), `"requests":5`, "every generation is metered, the unusable one too")

	// Access: 401, 403 scope, 403 right, 403 bot token, 404 tenancy and unknown resources.
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "reactions:read")["token"]
	member := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "analytics")["user_id"]
	memberTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", member, "--scopes", "*")["token"]
	r = s.post(tok, "/api/bots/"+bot+"/api-tokens", map[string]any{"name": "copilot"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	botTok := r.JSON(t)["token"].(string)
	other := s.newAccount("Other")
	s.adminJSON("account", "rollout", "--account", other.ID, "--enable", "copilot")
	otherTok := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]
	real := []req{
		{Method: "POST", Path: proposals, Body: goal}, {Method: "GET", Path: proposals}, {Method: "GET", Path: path},
		{Method: "POST", Path: path + "/validate"}, {Method: "POST", Path: path + "/simulate", Body: sim},
		{Method: "POST", Path: toReject + "/apply"}, {Method: "POST", Path: toReject + "/reject"},
	}
	for _, rq := range real {
		rq.Token = "mbp_not_a_token"
		assert.Equal(t, 401, s.do(rq).Status, "%s %s", rq.Method, rq.Path)
		rq.Token = otherTok
		assert.Equal(t, 404, s.do(rq).Status, "another account's: %s %s", rq.Method, rq.Path)
		rq.Token = botTok
		r := s.do(rq)
		if assert.Equal(t, 403, r.Status, "a bot token: %s %s", rq.Method, rq.Path) {
			assert.Equal(t, "insufficient_scope", r.Code(t))
		}
		if rq.Method == "GET" {
			assert.Equal(t, 200, s.do(req{Method: rq.Method, Path: rq.Path, Token: readOnly}).Status, "%s %s", rq.Method, rq.Path)
			assert.Equal(t, 200, s.do(req{Method: rq.Method, Path: rq.Path, Token: memberTok}).Status, "reads need no right: %s", rq.Path)
			continue
		}
		rq.Token = readOnly
		r = s.do(rq)
		if assert.Equal(t, 403, r.Status, "%s %s", rq.Method, rq.Path) {
			assert.Equal(t, "insufficient_scope", r.Code(t))
		}
		rq.Token = memberTok
		r = s.do(rq)
		if assert.Equal(t, 403, r.Status, "%s %s: %s", rq.Method, rq.Path, r.Body) {
			assert.Equal(t, "missing_right", r.Code(t))
		}
	}
	assert.Equal(t, 404, s.get(tok, "/api/reactions/rct_1h1kjnx9zk5mj9aft8y6g9yxnn/copilot/proposals").Status)
	otherMCP := s.mcpClient(t, otherTok, "")
	got, isError = callTool(t, otherMCP, "get_copilot_proposal", map[string]any{"proposal_id": id})
	require.True(t, isError)
	assert.Equal(t, float64(404), got["status"], "another account's proposal over MCP")
	memberMCP := s.mcpClient(t, memberTok, "")
	got, isError = callTool(t, memberMCP, "validate_copilot_proposal", map[string]any{"proposal_id": id})
	require.True(t, isError)
	assert.Equal(t, "missing_right", got["code"], "the right is checked over MCP too")
	assert.Equal(t, 404, s.get(tok, fake).Status)
}

// proposalsTemplate is the route that creates and lists a reaction's proposals.
const proposalsTemplate = "/api/reactions/{rootID}/copilot/proposals"

// startCopilot starts the AI end-to-end process with the copilot rollout on and a two-step
// reaction, and returns its proposals' path and a goal for them.
func startCopilot(t *testing.T) (*aiE2E, string, map[string]any) {
	t.Helper()
	e := startAI(t)
	s := e.s
	rx := s.post(e.tok, "/api/bots/"+s.demo.BotID+"/reactions", json.RawMessage(`{"name": "Welcome", "trigger": {"type": "start"},
		"steps": [{"id": "hi", "type": "send_text", "text": "Hello"}, {"id": "bye", "type": "send_text", "text": "Bye"}]}`))
	require.Equal(t, 201, rx.Status, "%s", rx.Body)
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "copilot")
	goal := map[string]any{"goal": "Ask whether the subscriber is new before greeting", "provider": "openai"}
	return e, "/api/reactions/" + rx.JSON(t)["id"].(string) + "/copilot/proposals", goal
}

// Asking for a proposal spends managed AI: on a plan without managed_ai it is 402
// feature_not_in_plan (feature managed_ai), no provider is asked and nothing is stored;
// reading proposals needs no plan feature; with managed_ai back, the same request succeeds.
func TestCopilotWithoutManagedAI(t *testing.T) {
	t.Parallel()
	e, proposals, goal := startCopilot(t)
	s := e.s
	acct := s.demo.AccountID

	out := s.adminJSON("account", "plan", "--account", acct, "--features", "analytics,broadcasts")
	require.NotContains(t, out["plan"], "managed_ai")
	tok := s.admin("pat", "create", "--account", acct, "--scopes", "*")["token"] // sees the new plan at once
	r := s.post(tok, proposals, goal)
	p := problem(t, http.MethodPost, proposalsTemplate, proposals, r, http.StatusPaymentRequired, "feature_not_in_plan")
	assert.Equal(t, "managed_ai", p["feature"])
	assert.Zero(t, e.openai.Requests(), "no provider was asked")
	r = s.get(tok, proposals)
	require.Equal(t, 200, r.Status, "reading proposals needs no plan feature: %s", r.Body)
	assert.Empty(t, r.JSON(t)["data"], "nothing was stored")

	// The plan was the reason: with managed_ai back, the same request makes a proposal.
	s.adminJSON("account", "plan", "--account", acct, "--features", "standard")
	tok = s.admin("pat", "create", "--account", acct, "--scopes", "*")["token"]
	e.openai.ReplyNext(copilotAnswer)
	r = s.post(tok, proposals, goal)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	assert.Equal(t, 1, e.openai.Requests())
}

// Under an Idempotency-Key a proposal is made once: the retry answers the same proposal
// (201, Idempotent-Replayed) and the provider is asked once; another body under the key is
// 422; without a key each request is a new proposal.
func TestCopilotIdempotencyKey(t *testing.T) {
	t.Parallel()
	e, proposals, goal := startCopilot(t)
	s := e.s
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	post := func(key string, body any) resp {
		return s.do(req{Method: http.MethodPost, Path: proposals, Token: tok, Body: body, Headers: map[string]string{"Idempotency-Key": key}})
	}

	e.openai.ReplyNext(copilotAnswer)
	first := post("proposal-1", goal)
	require.Equal(t, 201, first.Status, "%s", first.Body)
	assert.Empty(t, first.Header.Get("Idempotent-Replayed"))
	again := post("proposal-1", goal)
	require.Equal(t, 201, again.Status, "%s", again.Body)
	conforms(t, http.MethodPost, proposalsTemplate, proposals, again)
	assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, first.JSON(t)["id"], again.JSON(t)["id"])
	assert.Equal(t, 1, e.openai.Requests(), "the provider was asked once")

	problem(t, http.MethodPost, proposalsTemplate, proposals, post("proposal-1", map[string]any{"goal": "Something else", "provider": "openai"}),
		http.StatusUnprocessableEntity, "idempotency_key_reused")
	problem(t, http.MethodPost, proposalsTemplate, proposals, post("not a key", goal), http.StatusBadRequest, "invalid_idempotency_key")

	// Two requests with one key at once: while the first one's generation runs, the second
	// is 409 idempotency_in_flight; once it has answered, the key replays its proposal.
	e.openai.ReplyNext(copilotAnswer)
	e.openai.Hold()
	var wg sync.WaitGroup
	var held resp
	wg.Go(func() { held = post("proposal-2", goal) })
	eventually(t, 10*time.Second, "the first request reaches the provider", func() bool { return e.openai.Requests() == 2 })
	problem(t, http.MethodPost, proposalsTemplate, proposals, post("proposal-2", goal), http.StatusConflict, "idempotency_in_flight")
	e.openai.Release()
	wg.Wait()
	require.Equal(t, 201, held.Status, "%s", held.Body)
	replay := post("proposal-2", goal)
	require.Equal(t, 201, replay.Status, "%s", replay.Body)
	assert.Equal(t, "true", replay.Header.Get("Idempotent-Replayed"))
	assert.Equal(t, held.JSON(t)["id"], replay.JSON(t)["id"])
	assert.Equal(t, 2, e.openai.Requests(), "the provider was asked once for the second key")

	r := s.get(tok, proposals)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 2, "one proposal per key")
}
