package merge

import (
	"html"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func render(t *testing.T, src string, data Data) string {
	t.Helper()
	tpl, errs := Parse(src)
	require.Empty(t, errs)
	return tpl.Render(data, nil)
}

func TestRender(t *testing.T) {
	t.Parallel()
	data := Data{"subscriber.first_name": "ада", "subscriber.fields.plan": "Pro", "bot.name": "Acme"}
	cases := []struct{ src, want string }{
		{"Hi {{subscriber.first_name}}!", "Hi ада!"},
		{"Hi {{ subscriber.first_name | capitalize }}!", "Hi Ада!"},
		{"{{ subscriber.last_name | default: \"there\" }}", "there"},
		{`{{ subscriber.last_name | default: "a \"b\" | c" }}`, `a "b" | c`},
		{"{{ subscriber.fields.plan | upcase }} {{bot.name|downcase}}", "PRO acme"},
		{"{{ subscriber.fields.plan | truncate: 2 }}", "Pr…"},
		{"{{ subscriber.fields.plan | truncate: 3 }}", "Pro"},
		{"no fields at all", "no fields at all"},
		{"", ""},
		{"{{ x | default: \"\" | upcase }}", ""},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, render(t, c.src, data), c.src)
	}
}

func TestRenderEscapes(t *testing.T) {
	t.Parallel()
	tpl, errs := Parse(`<p>{{ subscriber.first_name }}</p>`)
	require.Empty(t, errs)
	got := tpl.Render(Data{"subscriber.first_name": `<script>x</script>`}, html.EscapeString)
	assert.Equal(t, `<p>&lt;script&gt;x&lt;/script&gt;</p>`, got, "values are escaped, literal HTML is not")
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want string }{
		{"Hi {{ subscriber.first_name", "never closed"},
		{"{{ }}", "empty merge field"},
		{"{{ subscriber first }}", "not a field name"},
		{"{{ subscriber..x }}", "not a field name"},
		{"{{ 1abc }}", "not a field name"},
		{"{{ a | shout }}", "unknown filter"},
		{"{{ a | default }}", "default needs a quoted text"},
		{"{{ a | default: there }}", "default needs a quoted text"},
		{"{{ a | truncate: 0 }}", "truncate needs a length"},
		{"{{ a | truncate: x }}", "truncate needs a length"},
		{"{{ a | upcase: 1 }}", "takes no argument"},
		{"{{ a | }}", "empty filter"},
		{"{{ a |b|c|d|e|f|g }}", "more than 5 filters"},
		{"{{ " + strings.Repeat("a", MaxPathLen+1) + " }}", "longer than"},
	}
	for _, c := range cases {
		_, errs := Parse(c.src)
		require.NotEmpty(t, errs, c.src)
		assert.Contains(t, errs[0].Message, c.want, c.src)
	}
}

func TestParseListsEveryProblem(t *testing.T) {
	t.Parallel()
	tpl, errs := Parse("{{ a | shout }} ok {{ b c }} {{ d | default }} {{ e }}")
	require.Len(t, errs, 3)
	require.Len(t, tpl.Fields(), 1, "what parsed is kept")
	assert.Equal(t, "e", tpl.Fields()[0].Path)
	assert.Equal(t, 0, errs[0].Offset)
	assert.Equal(t, 19, errs[1].Offset)
	assert.Equal(t, 29, errs[2].Offset)
}

func TestFieldLimit(t *testing.T) {
	t.Parallel()
	_, errs := Parse(strings.Repeat("{{a}}", MaxFields))
	assert.Empty(t, errs)
	_, errs = Parse(strings.Repeat("{{a}}", MaxFields+1))
	require.NotEmpty(t, errs)
	assert.Contains(t, errs[0].Message, "more than 500")
}

func TestFields(t *testing.T) {
	t.Parallel()
	tpl, errs := Parse("{{a.b}} x {{ c | upcase }}")
	require.Empty(t, errs)
	var paths []string
	for _, f := range tpl.Fields() {
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{"a.b", "c"}, paths)
}

func FuzzParse(f *testing.F) {
	f.Add(`Hi {{ subscriber.first_name | default: "there" | truncate: 3 }}`)
	f.Add(`{{ a | default: "x\"|y" }}`)
	f.Fuzz(func(t *testing.T, s string) {
		tpl, errs := Parse(s)
		if tpl == nil {
			t.Fatalf("Parse(%q): no template", s)
		}
		if len(errs) == 0 {
			_ = tpl.Render(Data{"a": "v"}, html.EscapeString)
		}
	})
}
