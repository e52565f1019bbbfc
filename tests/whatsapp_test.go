package tests

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

// whatsappVerifyToken is what Meta would present when the webhook URL is registered.
const whatsappVerifyToken = "verify-me-0123456789"

// startWhatsApp runs the local process against a fake Graph API, with the Meta app's
// secrets in the environment (never flags). The channel's access token counts as shown
// once (the client sent it): a response that echoes it, or a log line, fails the test.
func startWhatsApp(t *testing.T) (*server, *fakewhatsapp.Server) {
	t.Helper()
	wa := fakewhatsapp.New(t)
	s := startWithEnv(t, t.TempDir(),
		[]string{"WHATSAPP_APP_SECRET=" + fakewhatsapp.AppSecret, "WHATSAPP_VERIFY_TOKEN=" + whatsappVerifyToken},
		"--whatsapp-base-url", wa.URL(), "--whatsapp-app-id", fakewhatsapp.AppID)
	s.mu.Lock()
	s.secrets[fakewhatsapp.AccessToken] = 1
	s.mu.Unlock()
	t.Cleanup(func() {
		for _, secret := range []string{fakewhatsapp.AppSecret, whatsappVerifyToken} {
			assert.NotContains(t, s.stderr.String(), secret, "the Meta app's secrets stay out of the log")
		}
	})
	return s, wa
}

func (s *server) put(token, path string, body any) resp {
	return s.do(req{Method: http.MethodPut, Path: path, Token: token, Body: body})
}

// upload POSTs a file as the body of the media route.
func (s *server) upload(token, path, contentType string, body []byte) resp {
	return s.do(req{Method: http.MethodPost, Path: path, Token: token, Body: body, Headers: map[string]string{"Content-Type": contentType}})
}

// Files of each header type: their signatures and some bytes.
func file(kind string, size int) []byte {
	head := map[string]string{"png": "\x89PNG\r\n\x1a\n", "mp4": "\x00\x00\x00\x18ftypmp42", "pdf": "%PDF-1.7\n"}[kind]
	return append([]byte(head), bytes.Repeat([]byte{7}, size-len(head))...)
}

func TestWhatsAppChannelAndTemplates(t *testing.T) {
	t.Parallel()
	s, wa := startWhatsApp(t)
	tok, bot := s.demo.Token, s.demo.BotID
	channels := "/api/bots/" + bot + "/channels"

	// The capability matrix, built from the adapters' declarations.
	r := s.get(tok, "/api/channels/capabilities")
	require.Equal(t, http.StatusOK, r.Status)
	var whats map[string]any
	for _, c := range r.JSON(t)["data"].([]any) {
		if c.(map[string]any)["type"] == "whatsapp" {
			whats = c.(map[string]any)
		}
	}
	require.NotNil(t, whats, "whatsapp in the matrix")
	assert.Equal(t, true, whats["connectable_over_rest"])
	assert.EqualValues(t, 86400, whats["session_window_seconds"])
	assert.EqualValues(t, 4096, whats["max_text_length"])
	assert.Len(t, whats["template_header_media"], 3)
	assert.Equal(t, http.StatusUnauthorized, s.get("", "/api/channels/capabilities").Status)

	// Connect: refused credentials, malformed ones, then the fake's.
	creds := wa.Credentials()
	bad := map[string]any{"access_token": "EAAJnotvalid", "phone_number_id": creds["phone_number_id"], "business_account_id": creds["business_account_id"]}
	r = s.post(tok, channels, map[string]any{"type": "whatsapp", "credentials": bad})
	assert.Equal(t, http.StatusUnprocessableEntity, r.Status)
	assert.Equal(t, "credentials_rejected", r.Code(t))
	r = s.post(tok, channels, map[string]any{"type": "whatsapp", "credentials": map[string]any{"access_token": "x"}})
	assert.Equal(t, "validation_failed", r.Code(t))
	r = s.post(tok, channels, map[string]any{"type": "whatsapp", "credentials": creds})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	ch := r.JSON(t)
	chID := ch["id"].(string)
	assert.Equal(t, fakewhatsapp.DisplayPhoneNumber, ch["name"])
	assert.Equal(t, channels+"/"+chID, r.Header.Get("Location"))
	r = s.post(tok, channels, map[string]any{"type": "whatsapp", "credentials": creds})
	assert.Equal(t, "channel_exists", r.Code(t))
	list := s.get(tok, channels).JSON(t)["data"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, fakewhatsapp.PhoneNumberID, list[0].(map[string]any)["settings"].(map[string]any)["phone_number_id"])

	// Create: submitted for review, pending.
	templates := channels + "/" + chID + "/templates"
	body := func(name, lang string) map[string]any {
		return map[string]any{"name": name, "language": lang, "category": "utility", "components": []any{
			map[string]any{"type": "BODY", "text": "Hi {{1}}, order {{2}} ships today.", "example": map[string]any{"body_text": []any{[]any{"Ann", "#42"}}}},
		}}
	}
	r = s.post(tok, templates, body("order_update", "en_US"))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	order := r.JSON(t)
	assert.Equal(t, "pending", order["status"])
	onFake, ok := wa.Template("order_update", "en_US")
	require.True(t, ok)
	assert.Equal(t, "PENDING", onFake.Status)

	// Approved on the provider; a sync brings it here.
	require.NoError(t, wa.Approve("order_update", "en_US"))
	r = s.post(tok, templates+"/sync", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.JSONEq(t, `{"created":0,"updated":1,"deleted":0,"unchanged":0}`, string(r.Body))
	approved := s.get(tok, templates+"?status=approved").JSON(t)["data"].([]any)
	require.Len(t, approved, 1)
	assert.Equal(t, order["id"], approved[0].(map[string]any)["id"])

	// The review outcome also arrives by the signed webhook.
	r = s.post(tok, templates, body("order_update", "de"))
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	german := r.JSON(t)["id"].(string)
	require.NoError(t, wa.Reject("order_update", "de", "INVALID_FORMAT"))
	forged, err := wa.TemplateStatusUpdate("order_update", "de")
	require.NoError(t, err)
	r = s.do(req{Method: "POST", Path: "/webhooks/whatsapp", Body: forged, Headers: map[string]string{"X-Hub-Signature-256": "sha256=" + strings.Repeat("0", 64)}})
	assert.Equal(t, http.StatusUnauthorized, r.Status, "a forged signature changes nothing")
	assert.Equal(t, "pending", s.get(tok, templates+"?language=de").JSON(t)["data"].([]any)[0].(map[string]any)["status"])
	status, err := wa.DeliverTemplateStatus(s.base+"/webhooks/whatsapp", "order_update", "de")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	got := s.get(tok, templates+"?language=de").JSON(t)["data"].([]any)[0].(map[string]any)
	assert.Equal(t, german, got["id"])
	assert.Equal(t, "rejected", got["status"])
	assert.Equal(t, "INVALID_FORMAT", got["rejection_reason"])
	// Meta's subscription check of the webhook URL.
	r = s.get("", "/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token="+whatsappVerifyToken+"&hub.challenge=1158201444")
	assert.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, "1158201444", string(r.Body))
	assert.Equal(t, http.StatusForbidden, s.get("", "/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1").Status)

	// Filters and paging.
	r = s.get(tok, templates+"?limit=1")
	page := r.JSON(t)
	require.Len(t, page["data"], 1)
	next, _ := page["next_cursor"].(string)
	require.NotEmpty(t, next)
	second := s.get(tok, templates+"?limit=1&cursor="+next).JSON(t)
	require.Len(t, second["data"], 1)
	assert.Equal(t, german, second["data"].([]any)[0].(map[string]any)["id"])
	assert.Equal(t, "invalid_cursor", s.get(tok, templates+"?limit=1&status=approved&cursor="+next).Code(t))
	assert.Len(t, s.get(tok, templates+"?status=rejected").JSON(t)["data"], 1)
	assert.Equal(t, "invalid_parameter", s.get(tok, templates+"?status=bogus").Code(t))

	// Edit the rejected one: back to review, next revision.
	edit := map[string]any{"expected_revision": got["revision"], "components": []any{map[string]any{"type": "BODY", "text": "Hallo {{1}}!", "example": map[string]any{"body_text": []any{[]any{"Ann"}}}}}}
	r = s.put(tok, templates+"/"+german, edit)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "pending", r.JSON(t)["status"])
	assert.EqualValues(t, got["revision"].(float64)+1, r.JSON(t)["revision"])
	r = s.put(tok, templates+"/"+german, edit)
	assert.Equal(t, "stale_revision", r.Code(t))

	// Delete, here and at the provider.
	r = s.del(tok, templates+"/"+german)
	assert.Equal(t, http.StatusNoContent, r.Status)
	_, ok = wa.Template("order_update", "de")
	assert.False(t, ok)

	// Disconnect: the channel and its catalog go.
	assert.Equal(t, http.StatusNoContent, s.del(tok, channels+"/"+chID).Status)
	assert.Empty(t, s.get(tok, channels).JSON(t)["data"])
	assert.Equal(t, http.StatusNotFound, s.get(tok, templates).Status)
	assert.NotContains(t, s.stderr.String(), fakewhatsapp.AccessToken)
}

func TestWhatsAppHeaderMedia(t *testing.T) {
	t.Parallel()
	s, wa := startWhatsApp(t)
	tok := s.demo.Token
	r := s.post(tok, "/api/bots/"+s.demo.BotID+"/channels", map[string]any{"type": "whatsapp", "credentials": wa.Credentials()})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	templates := "/api/bots/" + s.demo.BotID + "/channels/" + r.JSON(t)["id"].(string) + "/templates"
	media := templates + "/media"

	// One of each type, as the body; the document larger than a JSON body may be.
	handles := map[string]string{}
	for _, tc := range []struct {
		kind, mime, typ string
		size            int
	}{{"png", "image/png", "image", 2048}, {"mp4", "video/mp4", "video", 1 << 20}, {"pdf", "application/pdf", "document", 3 << 20}} {
		r := s.upload(tok, media, tc.mime, file(tc.kind, tc.size))
		require.Equal(t, http.StatusOK, r.Status, "%s: %s", tc.mime, r.Body)
		m := r.JSON(t)
		assert.Equal(t, tc.typ, m["type"])
		assert.EqualValues(t, tc.size, m["size"])
		handles[tc.typ] = m["handle"].(string)
	}
	require.Len(t, wa.Uploads(), 3)
	assert.EqualValues(t, 3<<20, wa.Uploads()[2].Length)

	// Too large for its type: 413, nothing uploaded.
	r = s.upload(tok, media, "image/png", file("png", 5<<20+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
	assert.Equal(t, "media_too_large", r.Code(t))
	assert.EqualValues(t, 5<<20, r.JSON(t)["max_bytes"])
	r = s.upload(tok, media, "image/gif", []byte("GIF89a"))
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status)
	r = s.upload(tok, media, "application/pdf", file("png", 100))
	assert.Equal(t, "invalid_media", r.Code(t))
	assert.Len(t, wa.Uploads(), 3)

	// By URL: a file the server downloads (here from this machine; on AWS public only).
	big := file("mp4", 6<<20)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/promo.mp4" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "video/mp4")
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		w.Write(big)
	}))
	t.Cleanup(files.Close)
	r = s.post(tok, media, map[string]any{"url": files.URL + "/promo.mp4"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.EqualValues(t, len(big), r.JSON(t)["size"])
	assert.Equal(t, "promo.mp4", wa.Uploads()[3].FileName)
	r = s.post(tok, media, map[string]any{"url": files.URL + "/missing.mp4"})
	assert.Equal(t, "media_fetch_failed", r.Code(t))

	// A handle makes a media header the provider accepts.
	tpl := map[string]any{"name": "spring_sale", "language": "en", "category": "marketing", "components": []any{
		map[string]any{"type": "HEADER", "format": "VIDEO", "example": map[string]any{"header_handle": []any{handles["video"]}}},
		map[string]any{"type": "BODY", "text": "Spring sale: 20% off everything."},
	}}
	r = s.post(tok, templates, tpl)
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Equal(t, "pending", r.JSON(t)["status"])
}

// Access to the channel routes: scope, right, tenancy, token kind; strict bodies.
func TestWhatsAppAccess(t *testing.T) {
	t.Parallel()
	s, wa := startWhatsApp(t)
	bot := s.demo.BotID
	channels := "/api/bots/" + bot + "/channels"
	r := s.post(s.demo.Token, channels, map[string]any{"type": "whatsapp", "credentials": wa.Credentials()})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	templates := channels + "/" + r.JSON(t)["id"].(string) + "/templates"

	reader := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	member := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "")["user_id"]
	memberTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", member, "--scopes", "bots:*")["token"]
	botTok := s.post(s.demo.Token, "/api/bots/"+bot+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)
	other := s.newAccount("Other")

	tpl := map[string]any{"name": "hello", "language": "en", "category": "utility", "components": []any{map[string]any{"type": "BODY", "text": "Hello"}}}
	assert.Equal(t, http.StatusOK, s.get(reader, templates).Status)
	assert.Equal(t, "insufficient_scope", s.post(reader, templates, tpl).Code(t))
	assert.Equal(t, "insufficient_scope", s.post(reader, channels, map[string]any{"type": "whatsapp", "credentials": wa.Credentials()}).Code(t))
	assert.Equal(t, "missing_right", s.post(memberTok, templates, tpl).Code(t))
	assert.Equal(t, "missing_right", s.post(memberTok, templates+"/sync", nil).Code(t))
	assert.Equal(t, http.StatusOK, s.get(memberTok, templates).Status)
	assert.Equal(t, http.StatusNotFound, s.get(other.Token, templates).Status, "another account's bot")
	assert.Equal(t, http.StatusNotFound, s.get(other.Token, "/api/bots/"+other.Bot+"/channels/"+strings.Split(templates, "/")[5]+"/templates").Status,
		"a channel of another account's bot")
	r = s.post(botTok, templates, tpl)
	assert.Equal(t, http.StatusCreated, r.Status, "bot tokens manage their bot's templates: %s", r.Body)
	assert.Equal(t, "insufficient_scope", s.get(botTok, "/api/channels/capabilities").Code(t), "an account-level route")
	assert.Equal(t, http.StatusUnauthorized, s.get("", templates).Status)

	r = s.post(s.demo.Token, templates, `{"name":"x","language":"en","category":"utility","components":[{"type":"BODY","text":"x"}],"status":"approved"}`)
	assert.Equal(t, "unknown_field", r.Code(t))
	r = s.do(req{Method: "POST", Path: templates, Token: s.demo.Token, Body: []byte("{}"), Headers: map[string]string{"Content-Type": "text/plain"}})
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status)
	r = s.post(s.demo.Token, templates, strings.Repeat(" ", 1<<20+1))
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Status)

	// Every mutation above is in the audit trail, failures included.
	events := s.get(s.demo.Token, "/api/audit-events?limit=200").JSON(t)["data"].([]any)
	statuses := map[float64]bool{}
	for _, e := range events {
		if e.(map[string]any)["route"] == "POST /api/bots/{botID}/channels/{channelID}/templates" {
			statuses[e.(map[string]any)["status"].(float64)] = true
		}
	}
	for _, want := range []float64{201, 400, 403, 413, 415} {
		assert.True(t, statuses[want], "an audit event with status %v", want)
	}
}

// A send_template step on the real local process: publishing checks the step against the
// WhatsApp channel's stored catalog (unknown: 422; pending: a warning), and a subscriber whose
// 24-hour window has closed gets the approved template with its parameters resolved from
// their custom fields, while a free-form message to them fails its run (outside_window). The
// runs start from signed inbound messages; the fake keeps the window closed regardless (in
// production a run meets a closed window after a long wait step, or when a label added over
// the API starts it): the provider decides, the runtime does not track the window.
func TestWhatsAppTemplateStepOutsideTheWindow(t *testing.T) {
	t.Parallel()
	s, wa := startWhatsApp(t)
	tok, bot := s.demo.Token, s.demo.BotID
	api := "/api/bots/" + bot
	r := s.post(tok, api+"/channels", map[string]any{"type": "whatsapp", "credentials": wa.Credentials()})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	templates := api + "/channels/" + r.JSON(t)["id"].(string) + "/templates"
	field := func(name string) string {
		r := s.post(tok, api+"/fields", map[string]any{"name": name, "type": "string"})
		require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
		return r.JSON(t)["id"].(string)
	}
	nickname, orderNo := field("nickname"), field("order_no")

	// The flow names the template before the catalog has it: a draft may, a publish may not.
	r = s.post(tok, api+"/reactions", map[string]any{"name": "Order status", "trigger": map[string]any{"type": "keyword", "keywords": []any{"status"}},
		"steps": []any{
			map[string]any{"id": "tpl", "type": "send_template", "template_name": "order_update", "template_language": "en_US",
				"params":        []any{map[string]any{"field_id": nickname, "default": "there"}, map[string]any{"field_id": orderNo}},
				"fallback_text": "Your order ships today."},
			map[string]any{"id": "end", "type": "end"},
		}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	status := api + "/reactions/" + r.JSON(t)["id"].(string)
	r = s.post(tok, status+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, http.StatusUnprocessableEntity, r.Status, "%s", r.Body)
	assert.Equal(t, "invalid_steps", r.Code(t))
	assert.Equal(t, "steps[0].template_name", r.JSON(t)["errors"].([]any)[0].(map[string]any)["field"])

	// Submitted for review: the publish goes through, with a warning.
	r = s.post(tok, templates, map[string]any{"name": "order_update", "language": "en_US", "category": "utility", "components": []any{
		map[string]any{"type": "BODY", "text": "Hi {{1}}, order {{2}} ships today.", "example": map[string]any{"body_text": []any{[]any{"Ann", "#42"}}}},
	}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	r = s.post(tok, status+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/bots/{botID}/reactions/{reactionID}/publish", status+"/publish", r)
	pub := r.JSON(t)
	assert.EqualValues(t, 1, pub["published_version"])
	require.Len(t, pub["warnings"], 1)
	assert.Equal(t, "steps[0].template_name", pub["warnings"].([]any)[0].(map[string]any)["field"])

	// Approved at the provider and synced: publishing again changes nothing and warns no more.
	require.NoError(t, wa.Approve("order_update", "en_US"))
	require.Equal(t, http.StatusOK, s.post(tok, templates+"/sync", nil).Status)
	r = s.post(tok, status+"/publish", map[string]any{"expected_revision": 2})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.EqualValues(t, 1, r.JSON(t)["published_version"])
	assert.Empty(t, r.JSON(t)["warnings"])

	r = s.post(tok, api+"/reactions", map[string]any{"name": "Hello", "trigger": map[string]any{"type": "keyword", "keywords": []any{"hello"}},
		"steps": []any{map[string]any{"id": "hi", "type": "send_text", "text": "Hello!"}}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.Equal(t, http.StatusOK, s.post(tok, api+"/reactions/"+r.JSON(t)["id"].(string)+"/publish", map[string]any{"expected_revision": 1}).Status)

	// The subscriber, with an order number, last wrote more than 24 hours ago.
	const waID = "4915112345678"
	r = s.post(tok, api+"/subscribers", map[string]any{"channel": "whatsapp", "external_id": waID, "fields": map[string]any{"order_no": "A-42"}})
	require.Contains(t, []int{http.StatusOK, http.StatusCreated}, r.Status, "%s", r.Body)
	sub := r.JSON(t)["id"].(string)
	wa.CloseWindow(waID)
	deliver := func(text string) {
		t.Helper()
		body, _ := fakewhatsapp.TextMessage(fakewhatsapp.PhoneNumberID, waID, "Ann", text)
		code, err := wa.Deliver(s.base+"/webhooks/whatsapp", body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, code)
	}
	runs := func() []map[string]any {
		r := s.get(tok, api+"/subscribers/"+sub+"/executions")
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var out []map[string]any
		for _, x := range r.JSON(t)["data"].([]any) {
			out = append(out, x.(map[string]any))
		}
		return out
	}

	deliver("status")
	eventually(t, 10*time.Second, "the template message", func() bool { return len(wa.Messages()) >= 1 })
	sent := wa.Messages()
	require.Len(t, sent, 1)
	assert.Equal(t, "template", sent[0].Type)
	assert.Equal(t, waID, sent[0].To)
	var msg struct {
		Template struct {
			Name     string `json:"name"`
			Language struct {
				Code string `json:"code"`
			} `json:"language"`
			Components []struct {
				Type       string `json:"type"`
				Parameters []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"parameters"`
			} `json:"components"`
		} `json:"template"`
	}
	require.NoError(t, json.Unmarshal(sent[0].Body, &msg))
	assert.Equal(t, "order_update", msg.Template.Name)
	assert.Equal(t, "en_US", msg.Template.Language.Code)
	require.Len(t, msg.Template.Components, 1)
	assert.Equal(t, "body", msg.Template.Components[0].Type)
	var params []string
	for _, p := range msg.Template.Components[0].Parameters {
		params = append(params, p.Text)
	}
	assert.Equal(t, []string{"there", "A-42"}, params, "the default for the empty nickname, the subscriber's order number")

	eventually(t, 10*time.Second, "the run completes", func() bool {
		list := runs()
		return len(list) == 1 && list[0]["status"] == "completed"
	})
	r = s.get(tok, api+"/executions/"+runs()[0]["id"].(string))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/executions/{executionID}", api+"/executions/"+runs()[0]["id"].(string), r)
	step := r.JSON(t)["steps"].([]any)[0].(map[string]any)
	assert.Equal(t, "send_template", step["type"])
	assert.Equal(t, "order_update", step["input"].(map[string]any)["template_name"])
	assert.Equal(t, "en_US", step["input"].(map[string]any)["template_language"])
	assert.Equal(t, sent[0].ID, step["outcome"].(map[string]any)["message_id"])
	assert.NotContains(t, string(r.Body), "A-42", "the subscriber's value stays out of the trace")

	// A free-form message cannot reach them: that run fails, as WhatsApp says.
	deliver("hello")
	eventually(t, 10*time.Second, "the free-form run fails", func() bool {
		list := runs()
		return len(list) == 2 && list[0]["status"] == "failed"
	})
	failed := runs()[0]
	assert.Equal(t, "outside_window", failed["error"].(map[string]any)["kind"])
	assert.Equal(t, "131047", failed["error"].(map[string]any)["provider_code"])
	assert.Len(t, wa.Messages(), 1, "nothing more reached the subscriber")
}

// Publishing warns, per connected channel, about a step that channel cannot send as it is
// (a link button beside a reply button on WhatsApp), and a run that reaches it anyway fails
// with the reason in its trace, not only in the server's log.
func TestPublishWarnsAboutWhatAChannelCannotSend(t *testing.T) {
	t.Parallel()
	s, wa := startWhatsApp(t)
	tok, bot := s.demo.Token, s.demo.BotID
	api := "/api/bots/" + bot
	r := s.post(tok, api+"/channels", map[string]any{"type": "whatsapp", "credentials": wa.Credentials()})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	channelID := r.JSON(t)["id"].(string)

	r = s.post(tok, api+"/reactions", map[string]any{"name": "Menu", "trigger": map[string]any{"type": "keyword", "keywords": []any{"menu"}},
		"steps": []any{
			map[string]any{"id": "menu", "type": "buttons", "text": "What next?", "style": "inline", "buttons": []any{
				map[string]any{"title": "Our shop", "url": "https://shop.example.com"},
				map[string]any{"title": "Talk to us", "payload": "talk"},
			}},
		}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	reaction := api + "/reactions/" + r.JSON(t)["id"].(string)
	r = s.post(tok, reaction+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/bots/{botID}/reactions/{reactionID}/publish", reaction+"/publish", r)
	warnings := r.JSON(t)["warnings"].([]any)
	require.Len(t, warnings, 1, "%s", r.Body)
	w := warnings[0].(map[string]any)
	assert.Equal(t, "steps[0].buttons", w["field"])
	assert.Equal(t, channelID, w["channel_id"])
	assert.Equal(t, "whatsapp", w["channel_type"])
	assert.Contains(t, w["message"], "link button")

	const waID = "4915100000001"
	body, _ := fakewhatsapp.TextMessage(fakewhatsapp.PhoneNumberID, waID, "Ann", "menu")
	code, err := wa.Deliver(s.base+"/webhooks/whatsapp", body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, code)
	var failed map[string]any
	eventually(t, 10*time.Second, "the run fails at the step", func() bool {
		r := s.get(tok, api+"/subscribers?channel=whatsapp&external_id="+waID)
		data, _ := r.JSON(t)["data"].([]any)
		if len(data) != 1 {
			return false
		}
		r = s.get(tok, api+"/subscribers/"+data[0].(map[string]any)["id"].(string)+"/executions")
		runs, _ := r.JSON(t)["data"].([]any)
		if len(runs) == 1 && runs[0].(map[string]any)["status"] == "failed" {
			failed = runs[0].(map[string]any)
		}
		return failed != nil
	})
	e := failed["error"].(map[string]any)
	assert.Equal(t, "rejected", e["kind"])
	assert.Contains(t, e["provider_reason"], "link button alone", "the trace says why")
	assert.Empty(t, wa.Messages(), "nothing reached the subscriber")
}
