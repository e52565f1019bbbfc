package funnels

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// fakeCohorts records the cohorts it is asked to save.
type fakeCohorts struct {
	mu    sync.Mutex
	saved []Cohort
}

func (f *fakeCohorts) SaveCohort(_ context.Context, _ string, c Cohort) (any, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.saved = append(f.saved, c)
	id := fmt.Sprintf("seg_%d", len(f.saved))
	return map[string]any{"id": id, "member_count": len(c.Members)}, id, nil
}

func (f *fakeCohorts) last() Cohort {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.saved[len(f.saved)-1]
}

type server struct {
	*httpapitest.Server
	svc     *Service
	log     *eventlogtest.Memory
	cohorts *fakeCohorts
	clock   *httpapitest.Clock
	raw     *sqlitetest.Store
	bot     string
}

func newServer(t *testing.T) *server {
	t.Helper()
	clock := httpapitest.NewClock(t0.Add(30*24*time.Hour), 0)
	raw := sqlitetest.Open(t, sqlite.WithClock(clock.Now))
	s := &server{log: eventlogtest.NewMemory(), cohorts: &fakeCohorts{}, clock: clock, raw: raw, bot: ids.At("bot", t0)}
	s.svc = NewService(raw, s.log, s.cohorts, clock.Now)
	s.Server = httpapitest.New(t, httpapitest.Config{Now: clock.Now, Store: raw, BotIDs: []string{s.bot}})
	Routes(s.Mux, s.svc, s.Cursors)
	return s
}

// append adds events of the server's bot.
func (s *server) append(t *testing.T, events ...eventlog.Event) {
	t.Helper()
	for i, e := range events {
		e.BotID = s.bot
		if e.ID == "" {
			e.ID = fmt.Sprintf("ev%05d", i)
		}
		_, err := s.log.Append(context.Background(), e)
		require.NoError(t, err)
	}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("analytics:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	write := httpapi.Need("analytics:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	const f = "/api/bots/{botID}/funnels/{funnelID}"
	want := map[string]httpapi.Access{
		"GET /api/bots/{botID}/funnels":        read,
		"POST /api/bots/{botID}/funnels":       write,
		"POST /api/bots/{botID}/funnels/query": read,
		"GET " + f:                             read,
		"PATCH " + f:                           write,
		"DELETE " + f:                          write,
		"POST " + f + "/report":                read,
		"POST " + f + "/cohorts":               read.AndScope("segments:write"),
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

const funnelBody = `{"name":"Signup","steps":[{"event":"opened"},{"event":"started","filters":[{"property":"plan","op":"in","value":["pro","team"]}]},{"event":"paid"}],"conversion_window":"P7D"}`

func TestRoutesLifecycle(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/funnels"

	res := s.Do(t, "POST", base, funnelBody)
	require.Equal(t, 201, res.Code, res.Body)
	id := res.JSON["id"].(string)
	assert.True(t, strings.HasPrefix(id, "fnl_"))
	assert.Equal(t, base+"/"+id, res.Header.Get("Location"))
	assert.Equal(t, float64(1), res.JSON["revision"])
	assert.Equal(t, float64(1), res.JSON["definition_revision"])
	assert.Equal(t, float64(7*86400), res.JSON["conversion_window"], "sent back in seconds")
	steps := res.JSON["steps"].([]any)
	require.Len(t, steps, 3)
	assert.Equal(t, []any{}, steps[0].(map[string]any)["filters"], "no filters is [], not null")

	res = s.Do(t, "GET", base+"/"+id, nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "Signup", res.JSON["name"])

	// The window defaults to a day and takes plain seconds.
	s.clock.Advance(time.Second)
	res = s.Do(t, "POST", base, `{"name":"Two","steps":[{"event":"a"},{"event":"b"}]}`)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, float64(86400), res.JSON["conversion_window"])
	s.clock.Advance(time.Second)
	res = s.Do(t, "POST", base, `{"name":"Three","steps":[{"event":"a"},{"event":"b"}],"conversion_window":3600}`)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, float64(3600), res.JSON["conversion_window"])

	// A rename moves the revision only; a change of the steps moves the definition's.
	res = s.Do(t, "PATCH", base+"/"+id, `{"expected_revision":1,"name":"Signup funnel"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["revision"])
	assert.Equal(t, float64(1), res.JSON["definition_revision"])
	res = s.Do(t, "PATCH", base+"/"+id, `{"expected_revision":2,"name":"Signup funnel"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["revision"], "no change, no revision")
	res = s.Do(t, "PATCH", base+"/"+id, `{"expected_revision":2,"conversion_window":"PT12H"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(3), res.JSON["revision"])
	assert.Equal(t, float64(3), res.JSON["definition_revision"])
	assert.Equal(t, float64(12*3600), res.JSON["conversion_window"])
	res = s.Do(t, "PATCH", base+"/"+id, `{"expected_revision":2,"name":"Late"}`)
	assert.Equal(t, 409, res.Code, res.Body)
	assert.Equal(t, "stale_revision", res.Problem())
	assert.Equal(t, float64(3), res.JSON["current_revision"])
	res = s.Do(t, "PATCH", base+"/"+id, `{"name":"No revision"}`)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "validation_failed", res.Problem())

	// Lists page with the cursor sent back unchanged, oldest first.
	var seen []string
	next := base + "?limit=2"
	for next != "" {
		res = s.Do(t, "GET", next, nil)
		require.Equal(t, 200, res.Code, res.Body)
		for _, f := range res.JSON["data"].([]any) {
			seen = append(seen, f.(map[string]any)["name"].(string))
		}
		next = ""
		if c, ok := res.JSON["next_cursor"].(string); ok {
			next = base + "?limit=2&cursor=" + c
		}
	}
	assert.Equal(t, []string{"Signup funnel", "Two", "Three"}, seen)
	res = s.Do(t, "GET", base+"?cursor=bogus", nil)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "invalid_cursor", res.Problem())

	res = s.Do(t, "DELETE", base+"/"+id+"?expected_revision=1", nil)
	assert.Equal(t, 409, res.Code, res.Body)
	res = s.Do(t, "DELETE", base+"/"+id+"?expected_revision=3", nil)
	assert.Equal(t, 204, res.Code, res.Body)
	res = s.Do(t, "GET", base+"/"+id, nil)
	assert.Equal(t, 404, res.Code)
	res = s.Do(t, "GET", base+"/fnl_nope", nil)
	assert.Equal(t, 404, res.Code)
	res = s.Do(t, "DELETE", base+"/"+id, nil)
	assert.Equal(t, 404, res.Code)
}

// Every problem of a definition is named by its field, all at once.
func TestRoutesValidation(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/funnels"
	long := strings.Repeat("x", 300)
	cases := []struct {
		body   string
		code   string
		fields []string
	}{
		{`{"name":"x","steps":[{"event":"a"}]}`, "validation_failed", []string{"steps"}},
		{`{"name":"x"}`, "validation_failed", []string{"steps"}},
		{`{"steps":[{"event":"a"},{"event":"b"}]}`, "validation_failed", []string{"name"}},
		{`{"name":"` + long + `","steps":[{"event":"a"},{"event":"B c"}]}`, "validation_failed", []string{"name", "steps[1].event"}},
		{`{"name":"x","steps":[` + strings.Repeat(`{"event":"a"},`, 10) + `{"event":"a"}]}`, "validation_failed", []string{"steps"}},
		{`{"name":"x","steps":[{"event":"a"},{"event":"b"}],"conversion_window":30}`, "validation_failed", []string{"conversion_window"}},
		{`{"name":"x","steps":[{"event":"a"},{"event":"b"}],"conversion_window":"P91D"}`, "validation_failed", []string{"conversion_window"}},
		{`{"name":"x","steps":[{"event":"a"},{"event":"b"}],"conversion_window":"P1M"}`, "validation_failed", []string{"conversion_window"}},
		{`{"name":"x","steps":[{"event":"a"},{"event":"b"}],"conversion_window":null}`, "validation_failed", []string{"conversion_window"}},
		{`{"name":"x","steps":[{"event":"a","filters":[
			{"property":"p","op":"like","value":"x"},
			{"property":"","op":"eq","value":"x"},
			{"property":"p","op":"eq"},
			{"property":"p","op":"in","value":"x"},
			{"property":"p","op":"in","value":[]},
			{"property":"p","op":"gt","value":"5"},
			{"property":"p","op":"exists","value":true},
			{"property":"p","op":"eq","value":{"a":1}},
			{"property":"p","op":"contains","value":""},
			{"property":"p","op":"eq","value":"` + long + `"}]},{"event":"b"}]}`, "validation_failed", []string{
			"steps[0].filters[0].op", "steps[0].filters[1].property", "steps[0].filters[2].value", "steps[0].filters[3].value",
			"steps[0].filters[4].value", "steps[0].filters[5].value", "steps[0].filters[6].value", "steps[0].filters[7].value",
			"steps[0].filters[8].value", "steps[0].filters[9].value"}},
		{`{"name":"x","steps":[{"event":"a","filters":[` + strings.Repeat(`{"property":"p","op":"exists"},`, 10) + `{"property":"p","op":"exists"}]},{"event":"b"}]}`,
			"validation_failed", []string{"steps[0].filters"}},
		{`{"name":"x","steps":[{"event":"a","colour":"red"},{"event":"b"}]}`, "unknown_field", nil},
		{`{"name":"x","steps":[{"event":"a"},{"event":"b"}],"window":60}`, "unknown_field", nil},
	}
	for i, c := range cases {
		res := s.Do(t, "POST", base, c.body)
		require.Equal(t, 400, res.Code, "case %d: %s", i, res.Body)
		assert.Equal(t, c.code, res.Problem(), "case %d", i)
		if c.fields != nil {
			var got []string
			for _, e := range res.JSON["errors"].([]any) {
				got = append(got, e.(map[string]any)["field"].(string))
			}
			assert.Equal(t, c.fields, got, "case %d: %s", i, res.Body)
		}
	}
	res := s.Do(t, "GET", base, nil)
	assert.Equal(t, []any{}, res.JSON["data"], "nothing was created")
}

func TestRoutesReport(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/funnels"
	res := s.Do(t, "POST", base, funnelBody)
	require.Equal(t, 201, res.Code, res.Body)
	id := res.JSON["id"].(string)
	s.append(t,
		ev("u1", "opened", 0, "telegram"), ev("u1", "started", time.Hour, "telegram", "plan", "pro"), ev("u1", "paid", 3*time.Hour, "telegram"),
		ev("u2", "opened", 0, "web"), ev("u2", "started", 2*time.Hour, "web", "plan", "free"), // filtered out
		ev("u3", "opened", 0, "web"), ev("u3", "started", 30*time.Minute, "web", "plan", "team"),
	)
	report := base + "/" + id + "/report"
	res = s.Do(t, "POST", report, `{"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z","breakdown":"channel"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, id, res.JSON["funnel_id"])
	assert.Equal(t, float64(1), res.JSON["definition_revision"])
	assert.Equal(t, "channel", res.JSON["breakdown"])
	steps := res.JSON["steps"].([]any)
	count := func(st []any, i int) any { return st[i].(map[string]any)["subscribers"] }
	assert.Equal(t, []any{float64(3), float64(2), float64(1)}, []any{count(steps, 0), count(steps, 1), count(steps, 2)})
	assert.Equal(t, 0.6667, steps[1].(map[string]any)["conversion_from_previous"])
	assert.Equal(t, 2700.0, steps[1].(map[string]any)["median_seconds_from_previous"], "(3600+1800)/2")
	assert.Equal(t, 7200.0, steps[2].(map[string]any)["median_seconds_from_previous"])
	assert.Nil(t, steps[0].(map[string]any)["median_seconds_from_previous"])
	groups := res.JSON["groups"].([]any)
	require.Len(t, groups, 2)
	assert.Equal(t, "web", groups[0].(map[string]any)["channel"])

	// The report is audited: it is a POST.
	events, _, err := audit.NewLog(s.raw).List(sqlitetest.Unrecorded(t.Context()), s.Account.ID, s.bot, 10, "")
	require.NoError(t, err)
	var routes []string
	for _, e := range events {
		routes = append(routes, e.Route)
	}
	assert.Contains(t, routes, "POST /api/bots/{botID}/funnels/{funnelID}/report")

	// Without the breakdown, no groups.
	res = s.Do(t, "POST", report, `{"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Nil(t, res.JSON["breakdown"])
	assert.NotContains(t, res.JSON, "groups")

	// 366 days is the most a range spans.
	res = s.Do(t, "POST", report, `{"from":"2025-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`)
	assert.Equal(t, 200, res.Code, "366 days: %s", res.Body)
	res = s.Do(t, "POST", report, `{"from":"2025-03-01T00:00:00Z","to":"2026-03-03T00:00:00Z"}`)
	assert.Equal(t, 400, res.Code, "367 days: %s", res.Body)
	assert.Equal(t, "range_too_long", res.Problem())

	for _, body := range []string{
		`{"from":"2026-03-02T00:00:00Z","to":"2026-03-01T00:00:00Z"}`,
		`{"from":"2026-03-01","to":"2026-03-02T00:00:00Z"}`,
		`{"to":"2026-03-02T00:00:00Z"}`,
		`{"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z","breakdown":"country"}`,
	} {
		res = s.Do(t, "POST", report, body)
		assert.Equal(t, 400, res.Code, "%s: %s", body, res.Body)
		assert.Equal(t, "validation_failed", res.Problem(), body)
	}
	res = s.Do(t, "POST", base+"/fnl_0000000000000000000000000a/report", `{"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`)
	assert.Equal(t, 404, res.Code, res.Body)

	// A report that would follow too many subscribers is refused.
	s.svc.maxSubscribers = 2
	res = s.Do(t, "POST", report, `{"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`)
	assert.Equal(t, 422, res.Code, res.Body)
	assert.Equal(t, "report_too_large", res.Problem())
}

// An ad-hoc query is a report of an unsaved definition, checked like a saved one.
func TestRoutesQuery(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	s.append(t, ev("u1", "a", 0, ""), ev("u1", "b", time.Minute, ""), ev("u2", "a", 0, ""), ev("u2", "b", 2*time.Hour, ""))
	q := "/api/bots/" + s.bot + "/funnels/query"
	res := s.Do(t, "POST", q, `{"steps":[{"event":"a"},{"event":"b"}],"conversion_window":"PT1H","from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.NotContains(t, res.JSON, "funnel_id")
	assert.Equal(t, float64(3600), res.JSON["conversion_window"])
	steps := res.JSON["steps"].([]any)
	assert.Equal(t, float64(1), steps[1].(map[string]any)["subscribers"], "u2 took longer than the window")

	res = s.Do(t, "POST", q, `{"steps":[{"event":"a"}],"from":"2026-03-02T00:00:00Z","to":"2026-03-01T00:00:00Z"}`)
	require.Equal(t, 400, res.Code, res.Body)
	assert.Contains(t, res.Body, `"steps"`)
	assert.Contains(t, res.Body, `"to"`, "every problem at once")
	res = s.Do(t, "POST", q, `{"steps":[{"event":"a"},{"event":"b"}],"from":"2024-03-01T00:00:00Z","to":"2026-03-01T00:00:00Z"}`)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "range_too_long", res.Problem())
	res = s.Do(t, "POST", q, `{"name":"x","steps":[{"event":"a"},{"event":"b"}],"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "unknown_field", res.Problem())
}

func TestRoutesCohort(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/funnels"
	res := s.Do(t, "POST", base, `{"name":"F","steps":[{"event":"a"},{"event":"b"},{"event":"c"}]}`)
	require.Equal(t, 201, res.Code, res.Body)
	id := res.JSON["id"].(string)
	s.append(t,
		ev("u1", "a", 0, "telegram"), ev("u1", "b", time.Minute, "telegram"),
		ev("u2", "a", 0, "web"), ev("u2", "b", time.Minute, "web"),
		ev("u3", "a", 0, "web"),
		ev("u4", "a", 0, "web"), ev("u4", "b", time.Minute, "web"), ev("u4", "c", 2*time.Minute, "web"),
	)
	cohorts := base + "/" + id + "/cohorts"
	const rng = `"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"`
	res = s.Do(t, "POST", cohorts, `{"name":"Stopped at b",`+rng+`,"step":2}`)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, "/api/bots/"+s.bot+"/segments/seg_1", res.Header.Get("Location"))
	c := s.cohorts.last()
	assert.ElementsMatch(t, []string{"u1", "u2"}, c.Members)
	assert.Equal(t, id, c.FunnelID)
	assert.Equal(t, int64(1), c.DefinitionRevision)
	assert.Equal(t, CohortDefinition{From: t0, To: t0.Add(24 * time.Hour), Step: 2}, c.Definition)

	res = s.Do(t, "POST", cohorts, `{"name":"Web stoppers",`+rng+`,"step":2,"breakdown":{"channel":"web"}}`)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, []string{"u2"}, s.cohorts.last().Members)
	assert.Equal(t, &CohortBreakdown{Channel: "web"}, s.cohorts.last().Definition.Breakdown)

	res = s.Do(t, "POST", cohorts, `{"name":"Converted",`+rng+`,"step":"converted"}`)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, []string{"u4"}, s.cohorts.last().Members)
	assert.True(t, s.cohorts.last().Definition.Converted)
	assert.Equal(t, 3, s.cohorts.last().Definition.Step)

	for _, body := range []string{
		`{"name":"x",` + rng + `,"step":4}`,
		`{"name":"x",` + rng + `,"step":0}`,
		`{"name":"x",` + rng + `,"step":"last"}`,
		`{"name":"x",` + rng + `}`,
		`{` + rng + `,"step":1}`,
		`{"name":"x",` + rng + `,"step":1,"breakdown":{}}`,
		`{"name":"x","from":"2026-03-02T00:00:00Z","to":"2026-03-01T00:00:00Z","step":1}`,
	} {
		res = s.Do(t, "POST", cohorts, body)
		assert.Equal(t, 400, res.Code, "%s: %s", body, res.Body)
		assert.Equal(t, "validation_failed", res.Problem(), body)
	}
	res = s.Do(t, "POST", cohorts, `{"name":"x","from":"2025-01-01T00:00:00Z","to":"2026-03-02T00:00:00Z","step":1}`)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "range_too_long", res.Problem())
	res = s.Do(t, "POST", base+"/fnl_0000000000000000000000000a/cohorts", `{"name":"x",`+rng+`,"step":1}`)
	assert.Equal(t, 404, res.Code)

	s.svc.maxCohort = 1
	res = s.Do(t, "POST", cohorts, `{"name":"Too many",`+rng+`,"step":2}`)
	assert.Equal(t, 422, res.Code, res.Body)
	assert.Equal(t, "cohort_too_large", res.Problem())
	assert.Equal(t, float64(2), res.JSON["member_count"])

	// Saving a cohort needs segments:write as well as analytics:read.
	tok := s.PAT(t, s.Owner, "analytics:read")
	res = s.DoAs(t, tok, "POST", cohorts, `{"name":"x",`+rng+`,"step":1}`)
	assert.Equal(t, 403, res.Code, res.Body)
	assert.Equal(t, "insufficient_scope", res.Problem())
	assert.Equal(t, "segments:write", res.JSON["required_scope"])
	res = s.DoAs(t, tok, "POST", base+"/"+id+"/report", `{`+rng+`}`)
	assert.Equal(t, 200, res.Code, "analytics:read reads reports: %s", res.Body)
}

// The statuses left: the funnel limit, a malformed expected_revision, a body that is not
// JSON, a query over too many subscribers.
func TestRoutesLimitsAndMalformed(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/funnels"
	var first string
	for i := range MaxFunnels {
		f, err := s.svc.Create(t.Context(), s.bot, Definition{Name: ptr(fmt.Sprint("F", i)), Steps: &[]Step{{Event: "a"}, {Event: "b"}}})
		require.NoError(t, err)
		if i == 0 {
			first = f.ID
		}
	}
	res := s.Do(t, "POST", base, `{"name":"One more","steps":[{"event":"a"},{"event":"b"}]}`)
	assert.Equal(t, 409, res.Code, res.Body)
	assert.Equal(t, "limit_reached", res.Problem())
	assert.Equal(t, float64(MaxFunnels), res.JSON["limit"])
	res = s.Do(t, "DELETE", base+"/"+first+"?expected_revision=0", nil)
	assert.Equal(t, 400, res.Code, res.Body)
	assert.Equal(t, "invalid_parameter", res.Problem())
	res = s.Do(t, "DELETE", base+"/"+first, nil)
	assert.Equal(t, 204, res.Code, res.Body)
	res = s.Do(t, "POST", base, `{"name":"Now it fits","steps":[{"event":"a"},{"event":"b"}]}`)
	assert.Equal(t, 201, res.Code, res.Body)

	res = s.Do(t, "POST", base+"/query", []byte(`steps=a`), "Content-Type", "application/x-www-form-urlencoded")
	assert.Equal(t, 415, res.Code, res.Body)
	res = s.Do(t, "POST", base+"/query", `{"steps":[{"event":"a"},{"event":"b"}],"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}}`)
	assert.Equal(t, 400, res.Code, res.Body)
	assert.Equal(t, "invalid_body", res.Problem())

	s.append(t, ev("u1", "a", 0, ""), ev("u2", "a", time.Minute, ""))
	s.svc.maxSubscribers = 1
	res = s.Do(t, "POST", base+"/query", `{"steps":[{"event":"a"},{"event":"b"}],"from":"2026-03-01T00:00:00Z","to":"2026-03-02T00:00:00Z"}`)
	assert.Equal(t, 422, res.Code, res.Body)
	assert.Equal(t, "report_too_large", res.Problem())
	assert.Equal(t, float64(1), res.JSON["max_subscribers"])
}

func ptr[T any](v T) *T { return &v }
