package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	pipedrivefake "github.com/botplatform/api/tests/fakes/crm/pipedrive"
)

// crmTools are the CRM family's MCP tools and the arguments each requires.
var crmTools = map[string][]string{
	"list_crm_connections": {"bot_id"},
	"get_crm_fields":       {"bot_id", "connection_id", "object"},
	"list_crm_pipelines":   {"bot_id", "connection_id"},
	"get_crm_mapping":      {"bot_id", "connection_id"},
	"list_crm_jobs":        {"bot_id", "connection_id"},
	"list_crm_conflicts":   {"bot_id", "connection_id"},
}

// The CRM read tools over the real process, with the SDK's client, against the CRM fakes:
// listed read-only with strict schemas and the routes' access in their descriptions; each
// answers what its REST route answers (connections paged with the route's cursors, a
// HubSpot connection's fields and pipelines from the CRM through the real client, a
// Pipedrive mapping current and by revision); no credential in any answer; reads are not
// audited.
func TestMCPCRMTools(t *testing.T) {
	t.Parallel()
	e := startCRM(t)
	s, tok, bot := e.s, e.s.demo.Token, e.s.demo.BotID

	// A HubSpot connection by OAuth, a Pipedrive one by API key, and a Pipedrive mapping in
	// two revisions.
	hs := summary(t, e.callback(t, "hubspot", consent(t, e.start(t, "hubspot"))), http.StatusCreated, "hubspot")["id"].(string)
	pd := summary(t, s.post(tok, e.base+"/pipedrive", map[string]any{"api_key": pipedrivefake.APIToken, "company_domain": "acme"}),
		http.StatusCreated, "pipedrive")["id"].(string)
	r := s.post(tok, "/api/bots/"+bot+"/fields", map[string]any{"name": "email", "type": "string"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	mapping := map[string]any{"object": "persons", "key": "email", "fields": []any{
		map[string]any{"source": "subscriber:first_name", "target": "name", "direction": "push"}}}
	res := s.do(req{Method: http.MethodPut, Path: e.base + "/" + pd + "/mapping", Token: tok, Body: mapping})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	mapping["expected_revision"] = 1
	mapping["fields"] = []any{map[string]any{"source": "subscriber:last_name", "target": "name", "direction": "push"}}
	res = s.do(req{Method: http.MethodPut, Path: e.base + "/" + pd + "/mapping", Token: tok, Body: mapping})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

	cs := s.mcpClient(t, tok, "mcp-crm")
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	listed := map[string]*mcpsdk.Tool{}
	for _, tool := range list.Tools {
		listed[tool.Name] = tool
	}
	for name, required := range crmTools {
		tool := listed[name]
		if !assert.NotNil(t, tool, "tools/list has %s", name) {
			continue
		}
		assert.True(t, tool.Annotations.ReadOnlyHint, name)
		assert.Contains(t, tool.Description, "Scope: `crm:read`. Bot rights: `reactions`. Plan feature: `crm`.", name)
		b, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var schema struct {
			AdditionalProperties *bool          `json:"additionalProperties"`
			Required             []string       `json:"required"`
			Properties           map[string]any `json:"properties"`
		}
		require.NoError(t, json.Unmarshal(b, &schema))
		if assert.NotNil(t, schema.AdditionalProperties, name) {
			assert.False(t, *schema.AdditionalProperties, "%s: strict input schema", name)
		}
		assert.ElementsMatch(t, required, schema.Required, name)
	}
	assert.Contains(t, listed["get_crm_mapping"].InputSchema.(map[string]any)["properties"], "revision")

	// Each tool answers what its route answers.
	conn := func(id string) string { return e.base + "/" + id }
	cases := []struct {
		tool string
		args map[string]any
		path string
	}{
		{"list_crm_connections", map[string]any{"bot_id": bot}, e.base},
		{"get_crm_fields", map[string]any{"bot_id": bot, "connection_id": hs, "object": "contacts"}, conn(hs) + "/objects/contacts/fields"},
		{"list_crm_pipelines", map[string]any{"bot_id": bot, "connection_id": hs}, conn(hs) + "/pipelines"},
		{"get_crm_fields", map[string]any{"bot_id": bot, "connection_id": pd, "object": "persons"}, conn(pd) + "/objects/persons/fields"},
		{"get_crm_mapping", map[string]any{"bot_id": bot, "connection_id": pd}, conn(pd) + "/mapping"},
		{"get_crm_mapping", map[string]any{"bot_id": bot, "connection_id": pd, "revision": 1}, conn(pd) + "/mapping/revisions/1"},
		{"list_crm_jobs", map[string]any{"bot_id": bot, "connection_id": pd}, conn(pd) + "/jobs"},
		{"list_crm_conflicts", map[string]any{"bot_id": bot, "connection_id": pd, "status": "open"}, conn(pd) + "/conflicts?status=open"},
	}
	for _, c := range cases {
		got, isError := callTool(t, cs, c.tool, c.args)
		require.False(t, isError, "%s: %v", c.tool, got)
		want := s.get(tok, c.path)
		require.Equal(t, http.StatusOK, want.Status, "%s", want.Body)
		assert.Equal(t, want.JSON(t), got, "%s answers what GET %s answers", c.tool, c.path)
		b, err := json.Marshal(got)
		require.NoError(t, err)
		assert.NotContains(t, string(b), pipedrivefake.APIToken, "%s: no credential", c.tool)
		if c.tool == "list_crm_connections" {
			for _, word := range []string{"token", "secret", "password"} {
				assert.NotContains(t, strings.ToLower(string(b)), word, "a connection's summary holds no credential")
			}
		}
	}
	current, _ := callTool(t, cs, "get_crm_mapping", map[string]any{"bot_id": bot, "connection_id": pd})
	assert.Equal(t, float64(2), current["revision"])
	fields, _ := callTool(t, cs, "get_crm_fields", map[string]any{"bot_id": bot, "connection_id": pd, "object": "persons"})
	assert.Contains(t, jsonNumber(fields), pipedrivefake.KeySubscribed, "Pipedrive's custom fields by their keys")

	// Pages continue across the tool and the route.
	page, isError := callTool(t, cs, "list_crm_connections", map[string]any{"bot_id": bot, "limit": 1})
	require.False(t, isError, "%v", page)
	require.Len(t, page["data"], 1)
	next, ok := page["next_cursor"].(string)
	require.True(t, ok, "a second page: %v", page)
	rest := s.get(tok, e.base+"?limit=1&cursor="+next)
	require.Equal(t, http.StatusOK, rest.Status, "%s", rest.Body)
	page2, isError := callTool(t, cs, "list_crm_connections", map[string]any{"bot_id": bot, "limit": 1, "cursor": next})
	require.False(t, isError, "%v", page2)
	assert.Equal(t, rest.JSON(t)["data"], page2["data"])
	assert.NotEqual(t, page["data"], page2["data"])

	for _, ev := range auditEvents(t, s, tok, "") {
		rid, _ := ev["request_id"].(string)
		assert.False(t, strings.HasPrefix(rid, "mcp-crm"), "an MCP read was audited: %v", ev)
	}
}

// The CRM tools need what their routes need and fail closed over MCP as they do over REST: a
// token without crm:read (403 insufficient_scope, naming it), a user without the Reactions
// right (403 missing_right), another account's bot (404, as for a bot that does not exist),
// an unknown connection or object (404), an unknown or missing argument (400), and an
// account whose plan lacks crm (402 feature_not_in_plan, for every tool, as the route).
func TestMCPCRMToolsRefused(t *testing.T) {
	t.Parallel()
	e := startCRM(t)
	s, tok, bot := e.s, e.s.demo.Token, e.s.demo.BotID
	pd := summary(t, s.post(tok, e.base+"/pipedrive", map[string]any{"api_key": pipedrivefake.APIToken, "company_domain": "acme"}),
		http.StatusCreated, "pipedrive")["id"].(string)
	other := s.newAccount("Other")
	crmWrite := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read,crm:write")["token"]
	noReactions := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "dialogs")["user_id"]
	noReactionsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noReactions, "--scopes", "*")["token"]
	narrow := s.mcpClient(t, crmWrite, "")
	full := s.mcpClient(t, tok, "")

	cases := []struct {
		name   string
		cs     *mcpsdk.ClientSession
		tool   string
		args   map[string]any
		status float64
		code   string
	}{
		{"PAT without crm:read", narrow, "list_crm_connections", map[string]any{"bot_id": bot}, 403, "insufficient_scope"},
		{"PAT without crm:read, fields", narrow, "get_crm_fields", map[string]any{"bot_id": bot, "connection_id": pd, "object": "persons"}, 403, "insufficient_scope"},
		{"user without the reactions right", s.mcpClient(t, noReactionsTok, ""), "list_crm_pipelines", map[string]any{"bot_id": bot, "connection_id": pd}, 403, "missing_right"},
		{"another account's bot", full, "list_crm_connections", map[string]any{"bot_id": other.Bot}, 404, "not_found"},
		{"another account's bot, mapping", full, "get_crm_mapping", map[string]any{"bot_id": other.Bot, "connection_id": pd}, 404, "not_found"},
		{"unknown connection", full, "list_crm_pipelines", map[string]any{"bot_id": bot, "connection_id": "crm_00000000000000000000000000"}, 404, "not_found"},
		{"unknown object", full, "get_crm_fields", map[string]any{"bot_id": bot, "connection_id": pd, "object": "tickets"}, 404, "not_found"},
		{"no mapping yet", full, "get_crm_mapping", map[string]any{"bot_id": bot, "connection_id": pd}, 404, "not_found"},
		{"unknown argument", full, "list_crm_connections", map[string]any{"bot_id": bot, "provider": "hubspot"}, 400, "unknown_field"},
		{"missing object", full, "get_crm_fields", map[string]any{"bot_id": bot, "connection_id": pd}, 400, "validation_failed"},
	}
	for _, c := range cases {
		p, isError := callTool(t, c.cs, c.tool, c.args)
		assert.True(t, isError, c.name)
		assert.Equal(t, c.status, p["status"], "%s: %v", c.name, p)
		assert.Equal(t, c.code, p["code"], c.name)
	}
	p, _ := callTool(t, narrow, "get_crm_mapping", map[string]any{"bot_id": bot, "connection_id": pd})
	assert.Equal(t, "crm:read", p["required_scope"], "the scope the tool needs is named")
	rest := s.get(crmWrite, e.base)
	require.Equal(t, http.StatusForbidden, rest.Status, "%s", rest.Body)
	assert.Equal(t, rest.JSON(t)["code"], p["code"], "refused as the route refuses")

	// The plan without crm: every CRM tool fails closed with the REST answer.
	s.adminJSON("account", "plan", "--account", s.demo.AccountID, "--features", "analytics")
	eventually(t, 40*time.Second, "the narrowed plan reaches the token", func() bool {
		p, _ := callTool(t, full, "list_crm_connections", map[string]any{"bot_id": bot})
		return p["status"] == float64(402)
	})
	rest = s.get(tok, e.base)
	require.Equal(t, http.StatusPaymentRequired, rest.Status, "%s", rest.Body)
	for name := range crmTools {
		args := map[string]any{"bot_id": bot, "connection_id": pd}
		switch name {
		case "list_crm_connections":
			args = map[string]any{"bot_id": bot}
		case "get_crm_fields":
			args["object"] = "persons"
		}
		p, isError := callTool(t, full, name, args)
		assert.True(t, isError, name)
		assert.Equal(t, float64(402), p["status"], "%s: %v", name, p)
		assert.Equal(t, "feature_not_in_plan", p["code"], name)
		assert.Equal(t, "crm", p["feature"], name)
		assert.Equal(t, rest.JSON(t)["code"], p["code"], "%s refuses as the route does", name)
	}
}
