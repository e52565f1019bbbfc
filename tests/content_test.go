package tests

import (
	"encoding/json"
	"mime"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// problems returns the field of every problem in a validation_failed or content_invalid body.
func problems(t *testing.T, r resp) []string {
	t.Helper()
	var p struct {
		Errors []struct {
			Field   string `json:"field"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &p))
	out := []string{}
	for _, e := range p.Errors {
		out = append(out, e.Field+": "+e.Message)
	}
	return out
}

// A content document's whole life over HTTP, and test sends to a Telegram user and to an
// email address (the local process's mail sink).
func TestContentLifecycleAndTestSends(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s, tok, bot := c.s, c.s.demo.Token, c.s.demo.BotID
	base := "/api/bots/" + bot

	// A tester: a Telegram subscriber with the tester label and an email field.
	r := s.post(tok, base+"/fields", map[string]any{"name": "email", "type": "string"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	r = s.post(tok, base+"/fields", map[string]any{"name": "plan", "type": "string"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	ann := fake.User{ID: 5001, FirstName: "Ann"}
	r = s.post(tok, base+"/subscribers", map[string]any{"channel": "telegram", "external_id": "5001", "first_name": "Ann",
		"fields": map[string]any{"email": "ann@example.com", "plan": "Gold"}})
	require.Less(t, r.Status, 300, "%s", r.Body)
	sub := r.JSON(t)["id"].(string)
	r = s.post(tok, base+"/labels", map[string]any{"name": "Tester"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	r = s.post(tok, base+"/subscribers/"+sub+"/labels", map[string]any{"label_id": r.JSON(t)["id"]})
	require.Less(t, r.Status, 300, "%s", r.Body)

	r = s.get(tok, base+"/content/test-recipients")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/content/test-recipients", base+"/content/test-recipients", r)
	assert.Contains(t, string(r.Body), sub)
	assert.NotContains(t, string(r.Body), "ann@example.com")

	// Draft → validate (422 with every problem) → fix → publish.
	r = s.post(tok, base+"/content", map[string]any{"type": "message", "name": "Sale",
		"draft": map[string]any{"text": "Hi {{ subscriber.first_name | shout }}, {{ subscriber.fields.tier }}",
			"buttons": []any{map[string]any{"title": "Open", "url": "javascript:alert(1)"}}}})
	assert.Equal(t, 400, r.Status, "a link that is no http(s) URL is refused at once: %s", r.Body)
	assert.Equal(t, []string{"draft.buttons[0].url: must be an absolute http or https URL"}, problems(t, r))

	r = s.post(tok, base+"/content", map[string]any{"type": "message", "name": "Sale",
		"draft": map[string]any{"text": "Hi {{ subscriber.first_name | shout }}, {{ subscriber.fields.tier }}"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/content", base+"/content", r)
	doc := r.JSON(t)["id"].(string)
	path := base + "/content/" + doc

	r = s.post(tok, path+"/validate", map[string]any{})
	require.Equal(t, 422, r.Status, "%s", r.Body)
	assert.Equal(t, "content_invalid", r.Code(t))
	got := strings.Join(problems(t, r), "\n")
	assert.Contains(t, got, `unknown filter "shout"`)
	assert.Contains(t, got, `unknown merge field subscriber.fields.tier: the bot has no custom field "tier"`)
	r = s.post(tok, path+"/publish", map[string]any{"expected_revision": 1})
	assert.Equal(t, 422, r.Status, "publish checks as validate does: %s", r.Body)

	r = s.patch(tok, path+"/draft", map[string]any{"expected_revision": 1,
		"draft": map[string]any{"text": "Hi {{ subscriber.first_name | upcase }}, your plan is {{ subscriber.fields.plan | default: \"free\" }}"}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.patch(tok, path+"/draft", map[string]any{"expected_revision": 1, "name": "again"})
	assert.Equal(t, 409, r.Status, "a stale expected_revision: %s", r.Body)
	assert.Equal(t, "stale_revision", r.Code(t))
	r = s.post(tok, path+"/validate", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, []any{"subscriber.fields.plan", "subscriber.first_name"}, r.JSON(t)["merge_fields"])
	r = s.post(tok, path+"/publish", map[string]any{"expected_revision": 2})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/content/{documentID}/publish", path+"/publish", r)
	assert.Equal(t, float64(1), r.JSON(t)["published"].(map[string]any)["version"])

	// The test send reaches the Telegram user, rendered for them.
	r = s.post(tok, path+"/test-send", map[string]any{"subscriber_id": sub})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/content/{documentID}/test-send", path+"/test-send", r)
	assert.Equal(t, []string{"Hi ANN, your plan is Gold"}, texts(c.tg, ann.ID))

	// Clone, archive: the archived one changes and sends no more, the clone is a new draft.
	r = s.post(tok, path+"/clone", nil)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	clone := r.JSON(t)
	assert.Equal(t, "Sale (copy)", clone["name"])
	assert.Nil(t, clone["published"])
	r = s.post(tok, path+"/archive", map[string]any{"expected_revision": 3})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, true, r.JSON(t)["archived"])
	r = s.post(tok, path+"/test-send", map[string]any{"subscriber_id": sub})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "document_archived", r.Code(t))
	r = s.get(tok, base+"/content")
	require.Equal(t, 200, r.Status)
	assert.NotContains(t, string(r.Body), doc, "archived documents leave the default list")
	assert.Contains(t, string(r.Body), clone["id"].(string))
	r = s.get(tok, base+"/content?archived=true")
	assert.Contains(t, string(r.Body), doc)

	// An email test send lands in the mail sink as a MIME message to the tester's address.
	r = s.post(tok, base+"/content", map[string]any{"type": "email", "name": "Newsletter", "draft": map[string]any{
		"subject": "Новости для {{ subscriber.first_name }}", "html": "<h1>Hello {{ subscriber.first_name }}</h1><p>Plan: {{ subscriber.fields.plan }}</p>",
		"from": map[string]any{"name": "Acme", "address": "news@acme.example"}}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	email := r.JSON(t)["id"].(string)
	r = s.post(tok, base+"/content/"+email+"/test-send", map[string]any{"subscriber_id": sub})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, "email", r.JSON(t)["via"])
	files, err := filepath.Glob(filepath.Join(c.dir, "mail", "*.eml"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	info, err := os.Stat(files[0])
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "mail holds personal data: owner only")
	f, err := os.Open(files[0])
	require.NoError(t, err)
	defer f.Close()
	m, err := mail.ReadMessage(f)
	require.NoError(t, err)
	subject, err := new(mime.WordDecoder).DecodeHeader(m.Header.Get("Subject"))
	require.NoError(t, err)
	assert.Equal(t, "[Test] Новости для Ann", subject)
	to, err := mail.ParseAddress(m.Header.Get("To"))
	require.NoError(t, err)
	assert.Equal(t, "ann@example.com", to.Address)
	assert.True(t, strings.HasPrefix(m.Header.Get("Content-Type"), "multipart/alternative"), m.Header.Get("Content-Type"))

	// Preview renders without sending, sanitized.
	r = s.post(tok, base+"/content/"+email+"/preview", map[string]any{"sample": map[string]any{"first_name": "<script>x</script>"}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/content/{documentID}/preview", base+"/content/"+email+"/preview", r)
	assert.NotContains(t, string(r.Body), "<script>")

	// validate and preview change nothing, but are audited.
	r = s.get(tok, "/api/audit-events?limit=100")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	for _, route := range []string{"/validate", "/preview", "/test-send"} {
		assert.Contains(t, string(r.Body), route, "the audit trail records %s", route)
	}
}

// Test sends are rate limited per bot: 429 with Retry-After.
func TestContentTestSendRateLimit(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s, tok, base := c.s, c.s.demo.Token, "/api/bots/"+c.s.demo.BotID
	r := s.post(tok, base+"/subscribers", map[string]any{"channel": "telegram", "external_id": "6001", "first_name": "Bo"})
	require.Less(t, r.Status, 300, "%s", r.Body)
	sub := r.JSON(t)["id"].(string)
	r = s.post(tok, base+"/labels", map[string]any{"name": "tester"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	r = s.post(tok, base+"/subscribers/"+sub+"/labels", map[string]any{"label_id": r.JSON(t)["id"]})
	require.Less(t, r.Status, 300, "%s", r.Body)
	r = s.post(tok, base+"/content", map[string]any{"type": "message", "name": "Ping", "draft": map[string]any{"text": "ping"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)
	// 21 sends take far less than a minute, so they fall in at most two windows of 10: at
	// least one is refused, whatever the clock.
	limited := 0
	for range 21 {
		r = s.post(tok, base+"/content/"+doc+"/test-send", map[string]any{"subscriber_id": sub})
		if r.Status == 429 {
			limited++
			assert.NotEmpty(t, r.Header.Get("Retry-After"))
			assert.Equal(t, "rate_limited", r.Code(t))
			conforms(t, "POST", "/api/bots/{botID}/content/{documentID}/test-send", base+"/content/"+doc+"/test-send", r)
		} else {
			require.Equal(t, 200, r.Status, "%s", r.Body)
		}
	}
	assert.GreaterOrEqual(t, limited, 1)
	assert.Len(t, texts(c.tg, 6001), 21-limited, "a refused send never reaches the channel")
}
