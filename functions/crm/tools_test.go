package crm

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// trail records the audit events a tool call publishes.
type trail struct {
	mu     sync.Mutex
	events []audit.Event
}

func (a *trail) Publish(_ context.Context, e audit.Event) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, e)
	return nil
}

// toolFixture is the mapping fixture with the family's tools, called as the MCP server
// calls them (the tool kernel, with the tenancy check of the fixture's account).
type toolFixture struct {
	*mappingFixture
	tools map[string]mcptool.Tool
	deps  mcptool.Deps
	trail *trail
}

func newToolFixture(t *testing.T) *toolFixture {
	t.Helper()
	f := &toolFixture{mappingFixture: newMappingFixture(t), tools: map[string]mcptool.Tool{}, trail: &trail{}}
	for _, tool := range Tools(f.svc, f.Cursors) {
		f.tools[tool.Name] = tool
	}
	f.deps = mcptool.Deps{Bots: bots{account: f.Account.ID, ids: []string{f.bot, f.otherBot}}, Audit: f.trail, Log: f.svc.log, Now: f.clock.Now}
	return f
}

// as is a caller of the fixture's account: the owner with scopes, or a member with rights,
// on a plan (nil: every plan feature).
func (f *toolFixture) as(scopes auth.Scopes, role auth.Role, plan []auth.Feature, rights ...auth.Right) context.Context {
	p := &auth.Principal{AccountID: f.Account.ID, UserID: f.Owner.ID, TokenID: "pat_1", Kind: auth.KindPAT, Scopes: scopes,
		Role: role, Rights: auth.RightsOf(rights...), Entitlements: auth.Entitlements{Plan: plan}}
	// The tools' store operations are recorded as the crm Lambda's here; functions/mcp/wiring
	// holds them to the MCP Lambda's grants.
	return auth.NewContext(context.Background(), p)
}

func (f *toolFixture) call(ctx context.Context, tool string, args any) mcptool.Result {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return f.tools[tool].Call(ctx, f.deps, b)
}

// answer is a successful call's answer as JSON.
func answer(t *testing.T, res mcptool.Result) string {
	t.Helper()
	require.Nil(t, res.Err, "%v", res.Err)
	b, err := json.Marshal(res.Value)
	require.NoError(t, err)
	return string(b)
}

// The four read tools answer what their routes answer, through the same service: the
// connections (paged with the route's cursors), an object's fields and the pipelines (the
// discovery cache included: the tool serves what the route cached, and refresh asks the CRM),
// the current mapping and a saved revision. None is audited.
func TestToolsAnswerAsTheirRoutes(t *testing.T) {
	t.Parallel()
	f := newToolFixture(t)
	f.catalog(t, f.bot)
	owner := f.as(auth.Scopes{auth.Full}, auth.RoleOwner, nil)
	require.Len(t, f.tools, 6)
	for _, tool := range f.tools {
		assert.False(t, tool.Mutates, tool.Name)
		assert.True(t, tool.BotScoped, tool.Name)
		assert.Equal(t, httpapi.Need("crm:read", auth.RightReactions).InPlan(auth.FeatureCRM), tool.Access, tool.Name)
	}

	// Connections: the route's page, continued by the tool from the route's cursor.
	rest := f.Do(t, "GET", f.base+"?limit=1", nil)
	require.Equal(t, http.StatusOK, rest.Code, rest.Body)
	var page struct {
		Data       []map[string]any `json:"data"`
		NextCursor *string          `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal([]byte(answer(t, f.call(owner, "list_crm_connections", map[string]any{"bot_id": f.bot, "limit": 1}))), &page))
	assert.Equal(t, rest.JSON["data"], decoded(t, page.Data))
	require.NotNil(t, page.NextCursor)
	second := f.call(owner, "list_crm_connections", map[string]any{"bot_id": f.bot, "limit": 1, "cursor": rest.JSON["next_cursor"]})
	restNext := f.Do(t, "GET", f.base+"?limit=1&cursor="+rest.JSON["next_cursor"].(string), nil)
	require.Equal(t, http.StatusOK, restNext.Code, restNext.Body)
	assert.Equal(t, restNext.JSON["data"], decoded(t, second.Value.(httpapi.List[Connection]).Data))
	all := answer(t, f.call(owner, "list_crm_connections", map[string]any{"bot_id": f.bot}))
	assert.NotContains(t, all, "token", "a connection's summary holds no credential")

	// Fields and pipelines: the route's answer, cached; refresh asks the CRM.
	fields := f.Do(t, "GET", f.hsURL+"/objects/contacts/fields", nil)
	require.Equal(t, http.StatusOK, fields.Code, fields.Body)
	calls := f.hs.Requests()
	f.clock.Advance(time.Minute)
	assert.JSONEq(t, fields.Body, answer(t, f.call(owner, "get_crm_fields", map[string]any{"bot_id": f.bot, "connection_id": f.hsID, "object": "contacts"})))
	assert.Equal(t, calls, f.hs.Requests(), "served from the route's cache")
	fresh := f.call(owner, "get_crm_fields", map[string]any{"bot_id": f.bot, "connection_id": f.hsID, "object": "contacts", "refresh": true})
	assert.Equal(t, calls+1, f.hs.Requests(), "refresh asks the CRM")
	assert.NotEqual(t, fields.JSON["fetched_at"], decoded(t, fresh.Value).(map[string]any)["fetched_at"])
	rest = f.Do(t, "GET", f.hsURL+"/objects/contacts/fields", nil)
	assert.JSONEq(t, rest.Body, answer(t, fresh), "the route serves what the tool refreshed")
	pipelines := answer(t, f.call(owner, "list_crm_pipelines", map[string]any{"bot_id": f.bot, "connection_id": f.pdID}))
	rest = f.Do(t, "GET", f.pdURL+"/pipelines", nil)
	require.Equal(t, http.StatusOK, rest.Code, rest.Body)
	assert.JSONEq(t, rest.Body, pipelines)
	assert.Contains(t, pipelines, `"Sales"`)

	// The mapping: none yet (404, as the route), then the current one and a saved revision.
	res := f.call(owner, "get_crm_mapping", map[string]any{"bot_id": f.bot, "connection_id": f.hsID})
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusNotFound, res.Status())
	put := f.Do(t, "PUT", f.hsURL+"/mapping", hubspotMapping)
	require.Equal(t, http.StatusCreated, put.Code, put.Body)
	changed := `{"expected_revision":1,"object":"contacts","key":"email","fields":[{"source":"subscriber:first_name","target":"firstname","direction":"push"}]}`
	put = f.Do(t, "PUT", f.hsURL+"/mapping", changed)
	require.Equal(t, http.StatusOK, put.Code, put.Body)
	rest = f.Do(t, "GET", f.hsURL+"/mapping", nil)
	assert.JSONEq(t, rest.Body, answer(t, f.call(owner, "get_crm_mapping", map[string]any{"bot_id": f.bot, "connection_id": f.hsID})))
	rest = f.Do(t, "GET", f.hsURL+"/mapping/revisions/1", nil)
	require.Equal(t, http.StatusOK, rest.Code, rest.Body)
	first := answer(t, f.call(owner, "get_crm_mapping", map[string]any{"bot_id": f.bot, "connection_id": f.hsID, "revision": 1}))
	assert.JSONEq(t, rest.Body, first)
	assert.Contains(t, first, `"deal"`, "revision 1 is the first mapping, with its deal")
	res = f.call(owner, "get_crm_mapping", map[string]any{"bot_id": f.bot, "connection_id": f.hsID, "revision": 3})
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusNotFound, res.Status(), "a revision never saved")

	f.trail.mu.Lock()
	defer f.trail.mu.Unlock()
	assert.Empty(t, f.trail.events, "reads are not audited")
}

// The tools refuse as their routes do: the scope, the Reactions right, the plan, another
// account's bot, an unknown connection or object; their arguments strictly (an unknown one
// named, the required ones required); a CRM's refusals are the family's problems, a rate
// limit's wait given as retry_after_seconds (a tool answer has no Retry-After header).
func TestToolsRefuse(t *testing.T) {
	t.Parallel()
	f := newToolFixture(t)
	owner := f.as(auth.Scopes{auth.Full}, auth.RoleOwner, nil)
	fieldsOf := func(bot, conn, object string) map[string]any {
		return map[string]any{"bot_id": bot, "connection_id": conn, "object": object}
	}
	cases := []struct {
		name   string
		ctx    context.Context
		tool   string
		args   map[string]any
		status int
		code   string
	}{
		{"narrow PAT", f.as(auth.Scopes{"bots:read", "crm:write"}, auth.RoleOwner, nil), "list_crm_connections", map[string]any{"bot_id": f.bot}, 403, "insufficient_scope"},
		{"no reactions right", f.as(auth.Scopes{auth.Full}, auth.RoleMember, nil, auth.RightDialogs), "list_crm_pipelines", map[string]any{"bot_id": f.bot, "connection_id": f.pdID}, 403, "missing_right"},
		{"plan without crm", f.as(auth.Scopes{auth.Full}, auth.RoleOwner, []auth.Feature{auth.FeatureBroadcasts}), "get_crm_mapping", map[string]any{"bot_id": f.bot, "connection_id": f.hsID}, 402, "feature_not_in_plan"},
		{"another account's bot", owner, "get_crm_fields", fieldsOf("bot_00000000000000000000000000", f.hsID, "contacts"), 404, "not_found"},
		{"another bot's connection", owner, "get_crm_fields", fieldsOf(f.otherBot, f.hsID, "contacts"), 404, "not_found"},
		{"unknown object", owner, "get_crm_fields", fieldsOf(f.bot, f.hsID, "tickets"), 404, "not_found"},
		{"malformed object", owner, "get_crm_fields", fieldsOf(f.bot, f.hsID, "../contacts"), 404, "not_found"},
		{"unknown argument", owner, "list_crm_pipelines", map[string]any{"bot_id": f.bot, "connection_id": f.pdID, "object": "deals"}, 400, "unknown_field"},
		{"missing connection", owner, "list_crm_pipelines", map[string]any{"bot_id": f.bot}, 400, "validation_failed"},
		{"missing object", owner, "get_crm_fields", map[string]any{"bot_id": f.bot, "connection_id": f.hsID}, 400, "validation_failed"},
		{"revision 0", owner, "get_crm_mapping", map[string]any{"bot_id": f.bot, "connection_id": f.hsID, "revision": 0}, 400, "validation_failed"},
		{"limit too large", owner, "list_crm_connections", map[string]any{"bot_id": f.bot, "limit": 500}, 400, "invalid_parameter"},
	}
	for _, c := range cases {
		res := f.call(c.ctx, c.tool, c.args)
		require.NotNil(t, res.Err, c.name)
		assert.Equal(t, c.status, res.Status(), "%s: %v", c.name, res.Err)
		assert.Equal(t, c.code, res.Err.Code, c.name)
	}
	res := f.call(owner, "list_crm_pipelines", map[string]any{"bot_id": f.bot, "connection_id": f.pdID, "object": "deals"})
	assert.Contains(t, res.Err.Detail, `unknown argument "object"`)

	// The CRM's refusals, as the routes answer them.
	f.hs.FailNext(1, http.StatusTooManyRequests)
	res = f.call(owner, "list_crm_pipelines", map[string]any{"bot_id": f.bot, "connection_id": f.hsID, "refresh": true})
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusServiceUnavailable, res.Status())
	assert.Equal(t, "provider_unavailable", res.Err.Code)
	assert.Positive(t, res.Err.Extensions["retry_after_seconds"], "the wait the CRM asked for")
	rest := f.Do(t, "GET", f.hsURL+"/pipelines", nil)
	require.Equal(t, http.StatusOK, rest.Code, "a refusal caches nothing: %s", rest.Body)
}

// The jobs and conflicts tools answer what their routes answer: the list, one job, its
// errors, one conflict, and the list narrowed by status.
func TestJobAndConflictTools(t *testing.T) {
	t.Parallel()
	f := newToolFixture(t)
	f.catalog(t, f.bot)
	owner := f.as(auth.Scopes{auth.Full}, auth.RoleOwner, nil)
	f.subscriber(t, f.bot, "1", map[string]any{"email": "ann@example.com"}, false)
	put := f.Do(t, "PUT", f.hsURL+"/mapping", hubspotMapping)
	require.Equal(t, http.StatusCreated, put.Code, put.Body)
	job := f.sync(t, KindInitialSync)
	id := job["id"].(string)
	conn := map[string]any{"bot_id": f.bot, "connection_id": f.hsID}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range conn {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}

	rest := f.Do(t, "GET", f.hsURL+"/jobs", nil)
	require.Equal(t, http.StatusOK, rest.Code, rest.Body)
	assert.JSONEq(t, rest.Body, answer(t, f.call(owner, "list_crm_jobs", conn)))
	rest = f.Do(t, "GET", f.hsURL+"/jobs/"+id, nil)
	assert.JSONEq(t, rest.Body, answer(t, f.call(owner, "list_crm_jobs", with(map[string]any{"job_id": id}))))
	rest = f.Do(t, "GET", f.hsURL+"/jobs/"+id+"/errors", nil)
	require.Equal(t, http.StatusOK, rest.Code, rest.Body)
	assert.JSONEq(t, rest.Body, answer(t, f.call(owner, "list_crm_jobs", with(map[string]any{"job_id": id, "errors": true}))))

	rest = f.Do(t, "GET", f.hsURL+"/conflicts?status=open", nil)
	require.Equal(t, http.StatusOK, rest.Code, rest.Body)
	assert.JSONEq(t, rest.Body, answer(t, f.call(owner, "list_crm_conflicts", with(map[string]any{"status": "open"}))))

	for name, c := range map[string]struct {
		tool string
		args map[string]any
		want int
	}{
		"errors without a job": {"list_crm_jobs", with(map[string]any{"errors": true}), http.StatusBadRequest},
		"unknown status":       {"list_crm_conflicts", with(map[string]any{"status": "pending"}), http.StatusBadRequest},
		"unknown job":          {"list_crm_jobs", with(map[string]any{"job_id": "job_00000000000000000000000000"}), http.StatusNotFound},
		"unknown conflict":     {"list_crm_conflicts", with(map[string]any{"conflict_id": "cfl_00000000000000000000000000"}), http.StatusNotFound},
		"another bot":          {"list_crm_jobs", map[string]any{"bot_id": f.otherBot, "connection_id": f.hsID}, http.StatusNotFound},
	} {
		res := f.call(owner, c.tool, c.args)
		require.NotNil(t, res.Err, name)
		assert.Equal(t, c.want, res.Status(), "%s: %v", name, res.Err)
	}
}

// decoded is v as encoding/json decodes its JSON into any.
func decoded(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}
