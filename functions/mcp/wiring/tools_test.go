package wiring_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/functions/mcp"
	mcpwiring "github.com/botplatform/api/functions/mcp/wiring"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/infra/access/accesstest"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/mcptool"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// The store operations the tools make in these tests must be granted to the mcp Lambda
// (infra/access): it runs every tool it serves. Its uses of the secrets key (the CRM read
// tools') must be exactly its grants on it (accesstest.KMSComplete).
func TestMain(m *testing.M) { os.Exit(accesstest.Main(m, "mcp", accesstest.KMSComplete())) }

// lambdaTools composes env as the MCP Lambda does (the mcp family, and the families it
// serves for their tools alone) and returns its tools by name.
func lambdaTools(env *family.Env) map[string]mcptool.Tool {
	composed := []family.Family{mcp.Family()}
	for _, f := range mcpwiring.Served() {
		composed = append(composed, family.ToolsOnly(f))
	}
	family.Compose(env, composed...)
	tools := map[string]mcptool.Tool{}
	for _, tool := range env.Tools() {
		tools[tool.Name] = tool
	}
	return tools
}

// Every tool the MCP Lambda serves answers, on the real services, what its REST route
// answers the same caller.
func TestToolsAnswerWhatTheirRoutesAnswer(t *testing.T) {
	t.Parallel()
	env := familytest.Env(t, family.Deps{Tenancy: bots.Tenancy})
	tools := lambdaTools(env)

	// Seed an account, a bot, a reaction and a subscriber: setup, not the Lambda's doing.
	setup := sqlitetest.Unrecorded(t.Context())
	acct, owner, err := env.Auth.CreateAccount(setup, "Acme")
	require.NoError(t, err)
	bot, err := bots.NewService(env.Store, env.Auth, env.Now).Create(setup, acct.ID, "Shop", nil)
	require.NoError(t, err)
	var content reactions.Content
	require.NoError(t, json.Unmarshal([]byte(`{"name":"Menu","trigger":{"type":"api"}}`), &content))
	rx, err := reactionswiring.Service(env).Create(setup, bot.ID, content)
	require.NoError(t, err)
	sub, _, err := subscribers.NewService(env.Store, env.Now, env.Jobs).Upsert(setup, bot.ID, "telegram", "42", subscribers.Changes{})
	require.NoError(t, err)

	p := &auth.Principal{AccountID: acct.ID, UserID: owner.ID, TokenID: "pat_x", Kind: auth.KindPAT, Scopes: auth.Scopes{auth.Full}, Role: auth.RoleOwner}
	ctx := auth.NewContext(t.Context(), p)
	d := mcptool.Deps{Bots: env.Tenancy, Audit: env.Audit, Log: env.Log, Now: env.Now}

	// The REST routes, served by their own families (their reads are theirs, not the mcp
	// Lambda's: recorded as another Lambda's).
	rest := familytest.Env(t, family.Deps{Store: env.Store, Tenancy: bots.Tenancy})
	mux, err := family.Compose(rest, families.All()...).Mux(func(*http.Request) (*auth.Principal, error) { return p, nil })
	require.NoError(t, err)
	get := func(path string) string {
		r := httptest.NewRequestWithContext(sqlitetest.As(context.Background(), "bots"), http.MethodGet, path, nil)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		require.Equal(t, http.StatusOK, rec.Code, "%s: %s", path, rec.Body)
		return rec.Body.String()
	}

	base := "/api/bots/" + bot.ID
	cases := []struct {
		tool, args, path string
	}{
		{"list_bots", `{}`, "/api/bots"},
		{"get_bot", `{"bot_id":"` + bot.ID + `"}`, base},
		{"list_reactions", `{"bot_id":"` + bot.ID + `","trigger_type":"api","published":false}`, base + "/reactions?trigger_type=api&published=false"},
		{"get_reaction", `{"bot_id":"` + bot.ID + `","reaction_id":"` + rx.ID + `"}`, base + "/reactions/" + rx.ID},
		{"list_subscribers", `{"bot_id":"` + bot.ID + `","channel":"telegram","limit":1}`, base + "/subscribers?channel=telegram&limit=1"},
		{"get_subscriber", `{"bot_id":"` + bot.ID + `","subscriber_id":"` + sub.ID + `"}`, base + "/subscribers/" + sub.ID},
	}
	for _, c := range cases {
		tool, ok := tools[c.tool]
		require.True(t, ok, "the Lambda serves %s", c.tool)
		res := tool.Call(ctx, d, json.RawMessage(c.args))
		require.Nil(t, res.Err, "%s: %v", c.tool, res.Err)
		got, err := json.Marshal(res.Value)
		require.NoError(t, err)
		want := get(c.path)
		if strings.HasPrefix(c.tool, "list_") {
			var w, g map[string]any
			require.NoError(t, json.Unmarshal([]byte(want), &w))
			require.NoError(t, json.Unmarshal(got, &g))
			assert.NotEmpty(t, g["data"], c.tool)
			assert.Equal(t, w["data"], g["data"], c.tool)
			// Both are complete or both continue; a cursor is sealed afresh each time.
			assert.Equal(t, w["next_cursor"] == nil, g["next_cursor"] == nil, c.tool)
			continue
		}
		assert.JSONEq(t, want, string(got), c.tool)
	}

	// A filter the route refuses, the tool refuses the same way.
	res := tools["list_subscribers"].Call(ctx, d, json.RawMessage(`{"bot_id":"`+bot.ID+`","external_id":"42"}`))
	require.NotNil(t, res.Err)
	assert.Equal(t, "invalid_parameter", res.Err.Code)
	assert.Equal(t, "external_id", res.Err.Extensions["parameter"])
	res = tools["list_reactions"].Call(ctx, d, json.RawMessage(`{"bot_id":"`+bot.ID+`","trigger_type":"sometimes"}`))
	require.NotNil(t, res.Err)
	assert.Equal(t, "trigger_type", res.Err.Extensions["parameter"])
	res = tools["get_reaction"].Call(ctx, d, json.RawMessage(`{"bot_id":"`+bot.ID+`","reaction_id":"rct_nope"}`))
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusNotFound, res.Status())
}
