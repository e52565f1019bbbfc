package runtime

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/queue"
)

// A /start runs the start reaction: messages go out in order, the condition takes the branch
// the subscriber's labels say, the label is added, and the trace tells it all without
// anything the subscriber wrote.
func TestStartRunsThePublishedReaction(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.label()
	plan := f.field("plan", "string")
	id := f.publish(fmt.Sprintf(`{"name":"Welcome","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello!"},
		{"id":"check","type":"condition","conditions":[{"label_id":%q,"op":"has"}],"then":"back","else":"new"},
		{"id":"back","type":"send_text","text":"Welcome back"},
		{"id":"skip","type":"goto","step_id":"tag"},
		{"id":"new","type":"send_text","text":"Nice to meet you"},
		{"id":"tag","type":"add_label","label_id":%q},
		{"id":"set","type":"set_field","field_id":%q,"value":"trial"}]}`, vip, vip, plan))

	require.NoError(t, f.deliver(f.inbound("/start", "")))
	assert.Equal(t, []string{"Hello!", "Nice to meet you"}, f.adapter.texts())
	sub := f.subs.only(t)
	assert.Equal(t, []string{vip}, sub.Labels)
	assert.Equal(t, "trial", sub.Fields["plan"])
	assert.Equal(t, "42", f.adapter.last().User)

	runs := f.runs(sub.ID)
	require.Len(t, runs, 1)
	r := runs[0]
	assert.Equal(t, StatusCompleted, r.Status)
	assert.Equal(t, EndLastStep, *r.EndReason)
	assert.Equal(t, id, r.ReactionID)
	assert.Equal(t, int64(1), r.ReactionVersion)
	assert.Equal(t, TriggerInfo{Type: "start", Reason: "command", UpdateID: "1", Message: &Redacted{Kind: "text", Length: 6}}, r.Trigger)
	assert.NotNil(t, r.EndedAt)
	require.Len(t, r.Steps, 5)
	var got []string
	for _, e := range r.Steps {
		got = append(got, e.StepID)
		assert.Equal(t, 1, e.Attempts)
	}
	assert.Equal(t, []string{"hi", "check", "new", "tag", "set"}, got)
	assert.Equal(t, map[string]any{"message_id": "m1"}, r.Steps[0].Outcome)
	assert.Equal(t, "else", r.Steps[1].Decision["branch"])
	assert.Equal(t, false, r.Steps[1].Decision["result"])
	assert.Equal(t, map[string]any{"added": true}, r.Steps[3].Outcome)

	// Nothing the subscriber sent or is (the text, the name, the user id) is in the trace.
	b, err := json.Marshal(r)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "/start")
	assert.NotContains(t, string(b), "Ann")
	assert.NotContains(t, string(b), `"42"`)

	assert.Equal(t, int64(1), f.counter("messages_in"))
	assert.Equal(t, int64(2), f.counter("messages_out"))
	assert.Equal(t, int64(1), f.counter("reactions_started"))
	assert.Equal(t, int64(1), f.counter("active_subscribers"))
	// The label was added: its label_added reactions (none here) are looked up.
	require.Len(t, f.q.Sent(), 1)
	assert.Equal(t, TriggerMessage, f.q.Sent()[0].Type)
	f.drain()

	// The second /start takes the other branch; the label is already there.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	assert.Equal(t, []string{"Hello!", "Nice to meet you", "Hello!", "Welcome back"}, f.adapter.texts())
	runs = f.runs(sub.ID)
	require.Len(t, runs, 2)
	assert.Equal(t, "then", runs[0].Steps[1].Decision["branch"], "newest first")
	require.Len(t, runs[0].Steps, 6)
	assert.Equal(t, map[string]any{"next_step_id": "tag"}, runs[0].Steps[3].Decision)
	assert.Equal(t, map[string]any{"added": false}, runs[0].Steps[4].Outcome)
	// A label that was already there starts nothing.
	assert.Empty(t, f.q.Sent())
}

// The same update delivered twice (a provider's retry, an at-least-once queue) runs once;
// so does a message delivered twice concurrently.
func TestAnUpdateIsProcessedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"one"},{"id":"b","type":"send_text","text":"two"}]}`)
	m := f.inbound("/start", "")
	require.NoError(t, f.deliver(m))
	require.NoError(t, f.deliver(m))
	again := f.inboundFrom("42", "1", "/start", "") // the provider's redelivery, another message
	require.NoError(t, f.deliver(again))
	assert.Equal(t, []string{"one", "two"}, f.adapter.texts())
	assert.Equal(t, int64(1), f.counter("messages_in"))

	var wg sync.WaitGroup
	m2 := f.inbound("/start", "")
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f.deliver(m2) }()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, []string{"one", "two", "one", "two"}, f.adapter.texts())
	assert.Len(t, f.runs(f.subs.only(t).ID), 2)
}

// A provider's 429 leaves the run at the failed step: the retried message resumes there,
// never resending what went out, and the queue is asked to wait the Retry-After.
func TestRateLimitedStepIsRetriedAndDeliveredOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"one"},{"id":"b","type":"send_text","text":"two"},{"id":"c","type":"send_text","text":"three"}]}`)
	limited := &channel.Error{Kind: channel.ErrRateLimited, Provider: channel.Telegram, Code: "429", Message: "Too Many Requests", RetryAfter: 3 * time.Second}
	f.adapter.failCalls(2, limited, limited) // "one" goes out, "two" is throttled twice
	m := f.inbound("/start", "")

	err := f.deliver(m)
	require.Error(t, err)
	assert.Equal(t, 3*time.Second, queue.RetryDelay(err), "the provider's Retry-After reaches the queue")
	assert.Equal(t, []string{"one"}, f.adapter.texts())
	sub := f.subs.only(t)
	r := f.runs(sub.ID)[0]
	assert.Equal(t, StatusRunning, r.Status)
	require.NotNil(t, r.Error)
	assert.Equal(t, "rate_limited", r.Error.Kind)
	assert.Equal(t, "429", r.Error.ProviderCode)
	assert.Equal(t, "b", r.Error.StepID)
	assert.Equal(t, 1, r.Error.Attempts)

	m.Attempt = 2
	require.Error(t, f.deliver(m))
	m.Attempt = 3
	require.NoError(t, f.deliver(m))
	assert.Equal(t, []string{"one", "two", "three"}, f.adapter.texts())
	r = f.runs(sub.ID)[0]
	assert.Equal(t, StatusCompleted, r.Status)
	assert.Nil(t, r.Error)
	require.Len(t, r.Steps, 3)
	assert.Equal(t, 3, r.Steps[1].Attempts)
	assert.Equal(t, int64(3), f.counter("messages_out"))
	assert.Equal(t, int64(1), f.counter("messages_in"))
	assert.Equal(t, int64(1), f.counter("reactions_started"))
}
