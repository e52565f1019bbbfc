package tests

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// adminJSON runs an admin command that must succeed and decodes its JSON whatever its shape.
func (s *server) adminJSON(args ...string) map[string]any {
	s.t.Helper()
	out, code := s.adminRaw(args...)
	require.Equal(s.t, 0, code, "admin %v: %s", args, out)
	var m map[string]any
	require.NoError(s.t, json.Unmarshal(out, &m), "admin output: %s", out)
	return m
}

// The admin CLI sets an account's plan and rollout and a bot's paid broadcasts; a route that
// needs a plan feature the account lacks answers 402 once tokens in use see the change.
func TestEntitlements(t *testing.T) {
	t.Parallel()
	s := start(t)
	acct, bot := s.demo.AccountID, s.demo.BotID
	popups := "/api/bots/" + bot + "/popups"

	r := s.get(s.demo.Token, popups)
	require.Equal(t, 200, r.Status, "the standard plan has popups: %s", r.Body)

	out := s.adminJSON("account", "plan", "--account", acct, "--features", "analytics,broadcasts")
	assert.Equal(t, []any{"analytics", "broadcasts"}, out["plan"])
	assert.Equal(t, false, out["standard_plan"])

	// A new token sees the change at once; a token in use within the principal cache's 30 s.
	fresh := s.admin("pat", "create", "--account", acct, "--scopes", "*")["token"]
	r = s.get(fresh, popups)
	require.Equal(t, 402, r.Status, "%s", r.Body)
	assert.Equal(t, "feature_not_in_plan", r.Code(t))
	assert.Equal(t, "popups", r.JSON(t)["feature"])
	conforms(t, "GET", "/api/bots/{botID}/popups", popups, r)
	eventually(t, 35*time.Second, "the demo token sees the new plan", func() bool {
		return s.get(s.demo.Token, popups).Status == 402
	})

	// Entitlements come after tenancy: another account's bot is 404, not 402.
	other := s.newAccount("Other")
	r = s.get(fresh, "/api/bots/"+other.Bot+"/popups")
	assert.Equal(t, 404, r.Status, "%s", r.Body)

	out = s.adminJSON("account", "plan", "--account", acct, "--features", "standard")
	assert.Equal(t, true, out["standard_plan"])
	assert.Contains(t, out["plan"], "popups")
	fresh = s.admin("pat", "create", "--account", acct, "--scopes", "*")["token"]
	assert.Equal(t, 200, s.get(fresh, popups).Status)

	out = s.adminJSON("account", "rollout", "--account", acct, "--enable", "copilot,replay")
	assert.Equal(t, []any{"copilot", "replay"}, out["rollout"])
	out = s.adminJSON("account", "rollout", "--account", acct, "--disable", "replay")
	assert.Equal(t, []any{"copilot"}, out["rollout"])

	out = s.adminJSON("bot", "paid-broadcasts", "--bot", bot, "--enable")
	assert.Equal(t, true, out["paid_broadcasts"])
	out = s.adminJSON("bot", "paid-broadcasts", "--bot", bot, "--disable")
	assert.Equal(t, false, out["paid_broadcasts"])

	// Mistakes are usage errors (exit 2) naming what is wrong; an unknown account is exit 1.
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"account", "plan", "--account", acct, "--features", "copilot"}, 2, `unknown feature \"copilot\"`},
		{[]string{"account", "rollout", "--account", acct, "--enable", "popups"}, 2, `unknown feature \"popups\"`},
		{[]string{"account", "rollout", "--account", acct}, 2, "at least one of --enable, --disable"},
		{[]string{"account", "rollout", "--account", acct, "--enable", "replay", "--disable", "replay"}, 2, "both enabled and disabled"},
		{[]string{"bot", "paid-broadcasts", "--bot", bot}, 2, "exactly one of --enable, --disable"},
		{[]string{"bot", "paid-broadcasts", "--bot", other.Bot, "--enable"}, 1, "not found in account"},
		{[]string{"account", "plan", "--account", "acct_missing", "--features", "popups"}, 1, "account acct_missing not found"},
	} {
		raw, code := s.adminRaw(c.args...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, raw)
		assert.Contains(t, string(raw), c.want, "%v", c.args)
	}
}
