package tests

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBotLifecycle(t *testing.T) {
	t.Parallel()
	s := start(t)
	r := s.post(s.demo.Token, "/api/bots", map[string]any{
		"name":     "Support",
		"settings": map[string]any{"timezone": "Europe/Berlin", "default_locale": "de", "supported_locales": []string{"de", "en"}},
	})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	b := r.JSON(t)
	id := b["id"].(string)
	assert.Equal(t, "/api/bots/"+id, r.Header.Get("Location"))
	assert.Equal(t, float64(1), b["revision"])
	assert.Equal(t, map[string]any{"timezone": "Europe/Berlin", "default_locale": "de", "supported_locales": []any{"de", "en"}, "session_timeout_minutes": float64(30)}, b["settings"])

	got := s.get(s.demo.Token, "/api/bots/"+id)
	require.Equal(t, http.StatusOK, got.Status)
	assert.Equal(t, b, got.JSON(t))

	// PATCH replaces the given settings fields and keeps the others.
	r = s.patch(s.demo.Token, "/api/bots/"+id, map[string]any{"expected_revision": 1, "settings": map[string]any{"session_timeout_minutes": 90}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	p := r.JSON(t)
	assert.Equal(t, float64(2), p["revision"])
	assert.Equal(t, "Europe/Berlin", p["settings"].(map[string]any)["timezone"])
	assert.Equal(t, float64(90), p["settings"].(map[string]any)["session_timeout_minutes"])

	// 409: the revision moved on; the body says where it is now.
	r = s.patch(s.demo.Token, "/api/bots/"+id, map[string]any{"expected_revision": 1, "name": "Late"})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "stale_revision", r.Code(t))
	assert.Equal(t, float64(2), r.JSON(t)["current_revision"])
	assert.Equal(t, "Support", s.get(s.demo.Token, "/api/bots/"+id).JSON(t)["name"], "a stale write changes nothing")

	// DELETE with a stale expected_revision is refused; with the right one, or none, it deletes.
	r = s.del(s.demo.Token, "/api/bots/"+id+"?expected_revision=1")
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "stale_revision", r.Code(t))
	r = s.del(s.demo.Token, "/api/bots/"+id+"?expected_revision=zero")
	assert.Equal(t, http.StatusBadRequest, r.Status)
	assert.Equal(t, "invalid_parameter", r.Code(t))
	assert.Equal(t, http.StatusNoContent, s.del(s.demo.Token, "/api/bots/"+id+"?expected_revision=2").Status)
	assert.Equal(t, http.StatusNotFound, s.get(s.demo.Token, "/api/bots/"+id).Status)
	assert.Equal(t, http.StatusNotFound, s.del(s.demo.Token, "/api/bots/"+id).Status)
}

// Two clients race on the same revision: exactly one wins, the other hears 409.
func TestConcurrentPatchOneWins(t *testing.T) {
	t.Parallel()
	s := start(t)
	path := "/api/bots/" + s.demo.BotID
	const n = 8
	statuses := make(chan int, n)
	for i := 0; i < n; i++ {
		go func() {
			statuses <- s.patch(s.demo.Token, path, map[string]any{"expected_revision": 1, "name": fmt.Sprintf("writer %d", i)}).Status
		}()
	}
	count := map[int]int{}
	for i := 0; i < n; i++ {
		count[<-statuses]++
	}
	assert.Equal(t, map[int]int{http.StatusOK: 1, http.StatusConflict: n - 1}, count)
	assert.Equal(t, float64(2), s.get(s.demo.Token, path).JSON(t)["revision"])
}

func TestBadRequests400(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := "/api/bots/" + s.demo.BotID
	cases := []struct {
		name, method, path string
		body               any
		code, field        string
	}{
		{"unknown top-level field", "POST", "/api/bots", `{"name":"x","colour":"red"}`, "unknown_field", "colour"},
		{"unknown nested field", "POST", "/api/bots", `{"name":"x","settings":{"tz":"UTC"}}`, "unknown_field", "settings.tz"},
		{"unknown field on patch", "PATCH", bot, `{"expected_revision":1,"revision":5}`, "unknown_field", "revision"},
		{"field name in another case", "POST", "/api/bots", `{"Name":"x"}`, "unknown_field", "Name"},
		{"duplicate field", "POST", "/api/bots", `{"name":"x","name":"y"}`, "duplicate_field", "name"},
		{"wrong type", "POST", "/api/bots", `{"name":42}`, "invalid_body", "name"},
		{"wrong nested type", "PATCH", bot, `{"expected_revision":1,"settings":{"timezone":7}}`, "invalid_body", "settings.timezone"},
		{"wrong type in array", "POST", "/api/bots", `{"name":"x","settings":{"supported_locales":[1]}}`, "invalid_body", "settings.supported_locales"},
		{"revision not an integer", "PATCH", bot, `{"expected_revision":1.5}`, "invalid_body", "expected_revision"},
		{"malformed JSON", "POST", "/api/bots", `{"name":`, "invalid_body", ""},
		{"not JSON at all", "POST", "/api/bots", `name=x`, "invalid_body", ""},
		{"trailing brace", "POST", "/api/bots", `{"name":"x"}}`, "invalid_body", ""},
		{"two documents", "POST", "/api/bots", `{"name":"x"} {"name":"y"}`, "invalid_body", ""},
		{"empty body", "POST", "/api/bots", ``, "invalid_body", ""},
		{"array body", "POST", "/api/bots", `[]`, "invalid_body", ""},
		{"missing name", "POST", "/api/bots", `{}`, "validation_failed", ""},
		{"blank name", "POST", "/api/bots", `{"name":"   "}`, "validation_failed", ""},
		{"unknown time zone", "POST", "/api/bots", `{"name":"x","settings":{"timezone":"Mars/Olympus"}}`, "validation_failed", ""},
		{"bad locale", "POST", "/api/bots", `{"name":"x","settings":{"default_locale":"english"}}`, "validation_failed", ""},
		{"default locale not supported", "POST", "/api/bots", `{"name":"x","settings":{"default_locale":"de","supported_locales":["en"]}}`, "validation_failed", ""},
		{"session timeout out of range", "PATCH", bot, `{"expected_revision":1,"settings":{"session_timeout_minutes":0}}`, "validation_failed", ""},
		{"missing expected_revision", "PATCH", bot, `{"name":"x"}`, "validation_failed", ""},
		{"PAT without expiry", "POST", "/api/personal-access-tokens", `{"name":"x","scopes":["bots:read"]}`, "validation_failed", ""},
		{"PAT with unknown scope", "POST", "/api/personal-access-tokens", `{"name":"x","scopes":["bots:fly"],"expires_in_days":1}`, "validation_failed", ""},
		{"PAT expiring in two years", "POST", "/api/personal-access-tokens", `{"name":"x","scopes":["bots:read"],"expires_at":"2099-01-01T00:00:00Z"}`, "validation_failed", ""},
		{"PAT expiry in the past", "POST", "/api/personal-access-tokens", `{"name":"x","scopes":["bots:read"],"expires_at":"2020-01-01T00:00:00Z"}`, "validation_failed", ""},
		{"PAT expiry not RFC 3339", "POST", "/api/personal-access-tokens", `{"name":"x","scopes":["bots:read"],"expires_at":"tomorrow"}`, "validation_failed", ""},
		{"PAT both expiry forms", "POST", "/api/personal-access-tokens", `{"name":"x","scopes":["bots:read"],"expires_in_days":1,"expires_at":"2027-01-01T00:00:00Z"}`, "validation_failed", ""},
		{"bot token without name", "POST", bot + "/api-tokens", `{}`, "validation_failed", ""},
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
	// Nothing was created by any of them.
	assert.Len(t, s.get(s.demo.Token, "/api/bots").JSON(t)["data"], 1)
}

func TestBodyLimits(t *testing.T) {
	t.Parallel()
	s := start(t)
	big := `{"name":"` + strings.Repeat("a", 1<<20) + `"}`
	r := s.post(s.demo.Token, "/api/bots", big)
	assert.Equal(t, http.StatusRequestEntityTooLarge, r.Status)
	assert.Equal(t, "body_too_large", r.Code(t))

	r = s.do(req{Method: "POST", Path: "/api/bots", Token: s.demo.Token, Body: `name=x`, Headers: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}})
	assert.Equal(t, http.StatusUnsupportedMediaType, r.Status)
	assert.Equal(t, "unsupported_media_type", r.Code(t))

	r = s.do(req{Method: "PUT", Path: "/api/bots", Token: s.demo.Token})
	assert.Equal(t, http.StatusMethodNotAllowed, r.Status)
	assert.Equal(t, "method_not_allowed", r.Code(t))
	assert.Equal(t, "GET, POST", r.Header.Get("Allow"))
}

// The reported attack: 100,000 '[' then ']' (and 1 MiB of '[') to POST /api/bots with a
// valid token grew the process to 23 GB. Now each is a 400 naming the limit, and the
// process's peak resident memory (VmHWM) grows by less than 50 MB over all of them.
func TestDeeplyNestedBodies(t *testing.T) {
	t.Parallel()
	s := start(t)
	require.Equal(t, http.StatusOK, s.get(s.demo.Token, "/api/bots").Status) // warm
	before := peakRSS(t, s.cmd.Process.Pid)
	for _, body := range []string{
		strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000),
		strings.Repeat("[", 1<<20),
		`{"name":"x","settings":` + strings.Repeat(`{"a":`, 200_000),
	} {
		r := s.post(s.demo.Token, "/api/bots", body)
		require.Equal(t, http.StatusBadRequest, r.Status, "%.200s", r.Body)
		assert.Equal(t, "invalid_body", r.Code(t))
		assert.Contains(t, string(r.Body), "64 levels")
		assert.EqualValues(t, 64, r.JSON(t)["max_depth"])
	}
	grew := peakRSS(t, s.cmd.Process.Pid) - before
	t.Logf("peak RSS grew by %d KB", grew>>10)
	assert.Less(t, grew, int64(50<<20))
}

// peakRSS reads the process's peak resident set size (VmHWM) from /proc.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

func TestPaginationAndCursors(t *testing.T) {
	t.Parallel()
	s := start(t)
	want := map[string]bool{s.demo.BotID: true}
	for i := 0; i < 6; i++ {
		want[s.post(s.demo.Token, "/api/bots", map[string]any{"name": fmt.Sprintf("bot %d", i)}).JSON(t)["id"].(string)] = true
	}
	seen := map[string]int{}
	var order []string
	cursor := ""
	pages := 0
	for {
		path := "/api/bots?limit=3"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := s.get(s.demo.Token, path)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		body := r.JSON(t)
		for _, it := range body["data"].([]any) {
			id := it.(map[string]any)["id"].(string)
			seen[id]++
			order = append(order, id)
		}
		pages++
		next, _ := body["next_cursor"].(string)
		if next == "" {
			assert.Nil(t, body["next_cursor"], "the last page says null")
			break
		}
		cursor = next
	}
	assert.Equal(t, 3, pages)
	assert.Len(t, seen, len(want))
	for id := range want {
		assert.Equal(t, 1, seen[id], id)
	}
	assert.IsNonDecreasing(t, order, "oldest first")

	first := s.get(s.demo.Token, "/api/bots?limit=2").JSON(t)["next_cursor"].(string)
	raw, err := base64.RawURLEncoding.DecodeString(first)
	require.NoError(t, err)
	raw[len(raw)/2] ^= 1
	tampered := base64.RawURLEncoding.EncodeToString(raw)
	other := s.newAccount("Other")
	for name, path := range map[string]string{
		"garbage":                 "/api/bots?cursor=not-a-cursor",
		"tampered":                "/api/bots?cursor=" + tampered,
		"another list's cursor":   "/api/audit-events?cursor=" + first,
		"another filter's cursor": "/api/bots?cursor=" + first + "&archived=true",
		"another bot's list":      "/api/bots/" + s.demo.BotID + "/api-tokens?cursor=" + first,
	} {
		r := s.get(s.demo.Token, path)
		assert.Equal(t, http.StatusBadRequest, r.Status, name)
		assert.Equal(t, "invalid_cursor", r.Code(t), name)
	}
	r := s.get(other.Token, "/api/bots?cursor="+first)
	assert.Equal(t, http.StatusBadRequest, r.Status, "another account's cursor")
	assert.Equal(t, "invalid_cursor", r.Code(t))
	// The limit may change between pages; the cursor stays valid.
	assert.Equal(t, http.StatusOK, s.get(s.demo.Token, "/api/bots?limit=5&cursor="+first).Status)

	for _, l := range []string{"0", "201", "-1", "abc", "", "1.5"} {
		r := s.get(s.demo.Token, "/api/bots?limit="+l)
		assert.Equal(t, http.StatusBadRequest, r.Status, "limit=%q", l)
		assert.Equal(t, "invalid_parameter", r.Code(t), "limit=%q", l)
	}
	for _, l := range []string{"1", "200"} {
		assert.Equal(t, http.StatusOK, s.get(s.demo.Token, "/api/bots?limit="+l).Status, "limit=%q", l)
	}
}
