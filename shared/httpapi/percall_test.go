package httpapi_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// A PerCall route (the MCP endpoint) is authenticated by the kernel like any other, refuses
// bot tokens (it has no {botID}), and leaves scope checks and audit to its handler: the
// kernel publishes no event for it whatever its method.
func TestPerCallRoute(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	var caller *auth.Principal
	k.mux.Handle("POST /mcp", httpapi.PerCall(), func(w http.ResponseWriter, r *http.Request) error {
		caller = httpapi.Caller(r)
		return httpapi.WriteJSON(w, http.StatusOK, map[string]any{})
	})

	res := k.do(t, http.MethodPost, "/mcp", "")
	assert.Equal(t, http.StatusUnauthorized, res.Code)
	assert.Equal(t, "missing_credentials", res.problem["code"])

	res = k.do(t, http.MethodPost, "/mcp", "bot")
	assert.Equal(t, http.StatusForbidden, res.Code)
	assert.Equal(t, "insufficient_scope", res.problem["code"])
	assert.NotContains(t, res.problem, "required_scope", "the route names no scope of its own")

	// Any PAT reaches the handler: what it may do is decided per call.
	res = k.do(t, http.MethodPost, "/mcp", "reader")
	require.Equal(t, http.StatusOK, res.Code, res.Body.String())
	require.NotNil(t, caller)
	assert.Equal(t, "pat_reader", caller.TokenID)
	assert.Empty(t, k.audit.published(), "the handler audits each mutating call; the kernel audits nothing")

	var rt httpapi.Route
	for _, r := range k.mux.Routes() {
		if r.Pattern() == "POST /mcp" {
			rt = r
		}
	}
	assert.True(t, rt.Access.PerCall)
	assert.False(t, rt.Mutating())
	assert.False(t, rt.BotScoped)
}

// Authorize is the route check, callable for a call that is not a route's request: the
// same answers in the same order, and the bot it loaded once the bot is known to be the
// caller's.
func TestAuthorize(t *testing.T) {
	t.Parallel()
	bots := &botLoader{}
	ctx := context.Background()
	member := principals["member"]
	write := httpapi.Need("bots:write", auth.RightReactions)

	loaded, err := httpapi.Authorize(ctx, bots, write, member, true, botA)
	require.NoError(t, err)
	assert.Equal(t, "loaded "+botA, loaded)

	loaded, err = httpapi.Authorize(ctx, bots, write, member, true, botC)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "another account's bot does not exist")
	assert.Nil(t, loaded)

	loaded, err = httpapi.Authorize(ctx, bots, write, member, true, botB)
	assert.Equal(t, "missing_right", httpapi.AsError(err).Code, "no right on this bot")
	assert.Equal(t, "loaded "+botB, loaded, "the bot is the caller's even though the call is refused")

	calls := len(bots.called())
	_, err = httpapi.Authorize(ctx, bots, httpapi.Need("bots:write"), principals["reader"], true, botC)
	assert.Equal(t, "insufficient_scope", httpapi.AsError(err).Code, "the scope is the token's: checked before the bot")
	assert.Len(t, bots.called(), calls, "no bot lookup for a token that lacks the scope")

	_, err = httpapi.Authorize(ctx, bots, httpapi.Need("things:read"), principals["bot"], true, botB)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err), "a bot token sees no other bot")

	owner := principals["owner"] // enabled for no rollout feature
	_, err = httpapi.Authorize(ctx, bots, httpapi.Need("things:read").InRollout(auth.RolloutCopilot), owner, false, "")
	assert.Equal(t, "feature_not_enabled", httpapi.AsError(err).Code, "an unassigned rollout feature fails closed")
}

// PublishAudit writes what the mux writes for a mutating route, and keeps only a
// well-formed bot id.
func TestPublishAudit(t *testing.T) {
	t.Parallel()
	pub := &publisher{}
	start := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	op := httpapi.Audited{Principal: principals["member"], Method: "POST", Route: "POST /mcp/tools/start_broadcast",
		Bot: botA, Status: 404, Start: start, RequestID: "req-1"}
	httpapi.PublishAudit(context.Background(), pub, slog.New(slog.DiscardHandler), op)
	op.Bot = "mbp_pasted"
	httpapi.PublishAudit(context.Background(), pub, slog.New(slog.DiscardHandler), op)

	events := pub.published()
	require.Len(t, events, 2)
	e := events[0]
	assert.Equal(t, "acct_A", e.AccountID)
	assert.Equal(t, "usr_member", e.ActorUserID)
	assert.Equal(t, "pat_member", e.TokenID)
	assert.Equal(t, "pat", e.TokenKind)
	assert.Equal(t, "POST /mcp/tools/start_broadcast", e.Route)
	assert.Equal(t, 404, e.Status)
	assert.Equal(t, botA, e.BotID)
	assert.Equal(t, "req-1", e.RequestID)
	assert.Equal(t, start.Truncate(time.Millisecond), e.Time)
	assert.NoError(t, e.Validate())
	assert.Empty(t, events[1].BotID, "a bot id that is not one is not recorded")
}
