package bots

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

// server serves the routes of the fixture's service, which is also the kernel's tenancy
// check; the fixture works in the server's account.
type server struct {
	*fixture
	*httpapitest.Server
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.store, Auth: f.auth, Bots: f.svc})
	Routes(s.Mux, f.svc, f.auth, s.Cursors)
	f.acct, f.owner = s.Account.ID, s.Owner.ID
	return &server{fixture: f, Server: s}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	all := []auth.Right{auth.RightReactions, auth.RightDialogs, auth.RightAnalytics}
	want := map[string]httpapi.Access{
		"GET /api/bots":                                 httpapi.NeedPAT("bots:read"),
		"POST /api/bots":                                httpapi.NeedPAT("bots:write"),
		"GET /api/bots/{botID}":                         httpapi.Need("bots:read"),
		"PATCH /api/bots/{botID}":                       httpapi.Need("bots:write", auth.RightReactions),
		"DELETE /api/bots/{botID}":                      httpapi.NeedPAT("bots:write", auth.RightReactions),
		"GET /api/bots/{botID}/api-tokens":              httpapi.NeedPAT("bots:read"),
		"POST /api/bots/{botID}/api-tokens":             httpapi.NeedPAT("bots:write", all...),
		"DELETE /api/bots/{botID}/api-tokens/{tokenID}": httpapi.NeedPAT("bots:write", auth.RightReactions),
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

	res := s.Do(t, "POST", "/api/bots", `{"name":"Support","settings":{"timezone":"Europe/Berlin"}}`)
	require.Equal(t, 201, res.Code, res.Body)
	id, _ := res.JSON["id"].(string)
	assert.Equal(t, "/api/bots/"+id, res.Header.Get("Location"))
	assert.Equal(t, float64(1), res.JSON["revision"])

	res = s.Do(t, "GET", "/api/bots/"+id, "")
	require.Equal(t, 200, res.Code)
	assert.Equal(t, "Support", res.JSON["name"])
	assert.Equal(t, "Europe/Berlin", res.JSON["settings"].(map[string]any)["timezone"])

	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"patch without expected_revision", "PATCH", "/api/bots/" + id, `{"name":"x"}`, 400, "validation_failed", ""},
		{"patch with a wrong type", "PATCH", "/api/bots/" + id, `{"expected_revision":1,"settings":{"timezone":5}}`, 400, "invalid_body", "settings.timezone"},
		{"patch with a misplaced field", "PATCH", "/api/bots/" + id, `{"expected_revision":1,"settings":{"name":"x"}}`, 400, "unknown_field", "settings.name"},
		{"patch with a bad timezone", "PATCH", "/api/bots/" + id, `{"expected_revision":1,"settings":{"timezone":"Mars/Base"}}`, 400, "validation_failed", ""},
		{"patch stale", "PATCH", "/api/bots/" + id, `{"expected_revision":5,"name":"x"}`, 409, "stale_revision", ""},
		{"delete with a bad revision", "DELETE", "/api/bots/" + id + "?expected_revision=abc", "", 400, "invalid_parameter", ""},
		{"delete with revision 0", "DELETE", "/api/bots/" + id + "?expected_revision=0", "", 400, "invalid_parameter", ""},
		{"delete stale", "DELETE", "/api/bots/" + id + "?expected_revision=2", "", 409, "stale_revision", ""},
		{"token without a name", "POST", "/api/bots/" + id + "/api-tokens", `{}`, 400, "validation_failed", ""},
		{"unknown token", "DELETE", "/api/bots/" + id + "/api-tokens/btk_nope", "", 404, "not_found", ""},
		{"unknown bot", "GET", "/api/bots/bot_nope", "", 404, "not_found", ""},
	}
	for _, tt := range tests {
		res := s.Do(t, tt.method, tt.path, tt.body)
		assert.Equal(t, tt.status, res.Code, "%s: %s", tt.name, res.Body)
		assert.Equal(t, tt.code, res.JSON["code"], tt.name)
		if tt.field != "" {
			assert.Equal(t, tt.field, res.JSON["field"], tt.name)
		}
	}
	res = s.Do(t, "PATCH", "/api/bots/"+id, `{"expected_revision":5}`)
	assert.Equal(t, float64(1), res.JSON["current_revision"])

	// A bot token is shown once, then listed masked.
	res = s.Do(t, "POST", "/api/bots/"+id+"/api-tokens", `{"name":"widget"}`)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	tok, _ := res.JSON["token"].(string)
	kind, ok := auth.ParseToken(tok)
	require.True(t, ok)
	assert.Equal(t, auth.KindBot, kind)
	assert.Equal(t, auth.MaskToken(tok), res.JSON["masked_value"])
	res = s.Do(t, "GET", "/api/bots/"+id+"/api-tokens", "")
	require.Equal(t, 200, res.Code)
	assert.NotContains(t, res.Body, tok)
	assert.NotContains(t, res.Body, `"token"`)
	assert.Len(t, res.JSON["data"], 1)

	// The bot token reads its bot; deleting the bot kills it.
	assert.Equal(t, 200, s.DoAs(t, tok, "GET", "/api/bots/"+id, nil).Code)

	res = s.Do(t, "DELETE", "/api/bots/"+id+"?expected_revision=1", "")
	assert.Equal(t, 204, res.Code, res.Body)
	res = s.Do(t, "GET", "/api/bots/"+id, "")
	assert.Equal(t, 404, res.Code)
	assert.Equal(t, 401, s.DoAs(t, tok, "GET", "/api/bots/"+id, nil).Code, "the bot's token died with it")
}
