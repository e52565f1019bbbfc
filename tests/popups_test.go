package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A popup's life over HTTP: create, preflight, the public script and events from the
// website, stats and experiment results, CORS for a foreign origin, delete.
func TestPopups(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/popups"
	const shop = "https://shop.example"

	r := s.post(tok, "/api/bots/"+bot+"/fields", map[string]any{"name": "email", "type": "string"})
	require.Equal(t, 201, r.Status, "%s", r.Body)

	// Preflight lists problems and warnings and writes nothing.
	r = s.post(tok, base+"/preflight", map[string]any{"name": "Bad", "status": "active",
		"content":         map[string]any{"title": "Hi", "body": "b", "button_text": "Go", "fields": []any{map[string]any{"name": "phone_number", "label": "Phone", "type": "phone"}}},
		"targeting":       map[string]any{"url_rules": []any{map[string]any{"match": "glob", "value": "https://shop.example/[oops"}}},
		"schedule":        map[string]any{"starts_at": "2020-01-01T00:00:00Z", "ends_at": "2020-02-01T00:00:00Z"},
		"allowed_origins": []any{shop}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/popups/preflight", base+"/preflight", r)
	pf := r.JSON(t)
	assert.Equal(t, false, pf["ok"])
	joined := string(r.Body)
	assert.Contains(t, joined, "content.fields[0].name")
	assert.Contains(t, joined, "targeting.url_rules[0].value")
	assert.Contains(t, joined, "schedule.ends_at")
	r = s.get(tok, base)
	require.Equal(t, 200, r.Status)
	assert.Equal(t, []any{}, r.JSON(t)["data"], "preflight created nothing")

	// The same definition is refused by create with every problem listed.
	r = s.post(tok, base, map[string]any{"name": "Bad", "content": map[string]any{"title": "", "body": "b", "button_text": "Go"},
		"targeting": map[string]any{"delay_seconds": 99999}, "allowed_origins": []any{"https://shop.example/path"}})
	require.Equal(t, 400, r.Status, "%s", r.Body)
	assert.GreaterOrEqual(t, len(problems(t, r)), 3, "%s", r.Body)

	r = s.post(tok, base, map[string]any{"name": "Signup", "status": "active",
		"content":         map[string]any{"title": "10% off", "body": "Join us", "button_text": "Join", "fields": []any{map[string]any{"name": "email", "label": "Email", "type": "email", "required": true}}},
		"targeting":       map[string]any{"url_rules": []any{map[string]any{"match": "prefix", "value": shop + "/"}}},
		"experiment":      map[string]any{"variants": []any{map[string]any{"key": "a", "share": 50}, map[string]any{"key": "b", "share": 50, "content": map[string]any{"title": "15% off"}}}},
		"allowed_origins": []any{shop}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/popups", base, r)
	pop := r.JSON(t)["id"].(string)

	// The script a website embeds carries the active popup.
	r = s.do(req{Method: "GET", Path: "/p/" + bot + "/popups.js"})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.True(t, strings.HasPrefix(r.Header.Get("Content-Type"), "text/javascript"))
	assert.Contains(t, string(r.Body), pop)
	assert.Contains(t, string(r.Body), "15% off")

	// Events from the shop count; from a foreign origin they are refused, without CORS.
	events := "/p/" + bot + "/events"
	r = s.do(req{Method: "OPTIONS", Path: events, Headers: map[string]string{"Origin": shop, "Access-Control-Request-Method": "POST"}})
	assert.Equal(t, 204, r.Status, "%s", r.Body)
	assert.Equal(t, shop, r.Header.Get("Access-Control-Allow-Origin"))
	r = s.do(req{Method: "OPTIONS", Path: events, Headers: map[string]string{"Origin": "https://evil.example"}})
	assert.Equal(t, 403, r.Status)
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	post := func(origin string, body map[string]any) resp {
		return s.do(req{Method: "POST", Path: events, Body: body, Headers: map[string]string{"Origin": origin}})
	}
	r = post("https://evil.example", map[string]any{"popup_id": pop, "variant": "a", "type": "impression", "visitor_id": "v1"})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "origin_not_allowed", r.Code(t))
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	for _, e := range []map[string]any{
		{"popup_id": pop, "variant": "a", "type": "impression", "visitor_id": "v1"},
		{"popup_id": pop, "variant": "a", "type": "impression", "visitor_id": "v2"},
		{"popup_id": pop, "variant": "b", "type": "impression", "visitor_id": "v3"},
		{"popup_id": pop, "variant": "a", "type": "close", "visitor_id": "v2"},
		{"popup_id": pop, "variant": "a", "type": "conversion", "visitor_id": "v1", "fields": map[string]any{"email": "ann@example.com"}},
	} {
		r = post(shop, e)
		require.Equal(t, 202, r.Status, "%s", r.Body)
		assert.Equal(t, shop, r.Header.Get("Access-Control-Allow-Origin"))
	}
	// The conversion's form answer became a web subscriber's field.
	r = s.get(tok, "/api/bots/"+bot+"/subscribers?channel=web&external_id=v1")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "ann@example.com")

	today := time.Now().UTC().Format(time.DateOnly)
	r = s.get(tok, base+"/"+pop+"/stats?from="+today+"&to="+today)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/popups/{popupID}/stats", base+"/"+pop+"/stats", r)
	totals := r.JSON(t)["totals"].(map[string]any)
	assert.Equal(t, map[string]any{"impressions": float64(3), "closes": float64(1), "conversions": float64(1), "conversion_rate": 0.3333}, totals, "the rate is rounded to 4 decimals")
	r = s.get(tok, base+"/"+pop+"/experiment")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/popups/{popupID}/experiment", base+"/"+pop+"/experiment", r)
	variants := r.JSON(t)["variants"].([]any)
	require.Len(t, variants, 2)
	assert.Equal(t, float64(2), variants[0].(map[string]any)["impressions"])
	assert.Equal(t, float64(1), variants[1].(map[string]any)["impressions"])

	// A stats range longer than 366 days is refused.
	from := time.Now().UTC().AddDate(0, 0, -366).Format(time.DateOnly)
	r = s.get(tok, base+"/"+pop+"/stats?from="+from+"&to="+today)
	assert.Equal(t, 400, r.Status, "367 days: %s", r.Body)
	assert.Equal(t, "invalid_parameter", r.Code(t))
	r = s.get(tok, base+"/"+pop+"/stats?from="+time.Now().UTC().AddDate(0, 0, -365).Format(time.DateOnly)+"&to="+today)
	assert.Equal(t, 200, r.Status, "366 days: %s", r.Body)
	assert.Len(t, r.JSON(t)["days"], 366)

	// Pausing takes the popup out of the script and out of ingest; stale revisions are 409.
	r = s.patch(tok, base+"/"+pop, map[string]any{"expected_revision": 1, "status": "paused"})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.patch(tok, base+"/"+pop, map[string]any{"expected_revision": 1, "status": "active"})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "stale_revision", r.Code(t))
	r = post(shop, map[string]any{"popup_id": pop, "variant": "a", "type": "impression", "visitor_id": "v9"})
	assert.Equal(t, 404, r.Status, "%s", r.Body)
	r = s.do(req{Method: "GET", Path: "/p/" + bot + "/popups.js"})
	assert.NotContains(t, string(r.Body), pop)

	r = s.del(tok, base+"/"+pop+"?expected_revision=1")
	assert.Equal(t, 409, r.Status)
	r = s.del(tok, base+"/"+pop+"?expected_revision=2")
	assert.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
	r = s.get(tok, base+"/"+pop)
	assert.Equal(t, 404, r.Status)

	// Another account cannot see the bot's popups.
	other := s.newAccount("Other")
	r = s.get(other.Token, base)
	assert.Equal(t, 404, r.Status)
}
