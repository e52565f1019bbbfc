package broadcasts

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// toolBots knows one bot, of account A.
type toolBots struct{}

const toolBot = "bot_1htw0000000000000000000000"

func (toolBots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account == "acct_A" && bot == toolBot {
		return "the bot", nil
	}
	return nil, httpapi.NotFound("bot")
}

type toolAudit struct{ events []audit.Event }

func (a *toolAudit) Publish(_ context.Context, e audit.Event) error {
	a.events = append(a.events, e)
	return nil
}

// In a process that cannot send broadcasts the tools exist, with their routes' access: the
// access checks come first, then 503 broadcasts_unavailable saying why; a refused change is
// still audited. The arguments are checked as the routes check theirs.
func TestUnavailableTools(t *testing.T) {
	t.Parallel()
	pub := &toolAudit{}
	d := mcptool.Deps{Bots: toolBots{}, Audit: pub, Log: slog.New(slog.DiscardHandler), Now: time.Now}
	tools := map[string]mcptool.Tool{}
	for _, tool := range UnavailableTools("no queue here") {
		tools[tool.Name] = tool
	}
	require.Len(t, tools, 7)
	as := func(scopes auth.Scopes, rights ...auth.Right) context.Context {
		return auth.NewContext(context.Background(), &auth.Principal{AccountID: "acct_A", UserID: "usr_1", TokenID: "pat_1",
			Kind: auth.KindPAT, Scopes: scopes, Role: auth.RoleMember, Rights: auth.RightsOf(rights...)})
	}
	full := as(auth.Scopes{auth.Full}, auth.RightReactions)
	one := json.RawMessage(`{"bot_id":"` + toolBot + `","broadcast_id":"lbc_1"}`)

	res := tools["pause_broadcast"].Call(full, d, one)
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusServiceUnavailable, res.Status())
	assert.Equal(t, "broadcasts_unavailable", res.Err.Code)
	assert.Contains(t, res.Err.Detail, "no queue here")
	require.Len(t, pub.events, 1, "a refused change is audited")
	assert.Equal(t, "POST /mcp/tools/pause_broadcast", pub.events[0].Route)
	assert.Equal(t, http.StatusServiceUnavailable, pub.events[0].Status)

	res = tools["get_broadcast"].Call(as(auth.Scopes{"bots:read"}, auth.RightReactions), d, one)
	require.NotNil(t, res.Err)
	assert.Equal(t, "insufficient_scope", res.Err.Code, "access first")
	res = tools["get_broadcast"].Call(as(auth.Scopes{auth.Full}, auth.RightDialogs), d, one)
	require.NotNil(t, res.Err)
	assert.Equal(t, "missing_right", res.Err.Code)
	assert.Len(t, pub.events, 1, "reads are not audited")

	for args, field := range map[string]string{
		`{"bot_id":"` + toolBot + `"}`:                                          "reaction_id",
		`{"bot_id":"` + toolBot + `","reaction_id":"rct_1","labels":["a","a"]}`: "labels[1]",
		`{"bot_id":"` + toolBot + `","reaction_id":"rct_1","labels":[""]}`:      "labels[0]",
	} {
		res := tools["start_broadcast"].Call(full, d, json.RawMessage(args))
		require.NotNil(t, res.Err, args)
		assert.Equal(t, "validation_failed", res.Err.Code, args)
		assert.Contains(t, jsonOf(t, res.Err.Extensions["errors"]), `"field":"`+field+`"`, args)
	}
	res = tools["get_content_broadcast_report"].Call(full, d, json.RawMessage(`{"bot_id":"`+toolBot+`"}`))
	require.NotNil(t, res.Err)
	assert.Equal(t, "validation_failed", res.Err.Code)
	res = tools["list_content_broadcasts"].Call(full, d, json.RawMessage(`{"bot_id":"`+toolBot+`","archived":"yes"}`))
	require.NotNil(t, res.Err)
	assert.Equal(t, "invalid_body", res.Err.Code)
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
