package sdk_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/botplatform/api/docs"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/customersdk"
	"github.com/botplatform/api/functions/sdk"
	sdkwiring "github.com/botplatform/api/functions/sdk/wiring"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/ratelimit"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
)

const shop = "https://shop.example"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type server struct {
	*httpapitest.Server
	key, secret, bot string
	events           *eventlogtest.Memory
	svc              *customersdk.Service
	clock            *httpapitest.Clock
}

func newServer(t *testing.T, perInstallation int64) *server {
	t.Helper()
	return newServerWith(t, func(c *sdk.Config) {
		c.InstallationLimit = ratelimit.Limit{Name: "test device calls", Max: perInstallation, Window: time.Minute}
	})
}

// newServerWith is a server whose sdk.Config set changes (limits) before the routes are
// registered.
func newServerWith(t *testing.T, set func(*sdk.Config)) *server {
	t.Helper()
	clock := httpapitest.NewClock(t0, 0)
	hs := httpapitest.New(t, httpapitest.Config{Now: clock.Now})
	sealer, err := keyfile.New([]byte("0123456789abcdef0123456789abcdef"))
	require.NoError(t, err)
	svc := customersdk.NewService(customersdk.Config{Store: hs.Store, Sealer: secretstest.Wrap(sealer, kms.PurposeSecrets), Key: []byte("sdk-key-sdk-key-sdk-key-sdk-key-!"), Now: clock.Now})
	bot := ids.At("bot", t0)
	p, secret, _, err := svc.Enable(t.Context(), bot, customersdk.Settings{WebOrigins: &[]string{shop},
		IOSBundleIDs: &[]string{iosApp}, AndroidPackages: &[]string{androidApp}})
	require.NoError(t, err)
	ev := eventlogtest.NewMemory()
	cfg := sdk.Config{Devices: sdkwiring.Devices{SDK: svc}, Events: ev, Limiter: ratelimit.New(hs.Store, clock.Now), Now: clock.Now}
	set(&cfg)
	sdk.Routes(hs.Mux, cfg)
	return &server{Server: hs, key: p.ProjectKey, secret: secret, bot: bot, events: ev, svc: svc, clock: clock}
}

const (
	iosApp     = "com.shop.app"
	androidApp = "com.shop.android"
)

func (s *server) register(t *testing.T) (string, string) {
	t.Helper()
	r := s.DoAs(t, "", "POST", "/sdk/v1/installations", map[string]any{"project_key": s.key, "platform": "web", "app_id": shop}, "Origin", shop)
	require.Equal(t, 201, r.Code, r.Body)
	return r.JSON["id"].(string), r.JSON["token"].(string)
}

// The document describes exactly the routes served.
func TestDocumentMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(docs.SDKOpenAPI)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))
	documented := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for m, op := range item.Operations() {
			documented[strings.ToUpper(m)+" "+path] = true
			assert.Equal(t, "sdk", op.Extensions["x-family"], path)
		}
	}
	s := newServer(t, 100)
	served := map[string]bool{}
	for _, rt := range s.Mux.Routes() {
		served[rt.Pattern()] = true
		assert.True(t, documented[rt.Pattern()], "%s is served but not documented", rt.Pattern())
	}
	for k := range documented {
		assert.True(t, served[k], "%s is documented but not served", k)
	}
}

func TestTokenKindsAndOrigins(t *testing.T) {
	t.Parallel()
	s := newServer(t, 100)
	_, tok := s.register(t)
	body := map[string]any{"user_id": "u1", "user_hash": customersdk.UserHash(s.secret, "u1"), "identity_epoch": 1}

	// A PAT, a bot token, no token: 401 (the kernel never looks at them here).
	for _, other := range []string{s.PAT(t, s.Owner), s.BotToken(t, ids.At("bot", t0)), ""} {
		r := s.DoAs(t, other, "POST", "/sdk/v1/identify", body, "Origin", shop)
		assert.Equal(t, 401, r.Code, r.Body)
	}
	// Another origin with the installation's token: 403, unreadable by that page.
	r := s.DoAs(t, tok, "POST", "/sdk/v1/identify", body, "Origin", "https://evil.example")
	assert.Equal(t, 403, r.Code, r.Body)
	assert.Empty(t, r.Header.Get("Access-Control-Allow-Origin"))
	// Strict bodies.
	r = s.DoAs(t, tok, "POST", "/sdk/v1/identify", `{"user_id":"u1","user_hash":"x","identity_epoch":1,"more":1}`, "Origin", shop)
	assert.Equal(t, 400, r.Code, r.Body)
	assert.Equal(t, "unknown_field", r.JSON["code"])
	r = s.DoAs(t, tok, "POST", "/sdk/v1/identify", body, "Origin", shop)
	require.Equal(t, 200, r.Code, r.Body)
	assert.Equal(t, shop, r.Header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "u1", r.JSON["user_id"])

	// Preflights are answered for any origin.
	r = s.DoAs(t, "", "OPTIONS", "/sdk/v1/identify", nil, "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	assert.Equal(t, 204, r.Code)
}

func TestPushTokensReceiptsEvents(t *testing.T) {
	t.Parallel()
	s := newServer(t, 100)
	_, tok := s.register(t)
	sub := func(endpoint string) map[string]any {
		return map[string]any{"kind": "web_push", "consent": "granted", "subscription": map[string]any{"endpoint": endpoint, "expirationTime": nil,
			"keys": map[string]any{"p256dh": "BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM", "auth": "tBHItJI5svbpez7KI4CCXg"}}}
	}
	for _, bad := range []string{"http://push.example/x", "https://push.example/" + strings.Repeat("a", customersdk.MaxEndpointLength)} {
		r := s.DoAs(t, tok, "POST", "/sdk/v1/push-tokens", sub(bad), "Origin", shop)
		assert.Equal(t, 400, r.Code, r.Body)
	}
	endpoint := "https://push.example/send/secret-endpoint-part"
	r := s.DoAs(t, tok, "POST", "/sdk/v1/push-tokens", sub(endpoint), "Origin", shop)
	require.Equal(t, 200, r.Code, r.Body)
	assert.NotContains(t, r.Body, "secret-endpoint-part")
	assert.NotContains(t, r.Body, "tBHItJI5svbpez7KI4CCXg")
	subID := r.JSON["id"].(string)

	r = s.DoAs(t, tok, "POST", "/sdk/v1/receipts", map[string]any{"subscription_id": subID, "kind": "clicked", "message_id": "m1"}, "Origin", shop)
	assert.Equal(t, 204, r.Code, r.Body)
	r = s.DoAs(t, tok, "POST", "/sdk/v1/receipts", map[string]any{"subscription_id": "wps_" + strings.Repeat("0", 26), "kind": "clicked", "message_id": "m1"}, "Origin", shop)
	assert.Equal(t, 404, r.Code, r.Body)

	r = s.DoAs(t, tok, "POST", "/sdk/v1/events", map[string]any{"events": []any{map[string]any{"event_id": "e1", "name": "checkout"}}}, "Origin", shop)
	require.Equal(t, 202, r.Code, r.Body)
	r = s.DoAs(t, tok, "POST", "/sdk/v1/events", map[string]any{"events": []any{map[string]any{"event_id": "e2", "name": eventlog.PopupShown}}}, "Origin", shop)
	assert.Equal(t, 400, r.Code, "a platform event's name: %s", r.Body)
	var got []eventlog.Event
	require.NoError(t, s.events.Scan(t.Context(), eventlog.Query{BotID: s.bot, From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}, func(e eventlog.Event) error {
		got = append(got, e)
		return nil
	}))
	require.Len(t, got, 1)
	assert.Equal(t, "checkout", got[0].Name)
	assert.Equal(t, eventlog.SourceCustom, got[0].Source)
	assert.NotEmpty(t, got[0].Properties["sdk_installation_id"])
}

func TestRateLimitedPerInstallation(t *testing.T) {
	t.Parallel()
	s := newServer(t, 2)
	_, tok := s.register(t)
	for range 2 {
		r := s.DoAs(t, tok, "GET", "/sdk/v1/web-push/config", nil)
		require.Equal(t, 200, r.Code, r.Body)
	}
	r := s.DoAs(t, tok, "GET", "/sdk/v1/web-push/config", nil)
	assert.Equal(t, 429, r.Code, r.Body)
	assert.NotEmpty(t, r.Header.Get("Retry-After"))
	// Another installation has its own budget.
	_, other := s.register(t)
	r = s.DoAs(t, other, "GET", "/sdk/v1/web-push/config", nil)
	assert.Equal(t, 200, r.Code, r.Body)
}
