package runtime

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
)

// templateFlow is a keyword reaction that sends the template order_update with a field
// parameter, a literal one and a field parameter with a default, then a text.
func templateFlow(order, city string) string {
	return `{"name":"T","trigger":{"type":"keyword","keywords":["status"]},"steps":[
		{"id":"tpl","type":"send_template","template_name":"order_update","template_language":"en_US",
			"params":[{"field_id":"` + order + `"},{"text":"today"},{"field_id":"` + city + `","default":"your city"}],
			"fallback_text":"Your order ships today."},
		{"id":"after","type":"send_text","text":"Anything else?"}]}`
}

// On a channel with templates (WhatsApp), send_template sends the template with its
// parameters resolved from the subscriber's fields as the run saw them; the trace shows the
// template and the bot-authored parameters, never the subscriber's values.
func TestSendTemplateResolvesParameters(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.adapter.kinds = []string{channel.MessageKindText, channel.MessageKindTemplate}
	order, city := f.field("order_no", "string"), f.field("city", "string")
	score := f.field("score", "number")
	f.publish(templateFlow(order, city))
	require.NoError(t, f.deliver(f.inbound("hello", ""))) // the subscriber
	sub := f.subs.only(t)
	_, err := f.subs.SetField(t.Context(), f.bot, sub.ID, order, "A-42\n  secret\tpart")
	require.NoError(t, err)
	_, err = f.subs.SetField(t.Context(), f.bot, sub.ID, score, 1e6)
	require.NoError(t, err)

	require.NoError(t, f.deliver(f.inbound("status", "")))
	f.adapter.mu.Lock()
	sends := append([]sent(nil), f.adapter.sent...)
	f.adapter.mu.Unlock()
	require.Len(t, sends, 2)
	assert.Equal(t, &channel.Template{Name: "order_update", Language: "en_US", Params: []string{"A-42 secret part", "today", "your city"}},
		sends[0].Msg.Template, "one line; the default for the field without a value")
	assert.Empty(t, sends[0].Msg.Text)
	assert.Equal(t, "Anything else?", sends[1].Msg.Text)

	run := f.runs(sub.ID)[0]
	assert.Equal(t, StatusCompleted, run.Status)
	step := run.Steps[0]
	assert.Equal(t, StepSendTemplate, step.Type)
	assert.Equal(t, "m1", step.Outcome["message_id"])
	js, err := json.Marshal(step.Input)
	require.NoError(t, err)
	assert.JSONEq(t, `{"template_name":"order_update","template_language":"en_US",
		"params":[{"field_id":"`+order+`"},{"text":"today"},{"field_id":"`+city+`","default":"your city"}],
		"fallback_text":"Your order ships today."}`, string(js))
	whole, err := json.Marshal(run)
	require.NoError(t, err)
	assert.NotContains(t, string(whole), "secret", "a value read from the subscriber is never in the trace")
	assert.Equal(t, int64(2), f.counter("messages_out"))

	assert.Equal(t, "1000000", paramValue(1e6))
	assert.Equal(t, "4.5", paramValue(4.5))
	assert.Equal(t, "true", paramValue(true))
	assert.Equal(t, "", paramValue(" \n "))
	assert.Equal(t, maxParamLen, len(paramValue(strings.Repeat("x", maxParamLen+5))))
}

// A field parameter without a value and without a default fails the run before anything is
// sent: WhatsApp would refuse the empty parameter.
func TestSendTemplateWithoutAValueFailsTheRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.adapter.kinds = []string{channel.MessageKindText, channel.MessageKindTemplate}
	order, city := f.field("order_no", "string"), f.field("city", "string")
	f.publish(templateFlow(order, city))
	require.NoError(t, f.deliver(f.inbound("status", "")))
	assert.Empty(t, f.adapter.sendKeys(), "nothing was sent")
	run := f.runs(f.subs.only(t).ID)[0]
	assert.Equal(t, StatusFailed, run.Status)
	require.NotNil(t, run.Error)
	assert.Equal(t, "missing_parameter", run.Error.Kind)
	assert.Equal(t, "tpl", run.Error.StepID)
	assert.Contains(t, run.Error.Message, "params[0]")
}

// On a channel without templates (Telegram, VK) the step sends its fallback text, or is
// skipped when it has none; either way the run goes on.
func TestSendTemplateFallsBackWithoutTemplates(t *testing.T) {
	t.Parallel()
	t.Run("fallback text", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.publish(templateFlow(f.field("order_no", "string"), f.field("city", "string")))
		require.NoError(t, f.deliver(f.inbound("status", "")))
		assert.Equal(t, []string{"Your order ships today.", "Anything else?"}, f.adapter.texts())
		run := f.runs(f.subs.only(t).ID)[0]
		assert.Equal(t, StatusCompleted, run.Status)
		assert.Equal(t, map[string]any{"message_id": "m1", "sent_as": "fallback_text"}, run.Steps[0].Outcome)
	})
	t.Run("skipped", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.publish(`{"name":"T","trigger":{"type":"start"},"steps":[
			{"id":"tpl","type":"send_template","template_name":"hello_world","template_language":"en"},
			{"id":"after","type":"send_text","text":"Hi"}]}`)
		require.NoError(t, f.deliver(f.inbound("/start", "")))
		assert.Equal(t, []string{"Hi"}, f.adapter.texts())
		run := f.runs(f.subs.only(t).ID)[0]
		assert.Equal(t, StatusCompleted, run.Status)
		assert.Equal(t, map[string]any{"skipped": "templates_not_supported"}, run.Steps[0].Outcome)
		assert.Equal(t, int64(1), f.counter("messages_out"))
	})
}

// A template the provider refuses (not approved, parameters it will not take) fails the run
// like any refused message.
func TestSendTemplateRefusedByTheProvider(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.adapter.kinds = []string{channel.MessageKindText, channel.MessageKindTemplate}
	f.publish(`{"name":"T","trigger":{"type":"start"},"steps":[
		{"id":"tpl","type":"send_template","template_name":"hello_world","template_language":"en"}]}`)
	f.adapter.failNext(&channel.Error{Kind: channel.ErrRejected, Provider: channel.WhatsApp, Code: "132001", Message: "Template name does not exist in the translation"})
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	run := f.runs(f.subs.only(t).ID)[0]
	assert.Equal(t, StatusFailed, run.Status)
	assert.Equal(t, "rejected", run.Error.Kind)
	assert.Equal(t, "132001", run.Error.ProviderCode)
	assert.Equal(t, "Template name does not exist in the translation", run.Error.ProviderReason,
		"the trace says why, not only the server log")
}
