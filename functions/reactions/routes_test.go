package reactions

import (
	"fmt"
	"strings"
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
	base string
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.store, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	return &server{fixture: f, Server: s, base: "/api/bots/" + f.bot + "/reactions"}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read, write := httpapi.Need("reactions:read"), httpapi.Need("reactions:write", auth.RightReactions)
	const b = "/api/bots/{botID}/reactions"
	want := map[string]httpapi.Access{
		"GET " + b:                                      read,
		"POST " + b:                                     write,
		"GET " + b + "/export":                          read,
		"POST " + b + "/import":                         write,
		"GET " + b + "/{reactionID}":                    read,
		"PATCH " + b + "/{reactionID}":                  write,
		"DELETE " + b + "/{reactionID}":                 write,
		"POST " + b + "/{reactionID}/publish":           write,
		"GET " + b + "/{reactionID}/versions":           read,
		"GET " + b + "/{reactionID}/versions/{version}": read,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
		assert.True(t, rt.BotScoped, rt.Pattern())
	}
	assert.Equal(t, want, got)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	res := s.Do(t, "POST", s.base, `{"name":"Welcome","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"Hi"}]}`)
	require.Equal(t, 201, res.Code, res.Body)
	id := res.JSON["id"].(string)
	assert.Equal(t, s.base+"/"+id, res.Header.Get("Location"))
	assert.Nil(t, res.JSON["published_version"])
	assert.Equal(t, true, res.JSON["has_unpublished_changes"])

	// /export is the export, never a reaction id.
	res = s.Do(t, "GET", s.base+"/export", "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["format_version"])
	assert.Len(t, res.JSON["reactions"], 1)

	res = s.Do(t, "POST", s.base+"/"+id+"/publish", `{"expected_revision":1}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["published_version"])

	res = s.Do(t, "GET", s.base+"/"+id+"/versions/1", "")
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, id, res.JSON["reaction_id"])
	res = s.Do(t, "GET", s.base+"/"+id+"/versions", "")
	require.Equal(t, 200, res.Code)
	assert.Len(t, res.JSON["data"], 1)
	assert.Nil(t, res.JSON["next_cursor"])

	res = s.Do(t, "GET", s.base+"?trigger_type=start&published=true", "")
	require.Equal(t, 200, res.Code)
	assert.Len(t, res.JSON["data"], 1)
	assert.NotContains(t, res.Body, `"steps"`, "lists leave the steps out")

	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"unknown field in a step", "POST", s.base, `{"name":"x","trigger":{"type":"api"},"steps":[{"id":"a","type":"end","colour":"red"}]}`, 400, "unknown_field", "steps[0].colour"},
		{"unknown field in a button", "POST", s.base, `{"name":"x","trigger":{"type":"api"},"steps":[{"id":"a","type":"buttons","text":"t","buttons":[{"title":"b","goto":"a"}]}]}`, 400, "unknown_field", "steps[0].buttons[0].goto"},
		{"duplicate field", "POST", s.base, `{"name":"x","name":"y","trigger":{"type":"api"}}`, 400, "duplicate_field", "name"},
		{"wrong type", "POST", s.base, `{"name":"x","trigger":{"type":"api"},"steps":[{"id":"a","type":"wait","seconds":"5"}]}`, 400, "invalid_body", "steps.seconds"},
		{"invalid steps", "POST", s.base, `{"name":"x","trigger":{"type":"api"},"steps":[{"id":"a","type":"goto","step_id":"a"}]}`, 422, "invalid_steps", ""},
		{"name taken", "POST", s.base, `{"name":"WELCOME","trigger":{"type":"api"}}`, 409, "name_taken", ""},
		{"patch without expected_revision", "PATCH", s.base + "/" + id, `{"name":"x"}`, 400, "validation_failed", ""},
		{"patch stale", "PATCH", s.base + "/" + id, `{"expected_revision":1,"name":"x"}`, 409, "stale_revision", ""},
		{"patch unknown field", "PATCH", s.base + "/" + id, `{"expected_revision":2,"revision":3}`, 400, "unknown_field", "revision"},
		{"publish stale", "POST", s.base + "/" + id + "/publish", `{"expected_revision":1}`, 409, "stale_revision", ""},
		{"publish without revision", "POST", s.base + "/" + id + "/publish", `{}`, 400, "validation_failed", ""},
		{"delete with a bad revision", "DELETE", s.base + "/" + id + "?expected_revision=x", "", 400, "invalid_parameter", ""},
		{"delete stale", "DELETE", s.base + "/" + id + "?expected_revision=1", "", 409, "stale_revision", ""},
		{"export is no id", "PATCH", s.base + "/export", `{"expected_revision":1}`, 404, "not_found", ""},
		{"unknown reaction", "GET", s.base + "/rct_0000000000000000000000000a", "", 404, "not_found", ""},
		{"version zero", "GET", s.base + "/" + id + "/versions/0", "", 404, "not_found", ""},
		{"version not a number", "GET", s.base + "/" + id + "/versions/latest", "", 404, "not_found", ""},
		{"version 2", "GET", s.base + "/" + id + "/versions/2", "", 404, "not_found", ""},
		{"bad trigger filter", "GET", s.base + "?trigger_type=sms", "", 400, "invalid_parameter", ""},
		{"bad published filter", "GET", s.base + "?published=yes", "", 400, "invalid_parameter", ""},
		{"bad export filter", "GET", s.base + "/export?reaction_id=nope", "", 400, "invalid_parameter", ""},
		{"import without mode", "POST", s.base + "/import", `{"bundle":{"format_version":1}}`, 400, "validation_failed", ""},
		{"import unknown mode", "POST", s.base + "/import", `{"mode":"merge","bundle":{"format_version":1}}`, 400, "validation_failed", ""},
		{"import unknown bundle field", "POST", s.base + "/import", `{"mode":"dry_run","bundle":{"format_version":1,"exported_at":"x"}}`, 400, "unknown_field", "bundle.exported_at"},
		{"import conflict", "POST", s.base + "/import", `{"mode":"create","bundle":{"format_version":1,"reactions":[{"key":"a","draft":{"name":"welcome","trigger":{"type":"api"}}}]}}`, 409, "import_conflict", ""},
	}
	for _, tt := range tests {
		res := s.Do(t, tt.method, tt.path, tt.body)
		assert.Equal(t, tt.status, res.Code, "%s: %s", tt.name, res.Body)
		assert.Equal(t, tt.code, res.JSON["code"], tt.name)
		if tt.field != "" {
			assert.Equal(t, tt.field, res.JSON["field"], tt.name)
		}
		if tt.status == 422 || tt.code == "validation_failed" {
			assert.NotEmpty(t, res.JSON["errors"], tt.name)
		}
	}

	res = s.Do(t, "POST", s.base+"/import", `{"mode":"dry_run","bundle":{"format_version":1,"reactions":[{"key":"a","draft":{"name":"welcome","trigger":{"type":"api"}}}]}}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, false, res.JSON["applied"])
	assert.Len(t, res.JSON["conflicts"], 1)

	res = s.Do(t, "DELETE", s.base+"/"+id+"?expected_revision=2", "")
	assert.Equal(t, 204, res.Code, res.Body)
	res = s.Do(t, "GET", s.base+"/"+id, "")
	assert.Equal(t, 404, res.Code)
}

func TestListPagesOverHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for i := range 5 {
		res := s.Do(t, "POST", s.base, fmt.Sprintf(`{"name":"R%d","trigger":{"type":"api"}}`, i))
		require.Equal(t, 201, res.Code)
	}
	var names []string
	path := s.base + "?limit=2"
	for {
		res := s.Do(t, "GET", path, "")
		require.Equal(t, 200, res.Code, res.Body)
		for _, it := range res.JSON["data"].([]any) {
			names = append(names, it.(map[string]any)["name"].(string))
		}
		next, _ := res.JSON["next_cursor"].(string)
		if next == "" {
			break
		}
		path = s.base + "?limit=2&cursor=" + next
	}
	assert.Equal(t, []string{"R0", "R1", "R2", "R3", "R4"}, names)
	res := s.Do(t, "GET", s.base+"?limit=2&trigger_type=api&cursor="+strings.Repeat("A", 30), "")
	assert.Equal(t, "invalid_cursor", res.JSON["code"])
}
