package runtime

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// A refusal by the provider fails the run at that step, recorded in the trace; nothing is
// retried and the rest of the flow does not run.
func TestProviderRefusalsFailTheRun(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		kind string
	}{
		{channel.ErrBlocked, "blocked"},
		{channel.ErrOutsideWindow, "outside_window"},
		{channel.ErrRejected, "rejected"},
		{channel.ErrInvalidCredentials, "invalid_credentials"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"one"},{"id":"b","type":"send_text","text":"two"}]}`)
			f.adapter.failNext(&channel.Error{Kind: tc.err, Provider: channel.Telegram, Code: "403", Message: "Forbidden: bot was blocked by the user"})
			require.NoError(t, f.deliver(f.inbound("/start", "")))
			assert.Empty(t, f.adapter.texts())
			r := f.runs(f.subs.only(t).ID)[0]
			assert.Equal(t, StatusFailed, r.Status)
			require.NotNil(t, r.Error)
			assert.Equal(t, tc.kind, r.Error.Kind)
			assert.Equal(t, "403", r.Error.ProviderCode)
			assert.Equal(t, "a", r.Error.StepID)
			assert.NotContains(t, r.Error.Message, "Forbidden", "the provider's words stay in the log")
			require.Len(t, r.Steps, 1)
			assert.Equal(t, tc.kind, r.Steps[0].Error.Kind)
			assert.Equal(t, int64(0), f.counter("messages_out"))
		})
	}
}

// An update whose channel is gone by the time it is processed (disconnected, or its bot
// deleted and being purged) writes nothing back: no subscriber, no run, no counter.
func TestUpdateForAChannelThatIsGoneIsIgnored(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"one"}]}`)
	f.chans.missing = true
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	f.subs.mu.Lock()
	assert.Empty(t, f.subs.byID, "no subscriber is created for a channel that is gone")
	f.subs.mu.Unlock()
	assert.Empty(t, f.adapter.texts())
	assert.Equal(t, int64(0), f.counter("messages_in"))
}

// A channel that goes away while a run waits fails the run when it wakes.
func TestMissingChannelFailsTheRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"w","type":"wait","seconds":1},{"id":"a","type":"send_text","text":"one"}]}`)
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	f.chans.missing = true
	f.clock.advance(2 * time.Second)
	f.drain()
	r := f.runs(f.subs.only(t).ID)[0]
	assert.Equal(t, StatusFailed, r.Status)
	assert.Equal(t, "channel_missing", r.Error.Kind)
	assert.Empty(t, f.adapter.texts())
}

// Which reaction a text starts: /start and first contacts the start reaction, then exact
// keywords before patterns, the oldest reaction among equals; a payload its button reaction.
func TestMatching(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	send := func(name, trigger string) string {
		return f.publish(fmt.Sprintf(`{"name":%q,"trigger":%s,"steps":[{"id":"s","type":"send_text","text":%q}]}`, name, trigger, name))
	}
	send("pattern", `{"type":"keyword","pattern":"pri(ce|se)"}`)
	send("keyword", `{"type":"keyword","keywords":["Price  list","prices"]}`)
	send("keyword twin", `{"type":"keyword","keywords":["prices"]}`)
	send("button", `{"type":"button","payload":"buy"}`)

	// No start reaction: a first contact matches its text like any other.
	for _, tc := range []struct{ text, payload, want string }{
		{"  price LIST ", "", "keyword"},
		{"prices", "", "keyword"},
		{"what is the PRICE?", "", "pattern"},
		{"", "buy", "button"},
		{"hello", "", ""},
		{"", "sell", ""},
	} {
		before := len(f.adapter.texts())
		require.NoError(t, f.deliver(f.inbound(tc.text, tc.payload)))
		texts := f.adapter.texts()
		if tc.want == "" {
			assert.Len(t, texts, before, "%q %q", tc.text, tc.payload)
			continue
		}
		require.Len(t, texts, before+1, "%q %q", tc.text, tc.payload)
		assert.Equal(t, tc.want, texts[before], "%q %q", tc.text, tc.payload)
	}
	runs := f.runs(f.subs.only(t).ID)
	require.Len(t, runs, 4)
	assert.Equal(t, TriggerInfo{Type: "button", Payload: "buy", UpdateID: "4", Message: &Redacted{Kind: "button"}}, runs[0].Trigger)
	assert.Equal(t, "pattern", runs[1].Trigger.Reason)
	assert.Equal(t, "pri(ce|se)", runs[1].Trigger.Pattern)
	assert.Equal(t, "prices", runs[2].Trigger.Keyword)

	// With a start reaction, a first contact starts it whatever it says; a later one does not.
	start := send("start", `{"type":"start"}`)
	require.NoError(t, f.deliver(f.inboundFrom("7", "u7", "prices", "")))
	assert.Equal(t, "start", f.adapter.last().Msg.Text)
	assert.Equal(t, "7", f.adapter.last().User)
	require.NoError(t, f.deliver(f.inboundFrom("7", "u8", "prices", "")))
	assert.Equal(t, "keyword", f.adapter.last().Msg.Text)
	require.NoError(t, f.deliver(f.inboundFrom("7", "u9", "/start@shop_bot ref42", "")))
	assert.Equal(t, "start", f.adapter.last().Msg.Text)
	_ = start
}

// A retried first message still counts as the first contact: the subscriber was created
// after the update was received.
func TestFirstContactSurvivesARetry(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"start","trigger":{"type":"start"},"steps":[{"id":"s","type":"send_text","text":"welcome"}]}`)
	m := f.inboundFrom("9", "u1", "hi", "")
	// Something created the subscriber after the update arrived and before its claim (the
	// claim commits with the upsert, so here a stand-in that writes no claim).
	d := channel.Delivery{}
	require.NoError(t, m.Decode(&d))
	var first bool
	ok, err := f.rt.upsert(t.Context(), &d, 1, func(_ Subscriber, f bool) ([]store.Write, error) {
		first = f
		return nil, nil
	})
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, first)
	m.Attempt = 2
	require.NoError(t, f.deliver(m))
	assert.Equal(t, []string{"welcome"}, f.adapter.texts())
}

// A wait suspends the run; its continuation, delivered when due, resumes it at the next
// step. One that arrives early is sent on; a duplicate does nothing.
func TestWaitSuspendsAndResumes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[
		{"id":"a","type":"send_text","text":"before"},
		{"id":"w","type":"wait","seconds":3600},
		{"id":"b","type":"send_text","text":"after"}]}`)
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	assert.Equal(t, []string{"before"}, f.adapter.texts())
	sub := f.subs.only(t)
	r := f.runs(sub.ID)[0]
	assert.Equal(t, StatusWaiting, r.Status)
	require.NotNil(t, r.Waiting)
	assert.Equal(t, "time", r.Waiting.For)
	assert.Equal(t, "w", r.Waiting.StepID)
	assert.WithinDuration(t, f.clock.Now().Add(time.Hour), r.Waiting.Until, 5*time.Second)

	msgs := f.q.Take()
	require.Len(t, msgs, 1)
	wakeMsg := msgs[0]
	assert.Equal(t, ResumeMessage, wakeMsg.Type)
	assert.Equal(t, time.Hour, wakeMsg.Delay, "one message due when the wait ends, however long (no 15-minute hops)")

	// Delivered early (its sender's clock ran ahead): sent on with what remains.
	f.clock.advance(50 * time.Minute)
	require.NoError(t, f.deliver(wakeMsg))
	assert.Equal(t, []string{"before"}, f.adapter.texts())
	early := f.q.Take()
	require.Len(t, early, 1)
	assert.Equal(t, 10*time.Minute, early[0].Delay)

	f.clock.advance(11 * time.Minute)
	require.NoError(t, f.deliver(early[0]))
	assert.Equal(t, []string{"before", "after"}, f.adapter.texts())
	require.NoError(t, f.deliver(early[0]), "a duplicate continuation")
	require.NoError(t, f.deliver(wakeMsg))
	assert.Equal(t, []string{"before", "after"}, f.adapter.texts())
	r = f.runs(sub.ID)[0]
	assert.Equal(t, StatusCompleted, r.Status)
	require.Len(t, r.Steps, 3)
	assert.Equal(t, "w", r.Steps[1].StepID)
	assert.Contains(t, r.Steps[1].Outcome, "until")

	assert.Equal(t, 30*24*time.Hour, hop(30*24*time.Hour), "a 30-day wait is one message")
	assert.Equal(t, time.Second, hop(time.Millisecond), "whole seconds, rounded up")
	assert.Equal(t, 2*time.Second, hop(1001*time.Millisecond))
	assert.Equal(t, time.Duration(0), hop(-time.Second))
}

// A buttons step suspends the run; a press of a step button resumes it there, a text ends
// it (and is matched like any text), a typed title is a press, an old press does nothing.
func TestButtons(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"menu","trigger":{"type":"start"},"steps":[
		{"id":"ask","type":"buttons","text":"Pick","buttons":[
			{"title":"Yes","step_id":"yes"},{"title":"Shop","payload":"shop"},{"title":"Site","url":"https://example.com"}]},
		{"id":"yes","type":"send_text","text":"You said yes"},
		{"id":"again","type":"goto","step_id":"ask"}]}`)
	f.publish(`{"name":"shop","trigger":{"type":"button","payload":"shop"},"steps":[{"id":"s","type":"send_text","text":"Shop open"}]}`)
	f.publish(`{"name":"help","trigger":{"type":"keyword","keywords":["help"]},"steps":[{"id":"s","type":"send_text","text":"Helping"}]}`)

	require.NoError(t, f.deliver(f.inbound("/start", "")))
	first := f.adapter.last().Msg
	require.Len(t, first.Buttons, 3)
	assert.Equal(t, "Pick", first.Text)
	assert.Equal(t, "shop", first.Buttons[1].Payload)
	assert.Equal(t, "https://example.com", first.Buttons[2].URL)
	yes := first.Buttons[0].Payload
	assert.True(t, len(yes) <= 64 && yes[0] == '~', "a run payload within Telegram's 64 bytes: %q", yes)
	sub := f.subs.only(t)
	run := f.runs(sub.ID)[0]
	assert.Equal(t, StatusWaiting, run.Status)
	assert.Equal(t, "button", run.Waiting.For)

	// Press "Yes": the run goes on at "yes", then back to the menu.
	require.NoError(t, f.deliver(f.inbound("", yes)))
	texts := f.adapter.texts()
	assert.Equal(t, []string{"Pick", "You said yes", "Pick"}, texts)
	run = f.runs(sub.ID)[0]
	assert.Len(t, f.runs(sub.ID), 1, "the same run")
	assert.Equal(t, StatusWaiting, run.Status)
	assert.Equal(t, map[string]any{"button": float64(0), "title": "Yes", "next_step_id": "yes"}, run.Steps[1].Decision)

	// The first message's Yes is stale now: nothing happens.
	require.NoError(t, f.deliver(f.inbound("", yes)))
	assert.Len(t, f.adapter.texts(), 3)

	// Typing the title is a press (quick replies arrive as text on Telegram).
	require.NoError(t, f.deliver(f.inbound("yes", "")))
	assert.Equal(t, "You said yes", f.adapter.texts()[3])

	// A payload button ends the run and starts its reaction.
	shop := f.adapter.last().Msg.Buttons[1].Payload
	require.NoError(t, f.deliver(f.inbound("", shop)))
	assert.Equal(t, "Shop open", f.adapter.last().Msg.Text)
	runs := f.runs(sub.ID)
	require.Len(t, runs, 2)
	assert.Equal(t, StatusCompleted, runs[1].Status)
	assert.Equal(t, EndButtonPayload, *runs[1].EndReason)

	// A text while waiting ends the wait and is matched.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	require.NoError(t, f.deliver(f.inbound("help", "")))
	assert.Equal(t, "Helping", f.adapter.last().Msg.Text)
	runs = f.runs(sub.ID)
	require.Len(t, runs, 4)
	assert.Equal(t, EndReply, *runs[1].EndReason)

	// A buttons wait nobody answers reads as expired once ButtonsWait has passed.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	f.clock.advance(ButtonsWait + time.Minute)
	runs = f.runs(sub.ID)
	assert.Equal(t, StatusCompleted, runs[0].Status)
	assert.Equal(t, EndButtonsExpired, *runs[0].EndReason)
}

// A newer buttons wait supersedes the subscriber's older one.
func TestNewerButtonsWaitSupersedes(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"a","trigger":{"type":"start"},"steps":[{"id":"ask","type":"buttons","text":"A?","buttons":[{"title":"x","step_id":"x"}]},{"id":"x","type":"end"}]}`)
	f.publish(`{"name":"b","trigger":{"type":"button","payload":"b"},"steps":[{"id":"ask","type":"buttons","text":"B?","buttons":[{"title":"y","step_id":"y"}]},{"id":"y","type":"end"}]}`)
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	// "b" arrives as a payload press not of A's buttons: A ends (button_payload), B waits.
	require.NoError(t, f.deliver(f.inbound("", "b")))
	runs := f.runs(f.subs.only(t).ID)
	require.Len(t, runs, 2)
	assert.Equal(t, StatusWaiting, runs[0].Status)
	assert.Equal(t, StatusCompleted, runs[1].Status)
}

// A goto to another reaction ends the run and starts the target's published version as a
// new run, linked both ways; a chain that never suspends stops after MaxHops runs.
func TestGotoReactionAndHopLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	b := f.publish(`{"name":"b","trigger":{"type":"api"},"steps":[{"id":"s","type":"send_text","text":"in b"}]}`)
	f.publish(fmt.Sprintf(`{"name":"a","trigger":{"type":"start"},"steps":[{"id":"s","type":"send_text","text":"in a"},{"id":"g","type":"goto","reaction_id":%q}]}`, b))
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	assert.Equal(t, []string{"in a", "in b"}, f.adapter.texts())
	runs := f.runs(f.subs.only(t).ID)
	require.Len(t, runs, 2)
	assert.Equal(t, EndGoto, *runs[1].EndReason)
	assert.Equal(t, runs[0].ID, *runs[1].NextExecutionID)
	assert.Equal(t, runs[1].ID, *runs[0].PreviousExecutionID)
	assert.Equal(t, TriggerInfo{Type: "goto", FromExecutionID: runs[1].ID}, runs[0].Trigger)
	assert.Equal(t, int64(2), f.counter("reactions_started"))

	// x and y go to each other: each published version is fine on its own.
	g := newFixture(t)
	x := "rct_" + "0000000000000000000000000x"
	y := "rct_" + "0000000000000000000000000y"
	for _, fl := range []Flow{
		{ReactionID: x, Version: 1, Trigger: Trigger{Type: "start"}, Steps: []Step{{ID: "s", Type: StepSendText, Text: "x"}, {ID: "g", Type: StepGoto, ReactionID: y}}},
		{ReactionID: y, Version: 1, Trigger: Trigger{Type: "api"}, Steps: []Step{{ID: "s", Type: StepSendText, Text: "y"}, {ID: "g", Type: StepGoto, ReactionID: x}}},
	} {
		g.rx.list = append(g.rx.list, Published{ReactionID: fl.ReactionID, Version: 1, Trigger: fl.Trigger})
		g.rx.flows[fl.ReactionID+"/1"] = fl
	}
	require.NoError(t, g.deliver(g.inbound("/start", "")))
	assert.Len(t, g.adapter.texts(), MaxHops)
	runs = g.runs(g.subs.only(t).ID)
	require.Len(t, runs, MaxHops)
	assert.Equal(t, StatusFailed, runs[0].Status)
	assert.Equal(t, "hop_limit", runs[0].Error.Kind)

	// A goto to a reaction without a published version just ends the run.
	h := newFixture(t)
	h.publish(`{"name":"a","trigger":{"type":"start"},"steps":[{"id":"g","type":"goto","reaction_id":"rct_00000000000000000000000000"}]}`)
	require.NoError(t, h.deliver(h.inbound("/start", "")))
	runs = h.runs(h.subs.only(t).ID)
	assert.Equal(t, EndGotoNothing, *runs[0].EndReason)
}

// Adding a label starts the label's label_added reaction once the run ends; a label or
// field the bot no longer has makes its step a no-op and its condition false.
func TestLabelAddedAndMissingVocabulary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.label()
	f.publish(fmt.Sprintf(`{"name":"a","trigger":{"type":"start"},"steps":[{"id":"l","type":"add_label","label_id":%q},{"id":"s","type":"send_text","text":"tagged"}]}`, vip))
	f.publish(fmt.Sprintf(`{"name":"vip","trigger":{"type":"label_added","label_id":%q},"steps":[{"id":"s","type":"send_text","text":"welcome, vip"}]}`, vip))
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	assert.Equal(t, []string{"tagged"}, f.adapter.texts(), "after the run ends")
	f.drain()
	assert.Equal(t, []string{"tagged", "welcome, vip"}, f.adapter.texts())
	runs := f.runs(f.subs.only(t).ID)
	require.Len(t, runs, 2)
	assert.Equal(t, TriggerInfo{Type: "label_added", LabelID: vip, FromExecutionID: runs[1].ID}, runs[0].Trigger)
	// The label event is handled once.
	f.drain()
	assert.Len(t, f.adapter.texts(), 2)

	g := newFixture(t)
	gone := "lbl_0000000000000000000000000z"
	goneField := "fld_0000000000000000000000000z"
	g.publish(fmt.Sprintf(`{"name":"a","trigger":{"type":"start"},"steps":[
		{"id":"l","type":"add_label","label_id":%q},
		{"id":"f","type":"set_field","field_id":%q,"value":1},
		{"id":"c","type":"condition","match":"any","conditions":[{"label_id":%q,"op":"has_not"},{"field_id":%q,"op":"is_not_set"}],"then":"t","else":"e"},
		{"id":"t","type":"end"},
		{"id":"e","type":"send_text","text":"else"}]}`, gone, goneField, gone, goneField))
	require.NoError(t, g.deliver(g.inbound("/start", "")))
	assert.Equal(t, []string{"else"}, g.adapter.texts())
	r := g.runs(g.subs.only(t).ID)[0]
	assert.Equal(t, map[string]any{"skipped": "label_missing"}, r.Steps[0].Outcome)
	assert.Equal(t, map[string]any{"skipped": "field_missing"}, r.Steps[1].Outcome)
	assert.Equal(t, false, r.Steps[2].Decision["result"])
}

// Conditions on fields compare by the field's type.
func TestFieldConditions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	n := f.field("score", "number")
	s := f.field("city", "string")
	d := f.field("since", "datetime")
	b := f.field("paid", "boolean")
	sub, _, err := f.subs.Upsert(t.Context(), f.bot, channel.Telegram, "42", Profile{}, nil)
	require.NoError(t, err)
	for id, v := range map[string]any{n: 7.0, s: "Paris", d: "2026-01-02T00:00:00Z", b: true} {
		_, err := f.subs.SetField(t.Context(), f.bot, sub.ID, id, v)
		require.NoError(t, err)
	}
	drv := &driver{r: f.rt, rec: &record{Execution: Execution{BotID: f.bot}}}
	drv.sub, err = f.subs.Get(t.Context(), f.bot, sub.ID)
	require.NoError(t, err)
	for _, tc := range []struct {
		field, op, value string
		want             bool
	}{
		{n, "gt", "5", true}, {n, "lte", "7", true}, {n, "lt", "7", false}, {n, "eq", "7", true}, {n, "ne", "7", false},
		{s, "eq", `"Paris"`, true}, {s, "eq", `"paris"`, false}, {s, "contains", `"AR"`, true}, {s, "gt", `"A"`, false},
		{d, "gt", `"2026-01-01T23:00:00-02:00"`, false}, {d, "lt", `"2026-01-01T23:00:00-02:00"`, true},
		{b, "eq", "true", true}, {b, "ne", "false", true},
		{n, "is_set", "", true}, {n, "is_not_set", "", false},
	} {
		c := Condition{FieldID: tc.field, Op: tc.op}
		if tc.value != "" {
			c.Value = []byte(tc.value)
		}
		got, err := drv.test(t.Context(), c)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "%s %s %s", tc.field, tc.op, tc.value)
	}
	// Unset fields fail every test but ne and is_not_set.
	unset := f.field("empty", "string")
	drv.fields = nil
	for op, want := range map[string]bool{"eq": false, "ne": true, "contains": false, "is_set": false, "is_not_set": true} {
		got, err := drv.test(t.Context(), Condition{FieldID: unset, Op: op, Value: []byte(`"x"`)})
		require.NoError(t, err)
		assert.Equal(t, want, got, op)
	}
}

// A run waiting on a reaction deleted meanwhile fails when it wakes; a subscriber erased
// meanwhile fails it too.
func TestWakingRunWhoseReactionIsGone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"w","type":"wait","seconds":1},{"id":"b","type":"send_text","text":"after"}]}`)
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	f.rx.delete(id)
	f.clock.advance(2 * time.Second)
	f.drain()
	r := f.runs(f.subs.only(t).ID)[0]
	assert.Equal(t, StatusFailed, r.Status)
	assert.Equal(t, "reaction_gone", r.Error.Kind)
	assert.Empty(t, f.adapter.texts())
}

func TestTracesAccess(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"W","trigger":{"type":"keyword","keywords":["go"]},"steps":[{"id":"a","type":"send_text","text":"x"}]}`)
	for range 3 {
		require.NoError(t, f.deliver(f.inbound("go", "")))
	}
	sub := f.subs.only(t)
	tr := NewTraces(f.st, f.subs, f.clock.Now)
	page, next, err := tr.List(t.Context(), f.bot, sub.ID, 2, "")
	require.NoError(t, err)
	require.Len(t, page, 2)
	require.NotEmpty(t, next)
	rest, next, err := tr.List(t.Context(), f.bot, sub.ID, 2, next)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	assert.Empty(t, next)
	assert.Greater(t, page[0].ID, page[1].ID, "newest first")
	assert.Greater(t, page[1].ID, rest[0].ID)

	notFound := func(err error) {
		var he *httpapi.Error
		require.ErrorAs(t, err, &he)
		assert.Equal(t, 404, he.Status())
	}
	_, _, err = tr.List(t.Context(), f.bot, "sub_00000000000000000000000000", 10, "")
	notFound(err)
	_, err = tr.Get(t.Context(), f.bot, "exe_nope")
	notFound(err)
	_, err = tr.Get(t.Context(), "bot_other", page[0].ID)
	notFound(err)
}

func TestRunPayloads(t *testing.T) {
	t.Parallel()
	p := runPayload("exe_01234567890123456789abcdef", 12, 3)
	assert.Equal(t, "~01234567890123456789abcdef.12.3", p)
	exe, seq, i, ok := parseRunPayload(p)
	assert.True(t, ok)
	assert.Equal(t, "exe_01234567890123456789abcdef", exe)
	assert.Equal(t, 12, seq)
	assert.Equal(t, 3, i)
	for _, bad := range []string{"~x", "~a.b.c", "~a.0.1", "~a.1.-1"} {
		exe, _, _, ok := parseRunPayload(bad)
		assert.True(t, ok, bad)
		assert.Empty(t, exe, bad)
	}
	_, _, _, ok = parseRunPayload("buy")
	assert.False(t, ok)
}
