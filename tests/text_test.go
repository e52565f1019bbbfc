package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Text the platform keeps is what was sent, or nothing: NUL and other control characters,
// bidirectional overrides in names, and bytes that are not UTF-8 are refused with a 400 that
// names the field, in every family, instead of being stored or silently replaced.
func TestTextHygiene(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := "/api/bots/" + s.demo.BotID
	col := s.post(s.demo.Token, bot+"/collections", map[string]any{"name": "Products", "fields": []any{map[string]any{"name": "title", "type": "string"}}})
	require.Equal(t, http.StatusCreated, col.Status, "%s", col.Body)
	colPath := bot + "/collections/" + col.JSON(t)["id"].(string)

	type bad struct{ value, why string }
	names := []bad{{"a\u0000b", "NUL"}, {"\u202Eevil.exe", "bidirectional"}, {"x\u0085y", "U+0085"}, {"two\nlines", "one line"}, {"esc\u001b[31m", "U+001B"}}
	messages := []bad{{"a\u0000b", "NUL"}, {"x\u0085y", "U+0085"}, {"bell\u0007", "U+0007"}}
	routes := []struct {
		name, method, path, field string
		body                      func(v string) any
		values                    []bad
	}{
		{"bot", "POST", "/api/bots", "name", func(v string) any { return map[string]any{"name": v} }, names},
		{"bot rename", "PATCH", bot, "name", func(v string) any { return map[string]any{"expected_revision": 1, "name": v} }, names},
		{"bot API token", "POST", bot + "/api-tokens", "name", func(v string) any { return map[string]any{"name": v} }, names},
		{"PAT", "POST", "/api/personal-access-tokens", "name", func(v string) any {
			return map[string]any{"name": v, "scopes": []string{"bots:read"}, "expires_in_days": 1}
		}, names},
		{"label", "POST", bot + "/labels", "name", func(v string) any { return map[string]any{"name": v} }, names},
		{"collection", "POST", bot + "/collections", "name", func(v string) any {
			return map[string]any{"name": v, "fields": []any{map[string]any{"name": "a", "type": "string"}}}
		}, names},
		{"record value", "POST", colPath + "/records", "values.title", func(v string) any { return map[string]any{"values": map[string]any{"title": v}} }, messages},
		{"subscriber name", "POST", bot + "/subscribers", "first_name", func(v string) any {
			return map[string]any{"channel": "telegram", "external_id": "42", "first_name": v}
		}, names},
		{"reaction name", "POST", bot + "/reactions", "name", func(v string) any {
			return map[string]any{"name": v, "trigger": map[string]any{"type": "start"}, "steps": []any{map[string]any{"id": "a", "type": "send_text", "text": "hi"}}}
		}, names},
		{"message text", "POST", bot + "/reactions", "steps[0].text", func(v string) any {
			return map[string]any{"name": "R", "trigger": map[string]any{"type": "start"}, "steps": []any{map[string]any{"id": "a", "type": "send_text", "text": v}}}
		}, messages},
		{"channel name", "POST", bot + "/channels", "name", func(v string) any {
			return map[string]any{"type": "vk", "name": v, "credentials": map[string]any{"access_token": "x", "group_id": 1}}
		}, names},
	}
	for _, rt := range routes {
		for _, v := range rt.values {
			r := s.do(req{Method: rt.method, Path: rt.path, Token: s.demo.Token, Body: rt.body(v.value)})
			require.Equal(t, http.StatusBadRequest, r.Status, "%s %q: %s", rt.name, v.value, r.Body)
			p := r.JSON(t)
			assert.Equal(t, "validation_failed", p["code"], "%s %q", rt.name, v.value)
			assert.Contains(t, problemFields(p), rt.field, "%s %q: %s", rt.name, v.value, r.Body)
			assert.Contains(t, string(r.Body), v.why, "%s %q", rt.name, v.value)
		}
	}

	// What passes is kept as sent: right-to-left text with its marks, tabs and new lines in messages.
	r := s.post(s.demo.Token, "/api/bots", map[string]any{"name": "\u05d1\u05d5\u05d8 \u200f(1)"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Equal(t, "\u05d1\u05d5\u05d8 \u200f(1)", r.JSON(t)["name"])

	// Bytes that are not UTF-8 cannot even be JSON: the body is refused, naming the field.
	r = s.post(s.demo.Token, "/api/bots", "{\"name\":\"a\xffb\"}")
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, "invalid_body", r.Code(t))
	assert.Equal(t, "name", r.JSON(t)["field"])

	// Query parameters are text too.
	for _, q := range []string{"%00a", "a%ffb", "a%c2%85b"} {
		r := s.get(s.demo.Token, bot+"/subscribers?q="+q)
		assert.Equal(t, http.StatusBadRequest, r.Status, q)
		assert.Equal(t, "invalid_parameter", r.Code(t), q)
		assert.Equal(t, "q", r.JSON(t)["parameter"], q)
	}
	r = s.get(s.demo.Token, bot+"/subscribers?q="+url.QueryEscape("Anna"))
	assert.Equal(t, http.StatusOK, r.Status)
}

// problemFields lists the fields a validation_failed problem names.
func problemFields(p map[string]any) []string {
	var out []string
	errs, _ := p["errors"].([]any)
	for _, e := range errs {
		if m, ok := e.(map[string]any); ok {
			f, _ := m["field"].(string)
			out = append(out, strings.TrimSpace(f))
		}
	}
	return out
}
