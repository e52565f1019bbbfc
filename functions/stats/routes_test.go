package stats

import (
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	counters "github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type server struct {
	*httpapitest.Server
	bot string
	tok string
}

func newServer(t *testing.T) *server {
	t.Helper()
	bot := ids.At("bot", t0)
	s := httpapitest.New(t, httpapitest.Config{Now: func() time.Time { return t0 }, BotIDs: []string{bot}})
	Routes(s.Mux, s.Store)
	return &server{Server: s, bot: bot, tok: s.PAT(t, s.Owner, "stats:read")}
}

func (s *server) get(t *testing.T, query url.Values) (int, map[string]any) {
	t.Helper()
	res := s.DoAs(t, s.tok, "GET", "/api/bots/"+s.bot+"/stats?"+query.Encode(), nil)
	require.NotNil(t, res.JSON, res.Body)
	return res.Code, res.JSON
}

func q(kv ...string) url.Values {
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v
}

func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	routes := s.Mux.Routes()
	require.Len(t, routes, 1)
	assert.Equal(t, "GET /api/bots/{botID}/stats", routes[0].Pattern())
	assert.Equal(t, httpapi.Need("stats:read", auth.RightAnalytics), routes[0].Access)
}

func TestRangeParameters(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	const from = "2025-01-01T00:00:00Z"
	tests := []struct {
		name      string
		query     url.Values
		parameter string // "" for 200
	}{
		{"366 days by day", q("from", from, "to", "2026-01-02T00:00:00Z"), ""},
		{"default granularity is day", q("from", from, "to", "2025-01-02T00:00:00Z"), ""},
		{"31 days by hour", q("from", from, "to", "2025-02-01T00:00:00Z", "granularity", "hour"), ""},
		{"offsets are converted", q("from", "2025-01-01T02:00:00+02:00", "to", "2025-01-02T00:00:00Z"), ""},
		{"fractions are dropped", q("from", "2025-01-01T00:00:00.9Z", "to", "2025-01-01T00:00:01.5Z", "granularity", "hour"), ""},
		{"366 days and a second", q("from", from, "to", "2026-01-02T00:00:01Z"), "to"},
		{"31 days and a second by hour", q("from", from, "to", "2025-02-01T00:00:01Z", "granularity", "hour"), "to"},
		{"missing from", q("to", from), "from"},
		{"missing to", q("from", from), "to"},
		{"from not RFC 3339", q("from", "2025-01-01", "to", from), "from"},
		{"to not RFC 3339", q("from", from, "to", "yesterday"), "to"},
		{"a + decoded as a space", url.Values{"from": {"2025-01-01T00:00:00 02:00"}, "to": {from}}, "from"},
		{"inverted", q("from", "2025-02-01T00:00:00Z", "to", from), "to"},
		{"empty", q("from", from, "to", from), "to"},
		{"empty after dropping fractions", q("from", "2025-01-01T00:00:00.1Z", "to", "2025-01-01T00:00:00.9Z"), "to"},
		{"unknown granularity", q("from", from, "to", "2025-01-02T00:00:00Z", "granularity", "week"), "granularity"},
		{"granularity in capitals", q("from", from, "to", "2025-01-02T00:00:00Z", "granularity", "DAY"), "granularity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := s.get(t, tt.query)
			if tt.parameter == "" {
				assert.Equal(t, 200, status, "%v", body)
				return
			}
			assert.Equal(t, 400, status)
			assert.Equal(t, "invalid_parameter", body["code"])
			assert.Equal(t, tt.parameter, body["parameter"], body["detail"])
		})
	}
}

func TestSeries(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := sqlitetest.Unrecorded(t.Context()) // the counters are the other families' to write
	day := time.Date(2026, 2, 10, 0, 0, 0, 0, time.UTC)
	require.NoError(t, counters.Add(ctx, s.Store, s.bot, "telegram", counters.NewSubscribers, 2, day.Add(9*time.Hour)))
	require.NoError(t, counters.Add(ctx, s.Store, s.bot, "whatsapp", counters.NewSubscribers, 1, day.Add(23*time.Hour+59*time.Minute)))
	require.NoError(t, counters.Add(ctx, s.Store, s.bot, "telegram", counters.MessagesIn, 5, day.Add(24*time.Hour)))
	require.NoError(t, counters.Add(ctx, s.Store, "bot_other", "telegram", counters.MessagesIn, 100, day))

	status, body := s.get(t, q("from", "2026-02-10T00:00:00Z", "to", "2026-02-12T00:00:00Z"))
	require.Equal(t, 200, status, "%v", body)
	assert.Equal(t, "day", body["granularity"])
	assert.Equal(t, "UTC", body["timezone"])
	assert.Equal(t, "2026-02-10T00:00:00Z", body["from"])
	points := body["points"].([]any)
	require.Len(t, points, 2)
	p0 := points[0].(map[string]any)
	assert.Equal(t, "2026-02-10T00:00:00Z", p0["start"])
	assert.Equal(t, map[string]any{"new_subscribers": 3.0, "active_subscribers": 0.0, "messages_in": 0.0, "messages_out": 0.0, "reactions_started": 0.0}, p0["total"])
	assert.Equal(t, 2.0, p0["channels"].(map[string]any)["telegram"].(map[string]any)["new_subscribers"])
	assert.Equal(t, 5.0, points[1].(map[string]any)["total"].(map[string]any)["messages_in"])
	assert.Equal(t, 5.0, body["total"].(map[string]any)["messages_in"], "another bot's counters are not counted")
	assert.Equal(t, 3.0, body["total"].(map[string]any)["new_subscribers"])

	status, body = s.get(t, q("from", "2026-02-10T09:00:00Z", "to", "2026-02-10T11:00:00Z", "granularity", "hour"))
	require.Equal(t, 200, status)
	points = body["points"].([]any)
	require.Len(t, points, 2)
	assert.Equal(t, 2.0, points[0].(map[string]any)["total"].(map[string]any)["new_subscribers"])
	assert.Equal(t, map[string]any{}, points[1].(map[string]any)["channels"], "an empty bucket has no channels")
}
