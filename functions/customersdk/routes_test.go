package customersdk

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

type server struct {
	*httpapitest.Server
	svc  *Service
	bot  string
	base string
}

func newServer(t *testing.T) *server {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	bot := ids.At("bot", t0)
	s := httpapitest.New(t, httpapitest.Config{Now: c.Now, Store: st, BotIDs: []string{bot}})
	sealer, err := keyfile.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	svc := NewService(Config{Store: st, Sealer: secretstest.Wrap(sealer, kms.PurposeSecrets), Key: sdkKey, Now: c.Now})
	Routes(s.Mux, svc)
	return &server{Server: s, svc: svc, bot: bot, base: "/api/bots/" + bot + "/customer-sdk"}
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	read := httpapi.Need("customer_sdk:read", auth.RightAnalytics).InPlan(auth.FeatureCustomerSDK)
	write := httpapi.Need("customer_sdk:write", auth.RightReactions).InPlan(auth.FeatureCustomerSDK)
	const base = "/api/bots/{botID}/customer-sdk"
	want := map[string]httpapi.Access{
		"GET " + base:                                        read,
		"PATCH " + base:                                      write,
		"POST " + base + "/enable":                           write,
		"POST " + base + "/rotate-secret":                    write,
		"GET " + base + "/installations":                     read,
		"DELETE " + base + "/installations/{installationID}": write,
		"GET " + base + "/report":                            read,
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

// Every route needs the customer_sdk plan feature: without it 402, before the body or the
// project is looked at; with it the same token is served.
func TestRoutesNeedThePlan(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	res := s.Do(t, "POST", s.base+"/enable", `{"web_origins":["https://shop.example"]}`)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)

	_, err := s.Auth.SetPlan(sqlitetest.Unrecorded(t.Context()), s.Account.ID, []auth.Feature{auth.FeatureWebPush, auth.FeatureAnalytics})
	require.NoError(t, err)
	// A new token: an authenticated principal is cached with the plan it was read with.
	tok := s.PAT(t, s.Owner)
	routes := []struct{ method, path, body string }{
		{"GET", s.base, ""},
		{"PATCH", s.base, `{"expected_revision":1,"enabled":false}`},
		{"POST", s.base + "/enable", `{}`},
		{"POST", s.base + "/rotate-secret", `{}`},
		{"GET", s.base + "/installations", ""},
		{"DELETE", s.base + "/installations/inst_00000000000000000000000000", ""},
		{"GET", s.base + "/report", ""},
	}
	for _, r := range routes {
		var body any
		if r.body != "" {
			body = r.body
		}
		res := s.DoAs(t, tok, r.method, r.path, body)
		assert.Equal(t, http.StatusPaymentRequired, res.Code, "%s %s: %s", r.method, r.path, res.Body)
		assert.Equal(t, "feature_not_in_plan", res.Problem(), r.path)
		assert.Equal(t, "customer_sdk", res.JSON["feature"], r.path)
	}
	p, err := s.svc.Project(t.Context(), s.bot)
	require.NoError(t, err)
	assert.True(t, p.Enabled, "the refused PATCH changed nothing")
	assert.Equal(t, 1, p.IdentitySecretVersion, "the refused rotation changed nothing")

	_, err = s.Auth.SetPlan(sqlitetest.Unrecorded(t.Context()), s.Account.ID, []auth.Feature{auth.FeatureCustomerSDK})
	require.NoError(t, err)
	res = s.DoAs(t, s.PAT(t, s.Owner), "GET", s.base, nil)
	assert.Equal(t, http.StatusOK, res.Code, res.Body)
}

// Reads need the Analytics right, writes the Reactions right; the scopes are kept apart.
func TestRoutesRights(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	ctx := sqlitetest.Unrecorded(t.Context())
	res := s.Do(t, "POST", s.base+"/enable", `{"web_origins":["https://shop.example"]}`)
	require.Equal(t, http.StatusCreated, res.Code, res.Body)

	analyst, err := s.Auth.CreateUser(ctx, s.Account.ID, "analyst", auth.RightsOf(auth.RightAnalytics))
	require.NoError(t, err)
	tok := s.PAT(t, analyst, "customer_sdk:*")
	res = s.DoAs(t, tok, "GET", s.base+"/report", nil)
	assert.Equal(t, http.StatusOK, res.Code, res.Body)
	res = s.DoAs(t, tok, "POST", s.base+"/rotate-secret", nil)
	assert.Equal(t, http.StatusForbidden, res.Code, res.Body)
	assert.Equal(t, "missing_right", res.Problem())

	editor, err := s.Auth.CreateUser(ctx, s.Account.ID, "editor", auth.RightsOf(auth.RightReactions))
	require.NoError(t, err)
	tok = s.PAT(t, editor, "customer_sdk:*")
	res = s.DoAs(t, tok, "GET", s.base+"/installations", nil)
	assert.Equal(t, http.StatusForbidden, res.Code, res.Body)
	assert.Equal(t, "missing_right", res.Problem())
	res = s.DoAs(t, tok, "POST", s.base+"/rotate-secret", nil)
	assert.Equal(t, http.StatusOK, res.Code, res.Body)
	assert.NotEmpty(t, res.JSON["identity_secret"])

	reader := s.PAT(t, s.Owner, "customer_sdk:read")
	res = s.DoAs(t, reader, "GET", s.base, nil)
	assert.Equal(t, http.StatusOK, res.Code, res.Body)
	res = s.DoAs(t, reader, "PATCH", s.base, `{"expected_revision":2,"enabled":false}`)
	assert.Equal(t, http.StatusForbidden, res.Code, res.Body)
	assert.Equal(t, "insufficient_scope", res.Problem())
}
