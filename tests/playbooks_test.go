package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fake "github.com/botplatform/api/tests/fakes/telegram"
)

// installView is the part of an install the tests read.
type installView struct {
	ID        string         `json:"id"`
	Status    string         `json:"status"`
	Version   int            `json:"version"`
	Revision  int64          `json:"revision"`
	Answers   map[string]any `json:"answers"`
	Questions []struct {
		ID       string `json:"id"`
		Answered bool   `json:"answered"`
	} `json:"questions"`
	Resources []struct {
		Kind string `json:"kind"`
		Key  string `json:"key"`
		ID   string `json:"id"`
		Name string `json:"name"`
	} `json:"resources"`
	Journal []struct {
		Kind  string `json:"kind"`
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"journal"`
	Error *struct {
		Code string    `json:"code"`
		At   time.Time `json:"at"`
	} `json:"error"`
}

func decodeInstall(t *testing.T, r resp) installView {
	t.Helper()
	var in installView
	require.NoError(t, json.Unmarshal(r.Body, &in), "%s", r.Body)
	return in
}

func (in installView) resource(key string) string {
	for _, r := range in.Resources {
		if r.Key == key {
			return r.ID
		}
	}
	return ""
}

// names lists the names of a bot's resources of one kind (its list route, one page).
func names(t *testing.T, s *server, tok, path string) []string {
	t.Helper()
	r := s.get(tok, path+"?limit=200")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	var list struct {
		Data []struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &list))
	out := []string{}
	for _, d := range list.Data {
		out = append(out, d.Name)
	}
	return out
}

// Playbooks end to end (docs/playbooks.md): the rollout gates every route and tool; a
// playbook is set up across two PATCHes, preflighted (a name conflict, then ready),
// installed into the bot, its flow runs through the Telegram fake and its KPI moves; an
// upgrade keeps the customer's edit and applies the rest; an install that fails mid-way
// leaves nothing; access holds.
func TestPlaybooks(t *testing.T) {
	t.Parallel()
	c := startConversation(t)
	s := c.s
	bot := s.demo.BotID
	fakeInstall := "/api/playbook-installs/pbi_1h1kjnx9zk5mj9aft8y6g9yxnn"
	routes := []req{
		{Method: "GET", Path: "/api/playbooks/catalog"}, {Method: "GET", Path: "/api/playbooks/catalog/abandoned_cart"},
		{Method: "POST", Path: "/api/playbook-installs", Body: map[string]any{"bot_id": bot, "playbook_id": "abandoned_cart"}},
		{Method: "GET", Path: "/api/playbook-installs"}, {Method: "GET", Path: fakeInstall},
		{Method: "PATCH", Path: fakeInstall, Body: map[string]any{"answers": map[string]any{}, "expected_revision": 1}},
		{Method: "DELETE", Path: fakeInstall}, {Method: "POST", Path: fakeInstall + "/preflight"},
		{Method: "POST", Path: fakeInstall + "/install", Body: map[string]any{"expected_revision": 1}},
		{Method: "POST", Path: fakeInstall + "/upgrade", Body: map[string]any{"to_version": 2, "dry_run": true}},
		{Method: "GET", Path: fakeInstall + "/kpis"},
	}

	// Rollout off: 403 feature_not_enabled on every route and every tool.
	for _, rq := range routes {
		rq.Token = s.demo.Token
		r := s.do(rq)
		require.Equal(t, 403, r.Status, "%s %s: %s", rq.Method, rq.Path, r.Body)
		assert.Equal(t, "feature_not_enabled", r.Code(t))
		assert.Equal(t, "playbooks", r.JSON(t)["feature"])
	}
	off := s.mcpClient(t, s.demo.Token, "")
	for tool, args := range map[string]map[string]any{
		"list_playbooks": {}, "get_playbook": {"playbook_id": "abandoned_cart"}, "list_playbook_installs": {},
		"get_playbook_install": {"install_id": "pbi_1h1kjnx9zk5mj9aft8y6g9yxnn"}, "get_playbook_kpis": {"install_id": "pbi_1h1kjnx9zk5mj9aft8y6g9yxnn"},
	} {
		got, isError := callTool(t, off, tool, args)
		assert.True(t, isError, "%s: %v", tool, got)
		assert.Equal(t, "feature_not_enabled", got["code"], "%s", tool)
	}
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "playbooks")
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]

	// 401 without a token.
	r := s.get("", "/api/playbooks/catalog")
	require.Equal(t, 401, r.Status)

	// The catalog.
	r = s.get(tok, "/api/playbooks/catalog")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/playbooks/catalog", "/api/playbooks/catalog", r)
	assert.Len(t, r.JSON(t)["data"], 4)
	r = s.get(tok, "/api/playbooks/catalog?vertical=services")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 1)
	r = s.get(tok, "/api/playbooks/catalog/abandoned_cart?version=1")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/playbooks/catalog/{playbookID}", "/api/playbooks/catalog/abandoned_cart?version=1", r)
	assert.Equal(t, float64(1), r.JSON(t)["version"])
	assert.Equal(t, 404, s.get(tok, "/api/playbooks/catalog/abandoned_cart?version=7").Status)
	assert.Equal(t, 404, s.get(tok, "/api/playbooks/catalog/nope").Status)

	// A label of the playbook's name exists before the setup: preflight reports it.
	r = s.post(tok, "/api/bots/"+bot+"/labels", map[string]any{"name": "Cart abandoned"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	taken := r.JSON(t)["id"].(string)

	r = s.post(tok, "/api/playbook-installs", map[string]any{"bot_id": bot, "playbook_id": "abandoned_cart", "version": 1})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/playbook-installs", "/api/playbook-installs", r)
	in := decodeInstall(t, r)
	path := "/api/playbook-installs/" + in.ID
	assert.Equal(t, path, r.Header.Get("Location"))
	assert.Equal(t, "setup", in.Status)
	assert.Equal(t, 1, in.Version)

	// Answers across two PATCHes: they merge.
	r = s.patch(tok, path, map[string]any{"answers": map[string]any{"store_name": "Acme Shoes"}, "expected_revision": in.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPatch, "/api/playbook-installs/{installID}", path, r)
	in = decodeInstall(t, r)
	r = s.patch(tok, path, map[string]any{"answers": map[string]any{"discount_code": "SHOES15"}, "expected_revision": in.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	in = decodeInstall(t, r)
	assert.Equal(t, map[string]any{"store_name": "Acme Shoes", "discount_code": "SHOES15"}, in.Answers)
	r = s.patch(tok, path, map[string]any{"answers": map[string]any{"colour": "red"}, "expected_revision": in.Revision})
	require.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "answers.colour")
	r = s.patch(tok, path, map[string]any{"answers": map[string]any{"offer_discount": "yes"}, "expected_revision": in.Revision})
	require.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "answers.offer_discount")
	r = s.patch(tok, path, map[string]any{"answers": map[string]any{}, "expected_revision": 1})
	assert.Equal(t, 409, r.Status)
	assert.Equal(t, "stale_revision", r.Code(t))

	r = s.post(tok, path+"/preflight", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/playbook-installs/{installID}/preflight", path+"/preflight", r)
	plan := r.JSON(t)
	assert.Equal(t, false, plan["ready"])
	assert.Equal(t, []any{map[string]any{"kind": "label", "key": "cart_abandoned", "name": "Cart abandoned", "existing_id": taken}}, plan["conflicts"])
	assert.Equal(t, []any{}, plan["warnings"], "the bot has a Telegram channel")
	r = s.post(tok, path+"/install", map[string]any{"expected_revision": in.Revision})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "playbook_not_ready", r.Code(t))
	assert.NotEmpty(t, r.JSON(t)["conflicts"])

	require.Equal(t, 204, s.del(tok, "/api/bots/"+bot+"/labels/"+taken).Status)
	r = s.post(tok, path+"/preflight", map[string]any{})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, true, r.JSON(t)["ready"], "%s", r.Body)

	// Install: everything created and published.
	r = s.post(tok, path+"/install", map[string]any{"expected_revision": in.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/playbook-installs/{installID}/install", path+"/install", r)
	in = decodeInstall(t, r)
	assert.Equal(t, "installed", in.Status)
	require.Len(t, in.Resources, 6)
	checkout, reminder := in.resource("cart_checkout"), in.resource("cart_reminder")
	r = s.get(tok, "/api/bots/"+bot+"/reactions/"+checkout)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, float64(1), r.JSON(t)["published_version"])
	assert.ElementsMatch(t, []string{"Cart abandoned", "Cart recovered"}, names(t, s, tok, "/api/bots/"+bot+"/labels"))
	r = s.get(tok, path)
	require.Equal(t, 200, r.Status)
	conforms(t, http.MethodGet, "/api/playbook-installs/{installID}", path, r)
	r = s.get(tok, "/api/playbook-installs?bot_id="+bot)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/playbook-installs", "/api/playbook-installs?bot_id="+bot, r)
	assert.Len(t, r.JSON(t)["data"], 1)
	assert.Equal(t, 409, s.del(tok, path).Status, "an installed install stays")

	// The flow runs through the Telegram fake, and the KPI counts it.
	ann := fake.User{ID: 7301, FirstName: "Ann", LanguageCode: "en"}
	c.deliver(t, c.tg.TextUpdate(ann, "cart"))
	eventually(t, 10*time.Second, "the checkout reaction answers", func() bool {
		return strings.Join(texts(c.tg, ann.ID), "|") == "Welcome back to Acme Shoes! Use the code SHOES15 at checkout."
	})
	kpi := func() float64 {
		r := s.get(tok, path+"/kpis")
		require.Equal(t, 200, r.Status, "%s", r.Body)
		var k struct {
			KPIs []struct {
				ID     string `json:"id"`
				Value  float64
				Series []struct{ Value float64 }
			} `json:"kpis"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &k))
		require.NotEmpty(t, k.KPIs)
		assert.Equal(t, "checkouts", k.KPIs[0].ID)
		return k.KPIs[0].Value
	}
	eventually(t, 10*time.Second, "the checkouts KPI counts the run", func() bool { return kpi() == 1 })
	r = s.get(tok, path+"/kpis?from=2026-01-01&to=2026-01-31")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodGet, "/api/playbook-installs/{installID}/kpis", path+"/kpis?from=2026-01-01&to=2026-01-31", r)
	r = s.get(tok, path+"/kpis?from=2024-01-01&to=2026-01-31")
	require.Equal(t, 400, r.Status)
	assert.Equal(t, "range_too_long", r.Code(t))

	// The MCP reads answer what the routes answer.
	cs := s.mcpClient(t, tok, "")
	got, isError := callTool(t, cs, "get_playbook_install", map[string]any{"install_id": in.ID})
	require.False(t, isError, "%v", got)
	assert.Equal(t, "installed", got["status"])
	got, isError = callTool(t, cs, "list_playbooks", map[string]any{"vertical": "ecommerce"})
	require.False(t, isError, "%v", got)
	assert.Len(t, got["data"], 1)
	got, isError = callTool(t, cs, "list_playbook_installs", map[string]any{"bot_id": bot})
	require.False(t, isError, "%v", got)
	assert.Len(t, got["data"], 1)
	got, isError = callTool(t, cs, "get_playbook_kpis", map[string]any{"install_id": in.ID})
	require.False(t, isError, "%v", got)
	assert.NotEmpty(t, got["kpis"])
	got, isError = callTool(t, cs, "get_playbook", map[string]any{"playbook_id": "abandoned_cart", "version": 1})
	require.False(t, isError, "%v", got)
	assert.Equal(t, float64(1), got["version"])

	// The customer edits the reminder; the upgrade keeps it and applies the rest.
	r = s.get(tok, "/api/bots/"+bot+"/reactions/"+reminder)
	require.Equal(t, 200, r.Status)
	rrev := r.JSON(t)["revision"]
	r = s.patch(tok, "/api/bots/"+bot+"/reactions/"+reminder, map[string]any{"expected_revision": rrev,
		"steps": []any{map[string]any{"id": "mine", "type": "send_text", "text": "Our own reminder"}}})
	require.Equal(t, 200, r.Status, "%s", r.Body)

	r = s.post(tok, path+"/upgrade", map[string]any{"to_version": 2, "dry_run": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/playbook-installs/{installID}/upgrade", path+"/upgrade", r)
	var up struct {
		Diff []struct {
			Key    string `json:"key"`
			Action string `json:"action"`
		} `json:"diff"`
		Install *installView `json:"install"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &up))
	actions := map[string]string{}
	for _, d := range up.Diff {
		actions[d.Key] = d.Action
	}
	assert.Equal(t, "update", actions["cart_checkout"])
	assert.Equal(t, "kept_customer_edit", actions["cart_reminder"])
	assert.Equal(t, "create", actions["cart_help"])
	assert.Equal(t, "unchanged", actions["cart_abandoned"])
	assert.Nil(t, up.Install)
	r = s.post(tok, path+"/upgrade", map[string]any{"to_version": 1, "dry_run": true})
	assert.Equal(t, "playbook_version_not_newer", r.Code(t))
	r = s.post(tok, path+"/upgrade", map[string]any{"to_version": 7, "dry_run": true})
	assert.Equal(t, 404, r.Status)

	r = s.post(tok, path+"/upgrade", map[string]any{"to_version": 2, "expected_revision": in.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.NoError(t, json.Unmarshal(r.Body, &up))
	require.NotNil(t, up.Install)
	assert.Equal(t, 2, up.Install.Version)
	assert.Len(t, up.Install.Resources, 7)
	r = s.get(tok, "/api/bots/"+bot+"/reactions/"+checkout)
	assert.Contains(t, string(r.Body), "Shipping is free today.", "the unedited reaction is upgraded")
	assert.Equal(t, float64(2), r.JSON(t)["published_version"])
	r = s.get(tok, "/api/bots/"+bot+"/reactions/"+reminder)
	assert.Contains(t, string(r.Body), "Our own reminder", "the customer's edit is kept")
	assert.NotContains(t, string(r.Body), "still waiting")
	bob := fake.User{ID: 7302, FirstName: "Bob", LanguageCode: "en"}
	c.deliver(t, c.tg.TextUpdate(bob, "cart"))
	eventually(t, 10*time.Second, "the upgraded checkout answers", func() bool {
		return strings.Join(texts(c.tg, bob.ID), "|") == "Welcome back to Acme Shoes! Use the code SHOES15 at checkout. Shipping is free today."
	})

	// Version 3 adds a reminder message (content) and an exit-intent popup, which need the
	// store's website: an installed install is answered in the upgrade itself.
	r = s.post(tok, path+"/upgrade", map[string]any{"to_version": 3, "dry_run": true})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "playbook_not_ready", r.Code(t))
	assert.Equal(t, []any{"website"}, r.JSON(t)["missing_answers"])
	r = s.post(tok, path+"/upgrade", map[string]any{"to_version": 3, "answers": map[string]any{"website": "https://Shoes.Example/"},
		"expected_revision": up.Install.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.NoError(t, json.Unmarshal(r.Body, &up))
	assert.Equal(t, 3, up.Install.Version)
	assert.Equal(t, "https://shoes.example", up.Install.Answers["website"])
	doc, popup := up.Install.resource("cart_reminder_message"), up.Install.resource("exit_offer")
	r = s.get(tok, "/api/bots/"+bot+"/content/"+doc)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, "Abandoned cart: reminder message", r.JSON(t)["name"])
	assert.NotNil(t, r.JSON(t)["published"], "the document is published: a broadcast can send it")
	assert.Contains(t, string(r.Body), "use the code SHOES15 at checkout")
	assert.Contains(t, string(r.Body), "{{ subscriber.first_name", "the document's own merge fields are the content family's")
	r = s.get(tok, "/api/bots/"+bot+"/popups/"+popup)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, "paused", r.JSON(t)["status"])
	assert.Equal(t, []any{"https://shoes.example"}, r.JSON(t)["allowed_origins"])
	assert.Contains(t, string(r.Body), "https://shoes.example/cart")

	// Access: another account's install is not found; a missing scope or right is 403.
	other := s.newAccount("Other")
	s.adminJSON("account", "rollout", "--account", other.ID, "--enable", "playbooks")
	otherTok := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]
	assert.Equal(t, 404, s.get(otherTok, path).Status)
	assert.Equal(t, 404, s.get(otherTok, path+"/kpis").Status)
	assert.Equal(t, 404, s.post(otherTok, "/api/playbook-installs", map[string]any{"bot_id": bot, "playbook_id": "abandoned_cart"}).Status)
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	r = s.post(readOnly, "/api/playbook-installs", map[string]any{"bot_id": bot, "playbook_id": "support_triage"})
	require.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "insufficient_scope", r.Code(t))
	assert.Equal(t, 200, s.get(readOnly, path).Status)
	member := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "dialogs")["user_id"]
	memberTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", member, "--scopes", "*")["token"]
	r = s.post(memberTok, "/api/playbook-installs", map[string]any{"bot_id": bot, "playbook_id": "support_triage"})
	require.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "missing_right", r.Code(t))
	r = s.get(memberTok, path+"/kpis")
	require.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "missing_right", r.Code(t))
	assert.Equal(t, 200, s.get(memberTok, path).Status, "reading needs no right")
	memberMCP := s.mcpClient(t, memberTok, "")
	got, isError = callTool(t, memberMCP, "get_playbook_kpis", map[string]any{"install_id": in.ID})
	assert.True(t, isError)
	assert.Equal(t, "missing_right", got["code"], "the right is checked over MCP too")
}

// An install that fails mid-way (the bot reaches its collection limit after the labels, the
// field, the content document and the popup were created) is rolled back: none of the
// playbook's labels, fields, popups, collections or reactions is left, its document is
// archived (the content family never deletes one), the install is failed and can be deleted.
func TestPlaybookInstallRollsBack(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "playbooks")
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	bot := s.admin("bot", "create", "--account", s.demo.AccountID, "--name", "Empty")["bot_id"]

	r := s.post(tok, "/api/playbook-installs", map[string]any{"bot_id": bot, "playbook_id": "abandoned_cart", "version": 3})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	in := decodeInstall(t, r)
	path := "/api/playbook-installs/" + in.ID
	r = s.patch(tok, path, map[string]any{"answers": map[string]any{"store_name": "Acme", "website": "https://acme.example"}, "expected_revision": in.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	in = decodeInstall(t, r)
	r = s.post(tok, path+"/preflight", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	plan := r.JSON(t)
	assert.Equal(t, true, plan["ready"])
	warnings := plan["warnings"].([]any)
	require.Len(t, warnings, 1, "no channel: a warning, not a blocker")
	assert.Equal(t, "missing_channel", warnings[0].(map[string]any)["code"])

	// After the preflight, the bot fills up its collections: the install's sixth create (its
	// collection, after two labels, a field, a document and a popup) fails.
	for i := range 50 {
		r := s.post(tok, "/api/bots/"+bot+"/collections", map[string]any{"name": fmt.Sprintf("c%02d", i),
			"fields": []any{map[string]any{"name": "x", "type": "string"}}})
		require.Equal(t, 201, r.Status, "%s", r.Body)
	}
	r = s.post(tok, path+"/install", map[string]any{"expected_revision": in.Revision})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "install_failed", r.Code(t))
	assert.Equal(t, "limit_reached", r.JSON(t)["cause"])
	assert.Empty(t, names(t, s, tok, "/api/bots/"+bot+"/labels"))
	assert.Empty(t, names(t, s, tok, "/api/bots/"+bot+"/fields"))
	assert.Empty(t, names(t, s, tok, "/api/bots/"+bot+"/reactions"))
	assert.Empty(t, names(t, s, tok, "/api/bots/"+bot+"/popups"))
	assert.Empty(t, names(t, s, tok, "/api/bots/"+bot+"/content"), "no live document")
	r = s.get(tok, "/api/bots/"+bot+"/content?archived=true")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	archived := r.JSON(t)["data"].([]any)
	require.Len(t, archived, 1, "the install's document, archived")
	assert.Equal(t, "Abandoned cart: reminder message", archived[0].(map[string]any)["name"])
	assert.Equal(t, true, archived[0].(map[string]any)["archived"])
	assert.NotContains(t, names(t, s, tok, "/api/bots/"+bot+"/collections"), "abandoned_carts")

	r = s.get(tok, path)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	in = decodeInstall(t, r)
	assert.Equal(t, "failed", in.Status)
	require.NotNil(t, in.Error)
	assert.Equal(t, "limit_reached", in.Error.Code)
	require.Len(t, in.Journal, 5, "two labels, a field, a document and a popup were created, then rolled back")
	for _, e := range in.Journal {
		assert.Equal(t, "rolled_back", e.State)
	}
	r = s.do(req{Method: http.MethodDelete, Path: path + "?expected_revision=" + fmt.Sprint(in.Revision), Token: tok})
	require.Equal(t, 204, r.Status, "%s", r.Body)
	assert.Equal(t, 404, s.get(tok, path).Status)
}

// A plan without popups blocks a playbook with a popup: preflight names the blocker, install
// refuses and creates nothing; once the plan has popups, the install creates the lead
// capture form, readable through the popups routes.
func TestPlaybookNeedsPlanFeature(t *testing.T) {
	t.Parallel()
	s := start(t)
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "playbooks")
	s.adminJSON("account", "plan", "--account", s.demo.AccountID, "--features", "analytics")
	tok := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"]
	bot := s.admin("bot", "create", "--account", s.demo.AccountID, "--name", "Leads")["bot_id"]

	r := s.post(tok, "/api/playbook-installs", map[string]any{"bot_id": bot, "playbook_id": "lead_qualification"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	in := decodeInstall(t, r)
	assert.Equal(t, 2, in.Version)
	path := "/api/playbook-installs/" + in.ID
	r = s.patch(tok, path, map[string]any{"answers": map[string]any{"sales_contact": "Dana", "website": "https://leads.example"}, "expected_revision": in.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	in = decodeInstall(t, r)
	r = s.post(tok, path+"/preflight", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, "/api/playbook-installs/{installID}/preflight", path+"/preflight", r)
	plan := r.JSON(t)
	assert.Equal(t, false, plan["ready"])
	blockers := plan["blockers"].([]any)
	require.Len(t, blockers, 1)
	assert.Equal(t, "feature_not_in_plan", blockers[0].(map[string]any)["code"])
	assert.Equal(t, "popups", blockers[0].(map[string]any)["feature"])
	r = s.post(tok, path+"/install", map[string]any{"expected_revision": in.Revision})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "playbook_not_ready", r.Code(t))
	assert.NotEmpty(t, r.JSON(t)["blockers"])
	assert.Empty(t, names(t, s, tok, "/api/bots/"+bot+"/labels"), "nothing created")

	s.adminJSON("account", "plan", "--account", s.demo.AccountID, "--features", "analytics,popups")
	tok = s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "*")["token"] // not in the principal cache
	eventually(t, 40*time.Second, "the plan reaches the token", func() bool {
		r := s.post(tok, path+"/preflight", nil)
		return r.Status == 200 && r.JSON(t)["ready"] == true
	})
	r = s.post(tok, path+"/install", map[string]any{"expected_revision": in.Revision})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	in = decodeInstall(t, r)
	form := in.resource("lead_form")
	require.NotEmpty(t, form)
	r = s.get(tok, "/api/bots/"+bot+"/popups/"+form)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, "Lead: demo request form", r.JSON(t)["name"])
	assert.Contains(t, string(r.Body), `"work_email"`)
	assert.Contains(t, string(r.Body), "Dana will reach out")
}
