package tests

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
)

type flowOverlay struct {
	Steps []struct {
		StepID    string   `json:"step_id"`
		Entered   int      `json:"entered"`
		Completed int      `json:"completed"`
		Continued int      `json:"continued"`
		Dropped   int      `json:"dropped"`
		Errors    int      `json:"errors"`
		MedianMS  *float64 `json:"median_ms"`
	} `json:"steps"`
	Totals map[string]int `json:"totals"`
}

// Flow intelligence end to end: real runs through a fake Telegram give the overlay's
// numbers; samples are redacted; the account's policy is revisioned and stops samples; a
// reaggregation job completes and changes nothing counted live; and the access rules
// (rollout, scope, right, tenancy) hold on every route.
func TestFlowIntelligence(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s := c.s
	base := "/api/bots/" + s.demo.BotID + "/flow-intelligence"
	id := c.publish(t, `{"name":"menu","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello"},
		{"id":"ask","type":"buttons","text":"Go on?","buttons":[{"title":"Yes","step_id":"yes"}]},
		{"id":"yes","type":"send_text","text":"Great"},
		{"id":"done","type":"end"}]}`)
	overlay := base + "/reactions/" + id + "/overlay"
	samples := base + "/reactions/" + id + "/samples?step_id=ask"
	routes := []req{
		{Method: "GET", Path: overlay}, {Method: "GET", Path: samples}, {Method: "GET", Path: base + "/policy"},
		{Method: "PUT", Path: base + "/policy", Body: map[string]any{"sampling": "enabled", "sample_trigger_details": false, "retention_days": 30}},
		{Method: "POST", Path: base + "/reaggregations", Body: map[string]any{"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}},
		{Method: "GET", Path: base + "/reaggregations"}, {Method: "GET", Path: base + "/reaggregations/job_01hx7y9k2m3n4p5q6r7s8t9v0w"},
	}

	// Rollout off: 403 feature_not_enabled on every route.
	for _, rq := range routes {
		rq.Token = s.demo.Token
		r := s.do(rq)
		require.Equal(t, 403, r.Status, "%s %s: %s", rq.Method, rq.Path, r.Body)
		assert.Equal(t, "feature_not_enabled", r.Code(t))
		assert.Equal(t, "flow_intelligence", r.JSON(t)["feature"])
	}
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "flow_intelligence")
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]

	// Ann goes through; Bob stops at the buttons.
	ann := fake.User{ID: 8101, FirstName: "Ann"}
	bob := fake.User{ID: 8102, FirstName: "Bob"}
	c.deliver(t, c.tg.TextUpdate(ann, "/start"))
	eventually(t, 10*time.Second, "the menu", func() bool { return len(c.tg.Sent(ann.ID)) >= 2 })
	menu := c.tg.Sent(ann.ID)[1]
	require.Len(t, menu.Buttons, 1)
	annSub := c.subscriber(t, ann)
	eventually(t, 10*time.Second, "the run waits for a press", func() bool { return c.executions(t, annSub)[0].Status == "waiting" })
	press, _ := c.tg.CallbackUpdate(c.bot, ann, menu.Buttons[0][0].CallbackData)
	c.deliver(t, press)
	eventually(t, 10*time.Second, "ann's run ends", func() bool { return c.executions(t, annSub)[0].Status == "completed" })
	c.deliver(t, c.tg.TextUpdate(bob, "/start"))
	bobSub := ""
	eventually(t, 10*time.Second, "bob waits", func() bool {
		if len(c.tg.Sent(bob.ID)) < 2 {
			return false
		}
		bobSub = c.subscriber(t, bob)
		return c.executions(t, bobSub)[0].Status == "waiting"
	})

	read := func() flowOverlay {
		t.Helper()
		r := s.get(tok, overlay)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		conforms(t, http.MethodGet, "/api/bots/{botID}/flow-intelligence/reactions/{reactionID}/overlay", overlay, r)
		var o flowOverlay
		require.NoError(t, json.Unmarshal(r.Body, &o))
		return o
	}
	o := read()
	require.Len(t, o.Steps, 4)
	got := map[string][4]int{}
	for _, st := range o.Steps {
		got[st.StepID] = [4]int{st.Entered, st.Completed, st.Continued, st.Dropped}
	}
	assert.Equal(t, map[string][4]int{"hi": {2, 2, 2, 0}, "ask": {2, 2, 1, 1}, "yes": {1, 1, 1, 0}, "done": {1, 1, 1, 0}}, got)
	assert.NotNil(t, o.Steps[1].MedianMS, "the time to the press")
	assert.Equal(t, map[string]int{"entered": 6, "completed": 6, "continued": 5, "dropped": 1, "errors": 0}, o.Totals)

	// Samples: both runs entered ask; nothing names them or their subscribers.
	r := s.get(tok, samples)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/bots/{botID}/flow-intelligence/reactions/{reactionID}/samples", samples, r)
	assert.Len(t, r.JSON(t)["data"], 2)
	body := string(r.Body)
	for _, secret := range []string{annSub, bobSub, "exe_", `"message_id"`, "update_id", "8101", "8102"} {
		assert.NotContains(t, body, secret)
	}
	assert.Contains(t, body, `"message_sent":true`)
	assert.Contains(t, body, "Go on?", "bot-authored inputs stay")

	// Policy: the default, a first save, a stale one, then sampling off.
	r = s.get(tok, base+"/policy")
	require.Equal(t, 200, r.Status)
	conforms(t, http.MethodGet, "/api/bots/{botID}/flow-intelligence/policy", base+"/policy", r)
	assert.Equal(t, float64(0), r.JSON(t)["revision"])
	pol := map[string]any{"sampling": "enabled", "sample_trigger_details": true, "retention_days": 14}
	r = s.put(tok, base+"/policy", pol)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPut, "/api/bots/{botID}/flow-intelligence/policy", base+"/policy", r)
	assert.Equal(t, float64(1), r.JSON(t)["revision"])
	r = s.put(tok, base+"/policy", pol)
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "stale_revision", r.Code(t))
	assert.Equal(t, float64(1), r.JSON(t)["current_revision"])
	r = s.put(tok, base+"/policy", map[string]any{"sampling": "disabled", "sample_trigger_details": true, "retention_days": 14, "expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, float64(2), r.JSON(t)["revision"])
	r = s.put(tok, base+"/policy", map[string]any{"sampling": "sometimes", "sample_trigger_details": true, "retention_days": 99, "expected_revision": 2, "extra": 1})
	assert.Equal(t, 400, r.Status)
	r = s.get(tok, samples)
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "sampling_disabled", r.Code(t))

	// Reaggregation: the job completes, and live counting was already right.
	now := time.Now().UTC()
	r = s.post(tok, base+"/reaggregations", map[string]any{"from": now.Add(-48 * time.Hour).Format(time.RFC3339), "to": now.Add(time.Hour).Format(time.RFC3339)})
	require.Equal(t, 202, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/bots/{botID}/flow-intelligence/reaggregations", base+"/reaggregations", r)
	job := r.JSON(t)["id"].(string)
	assert.Equal(t, base+"/reaggregations/"+job, r.Header.Get("Location"))
	var done map[string]any
	eventually(t, 20*time.Second, "the job finishes", func() bool {
		r := s.get(tok, base+"/reaggregations/"+job)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		done = r.JSON(t)
		return done["status"] == "succeeded" || done["status"] == "failed"
	})
	require.Equal(t, "succeeded", done["status"], "%v", done)
	assert.Equal(t, float64(2), done["runs_scanned"])
	for _, d := range done["days"].([]any) {
		assert.NotEqual(t, "rebuilt", d.(map[string]any)["status"], "live counting matched the traces: %v", d)
	}
	conforms(t, http.MethodGet, "/api/bots/{botID}/flow-intelligence/reaggregations/{jobID}", base+"/reaggregations/"+job, s.get(tok, base+"/reaggregations/"+job))
	assert.Equal(t, o, read(), "the same overlay after the rebuild")
	r = s.get(tok, base+"/reaggregations")
	require.Equal(t, 200, r.Status)
	conforms(t, http.MethodGet, "/api/bots/{botID}/flow-intelligence/reaggregations", base+"/reaggregations", r)
	assert.Len(t, r.JSON(t)["data"], 1)

	// Ranges over 366 days: 400 range_too_long.
	r = s.get(tok, overlay+"?from="+now.Add(-400*24*time.Hour).Format(time.RFC3339))
	require.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Equal(t, "range_too_long", r.Code(t))
	r = s.post(tok, base+"/reaggregations", map[string]any{"from": now.Add(-400 * 24 * time.Hour).Format(time.RFC3339), "to": now.Format(time.RFC3339)})
	require.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Equal(t, "range_too_long", r.Code(t))

	// Access: 401, 403 scope, 403 right, 404 tenancy and unknown resources.
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "analytics:read")["token"]
	noRight := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "reactions")["user_id"]
	noRightTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noRight, "--scopes", "*")["token"]
	other := s.newAccount("Other")
	s.adminJSON("account", "rollout", "--account", other.ID, "--enable", "flow_intelligence")
	otherTok := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]
	for _, rq := range routes {
		rq.Token = "mbp_not_a_token"
		assert.Equal(t, 401, s.do(rq).Status, "%s %s", rq.Method, rq.Path)
		rq.Token = noRightTok
		r := s.do(rq)
		if assert.Equal(t, 403, r.Status, "%s %s", rq.Method, rq.Path) {
			assert.Equal(t, "missing_right", r.Code(t))
		}
		rq.Token = otherTok
		assert.Equal(t, 404, s.do(rq).Status, "another account's bot: %s %s", rq.Method, rq.Path)
		if rq.Method != "GET" {
			rq.Token = readOnly
			r := s.do(rq)
			if assert.Equal(t, 403, r.Status, "%s %s", rq.Method, rq.Path) {
				assert.Equal(t, "insufficient_scope", r.Code(t))
			}
		}
	}
	assert.Equal(t, 200, s.get(readOnly, overlay).Status)
	assert.Equal(t, 404, s.get(tok, strings.Replace(overlay, id, "rct_01hx7y9k2m3n4p5q6r7s8t9v0w", 1)).Status)
	assert.Equal(t, 404, s.get(tok, overlay+"?version=9").Status)
	assert.Equal(t, 404, s.get(tok, base+"/reaggregations/job_01hx7y9k2m3n4p5q6r7s8t9v0w").Status)
	// The policy is the account's: the other account's is its own default.
	r = s.get(otherTok, "/api/bots/"+other.Bot+"/flow-intelligence/policy")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, float64(0), r.JSON(t)["revision"])

	// Changing the account's policy takes more than a bot: a bot API token, or a member whose
	// Analytics right is on this bot alone, may read it and not change it (403); a member with
	// the right on every bot may.
	r = s.get(tok, base+"/policy")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	current := r.JSON(t)
	change := map[string]any{"sampling": "enabled", "sample_trigger_details": false, "retention_days": 7, "expected_revision": current["revision"]}
	botTok := s.post(tok, "/api/bots/"+s.demo.BotID+"/api-tokens", map[string]any{"name": "flow"}).JSON(t)["token"].(string)
	assert.Equal(t, 200, s.get(botTok, base+"/policy").Status, "a bot token reads the policy")
	r = s.put(botTok, base+"/policy", change)
	if assert.Equal(t, 403, r.Status, "%s", r.Body) {
		assert.Equal(t, "insufficient_scope", r.Code(t))
	}
	oneBot := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "")["user_id"]
	s.adminJSON("user", "grant", "--account", s.demo.AccountID, "--user", oneBot, "--bot", s.demo.BotID, "--rights", "analytics")
	oneBotTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", oneBot, "--scopes", "*")["token"]
	assert.Equal(t, 200, s.get(oneBotTok, base+"/policy").Status, "the bot's analyst reads the policy")
	r = s.put(oneBotTok, base+"/policy", change)
	if assert.Equal(t, 403, r.Status, "%s", r.Body) {
		assert.Equal(t, "missing_right", r.Code(t))
		assert.Contains(t, r.JSON(t)["missing_rights"], "analytics")
	}
	assert.Equal(t, current, s.get(tok, base+"/policy").JSON(t), "unchanged")
	analyst := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "analytics")["user_id"]
	analystTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", analyst, "--scopes", "*")["token"]
	r = s.put(analystTok, base+"/policy", change)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, float64(7), r.JSON(t)["retention_days"])
}
