package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reactionRoute is one reaction route with a body good enough to pass the access checks.
type reactionRoute struct {
	method, path string
	body         any
	write        bool
}

func reactionRoutes(bot, reaction string) []reactionRoute {
	base := "/api/bots/" + bot + "/reactions"
	one := base + "/" + reaction
	return []reactionRoute{
		{"GET", base, nil, false},
		{"POST", base, map[string]any{"name": "Access probe", "trigger": map[string]any{"type": "api"}}, true},
		{"GET", base + "/export", nil, false},
		{"POST", base + "/import", map[string]any{"mode": "dry_run", "bundle": map[string]any{"format_version": 1}}, true},
		{"GET", one, nil, false},
		{"PATCH", one, map[string]any{"expected_revision": 1}, true},
		{"DELETE", one, nil, true},
		{"POST", one + "/publish", map[string]any{"expected_revision": 1}, true},
		{"GET", one + "/versions", nil, false},
		{"GET", one + "/versions/1", nil, false},
	}
}

// createReaction creates a reaction and returns its JSON.
func createReaction(t *testing.T, s *server, token, bot string, body any) map[string]any {
	t.Helper()
	r := s.post(token, "/api/bots/"+bot+"/reactions", body)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	return r.JSON(t)
}

func TestReactionsLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := s.demo.Token
	base := "/api/bots/" + s.demo.BotID + "/reactions"
	vip := s.post(tok, "/api/bots/"+s.demo.BotID+"/labels", map[string]any{"name": "VIP"})
	require.Equal(t, http.StatusCreated, vip.Status, "%s", vip.Body)
	vipID := vip.JSON(t)["id"].(string)
	plan := s.post(tok, "/api/bots/"+s.demo.BotID+"/fields", map[string]any{"name": "plan", "type": "string"})
	require.Equal(t, http.StatusCreated, plan.Status, "%s", plan.Body)
	planID := plan.JSON(t)["id"].(string)

	// 201 with every kind of reference.
	r := s.post(tok, base, map[string]any{
		"name":    "Welcome",
		"trigger": map[string]any{"type": "start"},
		"steps": []any{
			map[string]any{"id": "hi", "type": "send_text", "text": "Hi!"},
			map[string]any{"id": "tag", "type": "add_label", "label_id": vipID},
			map[string]any{"id": "set", "type": "set_field", "field_id": planID, "value": "free"},
			map[string]any{"id": "menu", "type": "buttons", "text": "Pick", "buttons": []any{
				map[string]any{"title": "Again", "step_id": "menu"}, map[string]any{"title": "Buy", "payload": "BUY"}}},
		},
	})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	created := r.JSON(t)
	id := created["id"].(string)
	assert.Regexp(t, `^rct_[0-9a-z]{26}$`, id)
	assert.Equal(t, base+"/"+id, r.Header.Get("Location"))
	assert.Equal(t, float64(1), created["revision"])
	assert.Nil(t, created["published_version"])
	assert.Equal(t, "inline", created["steps"].([]any)[3].(map[string]any)["style"], "defaults are filled in")

	got := s.get(tok, base+"/"+id)
	require.Equal(t, http.StatusOK, got.Status)
	assert.Equal(t, created, got.JSON(t))

	// The list leaves the steps out.
	list := s.get(tok, base+"?trigger_type=start").JSON(t)
	require.Len(t, list["data"], 1)
	assert.Equal(t, float64(4), list["data"].([]any)[0].(map[string]any)["step_count"])
	assert.NotContains(t, list["data"].([]any)[0], "steps")
	assert.Empty(t, s.get(tok, base+"?published=true").JSON(t)["data"])

	// 422: the flow cannot run; every flaw with its path.
	r = s.patch(tok, base+"/"+id, map[string]any{"expected_revision": 1, "steps": []any{
		map[string]any{"id": "a", "type": "send_text", "text": "x"},
		map[string]any{"id": "b", "type": "goto", "step_id": "a"},
		map[string]any{"id": "c", "type": "condition", "conditions": []any{map[string]any{"label_id": "lbl_00000000000000000000000000", "op": "has"}}, "then": "zz", "else": "a"},
		map[string]any{"id": "d", "type": "set_field", "field_id": planID, "value": 42},
		map[string]any{"id": "e", "type": "teleport"},
	}})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	assert.Equal(t, "invalid_steps", r.Code(t))
	var paths []string
	for _, e := range r.JSON(t)["errors"].([]any) {
		paths = append(paths, e.(map[string]any)["field"].(string))
	}
	assert.Equal(t, []string{"steps[1].step_id", "steps[2].conditions[0].label_id", "steps[2].then", "steps[3].value", "steps[4].type"}, paths)

	// 200: the patch replaces the steps; the trigger is kept.
	r = s.patch(tok, base+"/"+id, map[string]any{"expected_revision": 1, "steps": []any{
		map[string]any{"id": "hi", "type": "send_text", "text": "Hello!"},
		map[string]any{"id": "w", "type": "wait", "seconds": 60},
		map[string]any{"id": "again", "type": "goto", "step_id": "hi"},
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, float64(2), r.JSON(t)["revision"])
	assert.Equal(t, "start", r.JSON(t)["trigger"].(map[string]any)["type"])

	// 409: stale revisions on every revisioned mutation.
	for _, rr := range []req{
		{Method: "PATCH", Path: base + "/" + id, Body: map[string]any{"expected_revision": 1, "name": "Late"}},
		{Method: "POST", Path: base + "/" + id + "/publish", Body: map[string]any{"expected_revision": 1}},
		{Method: "DELETE", Path: base + "/" + id + "?expected_revision=1"},
	} {
		rr.Token = tok
		r = s.do(rr)
		assert.Equal(t, http.StatusConflict, r.Status, "%s %s", rr.Method, r.Body)
		assert.Equal(t, "stale_revision", r.Code(t))
		assert.Equal(t, float64(2), r.JSON(t)["current_revision"])
	}

	// Publish: version 1; again without changes: nothing new.
	r = s.post(tok, base+"/"+id+"/publish", map[string]any{"expected_revision": 2})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, float64(1), r.JSON(t)["published_version"])
	assert.Equal(t, float64(3), r.JSON(t)["revision"])
	assert.Equal(t, false, r.JSON(t)["has_unpublished_changes"])
	r = s.post(tok, base+"/"+id+"/publish", map[string]any{"expected_revision": 3})
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, float64(1), r.JSON(t)["published_version"])

	// Edit and publish again: version 2; version 1 stays as it was.
	r = s.patch(tok, base+"/"+id, map[string]any{"expected_revision": 3, "name": "Greeting"})
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, http.StatusOK, s.post(tok, base+"/"+id+"/publish", map[string]any{"expected_revision": 4}).Status)
	versions := s.get(tok, base+"/"+id+"/versions").JSON(t)["data"].([]any)
	require.Len(t, versions, 2)
	assert.Equal(t, float64(2), versions[0].(map[string]any)["version"], "newest first")
	v1 := s.get(tok, base+"/"+id+"/versions/1").JSON(t)
	assert.Equal(t, "Welcome", v1["name"])
	assert.Equal(t, float64(2), v1["draft_revision"])
	assert.Equal(t, "Greeting", s.get(tok, base+"/"+id+"/versions/2").JSON(t)["name"])
	assert.Equal(t, http.StatusNotFound, s.get(tok, base+"/"+id+"/versions/3").Status)

	// 409: names are unique ignoring case; a reaction others go to stays.
	r = s.post(tok, base, map[string]any{"name": "GREETING", "trigger": map[string]any{"type": "api"}})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "name_taken", r.Code(t))
	assert.Equal(t, id, r.JSON(t)["conflicting_id"])
	from := createReaction(t, s, tok, s.demo.BotID, map[string]any{"name": "Shortcut", "trigger": map[string]any{"type": "keyword", "keywords": []string{"hello"}},
		"steps": []any{map[string]any{"id": "go", "type": "goto", "reaction_id": id}}})
	r = s.del(tok, base+"/"+id)
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "reaction_in_use", r.Code(t))
	assert.Equal(t, []any{from["id"]}, r.JSON(t)["referenced_by"])

	// Export and a dry-run import of it into the same bot: every name is taken.
	r = s.get(tok, base+"/export")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	bundle := r.JSON(t)
	assert.Len(t, bundle["reactions"], 2)
	r = s.post(tok, base+"/import", map[string]any{"mode": "dry_run", "bundle": bundle})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, false, r.JSON(t)["applied"])
	assert.Len(t, r.JSON(t)["conflicts"], 2)
	r = s.post(tok, base+"/import", map[string]any{"mode": "create", "bundle": bundle})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "import_conflict", r.Code(t))
	assert.Len(t, s.get(tok, base).JSON(t)["data"], 2, "a refused import writes nothing")

	// 204: delete the referrer, then the target; then everything of it is gone.
	assert.Equal(t, http.StatusNoContent, s.del(tok, base+"/"+from["id"].(string)).Status)
	assert.Equal(t, http.StatusNoContent, s.del(tok, base+"/"+id+"?expected_revision=5").Status)
	for _, p := range []string{base + "/" + id, base + "/" + id + "/versions", base + "/" + id + "/versions/1"} {
		assert.Equal(t, http.StatusNotFound, s.get(tok, p).Status, p)
	}
	assert.Equal(t, http.StatusNotFound, s.del(tok, base+"/"+id).Status)
}

func TestReactionsBadRequests400(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := s.demo.Token
	base := "/api/bots/" + s.demo.BotID + "/reactions"
	id := createReaction(t, s, tok, s.demo.BotID, map[string]any{"name": "R", "trigger": map[string]any{"type": "api"}})["id"].(string)
	many := make([]any, 50)
	for i := range many {
		many[i] = map[string]any{"key": fmt.Sprintf("k%d", i), "draft": map[string]any{"name": fmt.Sprintf("R%d", i), "trigger": map[string]any{"type": "api"}}}
	}
	cases := []struct {
		name, method, path string
		body               any
		code, field        string
	}{
		{"create: unknown field", "POST", base, `{"name":"x","trigger":{"type":"api"},"colour":"red"}`, "unknown_field", "colour"},
		{"create: unknown step field", "POST", base, `{"name":"x","trigger":{"type":"api"},"steps":[{"id":"a","type":"end","next":"b"}]}`, "unknown_field", "steps[0].next"},
		{"create: unknown trigger field", "POST", base, `{"name":"x","trigger":{"type":"api","when":"now"}}`, "unknown_field", "trigger.when"},
		{"create: duplicate field", "POST", base, `{"name":"x","name":"y","trigger":{"type":"api"}}`, "duplicate_field", "name"},
		{"create: wrong type", "POST", base, `{"name":["x"],"trigger":{"type":"api"}}`, "invalid_body", "name"},
		{"create: missing name", "POST", base, `{"trigger":{"type":"api"}}`, "validation_failed", ""},
		{"create: field of another step type", "POST", base, `{"name":"x","trigger":{"type":"api"},"steps":[{"id":"a","type":"end","text":"bye"}]}`, "validation_failed", ""},
		{"create: too many buttons", "POST", base, `{"name":"x","trigger":{"type":"api"},"steps":[{"id":"a","type":"buttons","text":"t","buttons":[` + strings.TrimSuffix(strings.Repeat(`{"title":"b","payload":"P"},`, 11), ",") + `]}]}`, "validation_failed", ""},
		{"patch: unknown field", "PATCH", base + "/" + id, `{"expected_revision":1,"revision":2}`, "unknown_field", "revision"},
		{"patch: missing expected_revision", "PATCH", base + "/" + id, `{"name":"x"}`, "validation_failed", ""},
		{"publish: unknown field", "POST", base + "/" + id + "/publish", `{"expected_revision":1,"version":2}`, "unknown_field", "version"},
		{"publish: missing expected_revision", "POST", base + "/" + id + "/publish", `{}`, "validation_failed", ""},
		{"import: unknown field", "POST", base + "/import", `{"mode":"dry_run","bundle":{"format_version":1},"force":true}`, "unknown_field", "force"},
		{"import: unknown bundle field", "POST", base + "/import", `{"mode":"dry_run","bundle":{"format_version":1,"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"}},"id":"x"}]}}`, "unknown_field", "bundle.reactions[0].id"},
		{"import: bad mode", "POST", base + "/import", `{"mode":"merge","bundle":{"format_version":1}}`, "validation_failed", ""},
		{"import: format version", "POST", base + "/import", `{"mode":"dry_run","bundle":{"format_version":2}}`, "validation_failed", ""},
		{"import: too many reactions", "POST", base + "/import", map[string]any{"mode": "dry_run", "bundle": map[string]any{"format_version": 1, "reactions": many}}, "validation_failed", ""},
		{"list: bad limit", "GET", base + "?limit=0", nil, "invalid_parameter", ""},
		{"list: bad trigger filter", "GET", base + "?trigger_type=sms", nil, "invalid_parameter", ""},
		{"list: bad cursor", "GET", base + "?cursor=abc", nil, "invalid_cursor", ""},
		{"versions: bad cursor", "GET", base + "/" + id + "/versions?cursor=abc", nil, "invalid_cursor", ""},
		{"export: bad reaction id", "GET", base + "/export?reaction_id=rct_x", nil, "invalid_parameter", ""},
		{"delete: bad revision", "DELETE", base + "/" + id + "?expected_revision=-1", nil, "invalid_parameter", ""},
	}
	for _, c := range cases {
		r := s.do(req{Method: c.method, Path: c.path, Token: tok, Body: c.body})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.name, r.Body)
		assert.Equal(t, c.code, r.Code(t), c.name)
		if c.field != "" {
			assert.Equal(t, c.field, r.JSON(t)["field"], c.name)
		}
		if c.code == "validation_failed" {
			assert.NotEmpty(t, r.JSON(t)["errors"], c.name)
		}
	}
	// 413 and 415 come from the kernel, as on every route with a body.
	r := s.post(tok, base, `{"name":"`+strings.Repeat("a", 1<<20)+`"}`)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
	r = s.do(req{Method: "POST", Path: base + "/import", Token: tok, Body: `mode=create`, Headers: map[string]string{"Content-Type": "text/plain"}})
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status)
	// Nothing was created by any of them.
	assert.Len(t, s.get(tok, base).JSON(t)["data"], 1)
}

// 403 without the scope, 403 without the right (writes only), 404 for other accounts and
// other bots, and a bot token on its own bot reaches every route.
func TestReactionsAccess(t *testing.T) {
	t.Parallel()
	s := start(t)
	acct := s.demo.AccountID
	bot := s.demo.BotID
	id := createReaction(t, s, s.demo.Token, bot, map[string]any{"name": "Mine", "trigger": map[string]any{"type": "api"},
		"steps": []any{map[string]any{"id": "a", "type": "end"}}})["id"].(string)
	require.Equal(t, http.StatusOK, s.post(s.demo.Token, "/api/bots/"+bot+"/reactions/"+id+"/publish", map[string]any{"expected_revision": 1}).Status)
	otherScope := s.admin("pat", "create", "--account", acct, "--scopes", "bots:read,subscribers:read")["token"]
	readOnly := s.admin("pat", "create", "--account", acct, "--scopes", "reactions:read")["token"]
	writeOnly := s.admin("pat", "create", "--account", acct, "--scopes", "reactions:write")["token"]
	noRights := s.admin("user", "create", "--account", acct, "--rights", "")["user_id"]
	noRightsTok := s.admin("pat", "create", "--account", acct, "--user", noRights, "--scopes", "reactions:*")["token"]
	secondBot := s.post(s.demo.Token, "/api/bots", map[string]any{"name": "Second"}).JSON(t)["id"].(string)
	secondID := createReaction(t, s, s.demo.Token, secondBot, map[string]any{"name": "Theirs", "trigger": map[string]any{"type": "api"}})["id"].(string)
	botTok := s.post(s.demo.Token, "/api/bots/"+bot+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)
	other := s.newAccount("Other")
	otherID := createReaction(t, s, other.Token, other.Bot, map[string]any{"name": "Foreign", "trigger": map[string]any{"type": "api"}})["id"].(string)

	for _, rt := range reactionRoutes(bot, id) {
		name := rt.method + " " + rt.path
		// Without the scope.
		r := s.do(req{Method: rt.method, Path: rt.path, Token: otherScope, Body: rt.body})
		assert.Equal(t, http.StatusForbidden, r.Status, "no scope: %s: %s", name, r.Body)
		assert.Equal(t, "insufficient_scope", r.Code(t), name)
		// Write does not imply read, nor read write.
		wrong := writeOnly
		if rt.write {
			wrong = readOnly
		}
		r = s.do(req{Method: rt.method, Path: rt.path, Token: wrong, Body: rt.body})
		assert.Equal(t, http.StatusForbidden, r.Status, "wrong scope: %s", name)
		// Without the reactions right: writes refused, reads allowed.
		r = s.do(req{Method: rt.method, Path: rt.path, Token: noRightsTok, Body: rt.body})
		if rt.write {
			assert.Equal(t, http.StatusForbidden, r.Status, "no right: %s: %s", name, r.Body)
			assert.Equal(t, "missing_right", r.Code(t), name)
			assert.Equal(t, []any{"reactions"}, r.JSON(t)["missing_rights"], name)
		} else {
			assert.Less(t, r.Status, 300, "a read needs no right: %s: %s", name, r.Body)
		}
	}
	// 404: another account's bot and reaction, with a token of this account, and the reverse.
	for _, rt := range reactionRoutes(other.Bot, otherID) {
		r := s.do(req{Method: rt.method, Path: rt.path, Token: s.demo.Token, Body: rt.body})
		assert.Equal(t, http.StatusNotFound, r.Status, "other account: %s %s", rt.method, rt.path)
		assert.Equal(t, "not_found", r.Code(t))
		r = s.do(req{Method: rt.method, Path: rt.path, Token: botTok, Body: rt.body})
		assert.Equal(t, http.StatusNotFound, r.Status, "bot token, other account: %s %s", rt.method, rt.path)
	}
	// 404: the bot token of the demo bot on the second bot of the same account.
	for _, rt := range reactionRoutes(secondBot, secondID) {
		r := s.do(req{Method: rt.method, Path: rt.path, Token: botTok, Body: rt.body})
		assert.Equal(t, http.StatusNotFound, r.Status, "bot token, other bot: %s %s: %s", rt.method, rt.path, r.Body)
	}
	// 404: a reaction of one bot under another bot's path, even for the account's owner.
	for _, rt := range reactionRoutes(bot, secondID)[4:] {
		r := s.do(req{Method: rt.method, Path: rt.path, Token: s.demo.Token, Body: rt.body})
		assert.Equal(t, http.StatusNotFound, r.Status, "reaction of another bot: %s %s", rt.method, rt.path)
	}
	assert.Equal(t, "Theirs", s.get(s.demo.Token, "/api/bots/"+secondBot+"/reactions/"+secondID).JSON(t)["name"], "untouched")
	assert.Equal(t, "Foreign", s.get(other.Token, "/api/bots/"+other.Bot+"/reactions/"+otherID).JSON(t)["name"], "untouched")

	// The bot token reaches every route of its own bot.
	base := "/api/bots/" + bot + "/reactions"
	steps := []any{map[string]any{"id": "a", "type": "send_text", "text": "by the bot"}}
	r := s.post(botTok, base, map[string]any{"name": "By token", "trigger": map[string]any{"type": "api"}, "steps": steps})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	mine := r.JSON(t)["id"].(string)
	for _, c := range []struct {
		req    req
		status int
	}{
		{req{Method: "GET", Path: base}, 200},
		{req{Method: "GET", Path: base + "/" + mine}, 200},
		{req{Method: "PATCH", Path: base + "/" + mine, Body: map[string]any{"expected_revision": 1, "name": "By bot token"}}, 200},
		{req{Method: "POST", Path: base + "/" + mine + "/publish", Body: map[string]any{"expected_revision": 2}}, 200},
		{req{Method: "GET", Path: base + "/" + mine + "/versions"}, 200},
		{req{Method: "GET", Path: base + "/" + mine + "/versions/1"}, 200},
		{req{Method: "GET", Path: base + "/export"}, 200},
		{req{Method: "POST", Path: base + "/import", Body: map[string]any{"mode": "dry_run", "bundle": map[string]any{"format_version": 1}}}, 200},
		{req{Method: "DELETE", Path: base + "/" + mine}, 204},
	} {
		c.req.Token = botTok
		r := s.do(c.req)
		assert.Equal(t, c.status, r.Status, "bot token: %s %s: %s", c.req.Method, c.req.Path, r.Body)
	}
}

// canonicalBundle renames a bundle's keys by position, so that two bundles compare "up to ids".
func canonicalBundle(t *testing.T, b map[string]any) string {
	t.Helper()
	rename := map[string]string{}
	for _, list := range []struct{ name, prefix string }{{"reactions", "r"}, {"labels", "l"}, {"fields", "f"}} {
		for i, it := range b[list.name].([]any) {
			m := it.(map[string]any)
			rename[m["key"].(string)] = fmt.Sprintf("%s%d", list.prefix, i)
		}
	}
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, val := range x {
				if s, ok := val.(string); ok && (k == "key" || k == "label_id" || k == "field_id" || k == "reaction_id") {
					if n, ok := rename[s]; ok {
						val = n
					} else {
						t.Errorf("%s %q refers to nothing in the bundle", k, s)
					}
				}
				out[k] = walk(val)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i := range x {
				out[i] = walk(x[i])
			}
			return out
		}
		return v
	}
	js, err := json.MarshalIndent(walk(b), "", " ")
	require.NoError(t, err)
	return string(js)
}

// An export imported into an empty bot (of another account) and exported again gives the
// same bundle up to ids.
func TestReactionsExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/reactions"
	label := func(name string) string {
		r := s.post(tok, "/api/bots/"+bot+"/labels", map[string]any{"name": name})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		return r.JSON(t)["id"].(string)
	}
	field := func(name, typ string) string {
		r := s.post(tok, "/api/bots/"+bot+"/fields", map[string]any{"name": name, "type": typ})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		return r.JSON(t)["id"].(string)
	}
	vip, lead := label("VIP"), label("Lead")
	label("Unused")
	plan, score, seen := field("plan", "string"), field("score", "number"), field("last_seen", "datetime")

	answer := createReaction(t, s, tok, bot, map[string]any{"name": "Answer", "trigger": map[string]any{"type": "button", "payload": "ANSWER"},
		"steps": []any{
			map[string]any{"id": "t", "type": "send_text", "text": "Here you go"},
			map[string]any{"id": "doc", "type": "send_media", "media_type": "document", "url": "https://example.com/price.pdf", "caption": "Prices"},
		}})["id"].(string)
	require.Equal(t, http.StatusOK, s.post(tok, base+"/"+answer+"/publish", map[string]any{"expected_revision": 1}).Status)

	welcome := createReaction(t, s, tok, bot, map[string]any{"name": "Welcome", "trigger": map[string]any{"type": "start"},
		"steps": []any{
			map[string]any{"id": "hi", "type": "send_text", "text": "Hi!"},
			map[string]any{"id": "tag", "type": "add_label", "label_id": lead},
			map[string]any{"id": "when", "type": "set_field", "field_id": seen, "value": "2026-03-01T10:00:00Z"},
			map[string]any{"id": "tpl", "type": "send_template", "template_name": "welcome_back", "template_language": "en",
				"params": []any{map[string]any{"field_id": plan, "default": "free"}, map[string]any{"text": "today"}}, "fallback_text": "Welcome back!"},
			map[string]any{"id": "check", "type": "condition", "match": "any", "conditions": []any{
				map[string]any{"field_id": score, "op": "gte", "value": 50},
				map[string]any{"label_id": vip, "op": "has"}}, "then": "vip", "else": "menu"},
			map[string]any{"id": "vip", "type": "set_field", "field_id": plan, "value": "gold"},
			map[string]any{"id": "menu", "type": "buttons", "style": "quick_replies", "text": "What now?", "buttons": []any{
				map[string]any{"title": "Prices", "payload": "ANSWER"}, map[string]any{"title": "Menu", "step_id": "menu"}}},
		}})
	wid := welcome["id"].(string)
	require.Equal(t, http.StatusOK, s.post(tok, base+"/"+wid+"/publish", map[string]any{"expected_revision": 1}).Status)
	// A later draft that differs from the published version.
	r := s.patch(tok, base+"/"+wid, map[string]any{"expected_revision": 2, "steps": []any{
		map[string]any{"id": "hi", "type": "send_text", "text": "Hello again"},
		map[string]any{"id": "pause", "type": "wait", "seconds": 3600},
		map[string]any{"id": "go", "type": "goto", "reaction_id": answer},
	}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	createReaction(t, s, tok, bot, map[string]any{"name": "Tagged", "trigger": map[string]any{"type": "label_added", "label_id": vip},
		"steps": []any{map[string]any{"id": "x", "type": "remove_label", "label_id": lead}, map[string]any{"id": "y", "type": "clear_field", "field_id": plan}}})

	r = s.get(tok, base+"/export")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	exported := r.JSON(t)
	require.Len(t, exported["reactions"], 3)
	require.Len(t, exported["labels"], 2, "only the labels the reactions use")
	require.Len(t, exported["fields"], 3)

	other := s.newAccount("Elsewhere")
	obase := "/api/bots/" + other.Bot + "/reactions"
	r = s.post(other.Token, obase+"/import", map[string]any{"mode": "dry_run", "bundle": exported})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Empty(t, r.JSON(t)["conflicts"])
	assert.Empty(t, s.get(other.Token, obase).JSON(t)["data"], "a dry run writes nothing")
	assert.Empty(t, s.get(other.Token, "/api/bots/"+other.Bot+"/labels").JSON(t)["data"], "nor labels")

	r = s.post(other.Token, obase+"/import", map[string]any{"mode": "create", "bundle": exported})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	rep := r.JSON(t)
	assert.Equal(t, true, rep["applied"])
	for _, it := range rep["reactions"].([]any) {
		assert.Equal(t, "create", it.(map[string]any)["action"])
	}

	r = s.get(other.Token, obase+"/export")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	again := r.JSON(t)
	assert.Equal(t, canonicalBundle(t, exported), canonicalBundle(t, again))
	assert.NotEqual(t, exported["reactions"].([]any)[0].(map[string]any)["key"], again["reactions"].([]any)[0].(map[string]any)["key"], "new ids")

	// The imported reactions are live reactions of the new bot.
	list := s.get(other.Token, obase).JSON(t)["data"].([]any)
	require.Len(t, list, 3)
	assert.Equal(t, float64(1), list[0].(map[string]any)["published_version"])
	assert.Equal(t, true, list[1].(map[string]any)["has_unpublished_changes"])
	assert.Nil(t, list[2].(map[string]any)["published_version"])

	// Importing again in create mode conflicts on every name; replace replaces in place.
	r = s.post(other.Token, obase+"/import", map[string]any{"mode": "create", "bundle": exported})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Len(t, r.JSON(t)["conflicts"], 3)
	r = s.post(other.Token, obase+"/import", map[string]any{"mode": "replace", "bundle": exported})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	for i, it := range r.JSON(t)["reactions"].([]any) {
		assert.Equal(t, "replace", it.(map[string]any)["action"])
		assert.Equal(t, list[i].(map[string]any)["id"], it.(map[string]any)["reaction_id"])
	}
	assert.Len(t, s.get(other.Token, obase).JSON(t)["data"], 3)

	// A field of the same name and another type is a conflict in every mode.
	third := s.newAccount("Third")
	require.Equal(t, http.StatusCreated, s.post(third.Token, "/api/bots/"+third.Bot+"/fields", map[string]any{"name": "score", "type": "string"}).Status)
	r = s.post(third.Token, "/api/bots/"+third.Bot+"/reactions/import", map[string]any{"mode": "replace", "bundle": exported})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "import_conflict", r.Code(t))
	assert.Equal(t, "field_type", r.JSON(t)["conflicts"].([]any)[0].(map[string]any)["kind"])
	assert.Empty(t, s.get(third.Token, "/api/bots/"+third.Bot+"/reactions").JSON(t)["data"])
}

// A label deleted in the subscribers family while a reaction uses it: the reaction's next
// publish is 422 and the export 409 dangling_references, both naming where.
func TestReactionsDanglingLabel(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/reactions"
	r := s.post(tok, "/api/bots/"+bot+"/labels", map[string]any{"name": "Temporary"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	label := r.JSON(t)["id"].(string)
	id := createReaction(t, s, tok, bot, map[string]any{"name": "Tagger", "trigger": map[string]any{"type": "api"},
		"steps": []any{map[string]any{"id": "a", "type": "add_label", "label_id": label}}})["id"].(string)
	require.Equal(t, http.StatusNoContent, s.del(tok, "/api/bots/"+bot+"/labels/"+label).Status)

	r = s.post(tok, base+"/"+id+"/publish", map[string]any{"expected_revision": 1})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	assert.Equal(t, "invalid_steps", r.Code(t))
	assert.Equal(t, "steps[0].label_id", r.JSON(t)["errors"].([]any)[0].(map[string]any)["field"])

	r = s.get(tok, base+"/export")
	assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	assert.Equal(t, "dangling_references", r.Code(t))
	assert.Equal(t, "reactions[0].draft.steps[0].label_id", r.JSON(t)["errors"].([]any)[0].(map[string]any)["field"])

	// Fixing the draft makes both work again.
	r = s.patch(tok, base+"/"+id, map[string]any{"expected_revision": 1, "steps": []any{map[string]any{"id": "a", "type": "end"}}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, http.StatusOK, s.post(tok, base+"/"+id+"/publish", map[string]any{"expected_revision": 2}).Status)
	assert.Equal(t, http.StatusOK, s.get(tok, base+"/export").Status)
}
