package mcp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/mcp"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

const myBot = "bot_00000000000000000000000001"

type bots struct{}

func (bots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account == "acct_A" && bot == myBot {
		return bot, nil
	}
	return nil, httpapi.NotFound("bot")
}

type trail struct {
	mu     sync.Mutex
	events []audit.Event
}

func (t *trail) Publish(_ context.Context, e audit.Event) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, e)
	return nil
}

func (t *trail) published() []audit.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]audit.Event(nil), t.events...)
}

var principals = map[string]*auth.Principal{
	"full":   {AccountID: "acct_A", UserID: "usr_1", TokenID: "pat_full", Kind: auth.KindPAT, Scopes: auth.Scopes{auth.Full}, Role: auth.RoleOwner},
	"narrow": {AccountID: "acct_A", UserID: "usr_1", TokenID: "pat_narrow", Kind: auth.KindPAT, Scopes: auth.Scopes{"other:read"}, Role: auth.RoleOwner},
	"bot":    {AccountID: "acct_A", TokenID: "btk_1", Kind: auth.KindBot, BotID: myBot, Scopes: auth.Scopes{auth.Full}},
}

func authenticate(r *http.Request) (*auth.Principal, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, auth.ErrMissingCredentials
	}
	if p, ok := principals[strings.TrimPrefix(h, "Bearer ")]; ok {
		return p, nil
	}
	return nil, auth.ErrUnknownToken
}

type echoArgs struct {
	mcptool.Bot
	Text string `json:"text" jsonschema:"what to echo"`
}

// things is a family with a read tool and a mutating one.
func things() family.Family {
	return family.Family{Name: "things", Build: func(*family.Env) family.Parts {
		return family.Parts{Tools: []mcptool.Tool{
			mcptool.New("echo", "Echo the text.", httpapi.Need("things:read"), func(_ context.Context, in echoArgs) (any, error) {
				return map[string]any{"bot": in.BotID, "text": in.Text}, nil
			}),
			mcptool.New("touch", "Touch the bot.", httpapi.Need("things:write"), func(_ context.Context, in mcptool.Bot) (any, error) {
				return nil, nil
			}).Mutating(),
		}}
	}}
}

type fixture struct {
	url   string
	trail *trail
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	tr := &trail{}
	env := familytest.Env(t, family.Deps{Audit: tr, Tenancy: func(*family.Env) httpapi.BotLoader { return bots{} }})
	mux, err := family.Compose(env, mcp.Family(), things()).Mux(authenticate)
	require.NoError(t, err)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return fixture{url: srv.URL + mcp.Path, trail: tr}
}

// bearer adds the token to every request of the MCP client.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

func (f fixture) client(t *testing.T, token string) *mcpsdk.ClientSession {
	t.Helper()
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(t.Context(), &mcpsdk.StreamableClientTransport{
		Endpoint:   f.url,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: http.DefaultTransport}},
	}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func structured(t *testing.T, res *mcpsdk.CallToolResult) map[string]any {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	require.Len(t, res.Content, 1)
	text, ok := res.Content[0].(*mcpsdk.TextContent)
	require.True(t, ok)
	assert.JSONEq(t, string(b), text.Text, "the text content is the structured content")
	return m
}

func TestToolsAreListedWithStrictSchemas(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.client(t, "full")
	list, err := cs.ListTools(t.Context(), nil)
	require.NoError(t, err)
	require.Len(t, list.Tools, 2)
	echo := list.Tools[0]
	assert.Equal(t, "echo", echo.Name)
	assert.Equal(t, "Echo the text.\n\nScope: `things:read`.", echo.Description)
	assert.True(t, echo.Annotations.ReadOnlyHint)
	schema, err := json.Marshal(echo.InputSchema)
	require.NoError(t, err)
	var s struct {
		Type                 string         `json:"type"`
		AdditionalProperties any            `json:"additionalProperties"`
		Required             []string       `json:"required"`
		Properties           map[string]any `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(schema, &s))
	assert.Equal(t, "object", s.Type)
	assert.Equal(t, false, s.AdditionalProperties, "unknown arguments are refused: the schema says so")
	assert.ElementsMatch(t, []string{"bot_id", "text"}, s.Required)
	assert.Contains(t, s.Properties, "bot_id")
	assert.False(t, list.Tools[1].Annotations.ReadOnlyHint, "touch changes something")
}

func TestCallAnswersStructuredContent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cs := f.client(t, "full")
	res, err := cs.CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "echo", Arguments: map[string]any{"bot_id": myBot, "text": "hi"}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, map[string]any{"bot": myBot, "text": "hi"}, structured(t, res))
	assert.Empty(t, f.trail.published(), "reads are not audited")
}

// Refusals are tool errors carrying the REST problem document.
func TestRefusalsAreToolErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := []struct {
		name, token, tool string
		args              map[string]any
		status            float64
		code              string
	}{
		{"unknown argument", "full", "echo", map[string]any{"bot_id": myBot, "text": "hi", "shout": true}, 400, "unknown_field"},
		{"narrow token", "narrow", "echo", map[string]any{"bot_id": myBot, "text": "hi"}, 403, "insufficient_scope"},
		{"another account's bot", "full", "echo", map[string]any{"bot_id": "bot_00000000000000000000000009", "text": "hi"}, 404, "not_found"},
		{"no bot", "full", "echo", map[string]any{"text": "hi"}, 400, "validation_failed"},
	}
	for _, c := range cases {
		res, err := f.client(t, c.token).CallTool(t.Context(), &mcpsdk.CallToolParams{Name: c.tool, Arguments: c.args})
		require.NoError(t, err, c.name)
		assert.True(t, res.IsError, c.name)
		p := structured(t, res)
		assert.Equal(t, c.status, p["status"], c.name)
		assert.Equal(t, c.code, p["code"], c.name)
		assert.NotEmpty(t, p["request_id"], c.name)
		if c.code == "unknown_field" {
			assert.Contains(t, p["detail"], `"shout"`, "the unknown argument is named")
		}
	}
}

// A mutating tool's call is one audit event carrying the MCP request's id.
func TestMutatingToolIsAudited(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	res, err := f.client(t, "full").CallTool(t.Context(), &mcpsdk.CallToolParams{Name: "touch", Arguments: map[string]any{"bot_id": myBot}})
	require.NoError(t, err)
	assert.False(t, res.IsError)
	assert.Equal(t, map[string]any{}, structured(t, res), "no content answers {}")
	events := f.trail.published()
	require.Len(t, events, 1)
	assert.Equal(t, "POST /mcp/tools/touch", events[0].Route)
	assert.Equal(t, 200, events[0].Status)
	assert.Equal(t, myBot, events[0].BotID)
	assert.NoError(t, events[0].Validate(), "a complete event: request id, token, account")
}

func post(t *testing.T, url, token, contentType, body string, headers ...string) (*http.Response, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(res.Body).Decode(&m)
	return res, m
}

const listTools = `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`

// The transport's refusals are problem documents like every route's, and credentials are
// checked before anything else.
func TestHTTPLevelAnswers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)

	res, p := post(t, f.url, "", "application/json", listTools)
	assert.Equal(t, http.StatusUnauthorized, res.StatusCode)
	assert.Equal(t, "missing_credentials", p["code"])
	assert.True(t, strings.HasPrefix(res.Header.Get("WWW-Authenticate"), "Bearer"))

	res, p = post(t, f.url, "bot", "application/json", listTools)
	assert.Equal(t, http.StatusForbidden, res.StatusCode, "bot API tokens cannot use MCP")
	assert.Equal(t, "insufficient_scope", p["code"])

	res, p = post(t, f.url, "full", "text/plain", listTools)
	assert.Equal(t, http.StatusUnsupportedMediaType, res.StatusCode)
	assert.Equal(t, "application/problem+json", res.Header.Get("Content-Type"))
	assert.Equal(t, "unsupported_media_type", p["code"])

	res, p = post(t, f.url, "full", "application/json", `{"jsonrpc":"2.0","id":1,"method":`)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.Equal(t, "invalid_mcp_request", p["code"])

	res, p = post(t, f.url, "full", "application/json", " ["+listTools+","+listTools+"]")
	assert.Equal(t, http.StatusBadRequest, res.StatusCode, "one message per request")
	assert.Equal(t, "invalid_mcp_request", p["code"])

	res, p = post(t, f.url, "full", "application/json", listTools, "Accept", "text/html")
	assert.Equal(t, http.StatusBadRequest, res.StatusCode, "an Accept that lists neither JSON nor an event stream")
	assert.Equal(t, "invalid_mcp_request", p["code"])

	deep := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}}}`
	res, p = post(t, f.url, "full", "application/json", deep)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	assert.Equal(t, "invalid_body", p["code"])
	assert.Equal(t, float64(64), p["max_depth"])

	res, p = post(t, f.url, "full", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"\ud800"}}`)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode, "an escaped lone surrogate")
	assert.Equal(t, "invalid_body", p["code"])

	res, p = post(t, f.url, "full", "application/json", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":"`+strings.Repeat("a", httpapi.MaxBodyBytes)+`"}}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, res.StatusCode)
	assert.Equal(t, "body_too_large", p["code"])

	// No Accept header accepts anything: a plain JSON client is answered.
	res, p = post(t, f.url, "full", "application/json", listTools)
	require.Equal(t, http.StatusOK, res.StatusCode)
	assert.Equal(t, "application/json", res.Header.Get("Content-Type"))
	assert.Len(t, p["result"].(map[string]any)["tools"], 2)

	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer full")
	got, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, got.StatusCode, "stateless: no stream to open")
	assert.Equal(t, "POST", got.Header.Get("Allow"))
	assert.Empty(t, f.trail.published(), "the endpoint itself is not audited")
}

// Behind API Gateway the Host is the API's domain; the SDK's localhost protection would
// refuse it on a loopback connection (a reverse proxy in front of the local process).
func TestAnyHostIsServed(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.url, bytes.NewReader([]byte(listTools)))
	require.NoError(t, err)
	req.Host = "api.example.com"
	req.Header.Set("Authorization", "Bearer full")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
}
