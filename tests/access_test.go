package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
)

// Every form of 401: nothing, another scheme, a malformed token, a well-formed unknown one,
// an expired one and a revoked one. None reaches a handler, none is audited.
func TestUnauthenticated401(t *testing.T) {
	t.Parallel()
	s := start(t)
	path := "/api/bots/" + s.demo.BotID
	revocable := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")
	expired := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read", "--expires-in", "1s")["token"]
	require.Equal(t, http.StatusOK, s.get(revocable["token"], path).Status, "works before revocation")
	require.Equal(t, http.StatusNoContent, s.del(s.demo.Token, "/api/personal-access-tokens/"+revocable["token_id"]).Status)
	time.Sleep(1100 * time.Millisecond) // let the 1-second token expire

	tampered := []byte(s.demo.Token)
	tampered[10] ^= 1 // one flipped bit breaks the checksum
	cases := []struct {
		name, header, code string
	}{
		{"missing", "", "missing_credentials"},
		{"basic scheme", "Basic " + s.demo.Token, "invalid_token"},
		{"bearer without token", "Bearer", "invalid_token"},
		{"garbage", "Bearer hello", "invalid_token"},
		{"bad checksum", "Bearer " + string(tampered), "invalid_token"},
		{"unknown prefix", "Bearer xyz_" + s.demo.Token[4:], "invalid_token"},
		{"never issued PAT", "Bearer " + auth.NewToken(auth.KindPAT), "invalid_token"},
		{"never issued bot token", "Bearer " + auth.NewToken(auth.KindBot), "invalid_token"},
		{"PAT secret under the bot prefix", "Bearer mbb_" + s.demo.Token[4:], "invalid_token"},
		{"revoked", "Bearer " + revocable["token"], "invalid_token"},
		{"expired", "Bearer " + expired, "token_expired"},
	}
	for _, c := range cases {
		r := s.do(req{Method: http.MethodGet, Path: path, Headers: map[string]string{"Authorization": c.header}})
		assert.Equal(t, http.StatusUnauthorized, r.Status, c.name)
		assert.Equal(t, c.code, r.Code(t), c.name)
		assert.True(t, strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer"), c.name)
		// A mutation with a bad token is refused the same way and leaves no audit event.
		r = s.do(req{Method: http.MethodPatch, Path: path, Body: map[string]any{"expected_revision": 1, "name": "x"},
			Headers: map[string]string{"Authorization": c.header, "X-Request-Id": "unauth-" + strings.ReplaceAll(c.name, " ", "-")}})
		assert.Equal(t, http.StatusUnauthorized, r.Status, c.name)
	}
	for _, e := range auditEvents(t, s, s.demo.Token, "") {
		assert.False(t, strings.HasPrefix(e["request_id"].(string), "unauth-"), "401 produced an audit event: %v", e)
	}
	// The bot is unchanged.
	assert.Equal(t, "Demo bot", s.get(s.demo.Token, path).JSON(t)["name"])
}

// 403: a token without the route's scope, a user without the bot right, a bot token on
// account-level and PAT-only routes, a member on the owner-only audit trail.
func TestForbidden403(t *testing.T) {
	t.Parallel()
	s := start(t)
	bot := "/api/bots/" + s.demo.BotID
	readOnly := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "bots:read")["token"]
	noRights := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "")["user_id"]
	noRightsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", noRights, "--scopes", "*")["token"]
	reactionsOnly := s.admin("user", "create", "--account", s.demo.AccountID, "--rights", "reactions")["user_id"]
	reactionsTok := s.admin("pat", "create", "--account", s.demo.AccountID, "--user", reactionsOnly, "--scopes", "bots:*,audit:read")["token"]
	botTok := s.post(s.demo.Token, bot+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)

	cases := []struct {
		name  string
		token string
		req   req
		code  string
	}{
		{"scope: write with read-only token", readOnly, req{Method: "POST", Path: "/api/bots", Body: map[string]any{"name": "b"}}, "insufficient_scope"},
		{"scope: patch with read-only token", readOnly, req{Method: "PATCH", Path: bot, Body: map[string]any{"expected_revision": 1}}, "insufficient_scope"},
		{"scope: PAT management needs *", reactionsTok, req{Method: "GET", Path: "/api/personal-access-tokens"}, "insufficient_scope"},
		{"scope: audit needs audit:read", readOnly, req{Method: "GET", Path: "/api/audit-events"}, "insufficient_scope"},
		{"right: patch without reactions", noRightsTok, req{Method: "PATCH", Path: bot, Body: map[string]any{"expected_revision": 1, "name": "x"}}, "missing_right"},
		{"right: delete without reactions", noRightsTok, req{Method: "DELETE", Path: bot}, "missing_right"},
		{"right: bot token needs all rights", reactionsTok, req{Method: "POST", Path: bot + "/api-tokens", Body: map[string]any{"name": "x"}}, "missing_right"},
		{"bot token: account-level list", botTok, req{Method: "GET", Path: "/api/bots"}, "insufficient_scope"},
		{"bot token: create bot", botTok, req{Method: "POST", Path: "/api/bots", Body: map[string]any{"name": "x"}}, "insufficient_scope"},
		{"bot token: PAT routes", botTok, req{Method: "GET", Path: "/api/personal-access-tokens"}, "insufficient_scope"},
		{"bot token: mint more tokens", botTok, req{Method: "POST", Path: bot + "/api-tokens", Body: map[string]any{"name": "x"}}, "insufficient_scope"},
		{"bot token: delete its bot", botTok, req{Method: "DELETE", Path: bot}, "insufficient_scope"},
		{"bot token: audit trail", botTok, req{Method: "GET", Path: "/api/audit-events"}, "insufficient_scope"},
		{"member: audit trail is owner-only", reactionsTok, req{Method: "GET", Path: "/api/audit-events"}, "owner_required"},
	}
	for _, c := range cases {
		c.req.Token = c.token
		r := s.do(c.req)
		assert.Equal(t, http.StatusForbidden, r.Status, "%s: %s", c.name, r.Body)
		assert.Equal(t, c.code, r.Code(t), c.name)
	}
	// What those tokens may do, they can.
	assert.Equal(t, http.StatusOK, s.get(readOnly, bot).Status)
	assert.Equal(t, http.StatusOK, s.get(noRightsTok, bot).Status, "reading a bot needs no right")
	assert.Equal(t, http.StatusOK, s.get(botTok, bot).Status, "a bot token reads its own bot")
	r := s.patch(botTok, bot, map[string]any{"expected_revision": 1, "name": "Renamed by bot token"})
	assert.Equal(t, http.StatusOK, r.Status, "a bot token edits its own bot: %s", r.Body)
}

// 404: nothing outside the caller's account or the bot token's bot exists, for any verb,
// and the answer never differs from that for a bot that does not exist at all.
func TestNotFound404(t *testing.T) {
	t.Parallel()
	s := start(t)
	other := s.newAccount("Other")
	mine := "/api/bots/" + s.demo.BotID
	theirs := "/api/bots/" + other.Bot
	secondBot := s.post(s.demo.Token, "/api/bots", map[string]any{"name": "Second"}).JSON(t)["id"].(string)
	botTok := s.post(s.demo.Token, mine+"/api-tokens", map[string]any{"name": "ci"}).JSON(t)["token"].(string)
	theirTok := s.post(other.Token, theirs+"/api-tokens", map[string]any{"name": "theirs"}).JSON(t)
	theirTokID := theirTok["id"].(string)
	theirPAT := s.post(other.Token, "/api/personal-access-tokens", map[string]any{"name": "p", "scopes": []string{"bots:read"}, "expires_in_days": 1}).JSON(t)["id"].(string)

	cases := []struct {
		name  string
		token string
		req   req
	}{
		{"get other account's bot", s.demo.Token, req{Method: "GET", Path: theirs}},
		{"patch other account's bot", s.demo.Token, req{Method: "PATCH", Path: theirs, Body: map[string]any{"expected_revision": 1, "name": "pwned"}}},
		{"delete other account's bot", s.demo.Token, req{Method: "DELETE", Path: theirs}},
		{"list other account's bot tokens", s.demo.Token, req{Method: "GET", Path: theirs + "/api-tokens"}},
		{"mint token on other account's bot", s.demo.Token, req{Method: "POST", Path: theirs + "/api-tokens", Body: map[string]any{"name": "x"}}},
		{"revoke other account's bot token via its bot", s.demo.Token, req{Method: "DELETE", Path: theirs + "/api-tokens/" + theirTokID}},
		{"revoke other account's bot token via my bot", s.demo.Token, req{Method: "DELETE", Path: mine + "/api-tokens/" + theirTokID}},
		{"revoke other account's PAT", s.demo.Token, req{Method: "DELETE", Path: "/api/personal-access-tokens/" + theirPAT}},
		{"bot token on another bot of its account", botTok, req{Method: "GET", Path: "/api/bots/" + secondBot}},
		{"bot token on another account's bot", botTok, req{Method: "GET", Path: theirs}},
		{"well-formed id that never existed", s.demo.Token, req{Method: "GET", Path: "/api/bots/bot_0000000000000000000000000"}},
		{"malformed id", s.demo.Token, req{Method: "GET", Path: "/api/bots/nope"}},
		{"unknown bot token id", s.demo.Token, req{Method: "DELETE", Path: mine + "/api-tokens/btk_00000000000000000000000000"}},
		{"unknown PAT id", s.demo.Token, req{Method: "DELETE", Path: "/api/personal-access-tokens/pat_00000000000000000000000000"}},
		{"unknown route", s.demo.Token, req{Method: "GET", Path: "/api/nothing-here"}},
	}
	for _, c := range cases {
		c.req.Token = c.token
		r := s.do(c.req)
		assert.Equal(t, http.StatusNotFound, r.Status, "%s: %s", c.name, r.Body)
		assert.Equal(t, "not_found", r.Code(t), c.name)
		assert.NotContains(t, string(r.Body), other.ID, c.name)
	}
	// The other account's things are untouched and still work for them.
	assert.Equal(t, "Other bot", s.get(other.Token, theirs).JSON(t)["name"])
	assert.Len(t, s.get(other.Token, theirs+"/api-tokens").JSON(t)["data"], 1)
}
