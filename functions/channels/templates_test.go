package channels

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
	fake "github.com/botplatform/api/tests/fakes/whatsapp"
)

const (
	botA = "bot_1h1kjd397yjjq1c053b84sjm6r"
	botB = "bot_1h1kjd397yjjq1c053b84sjm7s"
)

// tserver is the channels family on a mux, with a WhatsApp adapter on the fake Graph API
// and a Telegram-like adapter without templates. botA and botB are its account's bots.
type tserver struct {
	*httpapitest.Server
	svc   *Service
	wa    *fake.Server
	tg    *fakeAdapter
	trail *audit.Log
	// tokens are the callers of the tests by name: the account's owner with every scope
	// ("owner"), with bots:read ("reader") and with bots:write ("writer"), a member without
	// rights ("member"), a bot token of botA ("bottok") and another account's owner
	// ("stranger"). "" is no token.
	tokens map[string]string
}

func newTServer(t *testing.T, withService bool) *tserver {
	t.Helper()
	// The clock advances a second per reading, so ids sort by creation.
	clock := httpapitest.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC), time.Second)
	st := sqlitetest.Open(t)
	trail := audit.NewLog(st)
	srv := httpapitest.New(t, httpapitest.Config{Now: clock.Now, Store: st, Audit: trail, BotIDs: []string{botA, botB}})
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	wa := fake.New(t)
	tg := &fakeAdapter{kind: channel.Telegram, lookup: "tg-1"}
	adapters := []channel.Adapter{whatsapp.New(whatsapp.Config{BaseURL: wa.URL(), AppID: fake.AppID, AppSecret: fake.AppSecret, AllowPrivateDownloads: true}), tg}
	s := &tserver{Server: srv, wa: wa, tg: tg, trail: trail}
	if withService {
		s.svc = NewService(st, secretstest.Wrap(key, kms.PurposeSecrets), adapters, clock.Now, "")
	}
	Routes(s.Mux, s.svc, s.Cursors)

	member, err := s.Auth.CreateUser(t.Context(), s.Account.ID, "Member", 0)
	require.NoError(t, err)
	_, stranger, err := s.Auth.CreateAccount(t.Context(), "Zeta")
	require.NoError(t, err)
	s.tokens = map[string]string{
		"owner":    s.PAT(t, s.Owner),
		"reader":   s.PAT(t, s.Owner, "bots:read"),
		"writer":   s.PAT(t, s.Owner, "bots:write"),
		"member":   s.PAT(t, member, "bots:*"),
		"bottok":   s.BotToken(t, botA),
		"stranger": s.PAT(t, stranger),
	}
	return s
}

// do serves a request as one of s.tokens: see httpapitest.Server.DoAs.
func (s *tserver) do(t *testing.T, who, method, path string, body any, header ...string) httpapitest.Reply {
	t.Helper()
	tok, ok := s.tokens[who]
	require.True(t, ok || who == "", "no caller %q", who)
	return s.DoAs(t, tok, method, path, body, header...)
}

// connect connects the fake's WhatsApp number to bot and returns the channel id.
func (s *tserver) connect(t *testing.T, bot string) string {
	t.Helper()
	r := s.do(t, "owner", "POST", "/api/bots/"+bot+"/channels", map[string]any{"type": "whatsapp", "credentials": s.wa.Credentials()})
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	return r.JSON["id"].(string)
}

func templatesPath(bot, ch string) string {
	return "/api/bots/" + bot + "/channels/" + ch + "/templates"
}

func orderTemplate(name string) map[string]any {
	return map[string]any{"name": name, "language": "en_US", "category": "utility", "components": []any{
		map[string]any{"type": "BODY", "text": "Hi {{1}}, order {{2}} ships today.", "example": map[string]any{"body_text": []any{[]any{"Ann", "#42"}}}},
	}}
}

// The access table is the family's security boundary: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	w := httpapi.Need("bots:write", auth.RightReactions)
	want := map[string]httpapi.Access{
		"GET /api/channels/capabilities":                                       httpapi.NeedPAT("bots:read"),
		"GET /api/bots/{botID}/channels":                                       httpapi.Need("bots:read"),
		"POST /api/bots/{botID}/channels":                                      w,
		"DELETE /api/bots/{botID}/channels/{channelID}":                        w,
		"GET /api/bots/{botID}/channels/{channelID}/templates":                 httpapi.Need("bots:read"),
		"POST /api/bots/{botID}/channels/{channelID}/templates":                w,
		"POST /api/bots/{botID}/channels/{channelID}/templates/sync":           w,
		"POST /api/bots/{botID}/channels/{channelID}/templates/media":          w,
		"PUT /api/bots/{botID}/channels/{channelID}/templates/{templateID}":    w,
		"DELETE /api/bots/{botID}/channels/{channelID}/templates/{templateID}": w,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func TestTemplateLifecycle(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	base := templatesPath(botA, ch)

	r := s.do(t, "bottok", "POST", base, orderTemplate("order_update"))
	require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
	tpl := r.JSON
	id := tpl["id"].(string)
	assert.Regexp(t, `^mtpl_`, id)
	assert.Equal(t, "pending", tpl["status"])
	assert.Equal(t, "utility", tpl["category"])
	assert.Nil(t, tpl["rejection_reason"])
	assert.EqualValues(t, 1, tpl["revision"])
	assert.Equal(t, base+"/"+id, r.Header.Get("Location"))
	onFake, ok := s.wa.Template("order_update", "en_US")
	require.True(t, ok, "submitted to the provider")
	assert.Equal(t, "PENDING", onFake.Status)
	assert.Equal(t, onFake.ID, tpl["provider_template_id"])

	// The review approves it; a sync brings the outcome.
	require.NoError(t, s.wa.Approve("order_update", "en_US"))
	r = s.do(t, "owner", "POST", base+"/sync", nil)
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	assert.JSONEq(t, `{"created":0,"updated":1,"deleted":0,"unchanged":0}`, r.Body)
	list := s.do(t, "reader", "GET", base+"?status=approved", nil).JSON["data"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, "approved", list[0].(map[string]any)["status"])
	assert.EqualValues(t, 2, list[0].(map[string]any)["revision"])
	assert.Empty(t, s.do(t, "reader", "GET", base+"?status=pending", nil).JSON["data"])

	// Made in WhatsApp Manager: added; deleted there: removed; nothing new: unchanged.
	s.wa.AddTemplate("welcome", "de", "MARKETING", "REJECTED", `[{"type":"BODY","text":"Willkommen"}]`)
	require.NoError(t, s.wa.SetStatus("welcome", "de", "REJECTED", "INVALID_FORMAT"))
	r = s.do(t, "owner", "POST", base+"/sync", nil)
	assert.JSONEq(t, `{"created":1,"updated":0,"deleted":0,"unchanged":1}`, r.Body)
	welcome := s.do(t, "reader", "GET", base+"?language=de", nil).JSON["data"].([]any)
	require.Len(t, welcome, 1)
	w := welcome[0].(map[string]any)
	assert.Equal(t, "rejected", w["status"])
	assert.Equal(t, "INVALID_FORMAT", w["rejection_reason"])
	assert.Equal(t, "marketing", w["category"])
	assert.JSONEq(t, `[{"type":"BODY","text":"Willkommen"}]`, mustJSON(t, w["components"]))
	require.True(t, s.wa.RemoveTemplate("welcome", "de"))
	r = s.do(t, "owner", "POST", base+"/sync", nil)
	assert.JSONEq(t, `{"created":0,"updated":0,"deleted":1,"unchanged":1}`, r.Body)
	r = s.do(t, "owner", "POST", base+"/sync", nil)
	assert.JSONEq(t, `{"created":0,"updated":0,"deleted":0,"unchanged":1}`, r.Body)

	// Edit: stale revision, then the real one; back to review.
	edit := map[string]any{"expected_revision": 1, "components": []any{map[string]any{"type": "BODY", "text": "Order {{1}} is on its way.", "example": map[string]any{"body_text": []any{[]any{"#42"}}}}}}
	r = s.do(t, "owner", "PUT", base+"/"+id, edit)
	assert.Equal(t, http.StatusConflict, r.Code)
	assert.Equal(t, "stale_revision", r.Problem())
	assert.EqualValues(t, 2, r.JSON["current_revision"])
	edit["expected_revision"] = 2
	edit["category"] = "marketing"
	r = s.do(t, "owner", "PUT", base+"/"+id, edit)
	assert.Equal(t, "template_not_editable", r.Problem(), "an approved template keeps its category")
	delete(edit, "category")
	r = s.do(t, "owner", "PUT", base+"/"+id, edit)
	require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
	assert.Equal(t, "pending", r.JSON["status"])
	assert.EqualValues(t, 3, r.JSON["revision"])
	onFake, _ = s.wa.Template("order_update", "en_US")
	assert.Equal(t, "PENDING", onFake.Status)
	assert.Contains(t, string(onFake.Components), "is on its way")
	edit["expected_revision"] = 3
	r = s.do(t, "owner", "PUT", base+"/"+id, edit)
	assert.Equal(t, "template_not_editable", r.Problem(), "a pending template cannot be edited")

	// The review outcome arrives by webhook.
	require.NoError(t, s.wa.Reject("order_update", "en_US", "TAG_CONTENT_MISMATCH"))
	require.NoError(t, s.svc.ApplyTemplateStatus(t.Context(), whatsapp.TemplateStatus{BusinessAccountID: fake.BusinessAccountID,
		ID: onFake.ID, Name: "order_update", Language: "en_US", Status: "REJECTED", Reason: "TAG_CONTENT_MISMATCH"}))
	got := s.do(t, "reader", "GET", base, nil).JSON["data"].([]any)[0].(map[string]any)
	assert.Equal(t, "rejected", got["status"])
	assert.Equal(t, "TAG_CONTENT_MISMATCH", got["rejection_reason"])
	assert.EqualValues(t, 4, got["revision"])
	// Unknown templates and events change nothing.
	require.NoError(t, s.svc.ApplyTemplateStatus(t.Context(), whatsapp.TemplateStatus{BusinessAccountID: fake.BusinessAccountID, ID: "1", Status: "APPROVED"}))
	require.NoError(t, s.svc.ApplyTemplateStatus(t.Context(), whatsapp.TemplateStatus{BusinessAccountID: fake.BusinessAccountID, ID: onFake.ID, Status: "FLAGGED"}))
	assert.Equal(t, "rejected", s.do(t, "reader", "GET", base, nil).JSON["data"].([]any)[0].(map[string]any)["status"])

	// Delete: stale, then at the revision; gone at the provider and here.
	r = s.do(t, "owner", "DELETE", base+"/"+id+"?expected_revision=1", nil)
	assert.Equal(t, "stale_revision", r.Problem())
	r = s.do(t, "owner", "DELETE", base+"/"+id+"?expected_revision=x", nil)
	assert.Equal(t, "invalid_parameter", r.Problem())
	r = s.do(t, "owner", "DELETE", base+"/"+id+"?expected_revision=4", nil)
	require.Equal(t, http.StatusNoContent, r.Code, "%s", r.Body)
	_, ok = s.wa.Template("order_update", "en_US")
	assert.False(t, ok)
	assert.Empty(t, s.do(t, "reader", "GET", base, nil).JSON["data"])
	assert.Equal(t, http.StatusNotFound, s.do(t, "owner", "DELETE", base+"/"+id, nil).Code)

	// Every mutation was audited, with its route template.
	events, _, err := s.trail.List(t.Context(), s.Account.ID, "", 100, "")
	require.NoError(t, err)
	routes := map[string]bool{}
	for _, e := range events {
		routes[e.Route] = true
	}
	assert.True(t, routes["POST /api/bots/{botID}/channels/{channelID}/templates/sync"])
	assert.True(t, routes["PUT /api/bots/{botID}/channels/{channelID}/templates/{templateID}"])
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// A template deleted at the provider can still be deleted here; the webhook's DELETED
// removes the local copy; a disconnected channel leaves no catalog behind.
func TestTemplateDeletionPaths(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	base := templatesPath(botA, ch)
	a := s.do(t, "owner", "POST", base, orderTemplate("one")).JSON
	b := s.do(t, "owner", "POST", base, orderTemplate("two")).JSON
	s.do(t, "owner", "POST", base, orderTemplate("three"))

	require.True(t, s.wa.RemoveTemplate("one", "en_US"))
	assert.Equal(t, http.StatusNoContent, s.do(t, "owner", "DELETE", base+"/"+a["id"].(string), nil).Code)

	require.NoError(t, s.svc.ApplyTemplateStatus(t.Context(), whatsapp.TemplateStatus{BusinessAccountID: fake.BusinessAccountID,
		ID: b["provider_template_id"].(string), Status: "DELETED"}))
	list := s.do(t, "reader", "GET", base, nil).JSON["data"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, "three", list[0].(map[string]any)["name"])

	assert.Equal(t, http.StatusNoContent, s.do(t, "owner", "DELETE", "/api/bots/"+botA+"/channels/"+ch, nil).Code)
	page, err := s.Store.Query(t.Context(), store.Query{PK: templatesPartition(botA)})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "the catalog went with the channel")
}

// The catalog pages with sealed cursors, filters included.
func TestTemplateListPaging(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	base := templatesPath(botA, ch)
	var want []string
	for i := range 5 {
		tpl := orderTemplate(fmt.Sprintf("t%d", i))
		if i%2 == 1 {
			tpl["language"] = "de"
		}
		r := s.do(t, "owner", "POST", base, tpl)
		require.Equal(t, http.StatusCreated, r.Code, "%s", r.Body)
		want = append(want, r.JSON["name"].(string))
	}
	walk := func(query string, limit int) ([]string, int) {
		var names []string
		pages := 0
		cursor := ""
		for {
			path := fmt.Sprintf("%s?limit=%d%s", base, limit, query)
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := s.do(t, "reader", "GET", path, nil)
			require.Equal(t, http.StatusOK, r.Code, "%s", r.Body)
			pages++
			m := r.JSON
			for _, it := range m["data"].([]any) {
				names = append(names, it.(map[string]any)["name"].(string))
			}
			next, _ := m["next_cursor"].(string)
			if next == "" {
				return names, pages
			}
			cursor = next
		}
	}
	names, pages := walk("", 2)
	assert.Equal(t, want, names, "oldest first, every template once")
	assert.Equal(t, 3, pages)
	names, _ = walk("&language=de", 1)
	assert.Equal(t, []string{"t1", "t3"}, names)
	names, _ = walk("&language=en_US&status=pending", 2)
	assert.Equal(t, []string{"t0", "t2", "t4"}, names)

	first := s.do(t, "reader", "GET", base+"?limit=2", nil).JSON
	cursor := first["next_cursor"].(string)
	for name, path := range map[string]string{
		"another filter": base + "?limit=2&language=de&cursor=" + cursor,
		"altered":        base + "?limit=2&cursor=" + cursor[:len(cursor)-2] + "xy",
		"empty":          base + "?cursor=",
	} {
		assert.Equal(t, "invalid_cursor", s.do(t, "reader", "GET", path, nil).Problem(), name)
	}
	assert.Equal(t, "invalid_parameter", s.do(t, "reader", "GET", base+"?status=approvedish", nil).Problem())
	assert.Equal(t, "invalid_parameter", s.do(t, "reader", "GET", base+"?language=English", nil).Problem())
	assert.Equal(t, "invalid_parameter", s.do(t, "reader", "GET", base+"?limit=0", nil).Problem())
}

func TestTemplateRequestsRefused(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	base := templatesPath(botA, ch)
	before := len(s.wa.Requests())

	cases := []struct {
		name, body, code, field string
	}{
		{"unknown top-level field", `{"name":"a","language":"en","category":"utility","components":[{"type":"BODY","text":"x"}],"colour":1}`, "unknown_field", "colour"},
		{"unknown component member", `{"name":"a","language":"en","category":"utility","components":[{"type":"BODY","text":"x","colour":1}]}`, "unknown_field", "components[0].colour"},
		{"unknown button member", `{"name":"a","language":"en","category":"utility","components":[{"type":"BODY","text":"x"},{"type":"BUTTONS","buttons":[{"type":"QUICK_REPLY","text":"a","payload":"p"}]}]}`, "unknown_field", "components[1].buttons[0].payload"},
		{"wrong type", `{"name":"a","language":"en","category":"utility","components":{"type":"BODY"}}`, "invalid_body", "components"},
		{"bad name", `{"name":"Order Update","language":"en","category":"utility","components":[{"type":"BODY","text":"x"}]}`, "validation_failed", "name"},
		{"authentication", `{"name":"otp","language":"en","category":"authentication","components":[{"type":"BODY","text":"x"}]}`, "validation_failed", "category"},
		{"no body component", `{"name":"a","language":"en","category":"utility","components":[{"type":"FOOTER","text":"x"}]}`, "validation_failed", "components"},
		{"variable without example", `{"name":"a","language":"en","category":"utility","components":[{"type":"BODY","text":"Hi {{1}}"}]}`, "validation_failed", "components[0].example.body_text"},
		{"missing components", `{"name":"a","language":"en","category":"utility"}`, "validation_failed", "components"},
		{"trailing data", `{"name":"a","language":"en","category":"utility","components":[{"type":"BODY","text":"x"}]}}`, "invalid_body", ""},
	}
	for _, tc := range cases {
		r := s.do(t, "owner", "POST", base, tc.body)
		assert.Equal(t, http.StatusBadRequest, r.Code, tc.name)
		assert.Equal(t, tc.code, r.Problem(), tc.name)
		if tc.field == "" {
			continue
		}
		m := r.JSON
		if f, ok := m["field"]; ok {
			assert.Equal(t, tc.field, f, tc.name)
		} else {
			var fields []string
			for _, e := range m["errors"].([]any) {
				fields = append(fields, e.(map[string]any)["field"].(string))
			}
			assert.Contains(t, fields, tc.field, tc.name)
		}
	}
	r := s.do(t, "owner", "POST", base, []byte(`{}`), "Content-Type", "text/plain")
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Code)
	r = s.do(t, "owner", "PUT", base+"/mtpl_1h1km3a8cz8t0b2mq4x7w9y1hd", `{"components":[{"type":"BODY","text":"x"}],"name":"renamed"}`)
	assert.Equal(t, "unknown_field", r.Problem(), "name cannot be edited")
	r = s.do(t, "owner", "PUT", base+"/mtpl_1h1km3a8cz8t0b2mq4x7w9y1hd", `{"components":[{"type":"BODY","text":"x"}]}`)
	assert.Equal(t, "validation_failed", r.Problem(), "expected_revision is required")
	r = s.do(t, "owner", "PUT", base+"/mtpl_1h1km3a8cz8t0b2mq4x7w9y1hd", `{"expected_revision":1,"components":[{"type":"BODY","text":"x"}]}`)
	assert.Equal(t, http.StatusNotFound, r.Code)
	assert.Len(t, s.wa.Requests(), before, "nothing reached the provider")
}

func TestTemplateProviderFailures(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	base := templatesPath(botA, ch)

	s.wa.Fail(1)
	r := s.do(t, "owner", "POST", base, orderTemplate("a"))
	assert.Equal(t, http.StatusServiceUnavailable, r.Code)
	assert.Equal(t, "provider_unavailable", r.Problem())
	assert.Empty(t, s.do(t, "reader", "GET", base, nil).JSON["data"], "nothing stored")

	s.wa.FailWith(1, 400, 80007, 0, "(#80007) Rate limit issues", "17")
	r = s.do(t, "owner", "POST", base+"/sync", nil)
	assert.Equal(t, "provider_unavailable", r.Problem())
	assert.Equal(t, "17", r.Header.Get("Retry-After"))

	require.Equal(t, http.StatusCreated, s.do(t, "owner", "POST", base, orderTemplate("a")).Code)
	r = s.do(t, "owner", "POST", base, orderTemplate("a"))
	assert.Equal(t, http.StatusConflict, r.Code)
	assert.Equal(t, "template_exists", r.Problem())

	s.wa.FailWith(1, 400, 100, 2388040, "Invalid parameter", "")
	r = s.do(t, "owner", "POST", base, orderTemplate("b"))
	assert.Equal(t, http.StatusUnprocessableEntity, r.Code)
	assert.Equal(t, "template_rejected", r.Problem())
	assert.Equal(t, "100/2388040", r.JSON["provider_code"])

	s.wa.RejectToken(fake.AccessToken)
	r = s.do(t, "owner", "POST", base+"/sync", nil)
	assert.Equal(t, http.StatusUnprocessableEntity, r.Code)
	assert.Equal(t, "credentials_rejected", r.Problem())
	assert.NotContains(t, r.Body, fake.AccessToken)
}

// Template routes on a channel without templates, of another bot, or that does not exist.
func TestTemplateRoutesChannelChecks(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	wa := s.connect(t, botA)
	r := s.do(t, "owner", "POST", "/api/bots/"+botB+"/channels", map[string]any{"type": "whatsapp", "credentials": s.wa.Credentials()})
	assert.Equal(t, "channel_in_use", r.Problem(), "one number serves one bot")
	tg, err := s.svc.Connect(t.Context(), s.Account.ID, botA, channel.Telegram, "", &fakeCreds{Key: "good"})
	require.NoError(t, err)

	calls := func(ch, bot string) map[string]httpapitest.Reply {
		base := templatesPath(bot, ch)
		return map[string]httpapitest.Reply{
			"list":   s.do(t, "owner", "GET", base, nil),
			"create": s.do(t, "owner", "POST", base, orderTemplate("x")),
			"sync":   s.do(t, "owner", "POST", base+"/sync", nil),
			"media":  s.do(t, "owner", "POST", base+"/media", png, "Content-Type", "image/png"),
			"edit":   s.do(t, "owner", "PUT", base+"/mtpl_1h1km3a8cz8t0b2mq4x7w9y1hd", `{"expected_revision":1,"components":[{"type":"BODY","text":"x"}]}`),
			"delete": s.do(t, "owner", "DELETE", base+"/mtpl_1h1km3a8cz8t0b2mq4x7w9y1hd", nil),
		}
	}
	for name, r := range calls(tg.ID, botA) {
		assert.Equal(t, http.StatusConflict, r.Code, name)
		assert.Equal(t, "templates_not_supported", r.Problem(), name)
	}
	for name, r := range calls(wa, botB) {
		assert.Equal(t, http.StatusNotFound, r.Code, "%s: another bot's channel", name)
	}
	for name, r := range calls("ch_nope", botA) {
		assert.Equal(t, http.StatusNotFound, r.Code, name)
	}
	// Access: scope, right, tenancy.
	base := templatesPath(botA, wa)
	assert.Equal(t, "insufficient_scope", s.do(t, "reader", "POST", base+"/sync", nil).Problem())
	assert.Equal(t, "insufficient_scope", s.do(t, "writer", "GET", base, nil).Problem(), "write does not imply read")
	assert.Equal(t, "missing_right", s.do(t, "member", "POST", base+"/sync", nil).Problem())
	assert.Equal(t, http.StatusOK, s.do(t, "member", "GET", base, nil).Code, "reading needs no right")
	assert.Equal(t, http.StatusNotFound, s.do(t, "stranger", "GET", base, nil).Code)
	assert.Equal(t, http.StatusOK, s.do(t, "bottok", "GET", base, nil).Code)
	assert.Equal(t, http.StatusNotFound, s.do(t, "bottok", "GET", templatesPath(botB, wa), nil).Code)
	assert.Equal(t, "insufficient_scope", s.do(t, "bottok", "GET", "/api/channels/capabilities", nil).Problem())
	assert.Equal(t, http.StatusUnauthorized, s.do(t, "", "GET", base, nil).Code)
}

func TestCapabilitiesAndConnect(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	r := s.do(t, "reader", "GET", "/api/channels/capabilities", nil)
	require.Equal(t, http.StatusOK, r.Code)
	var m struct {
		Data []channel.Capabilities `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.Body), &m))
	require.Len(t, m.Data, 2)
	assert.Equal(t, channel.Telegram, m.Data[0].Kind, "in the order of channel.Kinds")
	assert.Equal(t, whatsapp.New(whatsapp.Config{}).Capabilities(), m.Data[1])

	// Credentials are checked member by member, then with the provider.
	r = s.do(t, "owner", "POST", "/api/bots/"+botA+"/channels", `{"type":"whatsapp","credentials":{"phone_number_id":"12a"}}`)
	assert.Equal(t, "validation_failed", r.Problem())
	var fields []string
	for _, e := range r.JSON["errors"].([]any) {
		fields = append(fields, e.(map[string]any)["field"].(string))
	}
	assert.ElementsMatch(t, []string{"credentials.access_token", "credentials.phone_number_id", "credentials.business_account_id"}, fields)
	r = s.do(t, "owner", "POST", "/api/bots/"+botA+"/channels", `{"type":"whatsapp","credentials":{"access_token":"x","phone_number_id":"1","business_account_id":"2","app_secret":"s"}}`)
	assert.Equal(t, "unknown_field", r.Problem())
	assert.Equal(t, "credentials.app_secret", r.JSON["field"])
	creds := s.wa.Credentials()
	creds["access_token"] = "EAAJwrong"
	r = s.do(t, "owner", "POST", "/api/bots/"+botA+"/channels", map[string]any{"type": "whatsapp", "credentials": creds})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Code)
	assert.Equal(t, "credentials_rejected", r.Problem())
	r = s.do(t, "owner", "POST", "/api/bots/"+botA+"/channels", map[string]any{"type": "telegram", "credentials": map[string]any{"key": "good"}})
	assert.Equal(t, "validation_failed", r.Problem(), "telegram is connected by an operator")

	ch := s.connect(t, botA)
	r = s.do(t, "reader", "GET", "/api/bots/"+botA+"/channels", nil)
	require.Equal(t, http.StatusOK, r.Code)
	assert.NotContains(t, r.Body, fake.AccessToken, "credentials are never shown")
	got := r.JSON["data"].([]any)[0].(map[string]any)
	assert.Equal(t, ch, got["id"])
	assert.Equal(t, fake.DisplayPhoneNumber, got["name"])
	assert.Equal(t, fake.PhoneNumberID, got["settings"].(map[string]any)["phone_number_id"])
	r = s.do(t, "owner", "POST", "/api/bots/"+botA+"/channels", map[string]any{"type": "whatsapp", "credentials": s.wa.Credentials()})
	assert.Equal(t, "channel_exists", r.Problem())
}

// Without a channels service (no secrets key) the routes exist and answer 503.
func TestRoutesWithoutService(t *testing.T) {
	t.Parallel()
	s := newTServer(t, false)
	assert.Len(t, s.Mux.Routes(), 10)
	for _, path := range []string{"/api/channels/capabilities", "/api/bots/" + botA + "/channels", templatesPath(botA, "ch_x")} {
		r := s.do(t, "owner", "GET", path, nil)
		assert.Equal(t, http.StatusServiceUnavailable, r.Code, path)
		assert.Equal(t, "channels_unavailable", r.Problem(), path)
	}
	assert.Equal(t, http.StatusUnauthorized, s.do(t, "", "GET", "/api/channels/capabilities", nil).Code, "access checks first")
}

// A deleted bot's template catalogs are erased by its purge; another bot's stay.
func TestPurgeStepErasesTemplates(t *testing.T) {
	t.Parallel()
	s := newTServer(t, true)
	ch := s.connect(t, botA)
	for _, name := range []string{"one", "two"} {
		require.Equal(t, http.StatusCreated, s.do(t, "owner", "POST", templatesPath(botA, ch), orderTemplate(name)).Code)
	}
	keep := store.Item{Key: store.Key{PK: templatesPartition(botB), SK: "CHANNEL#ch_x#TEMPLATE#mtpl_x"}, Data: []byte(`{}`), Revision: 1}
	require.NoError(t, s.Store.Put(t.Context(), keep, store.MustNotExist))

	require.NoError(t, purge.Run(t.Context(), PurgeStep(s.Store, nil), purge.Payload{AccountID: s.Account.ID, BotID: botA}))
	page, err := s.Store.Query(t.Context(), store.Query{PK: templatesPartition(botA)})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	_, err = s.Store.Get(t.Context(), keep.Key)
	assert.NoError(t, err, "another bot's catalog stays")
}
