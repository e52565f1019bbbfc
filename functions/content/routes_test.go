package content

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

func newServer(t *testing.T) (*fixture, *httpapitest.Server) {
	t.Helper()
	f := newFixture(t)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.svc.store, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	return f, s
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	_, s := newServer(t)
	read := httpapi.Need("content:read", auth.RightReactions)
	write := httpapi.Need("content:write", auth.RightReactions)
	const doc = "/api/bots/{botID}/content/{documentID}"
	want := map[string]httpapi.Access{
		"GET /api/bots/{botID}/content":                 read,
		"POST /api/bots/{botID}/content":                write,
		"GET /api/bots/{botID}/content/test-recipients": read,
		"GET " + doc:                                              read,
		"PATCH " + doc + "/draft":                                 write,
		"POST " + doc + "/publish":                                write,
		"POST " + doc + "/clone":                                  write,
		"POST " + doc + "/archive":                                write,
		"POST " + doc + "/test-send":                              write,
		"POST " + doc + "/validate":                               read,
		"POST " + doc + "/preview":                                read,
		"GET /api/bots/{botID}/content-templates":                 read,
		"POST /api/bots/{botID}/content-templates":                write,
		"DELETE /api/bots/{botID}/content-templates/{templateID}": write,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	f, s := newServer(t)
	base := "/api/bots/" + f.bot + "/content"
	r := s.Do(t, "POST", base, map[string]any{"type": "message", "name": "Hello", "draft": map[string]any{"text": "Hi {{ subscriber.fields.nope }}"}})
	require.Equal(t, http.StatusCreated, r.Code, r.Problem())
	id, _ := r.JSON["id"].(string)
	assert.Equal(t, base+"/"+id, r.Header.Get("Location"))

	r = s.Do(t, "POST", base+"/"+id+"/validate", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.Code)
	assert.Equal(t, "content_invalid", r.Problem())

	r = s.Do(t, "PATCH", base+"/"+id+"/draft", map[string]any{"draft": map[string]any{"text": "Hi"}})
	assert.Equal(t, http.StatusBadRequest, r.Code, "expected_revision is required")
	r = s.Do(t, "PATCH", base+"/"+id+"/draft", map[string]any{"expected_revision": 1, "draft": map[string]any{"text": "Hi"}})
	require.Equal(t, http.StatusOK, r.Code, r.Problem())
	r = s.Do(t, "POST", base+"/"+id+"/publish", map[string]any{"expected_revision": 1})
	assert.Equal(t, http.StatusConflict, r.Code)
	assert.Equal(t, "stale_revision", r.Problem())
	r = s.Do(t, "POST", base+"/"+id+"/publish", map[string]any{"expected_revision": 2})
	require.Equal(t, http.StatusOK, r.Code, r.Problem())

	for range TestSendLimit.Max {
		r = s.Do(t, "POST", base+"/"+id+"/test-send", map[string]any{"subscriber_id": "sub_tg"})
		require.Equal(t, http.StatusOK, r.Code, r.Problem())
	}
	r = s.Do(t, "POST", base+"/"+id+"/test-send", map[string]any{"subscriber_id": "sub_tg"})
	assert.Equal(t, http.StatusTooManyRequests, r.Code)
	assert.Equal(t, "60", r.Header.Get("Retry-After"), "the clock stands at the start of a minute")

	r = s.Do(t, "GET", base+"/test-recipients", nil)
	require.Equal(t, http.StatusOK, r.Code)
	assert.Contains(t, r.Body, `"sub_tg"`)
	assert.NotContains(t, r.Body, "ada@example.com", "a recipient's email is not listed")

	r = s.Do(t, "GET", "/api/bots/bot_other/content/"+id, nil)
	assert.Equal(t, http.StatusNotFound, r.Code)
}
