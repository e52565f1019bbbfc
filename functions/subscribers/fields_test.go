package subscribers

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

func TestCreateFieldValidation(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	tests := []struct {
		name     string
		spec     FieldSpec
		problems []string // nil: created
		code     string
	}{
		{"string", FieldSpec{"plan", TypeString}, nil, ""},
		{"number", FieldSpec{"orders_total", TypeNumber}, nil, ""},
		{"boolean", FieldSpec{"opted_in", TypeBoolean}, nil, ""},
		{"datetime", FieldSpec{"birthday2", TypeDatetime}, nil, ""},
		{"64 characters", FieldSpec{strings.Repeat("a", MaxFieldNameLen), TypeString}, nil, ""},
		{"65 characters", FieldSpec{strings.Repeat("a", MaxFieldNameLen+1), TypeString}, []string{"name"}, ""},
		{"upper case", FieldSpec{"Plan", TypeString}, []string{"name"}, ""},
		{"leading digit", FieldSpec{"1plan", TypeString}, []string{"name"}, ""},
		{"double underscore", FieldSpec{"a__b", TypeString}, []string{"name"}, ""},
		{"trailing underscore", FieldSpec{"a_", TypeString}, []string{"name"}, ""},
		{"hyphen", FieldSpec{"a-b", TypeString}, []string{"name"}, ""},
		{"reserved attribute", FieldSpec{"first_name", TypeString}, []string{"name"}, ""},
		{"looks like an id", FieldSpec{"fld_x", TypeString}, []string{"name"}, ""},
		{"missing everything", FieldSpec{}, []string{"name", "type"}, ""},
		{"unknown type", FieldSpec{"x", "integer"}, []string{"type"}, ""},
		{"taken", FieldSpec{"plan", TypeNumber}, nil, "name_taken"},
	}
	for _, tt := range tests {
		fl, err := f.svc.CreateField(t.Context(), f.bot, tt.spec)
		switch {
		case tt.problems != nil:
			assert.Equal(t, tt.problems, httpapitest.InvalidFields(t, err), tt.name)
		case tt.code != "":
			require.Error(t, err, tt.name)
			assert.Equal(t, tt.code, httpapitest.AsError(t, err).Code, tt.name)
			assert.True(t, errors.Is(err, ErrNameTaken), tt.name)
		default:
			require.NoError(t, err, tt.name)
			assert.Equal(t, tt.spec.Name, fl.Name)
			assert.Equal(t, tt.spec.Type, fl.Type)
		}
	}
	all, err := f.svc.Fields(t.Context(), f.bot)
	require.NoError(t, err)
	assert.Len(t, all, 5)
}

func TestFieldLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	for i := range MaxFieldsPerBot {
		f.field(t, fmt.Sprintf("f%d", i), TypeString)
	}
	_, err := f.svc.CreateField(t.Context(), f.bot, FieldSpec{"one_more", TypeString})
	assert.True(t, errors.Is(err, ErrLimitReached))
	assert.Equal(t, "limit_reached", httpapitest.AsError(t, err).Code)
	page, next, err := f.svc.ListFields(t.Context(), f.bot, 150, "")
	require.NoError(t, err)
	assert.Len(t, page, 150)
	rest, last, err := f.svc.ListFields(t.Context(), f.bot, 150, next)
	require.NoError(t, err)
	assert.Len(t, rest, 50)
	assert.Empty(t, last)
	assert.Equal(t, "f0", page[0].Name, "oldest first")
}

func TestEnsureFields(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	plan := f.field(t, "plan", TypeString)
	got, err := f.svc.EnsureFields(t.Context(), f.bot, []FieldSpec{{"plan", TypeString}, {"score", TypeNumber}})
	require.NoError(t, err)
	assert.Equal(t, plan.ID, got["plan"])
	score, err := f.svc.GetField(t.Context(), f.bot, got["score"])
	require.NoError(t, err)
	assert.Equal(t, TypeNumber, score.Type)

	_, err = f.svc.EnsureFields(t.Context(), f.bot, []FieldSpec{{"fresh", TypeString}, {"plan", TypeNumber}})
	assert.True(t, errors.Is(err, ErrFieldTypeConflict), "a caller can tell a type conflict: %v", err)
	all, lerr := f.svc.Fields(t.Context(), f.bot)
	require.NoError(t, lerr)
	assert.Len(t, all, 2, "nothing was created")
	assert.Equal(t, "field_type_conflict", httpapitest.AsError(t, err).Code)
	assert.Equal(t, plan.ID, httpapitest.AsError(t, err).Extensions["conflicting_id"])

	_, err = f.svc.EnsureFields(t.Context(), f.bot, []FieldSpec{{"ok", TypeString}, {"Bad", TypeString}})
	assert.Equal(t, []string{"fields[1].name"}, httpapitest.InvalidFields(t, err))
}

// Values are type-checked against the field, whatever form the caller's number takes.
func TestFieldValueTypes(t *testing.T) {
	t.Parallel()
	dt := "2026-03-01T14:30:15+02:00"
	tests := []struct {
		typ   FieldType
		in    any
		want  any
		fails bool
	}{
		{TypeString, "pro", "pro", false},
		{TypeString, "", "", false},
		{TypeString, strings.Repeat("я", MaxStringValueLen), strings.Repeat("я", MaxStringValueLen), false},
		{TypeString, strings.Repeat("я", MaxStringValueLen+1), nil, true},
		{TypeString, 5.0, nil, true},
		{TypeString, true, nil, true},
		{TypeNumber, 42.5, 42.5, false},
		{TypeNumber, 7, 7.0, false},
		{TypeNumber, int64(-3), -3.0, false},
		{TypeNumber, json.Number("1e3"), 1000.0, false},
		{TypeNumber, "42", nil, true},
		{TypeNumber, math.Inf(1), nil, true},
		{TypeNumber, math.NaN(), nil, true},
		{TypeBoolean, false, false, false},
		{TypeBoolean, "true", nil, true},
		{TypeBoolean, 1.0, nil, true},
		{TypeDatetime, dt, "2026-03-01T12:30:15Z", false},
		{TypeDatetime, "2026-03-01T12:30:15.999Z", "2026-03-01T12:30:15Z", false},
		{TypeDatetime, time.Date(2026, 3, 1, 12, 0, 0, 0, time.FixedZone("x", 3600)), "2026-03-01T11:00:00Z", false},
		{TypeDatetime, "2026-03-01", nil, true},
		{TypeDatetime, "tomorrow", nil, true},
		{TypeDatetime, 1740000000.0, nil, true},
		{TypeString, map[string]any{"a": 1}, nil, true},
		{TypeNumber, []any{1.0}, nil, true},
	}
	for _, tt := range tests {
		got, problem := tt.typ.value(tt.in)
		if tt.fails {
			assert.NotEmpty(t, problem, "%s %v", tt.typ, tt.in)
			continue
		}
		assert.Empty(t, problem, "%s %v", tt.typ, tt.in)
		assert.Equal(t, tt.want, got, "%s %v", tt.typ, tt.in)
	}
}

// Deleting a field hides its values at once and erases them in the background; a new field
// of the same name starts without them.
func TestDeleteFieldErasesValues(t *testing.T) {
	t.Parallel()
	f := newFixture(t, true)
	plan := f.field(t, "plan", TypeString)
	f.field(t, "score", TypeNumber)
	var ids []string
	for i := range 230 {
		s := f.subscriber(t, fmt.Sprint(i), "N", "M")
		if i%3 == 0 {
			var err error
			s, err = f.svc.SetFields(t.Context(), f.bot, s.ID, map[string]any{"plan": "pro", "score": float64(i)})
			require.NoError(t, err)
		}
		ids = append(ids, s.ID)
	}
	require.NoError(t, f.svc.DeleteField(t.Context(), f.bot, plan.ID))
	s0, err := f.svc.Get(t.Context(), f.bot, ids[0])
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"score": 0.0}, s0.Fields, "hidden at once")
	raw, err := f.svc.load(t.Context(), f.bot, ids[0])
	require.NoError(t, err)
	assert.Contains(t, raw.Values, plan.ID, "still stored until the job runs")
	_, err = f.svc.SetFields(t.Context(), f.bot, ids[1], map[string]any{"plan": "x"})
	assert.Equal(t, []string{"fields.plan"}, httpapitest.InvalidFields(t, err), "a deleted field takes no values")
	require.NoError(t, f.svc.DeleteField(t.Context(), f.bot, plan.ID), "a repeat during the erasure succeeds")

	f.jobs.runAll(t, f.svc)
	for i, id := range ids {
		raw, err := f.svc.load(t.Context(), f.bot, id)
		require.NoError(t, err)
		assert.NotContains(t, raw.Values, plan.ID)
		if i%3 == 0 {
			assert.Equal(t, int64(3), raw.revision, "set, then erased: two changes after the creation")
		} else {
			assert.Equal(t, int64(1), raw.revision, "untouched")
		}
	}
	assert.Equal(t, "not_found", httpapitest.AsError(t, f.svc.DeleteField(t.Context(), f.bot, plan.ID)).Code)
	again := f.field(t, "plan", TypeBoolean)
	s0, err = f.svc.Get(t.Context(), f.bot, ids[0])
	require.NoError(t, err)
	assert.NotContains(t, s0.Fields, "plan", "the new field has no old values")
	_, err = f.svc.SetFields(t.Context(), f.bot, ids[0], map[string]any{again.ID: true})
	require.NoError(t, err)
	assert.Equal(t, "not_found", httpapitest.AsError(t, f.svc.DeleteField(t.Context(), f.bot, "fld_nope")).Code)
}
