package tests

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chromium finds Debian's headless-capable Chromium. Without one the test skips, unless
// REQUIRE_BROWSER is set (.ci/run installs Chromium and sets it, so CI cannot skip).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("REQUIRE_BROWSER") != "" {
		t.Fatal("REQUIRE_BROWSER is set and there is no Chromium (Debian: apt-get install chromium)")
	}
	t.Skip("no Chromium on this machine (Debian: apt-get install chromium)")
	return ""
}

// openInChromium opens url in a headless Chromium of its own and returns the first report
// the page sends to reports; it fails the test when the browser exits or 90 s pass first.
func openInChromium(t *testing.T, browser, url string, reports <-chan string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	// Without the background-networking flags Chromium keeps trying Google's hosts, which
	// a closed network refuses.
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), url)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() { cancel(); <-exited }()
	select {
	case rep := <-reports:
		return rep
	case err := <-exited:
		t.Fatalf("chromium exited before the page reported: %v\n%s", err, out.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("the page reported nothing within 90 s")
	}
	return ""
}

// A real browser loads the SDK snippet on a local page and registers the installation: the
// script, the CORS preflight and the Origin check as a browser exercises them.
func TestSDKSnippetRegistersInABrowser(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot + "/customer-sdk"

	// The page is served after the project is enabled; the key is set between. The page
	// reports what the script did to /report, which is how the test knows it is done.
	var key atomic.Value
	reports := make(chan string, 1)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/report" {
			select {
			case reports <- r.URL.Query().Get("r"):
			default:
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>sdk</title>
<script src="%[1]s/sdk/v1/sdk.js"></script></head><body><script>
function report(r) { fetch("/report?r=" + encodeURIComponent(r)); }
MBSDK.init({projectKey: %[2]q, base: %[1]q})
  .then(function (i) { report("registered:" + i.id); })
  .catch(function (e) { report("failed:" + e.message); });
</script></body></html>`, s.base, key.Load())
	}))
	t.Cleanup(page.Close)

	r := s.post(tok, base+"/enable", map[string]any{"web_origins": []any{page.URL}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	key.Store(r.JSON(t)["project_key"].(string))

	rep := openInChromium(t, browser, page.URL, reports)
	assert.True(t, strings.HasPrefix(rep, "registered:inst_"), "the script reported %q", rep)

	r = s.get(tok, base+"/installations")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	data := r.JSON(t)["data"].([]any)
	require.Len(t, data, 1)
	inst := data[0].(map[string]any)
	assert.Equal(t, "web", inst["platform"])
	assert.Equal(t, page.URL, inst["app_id"])
	assert.Equal(t, "chrome", inst["browser_family"])
	assert.True(t, strings.HasPrefix(inst["id"].(string), "inst_"))
}

// After a VAPID key rotation the browser still holds a subscription made with the old key,
// and pushManager.subscribe with the new key fails while it exists. The snippet, loaded by
// a real Chromium against the local process, finds the difference on init (permission
// already granted), unsubscribes, subscribes with the bot's current key and registers the
// new subscription; on the next init, with the keys equal, it leaves the subscription be.
// The browser's push service is not reachable on a closed network, so the page stands in
// for the one piece Chromium cannot do here: its service worker registration's pushManager
// (and a granted permission) are fakes that keep one subscription and, like Chromium,
// refuse subscribe with another key while it exists. Everything else is the served sdk.js
// and the real device surface.
func TestSDKSnippetResubscribesAfterKeyRotation(t *testing.T) {
	t.Parallel()
	browser := chromium(t)
	s := start(t)
	tok, bot := s.demo.Token, s.demo.BotID
	base := "/api/bots/" + bot

	old, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	sub, err := ecdh.P256().GenerateKey(rand.Reader)
	require.NoError(t, err)
	b64 := base64.RawURLEncoding.EncodeToString
	authSecret := make([]byte, 16)
	_, _ = rand.Read(authSecret)

	var key atomic.Value
	reports := make(chan string, 1)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/report" {
			select {
			case reports <- r.URL.Query().Get("r"):
			default:
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html><head><title>sdk</title><script>
function unb64(s) { s = s.replace(/-/g, "+").replace(/_/g, "/"); while (s.length %% 4) s += "=";
  var raw = atob(s), out = new Uint8Array(raw.length); for (var i = 0; i < raw.length; i++) out[i] = raw.charCodeAt(i); return out; }
function enc(buf) { return btoa(String.fromCharCode.apply(null, new Uint8Array(buf))).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, ""); }
var log = [], keys = {p256dh: unb64(%[3]q), auth: unb64(%[4]q)};
function fake(key, endpoint) {
  var k = new Uint8Array(key);
  return {endpoint: endpoint, options: {userVisibleOnly: true, applicationServerKey: k.buffer},
    getKey: function (n) { return keys[n].buffer; },
    unsubscribe: function () { log.push("unsubscribe:" + enc(k)); state.sub = null; return Promise.resolve(true); }};
}
var state = {sub: fake(unb64(%[5]q), "https://push.example/send/made-with-the-old-key")};
var registration = {pushManager: {
  getSubscription: function () { return Promise.resolve(state.sub); },
  subscribe: function (o) {
    var k = enc(o.applicationServerKey);
    if (state.sub && enc(state.sub.options.applicationServerKey) !== k)
      return Promise.reject(new DOMException("A subscription with a different application server key already exists.", "InvalidStateError"));
    log.push("subscribe:" + k);
    state.sub = fake(o.applicationServerKey, "https://push.example/send/made-with-the-current-key");
    return Promise.resolve(state.sub);
  }}};
Object.defineProperty(Notification, "permission", {get: function () { return "granted"; }});
Object.defineProperty(navigator, "serviceWorker", {value: {getRegistration: function () { return Promise.resolve(registration); }}});
</script><script src="%[1]s/sdk/v1/sdk.js"></script></head><body><script>
function report(r) { fetch("/report?r=" + encodeURIComponent(JSON.stringify(r))); }
var out = {};
MBSDK.init({projectKey: %[2]q, base: %[1]q}).then(function () { return MBSDK.pushRefreshed(); })
  .then(function (r) { out.first = r; out.firstLog = log; log = [];
    return MBSDK.init({projectKey: %[2]q, base: %[1]q}).then(function () { return MBSDK.pushRefreshed(); }); })
  .then(function (r) { out.second = r; out.secondLog = log; report(out); })
  .catch(function (e) { out.error = String(e && e.message); report(out); });
</script></body></html>`, s.base, key.Load(), b64(sub.PublicKey().Bytes()), b64(authSecret), b64(old.PublicKey().Bytes()))
	}))
	t.Cleanup(page.Close)

	r := s.post(tok, base+"/customer-sdk/enable", map[string]any{"web_origins": []any{page.URL}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	key.Store(r.JSON(t)["project_key"].(string))
	r = s.post(tok, base+"/web-push/enable", map[string]any{"subject": "mailto:push@shop.example", "navigation_origins": []string{page.URL}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	current := r.JSON(t)["vapid_public_key"].(string)
	require.NotEqual(t, b64(old.PublicKey().Bytes()), current)

	var got struct {
		First, Second       string
		FirstLog, SecondLog []string
		Error               string
	}
	rep := openInChromium(t, browser, page.URL, reports)
	require.NoError(t, json.Unmarshal([]byte(rep), &got), rep)
	require.Empty(t, got.Error, rep)
	assert.Equal(t, "resubscribed", got.First, rep)
	assert.Equal(t, []string{"unsubscribe:" + b64(old.PublicKey().Bytes()), "subscribe:" + current}, got.FirstLog, rep)
	assert.Equal(t, "unchanged", got.Second, rep)
	assert.Empty(t, got.SecondLog, "keys equal: the subscription is left be")

	// The new subscription was registered: browser push lists it, active.
	r = s.get(tok, base+"/web-push/subscriptions")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	data := r.JSON(t)["data"].([]any)
	require.Len(t, data, 1)
	assert.Equal(t, "active", data[0].(map[string]any)["state"])
	assert.NotContains(t, string(r.Body), "made-with-the-current-key")
}
