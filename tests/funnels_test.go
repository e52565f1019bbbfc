package tests

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// funnelWorld is the demo bot with a known data set posted through the events API.
type funnelWorld struct {
	s    *server
	tok  string
	api  string // /api/bots/{demo bot}
	base time.Time
	subs map[string]string // name in the data set → subscriber id
}

// postEvents posts the events of the data set: subscriber name, event name, offset from
// base, properties.
func (w *funnelWorld) postEvents(t *testing.T, events ...[]any) {
	t.Helper()
	var batch []map[string]any
	for i, e := range events {
		ev := map[string]any{"event_id": fmt.Sprintf("e2e-%d", i), "subscriber_id": w.subs[e[0].(string)], "name": e[1],
			"at": w.base.Add(e[2].(time.Duration)).Format(time.RFC3339Nano)}
		if len(e) > 3 {
			ev["properties"] = e[3]
		}
		batch = append(batch, ev)
	}
	r := w.s.post(w.tok, w.api+"/events", map[string]any{"events": batch})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, float64(len(events)), r.JSON(t)["created"])
}

func newFunnelWorld(t *testing.T) *funnelWorld {
	t.Helper()
	s := start(t)
	w := &funnelWorld{s: s, tok: s.demo.Token, api: "/api/bots/" + s.demo.BotID,
		// Ten days ago on a whole hour: the events API takes events of the last 366 days.
		base: time.Now().UTC().Truncate(time.Hour).Add(-10 * 24 * time.Hour), subs: map[string]string{}}
	for i, name := range []string{"ann", "bob", "cid", "dan", "eve", "fay", "gus"} {
		channel := "telegram"
		if name == "cid" || name == "dan" || name == "fay" || name == "gus" {
			channel = "whatsapp"
		}
		w.subs[name] = mustCreate(t, s.post(w.tok, w.api+"/subscribers", map[string]any{"channel": channel, "external_id": fmt.Sprint(4000 + i)}))
	}
	pro, free, team := map[string]any{"plan": "pro"}, map[string]any{"plan": "free"}, map[string]any{"plan": "team"}
	h := time.Hour
	w.postEvents(t,
		// ann (telegram) converts: trial 1 h after signup, paid 2 h after the trial.
		[]any{"ann", "signup", time.Duration(0)}, []any{"ann", "trial_started", h, pro}, []any{"ann", "paid", 3 * h},
		// bob (telegram): a free trial does not pass the filter; the team trial 2 h after signup does.
		[]any{"bob", "signup", time.Duration(0)}, []any{"bob", "trial_started", h, free}, []any{"bob", "trial_started", 2 * h, team},
		// cid (whatsapp) paid before the trial: out of order, so he stops at the trial.
		[]any{"cid", "signup", time.Duration(0)}, []any{"cid", "paid", h}, []any{"cid", "trial_started", 2 * h, pro},
		// dan (whatsapp) paid after the one-day window.
		[]any{"dan", "signup", time.Duration(0)}, []any{"dan", "trial_started", h, pro}, []any{"dan", "paid", 25 * h},
		// eve (telegram) only signed up.
		[]any{"eve", "signup", time.Duration(0)},
		// fay (whatsapp) signed up before the range: she never entered it.
		[]any{"fay", "signup", -20 * 24 * h}, []any{"fay", "trial_started", -20*24*h + h, pro}, []any{"fay", "paid", -20*24*h + 2*h},
		// gus (whatsapp): his first entry runs out of window, his second, 23 h later, converts.
		[]any{"gus", "signup", time.Duration(0)}, []any{"gus", "trial_started", 30 * time.Minute, pro},
		[]any{"gus", "signup", 23 * h}, []any{"gus", "trial_started", 23*h + 30*time.Minute, pro}, []any{"gus", "paid", 26 * h},
	)
	return w
}

func (w *funnelWorld) rangeBody() map[string]any {
	return map[string]any{"from": w.base.Add(-time.Hour).Format(time.RFC3339), "to": w.base.Add(48 * time.Hour).Format(time.RFC3339)}
}

type funnelReport struct {
	Steps []struct {
		Subscribers            int64    `json:"subscribers"`
		ConversionFromPrevious float64  `json:"conversion_from_previous"`
		ConversionFromFirst    float64  `json:"conversion_from_first"`
		Median                 *float64 `json:"median_seconds_from_previous"`
	} `json:"steps"`
	Groups []struct {
		Channel string `json:"channel"`
		Steps   []struct {
			Subscribers int64 `json:"subscribers"`
		} `json:"steps"`
	} `json:"groups"`
}

// A 3-step funnel over a known data set posted through the events API: exact counts,
// conversions, medians and the channel breakdown; a cohort saved as a segment, its members
// listed, then staled by a change of the funnel's steps.
func TestFunnels(t *testing.T) {
	t.Parallel()
	w := newFunnelWorld(t)
	s, tok := w.s, w.tok
	funnels := w.api + "/funnels"

	r := s.post(tok, funnels, map[string]any{"name": "Signup to paid", "conversion_window": "P1D", "steps": []any{
		map[string]any{"event": "signup"},
		map[string]any{"event": "trial_started", "filters": []any{map[string]any{"property": "plan", "op": "in", "value": []any{"pro", "team"}}}},
		map[string]any{"event": "paid"},
	}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/funnels", funnels, r)
	id := r.JSON(t)["id"].(string)
	assert.Equal(t, float64(86400), r.JSON(t)["conversion_window"])
	funnel := funnels + "/" + id

	body := w.rangeBody()
	body["breakdown"] = "channel"
	r = s.post(tok, funnel+"/report", body)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/funnels/{funnelID}/report", funnel+"/report", r)
	var rep funnelReport
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	require.Len(t, rep.Steps, 3)
	assert.Equal(t, []int64{6, 5, 2}, []int64{rep.Steps[0].Subscribers, rep.Steps[1].Subscribers, rep.Steps[2].Subscribers},
		"ann bob cid dan eve gus entered; all but eve started a trial; ann and gus paid")
	assert.Equal(t, 0.8333, rep.Steps[1].ConversionFromPrevious)
	assert.Equal(t, 0.4, rep.Steps[2].ConversionFromPrevious)
	assert.Equal(t, 0.3333, rep.Steps[2].ConversionFromFirst)
	assert.Nil(t, rep.Steps[0].Median)
	require.NotNil(t, rep.Steps[1].Median)
	assert.Equal(t, 3600.0, *rep.Steps[1].Median, "trials after 1 h, 2 h, 2 h, 1 h and 30 min (gus's later entry)")
	require.NotNil(t, rep.Steps[2].Median)
	assert.Equal(t, 8100.0, *rep.Steps[2].Median, "payments 2 h and 2.5 h after the trial")
	groups := map[string][]int64{}
	for _, g := range rep.Groups {
		groups[g.Channel] = []int64{g.Steps[0].Subscribers, g.Steps[1].Subscribers, g.Steps[2].Subscribers}
	}
	assert.Equal(t, map[string][]int64{"telegram": {3, 2, 1}, "whatsapp": {3, 3, 1}}, groups)

	// The same funnel unsaved, with a window of an hour: only trials within the hour count.
	q := w.rangeBody()
	q["steps"] = []any{map[string]any{"event": "signup"}, map[string]any{"event": "trial_started"}}
	q["conversion_window"] = 3600
	r = s.post(tok, funnels+"/query", q)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/funnels/query", funnels+"/query", r)
	require.NoError(t, json.Unmarshal(r.Body, &rep))
	assert.Equal(t, int64(4), rep.Steps[1].Subscribers, "ann, bob (any plan now) and dan at 1 h (the end is in), gus at 30 min; cid's trial after 2 h is out")

	// Ranges: 366 days is the most.
	long := map[string]any{"from": w.base.Add(-366 * 24 * time.Hour).Format(time.RFC3339), "to": w.base.Format(time.RFC3339)}
	r = s.post(tok, funnel+"/report", long)
	assert.Equal(t, 200, r.Status, "366 days: %s", r.Body)
	long["from"] = w.base.Add(-367 * 24 * time.Hour).Format(time.RFC3339)
	r = s.post(tok, funnel+"/report", long)
	assert.Equal(t, 400, r.Status, "367 days: %s", r.Body)
	assert.Equal(t, "range_too_long", r.Code(t))
	conforms(t, "POST", "/api/bots/{botID}/funnels/{funnelID}/report", funnel+"/report", r)

	// The cohort of those who started a trial but did not pay, on WhatsApp: cid and dan.
	cohort := w.rangeBody()
	cohort["name"] = "Trial, no payment (WhatsApp)"
	cohort["step"] = 2
	cohort["breakdown"] = map[string]any{"channel": "whatsapp"}
	r = s.post(tok, funnel+"/cohorts", cohort)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/funnels/{funnelID}/cohorts", funnel+"/cohorts", r)
	seg := r.JSON(t)
	segPath := r.Header.Get("Location")
	assert.Equal(t, w.api+"/segments/"+seg["id"].(string), segPath)
	assert.Equal(t, float64(2), seg["member_count"])
	assert.Equal(t, false, seg["stale"])
	assert.Equal(t, "funnel_cohort", seg["source"].(map[string]any)["kind"])
	assert.Equal(t, id, seg["source"].(map[string]any)["id"])

	// Used: its members are listed, page by page.
	var members []string
	next := segPath + "/members?limit=1"
	for next != "" {
		r = s.get(tok, next)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		conforms(t, "GET", "/api/bots/{botID}/segments/{segmentID}/members", segPath+"/members", r)
		for _, m := range r.JSON(t)["data"].([]any) {
			members = append(members, m.(map[string]any)["subscriber_id"].(string))
		}
		next = ""
		if c, ok := r.JSON(t)["next_cursor"].(string); ok {
			next = segPath + "/members?limit=1&cursor=" + c
		}
	}
	assert.ElementsMatch(t, []string{w.subs["cid"], w.subs["dan"]}, members)
	r = s.get(tok, w.api+"/segments")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/segments", w.api+"/segments", r)
	assert.Len(t, r.JSON(t)["data"], 1)

	// Used as a broadcast's audience: the preflight counts its two members.
	r = s.post(tok, w.api+"/content", map[string]any{"type": "message", "name": "Come back", "draft": map[string]any{"text": "Your trial misses you"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)
	r = s.post(tok, w.api+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.post(tok, w.api+"/broadcasts", map[string]any{"name": "Win back", "channels": []string{"whatsapp"},
		"content": map[string]any{"document_id": doc}, "audience": map[string]any{"type": "segment", "segment_id": seg["id"]}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	broadcast := w.api + "/broadcasts/" + r.JSON(t)["id"].(string)
	r = s.post(tok, broadcast+"/preflight", map[string]any{})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.EqualValues(t, 2, r.JSON(t)["recipients"].(map[string]any)["whatsapp"], "the segment's members")

	// A rename keeps the segment current; a change of the steps stales it.
	r = s.patch(tok, funnel, map[string]any{"expected_revision": 1, "name": "Signup to payment"})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.get(tok, segPath)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, false, r.JSON(t)["stale"])
	r = s.patch(tok, funnel, map[string]any{"expected_revision": 2, "steps": []any{map[string]any{"event": "signup"}, map[string]any{"event": "paid"}}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "PATCH", "/api/bots/{botID}/funnels/{funnelID}", funnel, r)
	assert.Equal(t, float64(3), r.JSON(t)["definition_revision"])
	r = s.get(tok, segPath)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/segments/{segmentID}", segPath, r)
	assert.Equal(t, true, r.JSON(t)["stale"])
	// A broadcast to a stale segment is not ready to launch (409, the reason named).
	r = s.post(tok, broadcast+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "broadcast_not_ready", r.Code(t))
	assert.Contains(t, string(r.Body), "segment_stale")
	r = s.patch(tok, funnel, map[string]any{"expected_revision": 2, "name": "Late"})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "stale_revision", r.Code(t))

	r = s.del(tok, segPath)
	assert.Equal(t, 204, r.Status, "%s", r.Body)
	r = s.get(tok, segPath)
	assert.Equal(t, 404, r.Status)
}

// The list of funnels pages with the cursor sent back unchanged: every funnel once, oldest
// first, including one created while paging.
func TestFunnelsPaging(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, funnels := s.demo.Token, "/api/bots/"+s.demo.BotID+"/funnels"
	create := func(name string) {
		r := s.post(tok, funnels, map[string]any{"name": name, "steps": []any{map[string]any{"event": "a"}, map[string]any{"event": "b"}}})
		require.Equal(t, 201, r.Status, "%s", r.Body)
	}
	for i := range 5 {
		create(fmt.Sprint("F", i))
	}
	var names []string
	next := funnels + "?limit=2"
	for pages := 0; next != ""; pages++ {
		require.Less(t, pages, 10)
		r := s.get(tok, next)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		conforms(t, "GET", "/api/bots/{botID}/funnels", funnels, r)
		for _, f := range r.JSON(t)["data"].([]any) {
			names = append(names, f.(map[string]any)["name"].(string))
		}
		if pages == 0 {
			create("F5")
		}
		next = ""
		if c, ok := r.JSON(t)["next_cursor"].(string); ok {
			next = funnels + "?limit=2&cursor=" + c
		}
	}
	assert.Equal(t, []string{"F0", "F1", "F2", "F3", "F4", "F5"}, names)
	r := s.get(tok, funnels+"?limit=2&cursor=altered")
	assert.Equal(t, 400, r.Status)
	assert.Equal(t, "invalid_cursor", r.Code(t))
}

// Who may do what: 401 without a token, 404 for another account, 403 without the scope
// (segments:write too for a cohort) or the Analytics right, 402 without the plan feature.
func TestFunnelsAccess(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, api := s.demo.Token, "/api/bots/"+s.demo.BotID
	funnels := api + "/funnels"
	r := s.post(tok, funnels, map[string]any{"name": "F", "steps": []any{map[string]any{"event": "a"}, map[string]any{"event": "b"}}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	funnel := funnels + "/" + r.JSON(t)["id"].(string)
	rng := map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}
	cohort := map[string]any{"name": "C", "from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z", "step": 1}
	r = s.post(tok, funnel+"/cohorts", cohort)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	segment := r.Header.Get("Location")

	r = s.get("", funnels)
	assert.Equal(t, 401, r.Status)
	r = s.post("", funnel+"/report", rng)
	assert.Equal(t, 401, r.Status)

	other := s.newAccount("Other")
	for _, p := range []string{funnels, funnel, segment, api + "/segments"} {
		r = s.get(other.Token, p)
		assert.Equal(t, 404, r.Status, "%s: %s", p, r.Body)
	}
	r = s.post(other.Token, funnel+"/report", rng)
	assert.Equal(t, 404, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/funnels/{funnelID}/report", funnel+"/report", r)
	// The demo bot's funnel under the other account's bot is not found either.
	r = s.get(other.Token, "/api/bots/"+other.Bot+"/funnels/"+funnel[len(funnels)+1:])
	assert.Equal(t, 404, r.Status, "%s", r.Body)

	reader := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "analytics:read")["token"]
	r = s.post(reader, funnels, map[string]any{"name": "G", "steps": []any{map[string]any{"event": "a"}, map[string]any{"event": "b"}}})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "insufficient_scope", r.Code(t))
	r = s.post(reader, funnel+"/report", rng)
	assert.Equal(t, 200, r.Status, "reading is enough for a report: %s", r.Body)
	r = s.post(reader, funnel+"/cohorts", cohort)
	assert.Equal(t, 403, r.Status, "a cohort also needs segments:write: %s", r.Body)
	assert.Equal(t, "segments:write", r.JSON(t)["required_scope"])
	conforms(t, "POST", "/api/bots/{botID}/funnels/{funnelID}/cohorts", funnel+"/cohorts", r)
	r = s.del(reader, segment)
	assert.Equal(t, 403, r.Status, "deleting a segment needs segments:write: %s", r.Body)
	both := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "analytics:read,segments:write")["token"]
	r = s.post(both, funnel+"/cohorts", cohort)
	assert.Equal(t, 201, r.Status, "%s", r.Body)

	reactionsOnly := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "reactions")["user_id"]
	noAnalytics := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", reactionsOnly, "--scopes", "*")["token"]
	for _, p := range []string{funnels, segment} {
		r = s.get(noAnalytics, p)
		assert.Equal(t, 403, r.Status, "%s: %s", p, r.Body)
		assert.Equal(t, "missing_right", r.Code(t))
	}
	analyst := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "analytics")["user_id"]
	analystTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", analyst, "--scopes", "analytics:read")["token"]
	r = s.get(analystTok, funnel)
	assert.Equal(t, 200, r.Status, "the analytics right is enough: %s", r.Body)

	s.adminJSON("account", "plan", "--account", s.demo.AccountID, "--features", "popups")
	fresh := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	for _, p := range []string{funnels, api + "/segments"} {
		r = s.get(fresh, p)
		assert.Equal(t, 402, r.Status, "%s: %s", p, r.Body)
		assert.Equal(t, "feature_not_in_plan", r.Code(t))
		assert.Equal(t, "analytics", r.JSON(t)["feature"])
	}
	r = s.post(fresh, funnel+"/report", rng)
	assert.Equal(t, 402, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/funnels/{funnelID}/report", funnel+"/report", r)
}
