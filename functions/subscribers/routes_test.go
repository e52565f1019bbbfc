package subscribers

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
	f := newFixture(t, false)
	s := &server{fixture: f, Server: httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.store, BotIDs: []string{f.bot}})}
	s.serve(t)
	return s
}

// serve serves the routes of s.svc on a new mux.
func (s *server) serve(t *testing.T) {
	t.Helper()
	s.Mux = s.NewMux(t)
	Routes(s.Mux, s.svc, s.Cursors)
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	dialogs := func(scope string) httpapi.Access { return httpapi.Need(scope, auth.RightDialogs) }
	config := httpapi.Need("subscribers:write", auth.RightReactions)
	want := map[string]httpapi.Access{
		"GET /api/bots/{botID}/subscribers":                                    dialogs("subscribers:read"),
		"POST /api/bots/{botID}/subscribers":                                   dialogs("subscribers:write"),
		"GET /api/bots/{botID}/subscribers/{subscriberID}":                     dialogs("subscribers:read"),
		"PATCH /api/bots/{botID}/subscribers/{subscriberID}":                   dialogs("subscribers:write"),
		"DELETE /api/bots/{botID}/subscribers/{subscriberID}":                  dialogs("subscribers:write"),
		"POST /api/bots/{botID}/subscribers/{subscriberID}/labels":             dialogs("subscribers:write"),
		"DELETE /api/bots/{botID}/subscribers/{subscriberID}/labels/{labelID}": dialogs("subscribers:write"),
		"GET /api/bots/{botID}/labels":                                         dialogs("subscribers:read"),
		"POST /api/bots/{botID}/labels":                                        config,
		"PATCH /api/bots/{botID}/labels/{labelID}":                             config,
		"DELETE /api/bots/{botID}/labels/{labelID}":                            config,
		"GET /api/bots/{botID}/fields":                                         dialogs("subscribers:read"),
		"POST /api/bots/{botID}/fields":                                        config,
		"DELETE /api/bots/{botID}/fields/{fieldID}":                            config,
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
	base := "/api/bots/" + s.bot

	res := s.Do(t, "POST", base+"/labels", `{"name":"VIP"}`)
	require.Equal(t, 201, res.Code, res.Body)
	label := res.JSON["id"].(string)
	assert.Equal(t, base+"/labels/"+label, res.Header.Get("Location"))
	res = s.Do(t, "POST", base+"/fields", `{"name":"plan","type":"string"}`)
	require.Equal(t, 201, res.Code, res.Body)
	field := res.JSON["id"].(string)

	res = s.Do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","first_name":"Anna","fields":{"plan":"pro"},"labels":["`+label+`"],"last_seen_at":"2026-03-01T10:00:00+01:00"}`)
	require.Equal(t, 201, res.Code, res.Body)
	sub := res.JSON["id"].(string)
	assert.Equal(t, base+"/subscribers/"+sub, res.Header.Get("Location"))
	assert.Equal(t, "2026-03-01T09:00:00Z", res.JSON["last_seen_at"])
	assert.Equal(t, map[string]any{"plan": "pro"}, res.JSON["fields"])
	res = s.Do(t, "POST", base+"/subscribers", `{"channel":"telegram","external_id":"42","last_name":"Schmidt"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "Anna Schmidt", res.JSON["name"])
	assert.Equal(t, float64(2), res.JSON["revision"])
	assert.Empty(t, res.Header.Get("Location"))

	subPath := base + "/subscribers/" + sub
	tests := []struct {
		name, method, path, body string
		status                   int
		code, field              string
	}{
		{"get", "GET", subPath, "", 200, "", ""},
		{"list", "GET", base + "/subscribers?label=" + label + "&q=ann&channel=telegram", "", 200, "", ""},
		{"list labels", "GET", base + "/labels", "", 200, "", ""},
		{"list fields", "GET", base + "/fields", "", 200, "", ""},
		{"upsert unknown field", "POST", base + "/subscribers", `{"channel":"vk","external_id":"1","colour":"red"}`, 400, "unknown_field", "colour"},
		{"upsert duplicate field", "POST", base + "/subscribers", `{"channel":"vk","external_id":"1","fields":{"plan":"a","plan":"b"}}`, 400, "duplicate_field", "fields.plan"},
		{"upsert wrong JSON type", "POST", base + "/subscribers", `{"channel":"vk","external_id":1}`, 400, "invalid_body", "external_id"},
		{"upsert bad last_seen_at", "POST", base + "/subscribers", `{"channel":"vk","external_id":"1","last_seen_at":"yesterday"}`, 400, "validation_failed", ""},
		{"upsert wrong field type", "POST", base + "/subscribers", `{"channel":"vk","external_id":"1","fields":{"plan":5}}`, 400, "validation_failed", ""},
		{"patch without revision", "PATCH", subPath, `{"first_name":"A"}`, 400, "validation_failed", ""},
		{"patch unknown field", "PATCH", subPath, `{"expected_revision":2,"labels":[]}`, 400, "unknown_field", "labels"},
		{"patch stale", "PATCH", subPath, `{"expected_revision":1,"first_name":"A"}`, 409, "stale_revision", ""},
		{"patch unknown subscriber", "PATCH", base + "/subscribers/sub_00000000000000000000000000", `{"expected_revision":1}`, 404, "not_found", ""},
		{"add label without id", "POST", subPath + "/labels", `{}`, 400, "validation_failed", ""},
		{"add unknown label", "POST", subPath + "/labels", `{"label_id":"lbl_00000000000000000000000000"}`, 400, "validation_failed", ""},
		{"remove malformed label", "DELETE", subPath + "/labels/nope", "", 404, "not_found", ""},
		{"list bad label", "GET", base + "/subscribers?label=vip", "", 400, "invalid_parameter", ""},
		{"list bad channel", "GET", base + "/subscribers?channel=fax", "", 400, "invalid_parameter", ""},
		{"list external id without channel", "GET", base + "/subscribers?external_id=42", "", 400, "invalid_parameter", ""},
		{"list empty q", "GET", base + "/subscribers?q=", "", 400, "invalid_parameter", ""},
		{"list q without words", "GET", base + "/subscribers?q=%20-%20", "", 400, "invalid_parameter", ""},
		{"list twice-given filter", "GET", base + "/subscribers?channel=vk&channel=telegram", "", 400, "invalid_parameter", ""},
		{"list bad time", "GET", base + "/subscribers?created_from=yesterday", "", 400, "invalid_parameter", ""},
		{"list time out of window", "GET", base + "/subscribers?created_from=1900-01-01T00:00:00Z", "", 400, "invalid_parameter", ""},
		{"list inverted range", "GET", base + "/subscribers?created_from=2026-03-02T00:00:00Z&created_to=2026-03-01T00:00:00Z", "", 400, "invalid_parameter", ""},
		{"list bad limit", "GET", base + "/subscribers?limit=0", "", 400, "invalid_parameter", ""},
		{"list bad cursor", "GET", base + "/subscribers?cursor=nope", "", 400, "invalid_cursor", ""},
		{"label taken", "POST", base + "/labels", `{"name":"vip"}`, 409, "name_taken", ""},
		{"rename without name", "PATCH", base + "/labels/" + label, `{"expected_revision":1}`, 400, "validation_failed", ""},
		{"rename stale", "PATCH", base + "/labels/" + label, `{"expected_revision":3,"name":"Gold"}`, 409, "stale_revision", ""},
		{"field bad type", "POST", base + "/fields", `{"name":"x","type":"int"}`, 400, "validation_failed", ""},
		{"field taken", "POST", base + "/fields", `{"name":"plan","type":"string"}`, 409, "name_taken", ""},
		{"delete subscriber bad revision", "DELETE", subPath + "?expected_revision=x", "", 400, "invalid_parameter", ""},
		{"delete subscriber stale", "DELETE", subPath + "?expected_revision=1", "", 409, "stale_revision", ""},
		{"delete label stale", "DELETE", base + "/labels/" + label + "?expected_revision=9", "", 409, "stale_revision", ""},
		{"delete unknown field", "DELETE", base + "/fields/fld_00000000000000000000000000", "", 404, "not_found", ""},
		{"another bot", "GET", "/api/bots/bot_00000000000000000000000000/subscribers", "", 404, "not_found", ""},
		{"remove label", "DELETE", subPath + "/labels/" + label, "", 200, "", ""},
		{"add label", "POST", subPath + "/labels", `{"label_id":"` + label + `"}`, 200, "", ""},
		{"rename", "PATCH", base + "/labels/" + label, `{"expected_revision":1,"name":"Gold"}`, 200, "", ""},
		{"delete field", "DELETE", base + "/fields/" + field, "", 204, "", ""},
		{"delete label", "DELETE", base + "/labels/" + label + "?expected_revision=2", "", 204, "", ""},
		{"delete subscriber (the deletions above each changed it)", "DELETE", subPath + "?expected_revision=6", "", 204, "", ""},
		{"deleted subscriber", "GET", subPath, "", 404, "not_found", ""},
	}
	for _, tt := range tests {
		res := s.Do(t, tt.method, tt.path, tt.body)
		assert.Equal(t, tt.status, res.Code, "%s: %s", tt.name, res.Body)
		if tt.code != "" {
			assert.Equal(t, tt.code, res.JSON["code"], tt.name)
		}
		if tt.field != "" {
			assert.Equal(t, tt.field, res.JSON["field"], tt.name)
		}
	}
}
