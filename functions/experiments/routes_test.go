package experiments

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
	base string
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.raw, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	return &server{fixture: f, Server: s, base: "/api/bots/" + f.bot + "/experiments"}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("experiments:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	write := httpapi.Need("experiments:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	const exps = "/api/bots/{botID}/experiments"
	const exp = exps + "/{experimentID}"
	want := map[string]httpapi.Access{
		"GET " + exps:                        read,
		"POST " + exps:                       write,
		"GET " + exp:                         read,
		"PATCH " + exp:                       write,
		"DELETE " + exp:                      write,
		"POST " + exp + "/start":             write,
		"POST " + exp + "/pause":             write,
		"POST " + exp + "/resume":            write,
		"POST " + exp + "/complete":          write,
		"POST " + exp + "/winner":            write,
		"GET " + exp + "/versions":           read,
		"GET " + exp + "/versions/{version}": read,
		"POST " + exp + "/assignments":       write,
		"POST " + exp + "/report":            read,
		"POST " + exp + "/cohorts":           read.AndScope("segments:write"),
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func (s *server) body() string {
	return fmt.Sprintf(`{"name":"Popup copy","hypothesis":"Shorter converts better",
		"variants":[{"id":"a","name":"Control","weight":1,"subject":{"type":"popup","popup_id":%q}},
		            {"id":"b","name":"Short","weight":1,"subject":{"type":"popup","popup_id":%q}}],
		"goal":{"event":"purchase","filters":[{"property":"plan","op":"eq","value":"pro"}]}}`, s.popA, s.popB)
}

func TestRoutesLifecycle(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	res := s.Do(t, "POST", s.base, s.body())
	require.Equal(t, 201, res.Code, res.Body)
	id := res.JSON["id"].(string)
	exp := s.base + "/" + id
	assert.Equal(t, exp, res.Header.Get("Location"))
	assert.Equal(t, "draft", res.JSON["status"])
	assert.Equal(t, float64(0), res.JSON["version"])
	assert.Equal(t, "a", res.JSON["control_variant_id"])
	assert.Nil(t, res.JSON["winner_variant_id"])

	res = s.Do(t, "GET", exp, "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "Shorter converts better", res.JSON["hypothesis"])

	res = s.Do(t, "PATCH", exp, `{"expected_revision":1,"name":"Renamed"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["revision"])
	res = s.Do(t, "POST", exp+"/start", `{"expected_revision":1}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "stale_revision", res.Problem())
	res = s.Do(t, "POST", exp+"/start", `{"expected_revision":2}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "running", res.JSON["status"])
	assert.Equal(t, float64(1), res.JSON["version"])
	res = s.Do(t, "POST", exp+"/resume", `{"expected_revision":3}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "invalid_transition", res.Problem())
	assert.Equal(t, "running", res.JSON["state"])

	sub := s.subscriber(7)
	res = s.Do(t, "POST", exp+"/assignments", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, true, res.JSON["first_exposure"])
	variant := res.JSON["variant_id"].(string)
	res = s.Do(t, "POST", exp+"/assignments", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, false, res.JSON["first_exposure"])
	assert.Equal(t, variant, res.JSON["variant_id"])

	from := t0.Add(-time.Hour).Format(time.RFC3339)
	to := t0.Add(time.Hour).Format(time.RFC3339)
	res = s.Do(t, "POST", exp+"/report", fmt.Sprintf(`{"from":%q,"to":%q}`, from, to))
	require.Equal(t, 200, res.Code, res.Body)
	vs := res.JSON["variants"].([]any)
	require.Len(t, vs, 2)
	exposed := 0.0
	for _, v := range vs {
		exposed += v.(map[string]any)["exposed"].(float64)
		assert.Equal(t, map[string]any{}, v.(map[string]any)["revenue"])
	}
	assert.Equal(t, 1.0, exposed)

	res = s.Do(t, "POST", exp+"/cohorts", fmt.Sprintf(`{"name":"Exposed to %s","variant_id":%q,"converted":false,"from":%q,"to":%q}`, variant, variant, from, to))
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, "/api/bots/"+s.bot+"/segments/seg_1", res.Header.Get("Location"))
	assert.Equal(t, float64(1), res.JSON["member_count"])

	res = s.Do(t, "GET", exp+"/versions", "")
	require.Equal(t, 200, res.Code, res.Body)
	require.Len(t, res.JSON["data"], 1)
	res = s.Do(t, "GET", exp+"/versions/1", "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["version"])
	for _, n := range []string{"99", "0", "x", "-1"} {
		res = s.Do(t, "GET", exp+"/versions/"+n, "")
		assert.Equal(t, 404, res.Code, n)
	}

	res = s.Do(t, "DELETE", exp, "")
	assert.Equal(t, 409, res.Code, "a running experiment is completed before it is deleted")
	assert.Equal(t, "invalid_transition", res.Problem())
	res = s.Do(t, "POST", exp+"/pause", `{"expected_revision":3}`)
	require.Equal(t, 200, res.Code, res.Body)
	res = s.Do(t, "POST", exp+"/assignments", fmt.Sprintf(`{"subscriber_id":%q}`, sub))
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "experiment_not_running", res.Problem())
	res = s.Do(t, "POST", exp+"/winner", `{"expected_revision":4,"variant_id":"zz"}`)
	assert.Equal(t, 422, res.Code)
	assert.Equal(t, "unknown_variant", res.Problem())
	res = s.Do(t, "POST", exp+"/winner", `{"expected_revision":4,"variant_id":"b"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "completed", res.JSON["status"])
	assert.Equal(t, "b", res.JSON["winner_variant_id"])
	res = s.Do(t, "POST", exp+"/winner", `{"expected_revision":5,"variant_id":"b"}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "winner_already_selected", res.Problem())
	res = s.Do(t, "POST", exp+"/winner", `{"expected_revision":4,"variant_id":"b"}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "stale_revision", res.Problem())
	res = s.Do(t, "PATCH", exp, `{"expected_revision":5,"name":"x"}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "experiment_not_editable", res.Problem())

	res = s.Do(t, "GET", s.base+"?status=completed", "")
	require.Equal(t, 200, res.Code, res.Body)
	require.Len(t, res.JSON["data"], 1)
	res = s.Do(t, "DELETE", exp+"?expected_revision=5", "")
	require.Equal(t, 204, res.Code, res.Body)
	res = s.Do(t, "GET", exp, "")
	assert.Equal(t, 404, res.Code)

	// Every POST is audited, the report and the assignments included.
	events, _, err := audit.NewLog(s.raw).List(sqlitetest.Unrecorded(t.Context()), s.Account.ID, s.bot, 100, "")
	require.NoError(t, err)
	routes := map[string]int{}
	for _, e := range events {
		routes[e.Route]++
	}
	assert.Equal(t, 1, routes["POST /api/bots/{botID}/experiments/{experimentID}/report"])
	assert.Equal(t, 3, routes["POST /api/bots/{botID}/experiments/{experimentID}/assignments"])
}

func TestRoutesErrors(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	res := s.Do(t, "POST", s.base, s.body())
	require.Equal(t, 201, res.Code, res.Body)
	exp := s.base + "/" + res.JSON["id"].(string)
	unknown := s.base + "/exp_00000000000000000000000000"
	sub := s.subscriber(1)
	const rng = `"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"`

	tests := []struct {
		name, method, path, body string
		status                   int
		code, field, parameter   string
	}{
		{"create: unknown field", "POST", s.base, `{"name":"x","variants":[{"id":"a","colour":1}]}`, 400, "unknown_field", "variants[0].colour", ""},
		{"create: wrong type", "POST", s.base, `{"name":"x","variants":[{"id":"a","weight":"1"}]}`, 400, "invalid_body", "variants.weight", ""},
		{"create: invalid", "POST", s.base, `{"name":"x","variants":[]}`, 400, "validation_failed", "", ""},
		{"create: unknown subject", "POST", s.base, `{"name":"x","variants":[{"id":"a","name":"A","weight":1,"subject":{"type":"popup","popup_id":"pop_nope"}},{"id":"b","name":"B","weight":1,"subject":{"type":"content","document_id":"doc_nope","version":2}}],"goal":{"event":"purchase"}}`, 422, "unknown_subject", "", ""},
		{"patch: no revision", "PATCH", exp, `{"name":"x"}`, 400, "validation_failed", "", ""},
		{"patch: revision 0", "PATCH", exp, `{"expected_revision":0,"name":"x"}`, 400, "invalid_body", "expected_revision", ""},
		{"patch: unknown", "PATCH", unknown, `{"expected_revision":1}`, 404, "not_found", "", ""},
		{"patch: stale", "PATCH", exp, `{"expected_revision":7,"name":"x"}`, 409, "stale_revision", "", ""},
		{"delete: bad revision", "DELETE", exp + "?expected_revision=x", "", 400, "invalid_parameter", "", "expected_revision"},
		{"get: malformed id", "GET", s.base + "/nope", "", 404, "not_found", "", ""},
		{"list: bad status", "GET", s.base + "?status=live", "", 400, "invalid_parameter", "", "status"},
		{"list: bad cursor", "GET", s.base + "?cursor=abc", "", 400, "invalid_cursor", "", ""},
		{"start: no body", "POST", exp + "/start", "", 400, "invalid_body", "", ""},
		{"start: no revision", "POST", exp + "/start", `{}`, 400, "validation_failed", "", ""},
		{"winner: no variant", "POST", exp + "/winner", `{"expected_revision":1}`, 400, "validation_failed", "", ""},
		{"winner: draft", "POST", exp + "/winner", `{"expected_revision":1,"variant_id":"a"}`, 409, "invalid_transition", "", ""},
		{"assign: no subscriber", "POST", exp + "/assignments", `{}`, 400, "validation_failed", "", ""},
		{"assign: draft", "POST", exp + "/assignments", fmt.Sprintf(`{"subscriber_id":%q}`, sub), 409, "experiment_not_running", "", ""},
		{"assign: unknown experiment", "POST", unknown + "/assignments", fmt.Sprintf(`{"subscriber_id":%q}`, sub), 404, "not_found", "", ""},
		{"report: draft", "POST", exp + "/report", `{` + rng + `}`, 409, "experiment_not_started", "", ""},
		{"report: 367 days", "POST", exp + "/report", `{"from":"2025-01-01T00:00:00Z","to":"2026-01-03T00:00:00Z"}`, 400, "range_too_long", "", ""},
		{"report: bad time", "POST", exp + "/report", `{"from":"2025-01-01","to":"2026-01-03T00:00:00Z"}`, 400, "validation_failed", "", ""},
		{"report: unknown field", "POST", exp + "/report", `{` + rng + `,"step":1}`, 400, "unknown_field", "step", ""},
		{"report: version 99", "POST", exp + "/report", `{` + rng + `,"version":99}`, 404, "not_found", "", ""},
		{"report: unknown", "POST", unknown + "/report", `{` + rng + `}`, 404, "not_found", "", ""},
		{"cohort: no converted", "POST", exp + "/cohorts", `{"name":"x","variant_id":"a",` + rng + `}`, 400, "validation_failed", "", ""},
		{"cohort: draft", "POST", exp + "/cohorts", `{"name":"x","variant_id":"a","converted":true,` + rng + `}`, 409, "experiment_not_started", "", ""},
		{"versions: unknown", "GET", unknown + "/versions", "", 404, "not_found", "", ""},
		{"versions: bad limit", "GET", exp + "/versions?limit=0", "", 400, "invalid_parameter", "", "limit"},
	}
	for _, tc := range tests {
		res := s.Do(t, tc.method, tc.path, tc.body)
		assert.Equal(t, tc.status, res.Code, "%s: %s", tc.name, res.Body)
		assert.Equal(t, tc.code, res.Problem(), tc.name)
		if tc.field != "" {
			assert.Equal(t, tc.field, res.JSON["field"], tc.name)
		}
		if tc.parameter != "" {
			assert.Equal(t, tc.parameter, res.JSON["parameter"], tc.name)
		}
	}
}

// A scope, a right or the plan short is the kernel's answer, before the family's.
func TestRoutesAccess(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	res := s.Do(t, "POST", s.base, s.body())
	require.Equal(t, 201, res.Code, res.Body)
	exp := s.base + "/" + res.JSON["id"].(string)
	cohort := `{"name":"x","variant_id":"a","converted":true,"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`

	read := s.PAT(t, s.Owner, "experiments:read")
	res = s.DoAs(t, read, "POST", s.base, s.body())
	assert.Equal(t, 403, res.Code)
	assert.Equal(t, "experiments:write", res.JSON["required_scope"])
	res = s.DoAs(t, read, "POST", exp+"/cohorts", cohort)
	assert.Equal(t, 403, res.Code, "a cohort also needs segments:write")
	assert.Equal(t, "segments:write", res.JSON["required_scope"])
	res = s.DoAs(t, s.PAT(t, s.Owner, "segments:write"), "POST", exp+"/cohorts", cohort)
	assert.Equal(t, 403, res.Code)
	assert.Equal(t, "experiments:read", res.JSON["required_scope"])
	res = s.DoAs(t, s.PAT(t, s.Owner, "experiments:read", "segments:write"), "POST", exp+"/cohorts", cohort)
	assert.Equal(t, 409, res.Code, "both scopes pass the kernel: %s", res.Body)

	ctx := sqlitetest.Unrecorded(t.Context())
	member, err := s.Auth.CreateUser(ctx, s.Account.ID, "Ann", auth.RightsOf(auth.RightReactions))
	require.NoError(t, err)
	res = s.DoAs(t, s.PAT(t, member), "GET", exp, "")
	assert.Equal(t, 403, res.Code)
	assert.Equal(t, "missing_right", res.Problem())

	_, err = s.Auth.SetPlan(ctx, s.Account.ID, []auth.Feature{auth.FeaturePopups})
	require.NoError(t, err)
	res = s.DoAs(t, s.PAT(t, s.Owner), "GET", s.base, "") // a new token: a token in use caches its principal
	assert.Equal(t, 402, res.Code)
	assert.Equal(t, "feature_not_in_plan", res.Problem())
	assert.Equal(t, "analytics", res.JSON["feature"])

	res = s.DoAs(t, "", "GET", s.base, "")
	assert.Equal(t, 401, res.Code)
	res = s.Do(t, "GET", "/api/bots/bot_00000000000000000000000000/experiments", "")
	assert.Equal(t, 404, res.Code, "another account's bot")
}
