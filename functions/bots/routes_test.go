package bots

import (
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

type server struct {
	*fixture
	mux *httpapi.Mux
	tok string
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: httpapi.BearerAuth(f.auth), Bots: f.svc, Audit: audit.NewLog(f.store),
		Log: slog.New(slog.DiscardHandler), Now: f.clock.Now,
	})
	require.NoError(t, err)
	Routes(mux, f.svc, f.auth, httpapi.NewCursors([]byte("0123456789abcdef0123456789abcdef")))
	_, tok, err := f.auth.IssuePAT(t.Context(), f.acct, f.owner, "t", auth.Scopes{auth.Full}, t0.Add(time.Hour))
	require.NoError(t, err)
	return &server{fixture: f, mux: mux, tok: tok}
}

type reply struct {
	*httptest.ResponseRecorder
	json map[string]any
}

func (s *server) do(t *testing.T, method, path, body string) reply {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+s.tok)
	w := httptest.NewRecorder()
	s.mux.ServeHTTP(w, r)
	rep := reply{ResponseRecorder: w}
	if w.Body.Len() > 0 {
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &rep.json), w.Body.String())
	}
	return rep
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
	for _, rt := range s.mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	res := s.do(t, "POST", "/api/bots", `{"name":"Support","settings":{"timezone":"Europe/Berlin"}}`)
	require.Equal(t, 201, res.Code, res.Body.String())
	id, _ := res.json["id"].(string)
	assert.Equal(t, "/api/bots/"+id, res.Header().Get("Location"))
	assert.Equal(t, float64(1), res.json["revision"])

	res = s.do(t, "GET", "/api/bots/"+id, "")
	require.Equal(t, 200, res.Code)
	assert.Equal(t, "Support", res.json["name"])
	assert.Equal(t, "Europe/Berlin", res.json["settings"].(map[string]any)["timezone"])

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
		res := s.do(t, tt.method, tt.path, tt.body)
		assert.Equal(t, tt.status, res.Code, "%s: %s", tt.name, res.Body.String())
		assert.Equal(t, tt.code, res.json["code"], tt.name)
		if tt.field != "" {
			assert.Equal(t, tt.field, res.json["field"], tt.name)
		}
	}
	res = s.do(t, "PATCH", "/api/bots/"+id, `{"expected_revision":5}`)
	assert.Equal(t, float64(1), res.json["current_revision"])

	// A bot token is shown once, then listed masked.
	res = s.do(t, "POST", "/api/bots/"+id+"/api-tokens", `{"name":"widget"}`)
	require.Equal(t, 201, res.Code, res.Body.String())
	assert.Equal(t, "no-store", res.Header().Get("Cache-Control"))
	tok, _ := res.json["token"].(string)
	kind, ok := auth.ParseToken(tok)
	require.True(t, ok)
	assert.Equal(t, auth.KindBot, kind)
	assert.Equal(t, auth.MaskToken(tok), res.json["masked_value"])
	res = s.do(t, "GET", "/api/bots/"+id+"/api-tokens", "")
	require.Equal(t, 200, res.Code)
	assert.NotContains(t, res.Body.String(), tok)
	assert.NotContains(t, res.Body.String(), `"token"`)
	assert.Len(t, res.json["data"], 1)

	// The bot token reads its bot; deleting the bot kills it.
	r := httptest.NewRequest("GET", "/api/bots/"+id, nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	w := httptest.NewRecorder()
	s.mux.ServeHTTP(w, r)
	assert.Equal(t, 200, w.Code)

	res = s.do(t, "DELETE", "/api/bots/"+id+"?expected_revision=1", "")
	assert.Equal(t, 204, res.Code, res.Body.String())
	res = s.do(t, "GET", "/api/bots/"+id, "")
	assert.Equal(t, 404, res.Code)
	w = httptest.NewRecorder()
	s.mux.ServeHTTP(w, r)
	assert.Equal(t, 401, w.Code, "the bot's token died with it")
}
