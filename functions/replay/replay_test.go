package replay

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("reactions:read").InRollout(auth.RolloutReplay)
	write := httpapi.Need("reactions:write", auth.RightReactions).InRollout(auth.RolloutReplay)
	const b = "/api/bots/{botID}/replay"
	want := map[string]httpapi.Access{
		"GET " + b + "/executions":                       read,
		"GET " + b + "/executions/{executionID}":         read,
		"POST " + b + "/simulations":                     write,
		"GET " + b + "/fixtures":                         read,
		"POST " + b + "/fixtures":                        write,
		"GET " + b + "/fixtures/{fixtureID}":             read,
		"DELETE " + b + "/fixtures/{fixtureID}":          write,
		"GET " + b + "/runs":                             read,
		"POST " + b + "/runs":                            write,
		"GET " + b + "/runs/{runID}":                     read,
		"GET " + b + "/runs/{runID}/results/{fixtureID}": read,
	}
	got := map[string]httpapi.Access{}
	routes := map[string]bool{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
		routes[rt.Pattern()] = rt.Mutating()
	}
	assert.Equal(t, want, got)
	// Every tool has the access of its route, get_replay_execution (which answers the
	// redacted trace, and so mirrors no route) that of the trace GET.
	for _, tool := range Tools(s.svc, s.Cursors) {
		pattern := tool.Route
		if tool.Name == "get_replay_execution" {
			require.Empty(t, pattern)
			pattern = "GET " + b + "/executions/{executionID}"
		}
		require.Contains(t, want, pattern, tool.Name)
		assert.Equal(t, want[pattern], tool.Access, tool.Name)
		assert.Equal(t, routes[pattern], tool.Mutates, tool.Name)
	}
}

// personal are the identifying values of a recorded run (recorded, joinInput).
var personal = []string{"sub_01jd0000000000000000000042", "784512001", "tg-5550001", "tg-5550002", "eim_01jd0000000000000000000007"}

// A fixture holds nothing that identifies the subscriber or the provider's records of
// them: no subscriber id, no update or inbound message id, no provider message id (stable
// placeholders instead), no sample subscriber.
func TestFixtureHoldsNoPersonalData(t *testing.T) {
	t.Parallel()
	in := joinInput()
	in.Trigger.InboundMessageID = "eim_01jd0000000000000000000007"
	in.Trigger.FromExecutionID = "exe_01jd0000000000000000000009"
	d := recorded(t, "bot_x", flowOf(t, 1, welcome), in)
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	for _, p := range personal {
		require.Contains(t, string(raw), p, "the recorded run has it")
	}

	fin := FixtureInput(d)
	b, err := json.Marshal(fin)
	require.NoError(t, err)
	for _, p := range append(personal, "exe_01jd0000000000000000000009") {
		assert.NotContains(t, string(b), p)
	}
	assert.Nil(t, fin.Subscriber)
	assert.Equal(t, []runtime.SimAnswer{{StepID: "hi", MessageID: "msg_1"}, {StepID: "new", MessageID: "msg_2"}}, fin.Answers)

	r := Redact(d)
	b, err = json.Marshal(r)
	require.NoError(t, err)
	for _, p := range personal {
		assert.NotContains(t, string(b), p)
	}
	assert.Equal(t, "msg_2", r.Steps[2].Outcome["message_id"], "the same id, the same placeholder")
	assert.Equal(t, "tg-5550002", d.Steps[2].Outcome["message_id"], "the recorded run itself is untouched")
}

// Compare reports each kind of difference, by seq, and none for the same path.
func TestCompare(t *testing.T) {
	t.Parallel()
	v1 := flowOf(t, 1, welcome)
	base := runtime.Simulate(v1, FixtureInput(recorded(t, "b", v1, joinInput())))
	assert.Empty(t, Compare(base, base))

	cases := []struct {
		name  string
		steps string
		in    func(*runtime.SimInput)
		want  []string // kind@seq
	}{
		{"text changed only: same path", strings.Replace(welcome, `"Hello"`, `"Hi there"`, 1), nil, nil},
		{"a step replaced", strings.Replace(welcome, `{"id":"hi","type":"send_text","text":"Hello"}`, `{"id":"hey","type":"send_text","text":"Hello"}`, 1), nil,
			[]string{"step_changed@1"}},
		{"the branches swapped", strings.Replace(strings.Replace(welcome, `"then":"back","else":"new"`, `"then":"new","else":"back"`, 1), `"op":"has"`, `"op":"has"`, 1), nil,
			[]string{"decision_changed@2", "step_changed@3", "step_changed@4", "missing@5", "end_reason_changed@0"}},
		{"the label step gone", strings.Replace(welcome, `{"id":"yes","type":"add_label","label_id":"`+vip+`"}`, `{"id":"yes","type":"end"}`, 1), nil,
			[]string{"step_changed@5", "end_reason_changed@0"}},
		{"a send fails", welcome, func(in *runtime.SimInput) {
			in.Answers[0].Error = &runtime.StepError{Kind: "blocked", Message: "blocked"}
		}, []string{"outcome_changed@1", "missing@2", "missing@3", "missing@4", "missing@5", "status_changed@0", "end_reason_changed@0", "error_changed@0"}},
		{"one more step", strings.Replace(welcome, `"label_id":"`+vip+`"}]`, `"label_id":"`+vip+`"},{"id":"bye","type":"send_text","text":"Bye"}]`, 1), nil,
			[]string{"extra@6"}},
	}
	for _, c := range cases {
		in := FixtureInput(recorded(t, "b", v1, joinInput()))
		if c.in != nil {
			c.in(&in)
		}
		got := []string{}
		for _, d := range Compare(base, runtime.Simulate(flowOf(t, 2, c.steps), in)) {
			got = append(got, fmt.Sprintf("%s@%d", d.Kind, d.Seq))
		}
		assert.Equal(t, append([]string{}, c.want...), got, c.name)
	}
}

// A run exported as a fixture passes on its own version, every time with byte-identical
// traces; against a changed draft it reports what changed.
func TestFixtureRunsDeterministically(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	d := s.record(t, s.flows.versions[1], joinInput())

	res := s.Do(t, "POST", s.path("/fixtures"), map[string]any{"execution_id": d.ID, "name": " joins "})
	require.Equal(t, 201, res.Code, res.Body)
	fx := res.JSON["id"].(string)
	assert.True(t, ids.Valid(fixturePrefix, fx))
	assert.Equal(t, "joins", res.JSON["name"])
	assert.Equal(t, s.path("/fixtures/"+fx), res.Header.Get("Location"))
	for _, p := range personal {
		assert.NotContains(t, res.Body, p)
	}

	// The published version, twice: passed, the same bytes.
	var traces []json.RawMessage
	for range 2 {
		res = s.Do(t, "POST", s.path("/runs"), map[string]any{"reaction_id": reaction, "target": 1})
		require.Equal(t, 201, res.Code, res.Body)
		assert.Equal(t, float64(1), res.JSON["passed"], res.Body)
		assert.Equal(t, float64(0), res.JSON["changed"])
		runID := res.JSON["id"].(string)
		res = s.Do(t, "GET", s.path("/runs/"+runID+"/results/"+fx), nil)
		require.Equal(t, 200, res.Code, res.Body)
		var got struct {
			Trace json.RawMessage `json:"trace"`
		}
		require.NoError(t, json.Unmarshal([]byte(res.Body), &got))
		traces = append(traces, got.Trace)
	}
	require.NotEmpty(t, traces[0])
	assert.Equal(t, string(traces[0]), string(traces[1]), "the same fixture twice: byte-identical traces")

	// A draft that tags everyone on the way in and drops the question.
	s.flows.setDraft(t, `[
		{"id":"hi","type":"send_text","text":"Hello"},
		{"id":"yes","type":"add_label","label_id":"`+vip+`"}]`)
	res = s.Do(t, "POST", s.path("/runs"), map[string]any{"reaction_id": reaction, "target": "draft", "fixture_ids": []string{fx}})
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["changed"])
	assert.Equal(t, "draft", res.JSON["target"])
	assert.Equal(t, float64(2), res.JSON["draft_revision"])
	runID := res.JSON["id"].(string)
	res = s.Do(t, "GET", s.path("/runs/"+runID), nil)
	require.Equal(t, 200, res.Code, res.Body)
	results := res.JSON["results"].([]any)
	require.Len(t, results, 1)
	r0 := results[0].(map[string]any)
	assert.Equal(t, "changed", r0["outcome"])
	diffs := r0["differences"].([]any)
	require.NotEmpty(t, diffs)
	first := diffs[0].(map[string]any)
	assert.Equal(t, "step_changed", first["kind"])
	assert.Equal(t, float64(2), first["seq"])

	// Listed newest first; by reaction too.
	res = s.Do(t, "GET", s.path("/runs?reaction_id="+reaction), nil)
	require.Equal(t, 200, res.Code, res.Body)
	require.Len(t, res.JSON["data"].([]any), 3)
	assert.Equal(t, runID, res.JSON["data"].([]any)[0].(map[string]any)["id"])
	res = s.Do(t, "GET", s.path("/fixtures"), nil)
	require.Equal(t, 200, res.Code, res.Body)
	require.Len(t, res.JSON["data"].([]any), 1)
	assert.Nil(t, res.JSON["data"].([]any)[0].(map[string]any)["input"], "lists leave the input out")
}

// A simulation re-runs a recorded run against its version (it matches), another version or
// the draft (differences), answers the redacted input and stores nothing.
func TestSimulate(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	d := s.record(t, s.flows.versions[1], joinInput())

	res := s.Do(t, "POST", s.path("/simulations"), map[string]any{"execution_id": d.ID})
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, true, res.JSON["matches"], res.Body)
	assert.Equal(t, float64(1), res.JSON["version"])
	assert.Nil(t, res.JSON["draft_revision"])
	assert.Equal(t, []any{}, res.JSON["differences"])
	for _, p := range personal {
		assert.NotContains(t, res.Body, p)
	}
	first := res.Body
	res = s.Do(t, "POST", s.path("/simulations"), map[string]any{"execution_id": d.ID, "version": 1})
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, first, res.Body, "the same simulation twice: the same bytes")

	s.flows.setDraft(t, strings.Replace(welcome, `"else":"new"`, `"else":"back"`, 1))
	res = s.Do(t, "POST", s.path("/simulations"), map[string]any{"execution_id": d.ID, "version": "draft"})
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, false, res.JSON["matches"])
	assert.Equal(t, "draft", res.JSON["version"])
	assert.Equal(t, float64(2), res.JSON["draft_revision"])
	assert.NotEmpty(t, res.JSON["differences"])

	for _, c := range []struct {
		body   any
		status int
		code   string
	}{
		{map[string]any{"execution_id": d.ID, "version": 7}, 404, "not_found"},
		{map[string]any{"execution_id": d.ID, "version": 0}, 400, "validation_failed"},
		{map[string]any{"execution_id": d.ID, "version": "latest"}, 400, "validation_failed"},
		{map[string]any{}, 400, "validation_failed"},
		{map[string]any{"execution_id": d.ID, "extra": 1}, 400, "unknown_field"},
		{map[string]any{"execution_id": "exe_01jd0000000000000000000000"}, 404, "not_found"},
	} {
		res = s.Do(t, "POST", s.path("/simulations"), c.body)
		assert.Equal(t, c.status, res.Code, "%v: %s", c.body, res.Body)
		assert.Equal(t, c.code, res.Problem(), "%v", c.body)
	}
}

// Export refuses a run still running and a run its own version does not reproduce; runs
// refuse a reaction without fixtures and fixtures of another reaction.
func TestRefusals(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	d := s.record(t, s.flows.versions[1], joinInput())
	running := d
	running.ID = ids.At("exe", t0.Add(time.Minute))
	running.Status = runtime.StatusRunning
	s.traces.add(running)
	res := s.Do(t, "POST", s.path("/fixtures"), map[string]any{"execution_id": running.ID, "name": "x"})
	assert.Equal(t, 409, res.Code, res.Body)
	assert.Equal(t, "execution_running", res.Problem())

	diverged := d
	diverged.ID = ids.At("exe", t0.Add(2*time.Minute))
	diverged.Steps = append([]runtime.Entry{}, d.Steps[:2]...)
	diverged.Status, diverged.EndReason = runtime.StatusCompleted, ptr(runtime.EndStep)
	s.traces.add(diverged)
	res = s.Do(t, "POST", s.path("/fixtures"), map[string]any{"execution_id": diverged.ID, "name": "x"})
	assert.Equal(t, 422, res.Code, res.Body)
	assert.Equal(t, "replay_diverged", res.Problem())
	assert.NotEmpty(t, res.JSON["differences"])

	res = s.Do(t, "POST", s.path("/runs"), map[string]any{"reaction_id": reaction, "target": 1})
	assert.Equal(t, 422, res.Code, res.Body)
	assert.Equal(t, "no_fixtures", res.Problem())
	res = s.Do(t, "POST", s.path("/runs"), map[string]any{"reaction_id": reaction, "target": 1, "fixture_ids": []string{"rfx_01jd0000000000000000000000"}})
	assert.Equal(t, 400, res.Code, res.Body)
	assert.Equal(t, "validation_failed", res.Problem())
	res = s.Do(t, "POST", s.path("/runs"), map[string]any{"reaction_id": reaction})
	assert.Equal(t, 400, res.Code, res.Body)
	res = s.Do(t, "POST", s.path("/fixtures"), map[string]any{"execution_id": d.ID, "name": strings.Repeat("n", MaxNameLen+1)})
	assert.Equal(t, 400, res.Code, res.Body)

	for _, p := range []string{"/fixtures/rfx_nope", "/runs/rpr_nope", "/runs/rpr_01jd0000000000000000000000/results/rfx_01jd0000000000000000000000", "/executions/exe_nope"} {
		res = s.Do(t, "GET", s.path(p), nil)
		assert.Equal(t, 404, res.Code, "%s: %s", p, res.Body)
	}
	res = s.Do(t, "GET", s.path("/executions?status=sleeping"), nil)
	assert.Equal(t, 400, res.Code, res.Body)
}

func ptr[T any](v T) *T { return &v }

// A reaction has at most MaxFixtures fixtures (409 limit_reached); deleting one makes room.
func TestFixtureLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	d := s.record(t, s.flows.versions[1], joinInput())
	ctx := t.Context()
	var last string
	for i := range MaxFixtures {
		f, err := s.svc.ExportFixture(ctx, s.bot, FixtureRequest{ExecutionID: d.ID, Name: fmt.Sprint("f", i)})
		require.NoError(t, err)
		last = f.ID
	}
	res := s.Do(t, "POST", s.path("/fixtures"), map[string]any{"execution_id": d.ID, "name": "one too many"})
	assert.Equal(t, 409, res.Code, res.Body)
	assert.Equal(t, "limit_reached", res.Problem())
	assert.Equal(t, float64(MaxFixtures), res.JSON["limit"])

	res = s.Do(t, "DELETE", s.path("/fixtures/"+last), nil)
	require.Equal(t, 204, res.Code, res.Body)
	res = s.Do(t, "DELETE", s.path("/fixtures/"+last), nil)
	assert.Equal(t, 404, res.Code, res.Body)
	res = s.Do(t, "POST", s.path("/fixtures"), map[string]any{"execution_id": d.ID, "name": "room again"})
	assert.Equal(t, 201, res.Code, res.Body)

	// A run of all of them: 200 fixtures, all passed.
	res = s.Do(t, "POST", s.path("/runs"), map[string]any{"reaction_id": reaction, "target": 1})
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, float64(MaxFixtures), res.JSON["passed"])
	res = s.Do(t, "GET", s.path("/runs/"+res.JSON["id"].(string)), nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Len(t, res.JSON["results"].([]any), MaxFixtures)
}

// Without the replay rollout every route answers 403 feature_not_enabled.
func TestRolloutOff(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, err := s.Auth.SetRollout(sqlitetest.Unrecorded(t.Context()), s.Account.ID, nil, []auth.Feature{auth.RolloutReplay})
	require.NoError(t, err)
	tok := s.PAT(t, s.Owner, "*") // a new token: its principal carries the account as it is now
	for _, rt := range s.Mux.Routes() {
		path := strings.NewReplacer("{botID}", s.bot, "{executionID}", "exe_01jd0000000000000000000000",
			"{fixtureID}", "rfx_01jd0000000000000000000000", "{runID}", "rpr_01jd0000000000000000000000").Replace(rt.Path)
		var body any
		if rt.Method == http.MethodPost {
			body = map[string]any{}
		}
		res := s.DoAs(t, tok, rt.Method, path, body)
		assert.Equal(t, 403, res.Code, "%s: %s", rt.Pattern(), res.Body)
		assert.Equal(t, "feature_not_enabled", res.Problem(), rt.Pattern())
	}
}

// The purge erases the bot's fixtures, counters, runs and results; another bot's stay.
func TestPurgeStep(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	d := s.record(t, s.flows.versions[1], joinInput())
	_, err := s.svc.ExportFixture(ctx, s.bot, FixtureRequest{ExecutionID: d.ID, Name: "a"})
	require.NoError(t, err)
	run, err := s.svc.StartRun(ctx, s.bot, RunRequest{ReactionID: reaction, Target: json.RawMessage("1")})
	require.NoError(t, err)

	other := ids.At("bot", t0)
	od := recorded(t, other, s.flows.versions[1], joinInput())
	s.traces.add(od)
	kept, err := s.svc.ExportFixture(ctx, other, FixtureRequest{ExecutionID: od.ID, Name: "b"})
	require.NoError(t, err)

	require.NoError(t, purge.Run(ctx, PurgeStep(s.raw), purge.Payload{AccountID: "acct_x", BotID: s.bot}))
	for _, pk := range []string{fixturesPK(s.bot), runsPK(s.bot), resultsPK(s.bot, run.ID)} {
		page, err := s.raw.Query(sqlitetest.Unrecorded(ctx), store.Query{PK: pk})
		require.NoError(t, err)
		assert.Empty(t, page.Items, pk)
	}
	got, err := s.svc.Fixture(ctx, other, kept.ID)
	require.NoError(t, err)
	assert.Equal(t, kept.ID, got.ID)
}
