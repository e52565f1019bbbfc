package runtime

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
)

// comparable is an entry without what a simulation cannot know: times, attempts, the
// provider's ids.
func comparableEntry(e Entry) map[string]any {
	strip := func(m map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			switch k {
			case "message_id", "execution_id", "until", "waiting_until", "reaction_version":
				out[k] = "*"
			default:
				out[k] = v
			}
		}
		return out
	}
	b, _ := json.Marshal(map[string]any{"seq": e.Seq, "step_id": e.StepID, "type": e.Type, "input": e.Input,
		"decision": e.Decision, "outcome": strip(e.Outcome), "error": e.Error})
	var v map[string]any
	_ = json.Unmarshal(b, &v)
	return v
}

// replays checks that the simulation of a recorded run's input follows the run: the same
// entries, end and error.
func replays(t *testing.T, f *fixture, d Detail) SimResult {
	t.Helper()
	flow, err := f.rx.Flow(t.Context(), f.bot, d.ReactionID, d.ReactionVersion)
	require.NoError(t, err)
	// Through JSON, as a stored trace is read.
	raw, err := json.Marshal(d)
	require.NoError(t, err)
	var read Detail
	require.NoError(t, json.Unmarshal(raw, &read))
	res := Simulate(flow, RecordedInput(read))
	require.Len(t, res.Steps, len(read.Steps), "steps of %s", d.ID)
	for i := range read.Steps {
		assert.Equal(t, comparableEntry(read.Steps[i]), comparableEntry(res.Steps[i]), "entry %d of %s", i+1, d.ID)
	}
	view := read.Status
	assert.Equal(t, view, res.Status)
	assert.Equal(t, read.EndReason, res.EndReason)
	if read.Error != nil {
		require.NotNil(t, res.Error)
		assert.Equal(t, read.Error.Kind, res.Error.Kind)
	}
	return res
}

func TestSimulationReplaysRecordedRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.label()
	score := f.field("score", "number")
	f.publish(fmt.Sprintf(`{"name":"menu","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello"},
		{"id":"tag","type":"add_label","label_id":%q},
		{"id":"check","type":"condition","match":"all","conditions":[{"label_id":%q,"op":"has"},{"field_id":%q,"op":"gt","value":5}],"then":"rich","else":"ask"},
		{"id":"rich","type":"send_text","text":"Rich"},
		{"id":"ask","type":"buttons","text":"Pick","buttons":[{"title":"Yes","step_id":"yes"},{"title":"Shop","payload":"shop"}]},
		{"id":"yes","type":"set_field","field_id":%q,"value":9},
		{"id":"pause","type":"wait","seconds":60},
		{"id":"bye","type":"send_text","text":"Bye"},
		{"id":"stop","type":"end"}]}`, vip, vip, score, score))
	f.publish(`{"name":"shop","trigger":{"type":"button","payload":"shop"},"steps":[{"id":"s","type":"send_text","text":"Shop open"}]}`)

	// A run that presses Yes, waits and ends.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	yes := f.adapter.last().Msg.Buttons[0].Payload
	require.NoError(t, f.deliver(f.inbound("", yes)))
	f.clock.advance(2 * time.Minute)
	f.drain()
	sub := f.subs.only(t)
	runs := f.runs(sub.ID)
	require.Len(t, runs, 1)
	require.Equal(t, StatusCompleted, runs[0].Status)
	replays(t, f, runs[0])

	// The score is 9 now: the condition takes the other branch; then a reply ends the wait.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	runs = f.runs(sub.ID)
	replays(t, f, runs[0])
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	shop := f.adapter.last().Msg.Buttons[1].Payload
	require.NoError(t, f.deliver(f.inbound("", shop)))
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	require.NoError(t, f.deliver(f.inbound("hello there", "")))
	runs = f.runs(sub.ID)
	ends := map[string]bool{}
	for _, d := range runs {
		replays(t, f, d)
		if d.EndReason != nil {
			ends[*d.EndReason] = true
		}
	}
	assert.Equal(t, map[string]bool{EndStep: true, EndButtonPayload: true, EndReply: true, EndLastStep: true}, ends,
		"the runs replayed end in every way a buttons wait can end but expiry (below)")

	// A wait nobody answers: its replay expires too.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	f.clock.advance(ButtonsWait + time.Minute)
	expired := f.runs(sub.ID)[0]
	require.Equal(t, EndButtonsExpired, *expired.EndReason)
	replays(t, f, expired)

	// A provider refusal fails the run; its replay fails the same way.
	f.adapter.failNext(&channel.Error{Kind: channel.ErrBlocked, Provider: channel.Telegram, Code: "403", Message: "blocked"})
	require.NoError(t, f.deliver(f.inboundFrom("77", "900", "/start", "")))
	f.subs.mu.Lock()
	other := f.subs.byIdent[f.bot+"/"+string(channel.Telegram)+"/77"]
	f.subs.mu.Unlock()
	failed := f.runs(other)[0]
	require.Equal(t, StatusFailed, failed.Status)
	replays(t, f, failed)
}

func TestSimulationIsDeterministic(t *testing.T) {
	t.Parallel()
	flow := Flow{ReactionID: "rct_x", Version: 1, Steps: []Step{
		{ID: "a", Type: StepSendText, Text: "Hi"},
		{ID: "w", Type: StepWait, Seconds: 30},
		{ID: "b", Type: StepButtons, Text: "Go?", Style: styleQuickReplies, Buttons: []Button{{Title: "Go", StepID: "c"}}},
		{ID: "c", Type: StepGoto, ReactionID: "rct_y"},
	}}
	in := SimInput{Channel: channel.Telegram, Start: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), NoQuickReplies: true,
		Presses: []SimPress{{Button: 0}}, Published: []string{"rct_y"}}
	one, err := json.Marshal(Simulate(flow, in))
	require.NoError(t, err)
	two, err := json.Marshal(Simulate(flow, in))
	require.NoError(t, err)
	assert.Equal(t, string(one), string(two))
	var res SimResult
	require.NoError(t, json.Unmarshal(one, &res))
	require.Len(t, res.Steps, 5)
	assert.Equal(t, "2026-01-02T03:04:35Z", res.Steps[2].At.Format(time.RFC3339), "the wait moved the clock")
	assert.Equal(t, "inline", res.Steps[2].Outcome["sent_as"])
	assert.Equal(t, true, res.Steps[3].Outcome["resumed"])
	assert.Equal(t, EndGoto, *res.EndReason)
}

func TestSimulationOnSampleSubscribers(t *testing.T) {
	t.Parallel()
	flow := Flow{Steps: []Step{
		{ID: "c", Type: StepCondition, Match: "any", Conditions: []Condition{
			{FieldID: "fld_city", Op: "eq", Value: json.RawMessage(`"Paris"`)}, {LabelID: "lbl_vip", Op: "has"}}, Then: "t", Else: "e"},
		{ID: "t", Type: StepSendTemplate, TemplateName: "promo", TemplateLanguage: "en", Params: []TemplateParam{{FieldID: "fld_city"}}},
		{ID: "done", Type: StepEnd},
		{ID: "e", Type: StepSendText, Text: "Elsewhere"},
	}}
	base := SimInput{Channel: channel.WhatsApp, Templates: true, Start: time.Unix(0, 0),
		Fields: []Field{{ID: "fld_city", Name: "city", Type: "string"}}, Labels: []string{"lbl_vip"}}

	paris := base
	paris.Subscriber = &SimSubscriber{Fields: map[string]any{"fld_city": "Paris"}}
	res := Simulate(flow, paris)
	require.Len(t, res.Steps, 3)
	assert.Equal(t, "then", res.Steps[0].Decision["branch"])
	assert.Equal(t, EndStep, *res.EndReason)

	vip := base
	vip.Subscriber = &SimSubscriber{Labels: []string{"lbl_vip"}}
	res = Simulate(flow, vip)
	require.Len(t, res.Steps, 2)
	assert.Equal(t, "missing_parameter", res.Error.Kind, "a template parameter without a value fails as in the runtime")

	nobody := base
	nobody.Subscriber = &SimSubscriber{}
	res = Simulate(flow, nobody)
	assert.Equal(t, "else", res.Steps[0].Decision["branch"])
	assert.Equal(t, EndLastStep, *res.EndReason)

	// Without a subscriber or facts, a test counts as false and says so.
	res = Simulate(flow, base)
	assert.Equal(t, "else", res.Steps[0].Decision["branch"])
	require.NotEmpty(t, res.Notes)
	assert.Equal(t, NoteNoFact, res.Notes[0].Code)

	// A recorded answer refusing the send fails the run.
	refused := base
	refused.Answers = []SimAnswer{{StepID: "e", Error: &StepError{Kind: "blocked", Message: "blocked"}}}
	res = Simulate(flow, refused)
	assert.Equal(t, StatusFailed, res.Status)
}
