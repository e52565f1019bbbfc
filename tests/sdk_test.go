package tests

import (
	"bytes"
	"context"
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

	ctx, cancel := context.WithCancel(t.Context())
	// Without the background-networking flags Chromium keeps trying Google's hosts, which
	// a closed network refuses.
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-quic", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), page.URL)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { cancel(); <-exited })
	select {
	case rep := <-reports:
		assert.True(t, strings.HasPrefix(rep, "registered:inst_"), "the script reported %q", rep)
	case err := <-exited:
		t.Fatalf("chromium exited before the page reported: %v\n%s", err, out.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("the page reported nothing within 90 s")
	}

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
