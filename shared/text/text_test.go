package text_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/shared/text"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in                  string
		name, line, message string // "" passes, else a fragment of the error
	}{
		{"Support bot", "", "", ""},
		{"Ünïcödé ✓ 😀 日本語", "", "", ""},
		{"\u05e9\u05dc\u05d5\u05dd \u200f(RTL mark)", "", "", ""},
		{"", "", "", ""},
		{"a\x00b", "NUL", "NUL", "NUL"},
		{"a\tb", "one line", "one line", ""},
		{"a\nb\r\n", "one line", "one line", ""},
		{"a\x1bb", "U+001B", "U+001B", "U+001B"},
		{"a\x7fb", "U+007F", "U+007F", "U+007F"},
		{"a\u0085b", "U+0085", "U+0085", "U+0085"},
		{"a\u009fb", "U+009F", "U+009F", "U+009F"},
		{"\u202Eevil", "U+202E", "", ""},
		{"x\u2066y\u2069", "U+2066", "", ""},
		{"a\u202ab", "U+202A", "", ""},
		{"a\xffb", "UTF-8", "UTF-8", "UTF-8"},
		{"\xed\xa0\x80", "UTF-8", "UTF-8", "UTF-8"},
		{"ab\xc3", "at character 3", "UTF-8", "UTF-8"},
	}
	for _, tt := range tests {
		for rule, want := range map[text.Rule]string{text.Name: tt.name, text.Line: tt.line, text.Message: tt.message} {
			err := text.Check(tt.in, rule)
			if want == "" {
				assert.NoError(t, err, "%q rule %d", tt.in, rule)
			} else if assert.Error(t, err, "%q rule %d", tt.in, rule) {
				assert.Contains(t, err.Error(), want, "%q rule %d", tt.in, rule)
			}
		}
	}
}

func TestStrip(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "Ann evil", text.Strip("A\x00nn \u202Eevil\x1b\xff", text.Name))
	assert.Equal(t, "a\tb\nc", text.Strip("a\tb\nc\u0085", text.Message))
	assert.Equal(t, "ab", text.Strip("a\nb", text.Line))
	for _, s := range []string{"A\x00nn \u202Eevil\x1b\xff", "x\u2066\ty"} {
		assert.NoError(t, text.Check(text.Strip(s, text.Name), text.Name), "what Strip leaves passes Check")
	}
}
