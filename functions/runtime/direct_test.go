package runtime

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/store"
)

const emailKind = channel.Kind("email")

// emailSender is a subscriber of the email channel type, as an inbound email route creates.
func (f *fixture) emailSender(addr string) Subscriber {
	f.t.Helper()
	sub, _, err := f.subs.Upsert(f.t.Context(), f.bot, emailKind, addr, Profile{}, nil)
	require.NoError(f.t, err)
	return sub
}

func (f *fixture) direct(sub Subscriber, reaction, cause string) queue.Message {
	f.t.Helper()
	m, err := RunReactionMessage(f.bot, sub.ID, sub.Channel, reaction, TriggerInboundEmail, cause)
	require.NoError(f.t, err)
	m.ID, m.Attempt = ids.New("msg"), 1
	return m
}

// A direct run starts the reaction's published version for the subscriber, whatever the
// reaction's own trigger, once per cause however often its message is sent or delivered;
// its trace says inbound_email and names the inbound message, and it starts a new chain.
func TestRunReactionOncePerCause(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.label()
	plan := f.field("plan", "string")
	tagged := f.publish(fmt.Sprintf(`{"name":"vip","trigger":{"type":"label_added","label_id":%q},"steps":[{"id":"n","type":"set_field","field_id":%q,"value":"tagged"}]}`, vip, plan))
	rct := f.publish(fmt.Sprintf(`{"name":"mail","trigger":{"type":"keyword","keywords":["never typed"]},"steps":[
		{"id":"f","type":"set_field","field_id":%q,"value":"mailed"},{"id":"l","type":"add_label","label_id":%q}]}`, plan, vip))
	sub := f.emailSender("ann@example.org")

	m := f.direct(sub, rct, "eim_1")
	assert.Equal(t, TriggerMessage, m.Type)
	require.NoError(t, f.deliver(m))
	require.NoError(t, f.deliver(m), "a redelivery")
	require.NoError(t, f.deliver(f.direct(sub, rct, "eim_1")), "the same cause sent again")
	f.drain()

	runs := f.runs(sub.ID)
	require.Len(t, runs, 2, "the reaction once, and the label_added reaction of the label it added")
	first, chained := runs[1], runs[0]
	assert.Equal(t, rct, first.ReactionID)
	assert.Equal(t, TriggerInfo{Type: TriggerInboundEmail, InboundMessageID: "eim_1"}, first.Trigger)
	assert.Equal(t, emailKind, first.Channel)
	assert.Equal(t, StatusCompleted, first.Status)
	require.Len(t, first.Steps, 2)
	assert.Equal(t, map[string]any{"done": true}, first.Steps[0].Outcome)
	assert.Equal(t, map[string]any{"added": true}, first.Steps[1].Outcome)
	rec, err := f.rt.loadRun(t.Context(), f.bot, first.ID)
	require.NoError(t, err)
	assert.Equal(t, 1, rec.Hops, "a new chain")
	assert.Equal(t, tagged, chained.ReactionID)
	assert.Equal(t, TriggerInfo{Type: TriggerLabelAdded, LabelID: vip, FromExecutionID: first.ID}, chained.Trigger)
	chainedRec, err := f.rt.loadRun(t.Context(), f.bot, chained.ID)
	require.NoError(t, err)
	assert.Equal(t, 2, chainedRec.Hops, "the label it added continues its chain")
	assert.Equal(t, "tagged", f.subs.only(t).Fields["plan"])

	// The trace holds the cause and nothing of the mail.
	b, err := json.Marshal(first)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "ann@example.org")
	assert.NotContains(t, string(b), `"message"`)

	// Another message is another run.
	require.NoError(t, f.deliver(f.direct(sub, rct, "eim_2")))
	f.drain()
	assert.Len(t, f.runs(sub.ID), 3, "eim_2's run; its label was there already, so nothing chains")
}

// A reaction without a published version starts nothing: the event is settled with an empty
// plan, and a reaction published later does not start from that settled event.
func TestRunReactionUnpublished(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sub := f.emailSender("ann@example.org")
	rct := f.publish(`{"name":"mail","trigger":{"type":"keyword","keywords":["x"]},"steps":[{"id":"e","type":"end"}]}`)
	f.rx.delete(rct)
	require.NoError(t, f.deliver(f.direct(sub, rct, "eim_1")))
	require.NoError(t, f.deliver(f.direct(sub, ids.New("rct"), "eim_2")), "a reaction that never existed")
	assert.Empty(t, f.runs(sub.ID))
	for _, cause := range []string{"eim_1", "eim_2"} {
		cl, err := f.rt.loadClaim(t.Context(), triggerKey(f.bot, TriggerInboundEmail+":"+cause))
		require.NoError(t, err)
		assert.True(t, cl.Done)
		assert.Empty(t, cl.Plan)
	}
	assert.Empty(t, f.q.Sent())
}

// A send step of a direct run for an email sender finds no channel of its type: the run
// fails there (channel_missing), as any run on a channel the bot lacks; the steps before
// it are done.
func TestRunReactionSendWithoutChannel(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	plan := f.field("plan", "string")
	rct := f.publish(fmt.Sprintf(`{"name":"mail","trigger":{"type":"keyword","keywords":["x"]},"steps":[
		{"id":"f","type":"set_field","field_id":%q,"value":"mailed"},{"id":"s","type":"send_text","text":"thanks"}]}`, plan))
	f.chans.missing = true // the bot has no email channel: none can be connected
	sub := f.emailSender("ann@example.org")
	require.NoError(t, f.deliver(f.direct(sub, rct, "eim_1")))
	runs := f.runs(sub.ID)
	require.Len(t, runs, 1)
	assert.Equal(t, StatusFailed, runs[0].Status)
	require.NotNil(t, runs[0].Error)
	assert.Equal(t, "channel_missing", runs[0].Error.Kind)
	assert.Equal(t, "the bot has no email channel connected", runs[0].Error.Message)
	require.Len(t, runs[0].Steps, 2)
	assert.Equal(t, "channel_missing", runs[0].Steps[1].Error.Kind)
	assert.Equal(t, "mailed", f.subs.only(t).Fields["plan"])
	assert.Empty(t, f.adapter.texts())
}

// What a direct run's message must name, and trigger events that are neither a label event
// nor a direct run, are refused or ignored.
func TestRunReactionMessageChecks(t *testing.T) {
	t.Parallel()
	for name, args := range map[string][6]string{
		"no bot":          {"", "sub_1", "email", "rct_1", TriggerInboundEmail, "eim_1"},
		"no subscriber":   {"bot_1", "", "email", "rct_1", TriggerInboundEmail, "eim_1"},
		"no channel type": {"bot_1", "sub_1", "", "rct_1", TriggerInboundEmail, "eim_1"},
		"no reaction":     {"bot_1", "sub_1", "email", "", TriggerInboundEmail, "eim_1"},
		"no cause":        {"bot_1", "sub_1", "email", "rct_1", TriggerInboundEmail, ""},
		"a label trigger": {"bot_1", "sub_1", "email", "rct_1", TriggerLabelAdded, "eim_1"},
		"a spaced cause":  {"bot_1", "sub_1", "email", "rct_1", TriggerInboundEmail, "eim 1"},
	} {
		_, err := RunReactionMessage(args[0], args[1], channel.Kind(args[2]), args[3], args[4], args[5])
		assert.Error(t, err, name)
	}
	m, err := RunReactionMessage("bot_1", "sub_1", "email", "rct_1", TriggerInboundEmail, "eim_1")
	require.NoError(t, err)
	assert.JSONEq(t, `{"bot_id":"bot_1","subscriber_id":"sub_1","kind":"email","label_id":"","cause":"inbound_email:eim_1",
		"from_execution_id":"","hops":0,"reaction_id":"rct_1","trigger":"inbound_email"}`, string(m.Body))

	f := newFixture(t)
	rct := f.publish(`{"name":"mail","trigger":{"type":"keyword","keywords":["x"]},"steps":[{"id":"e","type":"end"}]}`)
	sub := f.emailSender("ann@example.org")
	for name, body := range map[string]labelEvent{
		"both a label and a reaction": {BotID: f.bot, SubscriberID: sub.ID, Kind: emailKind, LabelID: "lbl_1", ReactionID: rct, Trigger: TriggerInboundEmail, Cause: "inbound_email:eim_1"},
		"an unknown trigger":          {BotID: f.bot, SubscriberID: sub.ID, Kind: emailKind, ReactionID: rct, Trigger: "api", Cause: "api:1"},
		"no trigger":                  {BotID: f.bot, SubscriberID: sub.ID, Kind: emailKind, ReactionID: rct, Cause: "x"},
	} {
		m, err := queue.New(TriggerMessage, body)
		require.NoError(t, err)
		require.NoError(t, f.deliver(m), name)
	}
	assert.Empty(t, f.runs(sub.ID))
	items, err := f.st.Query(t.Context(), store.Query{PK: triggerPK(f.bot)})
	require.NoError(t, err)
	assert.Empty(t, items.Items, "nothing claimed")
}

// A legacy reaction broadcast's recipient runs the reaction once per (broadcast, row); the
// trace names the broadcast.
func TestRunReactionForABroadcastRecipient(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rct := f.publish(`{"name":"promo","trigger":{"type":"keyword","keywords":["never typed"]},"steps":[{"id":"s","type":"send_text","text":"Sale!"}]}`)
	require.NoError(t, f.deliver(f.inbound("/start", ""))) // a Telegram subscriber
	sub := f.subs.only(t)
	m, err := RunReactionMessage(f.bot, sub.ID, sub.Channel, rct, TriggerBroadcast, "lbc_1/rcp_1")
	require.NoError(t, err)
	m.ID, m.Attempt = ids.New("msg"), 1
	require.NoError(t, f.deliver(m))
	require.NoError(t, f.deliver(m), "a redelivery")
	assert.Equal(t, []string{"Sale!"}, f.adapter.texts())
	runs := f.runs(sub.ID)
	require.Len(t, runs, 1)
	assert.Equal(t, TriggerInfo{Type: TriggerBroadcast, BroadcastID: "lbc_1"}, runs[0].Trigger)
}
