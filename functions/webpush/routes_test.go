package webpush

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

type server struct {
	*fixture
	*httpapitest.Server
	base string
}

func newServer(t *testing.T) *server {
	t.Helper()
	f := newFixture(t)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.raw, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	return &server{fixture: f, Server: s, base: "/api/bots/" + f.bot + "/web-push"}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("web_push:read", auth.RightAnalytics).InPlan(auth.FeatureWebPush)
	write := httpapi.Need("web_push:write", auth.RightReactions).InPlan(auth.FeatureWebPush)
	const base = "/api/bots/{botID}/web-push"
	want := map[string]httpapi.Access{
		"GET " + base:                    read,
		"GET " + base + "/subscriptions": read,
		"GET " + base + "/report":        read,
		"POST " + base + "/enable":       write,
		"PATCH " + base:                  write,
		"POST " + base + "/rotate-keys":  write,
		"POST " + base + "/test":         write,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	res := s.Do(t, "GET", s.base, nil)
	assert.Equal(t, http.StatusNotFound, res.Code)
	assert.Equal(t, "web_push_not_enabled", res.Problem())

	res = s.Do(t, "POST", s.base+"/enable", nil)
	assert.Equal(t, http.StatusBadRequest, res.Code, res.Body)
	res = s.Do(t, "POST", s.base+"/enable", `{"subject":"mailto:push@shop.example","navigation_origins":["https://shop.example"],"private_key":"x"}`)
	assert.Equal(t, "unknown_field", res.Problem())
	res = s.Do(t, "POST", s.base+"/enable", `{"subject":"mailto:push@shop.example","navigation_origins":["https://shop.example"]}`)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)
	pub := res.JSON["vapid_public_key"]
	assert.NotEmpty(t, pub)
	assert.NotContains(t, res.Body, "private")
	res = s.Do(t, "POST", s.base+"/enable", `{}`)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, pub, res.JSON["vapid_public_key"])

	res = s.Do(t, "PATCH", s.base, `{"enabled":false}`)
	assert.Equal(t, http.StatusBadRequest, res.Code)
	res = s.Do(t, "PATCH", s.base, `{"expected_revision":1,"quiet_hours":{"enabled":true,"start":"22:00","end":"06:00","timezone":"Europe/Berlin"}}`)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(2), res.JSON["revision"])

	s.subscribe(t, "wps_1")
	res = s.Do(t, "POST", s.base+"/rotate-keys", nil)
	assert.Equal(t, http.StatusConflict, res.Code)
	assert.Equal(t, "confirm_required", res.Problem())
	assert.Equal(t, float64(1), res.JSON["active_subscriptions"])

	res = s.Do(t, "POST", s.base+"/test", `{"subscription_id":"wps_1"}`)
	assert.Equal(t, http.StatusBadRequest, res.Code)
	res = s.Do(t, "POST", s.base+"/test", `{"subscription_id":"wps_1","document_id":"doc_push"}`)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(201), res.JSON["push_status"])

	res = s.Do(t, "POST", s.base+"/rotate-keys", `{"confirm":true}`)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, float64(1), res.JSON["expired_subscriptions"])
	assert.NotEqual(t, pub, res.JSON["vapid_public_key"])

	res = s.Do(t, "GET", s.base+"/report", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, map[string]any{"sent": float64(1), "expired": float64(0), "failed": float64(0)}, res.JSON["sends"])

	res = s.Do(t, "GET", s.base+"/subscriptions", nil)
	require.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.Equal(t, []any{}, res.JSON["data"])
}

// Reads need the Analytics right, writes the Reactions right.
func TestRoutesRights(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := t.Context()
	analyst, err := s.Auth.CreateUser(ctx, s.Account.ID, "analyst", auth.RightsOf(auth.RightAnalytics))
	require.NoError(t, err)
	tok := s.PAT(t, analyst, "web_push:*")
	res := s.DoAs(t, tok, "POST", s.base+"/enable", `{"subject":"mailto:a@b.example"}`)
	assert.Equal(t, http.StatusForbidden, res.Code, res.Body)
	res = s.DoAs(t, tok, "GET", s.base+"/report", nil)
	assert.Equal(t, http.StatusOK, res.Code, res.Body)
}
