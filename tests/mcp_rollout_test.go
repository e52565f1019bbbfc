package tests

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var rolloutOf = regexp.MustCompile("Rollout feature: `([a-z_]+)`")

// Every MCP tool that declares a rollout feature fails closed while the account does not have
// it (403 feature_not_enabled, the REST answer), whatever its arguments name; once the
// operator enables the feature, the same call is no longer refused for it (spec 4.8: "a
// disabled or unassigned feature fails closed, including over MCP").
func TestMCPToolsFailClosedWithoutTheirRollout(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := s.demo.BotID
	cs := s.mcpClient(t, s.demo.Token, "")
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)

	type gated struct {
		name, feature string
		args          map[string]any
	}
	var tools []gated
	features := map[string]bool{}
	for _, tool := range list.Tools {
		m := rolloutOf.FindStringSubmatch(tool.Description)
		if m == nil {
			continue
		}
		tools = append(tools, gated{name: tool.Name, feature: m[1], args: sampleArgs(t, tool, bot)})
		features[m[1]] = true
	}
	for _, f := range []string{"copilot", "flow_intelligence", "playbooks", "replay"} {
		assert.True(t, features[f], "some MCP tool is gated by the %s rollout", f)
	}

	for _, tool := range tools {
		p, isError := callTool(t, cs, tool.name, tool.args)
		require.True(t, isError, "%s answered without its rollout: %v", tool.name, p)
		assert.Equal(t, float64(403), p["status"], "%s: %v", tool.name, p)
		assert.Equal(t, "feature_not_enabled", p["code"], "%s: %v", tool.name, p)
		assert.Equal(t, tool.feature, p["feature"], tool.name)
	}

	enable := make([]string, 0, len(features))
	for f := range features {
		enable = append(enable, f)
	}
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", strings.Join(enable, ","))
	for _, tool := range tools {
		eventually(t, 40*time.Second, tool.name+" no longer refused for its rollout once enabled", func() bool {
			p, isError := callTool(t, cs, tool.name, tool.args)
			return !isError || p["code"] != "feature_not_enabled"
		})
	}
}

// sampleArgs fills a tool's required arguments: the demo bot for bot_id, a made-up id or
// value of the right type for the rest (the call is refused before they are looked up).
func sampleArgs(t *testing.T, tool *mcpsdk.Tool, bot string) map[string]any {
	t.Helper()
	raw, err := json.Marshal(tool.InputSchema)
	require.NoError(t, err)
	var schema struct {
		Required   []string `json:"required"`
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	args := map[string]any{}
	for _, name := range schema.Required {
		typ := schema.Properties[name].Type
		if list, ok := typ.([]any); ok { // ["null", "array"]: a nullable type
			for _, v := range list {
				if v != "null" {
					typ = v
				}
			}
		}
		switch {
		case name == "bot_id":
			args[name] = bot
		case typ == "integer" || typ == "number":
			args[name] = 1
		case typ == "boolean":
			args[name] = false
		case typ == "array":
			args[name] = []any{}
		case typ == "object":
			args[name] = map[string]any{}
		default:
			args[name] = "x_00000000000000000000000000"
		}
	}
	return args
}
