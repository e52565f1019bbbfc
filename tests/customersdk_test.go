package tests

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The customer SDK end to end: enable (twice), register a browser installation from an
// allowed origin, identify with the identity secret, the token kinds kept apart, revoke.
func TestCustomerSDK(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/customer-sdk"
	const shop = "https://shop.example"

	r := s.get(tok, base)
	assert.Equal(t, 404, r.Status, "%s", r.Body)
	r = s.post(tok, base+"/enable", map[string]any{"web_origins": []any{shop}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	p := r.JSON(t)
	secret, _ := p["identity_secret"].(string)
	require.NotEmpty(t, secret)
	key := p["project_key"].(string)
	r = s.post(tok, base+"/enable", map[string]any{"web_origins": []any{shop}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, key, r.JSON(t)["project_key"])
	assert.NotContains(t, string(r.Body), secret, "the secret is shown once")
	r = s.get(tok, base)
	require.Equal(t, 200, r.Status)
	assert.NotContains(t, string(r.Body), secret)

	// A browser on the shop registers; a foreign origin may not.
	reg := map[string]any{"project_key": key, "platform": "web", "app_id": shop}
	r = s.do(req{Method: "POST", Path: "/sdk/v1/installations", Body: reg, Headers: map[string]string{"Origin": "https://evil.example"}})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	r = s.do(req{Method: "POST", Path: "/sdk/v1/installations", Body: map[string]any{"project_key": key + "x", "platform": "web", "app_id": shop}, Headers: map[string]string{"Origin": shop}})
	assert.Equal(t, 401, r.Status, "%s", r.Body)
	r = s.do(req{Method: "POST", Path: "/sdk/v1/installations", Body: map[string]any{"project_key": key, "platform": "web", "app_id": shop, "extra": 1}, Headers: map[string]string{"Origin": shop}})
	assert.Equal(t, 400, r.Status, "%s", r.Body)
	r = s.do(req{Method: "POST", Path: "/sdk/v1/installations", Body: reg, Headers: map[string]string{"Origin": shop}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	assert.Equal(t, shop, r.Header.Get("Access-Control-Allow-Origin"))
	inst := r.JSON(t)
	itok := inst["token"].(string)
	instID := inst["id"].(string)
	require.Regexp(t, `^mbi_`, itok)

	// Identify with the HMAC of the user id under the identity secret.
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("user-42"))
	hash := hex.EncodeToString(m.Sum(nil))
	dev := func(path string, token string, body any) resp {
		return s.do(req{Method: "POST", Path: path, Token: token, Body: body, Headers: map[string]string{"Origin": shop}})
	}
	r = dev("/sdk/v1/identify", itok, map[string]any{"user_id": "user-42", "user_hash": hash[:62] + "00", "identity_epoch": 1})
	assert.Equal(t, 401, r.Status, "%s", r.Body)
	r = dev("/sdk/v1/identify", itok, map[string]any{"user_id": "user-42", "user_hash": hash, "identity_epoch": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, "user-42", r.JSON(t)["user_id"])
	r = dev("/sdk/v1/events", itok, map[string]any{"events": []any{map[string]any{"event_id": "e1", "name": "checkout", "properties": map[string]any{"plan": "pro"}}}})
	assert.Equal(t, 202, r.Status, "%s", r.Body)
	r = s.do(req{Method: "GET", Path: "/sdk/v1/web-push/config", Token: itok})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, false, r.JSON(t)["enabled"])

	// The token kinds stay apart: a PAT on /sdk/v1 and an installation token on /api are 401.
	r = dev("/sdk/v1/identify", tok, map[string]any{"user_id": "user-42", "user_hash": hash, "identity_epoch": 1})
	assert.Equal(t, 401, r.Status, "%s", r.Body)
	r = s.get(itok, "/api/bots")
	assert.Equal(t, 401, r.Status, "%s", r.Body)
	r = s.get(itok, base)
	assert.Equal(t, 401, r.Status, "%s", r.Body)

	// The list shows the installation; revoking it refuses its next call.
	r = s.get(tok, base+"/installations")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 1)
	assert.NotContains(t, string(r.Body), itok)
	r = s.get(tok, base+"/report")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.EqualValues(t, 1, r.JSON(t)["installations"])
	r = s.del(tok, base+"/installations/"+instID)
	require.Equal(t, 204, r.Status, "%s", r.Body)
	r = dev("/sdk/v1/identify", itok, map[string]any{"user_id": "user-42", "user_hash": hash, "identity_epoch": 1})
	assert.Equal(t, 401, r.Status, "%s", r.Body)

	// The device surface's document and scripts are public.
	r = s.do(req{Method: "GET", Path: "/sdk/openapi.yaml"})
	require.Equal(t, 200, r.Status)
	assert.Contains(t, string(r.Body), "/sdk/v1/installations")
	r = s.do(req{Method: "GET", Path: "/sdk/v1/sdk.js"})
	require.Equal(t, 200, r.Status)
	assert.Contains(t, string(r.Body), "MBSDK")
}

// Without the project-key signing secret, enabling the SDK answers 503.
func TestCustomerSDKNotConfigured(t *testing.T) {
	t.Parallel()
	s := startWith(t, t.TempDir(), "--sdk-key", "off")
	r := s.post(s.demo.Token, "/api/bots/"+s.demo.BotID+"/customer-sdk/enable", map[string]any{})
	require.Equal(t, 503, r.Status, "%s", r.Body)
	assert.Equal(t, "sdk_not_configured", r.Code(t))
}

// The identity secret's rotation, the project's settings and the installations list over
// HTTP against the local process: rotate-secret returns a new secret under the next epoch
// and the previous one still identifies (its 24-hour lapse needs a clock the local process
// does not let tests move: functions/customersdk TestRotatedSecretGraceThenRefused covers it
// with the service's clock); PATCH changes the allowlists and disables the project (every
// device call 403 sdk_disabled) and enables it again; 201 registrations are listed as the
// 200 most recent, and limit is honoured and bounded.
func TestCustomerSDKRotateSettingsAndList(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/customer-sdk"
	const shop = "https://shop.example"

	r := s.post(tok, base+"/enable", map[string]any{"web_origins": []any{shop}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	p := r.JSON(t)
	old := p["identity_secret"].(string)
	key := p["project_key"].(string)
	register := func(origin string) resp {
		return s.do(req{Method: "POST", Path: "/sdk/v1/installations", Body: map[string]any{"project_key": key, "platform": "web", "app_id": origin},
			Headers: map[string]string{"Origin": origin}})
	}
	r = register(shop)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	itok := r.JSON(t)["token"].(string)
	dev := func(path string, body any) resp {
		return s.do(req{Method: "POST", Path: path, Token: itok, Body: body, Headers: map[string]string{"Origin": shop}})
	}
	hash := func(secret, user string) string {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(user))
		return hex.EncodeToString(m.Sum(nil))
	}

	// Rotation: a new secret, shown once, under epoch 2; the old one still identifies
	// under epoch 1, and only there.
	r = s.post(tok, base+"/rotate-secret", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, "no-store", r.Header.Get("Cache-Control"))
	rot := r.JSON(t)
	fresh, _ := rot["identity_secret"].(string)
	require.Regexp(t, `^mbs_`, fresh)
	assert.NotEqual(t, old, fresh)
	assert.EqualValues(t, 2, rot["identity_secret_version"])
	lapses, err := time.Parse(time.RFC3339, rot["previous_secret_lapses_at"].(string))
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now().Add(24*time.Hour), lapses, 5*time.Minute)
	r = s.get(tok, base)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.NotContains(t, string(r.Body), fresh)
	assert.EqualValues(t, 2, r.JSON(t)["identity_secret_version"])
	rev := r.JSON(t)["revision"]

	r = dev("/sdk/v1/identify", map[string]any{"user_id": "u-old", "user_hash": hash(old, "u-old"), "identity_epoch": 1})
	assert.Equal(t, 200, r.Status, "the previous secret identifies during its grace: %s", r.Body)
	r = dev("/sdk/v1/identify", map[string]any{"user_id": "u-new", "user_hash": hash(fresh, "u-new"), "identity_epoch": 2})
	assert.Equal(t, 200, r.Status, "%s", r.Body)
	r = dev("/sdk/v1/identify", map[string]any{"user_id": "u-old", "user_hash": hash(old, "u-old"), "identity_epoch": 2})
	assert.Equal(t, 401, r.Status, "the old secret under the new epoch: %s", r.Body)
	assert.Equal(t, "invalid_identity", r.Code(t))

	// PATCH: allowlists replaced whole; a stale revision is 409.
	const app = "https://app.shop.example"
	r = s.patch(tok, base, map[string]any{"expected_revision": rev, "web_origins": []any{shop, app}, "ios_bundle_ids": []any{"com.shop.app"}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, []any{shop, app}, r.JSON(t)["web_origins"])
	assert.Equal(t, []any{"com.shop.app"}, r.JSON(t)["ios_bundle_ids"])
	rev = r.JSON(t)["revision"]
	r = s.patch(tok, base, map[string]any{"expected_revision": 1, "enabled": false})
	assert.Equal(t, 409, r.Status, "%s", r.Body)
	r = register(app)
	require.Equal(t, 201, r.Status, "the added origin registers: %s", r.Body)

	// Disabled: every device call and every registration is 403 sdk_disabled.
	r = s.patch(tok, base, map[string]any{"expected_revision": rev, "enabled": false})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, false, r.JSON(t)["enabled"])
	rev = r.JSON(t)["revision"]
	r = dev("/sdk/v1/identify", map[string]any{"user_id": "u-new", "user_hash": hash(fresh, "u-new"), "identity_epoch": 2})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "sdk_disabled", r.Code(t))
	r = s.do(req{Method: "GET", Path: "/sdk/v1/web-push/config", Token: itok})
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "sdk_disabled", r.Code(t))
	r = register(shop)
	assert.Equal(t, 403, r.Status, "%s", r.Body)
	assert.Equal(t, "sdk_disabled", r.Code(t))
	r = s.patch(tok, base, map[string]any{"expected_revision": rev, "enabled": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = dev("/sdk/v1/identify", map[string]any{"user_id": "u-new", "user_hash": hash(fresh, "u-new"), "identity_epoch": 2})
	assert.Equal(t, 200, r.Status, "enabled again: %s", r.Body)

	// 201 installations in all (two above): the list shows the 200 most recent.
	var last string
	for range 199 {
		r = register(shop)
		require.Equal(t, 201, r.Status, "%s", r.Body)
		last = r.JSON(t)["id"].(string)
	}
	r = s.get(tok, base+"/report")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.EqualValues(t, 201, r.JSON(t)["installations"])
	r = s.get(tok, base+"/installations")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	list := r.JSON(t)
	data := list["data"].([]any)
	assert.Len(t, data, 200)
	assert.Nil(t, list["next_cursor"])
	assert.Equal(t, last, data[0].(map[string]any)["id"], "newest first")
	assert.NotContains(t, string(r.Body), itok)
	r = s.get(tok, base+"/installations?limit=5")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 5)
	assert.Equal(t, last, r.JSON(t)["data"].([]any)[0].(map[string]any)["id"])
	for _, bad := range []string{"0", "201", "x"} {
		r = s.get(tok, base+"/installations?limit="+bad)
		assert.Equal(t, 400, r.Status, "limit=%s: %s", bad, r.Body)
	}
}

// A push message's receipts over /sdk/v1, closed included, are counted once each in the
// project's report.
func TestCustomerSDKReceiptsInReport(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/customer-sdk"
	const shop = "https://shop.example"
	r := s.post(tok, base+"/enable", map[string]any{"web_origins": []any{shop}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	key := r.JSON(t)["project_key"].(string)
	r = s.do(req{Method: "POST", Path: "/sdk/v1/installations", Body: map[string]any{"project_key": key, "platform": "web", "app_id": shop}, Headers: map[string]string{"Origin": shop}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	itok := r.JSON(t)["token"].(string)
	dev := func(path string, body any) resp {
		return s.do(req{Method: "POST", Path: path, Token: itok, Body: body, Headers: map[string]string{"Origin": shop}})
	}
	r = dev("/sdk/v1/push-tokens", map[string]any{"kind": "web_push", "consent": "granted", "subscription": map[string]any{"endpoint": "https://push.example/send/e2e",
		"keys": map[string]any{"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", "auth": "tBHItJI5svbpez7KI4CCXg"}}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	sub := r.JSON(t)["id"].(string)
	for _, kind := range []string{"delivered", "closed", "closed"} {
		r = dev("/sdk/v1/receipts", map[string]any{"subscription_id": sub, "kind": kind, "message_id": "wpm_e2e"})
		require.Equal(t, 204, r.Status, "%s", r.Body)
	}
	r = s.get(tok, base+"/report")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Equal(t, map[string]any{"delivered": float64(1), "clicked": float64(0), "closed": float64(1)}, r.JSON(t)["receipts"])
	assert.Equal(t, map[string]any{"active": float64(1), "expired": float64(0)}, r.JSON(t)["push_tokens"].(map[string]any)["web_push"])
}
