package tests

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// experimentFixture is the demo bot with two popups and six subscribers to experiment on.
type experimentFixture struct {
	s        *server
	tok, bot string
	base     string
	pops     [2]string
	subs     []string
}

func newExperimentFixture(t *testing.T) *experimentFixture {
	t.Helper()
	s := start(t)
	f := &experimentFixture{s: s, tok: s.demo.Token, bot: s.demo.BotID, base: "/api/bots/" + s.demo.BotID + "/experiments"}
	for i, title := range []string{"10% off", "Join us"} {
		r := s.post(f.tok, "/api/bots/"+f.bot+"/popups", map[string]any{"name": "Signup " + title, "status": "active",
			"content": map[string]any{"title": title, "button_text": "Go"}, "allowed_origins": []any{"https://shop.example"}})
		require.Equal(t, 201, r.Status, "%s", r.Body)
		f.pops[i] = r.JSON(t)["id"].(string)
	}
	for i := range 6 {
		r := s.post(f.tok, "/api/bots/"+f.bot+"/subscribers", map[string]any{"channel": "telegram", "external_id": fmt.Sprint(8001 + i), "first_name": "S"})
		require.Less(t, r.Status, 300, "%s", r.Body)
		f.subs = append(f.subs, r.JSON(t)["id"].(string))
	}
	return f
}

func (f *experimentFixture) definition() map[string]any {
	return map[string]any{
		"name":       "Signup popup copy",
		"hypothesis": "A shorter headline gets more signups.",
		"variants": []any{
			map[string]any{"id": "control", "name": "Current", "weight": 1, "subject": map[string]any{"type": "popup", "popup_id": f.pops[0]}},
			map[string]any{"id": "short", "name": "Shorter", "weight": 1, "subject": map[string]any{"type": "popup", "popup_id": f.pops[1]}},
		},
		"goal": map[string]any{"event": "purchase"},
	}
}

// postEvent posts a custom event of a subscriber through the events route.
func (f *experimentFixture) postEvent(t *testing.T, sub, name, id string, at time.Time, revenue map[string]any) {
	t.Helper()
	event := map[string]any{"subscriber_id": sub, "name": name, "event_id": id, "at": at.UTC().Format(time.RFC3339Nano)}
	if revenue != nil {
		event["revenue"] = revenue
	}
	r := f.s.post(f.tok, "/api/bots/"+f.bot+"/events", map[string]any{"events": []any{event}})
	require.Less(t, r.Status, 300, "%s", r.Body)
}

// An experiment over two real popups: started, subscribers assigned deterministically, goal
// events with revenue in two currencies posted through the events route, a report with
// exact counts and sums per currency, a cohort saved as a segment, the winner chosen once.
func TestExperimentsEndToEnd(t *testing.T) {
	t.Parallel()
	f := newExperimentFixture(t)
	s, tok := f.s, f.tok
	begin := time.Now().UTC().Add(-time.Minute)

	// A subject the bot does not have is 422; the real popups make a draft.
	bad := f.definition()
	bad["variants"].([]any)[1].(map[string]any)["subject"] = map[string]any{"type": "content", "document_id": "doc_00000000000000000000000000"}
	r := s.post(tok, f.base, bad)
	require.Equal(t, 422, r.Status, "%s", r.Body)
	assert.Equal(t, "unknown_subject", r.Code(t))
	conforms(t, "POST", "/api/bots/{botID}/experiments", f.base, r)

	r = s.post(tok, f.base, f.definition())
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/experiments", f.base, r)
	id := r.JSON(t)["id"].(string)
	exp := f.base + "/" + id
	assert.Equal(t, exp, r.Header.Get("Location"))
	assert.Equal(t, "draft", r.JSON(t)["status"])

	// Assignment waits for the start.
	r = s.post(tok, exp+"/assignments", map[string]any{"subscriber_id": f.subs[0]})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "experiment_not_running", r.Code(t))

	r = s.post(tok, exp+"/start", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/experiments/{experimentID}/start", exp+"/start", r)
	assert.Equal(t, "running", r.JSON(t)["status"])
	assert.Equal(t, float64(1), r.JSON(t)["version"])

	// A purchase before the exposure is not the variant's.
	f.postEvent(t, f.subs[3], "purchase", "early-1", time.Now().Add(-30*time.Second), map[string]any{"minor": 777, "currency": "USD"})

	variant := map[string]string{}
	for _, sub := range f.subs[:5] {
		r = s.post(tok, exp+"/assignments", map[string]any{"subscriber_id": sub})
		require.Equal(t, 200, r.Status, "%s", r.Body)
		conforms(t, "POST", "/api/bots/{botID}/experiments/{experimentID}/assignments", exp+"/assignments", r)
		a := r.JSON(t)
		assert.Equal(t, true, a["first_exposure"])
		variant[sub] = a["variant_id"].(string)
		// The same subscriber, the same variant, and no second exposure.
		r = s.post(tok, exp+"/assignments", map[string]any{"subscriber_id": sub})
		require.Equal(t, 200, r.Status, "%s", r.Body)
		assert.Equal(t, variant[sub], r.JSON(t)["variant_id"])
		assert.Equal(t, false, r.JSON(t)["first_exposure"])
	}
	r = s.post(tok, exp+"/assignments", map[string]any{"subscriber_id": "sub_00000000000000000000000000"})
	assert.Equal(t, 404, r.Status, "a subscriber the bot lacks: %s", r.Body)

	// Goal events after the exposures (a second later: events keep milliseconds).
	after := time.Now().Add(time.Second)
	type sums struct {
		converted map[string]bool
		usd, eur  int64
	}
	want := map[string]*sums{"control": {converted: map[string]bool{}}, "short": {converted: map[string]bool{}}}
	buy := func(sub, eventID string, minor int64, currency string) {
		f.postEvent(t, sub, "purchase", eventID, after, map[string]any{"minor": minor, "currency": currency})
		w := want[variant[sub]]
		w.converted[sub] = true
		if currency == "USD" {
			w.usd += minor
		} else {
			w.eur += minor
		}
	}
	buy(f.subs[0], "order-1", 1999, "USD")
	buy(f.subs[0], "order-2", 500, "EUR")
	buy(f.subs[1], "order-3", 1000, "USD")
	f.postEvent(t, f.subs[1], "purchase", "order-3", after, map[string]any{"minor": 1000, "currency": "USD"}) // a retry: once
	buy(f.subs[2], "order-4", 250, "EUR")
	buy(f.subs[3], "order-5", 1, "USD")
	f.postEvent(t, f.subs[4], "signup", "signup-1", after, nil)                                               // not the goal
	f.postEvent(t, f.subs[5], "purchase", "order-6", after, map[string]any{"minor": 5000, "currency": "USD"}) // never exposed

	end := time.Now().UTC().Add(time.Minute)
	rng := map[string]any{"from": begin.Format(time.RFC3339), "to": end.Format(time.RFC3339)}
	r = s.post(tok, exp+"/report", rng)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/experiments/{experimentID}/report", exp+"/report", r)
	rep := r.JSON(t)
	assert.Equal(t, "two_proportion_z_test", rep["test"])
	assert.Equal(t, 0.95, rep["confidence_level"])
	variants := rep["variants"].([]any)
	require.Len(t, variants, 2)
	exposed := map[string]float64{}
	for _, v := range variant {
		exposed[v]++
	}
	for _, raw := range variants {
		v := raw.(map[string]any)
		name := v["variant_id"].(string)
		w := want[name]
		assert.Equal(t, exposed[name], v["exposed"], name)
		assert.Equal(t, float64(len(w.converted)), v["converted"], name)
		revenue := map[string]any{}
		if w.usd != 0 {
			revenue["USD"] = map[string]any{"minor": float64(w.usd)}
		}
		if w.eur != 0 {
			revenue["EUR"] = map[string]any{"minor": float64(w.eur)}
		}
		assert.Equal(t, revenue, v["revenue"], name)
		if name == "control" {
			assert.Nil(t, v["significance"])
		} else {
			sig := v["significance"].(map[string]any)
			assert.Equal(t, "insufficient_sample", sig["status"], "five subscribers are below the minimum sample")
			assert.Nil(t, sig["p_value"])
		}
	}

	// Bounded ranges, versions in the bot.
	r = s.post(tok, exp+"/report", map[string]any{"from": end.AddDate(0, 0, -367).Format(time.RFC3339), "to": end.Format(time.RFC3339)})
	assert.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Equal(t, "range_too_long", r.Code(t))
	conforms(t, "POST", "/api/bots/{botID}/experiments/{experimentID}/report", exp+"/report", r)
	r = s.post(tok, exp+"/report", map[string]any{"from": end.AddDate(0, 0, -366).Format(time.RFC3339), "to": end.Format(time.RFC3339)})
	assert.Equal(t, 200, r.Status, "366 days: %s", r.Body)
	r = s.post(tok, exp+"/report", map[string]any{"from": rng["from"], "to": rng["to"], "version": 99})
	assert.Equal(t, 404, r.Status, "%s", r.Body)
	assert.Equal(t, "not_found", r.Code(t))
	r = s.get(tok, exp+"/versions/99")
	assert.Equal(t, 404, r.Status, "%s", r.Body)
	r = s.get(tok, exp+"/versions/1")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/experiments/{experimentID}/versions/{version}", exp+"/versions/1", r)

	// The converters of one variant become a segment.
	someone := variant[f.subs[0]]
	r = s.post(tok, exp+"/cohorts", map[string]any{"name": "Converted on " + someone, "variant_id": someone, "converted": true, "from": rng["from"], "to": rng["to"]})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/experiments/{experimentID}/cohorts", exp+"/cohorts", r)
	assert.Equal(t, float64(len(want[someone].converted)), r.JSON(t)["member_count"])
	assert.Equal(t, "experiment_cohort", r.JSON(t)["source"].(map[string]any)["kind"])

	// The winner, once.
	r = s.get(tok, exp)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	revision := r.JSON(t)["revision"]
	r = s.post(tok, exp+"/winner", map[string]any{"expected_revision": revision, "variant_id": "nope"})
	assert.Equal(t, 422, r.Status, "%s", r.Body)
	assert.Equal(t, "unknown_variant", r.Code(t))
	r = s.post(tok, exp+"/winner", map[string]any{"expected_revision": revision, "variant_id": "short"})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/experiments/{experimentID}/winner", exp+"/winner", r)
	assert.Equal(t, "completed", r.JSON(t)["status"])
	assert.Equal(t, "short", r.JSON(t)["winner_variant_id"])
	current := r.JSON(t)["revision"]
	r = s.post(tok, exp+"/winner", map[string]any{"expected_revision": revision, "variant_id": "short"})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "stale_revision", r.Code(t))
	r = s.post(tok, exp+"/winner", map[string]any{"expected_revision": current, "variant_id": "control"})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "winner_already_selected", r.Code(t))
	conforms(t, "POST", "/api/bots/{botID}/experiments/{experimentID}/winner", exp+"/winner", r)

	// Completed is final, its report stays.
	r = s.post(tok, exp+"/resume", map[string]any{"expected_revision": current})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "invalid_transition", r.Code(t))
	r = s.post(tok, exp+"/report", rng)
	assert.Equal(t, 200, r.Status, "%s", r.Body)

	r = s.get(tok, f.base+"?status=completed")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/experiments", f.base+"?status=completed", r)
	require.Len(t, r.JSON(t)["data"], 1)
	r = s.del(tok, exp+"?expected_revision="+fmt.Sprint(current))
	assert.Equal(t, http.StatusNoContent, r.Status, "%s", r.Body)
	r = s.get(tok, exp)
	assert.Equal(t, 404, r.Status)
}

// Access: another account's bot is 404, a scope or a right short 403, the plan 402.
func TestExperimentsAccess(t *testing.T) {
	t.Parallel()
	f := newExperimentFixture(t)
	s := f.s
	r := s.post(f.tok, f.base, f.definition())
	require.Equal(t, 201, r.Status, "%s", r.Body)
	exp := f.base + "/" + r.JSON(t)["id"].(string)
	cohort := map[string]any{"name": "x", "variant_id": "short", "converted": true, "from": "2026-01-01T00:00:00Z", "to": "2026-02-01T00:00:00Z"}

	other := s.newAccount("Other")
	r = s.get(other.Token, f.base)
	assert.Equal(t, 404, r.Status, "another account's bot: %s", r.Body)
	r = s.get(other.Token, exp)
	assert.Equal(t, 404, r.Status, "%s", r.Body)

	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "experiments:read")["token"]
	r = s.post(readOnly, exp+"/start", map[string]any{"expected_revision": 1})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "insufficient_scope", r.Code(t))
	r = s.post(readOnly, exp+"/cohorts", cohort)
	assert.Equal(t, 403, r.Status, "a cohort also needs segments:write: %s", r.Body)
	assert.Equal(t, "segments:write", r.JSON(t)["required_scope"])
	both := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "experiments:read,segments:write")["token"]
	r = s.post(both, exp+"/cohorts", cohort)
	assert.Equal(t, 409, r.Status, "past the kernel, a draft has no results: %s", r.Body)
	assert.Equal(t, "experiment_not_started", r.Code(t))

	reactionsOnly := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "reactions")["user_id"]
	noAnalytics := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", reactionsOnly, "--scopes", "*")["token"]
	r = s.get(noAnalytics, exp)
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "missing_right", r.Code(t))
	analyst := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "analytics")["user_id"]
	analystTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", analyst, "--scopes", "experiments:read")["token"]
	r = s.get(analystTok, exp)
	assert.Equal(t, 200, r.Status, "the analytics right is enough: %s", r.Body)

	s.adminJSON("account", "plan", "--account", s.demo.AccountID, "--features", "popups")
	fresh := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	r = s.get(fresh, f.base)
	assert.Equal(t, 402, r.Status, "%s", r.Body)
	assert.Equal(t, "feature_not_in_plan", r.Code(t))
	assert.Equal(t, "analytics", r.JSON(t)["feature"])
	conforms(t, "GET", "/api/bots/{botID}/experiments", f.base, r)

	r = s.get("", f.base)
	assert.Equal(t, 401, r.Status)
}
