package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// The error answers of the playbook routes (docs/playbooks.md, docs/openapi/playbooks.yaml)
// that TestPlaybooks does not provoke, grouped by status, each checked against the OpenAPI
// document.

// pbFixture is a process whose demo account has the playbooks rollout, a full-access token
// minted after the rollout was enabled (so no principal cached before it) and a bot of its
// own with no channel and no resources.
type pbFixture struct {
	s   *server
	tok string
	bot string
}

func newPlaybookFixture(t *testing.T) pbFixture {
	t.Helper()
	s := start(t)
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "playbooks")
	return pbFixture{
		s:   s,
		tok: s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"],
		bot: s.admin("bot", "create", "--account", s.demo.AccountID, "--name", "Playbooks")["bot_id"],
	}
}

func installPath(id string) string { return "/api/playbook-installs/" + id }

// setup creates an install of abandoned_cart version 1 on the fixture's bot with its one
// required answer saved: status setup, ready to install.
func (f pbFixture) setup(t *testing.T) installView {
	t.Helper()
	r := f.s.post(f.tok, "/api/playbook-installs", map[string]any{"bot_id": f.bot, "playbook_id": "abandoned_cart", "version": 1})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	in := decodeInstall(t, r)
	r = f.s.patch(f.tok, installPath(in.ID), map[string]any{"answers": map[string]any{"store_name": "Acme"}, "expected_revision": in.Revision})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeInstall(t, r)
}

// install installs in (at its revision) with the request id given, and answers it installed.
func (f pbFixture) install(t *testing.T, in installView, requestID string) installView {
	t.Helper()
	r := f.s.do(req{Method: http.MethodPost, Path: installPath(in.ID) + "/install", Token: f.tok,
		Body: map[string]any{"expected_revision": in.Revision}, Headers: map[string]string{"X-Request-Id": requestID}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	out := decodeInstall(t, r)
	require.Equal(t, "installed", out.Status)
	return out
}

// get reads an install.
func (f pbFixture) get(t *testing.T, id string) installView {
	t.Helper()
	r := f.s.get(f.tok, installPath(id))
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	return decodeInstall(t, r)
}

const (
	tmplInstall  = "/api/playbook-installs/{installID}"
	tmplInstalls = "/api/playbook-installs"
)

// 400: a catalog query parameter that is not a vertical or a version; a create naming a
// playbook or version the catalog lacks; an unknown member in each route's body; a DELETE's
// expected_revision that is not a revision; KPI bounds that are not times or not in order.
// None of them changes the install.
func TestPlaybookBadRequests(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s, tok := f.s, f.tok
	in := f.install(t, f.setup(t), "pb-400-install")
	path := installPath(in.ID)

	for _, q := range []string{"?vertical=retail", "?vertical=", "?vertical=Ecommerce"} {
		p := problem(t, "GET", "/api/playbooks/catalog", "/api/playbooks/catalog"+q, s.get(tok, "/api/playbooks/catalog"+q), 400, "invalid_parameter")
		assert.Equal(t, "vertical", p["parameter"], q)
	}
	for _, q := range []string{"?version=two", "?version=0", "?version=-1", "?version=", "?version=1.5"} {
		p := problem(t, "GET", "/api/playbooks/catalog/{playbookID}", "/api/playbooks/catalog/abandoned_cart"+q,
			s.get(tok, "/api/playbooks/catalog/abandoned_cart"+q), 400, "invalid_parameter")
		assert.Equal(t, "version", p["parameter"], q)
	}

	// A create naming what the catalog lacks: 400 validation_failed naming the member.
	for _, c := range []struct {
		body  map[string]any
		field string
	}{
		{map[string]any{"bot_id": f.bot, "playbook_id": "loyalty_points"}, "playbook_id"},
		{map[string]any{"bot_id": f.bot, "playbook_id": "loyalty_points", "version": 1}, "playbook_id"},
		{map[string]any{"bot_id": f.bot, "playbook_id": "abandoned_cart", "version": 4}, "version"},
		{map[string]any{"bot_id": f.bot, "playbook_id": "appointment_booking", "version": 2}, "version"},
	} {
		p := problem(t, "POST", tmplInstalls, tmplInstalls, s.post(tok, tmplInstalls, c.body), 400, "validation_failed")
		assert.Equal(t, []string{c.field}, problemFields(p), "%v", c.body)
	}

	// An unknown member in any body: 400 unknown_field naming it, before anything is looked up.
	for _, c := range []struct {
		method, template, path string
		body                   map[string]any
	}{
		{"POST", tmplInstalls, tmplInstalls, map[string]any{"bot_id": f.bot, "playbook_id": "abandoned_cart", "colour": "red"}},
		{"PATCH", tmplInstall, path, map[string]any{"answers": map[string]any{}, "expected_revision": in.Revision, "colour": "red"}},
		{"POST", tmplInstall + "/preflight", path + "/preflight", map[string]any{"colour": "red"}},
		{"POST", tmplInstall + "/install", path + "/install", map[string]any{"expected_revision": in.Revision, "colour": "red"}},
		{"POST", tmplInstall + "/upgrade", path + "/upgrade", map[string]any{"to_version": 2, "dry_run": true, "colour": "red"}},
	} {
		r := s.do(req{Method: c.method, Path: c.path, Token: tok, Body: c.body})
		p := problem(t, c.method, c.template, c.path, r, 400, "unknown_field")
		assert.Equal(t, "colour", p["field"], "%s %s", c.method, c.path)
	}

	for _, rev := range []string{"abc", "0", "-2"} {
		r := s.del(tok, path+"?expected_revision="+rev)
		p := problem(t, "DELETE", tmplInstall, path+"?expected_revision="+rev, r, 400, "invalid_parameter")
		assert.Equal(t, "expected_revision", p["parameter"], rev)
	}

	for _, c := range []struct{ query, parameter string }{
		{"?from=yesterday", "from"},
		{"?to=2026-13-01", "to"},
		{"?from=2026-01-31&to=31.01.2026", "to"},
		{"?from=2026-02-01T00:00:00Z&to=2026-01-01", "from"}, // from after to
		{"?from=2026-01-02T00:00:00Z&to=2026-01-02T00:00:00Z", "from"},
	} {
		r := s.get(tok, path+"/kpis"+c.query)
		p := problem(t, "GET", tmplInstall+"/kpis", path+"/kpis"+c.query, r, 400, "invalid_parameter")
		assert.Equal(t, c.parameter, p["parameter"], c.query)
	}

	after := f.get(t, in.ID)
	assert.Equal(t, in.Revision, after.Revision, "no 400 changed the install")
	assert.Equal(t, "installed", after.Status)
}

// 409: stale_revision on install, upgrade and DELETE; playbook_not_installed on upgrade and
// KPIs before the install; playbook_installed on PATCH, preflight, install and DELETE after
// it. A stale_revision names the current revision. (The state conflicts cannot carry the
// install's status in a `status` member: RFC 9457's own `status`, the HTTP status, takes
// that name.)
func TestPlaybookConflicts(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s, tok := f.s, f.tok
	in := f.setup(t)
	path := installPath(in.ID)
	stale := in.Revision - 1

	// In setup.
	p := problem(t, "POST", tmplInstall+"/install", path+"/install",
		s.post(tok, path+"/install", map[string]any{"expected_revision": stale}), 409, "stale_revision")
	assert.Equal(t, float64(in.Revision), p["current_revision"])
	p = problem(t, "DELETE", tmplInstall, path+"?expected_revision="+fmt.Sprint(stale),
		s.del(tok, path+"?expected_revision="+fmt.Sprint(stale)), 409, "stale_revision")
	assert.Equal(t, float64(in.Revision), p["current_revision"])
	for _, body := range []map[string]any{{"to_version": 2, "dry_run": true}, {"to_version": 2, "expected_revision": in.Revision}} {
		problem(t, "POST", tmplInstall+"/upgrade", path+"/upgrade", s.post(tok, path+"/upgrade", body), 409, "playbook_not_installed")
	}
	problem(t, "GET", tmplInstall+"/kpis", path+"/kpis", s.get(tok, path+"/kpis"), 409, "playbook_not_installed")
	assert.Equal(t, in.Revision, f.get(t, in.ID).Revision, "no 409 changed the install")

	// Installed.
	in = f.install(t, in, "pb-409-install")
	for _, c := range []struct {
		method, template, path string
		body                   any
	}{
		{"PATCH", tmplInstall, path, map[string]any{"answers": map[string]any{"store_name": "Other"}, "expected_revision": in.Revision}},
		{"POST", tmplInstall + "/preflight", path + "/preflight", nil},
		{"POST", tmplInstall + "/install", path + "/install", map[string]any{"expected_revision": in.Revision}},
		{"DELETE", tmplInstall, path + "?expected_revision=" + fmt.Sprint(in.Revision), nil},
		{"DELETE", tmplInstall, path, nil},
	} {
		r := s.do(req{Method: c.method, Path: c.path, Token: tok, Body: c.body})
		problem(t, c.method, c.template, c.path, r, 409, "playbook_installed")
	}
	p = problem(t, "POST", tmplInstall+"/upgrade", path+"/upgrade",
		s.post(tok, path+"/upgrade", map[string]any{"to_version": 2, "expected_revision": in.Revision - 1}), 409, "stale_revision")
	assert.Equal(t, float64(in.Revision), p["current_revision"])
	after := f.get(t, in.ID)
	assert.Equal(t, in.Revision, after.Revision, "no 409 changed the install")
	assert.Equal(t, 1, after.Version)
	assert.Equal(t, "Acme", after.Answers["store_name"])
}

// 409 install_in_progress: what every state-checking route answers while an install is
// installing and its process is alive. Over HTTP alone an install is installing only during
// its own POST .../install (a few milliseconds, no external call to hold it), so no request
// can be made to land in that window deterministically. The test gives the stored install
// the state a process killed mid-install leaves (installing, a heartbeat just now, nothing
// created yet) through the store, as another process may (purge_test reads it the same way),
// and then speaks only HTTP: the install is not stuck (the heartbeat is fresh), so every
// route sees it installing.
func TestPlaybookInstallInProgress(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s, tok := f.s, f.tok
	in := f.setup(t)
	path := installPath(in.ID)

	st, err := sqlite.Open(filepath.Join(s.dataDir, "store.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	key := store.Key{PK: "BOT#" + f.bot + "#PBI", SK: in.ID}
	it, err := st.Get(t.Context(), key)
	require.NoError(t, err)
	var rec map[string]any
	require.NoError(t, json.Unmarshal(it.Data, &rec))
	require.Equal(t, "setup", rec["status"], "the stored record is the install: %s", it.Data)
	rev := it.Revision + 1
	rec["status"], rec["heartbeat_at"], rec["journal"], rec["revision"] = "installing", time.Now().UTC().Format(time.RFC3339Nano), []any{}, rev
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	require.NoError(t, st.Put(t.Context(), store.Item{Key: key, Data: data, Revision: rev}, store.RevisionIs(it.Revision)))

	got := f.get(t, in.ID)
	require.Equal(t, "installing", got.Status, "a fresh heartbeat: not recovered")
	for _, c := range []struct {
		method, template, path string
		body                   any
	}{
		{"PATCH", tmplInstall, path, map[string]any{"answers": map[string]any{"store_name": "Other"}, "expected_revision": rev}},
		{"DELETE", tmplInstall, path, nil},
		{"POST", tmplInstall + "/preflight", path + "/preflight", nil},
		{"POST", tmplInstall + "/install", path + "/install", map[string]any{"expected_revision": rev}},
		{"POST", tmplInstall + "/upgrade", path + "/upgrade", map[string]any{"to_version": 2, "expected_revision": rev}},
		{"POST", tmplInstall + "/upgrade", path + "/upgrade", map[string]any{"to_version": 2, "dry_run": true}},
		{"GET", tmplInstall + "/kpis", path + "/kpis", nil},
	} {
		r := s.do(req{Method: c.method, Path: c.path, Token: tok, Body: c.body})
		problem(t, c.method, c.template, c.path, r, 409, "install_in_progress")
	}
	assert.Equal(t, rev, f.get(t, in.ID).Revision, "no 409 changed the install")
}

// An upgrade after the customer deleted an installed resource: the diff says
// kept_customer_delete, the upgrade does not make it again and the install no longer lists
// it. The install and the upgrade are each one audit event with their route template and
// status.
func TestPlaybookUpgradeKeepsCustomerDelete(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s, tok := f.s, f.tok
	in := f.install(t, f.setup(t), "pb-audit-install")
	path := installPath(in.ID)
	carts := in.resource("abandoned_carts")
	require.NotEmpty(t, carts, "version 1 installs the abandoned_carts collection")
	require.Equal(t, http.StatusNoContent, s.del(tok, "/api/bots/"+f.bot+"/collections/"+carts).Status)
	in = f.get(t, in.ID)

	type upgrade struct {
		Diff []struct {
			Kind   string `json:"kind"`
			Key    string `json:"key"`
			ID     string `json:"id"`
			Action string `json:"action"`
		} `json:"diff"`
		Counts  map[string]int `json:"counts"`
		Install *installView   `json:"install"`
	}
	actions := func(u upgrade) map[string]string {
		out := map[string]string{}
		for _, d := range u.Diff {
			out[d.Kind+"."+d.Key] = d.Action
		}
		return out
	}
	want := map[string]string{
		"label.cart_abandoned": "unchanged", "label.cart_recovered": "unchanged", "field.cart_code_sent": "unchanged",
		"collection.abandoned_carts": "kept_customer_delete",
		"reaction.cart_checkout":     "update", "reaction.cart_reminder": "update", "reaction.cart_help": "create",
	}

	r := s.post(tok, path+"/upgrade", map[string]any{"to_version": 2, "dry_run": true})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, "POST", tmplInstall+"/upgrade", path+"/upgrade", r)
	var u upgrade
	require.NoError(t, json.Unmarshal(r.Body, &u))
	assert.Equal(t, want, actions(u))
	assert.Equal(t, 1, u.Counts["kept_customer_delete"])
	assert.Equal(t, 0, u.Counts["removed_kept"])
	for _, d := range u.Diff {
		if d.Action == "kept_customer_delete" {
			assert.Equal(t, carts, d.ID, "the entry names the deleted resource")
		}
	}

	r = s.do(req{Method: http.MethodPost, Path: path + "/upgrade", Token: tok, Headers: map[string]string{"X-Request-Id": "pb-audit-upgrade"},
		Body: map[string]any{"to_version": 2, "expected_revision": in.Revision}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	u = upgrade{}
	require.NoError(t, json.Unmarshal(r.Body, &u))
	assert.Equal(t, want, actions(u))
	require.NotNil(t, u.Install)
	assert.Equal(t, 2, u.Install.Version)
	assert.Empty(t, u.Install.resource("abandoned_carts"), "no longer the install's")
	assert.Len(t, u.Install.Resources, 6)
	assert.Empty(t, names(t, s, tok, "/api/bots/"+f.bot+"/collections"), "not made again")
	assert.NotEmpty(t, u.Install.resource("cart_help"))

	// The audit trail: one event each, with the route template (no install id) and status.
	events := auditEvents(t, s, tok, "")
	byReq := map[string][]map[string]any{}
	for _, e := range events {
		id, _ := e["request_id"].(string)
		byReq[id] = append(byReq[id], e)
	}
	for id, route := range map[string]string{
		"pb-audit-install": "POST /api/playbook-installs/{installID}/install",
		"pb-audit-upgrade": "POST /api/playbook-installs/{installID}/upgrade",
	} {
		require.Len(t, byReq[id], 1, "%s: one audit event", id)
		e := byReq[id][0]
		assert.Equal(t, "POST", e["method"], id)
		assert.Equal(t, route, e["route"], id)
		assert.Equal(t, float64(http.StatusOK), e["status"], id)
		assert.Equal(t, s.demo.AccountID, e["account_id"], id)
		assert.Equal(t, "pat", e["token_kind"], id)
		assert.Equal(t, f.bot, e["bot_id"], "%s: the install's bot, though the path names none", id)
	}
}

// Another account's personal access token, with the playbooks rollout and full scopes, gets
// 404 on every route that names an install it does not own (with a body that would succeed
// for the owner) and on the list of a bot it does not own; the owner's installs are as they
// were.
func TestPlaybookOtherAccount(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s := f.s
	setup := f.setup(t)
	installed := f.install(t, f.setup(t), "pb-404-install")

	other := s.newAccount("Other")
	s.adminJSON("account", "rollout", "--account", other.ID, "--enable", "playbooks")
	tok := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]

	sp, ip := installPath(setup.ID), installPath(installed.ID)
	for _, c := range []struct {
		method, template, path string
		body                   any
	}{
		{"PATCH", tmplInstall, sp, map[string]any{"answers": map[string]any{"store_name": "Theirs"}, "expected_revision": setup.Revision}},
		{"POST", tmplInstall + "/preflight", sp + "/preflight", nil},
		{"POST", tmplInstall + "/install", sp + "/install", map[string]any{"expected_revision": setup.Revision}},
		{"DELETE", tmplInstall, sp, nil},
		{"DELETE", tmplInstall, sp + "?expected_revision=" + fmt.Sprint(setup.Revision), nil},
		{"POST", tmplInstall + "/upgrade", ip + "/upgrade", map[string]any{"to_version": 2, "dry_run": true}},
		{"POST", tmplInstall + "/upgrade", ip + "/upgrade", map[string]any{"to_version": 2, "expected_revision": installed.Revision}},
		{"GET", tmplInstall, ip, nil},
		{"GET", tmplInstall + "/kpis", ip + "/kpis", nil},
		{"GET", tmplInstalls, tmplInstalls + "?bot_id=" + f.bot, nil},
		{"GET", tmplInstalls, tmplInstalls + "?bot_id=" + f.bot + "&limit=1", nil},
	} {
		r := s.do(req{Method: c.method, Path: c.path, Token: tok, Body: c.body})
		problem(t, c.method, c.template, c.path, r, 404, "not_found")
		assert.NotContains(t, string(r.Body), f.bot, "%s %s: nothing of the owner's leaks", c.method, c.path)
		assert.NotContains(t, string(r.Body), "pbi_", "%s %s", c.method, c.path)
	}
	// Its own list is its own.
	r := s.get(tok, tmplInstalls)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Empty(t, r.JSON(t)["data"])
	r = s.get(tok, tmplInstalls+"?bot_id="+other.Bot)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Empty(t, r.JSON(t)["data"])
	// The MCP list refuses the foreign bot the same way.
	got, isError := callTool(t, s.mcpClient(t, tok, ""), "list_playbook_installs", map[string]any{"bot_id": f.bot})
	assert.True(t, isError, "%v", got)
	assert.Equal(t, "not_found", got["code"])

	assert.Equal(t, setup.Revision, f.get(t, setup.ID).Revision)
	after := f.get(t, installed.ID)
	assert.Equal(t, installed.Revision, after.Revision)
	assert.Equal(t, 1, after.Version)
}

// A rollout that is switched off after use: the routes and tools that answered refuse with
// 403 feature_not_enabled. A token first used after the change sees it at once; a token in
// use keeps its cached principal, rollout included, for up to the principal cache's 30 s
// (auth.CacheTTL), so that is polled for with a bound. The installs stay and answer again
// once the rollout is back on.
func TestPlaybookRolloutDisabled(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s, tok := f.s, f.tok

	r := s.get(tok, "/api/playbooks/catalog")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	in := f.setup(t)
	path := installPath(in.ID)
	r = s.post(tok, path+"/preflight", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	cs := s.mcpClient(t, tok, "")
	got, isError := callTool(t, cs, "get_playbook_install", map[string]any{"install_id": in.ID})
	require.False(t, isError, "%v", got)

	out := s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--disable", "playbooks")
	assert.NotContains(t, out["rollout"], "playbooks")

	refused := func(t *testing.T, r resp) {
		t.Helper()
		require.Equal(t, http.StatusForbidden, r.Status, "%s", r.Body)
		assert.Equal(t, "feature_not_enabled", r.Code(t))
		assert.Equal(t, "playbooks", r.JSON(t)["feature"])
	}
	fresh := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	refused(t, s.get(fresh, "/api/playbooks/catalog"))
	refused(t, s.get(fresh, path))
	refused(t, s.post(fresh, path+"/preflight", nil))
	refused(t, s.patch(fresh, path, map[string]any{"answers": map[string]any{"store_name": "Late"}, "expected_revision": in.Revision}))
	freshMCP := s.mcpClient(t, fresh, "")
	for tool, args := range map[string]map[string]any{
		"list_playbooks": {}, "get_playbook_install": {"install_id": in.ID},
	} {
		got, isError := callTool(t, freshMCP, tool, args)
		assert.True(t, isError, "%s: %v", tool, got)
		assert.Equal(t, "feature_not_enabled", got["code"], tool)
		assert.Equal(t, "playbooks", got["feature"], tool)
	}

	// The token in use: within the principal cache's 30 s.
	eventually(t, 40*time.Second, "the disabled rollout reaches the token in use", func() bool {
		return s.get(tok, "/api/playbooks/catalog").Status == http.StatusForbidden
	})
	refused(t, s.post(tok, path+"/preflight", nil))
	got, isError = callTool(t, cs, "get_playbook_install", map[string]any{"install_id": in.ID})
	assert.True(t, isError, "%v", got)
	assert.Equal(t, "feature_not_enabled", got["code"], "the MCP tool shares the token's principal")

	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "playbooks")
	again := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	r = s.get(again, path)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, in.Revision, decodeInstall(t, r).Revision, "the refused PATCH changed nothing")
}

// A customer's delete is kept by every later upgrade, not only the first (docs/playbooks.md:
// kept_customer_delete, "it is not made again").
func TestPlaybookCustomerDeleteOutlivesTwoUpgrades(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s, tok := f.s, f.tok
	in := f.install(t, f.setup(t), "pb-twice-install")
	path := installPath(in.ID)
	require.Equal(t, http.StatusNoContent, s.del(tok, "/api/bots/"+f.bot+"/collections/"+in.resource("abandoned_carts")).Status)
	in = f.get(t, in.ID)
	r := s.post(tok, path+"/upgrade", map[string]any{"to_version": 2, "expected_revision": in.Revision})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	in = f.get(t, in.ID)

	body := map[string]any{"to_version": 3, "answers": map[string]any{"website": "https://acme.example"}, "dry_run": true}
	r = s.post(tok, path+"/upgrade", body)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var u struct {
		Diff []struct {
			Kind   string `json:"kind"`
			Key    string `json:"key"`
			Action string `json:"action"`
		} `json:"diff"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &u))
	for _, d := range u.Diff {
		if d.Kind == "collection" && d.Key == "abandoned_carts" {
			assert.NotEqual(t, "create", d.Action, "the deleted collection is planned again")
		}
	}
	delete(body, "dry_run")
	body["expected_revision"] = in.Revision
	r = s.post(tok, path+"/upgrade", body)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Empty(t, names(t, s, tok, "/api/bots/"+f.bot+"/collections"), "the deleted collection is made again")
}
