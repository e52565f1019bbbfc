package wiring

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/runtime"
)

// fill sets every field of v (a pointer to a struct), recursively, to a non-zero value, so
// that its JSON shows every member it can have.
func fill(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(t, v.Elem())
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.Set(reflect.ValueOf(json.RawMessage(`"x"`)))
			return
		}
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0))
		v.Set(s)
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Bool:
		v.SetBool(true)
	default:
		t.Fatalf("fill: unhandled kind %s", v.Kind())
	}
}

// The runtime reads reactions' published steps and triggers through its own mirror of their
// JSON (it may not import the reactions family). Every member reactions can write must be one
// the runtime reads: a step field added on one side only fails here, not in a conversation.
func TestRuntimeReadsEveryMemberOfAReaction(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		from, to any
	}{
		{"step", &reactions.Step{}, &runtime.Step{}},
		{"trigger", &reactions.Trigger{}, &runtime.Trigger{}},
	} {
		fill(t, reflect.ValueOf(c.from))
		b, err := json.Marshal(c.from)
		require.NoError(t, err)
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(c.to), "%s: the runtime does not read a member reactions writes: %s", c.name, b)
	}
}
