package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/logtest"
)

// pushEmulator is the npm package web-push-testing, a push service that decrypts what it is
// sent (tests/emulators/webpush), running on 127.0.0.1 for one test. It speaks plain http;
// real push services, and the endpoints the customer SDK accepts, are https, so the test
// puts a TLS proxy of its own in front of it (tls) and hands the platform endpoints on the
// proxy. The local process trusts the proxy's certificate through SSL_CERT_FILE (certFile),
// which Go's TLS reads on Linux: no code of the platform changes for the test.
type pushEmulator struct {
	t        *testing.T
	base     string
	tls      *httptest.Server
	certFile string
}

var pushListeningRe = regexp.MustCompile(`listening (http://127\.0\.0\.1:\d+)`)

// startPushEmulator starts the emulator that tests/emulators/webpush/install.sh installed
// (make test runs it). Without it the test is skipped, unless WEB_PUSH_TESTING_REQUIRED is
// set (make test sets it), where its absence fails.
func startPushEmulator(t *testing.T) *pushEmulator {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	pkg := filepath.Join(root, ".cache", "webpush", "node_modules", "web-push-testing")
	_, statErr := os.Stat(filepath.Join(pkg, "package.json"))
	_, nodeErr := exec.LookPath("node")
	if statErr != nil || nodeErr != nil {
		if os.Getenv("WEB_PUSH_TESTING_REQUIRED") != "" {
			t.Fatalf("the push service emulator is not installed (node: %v, package: %v): run tests/emulators/webpush/install.sh", nodeErr, statErr)
		}
		t.Skip("the push service emulator is not installed: run tests/emulators/webpush/install.sh (make test does)")
	}
	cmd := exec.Command("node", filepath.Join(root, "tests", "emulators", "webpush", "server.js"), pkg)
	stdin, err := cmd.StdinPipe() // closing it stops the emulator
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr logtest.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Logf("push emulator: %v\n%s", err, stderr.String())
		}
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := pushListeningRe.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("the push emulator did not start:\n%s", stderr.String())
	}
	target, err := url.Parse(base)
	require.NoError(t, err)
	proxy := httptest.NewTLSServer(httputil.NewSingleHostReverseProxy(target))
	t.Cleanup(proxy.Close)
	certFile := filepath.Join(t.TempDir(), "push-service.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: proxy.Certificate().Raw}), 0o600))
	return &pushEmulator{t: t, base: base, tls: proxy, certFile: certFile}
}

// call posts body to the emulator's path and decodes its answer.
func (p *pushEmulator) call(path string, body any) (int, map[string]any) {
	p.t.Helper()
	b, err := json.Marshal(body)
	require.NoError(p.t, err)
	res, err := http.Post(p.base+path, "application/json", bytes.NewReader(b))
	require.NoError(p.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(p.t, err)
	var out map[string]any
	if strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") {
		require.NoError(p.t, json.Unmarshal(raw, &out), "emulator %s: %s", path, raw)
	}
	return res.StatusCode, out
}

// browserSubscription is what PushManager.subscribe gives a page, from the emulator.
type browserSubscription struct {
	Endpoint string `json:"endpoint"`
	Keys     struct {
		P256dh string `json:"p256dh"`
		Auth   string `json:"auth"`
	} `json:"keys"`
	ClientHash string `json:"clientHash"`
}

func (p *pushEmulator) subscribe(applicationServerKey string) browserSubscription {
	p.t.Helper()
	status, out := p.call("/subscribe", map[string]any{"applicationServerKey": applicationServerKey, "userVisibleOnly": "true"})
	require.Equal(p.t, http.StatusOK, status, "%v", out)
	b, err := json.Marshal(out["data"])
	require.NoError(p.t, err)
	var sub browserSubscription
	require.NoError(p.t, json.Unmarshal(b, &sub))
	require.True(p.t, strings.HasPrefix(sub.Endpoint, p.base+"/"), "endpoint %s", sub.Endpoint)
	sub.Endpoint = p.tls.URL + strings.TrimPrefix(sub.Endpoint, p.base) // through the TLS proxy
	require.NotEmpty(p.t, sub.ClientHash)
	return sub
}

// notifications returns the decrypted messages the emulator received for a subscription.
func (p *pushEmulator) notifications(clientHash string) []string {
	p.t.Helper()
	status, out := p.call("/get-notifications", map[string]any{"clientHash": clientHash})
	require.Equal(p.t, http.StatusOK, status, "%v", out)
	var msgs []string
	data, _ := out["data"].(map[string]any)
	list, _ := data["messages"].([]any)
	for _, m := range list {
		msgs = append(msgs, m.(string))
	}
	return msgs
}

// webDevice registers a browser installation of the bot's customer SDK project (the device
// surface) and returns its installation token.
func webDevice(t *testing.T, s *server, projectKey, origin string) string {
	t.Helper()
	r := s.do(req{Method: http.MethodPost, Path: "/sdk/v1/installations", Headers: map[string]string{"Origin": origin},
		Body: map[string]any{"project_key": projectKey, "platform": "web", "app_id": origin, "locale": "de-DE", "timezone": "Europe/Berlin"}})
	require.Equal(t, http.StatusCreated, r.Status, "register: %s", r.Body)
	tok, _ := r.JSON(t)["token"].(string)
	require.NotEmpty(t, tok)
	return tok
}

// putSubscription gives the device's browser subscription to the platform (what sdk.js does
// after PushManager.subscribe) and returns its id.
func putSubscription(t *testing.T, s *server, device string, sub browserSubscription) string {
	t.Helper()
	r := s.post(device, "/sdk/v1/push-tokens", map[string]any{"kind": "web_push", "consent": "granted",
		"subscription": map[string]any{"endpoint": sub.Endpoint, "keys": map[string]string{"p256dh": sub.Keys.P256dh, "auth": sub.Keys.Auth}}})
	require.Equal(t, http.StatusOK, r.Status, "push token: %s", r.Body)
	id, _ := r.JSON(t)["id"].(string)
	require.NotEmpty(t, id)
	return id
}

// Browser push end to end: the configuration's keys, a subscription made on the device
// surface against a real push service emulator, a test send the emulator decrypts, a 410 from
// it expiring the subscription, and a key rotation that needs confirming and expires the rest.
func TestWebPush(t *testing.T) {
	t.Parallel()
	push := startPushEmulator(t)
	// The emulator (behind its TLS proxy) listens on 127.0.0.1: only this explicit local
	// option lets the platform send there (docs/webpush.md).
	s := startWithEnv(t, t.TempDir(), []string{"WEB_PUSH_LOOPBACK_ENDPOINTS=allow", "SSL_CERT_FILE=" + push.certFile})
	tok := s.demo.Token
	bot := "/api/bots/" + s.demo.BotID
	const origin = "https://shop.example"

	r := s.get(tok, bot+"/web-push")
	assert.Equal(t, http.StatusNotFound, r.Status)
	assert.Equal(t, "web_push_not_enabled", r.Code(t))

	// Enable twice: the same keys, the second an idempotent settings update.
	r = s.post(tok, bot+"/web-push/enable", map[string]any{"subject": "mailto:push@shop.example", "navigation_origins": []string{origin}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/web-push/enable", bot+"/web-push/enable", r)
	first := r.JSON(t)
	pub, _ := first["vapid_public_key"].(string)
	require.NotEmpty(t, pub)
	r = s.post(tok, bot+"/web-push/enable", map[string]any{"subject": "mailto:push@shop.example"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Equal(t, first, r.JSON(t), "same keys, same revision: nothing changed")
	assert.NotContains(t, strings.ToLower(string(r.Body)), "private")
	r = s.get(tok, bot+"/web-push")
	require.Equal(t, http.StatusOK, r.Status)
	conforms(t, "GET", "/api/bots/{botID}/web-push", bot+"/web-push", r)
	assert.Equal(t, pub, r.JSON(t)["vapid_public_key"])

	// A visitor's browser subscribes, through the customer SDK's device surface.
	r = s.post(tok, bot+"/customer-sdk/enable", map[string]any{"web_origins": []string{origin}})
	require.Equal(t, http.StatusCreated, r.Status, "customer sdk: %s", r.Body)
	projectKey, _ := r.JSON(t)["project_key"].(string)
	require.NotEmpty(t, projectKey)
	browser := push.subscribe(pub)
	device := webDevice(t, s, projectKey, origin)
	subID := putSubscription(t, s, device, browser)

	r = s.get(tok, bot+"/web-push/subscriptions")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/web-push/subscriptions", bot+"/web-push/subscriptions", r)
	assert.Contains(t, string(r.Body), subID)
	assert.NotContains(t, string(r.Body), browser.ClientHash, "the endpoint is never shown")
	assert.NotContains(t, string(r.Body), browser.Keys.Auth)

	// A published push document, sent as a test to the subscription: the emulator checks
	// the VAPID signature and decrypts the message.
	r = s.post(tok, bot+"/content", map[string]any{"type": "push", "name": "Sale push",
		"draft": map[string]any{"title": "Spring sale", "body": "Up to 50% off", "url": origin + "/sale"}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	doc, _ := r.JSON(t)["id"].(string)
	r = s.post(tok, bot+"/web-push/test", map[string]any{"subscription_id": subID, "document_id": doc})
	assert.Equal(t, http.StatusConflict, r.Status)
	assert.Equal(t, "document_not_published", r.Code(t))
	r = s.post(tok, bot+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)

	r = s.post(tok, bot+"/web-push/test", map[string]any{"subscription_id": subID, "document_id": doc})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/web-push/test", bot+"/web-push/test", r)
	sent := r.JSON(t)
	assert.Equal(t, float64(201), sent["push_status"])
	msgs := push.notifications(browser.ClientHash)
	require.Len(t, msgs, 1)
	var payload map[string]any
	require.NoError(t, json.Unmarshal([]byte(msgs[0]), &payload), "the decrypted message: %s", msgs[0])
	assert.Equal(t, "Spring sale", payload["title"])
	assert.Equal(t, "Up to 50% off", payload["body"])
	assert.Equal(t, origin+"/sale", payload["url"])
	assert.Equal(t, sent["message_id"], payload["message_id"])
	assert.Equal(t, subID, payload["subscription_id"], "sw.js reports receipts of this subscription")
	// The service worker reports the message delivered and clicked (sw.js), once each
	// however often it retries: the report counts them.
	for _, kind := range []string{"delivered", "delivered", "clicked"} {
		r = s.post(device, "/sdk/v1/receipts", map[string]any{"subscription_id": subID, "kind": kind, "message_id": payload["message_id"]})
		require.Less(t, r.Status, 300, "receipt: %s", r.Body)
	}

	// Quiet hours hold a send unless it overrides them.
	r = s.get(tok, bot+"/web-push")
	rev := r.JSON(t)["revision"]
	r = s.patch(tok, bot+"/web-push", map[string]any{"expected_revision": rev,
		"quiet_hours": map[string]any{"enabled": true, "start": "00:00", "end": "23:59", "timezone": "UTC"}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = s.post(tok, bot+"/web-push/test", map[string]any{"subscription_id": subID, "document_id": doc})
	if time.Now().UTC().Format("15:04") != "23:59" { // the one minute outside the window
		assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
		assert.Equal(t, "quiet_hours", r.Code(t))
	}
	r = s.post(tok, bot+"/web-push/test", map[string]any{"subscription_id": subID, "document_id": doc, "ignore_quiet_hours": true})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	assert.Len(t, push.notifications(browser.ClientHash), 2)

	// The push service forgets the subscription: it answers 410, which expires it here.
	status, _ := push.call("/expire-subscription/"+browser.ClientHash, map[string]any{})
	require.Equal(t, http.StatusOK, status)
	r = s.post(tok, bot+"/web-push/test", map[string]any{"subscription_id": subID, "document_id": doc, "ignore_quiet_hours": true})
	assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	assert.Equal(t, "subscription_expired", r.Code(t))
	assert.Equal(t, float64(410), r.JSON(t)["push_status"])
	r = s.get(tok, bot+"/web-push/subscriptions")
	require.Equal(t, http.StatusOK, r.Status)
	list, _ := r.JSON(t)["data"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, "expired", list[0].(map[string]any)["state"])
	r = s.post(tok, bot+"/web-push/test", map[string]any{"subscription_id": subID, "document_id": doc, "ignore_quiet_hours": true})
	assert.Equal(t, http.StatusNotFound, r.Status, "an expired subscription is not sent to: %s", r.Body)

	// Two more browsers subscribe; rotating the keys needs confirming, with the count.
	for range 2 {
		putSubscription(t, s, webDevice(t, s, projectKey, origin), push.subscribe(pub))
	}
	r = s.post(tok, bot+"/web-push/rotate-keys", map[string]any{})
	assert.Equal(t, http.StatusConflict, r.Status, "%s", r.Body)
	assert.Equal(t, "confirm_required", r.Code(t))
	assert.Equal(t, float64(2), r.JSON(t)["active_subscriptions"])
	r = s.get(tok, bot+"/web-push")
	assert.Equal(t, pub, r.JSON(t)["vapid_public_key"], "an unconfirmed rotation changes nothing")
	r = s.post(tok, bot+"/web-push/rotate-keys", map[string]any{"confirm": true})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/web-push/rotate-keys", bot+"/web-push/rotate-keys", r)
	assert.Equal(t, float64(2), r.JSON(t)["expired_subscriptions"])
	assert.NotEqual(t, pub, r.JSON(t)["vapid_public_key"])

	r = s.get(tok, bot+"/web-push/report")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/web-push/report", bot+"/web-push/report", r)
	rep := r.JSON(t)
	assert.Equal(t, map[string]any{"active": float64(0), "expired": float64(3)}, rep["subscriptions"])
	assert.Equal(t, map[string]any{"sent": float64(2), "expired": float64(1), "failed": float64(0)}, rep["sends"])
	assert.Equal(t, map[string]any{"delivered": float64(1), "clicked": float64(1), "closed": float64(0)}, rep["receipts"])

	// Every mutation is audited; no response or log line holds an endpoint or a key.
	r = s.get(tok, "/api/audit-events?bot_id="+s.demo.BotID+"&limit=200")
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	for _, route := range []string{"POST /api/bots/{botID}/web-push/enable", "PATCH /api/bots/{botID}/web-push",
		"POST /api/bots/{botID}/web-push/rotate-keys", "POST /api/bots/{botID}/web-push/test"} {
		_, path, _ := strings.Cut(route, " ")
		assert.Contains(t, string(r.Body), path, "audited: %s", route)
	}
	logs := s.stderr.String()
	assert.NotContains(t, logs, browser.ClientHash)
	assert.NotContains(t, logs, browser.Keys.Auth)
}
