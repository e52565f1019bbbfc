package experiments

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/shared/httpapi"
)

func TestGoalFilters(t *testing.T) {
	t.Parallel()
	props := map[string]any{"plan": "pro annual", "total": 42.0, "trial": false}
	tests := []struct {
		f    Filter
		want bool
	}{
		{Filter{"plan", OpEq, "pro annual"}, true},
		{Filter{"plan", OpEq, "pro"}, false},
		{Filter{"plan", OpNeq, "pro"}, true},
		{Filter{"missing", OpNeq, "pro"}, true},
		{Filter{"missing", OpEq, "pro"}, false},
		{Filter{"plan", OpContains, "annual"}, true},
		{Filter{"total", OpContains, "4"}, false},
		{Filter{"total", OpGt, 41.0}, true},
		{Filter{"total", OpGt, 42.0}, false},
		{Filter{"total", OpGte, 42.0}, true},
		{Filter{"total", OpLt, 42.0}, false},
		{Filter{"total", OpLte, 42.0}, true},
		{Filter{"plan", OpGt, 1.0}, false},
		{Filter{"total", OpEq, "42"}, false},
		{Filter{"trial", OpEq, false}, true},
		{Filter{"trial", OpNeq, true}, true},
		{Filter{"missing", OpLt, 1.0}, false},
		{Filter{"plan", OpIn, []any{"pro", "pro annual"}}, true},
		{Filter{"plan", OpIn, []any{"pro"}}, false},
		{Filter{"missing", OpIn, []any{"pro"}}, false},
		{Filter{"plan", OpNotIn, []any{"pro"}}, true},
		{Filter{"missing", OpNotIn, []any{"pro"}}, true},
		{Filter{"total", OpNotIn, []any{42.0}}, false},
		{Filter{"trial", OpExists, nil}, true},
		{Filter{"missing", OpExists, nil}, false},
		{Filter{"missing", OpNotExists, nil}, true},
		{Filter{"plan", OpNotExists, nil}, false},
	}
	for _, tc := range tests {
		assert.Equal(t, tc.want, matches([]Filter{tc.f}, props), "%+v", tc.f)
		var p httpapi.Problems
		checkFilter(&p, "f", tc.f)
		assert.Empty(t, p, "%+v is a valid filter", tc.f)
	}
	for _, f := range []Filter{
		{"plan", OpIn, "pro"}, {"plan", OpIn, []any{}}, {"plan", OpNotIn, []any{map[string]any{}}},
		{"plan", OpExists, "x"}, {"total", OpGt, "1"}, {"plan", OpContains, 1.0}, {"plan", OpEq, nil}, {"plan", "like", "x"},
	} {
		var p httpapi.Problems
		checkFilter(&p, "f", f)
		assert.NotEmpty(t, p, "%+v is refused", f)
	}
	assert.True(t, matches(nil, nil), "no filter: every goal event")
	assert.False(t, matches([]Filter{{"plan", OpEq, "pro annual"}, {"total", OpLt, 10.0}}, props), "every filter must pass")
	assert.False(t, equal(map[string]any{}, map[string]any{}), "values no property holds equal nothing, and do not panic")
}
