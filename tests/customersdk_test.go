package tests

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"testing"

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
