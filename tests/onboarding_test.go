package tests

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Outcome onboarding end to end (docs/onboarding.md): one session per account is created,
// patched (its recommendation follows) and completed; the 409s, 404s and access hold.
func TestOnboarding(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := s.demo.Token
	const path = "/api/onboarding/session"

	r := s.get(tok, path)
	require.Equal(t, 404, r.Status, "%s", r.Body)
	assert.Equal(t, 401, s.get("", path).Status)

	r = s.post(tok, path, map[string]any{"outcome": "recover_abandoned_carts", "vertical": "ecommerce", "channels": []string{"telegram"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, path, path, r)
	ss := r.JSON(t)
	assert.Equal(t, "active", ss["status"])
	rec := ss["recommendation"].(map[string]any)
	assert.Equal(t, "abandoned_cart", rec["playbook_id"])
	assert.NotEmpty(t, rec["reasons"])

	r = s.post(tok, path, map[string]any{"outcome": "qualify_leads", "vertical": "b2b"})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "onboarding_session_exists", r.Code(t))
	r = s.post(tok, path, map[string]any{"outcome": "world_peace", "vertical": "b2b"})
	require.Equal(t, 400, r.Status, "%s", r.Body)
	r = s.post(tok, path, map[string]any{"outcome": "qualify_leads", "vertical": "b2b", "colour": "red"})
	require.Equal(t, 400, r.Status, "%s", r.Body)
	assert.Equal(t, "unknown_field", r.Code(t))

	r = s.patch(tok, path, map[string]any{"outcome": "book_appointments", "vertical": "services", "expected_revision": ss["revision"]})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPatch, path, path, r)
	ss = r.JSON(t)
	assert.Equal(t, "appointment_booking", ss["recommendation"].(map[string]any)["playbook_id"], "the recommendation follows the outcome")
	r = s.patch(tok, path, map[string]any{"vertical": "b2b", "expected_revision": 1})
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "stale_revision", r.Code(t))

	other := s.newAccount("Other")
	r = s.patch(tok, path, map[string]any{"bot_id": other.Bot, "expected_revision": ss["revision"]})
	require.Equal(t, 404, r.Status, "another account's bot: %s", r.Body)
	assert.Equal(t, 404, s.get(other.Token, path).Status, "the session is the account's")

	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	assert.Equal(t, 200, s.get(readOnly, path).Status)
	r = s.post(readOnly, path+"/complete", nil)
	require.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "insufficient_scope", r.Code(t))

	r = s.post(tok, path+"/complete", map[string]any{"bot_id": s.demo.BotID})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, http.MethodPost, path+"/complete", path+"/complete", r)
	ss = r.JSON(t)
	assert.Equal(t, "completed", ss["status"])
	assert.NotNil(t, ss["completed_at"])
	assert.Equal(t, s.demo.BotID, ss["bot_id"])
	r = s.post(tok, path+"/complete", nil)
	require.Equal(t, 409, r.Status, "%s", r.Body)
	assert.Equal(t, "onboarding_completed", r.Code(t))
	r = s.patch(tok, path, map[string]any{"vertical": "b2b", "expected_revision": ss["revision"]})
	assert.Equal(t, "onboarding_completed", r.Code(t))

	// After completing, a new POST starts a new session.
	r = s.post(tok, path, map[string]any{"outcome": "deflect_support", "vertical": "support"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	assert.NotEqual(t, ss["id"], r.JSON(t)["id"])
	assert.Equal(t, "support_triage", r.JSON(t)["recommendation"].(map[string]any)["playbook_id"])
	conforms(t, http.MethodGet, path, path, s.get(tok, path))
}
