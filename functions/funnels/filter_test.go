package funnels

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFilters(t *testing.T) {
	t.Parallel()
	props := map[string]any{"plan": "pro", "seats": 5.0, "trial": true, "count": 3, "note": "big order"}
	cases := []struct {
		f    Filter
		want bool
	}{
		{Filter{Property: "plan", Op: OpEq, Value: "pro"}, true},
		{Filter{Property: "plan", Op: OpEq, Value: "Pro"}, false},
		{Filter{Property: "seats", Op: OpEq, Value: 5.0}, true},
		{Filter{Property: "seats", Op: OpEq, Value: "5"}, false}, // strict types
		{Filter{Property: "count", Op: OpEq, Value: 3.0}, true},  // an integer appended in process
		{Filter{Property: "trial", Op: OpEq, Value: true}, true},
		{Filter{Property: "missing", Op: OpEq, Value: "x"}, false},
		{Filter{Property: "plan", Op: OpNeq, Value: "free"}, true},
		{Filter{Property: "plan", Op: OpNeq, Value: "pro"}, false},
		{Filter{Property: "missing", Op: OpNeq, Value: "x"}, true}, // absent is not equal
		{Filter{Property: "plan", Op: OpIn, Value: []any{"free", "pro"}}, true},
		{Filter{Property: "plan", Op: OpIn, Value: []any{"free", 1.0}}, false},
		{Filter{Property: "missing", Op: OpIn, Value: []any{"x"}}, false},
		{Filter{Property: "plan", Op: OpNotIn, Value: []any{"free"}}, true},
		{Filter{Property: "plan", Op: OpNotIn, Value: []any{"pro"}}, false},
		{Filter{Property: "missing", Op: OpNotIn, Value: []any{"x"}}, true},
		{Filter{Property: "plan", Op: OpExists}, true},
		{Filter{Property: "missing", Op: OpExists}, false},
		{Filter{Property: "missing", Op: OpNotExists}, true},
		{Filter{Property: "seats", Op: OpGt, Value: 4.0}, true},
		{Filter{Property: "seats", Op: OpGt, Value: 5.0}, false},
		{Filter{Property: "seats", Op: OpGte, Value: 5.0}, true},
		{Filter{Property: "seats", Op: OpLt, Value: 5.0}, false},
		{Filter{Property: "seats", Op: OpLte, Value: 5.0}, true},
		{Filter{Property: "plan", Op: OpGt, Value: 1.0}, false}, // a string is no number
		{Filter{Property: "note", Op: OpContains, Value: "big"}, true},
		{Filter{Property: "note", Op: OpContains, Value: "Big"}, false},
		{Filter{Property: "seats", Op: OpContains, Value: "5"}, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, compile([]Filter{c.f})(props), "%+v", c.f)
	}
	assert.False(t, compile([]Filter{{Property: "plan", Op: OpEq, Value: "pro"}, {Property: "trial", Op: OpEq, Value: false}})(props), "all filters must pass")
	assert.False(t, compile([]Filter{{Property: "plan", Op: OpExists}})(nil), "an event without properties")
	assert.Nil(t, compile(nil))
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		`60`: time.Minute, `86400`: 24 * time.Hour, `"P1D"`: 24 * time.Hour, `"PT30M"`: 30 * time.Minute,
		`"P1DT12H"`: 36 * time.Hour, `"P2W"`: 14 * 24 * time.Hour, `"PT90S"`: 90 * time.Second, `"P90D"`: 90 * 24 * time.Hour,
		`"PT1H30M"`: 90 * time.Minute,
	} {
		got, msg := parseWindow(json.RawMessage(in))
		assert.Empty(t, msg, in)
		assert.Equal(t, want, got, in)
	}
	for _, in := range []string{`59`, `"PT59S"`, `"P91D"`, `7776001`, `"P1M"`, `"P1Y"`, `"P"`, `"PT"`, `"P1DT"`, `"1d"`, `1.5`, `-60`, `true`, `null`, `"P1.5D"`, `99999999999999999999`} {
		_, msg := parseWindow(json.RawMessage(in))
		assert.NotEmpty(t, msg, in)
	}
}
