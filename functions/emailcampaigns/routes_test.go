package emailcampaigns

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

type server struct {
	*fixture
	*httpapitest.Server
}

func newServer(t *testing.T, people int) *server {
	t.Helper()
	f := newFixture(t, people)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.st, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	return &server{fixture: f, Server: s}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t, 0)
	read := httpapi.Need("email_campaigns:read", auth.RightReactions).InPlan(auth.FeatureEmailCampaigns)
	write := httpapi.Need("email_campaigns:write", auth.RightReactions).InPlan(auth.FeatureEmailCampaigns)
	const list = "/api/bots/{botID}/email-campaigns"
	const one = list + "/{campaignID}"
	want := map[string]httpapi.Access{
		"GET " + list:                      read,
		"POST " + list:                     write,
		"GET " + one:                       read,
		"PATCH " + one:                     write,
		"GET " + one + "/report":           read,
		"GET " + one + "/recipients":       read,
		"GET " + one + "/links":            read,
		"POST " + one + "/consent-preview": read,
		"POST " + one + "/test-send":       write,
		"POST " + one + "/schedule":        write,
		"POST " + one + "/clone":           write,
		"POST " + one + "/pause":           write,
		"POST " + one + "/resume":          write,
		"POST " + one + "/cancel":          write,
		"POST " + one + "/archive":         write,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func TestRoutesNeedThePlan(t *testing.T) {
	t.Parallel()
	s := newServer(t, 0)
	_, err := s.Auth.SetPlan(sqlitetest.Unrecorded(t.Context()), s.Account.ID, []auth.Feature{auth.FeatureAnalytics})
	require.NoError(t, err)
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/bots/" + s.bot + "/email-campaigns"},
		{"POST", "/api/bots/" + s.bot + "/email-campaigns"},
		{"POST", "/api/bots/" + s.bot + "/email-campaigns/ecmp_x/schedule"},
	} {
		res := s.Do(t, r.method, r.path, `{}`)
		assert.Equal(t, 402, res.Code, r.path)
		assert.Equal(t, "feature_not_in_plan", res.Problem(), r.path)
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t, 3)
	base := "/api/bots/" + s.bot + "/email-campaigns"

	res := s.Do(t, "POST", base, `{"name":"March news","content_id":"doc_news","audience":{"label_ids":[]}}`)
	require.Equal(t, 201, res.Code, res.Body)
	id := res.JSON["id"].(string)
	one := base + "/" + id
	assert.Equal(t, one, res.Header.Get("Location"))
	assert.Equal(t, "draft", res.JSON["state"])
	assert.Equal(t, float64(1), res.JSON["revision"])
	assert.Nil(t, res.JSON["content_version"])
	assert.NotContains(t, res.Body, "epoch", "the run's epoch is internal")

	res = s.Do(t, "POST", base, `{"name":"x","content_id":"doc_news","colour":"red"}`)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "unknown_field", res.Problem())

	res = s.Do(t, "GET", one, nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(0), res.JSON["counts"].(map[string]any)["recipients"])
	res = s.Do(t, "GET", base+"?state=draft", nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Len(t, res.JSON["data"], 1)
	res = s.Do(t, "GET", base+"?state=sent", nil)
	assert.Empty(t, res.JSON["data"])
	res = s.Do(t, "GET", base+"?state=done", nil)
	assert.Equal(t, 400, res.Code)

	res = s.Do(t, "PATCH", one, `{"name":"April news"}`)
	assert.Equal(t, 400, res.Code, "expected_revision is required")
	res = s.Do(t, "PATCH", one, `{"expected_revision":1,"name":"April news"}`)
	require.Equal(t, 200, res.Code, res.Body)
	res = s.Do(t, "PATCH", one, `{"expected_revision":1,"name":"May news"}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "stale_revision", res.Problem())
	assert.Equal(t, float64(2), res.JSON["current_revision"])

	for _, body := range []string{`{"expected_revision":2}`, `{"expected_revision":2,"confirm":false}`} {
		res = s.Do(t, "POST", one+"/schedule", body)
		assert.Equal(t, 400, res.Code, body)
		assert.Equal(t, "confirmation_required", res.Problem(), body)
	}
	res = s.Do(t, "POST", one+"/schedule", `{"expected_revision":2,"confirm":true,"send_at":"2026-03-01T14:00:00+02:00"}`)
	assert.Equal(t, 400, res.Code)
	assert.Contains(t, res.Body, "must be in UTC")

	res = s.Do(t, "POST", one+"/consent-preview", nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(3), res.JSON["counts"].(map[string]any)["sendable"])

	s.content.mu.Lock()
	s.content.published["doc_news"] = 0
	s.content.mu.Unlock()
	res = s.Do(t, "POST", one+"/schedule", `{"expected_revision":2,"confirm":true}`)
	assert.Equal(t, 422, res.Code)
	assert.Equal(t, "campaign_not_ready", res.Problem())
	checks := res.JSON["checks"].([]any)
	require.Len(t, checks, 3)
	assert.Equal(t, map[string]any{"check": "audience", "ok": true, "message": "3 of 3 subscribers can be sent to"}, checks[2])
	res = s.Do(t, "POST", one+"/test-send", `{"addresses":["qa@example.com"]}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "document_not_published", res.Problem(), "the content family's answer passes through")
	s.content.mu.Lock()
	s.content.published["doc_news"] = 3
	s.content.mu.Unlock()

	res = s.Do(t, "POST", one+"/test-send", `{"addresses":[]}`)
	assert.Equal(t, 400, res.Code)
	res = s.Do(t, "POST", one+"/test-send", `{"addresses":["not an address","Qa <qa@example.com>"]}`)
	assert.Equal(t, []any{"addresses[0]", "addresses[1]"}, fields(res))
	// An address the bot's suppression list has is refused, with the reason, and nothing
	// is sent to the others either.
	s.supp.add("gone@example.com", "bounced")
	res = s.Do(t, "POST", one+"/test-send", `{"addresses":["qa@example.com","Gone@Example.com"]}`)
	assert.Equal(t, 422, res.Code)
	assert.Equal(t, "address_suppressed", res.Problem())
	assert.Equal(t, []any{map[string]any{"address": "Gone@Example.com", "reason": "bounced"}}, res.JSON["suppressed"])
	assert.Empty(t, s.mail.all(), "nothing sent")
	for range TestSendLimit.Max {
		res = s.Do(t, "POST", one+"/test-send", `{"addresses":["qa@example.com","lead@example.com"]}`)
		require.Equal(t, 200, res.Code, res.Body)
	}
	assert.Len(t, res.JSON["sent"], 2)
	assert.Equal(t, float64(3), res.JSON["content_version"])
	res = s.Do(t, "POST", one+"/test-send", `{"addresses":["qa@example.com"]}`)
	assert.Equal(t, 429, res.Code)
	tests := s.mail.all()
	require.Len(t, tests, 2*int(TestSendLimit.Max))
	assert.Equal(t, "[Test] News for Alex", tests[0].Msg.Subject)
	assert.NotContains(t, tests[0].Msg.HTML, publicURL, "no tracking in a test")
	assert.Empty(t, s.rows(t, id), "no rows for a test")

	res = s.Do(t, "POST", one+"/schedule", `{"expected_revision":2,"confirm":true,"send_at":"2026-03-01T12:00:00Z"}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "scheduled", res.JSON["state"])
	assert.Equal(t, float64(3), res.JSON["content_version"])
	res = s.Do(t, "PATCH", one, `{"expected_revision":3,"name":"x"}`)
	assert.Equal(t, "campaign_not_editable", res.Problem())
	res = s.Do(t, "POST", one+"/pause", `{"expected_revision":3}`)
	assert.Equal(t, 409, res.Code)
	assert.Equal(t, "invalid_transition", res.Problem())
	assert.Equal(t, "scheduled", res.JSON["state"])
	s.drain(t)

	res = s.Do(t, "GET", one, nil)
	assert.Equal(t, "sent", res.JSON["state"])
	assert.Equal(t, float64(5), res.JSON["revision"], "the job moved it twice: sending, sent")
	res = s.Do(t, "GET", one+"/recipients?state=sent&limit=2", nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Len(t, res.JSON["data"], 2)
	next, _ := res.JSON["next_cursor"].(string)
	require.NotEmpty(t, next)
	res = s.Do(t, "GET", one+"/recipients?state=sent&limit=2&cursor="+next, nil)
	assert.Len(t, res.JSON["data"], 1)
	res = s.Do(t, "GET", one+"/recipients?state=planned", nil)
	assert.Empty(t, res.JSON["data"])
	res = s.Do(t, "GET", one+"/recipients?state=lost", nil)
	assert.Equal(t, 400, res.Code)
	res = s.Do(t, "GET", one+"/report", nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, float64(3), res.JSON["counts"].(map[string]any)["sent"])
	res = s.Do(t, "GET", one+"/links", nil)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Len(t, res.JSON["data"], 2)
	assert.Nil(t, res.JSON["next_cursor"])

	res = s.Do(t, "POST", one+"/clone", nil)
	require.Equal(t, 201, res.Code, res.Body)
	assert.Equal(t, "April news (copy)", res.JSON["name"])
	res = s.Do(t, "POST", one+"/archive", `{"expected_revision":5}`)
	require.Equal(t, 200, res.Code, res.Body)
	assert.Equal(t, "archived", res.JSON["state"])

	for _, path := range []string{base + "/ecmp_nope", "/api/bots/bot_other/email-campaigns/" + id} {
		res = s.Do(t, "GET", path, nil)
		assert.Equal(t, 404, res.Code, path)
	}
	res = s.Do(t, "GET", base, nil)
	assert.Len(t, res.JSON["data"], 2)
	assert.Nil(t, res.JSON["data"].([]any)[0].(map[string]any)["counts"], "lists leave the counts out")
	assert.False(t, strings.Contains(res.Body, "ADDR#"))
}

func fields(res httpapitest.Reply) []any {
	var out []any
	list, _ := res.JSON["errors"].([]any)
	for _, e := range list {
		out = append(out, e.(map[string]any)["field"])
	}
	return out
}
