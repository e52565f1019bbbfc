package sdk_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/customersdk"
	"github.com/botplatform/api/functions/sdk"
	"github.com/botplatform/api/shared/ratelimit"
)

// registerFrom registers a web installation from a client address (RemoteAddr as the
// kernel gives it: ip:port locally, the source IP alone on AWS).
func (s *server) registerFrom(t *testing.T, addr string, key string) (int, http.Header, map[string]any) {
	t.Helper()
	b, err := json.Marshal(map[string]any{"project_key": key, "platform": "web", "app_id": shop})
	require.NoError(t, err)
	r := httptest.NewRequest("POST", "/sdk/v1/installations", bytes.NewReader(b))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", shop)
	r.RemoteAddr = addr
	w := httptest.NewRecorder()
	s.Mux.ServeHTTP(w, r)
	var body map[string]any
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &body), w.Body.String())
	return w.Code, w.Header(), body
}

func assertLimited(t *testing.T, code int, h http.Header, body map[string]any, limit string) {
	t.Helper()
	assert.Equal(t, http.StatusTooManyRequests, code, body)
	assert.Equal(t, "rate_limited", body["code"])
	assert.Contains(t, body["detail"], limit)
	wait, err := strconv.Atoi(h.Get("Retry-After"))
	require.NoError(t, err, "Retry-After %q", h.Get("Retry-After"))
	assert.True(t, wait >= 1 && wait <= 60, "Retry-After %d", wait)
	// The limits come before the project's origins are read: the 429 lets no page read it.
	assert.Empty(t, h.Get("Access-Control-Allow-Origin"))
}

// Registrations are limited per client address within a project: one machine in a loop
// is refused with 429 and Retry-After, other addresses are not, an IPv6 /64 is one
// address, and the next window admits the address again.
func TestRegistrationRateLimitedPerAddress(t *testing.T) {
	t.Parallel()
	s := newServerWith(t, func(c *sdk.Config) {
		c.RegistrationAddressLimit = ratelimit.Limit{Name: "test registrations per address", Max: 2, Window: time.Minute}
	})
	for range 2 {
		code, _, body := s.registerFrom(t, "198.51.100.7:40000", s.key)
		require.Equal(t, 201, code, body)
	}
	code, h, body := s.registerFrom(t, "198.51.100.7:40001", s.key)
	assertLimited(t, code, h, body, "test registrations per address")
	// A forged key is refused as such, whatever the address's count.
	code, _, body = s.registerFrom(t, "198.51.100.7:40002", s.key+"x")
	assert.Equal(t, 401, code, body)
	// AWS gives the source address without a port: the same address.
	code, h, body = s.registerFrom(t, "198.51.100.7", s.key)
	assertLimited(t, code, h, body, "test registrations per address")
	code, _, body = s.registerFrom(t, "198.51.100.8:40000", s.key)
	assert.Equal(t, 201, code, body)

	// An IPv6 subscriber's /64 is one address.
	for _, a := range []string{"[2001:db8:1:2::1]:1", "[2001:db8:1:2::ffff]:1"} {
		code, _, body := s.registerFrom(t, a, s.key)
		require.Equal(t, 201, code, body)
	}
	code, h, body = s.registerFrom(t, "[2001:db8:1:2:aaaa::beef]:1", s.key)
	assertLimited(t, code, h, body, "test registrations per address")
	code, _, body = s.registerFrom(t, "[2001:db8:1:3::1]:1", s.key)
	assert.Equal(t, 201, code, body)

	s.clock.Advance(time.Minute)
	code, _, body = s.registerFrom(t, "198.51.100.7:40003", s.key)
	assert.Equal(t, 201, code, body)

	list, err := s.svc.Installations(t.Context(), s.bot, 0)
	require.NoError(t, err)
	assert.Len(t, list, 7, "a refused registration writes nothing")
}

// The project's budget is shared by its registrations and its devices' calls: past it,
// registrations from any address and calls of any installation are 429 until the window
// ends; another installation's own per-installation budget does not help.
func TestProjectRateLimitCoversRegistrationsAndCalls(t *testing.T) {
	t.Parallel()
	s := newServerWith(t, func(c *sdk.Config) {
		c.ProjectLimit = ratelimit.Limit{Name: "test project calls", Max: 4, Window: time.Minute}
	})
	var tokens []string
	for i := range 3 {
		code, _, body := s.registerFrom(t, "198.51.100."+strconv.Itoa(i+1)+":1", s.key)
		require.Equal(t, 201, code, body)
		tokens = append(tokens, body["token"].(string))
	}
	r := s.DoAs(t, tokens[0], "GET", "/sdk/v1/web-push/config", nil)
	require.Equal(t, 200, r.Code, r.Body)
	// Five calls in the window: a new address's registration is refused...
	code, h, body := s.registerFrom(t, "203.0.113.9:1", s.key)
	assertLimited(t, code, h, body, "test project calls")
	// ... and so is a call of an installation that has made none.
	r = s.DoAs(t, tokens[2], "GET", "/sdk/v1/web-push/config", nil, "Origin", shop)
	assert.Equal(t, 429, r.Code, r.Body)
	assert.Equal(t, "rate_limited", r.Problem())
	assert.Contains(t, r.JSON["detail"], "test project calls")
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	assert.Equal(t, shop, r.Header.Get("Access-Control-Allow-Origin"))

	s.clock.Advance(time.Minute)
	r = s.DoAs(t, tokens[2], "GET", "/sdk/v1/web-push/config", nil)
	assert.Equal(t, 200, r.Code, r.Body)
	code, _, body = s.registerFrom(t, "203.0.113.9:1", s.key)
	assert.Equal(t, 201, code, body)
}

// A closed receipt posted by the service worker is counted in the project's report, once
// per message however often the device retries.
func TestClosedReceiptCounted(t *testing.T) {
	t.Parallel()
	s := newServer(t, 100)
	_, tok := s.register(t)
	r := s.DoAs(t, tok, "POST", "/sdk/v1/push-tokens", map[string]any{"kind": "web_push", "consent": "granted", "subscription": map[string]any{
		"endpoint": "https://push.example/send/abc", "keys": map[string]any{"p256dh": testP256dh, "auth": testAuth}}}, "Origin", shop)
	require.Equal(t, 200, r.Code, r.Body)
	sub := r.JSON["id"].(string)
	for range 2 {
		r = s.DoAs(t, tok, "POST", "/sdk/v1/receipts", map[string]any{"subscription_id": sub, "kind": "closed", "message_id": "wpm_1"}, "Origin", shop)
		require.Equal(t, 204, r.Code, r.Body)
	}
	r = s.DoAs(t, tok, "POST", "/sdk/v1/receipts", map[string]any{"subscription_id": sub, "kind": "dismissed", "message_id": "wpm_1"}, "Origin", shop)
	assert.Equal(t, 400, r.Code, r.Body)
	c, err := s.svc.Counts(t.Context(), s.bot)
	require.NoError(t, err)
	assert.Equal(t, map[customersdk.ReceiptKind]int64{customersdk.ReceiptDelivered: 0, customersdk.ReceiptClicked: 0, customersdk.ReceiptClosed: 1}, c.Receipts)
}

const (
	testP256dh = "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM"
	testAuth   = "tBHItJI5svbpez7KI4CCXg"
)

// APNs and FCM tokens: each kind from its platform only, validated, stored (one of each
// per installation, replaced when posted again) and never serialized back.
func TestMobilePushTokens(t *testing.T) {
	t.Parallel()
	s := newServer(t, 100)
	register := func(platform, app string) string {
		t.Helper()
		r := s.DoAs(t, "", "POST", "/sdk/v1/installations", map[string]any{"project_key": s.key, "platform": platform, "app_id": app})
		require.Equal(t, 201, r.Code, r.Body)
		return r.JSON["token"].(string)
	}
	ios, android := register("ios", iosApp), register("android", androidApp)
	_, web := s.register(t)
	apns := strings.Repeat("a1b2c3d4", 8)
	fcm := "dGVzdC1mY20tdG9rZW4:APA91bH-secret_part.of-the-token"

	bad := []struct {
		name  string
		token string
		body  map[string]any
		field string
	}{
		{"apns too short", ios, map[string]any{"kind": "apns", "token": "abcd"}, "token"},
		{"apns not hex", ios, map[string]any{"kind": "apns", "token": strings.Repeat("zz", 32)}, "token"},
		{"apns from android", android, map[string]any{"kind": "apns", "token": apns}, "kind"},
		{"fcm from a browser", web, map[string]any{"kind": "fcm", "token": fcm}, "kind"},
		{"fcm bad characters", android, map[string]any{"kind": "fcm", "token": "has spaces in it, twenty+ chars"}, "token"},
		{"apns with a subscription", ios, map[string]any{"kind": "apns", "token": apns, "subscription": map[string]any{"endpoint": "https://push.example/x"}}, "subscription"},
		{"apns with consent", ios, map[string]any{"kind": "apns", "token": apns, "consent": "granted"}, "consent"},
		{"unknown kind", ios, map[string]any{"kind": "hms", "token": apns}, "kind"},
	}
	for _, b := range bad {
		r := s.DoAs(t, b.token, "POST", "/sdk/v1/push-tokens", b.body)
		assert.Equal(t, 400, r.Code, "%s: %s", b.name, r.Body)
		assert.Contains(t, r.Body, `"field":"`+b.field+`"`, b.name)
	}
	c, err := s.svc.Counts(t.Context(), s.bot)
	require.NoError(t, err)
	assert.Zero(t, c.PushTokens[customersdk.PushAPNs].Active+c.PushTokens[customersdk.PushFCM].Active, "nothing refused is stored")

	r := s.DoAs(t, ios, "POST", "/sdk/v1/push-tokens", map[string]any{"kind": "apns", "token": apns})
	require.Equal(t, 200, r.Code, r.Body)
	assert.Regexp(t, `^apns_`, r.JSON["id"])
	assert.Equal(t, "apns", r.JSON["kind"])
	assert.Equal(t, "active", r.JSON["state"])
	assert.NotContains(t, r.Body, apns)
	assert.NotContains(t, r.Body, "token\"", "no token member")
	// Posting again replaces the token: still one.
	r = s.DoAs(t, ios, "POST", "/sdk/v1/push-tokens", map[string]any{"kind": "apns", "token": strings.Repeat("f0", 40)})
	require.Equal(t, 200, r.Code, r.Body)
	r = s.DoAs(t, android, "POST", "/sdk/v1/push-tokens", map[string]any{"kind": "fcm", "token": fcm})
	require.Equal(t, 200, r.Code, r.Body)
	assert.Regexp(t, `^fcm_`, r.JSON["id"])
	assert.NotContains(t, r.Body, "secret_part")

	c, err = s.svc.Counts(t.Context(), s.bot)
	require.NoError(t, err)
	assert.Equal(t, customersdk.PushCounts{Active: 1}, c.PushTokens[customersdk.PushAPNs])
	assert.Equal(t, customersdk.PushCounts{Active: 1}, c.PushTokens[customersdk.PushFCM])
	// The lists a management token reads show neither.
	list, err := s.svc.Installations(t.Context(), s.bot, 0)
	require.NoError(t, err)
	b, err := json.Marshal(list)
	require.NoError(t, err)
	assert.NotContains(t, string(b), apns)
	assert.NotContains(t, string(b), "secret_part")
	subs, _, err := s.svc.WebPushSubscriptions(t.Context(), s.bot, 10, "")
	require.NoError(t, err)
	assert.Empty(t, subs, "APNs and FCM tokens are not web push subscriptions")
}

// The service worker part and the SDK are served as JavaScript any site may load.
func TestScriptsServed(t *testing.T) {
	t.Parallel()
	s := newServer(t, 100)
	for path, marker := range map[string]string{"/sdk/v1/sw.js": `addEventListener("push"`, "/sdk/v1/sdk.js": "self.MBSDK = MBSDK"} {
		r := s.DoAs(t, "", "GET", path, nil)
		require.Equal(t, 200, r.Code, path)
		assert.Equal(t, "text/javascript; charset=utf-8", r.Header.Get("Content-Type"), path)
		assert.Equal(t, "nosniff", r.Header.Get("X-Content-Type-Options"), path)
		assert.Equal(t, "*", r.Header.Get("Access-Control-Allow-Origin"), path)
		assert.Equal(t, "cross-origin", r.Header.Get("Cross-Origin-Resource-Policy"), path)
		assert.Contains(t, r.Header.Get("Cache-Control"), "max-age=", path)
		assert.Contains(t, r.Body, marker, path)
	}
	r := s.DoAs(t, "", "GET", "/sdk/v1/sw.js", nil)
	for _, kind := range []string{"delivered", "clicked", "closed"} {
		assert.Contains(t, r.Body, `"`+kind+`"`, "the worker reports %s receipts", kind)
	}
}
