package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process killed (-9) while it installs a playbook, restarted on the same data: whatever
// the moment of the kill, the install ends whole (installed, every resource there) or rolled
// back (failed with install_interrupted, nothing of it left, installable again), never half
// made. The kill delays are searched between 0 and an uninterrupted install's duration until
// one lands mid-install; that install is rolled back by the recovery job through the local
// queue (its failure is stamped before the test's first read of it), not by a read.
func TestPlaybookInstallKilledMidway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A short stuck time: the recovery job runs 5 s after it, so within seconds of a restart.
	env := []string{"PLAYBOOK_INSTALL_STUCK_AFTER=1s"}
	s := startWithEnv(t, dir, env)
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", "playbooks")

	// ready makes an install on a new, empty bot, answered and ready to install.
	n := 0
	ready := func() (bot, path string, rev int64) {
		t.Helper()
		n++
		bot = s.admin("bot", "create", "--account", s.demo.AccountID, "--name", fmt.Sprintf("Shop %d", n))["bot_id"]
		r := s.post(s.demo.Token, "/api/playbook-installs", map[string]any{"bot_id": bot, "playbook_id": "abandoned_cart", "version": 3})
		require.Equal(t, 201, r.Status, "%s", r.Body)
		in := decodeInstall(t, r)
		path = "/api/playbook-installs/" + in.ID
		r = s.patch(s.demo.Token, path, map[string]any{"answers": map[string]any{"store_name": "Acme", "website": "https://acme.example"}, "expected_revision": in.Revision})
		require.Equal(t, 200, r.Status, "%s", r.Body)
		return bot, path, decodeInstall(t, r).Revision
	}
	// made lists what the bot holds of the kinds an install creates (live documents only:
	// a rollback archives a document, as the content family deletes none).
	made := func(bot string) map[string][]string {
		t.Helper()
		out := map[string][]string{}
		for _, kind := range []string{"labels", "fields", "reactions", "popups", "content", "collections"} {
			if got := names(t, s, s.demo.Token, "/api/bots/"+bot+"/"+kind); len(got) > 0 {
				out[kind] = got
			}
		}
		return out
	}

	// An uninterrupted install: its duration bounds the delays, its resources are the whole.
	_, path, rev := ready()
	began := time.Now()
	r := s.post(s.demo.Token, path+"/install", map[string]any{"expected_revision": rev})
	whole := time.Since(began)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	want := len(decodeInstall(t, r).Resources)
	require.NotZero(t, want)
	t.Logf("an uninterrupted install of %d resources took %s", want, whole)

	lo, hi := time.Duration(0), whole
	outcomes := map[string]int{}
	for attempt := 0; attempt < 8 && outcomes["rolled back"] == 0; attempt++ {
		delay := (lo + hi) / 2
		bot, path, rev := ready()
		sent, srv := make(chan struct{}), s
		go func() {
			// Not s.post: it fails the test on the transport error the kill causes.
			body, _ := json.Marshal(map[string]any{"expected_revision": rev})
			hr, _ := http.NewRequest(http.MethodPost, srv.base+path+"/install", bytes.NewReader(body))
			hr.Header.Set("Content-Type", "application/json")
			hr.Header.Set("Authorization", "Bearer "+s.demo.Token)
			close(sent)
			if res, err := srv.client.Do(hr); err == nil {
				res.Body.Close()
			}
		}()
		<-sent
		time.Sleep(delay)
		s.kill()
		s = startWithEnv(t, dir, env)

		// Past the stuck time and the recovery job's delay, without a read of the install.
		time.Sleep(7 * time.Second)
		firstRead := time.Now()
		r := s.get(s.demo.Token, path)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		in := decodeInstall(t, r)
		var outcome string
		switch in.Status {
		case "setup":
			// Killed before the install began: nothing of it exists.
			outcome, lo = "not begun", delay
			assert.Empty(t, in.Journal)
			assert.Empty(t, made(bot))
		case "installed":
			// Killed after it finished: all of it exists.
			outcome, hi = "whole", delay
			assert.Len(t, in.Resources, want)
			assert.Len(t, made(bot)["labels"], 2)
		case "failed":
			outcome = "rolled back"
			require.NotNil(t, in.Error)
			assert.Equal(t, "install_interrupted", in.Error.Code)
			assert.True(t, in.Error.At.Before(firstRead), "rolled back by the recovery job at %s, before the first read at %s", in.Error.At, firstRead)
			assert.NotEmpty(t, in.Journal, "it had begun")
			for _, e := range in.Journal {
				assert.Equal(t, "rolled_back", e.State, "%s %q", e.Kind, e.Name)
			}
			assert.Empty(t, made(bot), "nothing of the interrupted install is left")
			assert.Empty(t, in.Resources)
			// Nothing half-made stands in the way of installing again.
			r = s.post(s.demo.Token, path+"/install", map[string]any{"expected_revision": in.Revision})
			require.Equal(t, 200, r.Status, "%s", r.Body)
			again := decodeInstall(t, r)
			assert.Equal(t, "installed", again.Status)
			assert.Len(t, again.Resources, want)
		default:
			t.Fatalf("after a restart the install is %s: %s", in.Status, r.Body)
		}
		outcomes[outcome]++
		t.Logf("killed %s into the install: %s (journal of %d)", delay, outcome, len(in.Journal))
	}
	require.NotZero(t, outcomes["rolled back"], "no kill landed mid-install: %v", outcomes)
}
