package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// mcpHeaders adds the bearer token, and a request id per request, to every request of an
// MCP client.
type mcpHeaders struct {
	token  string
	prefix string
	n      atomic.Int64
}

func (h *mcpHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	if h.prefix != "" {
		r.Header.Set("X-Request-Id", h.prefix+"-"+strconv.FormatInt(h.n.Add(1), 10))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpClient connects the Go SDK's client to the server's MCP endpoint with token; its
// requests carry X-Request-Id values starting with requestIDs ("" for none).
func (s *server) mcpClient(t *testing.T, token, requestIDs string) *mcpsdk.ClientSession {
	t.Helper()
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcpsdk.StreamableClientTransport{
		Endpoint:   s.base + "/mcp",
		HTTPClient: &http.Client{Transport: &mcpHeaders{token: token, prefix: requestIDs}},
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// callTool calls a tool and returns its structured content (the REST JSON, or the problem
// document of a tool error) and whether it was a tool error.
func callTool(t *testing.T, cs *mcpsdk.ClientSession, name string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: name, Arguments: args})
	require.NoError(t, err, "tools/call %s", name)
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m), "%s: structured content %s", name, b)
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcpsdk.TextContent)
	require.True(t, ok, "%s: the content is text", name)
	assert.JSONEq(t, string(b), text.Text, "%s: the text is the structured content", name)
	return m, res.IsError
}

// The MCP server over the real process: the SDK's client lists the tools and calls each read
// tool, which answers what its REST route answers; narrow tokens, users without the right,
// another account's bot and unknown arguments are refused as tool errors with the REST
// problem; reads leave no audit event.
func TestMCPReadTools(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := s.demo.BotID
	base := "/api/bots/" + bot
	rx := mustCreate(t, s.post(s.demo.Token, base+"/reactions", map[string]any{"name": "Menu", "trigger": map[string]any{"type": "api"}}))
	sub := mustCreate(t, s.post(s.demo.Token, base+"/subscribers", map[string]any{"channel": "telegram", "external_id": "4242", "first_name": "Ada"}))

	cs := s.mcpClient(t, s.demo.Token, "mcp-read")
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	tools := map[string]*mcpsdk.Tool{}
	for _, tool := range list.Tools {
		tools[tool.Name] = tool
	}
	for _, name := range []string{"list_bots", "get_bot", "list_reactions", "get_reaction", "list_subscribers", "get_subscriber"} {
		tool := tools[name]
		if !assert.NotNil(t, tool, "tools/list has %s", name) {
			continue
		}
		assert.True(t, tool.Annotations.ReadOnlyHint, name)
		assert.Contains(t, tool.Description, "Scope: `", "%s states its scope", name)
		schema, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		assert.Contains(t, string(schema), `"additionalProperties":false`, "%s: strict input schema", name)
	}

	cases := []struct {
		tool string
		args map[string]any
		path string
	}{
		{"list_bots", map[string]any{}, "/api/bots"},
		{"get_bot", map[string]any{"bot_id": bot}, base},
		{"list_reactions", map[string]any{"bot_id": bot, "trigger_type": "api"}, base + "/reactions?trigger_type=api"},
		{"get_reaction", map[string]any{"bot_id": bot, "reaction_id": rx}, base + "/reactions/" + rx},
		{"list_subscribers", map[string]any{"bot_id": bot, "channel": "telegram"}, base + "/subscribers?channel=telegram"},
		{"get_subscriber", map[string]any{"bot_id": bot, "subscriber_id": sub}, base + "/subscribers/" + sub},
	}
	for _, c := range cases {
		got, isError := callTool(t, cs, c.tool, c.args)
		require.False(t, isError, "%s: %v", c.tool, got)
		want := s.get(s.demo.Token, c.path)
		require.Equal(t, http.StatusOK, want.Status, "%s", want.Body)
		if strings.HasPrefix(c.tool, "list_") {
			assert.Equal(t, want.JSON(t)["data"], got["data"], c.tool)
			assert.NotEmpty(t, got["data"], c.tool)
			continue
		}
		assert.Equal(t, want.JSON(t), got, "%s answers what GET %s answers", c.tool, c.path)
	}

	// Pages continue with the cursor the tool returned, and the REST list takes it too.
	mustCreate(t, s.post(s.demo.Token, base+"/reactions", map[string]any{"name": "Second", "trigger": map[string]any{"type": "api"}}))
	page, _ := callTool(t, cs, "list_reactions", map[string]any{"bot_id": bot, "limit": 1})
	require.Len(t, page["data"], 1)
	next, ok := page["next_cursor"].(string)
	require.True(t, ok, "a second page: %v", page)
	page2, isError := callTool(t, cs, "list_reactions", map[string]any{"bot_id": bot, "limit": 1, "cursor": next})
	require.False(t, isError, "%v", page2)
	rest := s.get(s.demo.Token, base+"/reactions?limit=1&cursor="+next)
	require.Equal(t, http.StatusOK, rest.Status, "%s", rest.Body)
	assert.Equal(t, rest.JSON(t)["data"], page2["data"])
	assert.NotEqual(t, page["data"], page2["data"])

	for _, e := range auditEvents(t, s, s.demo.Token, "") {
		assert.False(t, strings.HasPrefix(e["request_id"].(string), "mcp-read"), "an MCP read was audited: %v", e)
	}
}

func TestMCPRefusals(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := s.demo.BotID
	other := s.newAccount("Other")
	botsOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	noDialogs := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "reactions")["user_id"]
	noDialogsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noDialogs, "--scopes", "*")["token"]

	full := s.mcpClient(t, s.demo.Token, "")
	cases := []struct {
		name   string
		cs     *mcpsdk.ClientSession
		tool   string
		args   map[string]any
		status float64
		code   string
	}{
		{"narrow PAT", s.mcpClient(t, botsOnly, ""), "list_reactions", map[string]any{"bot_id": bot}, 403, "insufficient_scope"},
		{"user without the dialogs right", s.mcpClient(t, noDialogsTok, ""), "list_subscribers", map[string]any{"bot_id": bot}, 403, "missing_right"},
		{"another account's bot", full, "get_bot", map[string]any{"bot_id": other.Bot}, 404, "not_found"},
		{"another account's bot, list", full, "list_subscribers", map[string]any{"bot_id": other.Bot}, 404, "not_found"},
		{"unknown argument", full, "get_bot", map[string]any{"bot_id": bot, "verbose": true}, 400, "unknown_field"},
		{"missing bot", full, "list_reactions", map[string]any{}, 400, "validation_failed"},
		{"bad limit", full, "list_bots", map[string]any{"limit": 500}, 400, "invalid_parameter"},
		{"foreign cursor", full, "list_bots", map[string]any{"cursor": "AQ"}, 400, "invalid_cursor"},
	}
	for _, c := range cases {
		p, isError := callTool(t, c.cs, c.tool, c.args)
		assert.True(t, isError, c.name)
		assert.Equal(t, c.status, p["status"], "%s: %v", c.name, p)
		assert.Equal(t, c.code, p["code"], c.name)
		assert.NotEmpty(t, p["request_id"], c.name)
	}
	p, _ := callTool(t, full, "get_bot", map[string]any{"bot_id": bot, "verbose": true})
	assert.Contains(t, p["detail"], `unknown argument "verbose"`, "the unknown argument is named")
	// Another account's bot is answered exactly as a bot that never existed.
	theirs, _ := callTool(t, full, "get_bot", map[string]any{"bot_id": other.Bot})
	never, _ := callTool(t, full, "get_bot", map[string]any{"bot_id": "bot_00000000000000000000000000"})
	delete(theirs, "request_id")
	delete(never, "request_id")
	assert.Equal(t, never, theirs)
	// What the narrow token may do, it can.
	mine, isError := callTool(t, s.mcpClient(t, botsOnly, ""), "get_bot", map[string]any{"bot_id": bot})
	assert.False(t, isError)
	assert.Equal(t, bot, mine["id"])
}

// At the HTTP level the endpoint is a route like any other: 401 without a valid token (with
// WWW-Authenticate), 403 for a bot API token, problem documents for what the transport
// refuses, and a plain JSON client is served.
func TestMCPOverHTTP(t *testing.T) {
	t.Parallel()
	s := start(t)
	listTools := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	botTok := s.post(s.demo.Token, "/api/bots/"+s.demo.BotID+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)

	for _, token := range []string{"", "mbp_not_a_token"} {
		r := s.do(req{Method: http.MethodPost, Path: "/mcp", Token: token, Body: listTools})
		assert.Equal(t, http.StatusUnauthorized, r.Status)
		assert.True(t, strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer"))
		assert.Contains(t, []string{"missing_credentials", "invalid_token"}, r.Code(t))
	}
	r := s.do(req{Method: http.MethodPost, Path: "/mcp", Token: botTok, Body: listTools})
	assert.Equal(t, http.StatusForbidden, r.Status)
	assert.Equal(t, "insufficient_scope", r.Code(t))

	// The SDK's client, without a token, fails to connect.
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "e2e", Version: "1"}, nil)
	_, err := c.Connect(context.Background(), &mcpsdk.StreamableClientTransport{Endpoint: s.base + "/mcp"}, nil)
	assert.Error(t, err)

	r = s.do(req{Method: http.MethodPost, Path: "/mcp", Token: s.demo.Token, Body: listTools})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	tools := r.JSON(t)["result"].(map[string]any)["tools"].([]any)
	assert.NotEmpty(t, tools)

	// An unknown tool is the protocol's error (invalid params), in a 200.
	r = s.do(req{Method: http.MethodPost, Path: "/mcp", Token: s.demo.Token, Body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}`})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, float64(-32602), r.JSON(t)["error"].(map[string]any)["code"])
	// What the transport refuses is a problem document.
	r = s.do(req{Method: http.MethodPost, Path: "/mcp", Token: s.demo.Token, Body: `{"jsonrpc":"2.0","id":1,"method":`})
	assert.Equal(t, http.StatusBadRequest, r.Status, "%s", r.Body)
	assert.Equal(t, "invalid_mcp_request", r.Code(t))

	r = s.do(req{Method: http.MethodPost, Path: "/mcp", Token: s.demo.Token, Body: listTools, Headers: map[string]string{"Content-Type": "text/plain"}})
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status)
	assert.Equal(t, "unsupported_media_type", r.Code(t))

	r = s.do(req{Method: http.MethodGet, Path: "/mcp", Token: s.demo.Token})
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
	assert.Equal(t, "POST", r.Header.Get("Allow"))
}
