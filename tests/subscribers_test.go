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

// subWorld is a running process with the demo bot holding one label, one field and one
// subscriber, a second bot of the same account with a bot token for each, and a second
// account.
type subWorld struct {
	s                  *server
	bot, bot2          string // paths /api/bots/{id}
	label, field, sub  string // ids on the demo bot
	sub2               string // a subscriber of bot2
	botTok, bot2Tok    string
	other              account
	otherSub, otherLbl string // on the other account's bot
}

func newSubWorld(t *testing.T) *subWorld {
	t.Helper()
	s := start(t)
	w := &subWorld{s: s, bot: "/api/bots/" + s.demo.BotID}
	tok := s.demo.Token
	w.label = mustCreate(t, s.post(tok, w.bot+"/labels", map[string]any{"name": "VIP"}))
	w.field = mustCreate(t, s.post(tok, w.bot+"/fields", map[string]any{"name": "plan", "type": "string"}))
	w.sub = mustCreate(t, s.post(tok, w.bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": "1001", "first_name": "Anna"}))
	w.bot2 = "/api/bots/" + mustCreate(t, s.post(tok, "/api/bots", map[string]any{"name": "Second"}))
	w.sub2 = mustCreate(t, s.post(tok, w.bot2+"/subscribers", map[string]any{"channel": "vk", "external_id": "2002"}))
	w.botTok = s.post(tok, w.bot+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)
	w.bot2Tok = s.post(tok, w.bot2+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)
	w.other = s.newAccount("Other")
	ob := "/api/bots/" + w.other.Bot
	w.otherSub = mustCreate(t, s.post(w.other.Token, ob+"/subscribers", map[string]any{"channel": "telegram", "external_id": "1001"}))
	w.otherLbl = mustCreate(t, s.post(w.other.Token, ob+"/labels", map[string]any{"name": "VIP"}))
	return w
}

func mustCreate(t *testing.T, r resp) string {
	t.Helper()
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	return r.JSON(t)["id"].(string)
}

// subRoute is one route of the family with a request that succeeds on the demo bot.
type subRoute struct {
	name   string
	method string
	path   func(w *subWorld, bot string) string
	body   any
	// config routes (label and field definitions) need the reactions right to write.
	config bool
}

func subRoutes() []subRoute {
	subPath := func(w *subWorld, bot string) string { return bot + "/subscribers/" + w.sub }
	return []subRoute{
		{"list subscribers", "GET", func(w *subWorld, bot string) string { return bot + "/subscribers" }, nil, false},
		{"upsert subscriber", "POST", func(w *subWorld, bot string) string { return bot + "/subscribers" }, map[string]any{"channel": "whatsapp", "external_id": "15550001"}, false},
		{"get subscriber", "GET", subPath, nil, false},
		{"patch subscriber", "PATCH", subPath, map[string]any{"expected_revision": 1, "last_name": "Schmidt"}, false},
		{"add label", "POST", func(w *subWorld, bot string) string { return subPath(w, bot) + "/labels" }, map[string]any{"label_id": "LABEL"}, false},
		{"remove label", "DELETE", func(w *subWorld, bot string) string { return subPath(w, bot) + "/labels/" + w.label }, nil, false},
		{"list labels", "GET", func(w *subWorld, bot string) string { return bot + "/labels" }, nil, false},
		{"create label", "POST", func(w *subWorld, bot string) string { return bot + "/labels" }, map[string]any{"name": "New"}, true},
		{"rename label", "PATCH", func(w *subWorld, bot string) string { return bot + "/labels/" + w.label }, map[string]any{"expected_revision": 1, "name": "Gold"}, true},
		{"list fields", "GET", func(w *subWorld, bot string) string { return bot + "/fields" }, nil, false},
		{"create field", "POST", func(w *subWorld, bot string) string { return bot + "/fields" }, map[string]any{"name": "score", "type": "number"}, true},
		{"delete field", "DELETE", func(w *subWorld, bot string) string { return bot + "/fields/" + w.field }, nil, true},
		{"delete label", "DELETE", func(w *subWorld, bot string) string { return bot + "/labels/" + w.label }, nil, true},
		{"delete subscriber", "DELETE", subPath, nil, false},
	}
}

func (rt subRoute) request(w *subWorld, bot, token string) req {
	body := rt.body
	if m, ok := body.(map[string]any); ok && m["label_id"] == "LABEL" {
		body = map[string]any{"label_id": w.label}
	}
	return req{Method: rt.method, Path: rt.path(w, bot), Token: token, Body: body}
}

// Every route, for every caller that may not use it, answers 403 or 404 (and changes
// nothing); then every route succeeds for the bot's own API token, in an order in which each
// request is valid.
func TestSubscribersAccess(t *testing.T) {
	t.Parallel()
	w := newSubWorld(t)
	s := w.s
	acct := s.demo.AccountID
	otherScope := s.admin("pat", "create", "--account", acct, "--scopes", "bots:*,reactions:*,collections:*")["token"]
	readOnly := s.admin("pat", "create", "--account", acct, "--scopes", "subscribers:read")["token"]
	noRights := s.admin("pat", "create", "--account", acct, "--user", s.admin("user", "create", "--account", acct, "--rights", "")["user_id"], "--scopes", "*")["token"]
	builder := s.admin("pat", "create", "--account", acct, "--user", s.admin("user", "create", "--account", acct, "--rights", "reactions")["user_id"], "--scopes", "subscribers:*")["token"]
	agent := s.admin("pat", "create", "--account", acct, "--user", s.admin("user", "create", "--account", acct, "--rights", "dialogs")["user_id"], "--scopes", "subscribers:*")["token"]
	otherBot := "/api/bots/" + w.other.Bot

	for _, rt := range subRoutes() {
		write := rt.method != "GET"
		check := func(token, bot string, status int, code, why string) {
			t.Helper()
			r := s.do(rt.request(w, bot, token))
			assert.Equal(t, status, r.Status, "%s, %s: %s", rt.name, why, r.Body)
			assert.Equal(t, code, r.Code(t), "%s, %s", rt.name, why)
			assert.NotContains(t, string(r.Body), w.other.ID, "%s, %s", rt.name, why)
		}
		check(otherScope, w.bot, 403, "insufficient_scope", "a token without subscribers scopes")
		if write {
			check(readOnly, w.bot, 403, "insufficient_scope", "a read-only token on a write")
		}
		check(noRights, w.bot, 403, "missing_right", "a user without rights")
		if rt.config && write {
			check(agent, w.bot, 403, "missing_right", "a dialogs-only user on bot configuration")
		} else {
			check(builder, w.bot, 403, "missing_right", "a reactions-only user on subscribers")
		}
		check(w.other.Token, w.bot, 404, "not_found", "another account's token on my bot")
		check(s.demo.Token, otherBot, 404, "not_found", "my token on another account's bot")
		check(w.bot2Tok, w.bot, 404, "not_found", "bot 2's token on bot 1")
		check(w.botTok, w.bot2, 404, "not_found", "bot 1's token on bot 2")
	}
	// Nothing changed: the subscriber is as created.
	got := s.get(s.demo.Token, w.bot+"/subscribers/"+w.sub).JSON(t)
	assert.Equal(t, float64(1), got["revision"])
	assert.Nil(t, got["last_name"])

	// Users with the right rights may.
	assert.Equal(t, http.StatusOK, s.get(agent, w.bot+"/subscribers").Status)
	assert.Equal(t, http.StatusOK, s.get(agent, w.bot+"/labels").Status)
	assert.Equal(t, http.StatusOK, s.get(readOnly, w.bot+"/fields").Status)
	assert.Equal(t, http.StatusCreated, s.post(agent, w.bot+"/subscribers", map[string]any{"channel": "vk", "external_id": "5"}).Status)
	assert.Equal(t, http.StatusCreated, s.post(builder, w.bot+"/labels", map[string]any{"name": "By builder"}).Status)

	// The bot's own API token may call every route of its bot.
	for _, rt := range subRoutes() {
		r := s.do(rt.request(w, w.bot, w.botTok))
		assert.Less(t, r.Status, 300, "%s: %s", rt.name, r.Body)
	}
}

func TestSubscribersLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := s.demo.Token
	bot := "/api/bots/" + s.demo.BotID

	vip := mustCreate(t, s.post(tok, bot+"/labels", map[string]any{"name": "VIP"}))
	churn := mustCreate(t, s.post(tok, bot+"/labels", map[string]any{"name": "Churn risk"}))
	mustCreate(t, s.post(tok, bot+"/fields", map[string]any{"name": "plan", "type": "string"}))
	score := mustCreate(t, s.post(tok, bot+"/fields", map[string]any{"name": "score", "type": "number"}))
	mustCreate(t, s.post(tok, bot+"/fields", map[string]any{"name": "vip_since", "type": "datetime"}))
	mustCreate(t, s.post(tok, bot+"/fields", map[string]any{"name": "opted_in", "type": "boolean"}))

	// Import: create, then the same identity again updates.
	r := s.post(tok, bot+"/subscribers", map[string]any{
		"channel": "telegram", "external_id": "358704112", "first_name": "José", "last_name": "Müller",
		"locale": "pt-br", "timezone": "America/Sao_Paulo", "last_seen_at": "2026-01-02T03:04:05.678+01:00",
		"fields": map[string]any{"plan": "pro", "score": 4.5, "vip_since": "2025-12-24T18:00:00-05:00", "opted_in": true},
		"labels": []string{vip},
	})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	sub := r.JSON(t)
	id := sub["id"].(string)
	assert.Equal(t, bot+"/subscribers/"+id, r.Header.Get("Location"))
	assert.Equal(t, "José Müller", sub["name"])
	assert.Equal(t, "pt-BR", sub["locale"])
	assert.Equal(t, "2026-01-02T02:04:05Z", sub["last_seen_at"])
	assert.Equal(t, map[string]any{"plan": "pro", "score": 4.5, "vip_since": "2025-12-24T23:00:00Z", "opted_in": true}, sub["fields"])
	assert.Equal(t, []any{vip}, sub["labels"])
	assert.Equal(t, float64(1), sub["revision"])

	r = s.post(tok, bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": "358704112", "fields": map[string]any{"plan": nil, score: 5}, "labels": []string{churn}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	upd := r.JSON(t)
	assert.Equal(t, id, upd["id"])
	assert.Equal(t, float64(2), upd["revision"])
	assert.Equal(t, map[string]any{"score": float64(5), "vip_since": "2025-12-24T23:00:00Z", "opted_in": true}, upd["fields"], "null cleared plan; a field id works as a key")
	assert.Equal(t, []any{vip, churn}, upd["labels"], "labels are added, none removed")
	assert.Equal(t, "José", upd["first_name"], "absent members are kept")

	// More subscribers for the filters.
	for i, p := range []map[string]any{
		{"channel": "whatsapp", "external_id": "15550001", "first_name": "Anna", "last_name": "Jones", "labels": []string{vip}},
		{"channel": "vk", "external_id": "77", "first_name": "Joanna"},
		{"channel": "telegram", "external_id": "99"},
	} {
		require.Equal(t, http.StatusCreated, s.post(tok, bot+"/subscribers", p).Status, "subscriber %d", i)
	}
	list := func(query string) []string {
		t.Helper()
		r := s.get(tok, bot+"/subscribers?"+query)
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", query, r.Body)
		var out []string
		for _, it := range r.JSON(t)["data"].([]any) {
			out = append(out, it.(map[string]any)["external_id"].(string))
		}
		return out
	}
	assert.Equal(t, []string{"358704112", "15550001", "77", "99"}, list(""))
	assert.Equal(t, []string{"358704112", "15550001"}, list("label="+vip))
	assert.Equal(t, []string{"358704112"}, list("label="+vip+"&channel=telegram"))
	assert.Equal(t, []string{"77", "15550001", "358704112"}, list("q=jo"), "by matching word: joanna, jones, jose")
	assert.Equal(t, []string{"358704112"}, list("q="+url.QueryEscape("MÜLL jose")))
	assert.Equal(t, []string{"15550001"}, list("channel=whatsapp&external_id=15550001"))
	assert.Empty(t, list("created_to=2020-01-01T00:00:00Z"))
	assert.Len(t, list("created_from=2020-01-01T00:00:00Z&created_to=2100-01-01T00:00:00Z"), 4)

	// Paging with a label filter: the cursor is bound to the filter.
	r = s.get(tok, bot+"/subscribers?limit=1&label="+vip)
	next := r.JSON(t)["next_cursor"].(string)
	r = s.get(tok, bot+"/subscribers?limit=1&label="+vip+"&cursor="+next)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "15550001", r.JSON(t)["data"].([]any)[0].(map[string]any)["external_id"])
	r = s.get(tok, bot+"/subscribers?limit=1&label="+churn+"&cursor="+next)
	assert.Equal(t, "invalid_cursor", r.Code(t))

	// PATCH: fields type-checked, revision enforced.
	path := bot + "/subscribers/" + id
	r = s.patch(tok, path, map[string]any{"expected_revision": 2, "fields": map[string]any{"score": "high", "plan": 1, "nope": true}})
	require.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, "validation_failed", r.Code(t))
	assert.Len(t, r.JSON(t)["errors"], 3, "every problem at once")
	r = s.patch(tok, path, map[string]any{"expected_revision": 2, "first_name": "Joe", "fields": map[string]any{"plan": "free"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, float64(3), r.JSON(t)["revision"])
	r = s.patch(tok, path, map[string]any{"expected_revision": 2, "first_name": "Late"})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "stale_revision", r.Code(t))
	assert.Equal(t, float64(3), r.JSON(t)["current_revision"])

	// Labels on the subscriber: idempotent both ways.
	r = s.del(tok, path+"/labels/"+churn)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, float64(4), r.JSON(t)["revision"])
	r = s.del(tok, path+"/labels/"+churn)
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, float64(4), r.JSON(t)["revision"], "removing again changes nothing")
	r = s.post(tok, path+"/labels", map[string]any{"label_id": churn})
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, float64(5), r.JSON(t)["revision"])

	// Renaming a label keeps it on subscribers; deleting it removes it from all of them.
	r = s.patch(tok, bot+"/labels/"+vip, map[string]any{"expected_revision": 1, "name": "Gold"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "Gold", r.JSON(t)["name"])
	r = s.post(tok, bot+"/labels", map[string]any{"name": "gold"})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "name_taken", r.Code(t))
	assert.Equal(t, vip, r.JSON(t)["conflicting_id"])
	require.Equal(t, http.StatusNoContent, s.del(tok, bot+"/labels/"+vip+"?expected_revision=2").Status)
	assert.Empty(t, list("label="+vip), "at once, nobody has it")
	assert.Equal(t, []any{churn}, s.get(tok, path).JSON(t)["labels"], "at once, it is not shown")
	waitFor(t, "the label's removal", func() bool {
		return s.get(tok, path).JSON(t)["revision"] == float64(6)
	})
	assert.Equal(t, []any{churn}, s.get(tok, path).JSON(t)["labels"])
	r = s.get(tok, bot+"/labels")
	require.Len(t, r.JSON(t)["data"], 1)

	// Deleting a field hides its values at once and erases them in the background.
	fields := s.get(tok, bot+"/fields").JSON(t)["data"].([]any)
	require.Len(t, fields, 4)
	planID := fields[0].(map[string]any)["id"].(string)
	require.Equal(t, http.StatusNoContent, s.del(tok, bot+"/fields/"+planID).Status)
	assert.NotContains(t, s.get(tok, path).JSON(t)["fields"], "plan")
	waitFor(t, "the field's erasure", func() bool {
		return s.get(tok, path).JSON(t)["revision"] == float64(7)
	})
	// Once the erasure has finished (its last step removes the field's marker; until then a
	// repeated DELETE answers 204 and makes sure it runs), the field is simply not found.
	waitFor(t, "the field's erasure to finish", func() bool {
		return s.del(tok, bot+"/fields/"+planID).Status == http.StatusNotFound
	})

	// Erasure: gone, and the identity is free for a new subscriber.
	r = s.del(tok, path+"?expected_revision=1")
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "stale_revision", r.Code(t))
	require.Equal(t, http.StatusNoContent, s.del(tok, path).Status)
	assert.Equal(t, http.StatusNotFound, s.get(tok, path).Status)
	assert.Empty(t, list("q=jose"))
	assert.Empty(t, list("channel=telegram&external_id=358704112"))
	r = s.post(tok, bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": "358704112"})
	require.Equal(t, http.StatusCreated, r.Status)
	assert.NotEqual(t, id, r.JSON(t)["id"])
	assert.Nil(t, r.JSON(t)["first_name"])
}

func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !done() {
		require.True(t, time.Now().Before(deadline), "%s did not finish", what)
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSubscribersBadRequests400(t *testing.T) {
	t.Parallel()
	w := newSubWorld(t)
	s := w.s
	bot := w.bot
	sub := bot + "/subscribers/" + w.sub
	cases := []struct {
		name, method, path string
		body               any
		code, field        string
	}{
		{"upsert: unknown field", "POST", bot + "/subscribers", `{"channel":"vk","external_id":"1","nickname":"x"}`, "unknown_field", "nickname"},
		{"upsert: field in another case", "POST", bot + "/subscribers", `{"Channel":"vk","external_id":"1"}`, "unknown_field", "Channel"},
		{"upsert: duplicate field value key", "POST", bot + "/subscribers", `{"channel":"vk","external_id":"1","fields":{"plan":"a","plan":"b"}}`, "duplicate_field", "fields.plan"},
		{"upsert: wrong type", "POST", bot + "/subscribers", `{"channel":"vk","external_id":1}`, "invalid_body", "external_id"},
		{"upsert: missing identity", "POST", bot + "/subscribers", `{}`, "validation_failed", ""},
		{"upsert: unknown channel", "POST", bot + "/subscribers", `{"channel":"fax","external_id":"1"}`, "validation_failed", ""},
		{"upsert: unknown label", "POST", bot + "/subscribers", `{"channel":"vk","external_id":"1","labels":["lbl_00000000000000000000000000"]}`, "validation_failed", ""},
		{"upsert: value of the wrong type", "POST", bot + "/subscribers", `{"channel":"vk","external_id":"1","fields":{"plan":true}}`, "validation_failed", ""},
		{"upsert: object value", "POST", bot + "/subscribers", `{"channel":"vk","external_id":"1","fields":{"plan":{"a":1}}}`, "validation_failed", ""},
		{"upsert: bad time zone", "POST", bot + "/subscribers", `{"channel":"vk","external_id":"1","timezone":"Mars/Olympus"}`, "validation_failed", ""},
		{"upsert: trailing data", "POST", bot + "/subscribers", `{"channel":"vk","external_id":"1"}}`, "invalid_body", ""},
		{"patch: unknown field", "PATCH", sub, `{"expected_revision":1,"channel":"vk"}`, "unknown_field", "channel"},
		{"patch: missing revision", "PATCH", sub, `{"first_name":"x"}`, "validation_failed", ""},
		{"patch: unknown custom field", "PATCH", sub, `{"expected_revision":1,"fields":{"nope":1}}`, "validation_failed", ""},
		{"add label: unknown field", "POST", sub + "/labels", `{"label_id":"` + w.label + `","labels":[]}`, "unknown_field", "labels"},
		{"add label: malformed id", "POST", sub + "/labels", `{"label_id":"vip"}`, "validation_failed", ""},
		{"add label: another account's label", "POST", sub + "/labels", `{"label_id":"` + w.otherLbl + `"}`, "validation_failed", ""},
		{"create label: unknown field", "POST", bot + "/labels", `{"name":"x","color":"red"}`, "unknown_field", "color"},
		{"create label: blank", "POST", bot + "/labels", `{"name":"  "}`, "validation_failed", ""},
		{"rename label: unknown field", "PATCH", bot + "/labels/" + w.label, `{"expected_revision":1,"name":"x","color":"red"}`, "unknown_field", "color"},
		{"rename label: missing revision", "PATCH", bot + "/labels/" + w.label, `{"name":"x"}`, "validation_failed", ""},
		{"create field: unknown field", "POST", bot + "/fields", `{"name":"x","type":"string","default":"a"}`, "unknown_field", "default"},
		{"create field: bad name", "POST", bot + "/fields", `{"name":"First Name","type":"string"}`, "validation_failed", ""},
		{"create field: reserved name", "POST", bot + "/fields", `{"name":"locale","type":"string"}`, "validation_failed", ""},
		{"create field: bad type", "POST", bot + "/fields", `{"name":"x","type":"integer"}`, "validation_failed", ""},
		{"list: bad label", "GET", bot + "/subscribers?label=VIP", nil, "invalid_parameter", ""},
		{"list: bad channel", "GET", bot + "/subscribers?channel=fax", nil, "invalid_parameter", ""},
		{"list: bad created_from", "GET", bot + "/subscribers?created_from=2026-13-01", nil, "invalid_parameter", ""},
		{"list: inverted range", "GET", bot + "/subscribers?created_from=2026-02-01T00:00:00Z&created_to=2026-01-01T00:00:00Z", nil, "invalid_parameter", ""},
		{"list: q too long", "GET", bot + "/subscribers?q=" + strings.Repeat("a", 101), nil, "invalid_parameter", ""},
		{"list: limit", "GET", bot + "/subscribers?limit=201", nil, "invalid_parameter", ""},
		{"labels: limit", "GET", bot + "/labels?limit=abc", nil, "invalid_parameter", ""},
		{"fields: cursor", "GET", bot + "/fields?cursor=abc", nil, "invalid_cursor", ""},
		{"delete subscriber: bad revision", "DELETE", sub + "?expected_revision=-1", nil, "invalid_parameter", ""},
		{"delete label: bad revision", "DELETE", bot + "/labels/" + w.label + "?expected_revision=one", nil, "invalid_parameter", ""},
	}
	for _, c := range cases {
		r := s.do(req{Method: c.method, Path: c.path, Token: s.demo.Token, Body: c.body})
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.name, r.Body)
		assert.Equal(t, c.code, r.Code(t), c.name)
		if c.field != "" {
			assert.Equal(t, c.field, r.JSON(t)["field"], c.name)
		}
		if c.code == "validation_failed" {
			assert.NotEmpty(t, r.JSON(t)["errors"], c.name)
		}
	}
	// Nothing was created or changed.
	assert.Len(t, s.get(s.demo.Token, bot+"/subscribers").JSON(t)["data"], 1)
	assert.Len(t, s.get(s.demo.Token, bot+"/labels").JSON(t)["data"], 1)
	assert.Len(t, s.get(s.demo.Token, bot+"/fields").JSON(t)["data"], 1)
}

func TestSubscribersNotFoundAndConflicts(t *testing.T) {
	t.Parallel()
	w := newSubWorld(t)
	s := w.s
	tok := s.demo.Token
	bot := w.bot
	cases := []struct {
		name   string
		req    req
		status int
		code   string
	}{
		{"another bot's subscriber under my bot", req{Method: "GET", Path: bot + "/subscribers/" + w.sub2}, 404, "not_found"},
		{"another account's subscriber under my bot", req{Method: "GET", Path: bot + "/subscribers/" + w.otherSub}, 404, "not_found"},
		{"malformed subscriber id", req{Method: "GET", Path: bot + "/subscribers/nope"}, 404, "not_found"},
		{"patch unknown subscriber", req{Method: "PATCH", Path: bot + "/subscribers/sub_00000000000000000000000000", Body: map[string]any{"expected_revision": 1}}, 404, "not_found"},
		{"label of unknown subscriber", req{Method: "POST", Path: bot + "/subscribers/" + w.sub2 + "/labels", Body: map[string]any{"label_id": w.label}}, 404, "not_found"},
		{"remove malformed label", req{Method: "DELETE", Path: bot + "/subscribers/" + w.sub + "/labels/vip"}, 404, "not_found"},
		{"another account's label", req{Method: "PATCH", Path: bot + "/labels/" + w.otherLbl, Body: map[string]any{"expected_revision": 1, "name": "x"}}, 404, "not_found"},
		{"delete unknown label", req{Method: "DELETE", Path: bot + "/labels/lbl_00000000000000000000000000"}, 404, "not_found"},
		{"delete unknown field", req{Method: "DELETE", Path: bot + "/fields/fld_00000000000000000000000000"}, 404, "not_found"},
		{"delete unknown subscriber", req{Method: "DELETE", Path: bot + "/subscribers/" + w.otherSub}, 404, "not_found"},
		{"stale subscriber patch", req{Method: "PATCH", Path: bot + "/subscribers/" + w.sub, Body: map[string]any{"expected_revision": 2, "first_name": "x"}}, 409, "stale_revision"},
		{"stale subscriber delete", req{Method: "DELETE", Path: bot + "/subscribers/" + w.sub + "?expected_revision=2"}, 409, "stale_revision"},
		{"stale label rename", req{Method: "PATCH", Path: bot + "/labels/" + w.label, Body: map[string]any{"expected_revision": 2, "name": "x"}}, 409, "stale_revision"},
		{"stale label delete", req{Method: "DELETE", Path: bot + "/labels/" + w.label + "?expected_revision=2"}, 409, "stale_revision"},
		{"label name taken", req{Method: "POST", Path: bot + "/labels", Body: map[string]any{"name": "vip"}}, 409, "name_taken"},
		{"field name taken", req{Method: "POST", Path: bot + "/fields", Body: map[string]any{"name": "plan", "type": "number"}}, 409, "name_taken"},
	}
	for _, c := range cases {
		c.req.Token = tok
		r := s.do(c.req)
		assert.Equal(t, c.status, r.Status, "%s: %s", c.name, r.Body)
		assert.Equal(t, c.code, r.Code(t), c.name)
		if c.code == "stale_revision" {
			assert.Equal(t, float64(1), r.JSON(t)["current_revision"], c.name)
		}
	}
	// The other account's subscriber and label are untouched.
	assert.Equal(t, http.StatusOK, s.get(w.other.Token, "/api/bots/"+w.other.Bot+"/subscribers/"+w.otherSub).Status)

	// A subscriber holds at most 50 labels: the 51st is 409 limit_reached.
	sub := bot + "/subscribers/" + w.sub
	for i := range 50 {
		id := mustCreate(t, s.post(tok, bot+"/labels", map[string]any{"name": fmt.Sprint("L", i)}))
		require.Equal(t, http.StatusOK, s.post(tok, sub+"/labels", map[string]any{"label_id": id}).Status)
	}
	r := s.post(tok, sub+"/labels", map[string]any{"label_id": w.label})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "limit_reached", r.Code(t))
	r = s.post(tok, bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": "1001", "labels": []string{w.label}})
	assert.Equal(t, http.StatusConflict, r.Status, "the upsert keeps to the limit too")
	assert.Equal(t, "limit_reached", r.Code(t))
}
