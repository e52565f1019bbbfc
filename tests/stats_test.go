package tests

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func statsPath(bot string, kv ...string) string {
	q := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	return "/api/bots/" + bot + "/stats?" + q.Encode()
}

func TestStats(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := "/api/bots/" + s.demo.BotID
	today := time.Now().UTC().Truncate(24 * time.Hour)
	from, to := today.AddDate(0, 0, -6).Format(time.RFC3339), today.AddDate(0, 0, 1).Format(time.RFC3339)

	r := s.get(s.demo.Token, statsPath(s.demo.BotID, "from", from, "to", to))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	body := r.JSON(t)
	assert.Equal(t, "day", body["granularity"])
	assert.Equal(t, "UTC", body["timezone"])
	assert.Equal(t, from, body["from"])
	assert.Len(t, body["points"], 7, "one point per UTC day, empty ones included")
	zero := map[string]any{"new_subscribers": 0.0, "active_subscribers": 0.0, "messages_in": 0.0, "messages_out": 0.0, "reactions_started": 0.0}
	assert.Equal(t, zero, body["total"])
	assert.Equal(t, map[string]any{}, body["channels"])

	// A subscriber created through the API counts as new, in its channel, today.
	sub := s.post(s.demo.Token, bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": "4242", "first_name": "Ada"})
	require.Equal(t, http.StatusCreated, sub.Status, "%s", sub.Body)
	r = s.get(s.demo.Token, statsPath(s.demo.BotID, "from", from, "to", to))
	require.Equal(t, http.StatusOK, r.Status)
	body = r.JSON(t)
	assert.Equal(t, 1.0, body["total"].(map[string]any)["new_subscribers"])
	assert.Equal(t, 1.0, body["channels"].(map[string]any)["telegram"].(map[string]any)["new_subscribers"])
	var counted []any
	for _, p := range body["points"].([]any) {
		if p.(map[string]any)["total"].(map[string]any)["new_subscribers"] == 1.0 {
			counted = append(counted, p.(map[string]any)["start"])
		}
	}
	assert.Equal(t, []any{today.Format(time.RFC3339)}, counted, "in today's UTC bucket")
	r = s.get(s.demo.Token, statsPath(s.demo.BotID, "from", time.Now().UTC().Add(-time.Hour).Format(time.RFC3339), "to", time.Now().UTC().Add(time.Hour).Format(time.RFC3339), "granularity", "hour"))
	require.Equal(t, http.StatusOK, r.Status)
	assert.Equal(t, 1.0, r.JSON(t)["total"].(map[string]any)["new_subscribers"], "hour buckets count it too")
	// Repeating the upsert changes nothing and counts nothing.
	require.Equal(t, http.StatusOK, s.post(s.demo.Token, bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": "4242"}).Status)
	assert.Equal(t, 1.0, s.get(s.demo.Token, statsPath(s.demo.BotID, "from", from, "to", to)).JSON(t)["total"].(map[string]any)["new_subscribers"])
}

// The range bounds over HTTP: exactly 366 days is a day range's maximum, a second more is
// refused; 31 days for hours; every bad parameter is named.
func TestStatsRange400(t *testing.T) {
	t.Parallel()
	s := start(t)
	const from = "2025-03-01T00:00:00Z"
	ok := []struct{ name, path string }{
		{"exactly 366 days", statsPath(s.demo.BotID, "from", from, "to", "2026-03-02T00:00:00Z")},
		{"exactly 366 days, offsets", statsPath(s.demo.BotID, "from", "2025-03-01T01:00:00+01:00", "to", "2026-03-02T01:00:00+01:00")},
		{"exactly 31 days by hour", statsPath(s.demo.BotID, "from", from, "to", "2025-04-01T00:00:00Z", "granularity", "hour")},
	}
	for _, c := range ok {
		r := s.get(s.demo.Token, c.path)
		assert.Equal(t, http.StatusOK, r.Status, "%s: %s", c.name, r.Body)
	}
	r := s.get(s.demo.Token, ok[0].path)
	assert.Len(t, r.JSON(t)["points"], 366)

	bad := []struct{ name, path, param string }{
		{"366 days and a second", statsPath(s.demo.BotID, "from", from, "to", "2026-03-02T00:00:01Z"), "to"},
		{"31 days and a second by hour", statsPath(s.demo.BotID, "from", from, "to", "2025-04-01T00:00:01Z", "granularity", "hour"), "to"},
		{"missing from", statsPath(s.demo.BotID, "to", from), "from"},
		{"missing to", statsPath(s.demo.BotID, "from", from), "to"},
		{"from not RFC 3339", statsPath(s.demo.BotID, "from", "2025-03-01", "to", from), "from"},
		{"to not RFC 3339", statsPath(s.demo.BotID, "from", from, "to", "1740787200"), "to"},
		{"unencoded + in an offset", "/api/bots/" + s.demo.BotID + "/stats?from=2025-03-01T00:00:00+01:00&to=2025-03-02T00:00:00Z", "from"},
		{"inverted", statsPath(s.demo.BotID, "from", "2025-03-02T00:00:00Z", "to", from), "to"},
		{"empty", statsPath(s.demo.BotID, "from", from, "to", from), "to"},
		{"unknown granularity", statsPath(s.demo.BotID, "from", from, "to", "2025-03-02T00:00:00Z", "granularity", "minute"), "granularity"},
	}
	for _, c := range bad {
		r := s.get(s.demo.Token, c.path)
		require.Equal(t, http.StatusBadRequest, r.Status, "%s: %s", c.name, r.Body)
		assert.Equal(t, "invalid_parameter", r.Code(t), c.name)
		assert.Equal(t, c.param, r.JSON(t)["parameter"], c.name)
	}
}

func TestStatsAccess(t *testing.T) {
	t.Parallel()
	s := start(t)
	path := statsPath(s.demo.BotID, "from", "2026-01-01T00:00:00Z", "to", "2026-01-02T00:00:00Z")
	botTok := s.post(s.demo.Token, "/api/bots/"+s.demo.BotID+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)
	assert.Equal(t, http.StatusOK, s.get(botTok, path).Status, "a bot token reads its own bot's stats")

	otherScope := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read,analytics:read")["token"]
	r := s.get(otherScope, path)
	assert.Equal(t, http.StatusForbidden, r.Status)
	assert.Equal(t, "insufficient_scope", r.Code(t))
	assert.Equal(t, "stats:read", r.JSON(t)["required_scope"])

	for _, rights := range []string{"", "reactions,dialogs"} {
		user := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", rights)["user_id"]
		tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", user, "--scopes", "stats:read")["token"]
		r := s.get(tok, path)
		assert.Equal(t, http.StatusForbidden, r.Status, "rights %q", rights)
		assert.Equal(t, "missing_right", r.Code(t))
		assert.Equal(t, []any{"analytics"}, r.JSON(t)["missing_rights"])
	}
	analyst := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "analytics")["user_id"]
	analystTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", analyst, "--scopes", "stats:read")["token"]
	assert.Equal(t, http.StatusOK, s.get(analystTok, path).Status)

	other := s.newAccount("Other")
	second := s.post(s.demo.Token, "/api/bots", map[string]any{"name": "Second"}).JSON(t)["id"].(string)
	for name, c := range map[string]struct{ token, bot string }{
		"another account's bot":          {s.demo.Token, other.Bot},
		"a bot token on another bot":     {botTok, second},
		"a bot token on another account": {botTok, other.Bot},
		"a bot that does not exist":      {s.demo.Token, "bot_00000000000000000000000000"},
	} {
		r := s.get(c.token, statsPath(c.bot, "from", "2026-01-01T00:00:00Z", "to", "2026-01-02T00:00:00Z"))
		assert.Equal(t, http.StatusNotFound, r.Status, name)
		assert.Equal(t, "not_found", r.Code(t), name)
	}
}
