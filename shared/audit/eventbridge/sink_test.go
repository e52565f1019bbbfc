package eventbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/audit/eventbridge"
	"github.com/botplatform/api/shared/store/sqlite"
)

// repoFile reads a file by its path from the repository root.
func repoFile(t *testing.T, path string) []byte {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../..", path))
	require.NoError(t, err)
	return b
}

func unmarshal(t *testing.T, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	require.NoError(t, err)
	return v
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const loc = "file:///events/audit-event.schema.json"
	require.NoError(t, c.AddResource(loc, unmarshal(t, repoFile(t, "events/audit-event.schema.json"))))
	s, err := c.Compile(loc)
	require.NoError(t, err)
	return s
}

// sample decodes the sample delivery strictly, as the Lambda runtime hands it to the sink.
func sample(t *testing.T) events.EventBridgeEvent {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(repoFile(t, "events/samples/eventbridge-audit-event.json")))
	dec.DisallowUnknownFields()
	var ev events.EventBridgeEvent
	require.NoError(t, dec.Decode(&ev))
	return ev
}

func TestSampleMatchesTheStructAndTheSchema(t *testing.T) {
	t.Parallel()
	ev := sample(t)
	assert.Equal(t, eventbridge.DefaultSource, ev.Source)
	assert.Equal(t, eventbridge.DetailType, ev.DetailType)
	e, err := audit.DecodeEvent(ev.Detail) // strict: unknown fields, trailing data, missing fields
	require.NoError(t, err)
	assert.Equal(t, "PATCH /api/bots/{botID}", e.Route)

	s := compileSchema(t)
	require.NoError(t, s.Validate(unmarshal(t, ev.Detail)))
	// And the schema is not vacuous: it refuses what the struct refuses, and a token.
	for name, mutate := range map[string]func(m map[string]any){
		"unknown field":      func(m map[string]any) { m["path"] = "/api/bots/bot_1?secret=x" },
		"missing status":     func(m map[string]any) { delete(m, "status") },
		"token as bot id":    func(m map[string]any) { m["bot_id"] = "mbp_Q2hhbmdlTWUhQ2hhbmdlTWUhQ2hhbm1e8x9a" },
		"token as req id":    func(m map[string]any) { m["request_id"] = "mbb_Q2hhbmdlTWUhQ2hhbmdlTWUhQ2hhbm1e8x9a" },
		"query in route":     func(m map[string]any) { m["route"] = "PATCH /api/bots/{botID}?x=1" },
		"GET is not audited": func(m map[string]any) { m["method"] = "GET" },
		"not a date-time":    func(m map[string]any) { m["time"] = "yesterday" },
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(ev.Detail, &m))
		mutate(m)
		b, err := json.Marshal(m)
		require.NoError(t, err)
		assert.Error(t, s.Validate(unmarshal(t, b)), name)
	}
}

func TestSchemaListsExactlyTheStructFields(t *testing.T) {
	t.Parallel()
	var schema struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		Required             []string                   `json:"required"`
		AdditionalProperties *bool                      `json:"additionalProperties"`
	}
	require.NoError(t, json.Unmarshal(repoFile(t, "events/audit-event.schema.json"), &schema))

	var fields, required []string
	typ := reflect.TypeFor[audit.Event]()
	for i := range typ.NumField() {
		name, opts, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		require.NotEmpty(t, name, "field %s has no json name", typ.Field(i).Name)
		fields = append(fields, name)
		if !strings.Contains(opts, "omitempty") {
			required = append(required, name)
		}
	}
	props := make([]string, 0, len(schema.Properties))
	for k := range schema.Properties {
		props = append(props, k)
	}
	slices.Sort(fields)
	slices.Sort(required)
	slices.Sort(props)
	slices.Sort(schema.Required)
	assert.Equal(t, fields, props, "schema properties are the struct's JSON fields")
	assert.Equal(t, required, schema.Required, "schema requires the fields the struct always writes")
	require.NotNil(t, schema.AdditionalProperties)
	assert.False(t, *schema.AdditionalProperties, "the schema admits nothing beyond the struct")
}

func TestSinkStoresDeliveriesIdempotently(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	trail := audit.NewLog(st)
	sink, err := eventbridge.NewSink(trail, "")
	require.NoError(t, err)

	ev := sample(t)
	want, err := audit.DecodeEvent(ev.Detail)
	require.NoError(t, err)
	for range 2 { // EventBridge delivers at least once
		require.NoError(t, sink.Handle(context.Background(), ev))
	}
	got, next, err := trail.List(context.Background(), want.AccountID, "", 10, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	assert.Equal(t, []audit.Event{want}, got, "one event, however often delivered")
	byBot, _, err := trail.List(context.Background(), want.AccountID, want.BotID, 10, "")
	require.NoError(t, err)
	assert.Len(t, byBot, 1)
}

func TestSinkRefusesForeignOrMalformedEvents(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	trail := audit.NewLog(st)
	sink, err := eventbridge.NewSink(trail, "")
	require.NoError(t, err)

	cases := map[string]func(*events.EventBridgeEvent){
		"foreign source": func(ev *events.EventBridgeEvent) { ev.Source = "someone.else" },
		"other type":     func(ev *events.EventBridgeEvent) { ev.DetailType = "bot.created" },
		"unknown field": func(ev *events.EventBridgeEvent) {
			ev.Detail = []byte(strings.Replace(string(ev.Detail), `"id"`, `"extra":1,"id"`, 1))
		},
		"missing account": func(ev *events.EventBridgeEvent) {
			ev.Detail = []byte(strings.Replace(string(ev.Detail), `"account_id"`, `"x_account_id"`, 1))
		},
		"not an object": func(ev *events.EventBridgeEvent) { ev.Detail = []byte(`[]`) },
	}
	for name, mutate := range cases {
		ev := sample(t)
		mutate(&ev)
		assert.Error(t, sink.Handle(context.Background(), ev), name)
	}
	got, _, err := trail.List(context.Background(), "acct_1h65nv6xjpn60876csc4hxxjcf", "", 10, "")
	require.NoError(t, err)
	assert.Empty(t, got, "nothing refused was stored")
}
