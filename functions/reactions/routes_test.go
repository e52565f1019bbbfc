package reactions

import (
	"context"
	"encoding/json"
	"fmt"
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

// oneBot is the kernel's tenancy check for a single bot of the test account.
type oneBot struct{ account, bot string }

func (o oneBot) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account != o.account || bot != o.bot {
		return nil, httpapi.NotFound("bot")
	}
	return struct{}{}, nil
}

type server struct {
	*fixture
	mux  *httpapi.Mux
	tok  string
	base string
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	a := auth.NewService(f.store, f.clock.Now, nil)
	acct, owner, err := a.CreateAccount(t.Context(), "Acme")
	require.NoError(t, err)
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: httpapi.BearerAuth(a), Bots: oneBot{acct.ID, f.bot}, Audit: audit.NewLog(f.store),
		Log: slog.New(slog.DiscardHandler), Now: f.clock.Now,
	})
	require.NoError(t, err)
	Routes(mux, f.svc, httpapi.NewCursors([]byte("0123456789abcdef0123456789abcdef")))
	_, tok, err := a.IssuePAT(t.Context(), acct.ID, owner.ID, "t", auth.Scopes{auth.Full}, f.clock.Now().Add(time.Hour))
	require.NoError(t, err)
	return &server{fixture: f, mux: mux, tok: tok, base: "/api/bots/" + f.bot + "/reactions"}
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
	for _, rt := range s.mux.Routes() {
		got[rt.Pattern()] = rt.Access
		assert.True(t, rt.BotScoped, rt.Pattern())
	}
	assert.Equal(t, want, got)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)

	res := s.do(t, "POST", s.base, `{"name":"Welcome","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"Hi"}]}`)
	require.Equal(t, 201, res.Code, res.Body.String())
	id := res.json["id"].(string)
	assert.Equal(t, s.base+"/"+id, res.Header().Get("Location"))
	assert.Nil(t, res.json["published_version"])
	assert.Equal(t, true, res.json["has_unpublished_changes"])

	// /export is the export, never a reaction id.
	res = s.do(t, "GET", s.base+"/export", "")
	require.Equal(t, 200, res.Code, res.Body.String())
	assert.Equal(t, float64(1), res.json["format_version"])
	assert.Len(t, res.json["reactions"], 1)

	res = s.do(t, "POST", s.base+"/"+id+"/publish", `{"expected_revision":1}`)
	require.Equal(t, 200, res.Code, res.Body.String())
	assert.Equal(t, float64(1), res.json["published_version"])

	res = s.do(t, "GET", s.base+"/"+id+"/versions/1", "")
	require.Equal(t, 200, res.Code, res.Body.String())
	assert.Equal(t, id, res.json["reaction_id"])
	res = s.do(t, "GET", s.base+"/"+id+"/versions", "")
	require.Equal(t, 200, res.Code)
	assert.Len(t, res.json["data"], 1)
	assert.Nil(t, res.json["next_cursor"])

	res = s.do(t, "GET", s.base+"?trigger_type=start&published=true", "")
	require.Equal(t, 200, res.Code)
	assert.Len(t, res.json["data"], 1)
	assert.NotContains(t, res.Body.String(), `"steps"`, "lists leave the steps out")

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
		res := s.do(t, tt.method, tt.path, tt.body)
		assert.Equal(t, tt.status, res.Code, "%s: %s", tt.name, res.Body.String())
		assert.Equal(t, tt.code, res.json["code"], tt.name)
		if tt.field != "" {
			assert.Equal(t, tt.field, res.json["field"], tt.name)
		}
		if tt.status == 422 || tt.code == "validation_failed" {
			assert.NotEmpty(t, res.json["errors"], tt.name)
		}
	}

	res = s.do(t, "POST", s.base+"/import", `{"mode":"dry_run","bundle":{"format_version":1,"reactions":[{"key":"a","draft":{"name":"welcome","trigger":{"type":"api"}}}]}}`)
	require.Equal(t, 200, res.Code, res.Body.String())
	assert.Equal(t, false, res.json["applied"])
	assert.Len(t, res.json["conflicts"], 1)

	res = s.do(t, "DELETE", s.base+"/"+id+"?expected_revision=2", "")
	assert.Equal(t, 204, res.Code, res.Body.String())
	res = s.do(t, "GET", s.base+"/"+id, "")
	assert.Equal(t, 404, res.Code)
}

func TestListPagesOverHTTP(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	for i := range 5 {
		res := s.do(t, "POST", s.base, fmt.Sprintf(`{"name":"R%d","trigger":{"type":"api"}}`, i))
		require.Equal(t, 201, res.Code)
	}
	var names []string
	path := s.base + "?limit=2"
	for {
		res := s.do(t, "GET", path, "")
		require.Equal(t, 200, res.Code, res.Body.String())
		for _, it := range res.json["data"].([]any) {
			names = append(names, it.(map[string]any)["name"].(string))
		}
		next, _ := res.json["next_cursor"].(string)
		if next == "" {
			break
		}
		path = s.base + "?limit=2&cursor=" + next
	}
	assert.Equal(t, []string{"R0", "R1", "R2", "R3", "R4"}, names)
	res := s.do(t, "GET", s.base+"?limit=2&trigger_type=api&cursor="+strings.Repeat("A", 30), "")
	assert.Equal(t, "invalid_cursor", res.json["code"])
}
