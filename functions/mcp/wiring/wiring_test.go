package wiring_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/functions/mcp"
	mcpwiring "github.com/botplatform/api/functions/mcp/wiring"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
)

func toolNames(env *family.Env) []string {
	var out []string
	for _, t := range env.Tools() {
		out = append(out, t.Name)
	}
	return out
}

// The MCP Lambda serves the tools the local process serves (every family's), and no route
// but POST /mcp: the families it composes for their tools bring nothing else.
func TestTheLambdaServesEveryTool(t *testing.T) {
	t.Parallel()
	local := familytest.Env(t, family.Deps{Tenancy: bots.Tenancy})
	family.Compose(local, families.All()...)

	lambda := familytest.Env(t, family.Deps{Tenancy: bots.Tenancy})
	composed := []family.Family{mcp.Family()}
	for _, f := range mcpwiring.Served() {
		composed = append(composed, family.ToolsOnly(f))
	}
	c := family.Compose(lambda, composed...)
	mux, err := c.Mux(httpapi.BearerAuth(lambda.Auth))
	require.NoError(t, err)

	require.NotEmpty(t, toolNames(local))
	assert.ElementsMatch(t, toolNames(local), toolNames(lambda), "a family that declares tools is listed in wiring.Served")
	var patterns []string
	for _, rt := range mux.Routes() {
		patterns = append(patterns, rt.Pattern())
	}
	assert.Equal(t, []string{"POST /mcp"}, patterns)
	assert.Empty(t, c.PurgeOrder(), "the families composed for their tools purge nothing here")
	assert.Empty(t, c.Registry().Kinds(), "and run no jobs here")
}

// A tool that mirrors a REST route needs exactly what the route needs, on the same kind of
// target (a bot, or the account), so MCP is no way around a route's access; the read tools
// of bots, reactions and subscribers all mirror one.
func TestToolsHaveTheirRoutesAccess(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{Tenancy: bots.Tenancy})
	mux, err := family.Compose(env, families.All()...).Mux(httpapi.BearerAuth(env.Auth))
	require.NoError(t, err)
	routes := map[string]httpapi.Route{}
	for _, rt := range mux.Routes() {
		routes[rt.Pattern()] = rt
	}
	mirrored := map[string]bool{}
	for _, tool := range env.Tools() {
		if tool.Route == "" {
			t.Logf("%s mirrors no route", tool.Name)
			continue
		}
		mirrored[tool.Name] = true
		rt, ok := routes[tool.Route]
		if !assert.True(t, ok, "%s mirrors %s, which no family serves", tool.Name, tool.Route) {
			continue
		}
		assert.Equal(t, rt.Access, tool.Access, "%s has the access of %s", tool.Name, tool.Route)
		assert.Equal(t, rt.BotScoped, tool.BotScoped, "%s acts on a bot exactly when %s does", tool.Name, tool.Route)
		assert.Equal(t, rt.Mutating(), tool.Mutates, "%s is audited exactly when %s is", tool.Name, tool.Route)
	}
	for _, name := range []string{"list_bots", "get_bot", "list_reactions", "get_reaction", "list_subscribers", "get_subscriber"} {
		assert.True(t, mirrored[name], "%s mirrors its route", name)
	}
}
