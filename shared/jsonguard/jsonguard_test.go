package jsonguard_test

import (
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/jsonguard"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name   string
		in     string
		kind   string
		offset int
	}{
		{"empty", ``, "", 0},
		{"plain", `{"a":[1,{"b":"c"}],"d":"é ✓ 😀"}`, "", 0},
		{"at the limit", deep(jsonguard.MaxDepth), "", 0},
		{"one too deep", deep(jsonguard.MaxDepth + 1), jsonguard.TooDeep, jsonguard.MaxDepth},
		{"objects count too", strings.Repeat(`{"a":`, jsonguard.MaxDepth+1), jsonguard.TooDeep, 5 * jsonguard.MaxDepth},
		{"brackets in strings do not nest", `["` + strings.Repeat("[{", 200) + `"]`, "", 0},
		{"an escaped quote does not end a string", `["\"[[[[` + strings.Repeat("[", 100) + `"]`, "", 0},
		{"siblings do not add up", strings.Repeat("[[]]", 1000), "", 0},
		{"invalid UTF-8 in a value", "{\"a\":\"x\xffy\"}", jsonguard.InvalidUTF8, 7},
		{"invalid UTF-8 in a key", "{\"\xc3\":1}", jsonguard.InvalidUTF8, 2},
		{"overlong encoding", "\"\xc0\xaf\"", jsonguard.InvalidUTF8, 1},
		{"encoded surrogate", "\"\xed\xa0\x80\"", jsonguard.InvalidUTF8, 1},
		{"truncated sequence at the end", "\"\xe2\x9c", jsonguard.InvalidUTF8, 1},
		{"escaped pair", `"\ud83d\ude00"`, "", 0},
		{"escaped BMP", `"\u00e9\u2713\\u"`, "", 0},
		{"lone high", `"a\ud83dz"`, jsonguard.LoneSurrogate, 2},
		{"high then non-low", `"\ud83d\u0041"`, jsonguard.LoneSurrogate, 1},
		{"lone low", `"\ude00"`, jsonguard.LoneSurrogate, 1},
		{"high at the end", `"\ud83d`, jsonguard.LoneSurrogate, 1},
		{"escaped backslash then u", `"\\ud800"`, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := jsonguard.Check([]byte(tt.in))
			if tt.kind == "" {
				assert.NoError(t, err)
				return
			}
			var e *jsonguard.Error
			require.True(t, errors.As(err, &e), "%v", err)
			assert.Equal(t, tt.kind, e.Kind)
			assert.Equal(t, tt.offset, e.Offset)
			assert.NotEmpty(t, e.Error())
		})
	}
}

func TestCheckDepth(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"{\"a\":\"x\xffy\"}", `"\ud800"`, `["\"[[["]`, strings.Repeat("[", jsonguard.MaxDepth)} {
		assert.NoError(t, jsonguard.CheckDepth([]byte(ok)), "%q", ok)
	}
	err := jsonguard.CheckDepth([]byte("[\"\xff\\ud800\"," + strings.Repeat("[", jsonguard.MaxDepth)))
	var e *jsonguard.Error
	require.True(t, errors.As(err, &e), "%v", err)
	assert.Equal(t, jsonguard.TooDeep, e.Kind)
}

// What Check lets through, encoding/json decodes without replacing anything.
func TestCheckedTextRoundTrips(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`"\ud83d\ude00 é"`, `"tab\there"`, `"\u0000"`} {
		require.NoError(t, jsonguard.Check([]byte(s)))
		var v string
		require.NoError(t, json.Unmarshal([]byte(s), &v))
		assert.NotContains(t, v, "\uFFFD", s)
	}
}

// One pass, no allocation, whatever the input.
func TestCheckAllocatesNothing(t *testing.T) {
	body := []byte(strings.Repeat("[", 1<<20))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := jsonguard.Check(body)
	runtime.ReadMemStats(&after)
	require.Error(t, err)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4096))
	assert.Zero(t, testing.AllocsPerRun(10, func() { _ = jsonguard.Check([]byte(`{"a":[1,2,"\u00e9"]}`)) }))
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,"b"]}`, `"\ud83d\ude00"`, `"\ud800"`, "\"\xff\"", strings.Repeat("[", 70)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := jsonguard.Check(b)
		var e *jsonguard.Error
		if err != nil {
			if !errors.As(err, &e) || e.Offset < 0 || e.Offset >= len(b) {
				t.Fatalf("error %v with an offset outside the input (%d bytes)", err, len(b))
			}
			return
		}
		// Accepted JSON decodes without a replacement character the input did not spell.
		var v any
		if json.Unmarshal(b, &v) == nil && !strings.Contains(string(b), "\uFFFD") && !strings.Contains(strings.ToLower(string(b)), `\ufffd`) {
			if strings.Contains(flatten(v), "\uFFFD") {
				t.Fatalf("accepted %q decodes with a replacement character", b)
			}
		}
	})
}

func flatten(v any) string {
	var sb strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			sb.WriteString(x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for k, e := range x {
				sb.WriteString(k)
				walk(e)
			}
		}
	}
	walk(v)
	return sb.String()
}
