package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/mcp"
)

// perCallScope is what the document says of a route whose access is per call (POST /mcp):
// in x-required-scope, and in the description as "Scope: ...".
const perCallScope = "each tool's own"

// documentedTool is one entry of POST /mcp's x-mcp-tools.
type documentedTool struct {
	Name      string
	Scope     string
	AlsoScope string
	Rights    []string
	Plan      string
	Rollout   string
	Audited   bool
	Route     string
}

// TestOpenAPIDocumentsEveryTool keeps POST /mcp's x-mcp-tools equal to the tools the
// process serves, with the access each declares: the document is the access table of the
// tools as it is of the routes.
func TestOpenAPIDocumentsEveryTool(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	a, _ := newTestApp(t)
	op := operations(doc)["POST "+mcp.Path]
	require.NotNil(t, op, "POST /mcp is not documented")
	raw, ok := op.Extensions["x-mcp-tools"].([]any)
	require.True(t, ok, "POST /mcp has no x-mcp-tools list")

	documented := map[string]documentedTool{}
	for _, v := range raw {
		m, ok := v.(map[string]any)
		require.True(t, ok, "an x-mcp-tools entry is not an object")
		d := documentedTool{}
		d.Name, _ = m["name"].(string)
		d.Scope, _ = m["scope"].(string)
		d.AlsoScope, _ = m["also-scope"].(string)
		d.Plan, _ = m["plan-feature"].(string)
		d.Rollout, _ = m["rollout-feature"].(string)
		d.Audited, _ = m["audited"].(bool)
		d.Route, _ = m["route"].(string)
		d.Rights = stringList(t, m["rights"], d.Name+" rights")
		documented[d.Name] = d
	}
	tools := a.Tools()
	require.NotEmpty(t, tools)
	for _, tool := range tools {
		want := documentedTool{Name: tool.Name, Scope: tool.Access.Scope, AlsoScope: tool.Access.AlsoScope,
			Plan: string(tool.Access.Plan), Rollout: string(tool.Access.Rollout), Audited: tool.Mutates, Route: tool.Route, Rights: []string{}}
		for _, r := range tool.Access.Rights.Names() {
			want.Rights = append(want.Rights, string(r))
		}
		got, ok := documented[tool.Name]
		if assert.True(t, ok, "tool %s is served but missing from x-mcp-tools", tool.Name) {
			assert.Equal(t, want, got, "x-mcp-tools entry of %s", tool.Name)
		}
		delete(documented, tool.Name)
	}
	for name := range documented {
		t.Errorf("x-mcp-tools documents %s, which no family declares", name)
	}
}
