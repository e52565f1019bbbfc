package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

const (
	vip      = "lbl_01jd0000000000000000000000"
	reaction = "rct_01jd0000000000000000000000"
)

// welcome is version 1 of the test reaction: a greeting, a test of the vip label, and a
// question whose Yes adds the label.
var welcome = `[
	{"id":"hi","type":"send_text","text":"Hello"},
	{"id":"check","type":"condition","conditions":[{"label_id":"` + vip + `","op":"has"}],"then":"back","else":"new"},
	{"id":"back","type":"send_text","text":"Welcome back"},
	{"id":"done","type":"end"},
	{"id":"new","type":"buttons","text":"Join?","buttons":[{"title":"Yes","step_id":"yes"},{"title":"No","step_id":"done"}]},
	{"id":"yes","type":"add_label","label_id":"` + vip + `"}]`

func flowOf(t testing.TB, version int64, steps string) runtime.Flow {
	t.Helper()
	f := runtime.Flow{ReactionID: reaction, Version: version, Name: "Welcome", Trigger: runtime.Trigger{Type: "start"}}
	require.NoError(t, json.Unmarshal([]byte(steps), &f.Steps))
	return f
}

// recorded makes a recorded run of flow, as the runtime stores and reads it back: the steps
// the input drives (through JSON, as a stored trace is read), with the identifying data a
// real run has (subscriber, update and provider message ids, real times).
func recorded(t testing.TB, bot string, flow runtime.Flow, in runtime.SimInput) runtime.Detail {
	t.Helper()
	res := runtime.Simulate(flow, in)
	d := runtime.Detail{Execution: runtime.Execution{
		ID: ids.At("exe", in.Start), BotID: bot, SubscriberID: "sub_01jd0000000000000000000042", Channel: in.Channel,
		ReactionID: flow.ReactionID, ReactionVersion: flow.Version, Trigger: in.Trigger, Status: res.Status,
		EndReason: res.EndReason, Error: res.Error, StepCount: len(res.Steps), StartedAt: in.Start, UpdatedAt: in.Start,
	}, Steps: res.Steps}
	for i := range d.Steps {
		d.Steps[i].At = in.Start.Add(time.Duration(i) * 37 * time.Millisecond)
		d.Steps[i].DurationMS = 12.5
	}
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	var read runtime.Detail
	require.NoError(t, json.Unmarshal(raw, &read))
	return read
}

// joinInput is a run of welcome by a subscriber without the label who presses Yes.
func joinInput() runtime.SimInput {
	return runtime.SimInput{Channel: channel.Telegram, Start: t0,
		Trigger: runtime.TriggerInfo{Type: "start", Reason: "command", UpdateID: "784512001", Message: &runtime.Redacted{Kind: "text", Length: 6}},
		Facts:   []runtime.SimFact{{LabelID: vip, Op: "has", Result: false}},
		Presses: []runtime.SimPress{{StepID: "new", Button: 0}},
		Answers: []runtime.SimAnswer{{StepID: "hi", MessageID: "tg-5550001"}, {StepID: "new", MessageID: "tg-5550002"}}}
}

// fakeTraces serves recorded runs.
type fakeTraces struct {
	mu   sync.Mutex
	runs map[string]runtime.Detail // by exe id
}

func (f *fakeTraces) add(d runtime.Detail) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs[d.ID] = d
}

func (f *fakeTraces) Get(_ context.Context, bot, id string) (runtime.Detail, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.runs[id]
	if !ok || d.BotID != bot {
		return runtime.Detail{}, httpapi.NotFound("execution")
	}
	return d, nil
}

func (f *fakeTraces) Runs(_ context.Context, bot string, flt runtime.RunFilter, limit int, _ string) ([]runtime.Execution, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := []runtime.Execution{}
	for _, d := range f.runs {
		if d.BotID == bot && (flt.ReactionID == "" || d.ReactionID == flt.ReactionID) && len(out) < limit {
			out = append(out, d.Execution)
		}
	}
	return out, "", nil
}

// fakeFlows serves published versions and a draft.
type fakeFlows struct {
	mu       sync.Mutex
	versions map[int64]runtime.Flow
	draft    runtime.Flow
	revision int64
}

func (f *fakeFlows) Version(_ context.Context, _, r string, n int64) (runtime.Flow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.versions[n]
	if !ok || r != reaction {
		return runtime.Flow{}, httpapi.NotFound("version")
	}
	return v, nil
}

func (f *fakeFlows) Draft(_ context.Context, _, r string) (runtime.Flow, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r != reaction {
		return runtime.Flow{}, 0, httpapi.NotFound("reaction")
	}
	return f.draft, f.revision, nil
}

func (f *fakeFlows) setDraft(t testing.TB, steps string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.draft = flowOf(t, 0, steps)
	f.revision++
}

type server struct {
	*httpapitest.Server
	svc    *Service
	traces *fakeTraces
	flows  *fakeFlows
	raw    *sqlitetest.Store
	clock  *httpapitest.Clock
	bot    string
}

// newServer serves the replay routes to an account with the replay rollout on.
func newServer(t *testing.T) *server {
	t.Helper()
	clock := httpapitest.NewClock(t0.Add(time.Hour), time.Millisecond)
	raw := sqlitetest.Open(t, sqlite.WithClock(clock.Now))
	s := &server{traces: &fakeTraces{runs: map[string]runtime.Detail{}}, raw: raw, clock: clock, bot: ids.At("bot", t0),
		flows: &fakeFlows{versions: map[int64]runtime.Flow{1: flowOf(t, 1, welcome)}}}
	s.flows.setDraft(t, welcome)
	s.svc = NewService(raw, s.traces, s.flows, clock.Now)
	s.Server = httpapitest.New(t, httpapitest.Config{Now: clock.Now, Store: raw, BotIDs: []string{s.bot}})
	_, err := s.Auth.SetRollout(sqlitetest.Unrecorded(t.Context()), s.Account.ID, []auth.Feature{auth.RolloutReplay}, nil)
	require.NoError(t, err)
	Routes(s.Mux, s.svc, s.Cursors)
	return s
}

// record adds a recorded run of the server's bot and returns its id.
func (s *server) record(t testing.TB, flow runtime.Flow, in runtime.SimInput) runtime.Detail {
	t.Helper()
	d := recorded(t, s.bot, flow, in)
	s.traces.add(d)
	return d
}

func (s *server) path(rest string) string { return fmt.Sprintf("/api/bots/%s/replay%s", s.bot, rest) }
