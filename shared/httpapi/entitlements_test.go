package httpapi_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Entitlements are checked after scope, tenancy and rights, in the order plan (402), rollout
// (403 feature_not_enabled), paid broadcasts (403 paid_broadcasts_not_enabled).
func TestEntitlements(t *testing.T) {
	t.Parallel()
	standard := auth.Entitlements{}
	narrow := auth.Entitlements{Plan: []auth.Feature{auth.FeatureAnalytics}}
	rolled := auth.Entitlements{Rollout: []auth.Feature{auth.RolloutCopilot}, PaidBroadcastBots: []string{botA}}
	principal := func(e auth.Entitlements, scopes ...auth.Scope) *auth.Principal {
		if len(scopes) == 0 {
			scopes = auth.Scopes{auth.Full}
		}
		return &auth.Principal{AccountID: "acct_A", UserID: "usr_owner", TokenID: "pat_x", Kind: auth.KindPAT, Scopes: scopes, Role: auth.RoleOwner, Entitlements: e}
	}
	var caller *auth.Principal
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: func(*http.Request) (*auth.Principal, error) { return caller, nil },
		Bots:         &botLoader{},
		Audit:        &publisher{},
		Log:          slog.New(slog.DiscardHandler),
		Now:          func() time.Time { return now },
	})
	require.NoError(t, err)
	ok := func(w http.ResponseWriter, r *http.Request) error { return httpapi.NoContent(w) }
	mux.Handle("GET /api/bots/{botID}/popups", httpapi.Need("popups:read").InPlan(auth.FeaturePopups), ok)
	mux.Handle("GET /api/bots/{botID}/copilot", httpapi.Need("bots:read").InPlan(auth.FeatureManagedAI).InRollout(auth.RolloutCopilot), ok)
	mux.Handle("POST /api/bots/{botID}/broadcasts", httpapi.Need("broadcasts:write").InPlan(auth.FeatureBroadcasts).WithPaidBroadcasts(), ok)
	mux.Handle("GET /api/replay", httpapi.Need("bots:read").InRollout(auth.RolloutReplay), ok)
	mux.Handle("POST /api/bots/{botID}/cohorts", httpapi.Need("analytics:read").AndScope("segments:write"), ok)

	cases := []struct {
		name   string
		caller *auth.Principal
		method string
		path   string
		status int
		code   string
	}{
		{"both scopes held", principal(standard, "analytics:read", "segments:write"), "POST", "/api/bots/" + botA + "/cohorts", 204, ""},
		{"second scope missing", principal(standard, "analytics:read"), "POST", "/api/bots/" + botA + "/cohorts", 403, "insufficient_scope"},
		{"first scope missing", principal(standard, "segments:write"), "POST", "/api/bots/" + botA + "/cohorts", 403, "insufficient_scope"},
		{"standard plan has popups", principal(standard), "GET", "/api/bots/" + botA + "/popups", 204, ""},
		{"plan without popups", principal(narrow), "GET", "/api/bots/" + botA + "/popups", 402, "feature_not_in_plan"},
		{"scope before plan", principal(narrow, "bots:read"), "GET", "/api/bots/" + botA + "/popups", 403, "insufficient_scope"},
		{"tenancy before plan", principal(narrow), "GET", "/api/bots/" + botC + "/popups", 404, "not_found"},
		{"rollout unassigned fails closed", principal(standard), "GET", "/api/bots/" + botA + "/copilot", 403, "feature_not_enabled"},
		{"plan before rollout", principal(narrow), "GET", "/api/bots/" + botA + "/copilot", 402, "feature_not_in_plan"},
		{"rollout enabled", principal(rolled), "GET", "/api/bots/" + botA + "/copilot", 204, ""},
		{"rollout on an account route", principal(rolled), "GET", "/api/replay", 403, "feature_not_enabled"},
		{"paid broadcasts off", principal(standard), "POST", "/api/bots/" + botA + "/broadcasts", 403, "paid_broadcasts_not_enabled"},
		{"paid broadcasts on for this bot", principal(rolled), "POST", "/api/bots/" + botA + "/broadcasts", 204, ""},
		{"paid broadcasts are per bot", principal(rolled), "POST", "/api/bots/" + botB + "/broadcasts", 403, "paid_broadcasts_not_enabled"},
		{"plan before paid broadcasts", principal(narrow), "POST", "/api/bots/" + botA + "/broadcasts", 402, "feature_not_in_plan"},
	}
	for _, tc := range cases {
		caller = tc.caller
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		assert.Equal(t, tc.status, rec.Code, tc.name)
		if tc.code != "" {
			assert.Contains(t, rec.Body.String(), `"code":"`+tc.code+`"`, tc.name)
		}
	}
}

// A 429 that says how long to wait sends it as Retry-After.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	k.mux.Handle("GET /api/limited", httpapi.Public(), func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.E(httpapi.KindTooManyRequests, "rate_limited", "slow down").With("retry_after_seconds", int64(17))
	})
	rec := httptest.NewRecorder()
	k.mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/limited", nil))
	assert.Equal(t, 429, rec.Code)
	assert.Equal(t, "17", rec.Header().Get("Retry-After"))
}
