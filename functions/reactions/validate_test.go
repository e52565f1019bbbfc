package reactions

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

func TestValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.vocab.label(f.bot, "VIP")
	plan := f.vocab.field(f.bot, "plan", FieldString)
	score := f.vocab.field(f.bot, "score", FieldNumber)
	active := f.vocab.field(f.bot, "active", FieldBoolean)
	due := f.vocab.field(f.bot, "due", FieldDatetime)
	other := f.create(t, `{"name":"Other","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)

	// A reaction with every step type, referencing the bot's label, fields and reactions.
	full := fmt.Sprintf(`{"name":"Welcome","trigger":{"type":"start"},"steps":[
		{"id":"hello","type":"send_text","text":"Hi!"},
		{"id":"pic","type":"send_media","media_type":"image","url":"https://example.com/a.png","caption":"Look"},
		{"id":"tpl","type":"send_template","template_name":"order_update","template_language":"en_US",
			"params":[{"field_id":%[2]q,"default":"friend"},{"text":"#42"},{"field_id":%[3]q}],"fallback_text":"Your order #42 ships today."},
		{"id":"tag","type":"add_label","label_id":%[1]q},
		{"id":"untag","type":"remove_label","label_id":%[1]q},
		{"id":"set","type":"set_field","field_id":%[2]q,"value":"gold"},
		{"id":"num","type":"set_field","field_id":%[3]q,"value":4.5},
		{"id":"flag","type":"set_field","field_id":%[4]q,"value":true},
		{"id":"when","type":"set_field","field_id":%[5]q,"value":"2026-01-31T09:00:00+01:00"},
		{"id":"clear","type":"clear_field","field_id":%[2]q},
		{"id":"check","type":"condition","match":"any","conditions":[
			{"field_id":%[3]q,"op":"gte","value":3},
			{"field_id":%[2]q,"op":"contains","value":"gol"},
			{"field_id":%[5]q,"op":"lt","value":"2027-01-01T00:00:00Z"},
			{"field_id":%[4]q,"op":"is_set"},
			{"label_id":%[1]q,"op":"has_not"}],"then":"menu","else":"pause"},
		{"id":"pause","type":"wait","seconds":3600},
		{"id":"menu","type":"buttons","text":"Pick","buttons":[
			{"title":"Again","step_id":"menu"},{"title":"Buy","payload":"BUY_1"},{"title":"Site","url":"http://example.com"}]},
		{"id":"jump","type":"goto","reaction_id":%[6]q},
		{"id":"back","type":"goto","step_id":"pause"},
		{"id":"stop","type":"end"}]}`, vip, plan, score, active, due, other.ID)

	many := make([]string, MaxSteps+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"id":"s%d","type":"end"}`, i)
	}
	big := make([]string, 100)
	for i := range big {
		big[i] = fmt.Sprintf(`{"id":"s%d","type":"send_text","text":%q}`, i, strings.Repeat("x", MaxTextLen))
	}
	buttons := strings.Repeat(`{"title":"b","payload":"P"},`, MaxButtons+1)
	stepsOf := func(s string) string { return `{"name":"R","trigger":{"type":"api"},"steps":[` + s + `]}` }

	tests := []struct {
		name  string
		body  string
		code  string   // "" for valid
		paths []string // the problems' paths, in order
	}{
		{"every step type", full, "", nil},
		{"no steps", `{"name":"R","trigger":{"type":"api"}}`, "", nil},
		{"keywords", `{"name":"R","trigger":{"type":"keyword","keywords":["Price","cost  of it"]}}`, "", nil},
		{"pattern", `{"name":"R","trigger":{"type":"keyword","pattern":"^pri(ce|se)s?$"}}`, "", nil},
		{"label added", fmt.Sprintf(`{"name":"R","trigger":{"type":"label_added","label_id":%q}}`, vip), "", nil},
		{"button", `{"name":"R","trigger":{"type":"button","payload":"MENU:1"}}`, "", nil},

		{"missing name", `{"trigger":{"type":"api"}}`, "validation_failed", []string{"name"}},
		{"blank name", `{"name":"  ","trigger":{"type":"api"}}`, "validation_failed", []string{"name"}},
		{"long name", `{"name":"` + strings.Repeat("ä", MaxNameLen+1) + `","trigger":{"type":"api"}}`, "validation_failed", []string{"name"}},
		{"missing trigger", `{"name":"R"}`, "validation_failed", []string{"trigger.type"}},
		{"unknown trigger", `{"name":"R","trigger":{"type":"sms"}}`, "invalid_steps", []string{"trigger.type"}},
		{"keyword without words", `{"name":"R","trigger":{"type":"keyword"}}`, "validation_failed", []string{"trigger"}},
		{"keyword with both", `{"name":"R","trigger":{"type":"keyword","keywords":["a"],"pattern":"a"}}`, "validation_failed", []string{"trigger"}},
		{"empty keyword list", `{"name":"R","trigger":{"type":"keyword","keywords":[]}}`, "validation_failed", []string{"trigger.keywords"}},
		{"repeated keyword", `{"name":"R","trigger":{"type":"keyword","keywords":["Hi","hi ","  "]}}`, "validation_failed", []string{"trigger.keywords[1]", "trigger.keywords[2]"}},
		{"bad pattern", `{"name":"R","trigger":{"type":"keyword","pattern":"(a"}}`, "validation_failed", []string{"trigger.pattern"}},
		{"long pattern", `{"name":"R","trigger":{"type":"keyword","pattern":"` + strings.Repeat("a", MaxPatternLen+1) + `"}}`, "validation_failed", []string{"trigger.pattern"}},
		{"bad payload", `{"name":"R","trigger":{"type":"button","payload":"a b"}}`, "validation_failed", []string{"trigger.payload"}},
		{"long payload", `{"name":"R","trigger":{"type":"button","payload":"` + strings.Repeat("a", MaxPayloadLen+1) + `"}}`, "validation_failed", []string{"trigger.payload"}},
		{"field of another trigger", `{"name":"R","trigger":{"type":"start","payload":"X"}}`, "validation_failed", []string{"trigger.payload"}},
		{"unknown label trigger", `{"name":"R","trigger":{"type":"label_added","label_id":"lbl_nope"}}`, "invalid_steps", []string{"trigger.label_id"}},

		{"too many steps", stepsOf(strings.Join(many, ",")), "validation_failed", []string{"steps"}},
		{"too many bytes", stepsOf(strings.Join(big, ",")), "validation_failed", []string{"steps"}},
		{"step without id", stepsOf(`{"type":"end"}`), "validation_failed", []string{"steps[0].id"}},
		{"repeated step id", stepsOf(`{"id":"a","type":"end"},{"id":"a","type":"end"}`), "validation_failed", []string{"steps[1].id"}},
		{"bad step id", stepsOf(`{"id":"a b","type":"end"}`), "validation_failed", []string{"steps[0].id"}},
		{"step without type", stepsOf(`{"id":"a"}`), "validation_failed", []string{"steps[0].type"}},
		{"unknown step type", stepsOf(`{"id":"a","type":"send_sms","text":"x"}`), "invalid_steps", []string{"steps[0].type"}},
		{"empty text", stepsOf(`{"id":"a","type":"send_text","text":" "}`), "validation_failed", []string{"steps[0].text"}},
		{"long text", stepsOf(`{"id":"a","type":"send_text","text":"` + strings.Repeat("ж", MaxTextLen+1) + `"}`), "validation_failed", []string{"steps[0].text"}},
		{"field of another step", stepsOf(`{"id":"a","type":"send_text","text":"x","seconds":5}`), "validation_failed", []string{"steps[0].seconds"}},
		{"http media", stepsOf(`{"id":"a","type":"send_media","media_type":"video","url":"http://example.com/v.mp4"}`), "validation_failed", []string{"steps[0].url"}},
		{"media with credentials", stepsOf(`{"id":"a","type":"send_media","media_type":"audio","url":"https://u:p@example.com/a.mp3"}`), "validation_failed", []string{"steps[0].url"}},
		{"relative media", stepsOf(`{"id":"a","type":"send_media","media_type":"document","url":"/a.pdf"}`), "validation_failed", []string{"steps[0].url"}},
		{"unknown media type", stepsOf(`{"id":"a","type":"send_media","media_type":"gif","url":"https://example.com/a"}`), "validation_failed", []string{"steps[0].media_type"}},
		{"long caption", stepsOf(`{"id":"a","type":"send_media","media_type":"image","url":"https://e.com/a","caption":"` + strings.Repeat("c", MaxCaptionLen+1) + `"}`), "validation_failed", []string{"steps[0].caption"}},
		{"template without parameters", stepsOf(`{"id":"a","type":"send_template","template_name":"hello_world","template_language":"en"}`), "", nil},
		{"template unnamed", stepsOf(`{"id":"a","type":"send_template"}`), "validation_failed", []string{"steps[0].template_name", "steps[0].template_language"}},
		{"template name not WhatsApp's", stepsOf(`{"id":"a","type":"send_template","template_name":"Order Update","template_language":"en-US"}`), "validation_failed",
			[]string{"steps[0].template_name", "steps[0].template_language"}},
		{"template parameter with both", stepsOf(fmt.Sprintf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","params":[{"text":"x","field_id":%q}]}`, plan)),
			"validation_failed", []string{"steps[0].params[0]"}},
		{"template parameter with neither", stepsOf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","params":[{"default":"x"}]}`),
			"validation_failed", []string{"steps[0].params[0]"}},
		{"template parameters not one line", stepsOf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","params":[{"text":"a\nb"},{"text":"a     b"},{"text":" "},{"text":"` + strings.Repeat("p", MaxTemplateParamLen+1) + `"}]}`),
			"validation_failed", []string{"steps[0].params[0].text", "steps[0].params[1].text", "steps[0].params[2].text", "steps[0].params[3].text"}},
		{"template default of a literal", stepsOf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","params":[{"text":"x","default":"y"}]}`),
			"validation_failed", []string{"steps[0].params[0].default"}},
		{"template default not one line", stepsOf(fmt.Sprintf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","params":[{"field_id":%q,"default":"a\tb"}]}`, plan)),
			"validation_failed", []string{"steps[0].params[0].default"}},
		{"template too many parameters", stepsOf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","params":[` + strings.TrimSuffix(strings.Repeat(`{"text":"x"},`, MaxTemplateParams+1), ",") + `]}`),
			"validation_failed", []string{"steps[0].params"}},
		{"template blank fallback", stepsOf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","fallback_text":"  "}`), "validation_failed", []string{"steps[0].fallback_text"}},
		{"template fields on a text", stepsOf(`{"id":"a","type":"send_text","text":"x","template_name":"t","params":[{"text":"x"}]}`), "validation_failed",
			[]string{"steps[0].template_name", "steps[0].params"}},
		{"template parameter of an unknown field", stepsOf(`{"id":"a","type":"send_template","template_name":"t","template_language":"en","params":[{"text":"x"},{"field_id":"fld_nope"}]}`),
			"invalid_steps", []string{"steps[0].params[1].field_id"}},
		{"too many buttons", stepsOf(`{"id":"a","type":"buttons","text":"t","buttons":[` + strings.TrimSuffix(buttons, ",") + `]}`), "validation_failed", []string{"steps[0].buttons"}},
		{"no buttons", stepsOf(`{"id":"a","type":"buttons","text":"t","buttons":[]}`), "validation_failed", []string{"steps[0].buttons"}},
		{"button with two actions", stepsOf(`{"id":"a","type":"buttons","text":"t","buttons":[{"title":"b","payload":"P","url":"https://e.com"}]}`), "validation_failed", []string{"steps[0].buttons[0]"}},
		{"button without title", stepsOf(`{"id":"a","type":"buttons","text":"t","buttons":[{"title":"","payload":"P"}]}`), "validation_failed", []string{"steps[0].buttons[0].title"}},
		{"quick reply URL", stepsOf(`{"id":"a","type":"buttons","style":"quick_replies","text":"t","buttons":[{"title":"b","url":"https://e.com"}]}`), "validation_failed", []string{"steps[0].buttons[0].url"}},
		{"unknown style", stepsOf(`{"id":"a","type":"buttons","style":"carousel","text":"t","buttons":[{"title":"b","payload":"P"}]}`), "validation_failed", []string{"steps[0].style"}},
		{"dangling button", stepsOf(`{"id":"a","type":"buttons","text":"t","buttons":[{"title":"b","step_id":"zz"}]}`), "invalid_steps", []string{"steps[0].buttons[0].step_id"}},
		{"set without value", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q}`, plan)), "validation_failed", []string{"steps[0].value"}},
		{"set to null", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q,"value":null}`, plan)), "validation_failed", []string{"steps[0].value"}},
		{"set to an object", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q,"value":{}}`, plan)), "validation_failed", []string{"steps[0].value"}},
		{"number into string", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q,"value":5}`, plan)), "invalid_steps", []string{"steps[0].value"}},
		{"string into number", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q,"value":"5"}`, score)), "invalid_steps", []string{"steps[0].value"}},
		{"string into boolean", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q,"value":"true"}`, active)), "invalid_steps", []string{"steps[0].value"}},
		{"bad datetime", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q,"value":"tomorrow"}`, due)), "invalid_steps", []string{"steps[0].value"}},
		{"long string", stepsOf(fmt.Sprintf(`{"id":"a","type":"set_field","field_id":%q,"value":%q}`, plan, strings.Repeat("v", MaxStringValueLen+1))), "invalid_steps", []string{"steps[0].value"}},
		{"unknown field", stepsOf(`{"id":"a","type":"set_field","field_id":"fld_nope","value":1}`), "invalid_steps", []string{"steps[0].field_id"}},
		{"unknown field to clear", stepsOf(`{"id":"a","type":"clear_field","field_id":"fld_nope"}`), "invalid_steps", []string{"steps[0].field_id"}},
		{"unknown label", stepsOf(`{"id":"a","type":"add_label","label_id":"lbl_nope"}`), "invalid_steps", []string{"steps[0].label_id"}},
		{"label missing", stepsOf(`{"id":"a","type":"remove_label"}`), "validation_failed", []string{"steps[0].label_id"}},
		{"dangling then", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"label_id":%q,"op":"has"}],"then":"zz","else":"b"},{"id":"b","type":"end"}`, vip)), "invalid_steps", []string{"steps[0].then"}},
		{"missing else", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"label_id":%q,"op":"has"}],"then":"b"},{"id":"b","type":"end"}`, vip)), "validation_failed", []string{"steps[0].else"}},
		{"no conditions", stepsOf(`{"id":"a","type":"condition","conditions":[],"then":"b","else":"b"},{"id":"b","type":"end"}`), "validation_failed", []string{"steps[0].conditions"}},
		{"condition on both", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"label_id":%q,"field_id":%q,"op":"has"}],"then":"b","else":"b"},{"id":"b","type":"end"}`, vip, plan)), "validation_failed", []string{"steps[0].conditions[0]"}},
		{"label compared", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"label_id":%q,"op":"eq"}],"then":"b","else":"b"},{"id":"b","type":"end"}`, vip)), "validation_failed", []string{"steps[0].conditions[0].op"}},
		{"is_set with a value", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"field_id":%q,"op":"is_set","value":1}],"then":"b","else":"b"},{"id":"b","type":"end"}`, plan)), "validation_failed", []string{"steps[0].conditions[0].value"}},
		{"eq without a value", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"field_id":%q,"op":"eq"}],"then":"b","else":"b"},{"id":"b","type":"end"}`, plan)), "validation_failed", []string{"steps[0].conditions[0].value"}},
		{"ordering a string", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"field_id":%q,"op":"gt","value":"a"}],"then":"b","else":"b"},{"id":"b","type":"end"}`, plan)), "invalid_steps", []string{"steps[0].conditions[0].op"}},
		{"comparing to a wrong type", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"field_id":%q,"op":"eq","value":"yes"}],"then":"b","else":"b"},{"id":"b","type":"end"}`, active)), "invalid_steps", []string{"steps[0].conditions[0].value"}},
		{"wait zero", stepsOf(`{"id":"a","type":"wait","seconds":0}`), "validation_failed", []string{"steps[0].seconds"}},
		{"wait too long", stepsOf(fmt.Sprintf(`{"id":"a","type":"wait","seconds":%d}`, MaxWaitSeconds+1)), "validation_failed", []string{"steps[0].seconds"}},
		{"goto both", stepsOf(fmt.Sprintf(`{"id":"a","type":"goto","step_id":"a","reaction_id":%q}`, other.ID)), "validation_failed", []string{"steps[0]"}},
		{"goto nowhere", stepsOf(`{"id":"a","type":"goto"}`), "validation_failed", []string{"steps[0]"}},
		{"unknown reaction", stepsOf(`{"id":"a","type":"goto","reaction_id":"rct_0000000000000000000000000a"}`), "invalid_steps", []string{"steps[0].reaction_id"}},
		{"malformed reaction", stepsOf(`{"id":"a","type":"goto","reaction_id":"nope"}`), "invalid_steps", []string{"steps[0].reaction_id"}},

		{"goto loop", stepsOf(`{"id":"a","type":"send_text","text":"x"},{"id":"b","type":"goto","step_id":"a"}`), "invalid_steps", []string{"steps[1].step_id"}},
		{"goto itself", stepsOf(`{"id":"a","type":"goto","step_id":"a"}`), "invalid_steps", []string{"steps[0].step_id"}},
		{"branch loop", stepsOf(fmt.Sprintf(`{"id":"a","type":"add_label","label_id":%[1]q},{"id":"b","type":"condition","conditions":[{"label_id":%[1]q,"op":"has"}],"then":"a","else":"c"},{"id":"c","type":"end"}`, vip)), "invalid_steps", []string{"steps[1].then"}},
		{"two loops", stepsOf(fmt.Sprintf(`{"id":"a","type":"condition","conditions":[{"label_id":%[1]q,"op":"has"}],"then":"a","else":"b"},{"id":"b","type":"goto","step_id":"b"}`, vip)), "invalid_steps", []string{"steps[0].then", "steps[1].step_id"}},
		{"loop with a wait", stepsOf(`{"id":"a","type":"send_text","text":"x"},{"id":"w","type":"wait","seconds":60},{"id":"b","type":"goto","step_id":"a"}`), "", nil},
		{"menu loop", stepsOf(`{"id":"a","type":"buttons","text":"x","buttons":[{"title":"again","step_id":"a"}]}`), "", nil},

		{"every flaw at once", stepsOf(`{"id":"a","type":"add_label","label_id":"lbl_x"},{"id":"b","type":"goto","step_id":"zz"},{"id":"c","type":"fly"}`), "invalid_steps",
			[]string{"steps[0].label_id", "steps[1].step_id", "steps[2].type"}},
		{"shape before flow", `{"trigger":{"type":"api"},"steps":[{"id":"a","type":"fly"}]}`, "validation_failed", []string{"name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := f.svc.Create(t.Context(), f.bot, content(t, tt.body))
			if tt.code == "" {
				require.NoError(t, err)
				// Free the name for the next valid case.
				require.NoError(t, f.svc.Delete(t.Context(), f.bot, r.ID, nil))
				return
			}
			require.Error(t, err)
			code, got := paths(t, err)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.paths, got)
			if code == "invalid_steps" {
				assert.Equal(t, 422, httpapitest.AsError(t, err).Status())
			}
		})
	}
}

func TestSelfGotoIsALoop(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	r := f.create(t, `{"name":"Loop","trigger":{"type":"api"}}`)
	loop := steps(t, fmt.Sprintf(`[{"id":"a","type":"send_text","text":"x"},{"id":"b","type":"goto","reaction_id":%q}]`, r.ID))
	_, err := f.svc.Update(t.Context(), f.bot, r.ID, 1, Patch{Steps: &loop})
	code, got := paths(t, err)
	assert.Equal(t, "invalid_steps", code)
	assert.Equal(t, []string{"steps[1].reaction_id"}, got)

	paced := steps(t, fmt.Sprintf(`[{"id":"a","type":"send_text","text":"x"},{"id":"w","type":"wait","seconds":86400},{"id":"b","type":"goto","reaction_id":%q}]`, r.ID))
	r, err = f.svc.Update(t.Context(), f.bot, r.ID, 1, Patch{Steps: &paced})
	require.NoError(t, err)
	assert.Equal(t, int64(2), r.Revision)
}

func TestDefaultsAreFilledIn(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.vocab.label(f.bot, "vip")
	r := f.create(t, fmt.Sprintf(`{"name":"  Menu  ","trigger":{"type":"api"},"steps":[
		{"id":"m","type":"buttons","text":"Pick","buttons":[{"title":"A","payload":"A"}]},
		{"id":"c","type":"condition","conditions":[{"label_id":%q,"op":"has"}],"then":"m","else":"m"}]}`, vip))
	assert.Equal(t, "Menu", r.Name)
	assert.Equal(t, StyleInline, r.Steps[0].Style)
	assert.Equal(t, MatchAll, r.Steps[1].Match)
}
