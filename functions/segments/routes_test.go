package segments

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

type server struct {
	*fixture
	*httpapitest.Server
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.raw, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	return &server{fixture: f, Server: s}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("analytics:read", auth.RightAnalytics).InPlan(auth.FeatureAnalytics)
	const seg = "/api/bots/{botID}/segments/{segmentID}"
	want := map[string]httpapi.Access{
		"GET /api/bots/{botID}/segments": read,
		"GET " + seg:                     read,
		"GET " + seg + "/members":        read,
		"DELETE " + seg:                  httpapi.Need("segments:write", auth.RightAnalytics).InPlan(auth.FeatureAnalytics),
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	base := "/api/bots/" + s.bot + "/segments"
	seg := s.save(t, cohort("Stopped", "s1", "s2", "s3"))
	s.save(t, cohort("Other", "x"))

	res := s.Do(t, "GET", base+"?limit=1", nil)
	require.Equal(t, 200, res.Code, res.Body)
	data := res.JSON["data"].([]any)
	require.Len(t, data, 1)
	assert.Equal(t, seg.ID, data[0].(map[string]any)["id"])
	cursor := res.JSON["next_cursor"].(string)
	res = s.Do(t, "GET", base+"?limit=1&cursor="+cursor, nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "Other", res.JSON["data"].([]any)[0].(map[string]any)["name"])
	assert.Nil(t, res.JSON["next_cursor"])

	res = s.Do(t, "GET", base+"/"+seg.ID, nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(3), res.JSON["member_count"])
	assert.Equal(t, false, res.JSON["stale"])
	assert.Equal(t, map[string]any{"kind": "funnel_cohort", "id": "fnl_a", "revision": float64(1), "definition": map[string]any{"step": float64(2)}}, res.JSON["source"])

	var got []any
	next := base + "/" + seg.ID + "/members?limit=2"
	for next != "" {
		res = s.Do(t, "GET", next, nil)
		require.Equal(t, 200, res.Code, res.Body)
		got = append(got, res.JSON["data"].([]any)...)
		next = ""
		if c, ok := res.JSON["next_cursor"].(string); ok {
			next = base + "/" + seg.ID + "/members?limit=2&cursor=" + c
		}
	}
	assert.Equal(t, []any{map[string]any{"subscriber_id": "s1"}, map[string]any{"subscriber_id": "s2"}, map[string]any{"subscriber_id": "s3"}}, got)
	res = s.Do(t, "GET", base+"/"+seg.ID+"/members?cursor=nope", nil)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "invalid_cursor", res.Problem())

	s.src.set("fnl_a", 2)
	res = s.Do(t, "GET", base+"/"+seg.ID, nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, true, res.JSON["stale"])

	// Deleting needs segments:write.
	tok := s.PAT(t, s.Owner, "analytics:read", "analytics:write")
	res = s.DoAs(t, tok, "DELETE", base+"/"+seg.ID, nil)
	assert.Equal(t, 403, res.Code, res.Body)
	assert.Equal(t, "insufficient_scope", res.Problem())
	res = s.Do(t, "DELETE", base+"/"+seg.ID, nil)
	assert.Equal(t, 204, res.Code, res.Body)
	for _, p := range []string{base + "/" + seg.ID, base + "/" + seg.ID + "/members"} {
		res = s.Do(t, "GET", p, nil)
		assert.Equal(t, 404, res.Code, p)
	}
	res = s.Do(t, "DELETE", base+"/"+seg.ID, nil)
	assert.Equal(t, 404, res.Code)
	res = s.Do(t, "GET", "/api/bots/bot_other/segments", nil)
	assert.Equal(t, 404, res.Code)
}
