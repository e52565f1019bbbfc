package tests

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Onboarding completed with the playbook install it led to, end to end: the session
// recommends a playbook, the customer installs that playbook at that version on the bot and
// completes the session naming the bot and the install. On the way: a stale
// expected_revision is 409 stale_revision; an install on another bot than bot_id, and an id
// that is no install id, are 400 naming install_id; another account's install is 404, as a
// missing one is.
func TestOnboardingCompleteWithInstall(t *testing.T) {
	t.Parallel()
	f := newPlaybookFixture(t)
	s, tok := f.s, f.tok
	const path = "/api/onboarding/session"
	complete := path + "/complete"

	r := s.post(tok, path, map[string]any{"outcome": "qualify_leads", "vertical": "b2b", "channels": []string{"telegram"}, "bot_id": f.bot})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	ss := r.JSON(t)
	rec := ss["recommendation"].(map[string]any)
	require.Equal(t, "lead_qualification", rec["playbook_id"])

	r = s.post(tok, "/api/playbook-installs", map[string]any{"bot_id": f.bot, "playbook_id": rec["playbook_id"], "version": rec["version"]})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	in := decodeInstall(t, r)
	r = s.patch(tok, installPath(in.ID), map[string]any{"answers": map[string]any{"sales_contact": "Dana", "website": "https://leads.example"},
		"expected_revision": in.Revision})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	// Not installed yet: answered, but no working bot.
	rev0 := ss["revision"].(float64)
	p0 := problem(t, "POST", complete, complete, s.post(tok, complete, map[string]any{"install_id": in.ID, "expected_revision": rev0}),
		409, "playbook_not_installed")
	assert.Equal(t, "setup", p0["install_status"])
	in = f.install(t, decodeInstall(t, r), "onboarding-install")

	rev := ss["revision"].(float64)
	p := problem(t, "POST", complete, complete, s.post(tok, complete, map[string]any{"bot_id": f.bot, "install_id": in.ID, "expected_revision": rev + 1}),
		409, "stale_revision")
	assert.Equal(t, rev, p["current_revision"])

	p = problem(t, "POST", complete, complete, s.post(tok, complete, map[string]any{"bot_id": s.demo.BotID, "install_id": in.ID, "expected_revision": rev}),
		400, "validation_failed")
	assert.Equal(t, []string{"install_id"}, problemFields(p), "an install on another bot than bot_id")
	p = problem(t, "POST", complete, complete, s.post(tok, complete, map[string]any{"install_id": "bot_" + in.ID[4:]}), 400, "validation_failed")
	assert.Equal(t, []string{"install_id"}, problemFields(p), "not an install id")

	other := s.newAccount("Other")
	s.adminJSON("account", "rollout", "--account", other.ID, "--enable", "playbooks")
	otherTok := s.admin("pat", "create", "--account", other.ID, "--scopes", "*")["token"]
	r = s.post(otherTok, "/api/playbook-installs", map[string]any{"bot_id": other.Bot, "playbook_id": "support_triage"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	theirs := decodeInstall(t, r).ID
	problem(t, "POST", complete, complete, s.post(tok, complete, map[string]any{"install_id": theirs, "expected_revision": rev}), 404, "not_found")
	problem(t, "POST", complete, complete, s.post(tok, complete, map[string]any{"install_id": "pbi_1h1kjnx9zk5mj9aft8y6g9yxnn"}), 404, "not_found")
	require.Equal(t, http.StatusCreated, s.post(otherTok, path, map[string]any{"outcome": "deflect_support", "vertical": "support"}).Status)
	problem(t, "POST", complete, complete, s.post(otherTok, complete, map[string]any{"install_id": in.ID}), 404, "not_found")

	r = s.get(tok, path)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, "active", r.JSON(t)["status"], "no refused completion completed it")
	assert.Equal(t, rev, r.JSON(t)["revision"])

	r = s.post(tok, complete, map[string]any{"bot_id": f.bot, "install_id": in.ID, "expected_revision": rev})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, complete, complete, r)
	ss = r.JSON(t)
	assert.Equal(t, "completed", ss["status"])
	assert.Equal(t, in.ID, ss["install_id"])
	assert.Equal(t, f.bot, ss["bot_id"])
	assert.NotNil(t, ss["completed_at"])
	r = s.get(tok, path)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, in.ID, r.JSON(t)["install_id"])

	// A new session completed with install_id alone records it too.
	r = s.post(tok, path, map[string]any{"outcome": "recover_abandoned_carts", "vertical": "ecommerce"})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	assert.Nil(t, r.JSON(t)["install_id"], "a new session starts empty")
	r = s.post(tok, complete, map[string]any{"install_id": in.ID})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, in.ID, r.JSON(t)["install_id"])
	assert.Equal(t, f.bot, r.JSON(t)["bot_id"], "the install's bot")
}
