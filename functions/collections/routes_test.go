package collections

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
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
	read := httpapi.Need("collections:read")
	write := httpapi.Need("collections:write", auth.RightReactions)
	const col = "/api/bots/{botID}/collections/{collectionID}"
	want := map[string]httpapi.Access{
		"GET /api/bots/{botID}/collections":     read,
		"POST /api/bots/{botID}/collections":    write,
		"GET " + col:                            read,
		"PATCH " + col:                          write,
		"DELETE " + col:                         write,
		"GET " + col + "/records":               read,
		"POST " + col + "/records":              write,
		"POST " + col + "/records/batch":        write,
		"GET " + col + "/records/{recordID}":    read,
		"PATCH " + col + "/records/{recordID}":  write,
		"DELETE " + col + "/records/{recordID}": write,
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
	base := "/api/bots/" + s.bot + "/collections"

	res := s.Do(t, "POST", base, `{"name":"Cities","fields":[{"name":"city","type":"string","required":true,"indexed":true},{"name":"pop","type":"number"}]}`)
	require.Equal(t, 201, res.Code, res.Body)
	col := res.JSON["id"].(string)
	assert.Equal(t, base+"/"+col, res.Header.Get("Location"))
	assert.Equal(t, []any{
		map[string]any{"name": "city", "type": "string", "required": true, "indexed": true},
		map[string]any{"name": "pop", "type": "number", "required": false, "indexed": false},
	}, res.JSON["fields"])

	recs := base + "/" + col + "/records"
	res = s.Do(t, "POST", recs, `{"external_key":"ber","values":{"city":"Berlin","pop":3.7e6}}`)
	require.Equal(t, 201, res.Code, res.Body)
	rec := res.JSON["id"].(string)
	assert.Equal(t, recs+"/"+rec, res.Header.Get("Location"))
	assert.Equal(t, map[string]any{"city": "Berlin", "pop": 3.7e6}, res.JSON["values"])
	s.clock.Advance(time.Second) // ids sort by creation time
	res = s.Do(t, "POST", recs, `{"values":{"city":"Paris"}}`)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Nil(t, res.JSON["external_key"])

	res = s.Do(t, "GET", recs+"?filter[city]=Berlin", "")
	require.Equal(t, 200, res.Code, res.Body)
	require.Len(t, res.JSON["data"], 1)
	assert.Nil(t, res.JSON["next_cursor"])
	res = s.Do(t, "GET", recs+"?limit=1", "")
	require.Equal(t, 200, res.Code)
	next := res.JSON["next_cursor"].(string)
	res = s.Do(t, "GET", recs+"?limit=1&filter[city]=Paris&cursor="+next, "")
	assert.Equal(t, "invalid_cursor", res.JSON["code"], "a cursor is bound to its filters")
	res = s.Do(t, "GET", recs+"?limit=1&cursor="+next, "")
	require.Equal(t, 200, res.Code)
	assert.Equal(t, "Paris", res.JSON["data"].([]any)[0].(map[string]any)["values"].(map[string]any)["city"])

	res = s.Do(t, "POST", recs+"/batch", `{"records":[{"external_key":"ber","values":{"pop":3.8e6}},{"values":{"city":"Rome"}}]}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, []any{rec}, res.JSON["updated"])
	assert.Len(t, res.JSON["created"], 1)

	tests := []struct {
		name, method, path, body string
		status                   int
		code, field, parameter   string
	}{
		{"collection: unknown field", "POST", base, `{"name":"x","fields":[{"name":"a","type":"string","colour":1}]}`, 400, "unknown_field", "fields[0].colour", ""},
		{"collection: patch without revision", "PATCH", base + "/" + col, `{"name":"x"}`, 400, "validation_failed", "", ""},
		{"collection: patch stale", "PATCH", base + "/" + col, `{"expected_revision":3,"name":"x"}`, 409, "stale_revision", "", ""},
		{"collection: delete with records", "DELETE", base + "/" + col, ``, 409, "collection_not_empty", "", ""},
		{"collection: bad force", "DELETE", base + "/" + col + "?force=yes", ``, 400, "invalid_parameter", "", "force"},
		{"collection: bad revision", "DELETE", base + "/" + col + "?expected_revision=0", ``, 400, "invalid_parameter", "", "expected_revision"},
		{"collection: unknown", "GET", base + "/col_00000000000000000000000000", ``, 404, "not_found", "", ""},
		{"collection: malformed", "GET", base + "/nope", ``, 404, "not_found", "", ""},
		{"record: unknown field", "POST", recs, `{"values":{"city":"x"},"colour":1}`, 400, "unknown_field", "colour", ""},
		{"record: duplicate value", "POST", recs, `{"values":{"city":"x","city":"y"}}`, 400, "duplicate_field", "values.city", ""},
		{"record: wrong type", "POST", recs, `{"values":{"city":1}}`, 400, "validation_failed", "", ""},
		{"record: external key not a string", "POST", recs, `{"external_key":1,"values":{"city":"x"}}`, 400, "invalid_body", "external_key", ""},
		{"record: taken key", "POST", recs, `{"external_key":"ber","values":{"city":"x"}}`, 409, "duplicate_external_key", "", ""},
		{"record: patch stale", "PATCH", recs + "/" + rec, `{"expected_revision":1,"values":{"pop":1}}`, 409, "stale_revision", "", ""},
		{"record: patch without revision", "PATCH", recs + "/" + rec, `{"values":{"pop":1}}`, 400, "validation_failed", "", ""},
		{"record: delete stale", "DELETE", recs + "/" + rec + "?expected_revision=1", ``, 409, "stale_revision", "", ""},
		{"record: unknown", "GET", recs + "/rec_00000000000000000000000000", ``, 404, "not_found", "", ""},
		{"record: batch is no record id", "GET", recs + "/batch", ``, 404, "not_found", "", ""},
		{"batch: unknown field", "POST", recs + "/batch", `{"records":[{"value":{}}]}`, 400, "unknown_field", "records[0].value", ""},
		{"batch: empty", "POST", recs + "/batch", `{"records":[]}`, 400, "validation_failed", "", ""},
		{"list: filter on no field", "GET", recs + "?filter[colour]=red", ``, 400, "invalid_parameter", "", "filter[colour]"},
		{"list: filter not indexed", "GET", recs + "?filter[pop]=1", ``, 400, "invalid_parameter", "", "filter[pop]"},
		{"list: malformed filter", "GET", recs + "?filter[city=x", ``, 400, "invalid_parameter", "", "filter[city"},
		{"list: bare filter", "GET", recs + "?filter=x", ``, 400, "invalid_parameter", "", "filter"},
		{"list: filter twice", "GET", recs + "?filter[city]=a&filter[city]=b", ``, 400, "invalid_parameter", "", "filter[city]"},
		{"list: bad limit", "GET", recs + "?limit=201", ``, 400, "invalid_parameter", "", "limit"},
	}
	for _, tt := range tests {
		res := s.Do(t, tt.method, tt.path, tt.body)
		assert.Equal(t, tt.status, res.Code, "%s: %s", tt.name, res.Body)
		assert.Equal(t, tt.code, res.JSON["code"], tt.name)
		if tt.field != "" {
			assert.Equal(t, tt.field, res.JSON["field"], tt.name)
		}
		if tt.parameter != "" {
			assert.Equal(t, tt.parameter, res.JSON["parameter"], tt.name)
		}
	}

	res = s.Do(t, "PATCH", recs+"/"+rec, `{"expected_revision":2,"values":{"pop":null}}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, map[string]any{"city": "Berlin"}, res.JSON["values"])
	assert.Equal(t, 204, s.Do(t, "DELETE", recs+"/"+rec+"?expected_revision=3", "").Code)
	assert.Equal(t, 204, s.Do(t, "DELETE", base+"/"+col+"?force=true", "").Code)
	assert.Equal(t, 404, s.Do(t, "GET", base+"/"+col, "").Code)
	require.Len(t, s.jobs.jobs(), 1, "the purge was started")

	// Another bot's path is not found before anything else.
	res = s.Do(t, "GET", "/api/bots/"+ids.At("bot", t0)+"/collections", "")
	assert.Equal(t, 404, res.Code)
}
