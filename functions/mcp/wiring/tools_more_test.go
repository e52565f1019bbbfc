package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	aiwiring "github.com/botplatform/api/functions/ai/wiring"
	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/copilot"
	copilotwiring "github.com/botplatform/api/functions/copilot/wiring"
	"github.com/botplatform/api/functions/flowintel"
	flowintelwiring "github.com/botplatform/api/functions/flowintel/wiring"
	"github.com/botplatform/api/functions/playbooks"
	playbookswiring "github.com/botplatform/api/functions/playbooks/wiring"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/replay"
	replaywiring "github.com/botplatform/api/functions/replay/wiring"
	"github.com/botplatform/api/functions/runtime"
	runtimewiring "github.com/botplatform/api/functions/runtime/wiring"
	"github.com/botplatform/api/functions/subscribers"
	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/eventlog/storelog"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/mcptool"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	openaifake "github.com/botplatform/api/tests/fakes/ai/openai"
)

// lambdaWorld is the MCP Lambda (lambdaTools) on env, called by the owner of a new account
// with one bot and the rollout feature of the family under test enabled, and the names of
// the tools it called successfully.
type lambdaWorld struct {
	env    *family.Env
	out    *captured
	tools  map[string]mcptool.Tool
	acct   string
	bot    string
	p      *auth.Principal
	ctx    context.Context
	deps   mcptool.Deps
	called map[string]bool
}

// newLambdaWorld makes an Env of deps (its Audit and Queue captured in w.out), composes it
// as the MCP Lambda does, and seeds, unrecorded, an account with feature enabled and a bot.
func newLambdaWorld(t *testing.T, deps family.Deps, feature auth.Feature) *lambdaWorld {
	t.Helper()
	out := &captured{}
	deps.Tenancy, deps.Audit, deps.Queue = bots.Tenancy, out, out
	env := familytest.Env(t, deps)
	w := &lambdaWorld{env: env, out: out, tools: lambdaTools(env), called: map[string]bool{}}
	setup := sqlitetest.Unrecorded(t.Context())
	acct, owner, err := env.Auth.CreateAccount(setup, "Acme")
	require.NoError(t, err)
	acct, err = env.Auth.SetRollout(setup, acct.ID, []auth.Feature{feature}, nil)
	require.NoError(t, err)
	bot, err := bots.NewService(env.Store, env.Auth, env.Now).Create(setup, acct.ID, "Shop", nil)
	require.NoError(t, err)
	w.acct, w.bot = acct.ID, bot.ID
	w.p = &auth.Principal{AccountID: acct.ID, UserID: owner.ID, TokenID: "pat_x", Kind: auth.KindPAT, Scopes: auth.Scopes{auth.Full},
		Role: auth.RoleOwner, Entitlements: acct.Entitlements}
	w.ctx = auth.NewContext(t.Context(), w.p)
	w.deps = mcptool.Deps{Bots: env.Tenancy, Audit: env.Audit, Log: env.Log, Now: env.Now}
	return w
}

// call runs tool with args as the Lambda does, requires it to succeed, notes it called and
// returns its answer as JSON decodes it.
func (w *lambdaWorld) call(t *testing.T, tool, args string) map[string]any {
	t.Helper()
	tl, ok := w.tools[tool]
	require.True(t, ok, "the Lambda serves %s", tool)
	res := tl.Call(w.ctx, w.deps, json.RawMessage(args))
	require.Nil(t, res.Err, "%s: %v", tool, res.Err)
	b, err := json.Marshal(res.Value)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(b, &out), "%s: %s", tool, b)
	w.called[tool] = true
	return out
}

// calledEvery asserts that every tool f declares (its Tools, as its Build gives them) was
// called successfully, and that each mutating one was audited as the Lambda's.
func (w *lambdaWorld) calledEvery(t *testing.T, f family.Family) {
	t.Helper()
	var declared, mutating []string
	for _, tool := range f.Build(w.env).Tools {
		declared = append(declared, tool.Name)
		if tool.Mutates {
			mutating = append(mutating, tool.Name)
		}
	}
	require.NotEmpty(t, declared)
	var called []string
	for name := range w.called {
		called = append(called, name)
	}
	assert.ElementsMatch(t, declared, called, "every %s tool is called here: a new one needs its call", f.Name)
	w.out.mu.Lock()
	var audited []string
	for _, e := range w.out.events {
		if name, ok := strings.CutPrefix(e.Route, "POST /mcp/tools/"); ok && !slices.Contains(audited, name) {
			audited = append(audited, name)
		}
	}
	w.out.mu.Unlock()
	assert.ElementsMatch(t, mutating, audited, "the mutating %s tools, and they alone, are audited", f.Name)
}

// reaction creates a reaction of content (JSON) on the world's bot, published when publish.
func (w *lambdaWorld) reaction(t *testing.T, content string, publish bool) reactions.Reaction {
	t.Helper()
	setup := sqlitetest.Unrecorded(t.Context())
	var c reactions.Content
	require.NoError(t, json.Unmarshal([]byte(content), &c))
	rxs := reactionswiring.Service(w.env)
	rx, err := rxs.Create(setup, w.bot, c)
	require.NoError(t, err)
	if publish {
		rx, err = rxs.Publish(setup, w.bot, rx.ID, rx.Revision)
		require.NoError(t, err)
	}
	return rx
}

// recordRun records a real run of a published label_added reaction on the world's bot, as
// the jobs Lambda's runtime runs one (unrecorded: not the MCP Lambda's doing): a subscriber
// gets the label, and the runtime handles the trigger message and what it leads to. It
// returns the reaction and the run's id.
func (w *lambdaWorld) recordRun(t *testing.T) (reactions.Reaction, string) {
	t.Helper()
	setup := sqlitetest.Unrecorded(t.Context())
	subs := subscribers.NewService(w.env.Store, w.env.Now, nil)
	vip, err := subs.CreateLabel(setup, w.bot, "vip")
	require.NoError(t, err)
	seen, err := subs.CreateLabel(setup, w.bot, "seen")
	require.NoError(t, err)
	rx := w.reaction(t, `{"name":"VIP","trigger":{"type":"label_added","label_id":"`+vip.ID+`"},
		"steps":[{"id":"tag","type":"add_label","label_id":"`+seen.ID+`"},{"id":"done","type":"end"}]}`, true)
	sub, _, err := subs.Upsert(setup, w.bot, "telegram", "42", subscribers.Changes{AddLabels: []string{vip.ID}})
	require.NoError(t, err)

	// The runtime as the jobs Lambda composes it, on the same store.
	key, err := keyfile.New(bytes.Repeat([]byte{4}, 32))
	require.NoError(t, err)
	q := &queuetest.Sender{}
	jobsEnv := familytest.Env(t, family.Deps{Store: w.env.Store, Now: w.env.Now, Tenancy: bots.Tenancy, Secrets: key, Queue: q})
	mux, err := family.Compose(jobsEnv, runtimewiring.Family()).QueueMux()
	require.NoError(t, err)
	m, err := runtime.LabelAddedMessage(w.bot, sub.ID, channel.Telegram, vip.ID, sub.Revision)
	require.NoError(t, err)
	for msgs, steps := []queue.Message{m}, 0; len(msgs) > 0; steps++ {
		require.Less(t, steps, 50)
		require.NoError(t, mux.HandleMessage(setup, msgs[0]), msgs[0].Type)
		msgs = append(msgs[1:], q.Take()...)
	}

	runs, _, err := replaywiring.Service(w.env).Executions(setup, w.bot, replay.ExecutionFilter{ReactionID: rx.ID}, 10, "")
	require.NoError(t, err)
	require.Len(t, runs, 1, "the reaction ran once")
	require.Equal(t, runtime.StatusCompleted, runs[0].Status)
	return rx, runs[0].ID
}

// copilotAnswer is the model's answer the OpenAI fake gives the copilot: a fenced JSON
// object that asks a question before greeting.
const copilotAnswer = "```json\n" + `{"summary": "Asks first.", "name": "Welcome (asks)", "steps": [
  {"id": "ask", "type": "buttons", "text": "Are you new here?", "buttons": [{"title": "Yes", "step_id": "hi"}, {"title": "No", "step_id": "back"}]},
  {"id": "back", "type": "send_text", "text": "Welcome back"},
  {"id": "stop", "type": "end"},
  {"id": "hi", "type": "send_text", "text": "Hello there"}]}` + "\n```"

// Every copilot tool, as the MCP Lambda composes it, answers a proposal the copilot Lambda
// made (against the OpenAI fake, with the managed key the platform hands that Lambda alone):
// get and list read it, validate and simulate answer and keep their outcome on it, and are
// audited; every store operation stays within the mcp row of infra/access (TestMain).
//
// Not parallel: the managed AI configuration (the fake's URL) is read from the environment.
func TestCopilotToolsInTheLambda(t *testing.T) {
	const managedKey = "sk-managed-openai-0001"
	oa := openaifake.New(t)
	oa.AddKey(managedKey)
	t.Setenv(aiwiring.EnvOpenAIBaseURL, oa.URL())
	t.Setenv(aiwiring.EnvPrivateAddresses, "allow")
	for _, k := range []string{aiwiring.EnvOpenAIKey, aiwiring.EnvAnthropicKey, aiwiring.EnvGeminiKey, aiwiring.EnvRoutes, aiwiring.EnvPrices} {
		t.Setenv(k, "") // the MCP Lambda holds no managed key
	}
	w := newLambdaWorld(t, family.Deps{}, auth.RolloutCopilot)
	env := w.env
	rx := w.reaction(t, `{"name":"Welcome","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello"},{"id":"bye","type":"send_text","text":"Bye"}]}`, true)

	// The proposal, as the copilot Lambda makes it: setup, not the MCP Lambda's doing.
	copilotEnv := familytest.Env(t, family.Deps{Store: env.Store, Tenancy: bots.Tenancy, AIKeys: map[string]string{aiapi.OpenAI: managedKey}})
	oa.ReplyNext(copilotAnswer)
	pr, err := copilotwiring.Service(copilotEnv).Create(sqlitetest.Unrecorded(t.Context()), w.p, rx.ID,
		copilot.CreateRequest{Goal: "Ask whether the subscriber is new before greeting", Provider: aiapi.OpenAI})
	require.NoError(t, err)
	one := `{"proposal_id":"` + pr.ID + `"}`

	got := w.call(t, "get_copilot_proposal", one)
	assert.Equal(t, pr.ID, got["id"])
	assert.Equal(t, "open", got["status"])
	list := w.call(t, "list_copilot_proposals", `{"reaction_id":"`+rx.ID+`"}`)
	require.Len(t, list["data"], 1)
	assert.Equal(t, pr.ID, list["data"].([]any)[0].(map[string]any)["id"])
	assert.Equal(t, true, w.call(t, "validate_copilot_proposal", one)["valid"])
	sim := w.call(t, "simulate_copilot_proposal", `{"proposal_id":"`+pr.ID+`","samples":[{"presses":[{"step_id":"ask","button":1}]}]}`)
	assert.Equal(t, float64(1), sim["path_changed"], "the proposal asks first: another path")

	// Validate and simulate kept their outcome on the proposal.
	got = w.call(t, "get_copilot_proposal", one)
	assert.Equal(t, true, got["last_validation"].(map[string]any)["valid"])
	assert.Equal(t, float64(1), got["last_simulation"].(map[string]any)["samples"])
	w.calledEvery(t, copilotwiring.Family())
}

// Every flow intelligence tool, as the MCP Lambda composes it, answers on a run the
// runtime recorded: the overlay counts it, the samples show it, the policy is the default;
// every store operation stays within the mcp row of infra/access (TestMain).
func TestFlowIntelligenceToolsInTheLambda(t *testing.T) {
	t.Parallel()
	w := newLambdaWorld(t, family.Deps{}, auth.RolloutFlowIntelligence)
	env, out := w.env, w.out
	rx, exe := w.recordRun(t)
	botRx := `"bot_id":"` + w.bot + `","reaction_id":"` + rx.ID + `"`

	overlay := w.call(t, "get_flow_overlay", `{`+botRx+`}`)
	assert.Equal(t, rx.ID, overlay["reaction_id"])
	steps := overlay["steps"].([]any)
	require.Len(t, steps, 2)
	assert.Equal(t, float64(1), steps[0].(map[string]any)["entered"], "the run entered the first step")
	samples := w.call(t, "list_flow_samples", `{`+botRx+`,"step_id":"tag"}`)
	require.Len(t, samples["data"], 1, "%v", samples)
	assert.NotContains(t, mustMarshal(t, samples), exe, "samples are redacted")
	policy := w.call(t, "get_flow_policy", `{"bot_id":"`+w.bot+`"}`)
	assert.Equal(t, float64(0), policy["revision"], "the default, never saved")
	// A reaggregation job, started as the flowintel Lambda does (setup: its own composition,
	// which knows the job's kind, on the same store).
	lambda := familytest.Env(t, family.Deps{Store: env.Store, Tenancy: bots.Tenancy, Audit: out, Queue: out})
	family.Compose(lambda, flowintelwiring.Family())
	from, to := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), time.Now().UTC().Add(time.Hour).Format(time.RFC3339)
	job, err := flowintelwiring.Service(lambda).StartReaggregation(sqlitetest.Unrecorded(t.Context()), w.bot, flowintel.ReaggregationRequest{From: &from, To: &to})
	require.NoError(t, err)
	jobs := w.call(t, "list_flow_reaggregations", `{"bot_id":"`+w.bot+`"}`)
	require.Len(t, jobs["data"], 1)
	assert.Equal(t, job.ID, jobs["data"].([]any)[0].(map[string]any)["id"])
	assert.Equal(t, job.ID, w.call(t, "get_flow_reaggregation", `{"bot_id":"`+w.bot+`","job_id":"`+job.ID+`"}`)["id"])
	w.calledEvery(t, flowintelwiring.Family())
}

// Every replay tool, as the MCP Lambda composes it, answers on a run the runtime recorded,
// exported as a fixture and run again as a regression run (setup, as the replay Lambda
// does): the run is listed and read redacted, simulated again the same way (audited), and
// the fixture and the run are listed and read; every store operation stays within the mcp
// row of infra/access (TestMain).
func TestReplayToolsInTheLambda(t *testing.T) {
	t.Parallel()
	w := newLambdaWorld(t, family.Deps{}, auth.RolloutReplay)
	env := w.env
	rx, exe := w.recordRun(t)
	setup := sqlitetest.Unrecorded(t.Context())
	svc := replaywiring.Service(env)
	fx, err := svc.ExportFixture(setup, w.bot, replay.FixtureRequest{ExecutionID: exe, Name: "VIP tagged"})
	require.NoError(t, err)
	run, err := svc.StartRun(setup, w.bot, replay.RunRequest{ReactionID: rx.ID, Target: json.RawMessage(`1`)})
	require.NoError(t, err)
	botArg := `"bot_id":"` + w.bot + `"`

	list := w.call(t, "list_replay_executions", `{`+botArg+`,"reaction_id":"`+rx.ID+`"}`)
	require.Len(t, list["data"], 1)
	assert.Equal(t, exe, list["data"].([]any)[0].(map[string]any)["id"])
	got := w.call(t, "get_replay_execution", `{`+botArg+`,"execution_id":"`+exe+`"}`)
	assert.Equal(t, exe, got["id"])
	assert.Equal(t, "", got["subscriber_id"], "redacted")
	sim := w.call(t, "simulate_replay", `{`+botArg+`,"execution_id":"`+exe+`"}`)
	assert.Equal(t, true, sim["matches"], "the version it ran follows the recorded path")
	fixtures := w.call(t, "list_replay_fixtures", `{`+botArg+`,"reaction_id":"`+rx.ID+`"}`)
	require.Len(t, fixtures["data"], 1)
	assert.Equal(t, fx.ID, fixtures["data"].([]any)[0].(map[string]any)["id"])
	assert.Equal(t, fx.ID, w.call(t, "get_replay_fixture", `{`+botArg+`,"fixture_id":"`+fx.ID+`"}`)["id"])
	runs := w.call(t, "list_replay_runs", `{`+botArg+`}`)
	require.Len(t, runs["data"], 1)
	assert.Equal(t, run.ID, runs["data"].([]any)[0].(map[string]any)["id"])
	got = w.call(t, "get_replay_run", `{`+botArg+`,"run_id":"`+run.ID+`"}`)
	assert.Equal(t, float64(1), got["passed"])
	require.Len(t, got["results"], 1)
	result := w.call(t, "get_replay_run_result", `{`+botArg+`,"run_id":"`+run.ID+`","fixture_id":"`+fx.ID+`"}`)
	assert.Equal(t, "passed", result["outcome"])
	assert.NotContains(t, mustMarshal(t, result), exe, "the result holds the fixture's redacted input, not the run's ids")
	w.calledEvery(t, replaywiring.Family())
}

// Every playbooks tool, as the MCP Lambda composes it, answers: the catalog and one
// playbook, and an install made and installed (setup, as the playbooks Lambda does) listed,
// read and its KPIs counted from the event log the Lambda reads on AWS (storelog over the
// table); every store operation stays within the mcp row of infra/access (TestMain).
func TestPlaybooksToolsInTheLambda(t *testing.T) {
	t.Parallel()
	st := sqlitetest.Open(t)
	w := newLambdaWorld(t, family.Deps{Store: st, Events: storelog.New(st)}, auth.RolloutPlaybooks)
	env := w.env

	// The install, made and installed as the playbooks Lambda does: setup.
	setup := sqlitetest.Unrecorded(t.Context())
	svc := playbookswiring.Service(env, 0)
	in, err := svc.Create(setup, w.p, playbooks.CreateRequest{BotID: w.bot, PlaybookID: "abandoned_cart", Version: 1})
	require.NoError(t, err)
	in, err = svc.Answer(setup, w.p, in.ID, playbooks.PatchRequest{Answers: map[string]json.RawMessage{"store_name": json.RawMessage(`"Acme Shoes"`)},
		ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	in, err = svc.Install(setup, w.p, in.ID, playbooks.InstallRequest{ExpectedRevision: &in.Revision})
	require.NoError(t, err)
	require.Equal(t, playbooks.StatusInstalled, in.Status)
	one := `{"install_id":"` + in.ID + `"}`

	catalog := w.call(t, "list_playbooks", `{"vertical":"ecommerce"}`)
	require.Len(t, catalog["data"], 1)
	assert.Equal(t, "abandoned_cart", catalog["data"].([]any)[0].(map[string]any)["id"])
	assert.Equal(t, float64(1), w.call(t, "get_playbook", `{"playbook_id":"abandoned_cart","version":1}`)["version"])
	installs := w.call(t, "list_playbook_installs", `{"bot_id":"`+w.bot+`"}`)
	require.Len(t, installs["data"], 1)
	assert.Equal(t, in.ID, installs["data"].([]any)[0].(map[string]any)["id"])
	got := w.call(t, "get_playbook_install", one)
	assert.Equal(t, in.ID, got["id"])
	assert.Equal(t, "installed", got["status"])
	kpis := w.call(t, "get_playbook_kpis", one)
	assert.Equal(t, in.ID, kpis["install_id"])
	assert.NotEmpty(t, kpis["kpis"])
	w.calledEvery(t, playbookswiring.Family())
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
