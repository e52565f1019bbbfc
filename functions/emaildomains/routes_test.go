package emaildomains

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

func newServer(t *testing.T, opts ...func(*Config)) (*fixture, *httpapitest.Server) {
	t.Helper()
	f := newFixture(t, opts...)
	s := httpapitest.New(t, httpapitest.Config{Now: f.clock.Now, Store: f.st, BotIDs: []string{f.bot}})
	Routes(s.Mux, f.svc, s.Cursors)
	PublicRoutes(s.Mux, f.svc)
	return f, s
}

// The access table is the security boundary of the family: a change to it must be deliberate.
func TestRoutesAccessTable(t *testing.T) {
	t.Parallel()
	_, s := newServer(t)
	read := httpapi.Need("settings:read")
	write := httpapi.Need("settings:write", auth.RightReactions)
	const (
		base    = "/api/bots/{botID}/email"
		domain  = base + "/domains/{domainID}"
		route   = base + "/inbound-routes/{routeID}"
		message = base + "/inbound-messages/{messageID}"
	)
	want := map[string]httpapi.Access{
		"GET " + base + "/domains":          read,
		"POST " + base + "/domains":         write,
		"GET " + domain:                     read,
		"DELETE " + domain:                  write,
		"POST " + domain + "/verify":        write,
		"GET " + base + "/inbound-routes":   read,
		"POST " + base + "/inbound-routes":  write,
		"GET " + route:                      read,
		"PATCH " + route:                    write,
		"DELETE " + route:                   write,
		"GET " + base + "/inbound-messages": read,
		"GET " + message:                    read,
		"POST /esp/{provider}/inbound":      httpapi.Public(),
	}
	got := map[string]httpapi.Access{}
	for _, rt := range s.Mux.Routes() {
		got[rt.Pattern()] = rt.Access
	}
	assert.Equal(t, want, got)
}

// noKey fails the test when a reply holds the private key or its sealed form.
func noKey(t *testing.T, r httpapitest.Reply) {
	t.Helper()
	for _, k := range keyTexts() {
		assert.NotContains(t, r.Body, k, "a response holds the private key")
	}
	assert.NotContains(t, r.Body, "sealed_key")
	assert.NotContains(t, r.Body, "PRIVATE KEY")
}

func TestDomainRoutes(t *testing.T) {
	t.Parallel()
	f, s := newServer(t)
	base := "/api/bots/" + f.bot + "/email/domains"

	r := s.Do(t, "POST", base, map[string]any{"name": "Example.com", "selector": "mine"})
	assert.Equal(t, http.StatusBadRequest, r.Code)
	assert.Equal(t, "unknown_field", r.Problem())
	r = s.Do(t, "POST", base, map[string]any{"name": "co.uk"})
	assert.Equal(t, "validation_failed", r.Problem())

	r = s.Do(t, "POST", base, map[string]any{"name": "Example.com"})
	require.Equal(t, http.StatusCreated, r.Code, r.Body)
	noKey(t, r)
	id, _ := r.JSON["id"].(string)
	assert.Equal(t, base+"/"+id, r.Header.Get("Location"))
	assert.Equal(t, "pending", r.JSON["status"])
	recs, _ := r.JSON["records"].([]any)
	assert.Len(t, recs, 5)
	d, err := f.svc.Get(t.Context(), f.bot, id)
	require.NoError(t, err)

	r = s.Do(t, "POST", base+"/"+id+"/verify", nil)
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	noKey(t, r)
	assert.Equal(t, "failed", r.JSON["status"])
	first, _ := r.JSON["records"].([]any)[0].(map[string]any)
	assert.Equal(t, "missing", first["status"])
	assert.Equal(t, []any{}, first["found"])

	f.dns.publish(d)
	r = s.Do(t, "POST", base+"/"+id+"/verify", "{}")
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	noKey(t, r)
	assert.Equal(t, "verified", r.JSON["status"])
	assert.EqualValues(t, 3, r.JSON["revision"])
	r = s.Do(t, "POST", base+"/"+id+"/verify", `{"force":true}`)
	assert.Equal(t, "unknown_field", r.Problem(), "verify takes no members")

	for _, path := range []string{base, base + "/" + id} {
		r = s.Do(t, "GET", path, nil)
		require.Equal(t, http.StatusOK, r.Code, r.Body)
		noKey(t, r)
		assert.Contains(t, r.Body, `"verified"`)
	}
	r = s.Do(t, "GET", "/api/bots/"+ids.At("bot", t0)+"/email/domains/"+id, nil)
	assert.Equal(t, http.StatusNotFound, r.Code)
	r = s.Do(t, "GET", base+"/edom_nope", nil)
	assert.Equal(t, http.StatusNotFound, r.Code)

	// Reading needs access to the bot only; verifying needs the Reactions right.
	member, err := s.Auth.CreateUser(sqlitetest.Unrecorded(t.Context()), s.Account.ID, "Member", 0)
	require.NoError(t, err)
	tok := s.PAT(t, member, "settings:read", "settings:write")
	assert.Equal(t, http.StatusOK, s.DoAs(t, tok, "GET", base+"/"+id, nil).Code)
	assert.Equal(t, "missing_right", s.DoAs(t, tok, "POST", base+"/"+id+"/verify", nil).Problem())
	assert.Equal(t, "missing_right", s.DoAs(t, tok, "DELETE", base+"/"+id, nil).Problem())
	reader := s.PAT(t, s.Owner, "settings:read")
	assert.Equal(t, "insufficient_scope", s.DoAs(t, reader, "POST", base, map[string]any{"name": "example.org"}).Problem())

	r = s.Do(t, "DELETE", base+"/"+id+"?expected_revision=1", nil)
	assert.Equal(t, http.StatusConflict, r.Code)
	assert.Equal(t, "stale_revision", r.Problem())
	r = s.Do(t, "DELETE", base+"/"+id+"?expected_revision=3", nil)
	assert.Equal(t, http.StatusNoContent, r.Code, r.Body)
	assert.Equal(t, http.StatusNotFound, s.Do(t, "GET", base+"/"+id, nil).Code)
}

func TestInboundRouteRoutes(t *testing.T) {
	t.Parallel()
	f, s := newServer(t)
	d := f.verified(t, f.bot, "example.com")
	base := "/api/bots/" + f.bot + "/email/inbound-routes"

	r := s.Do(t, "POST", base, map[string]any{"domain_id": d.ID, "match": "support", "action": map[string]any{"type": "forward", "to": "team@example.net"}})
	require.Equal(t, http.StatusCreated, r.Code, r.Body)
	id, _ := r.JSON["id"].(string)
	assert.Equal(t, base+"/"+id, r.Header.Get("Location"))
	assert.Equal(t, "example.com", r.JSON["domain"])

	r = s.Do(t, "POST", base, map[string]any{"domain_id": d.ID, "match": "support", "action": map[string]any{"type": "store"}})
	assert.Equal(t, http.StatusConflict, r.Code)
	assert.Equal(t, "name_taken", r.Problem())
	r = s.Do(t, "POST", base, map[string]any{"domain_id": d.ID, "match": "x", "action": map[string]any{"type": "store", "extra": 1}})
	assert.Equal(t, "unknown_field", r.Problem())

	r = s.Do(t, "PATCH", base+"/"+id, map[string]any{"match": "help"})
	assert.Equal(t, http.StatusBadRequest, r.Code, "expected_revision is required")
	r = s.Do(t, "PATCH", base+"/"+id, map[string]any{"expected_revision": 2, "match": "help"})
	assert.Equal(t, http.StatusConflict, r.Code)
	assert.Equal(t, "stale_revision", r.Problem())
	assert.EqualValues(t, 1, r.JSON["current_revision"])
	r = s.Do(t, "PATCH", base+"/"+id, map[string]any{"expected_revision": 1, "match": "help", "action": map[string]any{"type": "store"}})
	require.Equal(t, http.StatusOK, r.Code, r.Body)
	assert.EqualValues(t, 2, r.JSON["revision"])
	assert.Equal(t, map[string]any{"type": "store"}, r.JSON["action"])

	r = s.Do(t, "GET", base, nil)
	require.Equal(t, http.StatusOK, r.Code)
	assert.Len(t, r.JSON["data"], 1)
	r = s.Do(t, "GET", base+"/"+id, nil)
	assert.Equal(t, "help", r.JSON["match"])

	r = s.Do(t, "DELETE", base+"/"+id+"?expected_revision=1", nil)
	assert.Equal(t, "stale_revision", r.Problem())
	r = s.Do(t, "DELETE", base+"/"+id, nil)
	assert.Equal(t, http.StatusNoContent, r.Code)
	assert.Equal(t, http.StatusNotFound, s.Do(t, "GET", base+"/"+id, nil).Code)
}
