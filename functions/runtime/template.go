package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/store"
)

// maxParamLen bounds a template parameter read from a subscriber's field: WhatsApp's bound
// on a template's body, which bot-authored parameters are held to on write
// (reactions.MaxTemplateParamLen).
const maxParamLen = 1024

// skippedNoTemplates is the outcome of a send_template step without fallback text on a
// channel that has no templates.
const skippedNoTemplates = "templates_not_supported"

// sendTemplate executes a send_template step (docs/runtime.md, "Message templates"). On a
// channel whose capabilities declare templates (WhatsApp) it sends the template with its
// parameters resolved, which WhatsApp delivers inside and outside the 24-hour window alike;
// elsewhere it sends the step's fallback text, or skips the step when it has none. The trace
// records the template and the bot-authored parameters, never a value read from the
// subscriber.
func (d *driver) sendTemplate(ctx context.Context, s Step, e *Entry, next int) ([]store.Write, error) {
	e.Input = templateInput(s)
	ok, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	if !ok {
		d.channelMissing(e)
		return nil, nil
	}
	if !d.adapter.Capabilities().Sends(channel.MessageKindTemplate) {
		if s.FallbackText == "" {
			e.Outcome = map[string]any{"skipped": skippedNoTemplates}
			d.rec.Cursor = next
			return nil, nil
		}
		writes, err := d.deliver(ctx, e, channel.Message{Text: s.FallbackText}, next)
		if err == nil && e.Error == nil {
			e.Outcome["sent_as"] = "fallback_text"
		}
		return writes, err
	}
	params, missing, err := d.templateParams(ctx, s.Params)
	if err != nil {
		return nil, err
	}
	if missing >= 0 {
		// WhatsApp refuses an empty parameter; sending the template without it would fail
		// the same way, after a call.
		d.fail(e, StepError{Kind: "missing_parameter", Message: fmt.Sprintf(
			"params[%d]: no value of the custom field %s (the subscriber has none, or the bot no longer has the field) and no default",
			missing, s.Params[missing].FieldID)})
		return nil, nil
	}
	m := channel.Message{Template: &channel.Template{Name: s.TemplateName, Language: s.TemplateLanguage, Params: params}}
	return d.deliver(ctx, e, m, next)
}

// templateParams resolves a step's parameters: literal texts as written, fields to the
// subscriber's value as the run last saw it (paramValue), else the parameter's default.
// missing is the index of a parameter left without a value, or -1.
func (d *driver) templateParams(ctx context.Context, params []TemplateParam) (out []string, missing int, err error) {
	out = make([]string, len(params))
	for i, p := range params {
		if p.FieldID == "" {
			out[i] = p.Text
			continue
		}
		f, ok, err := d.field(ctx, p.FieldID)
		if err != nil {
			return nil, -1, err
		}
		if ok {
			out[i] = paramValue(d.sub.Fields[f.Name])
		}
		if out[i] == "" {
			out[i] = p.Default
		}
		if out[i] == "" {
			return nil, i, nil
		}
	}
	return out, -1, nil
}

// paramValue renders a subscriber's field value as a template parameter: a string as it is,
// a number in plain decimal notation (4.5, 1000000), a boolean as true or false, a datetime
// as its RFC 3339 text; on one line, since WhatsApp refuses new lines, tabs and more than
// four spaces in a row (runs of white space become one space); at most maxParamLen
// characters. A value absent or blank is "".
func paramValue(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	case json.Number:
		s = x.String()
	default:
		s = fmt.Sprint(x)
	}
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > maxParamLen {
		s = string([]rune(s)[:maxParamLen])
	}
	return s
}

// templateInput is a send_template step's trace input: the template, the bot-authored
// parameters (a literal's text, a field parameter's field id and default) and the fallback
// text, texts cut at clipAt. Values read from the subscriber are never in it.
func templateInput(s Step) map[string]any {
	in := map[string]any{"template_name": s.TemplateName, "template_language": s.TemplateLanguage}
	if len(s.Params) > 0 {
		list := make([]map[string]any, len(s.Params))
		for i, p := range s.Params {
			if p.FieldID == "" {
				list[i] = map[string]any{"text": clip(p.Text)}
				continue
			}
			item := map[string]any{"field_id": p.FieldID}
			if p.Default != "" {
				item["default"] = clip(p.Default)
			}
			list[i] = item
		}
		in["params"] = list
	}
	if s.FallbackText != "" {
		in["fallback_text"] = clip(s.FallbackText)
	}
	return in
}
