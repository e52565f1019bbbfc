package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// productsBody is a collection with a required indexed field, an indexed boolean and a list.
var productsBody = map[string]any{
	"name": "Products",
	"fields": []any{
		map[string]any{"name": "sku", "type": "string", "required": true, "indexed": true},
		map[string]any{"name": "price", "type": "number"},
		map[string]any{"name": "in_stock", "type": "boolean", "indexed": true},
		map[string]any{"name": "tags", "type": "string_list"},
	},
}

// collectionFixture is a bot with a collection holding one record.
type collectionFixture struct {
	bot, col, rec     string // paths
	colID, recID      string
	botToken          string // an API token of the bot
	otherBot          string // path of a second bot of the same account
	otherCol          string // path of a collection of the second bot
	otherAccountBot   string // path of another account's bot
	otherAccountCol   string // path of a collection of another account's bot
	otherAccountToken string
}

func newCollectionFixture(t *testing.T, s *server) collectionFixture {
	t.Helper()
	var f collectionFixture
	f.bot = "/api/bots/" + s.demo.BotID
	r := s.post(s.demo.Token, f.bot+"/collections", productsBody)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	f.colID = r.JSON(t)["id"].(string)
	f.col = f.bot + "/collections/" + f.colID
	r = s.post(s.demo.Token, f.col+"/records", map[string]any{"external_key": "sku-1", "values": map[string]any{"sku": "1", "price": 9.5, "in_stock": true}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	f.recID = r.JSON(t)["id"].(string)
	f.rec = f.col + "/records/" + f.recID
	f.botToken = s.post(s.demo.Token, f.bot+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)

	second := s.post(s.demo.Token, "/api/bots", map[string]any{"name": "Second"}).JSON(t)["id"].(string)
	f.otherBot = "/api/bots/" + second
	r = s.post(s.demo.Token, f.otherBot+"/collections", productsBody)
	require.Equal(t, http.StatusCreated, r.Status)
	f.otherCol = f.otherBot + "/collections/" + r.JSON(t)["id"].(string)

	other := s.newAccount("Other")
	f.otherAccountToken = other.Token
	f.otherAccountBot = "/api/bots/" + other.Bot
	r = s.post(other.Token, f.otherAccountBot+"/collections", productsBody)
	require.Equal(t, http.StatusCreated, r.Status)
	f.otherAccountCol = f.otherAccountBot + "/collections/" + r.JSON(t)["id"].(string)
	return f
}

// routeCall is one call of each collections route, with a body that succeeds.
type routeCall struct {
	name  string
	write bool
	req   req
}

func (f collectionFixture) calls() []routeCall {
	return []routeCall{
		{"list collections", false, req{Method: "GET", Path: f.bot + "/collections"}},
		{"create collection", true, req{Method: "POST", Path: f.bot + "/collections", Body: map[string]any{"name": "New", "fields": []any{map[string]any{"name": "x", "type": "string"}}}}},
		{"get collection", false, req{Method: "GET", Path: f.col}},
		{"update collection", true, req{Method: "PATCH", Path: f.col, Body: map[string]any{"expected_revision": 1, "name": "Products"}}},
		{"list records", false, req{Method: "GET", Path: f.col + "/records?filter[in_stock]=true"}},
		{"create record", true, req{Method: "POST", Path: f.col + "/records", Body: map[string]any{"values": map[string]any{"sku": "2"}}}},
		{"batch", true, req{Method: "POST", Path: f.col + "/records/batch", Body: map[string]any{"records": []any{map[string]any{"values": map[string]any{"sku": "3"}}}}}},
		{"get record", false, req{Method: "GET", Path: f.rec}},
		{"update record", true, req{Method: "PATCH", Path: f.rec, Body: map[string]any{"expected_revision": 1, "values": map[string]any{"price": 10}}}},
		{"delete record", true, req{Method: "DELETE", Path: f.rec + "?expected_revision=2"}},
		{"delete collection", true, req{Method: "DELETE", Path: f.col + "?expected_revision=1&force=true"}},
	}
}

// Every route works for the owner's PAT and for the bot's own API token.
func TestCollectionsEveryRouteSucceeds(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"pat", "bot token"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			s := start(t)
			f := newCollectionFixture(t, s)
			tok := s.demo.Token
			if kind == "bot token" {
				tok = f.botToken
			}
			for _, c := range f.calls() {
				c.req.Token = tok
				r := s.do(c.req)
				assert.Less(t, r.Status, 300, "%s: %d %s", c.name, r.Status, r.Body)
				if c.name == "delete record" || c.name == "delete collection" {
					assert.Equal(t, http.StatusNoContent, r.Status, c.name)
				}
			}
			assert.Equal(t, http.StatusNotFound, s.get(tok, f.col).Status)
		})
	}
}

func TestCollectionsLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := "/api/bots/" + s.demo.BotID
	tok := s.demo.Token

	r := s.post(tok, bot+"/collections", productsBody)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	c := r.JSON(t)
	col := bot + "/collections/" + c["id"].(string)
	assert.Equal(t, col, r.Header.Get("Location"))
	assert.Equal(t, float64(1), c["revision"])
	assert.Equal(t, float64(0), c["record_count"])
	assert.Equal(t, c, s.get(tok, col).JSON(t))

	// Records: create, read, filter, page.
	var ids []string
	for i := range 5 {
		r := s.post(tok, col+"/records", map[string]any{"external_key": fmt.Sprintf("sku-%d", i),
			"values": map[string]any{"sku": fmt.Sprint(i), "price": i, "in_stock": i%2 == 0, "tags": []string{"t"}}})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		assert.Equal(t, col+"/records/"+r.JSON(t)["id"].(string), r.Header.Get("Location"))
		ids = append(ids, r.JSON(t)["id"].(string))
	}
	rec := s.get(tok, col+"/records/"+ids[1]).JSON(t)
	assert.Equal(t, map[string]any{"sku": "1", "price": float64(1), "in_stock": false, "tags": []any{"t"}}, rec["values"])
	assert.Equal(t, "sku-1", rec["external_key"])
	assert.Equal(t, float64(5), s.get(tok, col).JSON(t)["record_count"])

	var listed []string
	path := col + "/records?limit=2"
	for {
		r := s.get(tok, path)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		for _, d := range r.JSON(t)["data"].([]any) {
			listed = append(listed, d.(map[string]any)["id"].(string))
		}
		next, _ := r.JSON(t)["next_cursor"].(string)
		if next == "" {
			break
		}
		path = col + "/records?limit=2&cursor=" + next
	}
	assert.Equal(t, ids, listed, "oldest first across pages")
	inStock := s.get(tok, col+"/records?filter[in_stock]=true&filter[sku]=2").JSON(t)["data"].([]any)
	require.Len(t, inStock, 1)
	assert.Equal(t, ids[2], inStock[0].(map[string]any)["id"])
	assert.Len(t, s.get(tok, col+"/records?filter[in_stock]=true").JSON(t)["data"], 3)
	// A + in a query string is a space: a datetime offset must be sent as %2B.
	assert.Len(t, s.get(tok, col+"/records?filter[sku]="+url.QueryEscape("a+b")).JSON(t)["data"], 0)

	// PATCH merges, null clears; the revision goes up; the index follows.
	r = s.patch(tok, col+"/records/"+ids[0], map[string]any{"expected_revision": 1, "values": map[string]any{"in_stock": false, "tags": nil}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, map[string]any{"sku": "0", "price": float64(0), "in_stock": false}, r.JSON(t)["values"])
	assert.Equal(t, float64(2), r.JSON(t)["revision"])
	assert.Len(t, s.get(tok, col+"/records?filter[in_stock]=true").JSON(t)["data"], 2)

	// Batch: update by key and by id, create by key and without.
	r = s.post(tok, col+"/records/batch", map[string]any{"records": []any{
		map[string]any{"external_key": "sku-3", "values": map[string]any{"price": 33}},
		map[string]any{"id": ids[4], "expected_revision": 1, "values": map[string]any{"in_stock": false}},
		map[string]any{"external_key": "sku-9", "values": map[string]any{"sku": "9", "in_stock": true}},
		map[string]any{"values": map[string]any{"sku": "10"}},
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	res := r.JSON(t)
	assert.Equal(t, []any{ids[3], ids[4]}, res["updated"])
	assert.Len(t, res["created"], 2)
	assert.Equal(t, float64(33), s.get(tok, col+"/records/"+ids[3]).JSON(t)["values"].(map[string]any)["price"])
	assert.Equal(t, float64(7), s.get(tok, col).JSON(t)["record_count"])

	// Schema change: add an optional indexed field, remove tags.
	r = s.patch(tok, col, map[string]any{"expected_revision": 1, "name": "Catalog", "fields": []any{
		map[string]any{"name": "sku"}, map[string]any{"name": "price"}, map[string]any{"name": "in_stock"},
		map[string]any{"name": "color", "type": "string", "indexed": true},
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, float64(2), r.JSON(t)["revision"])
	assert.NotContains(t, s.get(tok, col+"/records/"+ids[1]).JSON(t)["values"], "tags", "a removed field's values vanish")

	// Delete a record, then the collection with force.
	assert.Equal(t, http.StatusNoContent, s.del(tok, col+"/records/"+ids[1]+"?expected_revision=1").Status)
	assert.Equal(t, http.StatusNotFound, s.get(tok, col+"/records/"+ids[1]).Status)
	r = s.del(tok, col)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "collection_not_empty", r.Code(t))
	assert.Equal(t, float64(6), r.JSON(t)["record_count"])
	assert.Equal(t, http.StatusNoContent, s.del(tok, col+"?force=true").Status)
	assert.Equal(t, http.StatusNotFound, s.get(tok, col).Status)
	// The background purge runs in the local process: once it is done, the collection is
	// simply not found, for DELETE too (until then a DELETE answers 204 and restarts it).
	assert.Eventually(t, func() bool { return s.del(tok, col).Status == http.StatusNotFound }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, http.StatusNotFound, s.get(tok, col+"/records/"+ids[0]).Status)
	assert.Empty(t, s.get(tok, bot+"/collections").JSON(t)["data"])
	// The name is free again at once.
	assert.Equal(t, http.StatusCreated, s.post(tok, bot+"/collections", productsBody).Status)
}

func TestCollections400(t *testing.T) {
	t.Parallel()
	s := start(t)
	f := newCollectionFixture(t, s)
	cases := []struct {
		name, method, path string
		body               any
		code, field, param string
	}{
		{"create collection: unknown field", "POST", f.bot + "/collections", `{"name":"x","fields":[{"name":"a","type":"string"}],"colour":1}`, "unknown_field", "colour", ""},
		{"create collection: unknown nested field", "POST", f.bot + "/collections", `{"name":"x","fields":[{"name":"a","type":"string","unique":true}]}`, "unknown_field", "fields[0].unique", ""},
		{"create collection: invalid schema", "POST", f.bot + "/collections", `{"name":"x","fields":[{"name":"A","type":"int"}]}`, "validation_failed", "", ""},
		{"update collection: unknown field", "PATCH", f.col, `{"expected_revision":1,"title":"x"}`, "unknown_field", "title", ""},
		{"update collection: type change", "PATCH", f.col, `{"expected_revision":1,"fields":[{"name":"sku","type":"number"}]}`, "validation_failed", "", ""},
		{"update collection: no revision", "PATCH", f.col, `{"name":"x"}`, "validation_failed", "", ""},
		{"delete collection: bad force", "DELETE", f.col + "?force=1", nil, "invalid_parameter", "", "force"},
		{"delete collection: bad revision", "DELETE", f.col + "?expected_revision=-1", nil, "invalid_parameter", "", "expected_revision"},
		{"list records: not indexed", "GET", f.col + "/records?filter[price]=1", nil, "invalid_parameter", "", "filter[price]"},
		{"list records: no such field", "GET", f.col + "/records?filter[colour]=red", nil, "invalid_parameter", "", "filter[colour]"},
		{"list records: bad value", "GET", f.col + "/records?filter[in_stock]=yes", nil, "invalid_parameter", "", "filter[in_stock]"},
		{"list records: malformed filter", "GET", f.col + "/records?filter.sku=1", nil, "invalid_parameter", "", "filter.sku"},
		{"list records: bad limit", "GET", f.col + "/records?limit=0", nil, "invalid_parameter", "", "limit"},
		{"list records: bad cursor", "GET", f.col + "/records?cursor=abc", nil, "invalid_cursor", "", ""},
		{"list collections: bad limit", "GET", f.bot + "/collections?limit=201", nil, "invalid_parameter", "", "limit"},
		{"create record: unknown field", "POST", f.col + "/records", `{"values":{"sku":"1"},"value":{}}`, "unknown_field", "value", ""},
		{"create record: wrong value type", "POST", f.col + "/records", `{"values":{"sku":1}}`, "validation_failed", "", ""},
		{"create record: missing required", "POST", f.col + "/records", `{"values":{"price":1}}`, "validation_failed", "", ""},
		{"create record: value twice", "POST", f.col + "/records", `{"values":{"sku":"1","sku":"2"}}`, "duplicate_field", "values.sku", ""},
		{"batch: unknown field", "POST", f.col + "/records/batch", `{"records":[{"values":{"sku":"1"},"upsert":true}]}`, "unknown_field", "records[0].upsert", ""},
		{"batch: one bad entry", "POST", f.col + "/records/batch", `{"records":[{"values":{"sku":"1"}},{"values":{}}]}`, "validation_failed", "", ""},
		{"update record: unknown field", "PATCH", f.rec, `{"expected_revision":1,"value":{}}`, "unknown_field", "value", ""},
		{"update record: clear required", "PATCH", f.rec, `{"expected_revision":1,"values":{"sku":null}}`, "validation_failed", "", ""},
		{"delete record: bad revision", "DELETE", f.rec + "?expected_revision=x", nil, "invalid_parameter", "", "expected_revision"},
	}
	for _, c := range cases {
		r := s.do(req{Method: c.method, Path: c.path, Token: s.demo.Token, Body: c.body})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.name, r.Body)
		assert.Equal(t, c.code, r.Code(t), c.name)
		if c.field != "" {
			assert.Equal(t, c.field, r.JSON(t)["field"], c.name)
		}
		if c.param != "" {
			assert.Equal(t, c.param, r.JSON(t)["parameter"], c.name)
		}
	}
	// A 500-record batch with one bad entry writes nothing.
	var entries []any
	for i := range 500 {
		entries = append(entries, map[string]any{"values": map[string]any{"sku": fmt.Sprint(i)}})
	}
	entries[499] = map[string]any{"values": map[string]any{"sku": 499}}
	r := s.post(s.demo.Token, f.col+"/records/batch", map[string]any{"records": entries})
	require.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, "records[499].values.sku", r.JSON(t)["errors"].([]any)[0].(map[string]any)["field"])
	r = s.post(s.demo.Token, f.col+"/records/batch", map[string]any{"records": append(entries[:499], entries[0], entries[1])})
	require.Equal(t, http.StatusBadRequest, r.Status, "501 records")
	assert.Equal(t, float64(1), s.get(s.demo.Token, f.col).JSON(t)["record_count"])
}

func TestCollections403(t *testing.T) {
	t.Parallel()
	s := start(t)
	f := newCollectionFixture(t, s)
	otherScope := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:*,reactions:*")["token"]
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "collections:read")["token"]
	noRights := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "")["user_id"]
	noRightsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noRights, "--scopes", "*")["token"]
	for _, c := range f.calls() {
		c.req.Token = otherScope
		r := s.do(c.req)
		assert.Equal(t, http.StatusForbidden, r.Status, "%s without scope: %s", c.name, r.Body)
		assert.Equal(t, "insufficient_scope", r.Code(t), c.name)

		c.req.Token = readOnly
		r = s.do(c.req)
		if c.write {
			assert.Equal(t, http.StatusForbidden, r.Status, "%s with collections:read: %s", c.name, r.Body)
			assert.Equal(t, "collections:write", r.JSON(t)["required_scope"], c.name)
		} else {
			assert.Equal(t, http.StatusOK, r.Status, "%s with collections:read: %s", c.name, r.Body)
		}

		c.req.Token = noRightsTok
		r = s.do(c.req)
		if c.write {
			assert.Equal(t, http.StatusForbidden, r.Status, "%s without the right: %s", c.name, r.Body)
			assert.Equal(t, "missing_right", r.Code(t), c.name)
			assert.Equal(t, []any{"reactions"}, r.JSON(t)["missing_rights"], c.name)
		} else {
			assert.Equal(t, http.StatusOK, r.Status, "%s needs no right: %s", c.name, r.Body)
		}
	}
	// Nothing changed.
	assert.Equal(t, float64(1), s.get(s.demo.Token, f.rec).JSON(t)["revision"])
}

func TestCollections404(t *testing.T) {
	t.Parallel()
	s := start(t)
	f := newCollectionFixture(t, s)
	retarget := func(p, fromBot, toBot string) string { return strings.Replace(p, fromBot, toBot, 1) }
	for _, c := range f.calls() {
		// Another account's bot, with its own valid collection and my record id: 404.
		c1 := c.req
		c1.Token = s.demo.Token
		c1.Path = retarget(retarget(c.req.Path, f.col, f.otherAccountCol), f.bot, f.otherAccountBot)
		r := s.do(c1)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s on another account's bot: %s", c.name, r.Body)
		assert.Equal(t, "not_found", r.Code(t))

		// The bot's API token on a second bot of the same account: 404.
		c2 := c.req
		c2.Token = f.botToken
		c2.Path = retarget(retarget(c.req.Path, f.col, f.otherCol), f.bot, f.otherBot)
		r = s.do(c2)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s by a bot token on another bot: %s", c.name, r.Body)

		// My bot, but the second bot's collection id: 404, the collection is not this bot's.
		if strings.HasPrefix(c.req.Path, f.col) {
			c3 := c.req
			c3.Token = s.demo.Token
			c3.Path = strings.Replace(c.req.Path, f.col, f.bot+"/collections/"+f.otherCol[strings.LastIndex(f.otherCol, "/")+1:], 1)
			r = s.do(c3)
			assert.Equal(t, http.StatusNotFound, r.Status, "%s with another bot's collection: %s", c.name, r.Body)
		}
	}
	for _, p := range []string{
		f.bot + "/collections/col_00000000000000000000000000",
		f.bot + "/collections/nope",
		f.col + "/records/rec_00000000000000000000000000",
		f.col + "/records/" + f.colID,
	} {
		r := s.get(s.demo.Token, p)
		assert.Equal(t, http.StatusNotFound, r.Status, p)
		assert.Equal(t, "not_found", r.Code(t), p)
	}
	// The other account's data is untouched.
	assert.Len(t, s.get(f.otherAccountToken, f.otherAccountCol+"/records").JSON(t)["data"], 0)
	assert.Equal(t, "Products", s.get(f.otherAccountToken, f.otherAccountCol).JSON(t)["name"])
}

func TestCollections409(t *testing.T) {
	t.Parallel()
	s := start(t)
	f := newCollectionFixture(t, s)
	tok := s.demo.Token
	conflict := func(r resp, code, what string) map[string]any {
		t.Helper()
		require.Equal(t, http.StatusConflict, r.Status, "%s: %s", what, r.Body)
		assert.Equal(t, code, r.Code(t), what)
		return r.JSON(t)
	}
	body := conflict(s.patch(tok, f.col, map[string]any{"expected_revision": 2, "name": "x"}), "stale_revision", "stale collection patch")
	assert.Equal(t, float64(1), body["current_revision"])
	conflict(s.del(tok, f.col+"?expected_revision=2&force=true"), "stale_revision", "stale collection delete")
	body = conflict(s.patch(tok, f.rec, map[string]any{"expected_revision": 2, "values": map[string]any{"price": 1}}), "stale_revision", "stale record patch")
	assert.Equal(t, float64(1), body["current_revision"])
	conflict(s.del(tok, f.rec+"?expected_revision=3"), "stale_revision", "stale record delete")
	body = conflict(s.post(tok, f.col+"/records/batch", map[string]any{"records": []any{
		map[string]any{"values": map[string]any{"sku": "new"}},
		map[string]any{"id": f.recID, "expected_revision": 5, "values": map[string]any{"price": 1}},
	}}), "stale_revision", "stale batch entry")
	assert.Equal(t, float64(1), body["index"])

	conflict(s.post(tok, f.bot+"/collections", map[string]any{"name": "PRODUCTS", "fields": []any{map[string]any{"name": "x", "type": "string"}}}), "name_taken", "duplicate name")
	body = conflict(s.post(tok, f.col+"/records", map[string]any{"external_key": "sku-1", "values": map[string]any{"sku": "x"}}), "duplicate_external_key", "duplicate key")
	assert.Equal(t, f.recID, body["record_id"])
	body = conflict(s.del(tok, f.col), "collection_not_empty", "delete with records")
	assert.Equal(t, float64(1), body["record_count"])

	// Two writers with the same revision: one wins.
	const n = 6
	statuses := make(chan int, n)
	for i := range n {
		go func() {
			statuses <- s.patch(tok, f.rec, map[string]any{"expected_revision": 1, "values": map[string]any{"price": i}}).Status
		}()
	}
	count := map[int]int{}
	for range n {
		count[<-statuses]++
	}
	assert.Equal(t, map[int]int{http.StatusOK: 1, http.StatusConflict: n - 1}, count)

	// At most 50 collections per bot.
	for i := 1; i < 50; i++ {
		require.Equal(t, http.StatusCreated, s.post(tok, f.bot+"/collections", map[string]any{"name": fmt.Sprintf("c%d", i), "fields": []any{map[string]any{"name": "x", "type": "string"}}}).Status)
	}
	conflict(s.post(tok, f.bot+"/collections", map[string]any{"name": "c50", "fields": []any{map[string]any{"name": "x", "type": "string"}}}), "limit_reached", "51st collection")
}

func TestCollections413And415(t *testing.T) {
	t.Parallel()
	s := start(t)
	f := newCollectionFixture(t, s)
	big := `{"records":[{"values":{"sku":"` + strings.Repeat("a", 1<<20) + `"}}]}`
	r := s.post(s.demo.Token, f.col+"/records/batch", big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
	assert.Equal(t, "body_too_large", r.Code(t))
	r = s.do(req{Method: "POST", Path: f.col + "/records", Token: s.demo.Token, Body: `values=x`, Headers: map[string]string{"Content-Type": "text/plain"}})
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status)
	assert.Equal(t, "unsupported_media_type", r.Code(t))
	r = s.do(req{Method: "PUT", Path: f.col, Token: s.demo.Token})
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
}

// A full batch of 500 records over HTTP, then the same batch again: all created, then all
// updated, every one findable by its indexed value.
func TestCollectionsBatchOf500(t *testing.T) {
	t.Parallel()
	s := start(t)
	f := newCollectionFixture(t, s)
	var entries []any
	for i := range 500 {
		entries = append(entries, map[string]any{"external_key": fmt.Sprintf("k%d", i), "values": map[string]any{"sku": fmt.Sprint(i), "in_stock": true}})
	}
	r := s.post(s.demo.Token, f.col+"/records/batch", map[string]any{"records": entries})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["created"], 500)
	assert.Equal(t, float64(501), s.get(s.demo.Token, f.col).JSON(t)["record_count"])
	for _, e := range entries {
		e.(map[string]any)["values"] = map[string]any{"in_stock": false}
	}
	r = s.post(s.demo.Token, f.col+"/records/batch", map[string]any{"records": entries})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["updated"], 500)
	assert.Len(t, s.get(s.demo.Token, f.col+"/records?filter[in_stock]=true&limit=200").JSON(t)["data"], 1)
	page := s.get(s.demo.Token, f.col+"/records?filter[in_stock]=false&limit=200").JSON(t)
	assert.Len(t, page["data"], 200)
	assert.NotNil(t, page["next_cursor"])
	one := s.get(s.demo.Token, f.col+"/records?filter[sku]=499").JSON(t)["data"].([]any)
	require.Len(t, one, 1)
	assert.Equal(t, "k499", one[0].(map[string]any)["external_key"])
}
