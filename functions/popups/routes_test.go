package popups

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

type server struct {
	*fixture
	*httpapitest.Server
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.raw, Bots: zonedBots{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	PublicRoutes(s.Mux, f.svc)
	return &server{fixture: f, Server: s}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("popups:read", auth.RightReactions).InPlan(auth.FeaturePopups)
	write := httpapi.Need("popups:write", auth.RightReactions).InPlan(auth.FeaturePopups)
	const pop = "/api/bots/{botID}/popups/{popupID}"
	want := map[string]httpapi.Access{
		"GET /api/bots/{botID}/popups":            read,
		"POST /api/bots/{botID}/popups":           write,
		"POST /api/bots/{botID}/popups/preflight": read,
		"GET " + pop:                 read,
		"PATCH " + pop:               write,
		"DELETE " + pop:              write,
		"GET " + pop + "/stats":      read,
		"GET " + pop + "/experiment": read,
		"GET /p/{botID}/popups.js":   httpapi.Public(),
		"OPTIONS /p/{botID}/events":  httpapi.Public(),
		"POST /p/{botID}/events":     httpapi.Public(),
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

const popupBody = `{"name":"Newsletter","status":"active",
	"content":{"title":"Get 10% off","body":"Join.","button_text":"Subscribe","fields":[{"name":"email","label":"Email","type":"email","required":true}]},
	"targeting":{"url_rules":[{"match":"glob","value":"https://shop.example/*"}],"devices":["desktop"]},
	"allowed_origins":["https://shop.example"]}`

func TestRoutesLifecycle(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/popups"

	res := s.Do(t, "POST", base, popupBody)
	require.Equal(t, 201, res.Code, res.Body)
	id := res.JSON["id"].(string)
	assert.Equal(t, base+"/"+id, res.Header.Get("Location"))
	assert.Equal(t, float64(1), res.JSON["revision"])
	assert.Equal(t, "active", res.JSON["status"])
	assert.Nil(t, res.JSON["schedule"])
	assert.Nil(t, res.JSON["experiment"])
	assert.Equal(t, map[string]any{"max_impressions_per_visitor": float64(3), "min_hours_between": float64(24), "stop_after_conversion": true}, res.JSON["frequency"])
	s.clock.Advance(time.Second)
	res = s.Do(t, "POST", base, `{"name":"Second","content":{"title":"Hi","button_text":"OK"},"allowed_origins":["https://shop.example"]}`)
	require.Equal(t, 201, res.Code, res.Body)
	second := res.JSON["id"].(string)

	res = s.Do(t, "GET", base+"/"+id, "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "Newsletter", res.JSON["name"])

	res = s.Do(t, "GET", base+"?limit=1", "")
	require.Equal(t, 200, res.Code, res.Body)
	require.Len(t, res.JSON["data"], 1)
	assert.Equal(t, id, res.JSON["data"].([]any)[0].(map[string]any)["id"])
	next := res.JSON["next_cursor"].(string)
	res = s.Do(t, "GET", base+"?limit=1&status=paused&cursor="+next, "")
	assert.Equal(t, "invalid_cursor", res.JSON["code"], "a cursor is bound to its filter")
	res = s.Do(t, "GET", base+"?limit=1&cursor="+next, "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, second, res.JSON["data"].([]any)[0].(map[string]any)["id"])
	res = s.Do(t, "GET", base+"?status=paused", "")
	require.Equal(t, 200, res.Code, res.Body)
	require.Len(t, res.JSON["data"], 1)
	assert.Equal(t, second, res.JSON["data"].([]any)[0].(map[string]any)["id"])

	res = s.Do(t, "PATCH", base+"/"+id, `{"expected_revision":1,"status":"paused","targeting":{"exit_intent":true}}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["revision"])
	assert.Equal(t, "paused", res.JSON["status"])
	assert.Equal(t, true, res.JSON["targeting"].(map[string]any)["exit_intent"])
	assert.Equal(t, "Get 10% off", res.JSON["content"].(map[string]any)["title"], "members not given stay")

	res = s.Do(t, "PATCH", base+"/"+id, `{"expected_revision":1,"name":"x"}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "stale_revision", res.JSON["code"])
	assert.Equal(t, float64(2), res.JSON["current_revision"])
	res = s.Do(t, "DELETE", base+"/"+id+"?expected_revision=1", "")
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "stale_revision", res.JSON["code"])
	res = s.Do(t, "DELETE", base+"/"+id+"?expected_revision=2", "")
	require.Equal(t, 204, res.Code, res.Body)
	res = s.Do(t, "GET", base+"/"+id, "")
	assert.Equal(t, 404, res.Code)
	res = s.Do(t, "DELETE", base+"/"+second, "")
	assert.Equal(t, 204, res.Code, "expected_revision is optional")
	res = s.Do(t, "GET", base, "")
	assert.Equal(t, []any{}, res.JSON["data"])
}

func TestRoutesErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/popups"
	res := s.Do(t, "POST", base, popupBody)
	require.Equal(t, 201, res.Code, res.Body)
	pop := base + "/" + res.JSON["id"].(string)

	tests := []struct {
		name, method, path, body string
		status                   int
		code, field, parameter   string
	}{
		{"create: unknown field", "POST", base, `{"name":"x","content":{"title":"t","button_text":"b","colour":1}}`, 400, "unknown_field", "content.colour", ""},
		{"create: wrong type", "POST", base, `{"name":"x","targeting":{"delay_seconds":"5"}}`, 400, "invalid_body", "targeting.delay_seconds", ""},
		{"create: invalid", "POST", base, `{"name":"","content":{"title":"t","button_text":"b"},"allowed_origins":["shop"]}`, 400, "validation_failed", "", ""},
		{"patch: no revision", "PATCH", pop, `{"name":"x"}`, 400, "validation_failed", "", ""},
		{"patch: revision 0", "PATCH", pop, `{"expected_revision":0,"name":"x"}`, 400, "invalid_body", "expected_revision", ""},
		{"patch: invalid", "PATCH", pop, `{"expected_revision":1,"frequency":{"max_impressions_per_visitor":0}}`, 400, "validation_failed", "", ""},
		{"patch: unknown popup", "PATCH", base + "/pop_00000000000000000000000000", `{"expected_revision":1}`, 404, "not_found", "", ""},
		{"delete: bad revision", "DELETE", pop + "?expected_revision=x", "", 400, "invalid_parameter", "", "expected_revision"},
		{"get: malformed id", "GET", base + "/nope", "", 404, "not_found", "", ""},
		{"list: bad status", "GET", base + "?status=live", "", 400, "invalid_parameter", "", "status"},
		{"stats: more than 366 days", "GET", pop + "/stats?from=2025-01-01&to=2026-03-01", "", 400, "invalid_parameter", "", "from"},
		{"stats: from after to", "GET", pop + "/stats?from=2026-03-02&to=2026-03-01", "", 400, "invalid_parameter", "", "from"},
		{"stats: bad from", "GET", pop + "/stats?from=01.02.2026", "", 400, "invalid_parameter", "", "from"},
		{"stats: bad to", "GET", pop + "/stats?to=2026-13-01", "", 400, "invalid_parameter", "", "to"},
		{"stats: unknown popup", "GET", base + "/pop_00000000000000000000000000/stats", "", 404, "not_found", "", ""},
		{"experiment: bad range", "GET", pop + "/experiment?from=2026-03-02&to=2026-03-01", "", 200, "", "", ""}, // no experiment: no range read
		{"preflight: malformed", "POST", base + "/preflight", `{"name":`, 400, "invalid_body", "", ""},
		{"preflight: unknown field", "POST", base + "/preflight", `{"nme":"x"}`, 400, "unknown_field", "nme", ""},
	}
	for _, tc := range tests {
		res := s.Do(t, tc.method, tc.path, tc.body)
		assert.Equal(t, tc.status, res.Code, "%s: %s", tc.name, res.Body)
		if tc.code != "" {
			assert.Equal(t, tc.code, res.JSON["code"], tc.name)
		}
		if tc.field != "" {
			assert.Equal(t, tc.field, res.JSON["field"], tc.name)
		}
		if tc.parameter != "" {
			assert.Equal(t, tc.parameter, res.JSON["parameter"], tc.name)
		}
	}

	// validation_failed lists every problem.
	res = s.Do(t, "POST", base, `{"name":"","content":{"title":"","button_text":"b","fields":[{"name":"shoe_size","label":"S","type":"number"}]},
		"targeting":{"url_rules":[{"match":"glob","value":"[x"}]},"allowed_origins":["shop"]}`)
	require.Equal(t, 400, res.Code, res.Body)
	var fields []string
	for _, e := range res.JSON["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	assert.Equal(t, []string{"name", "content.title", "targeting.url_rules[0].value", "allowed_origins[0]", "content.fields[0].name"}, fields)

	// A scope, right or plan short is the kernel's answer, before the family's.
	tok := s.PAT(t, s.Owner, "popups:read")
	res = s.DoAs(t, tok, "POST", base, popupBody)
	assert.Equal(t, 403, res.Code)
	assert.Equal(t, "popups:write", res.JSON["required_scope"])
}

func TestRoutesPreflight(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/popups"
	res := s.Do(t, "POST", base+"/preflight", `{"name":"x","status":"active","content":{"title":"t","button_text":"b",
		"fields":[{"name":"shoe_size","label":"S","type":"number"}]},
		"targeting":{"delay_seconds":10,"exit_intent":true,"url_rules":[{"match":"glob","value":"https://x/[z-a]"}]},
		"schedule":{"ends_at":"2026-01-01T00:00:00Z"},"allowed_origins":["https://shop.example"]}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, false, res.JSON["ok"])
	assert.Equal(t, []string{"targeting.url_rules[0].value", "content.fields[0].name", "schedule.ends_at"}, jsonFields(res.JSON["problems"]))
	assert.Equal(t, []string{"targeting.delay_seconds"}, jsonFields(res.JSON["warnings"]))

	res = s.Do(t, "POST", base+"/preflight", `{"name":"x","status":"active","content":{"title":"t","button_text":"b"},"allowed_origins":["https://shop.example"]}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, true, res.JSON["ok"])
	assert.Equal(t, []any{}, res.JSON["problems"])
	assert.Equal(t, []string{"targeting.url_rules"}, jsonFields(res.JSON["warnings"]))

	// It wrote nothing of the bot's, yet each call is in the audit trail.
	assert.Empty(t, s.items(t, popupsPK(s.bot)))
	events, _, err := audit.NewLog(s.raw).List(sqlitetest.Unrecorded(t.Context()), s.Account.ID, s.bot, 10, "")
	require.NoError(t, err)
	require.Len(t, events, 2)
	for _, e := range events {
		assert.Equal(t, "POST /api/bots/{botID}/popups/preflight", e.Route)
		assert.Equal(t, 200, e.Status)
	}
}

func jsonFields(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, e.(map[string]any)["field"].(string))
	}
	return out
}

// The days of a range come back whole, zero days included, from one read of the counters.
func TestRoutesStatsDays(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/popups"
	res := s.Do(t, "POST", base, popupBody)
	require.Equal(t, 201, res.Code, res.Body)
	pop := base + "/" + res.JSON["id"].(string)

	res = s.Do(t, "GET", pop+"/stats", "")
	require.Equal(t, 200, res.Code, res.Body)
	days := res.JSON["days"].([]any)
	require.Len(t, days, DefaultStatsDays)
	assert.Equal(t, "2026-01-31", res.JSON["from"])
	assert.Equal(t, "2026-03-01", res.JSON["to"])
	assert.Equal(t, map[string]any{"date": "2026-03-01", "impressions": float64(0), "closes": float64(0), "conversions": float64(0)}, days[len(days)-1])
	assert.Equal(t, map[string]any{"impressions": float64(0), "closes": float64(0), "conversions": float64(0), "conversion_rate": float64(0)}, res.JSON["totals"])

	res = s.Do(t, "GET", pop+"/stats?from=2025-03-01&to=2026-03-01", "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Len(t, res.JSON["days"], MaxStatsDays)

	res = s.Do(t, "GET", pop+"/experiment", "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, []any{}, res.JSON["variants"], "no experiment: no variants")
	assert.Nil(t, res.JSON["from"])
}

func TestRoutesNeedThePlan(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	_, err := s.Auth.SetPlan(sqlitetest.Unrecorded(t.Context()), s.Account.ID, []auth.Feature{auth.FeatureAnalytics})
	require.NoError(t, err)
	res := s.Do(t, "GET", fmt.Sprintf("/api/bots/%s/popups", s.bot), "")
	assert.Equal(t, 402, res.Code)
	assert.Equal(t, "feature_not_in_plan", res.JSON["code"])
}
