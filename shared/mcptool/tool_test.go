package mcptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/mcptool"
)

var (
	now   = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	mine  = ids.At("bot", now)                  // account A
	other = ids.At("bot", now.Add(time.Second)) // account B
)

// bots knows which bot is whose.
type bots struct{}

func (bots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account == "acct_A" && bot == mine {
		return "the loaded bot", nil
	}
	return nil, httpapi.NotFound("bot")
}

// publisher records audit events.
type publisher struct {
	mu     sync.Mutex
	events []audit.Event
}

func (p *publisher) Publish(_ context.Context, e audit.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
	return nil
}

func (p *publisher) published() []audit.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]audit.Event(nil), p.events...)
}

func deps(pub *publisher) mcptool.Deps {
	return mcptool.Deps{Bots: bots{}, Audit: pub, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}
}

// pat is a PAT of account A with scopes and rights on every bot.
func pat(scopes auth.Scopes, rights ...auth.Right) *auth.Principal {
	return &auth.Principal{AccountID: "acct_A", UserID: "usr_1", TokenID: "pat_1", Kind: auth.KindPAT,
		Scopes: scopes, Role: auth.RoleMember, Rights: auth.RightsOf(rights...)}
}

func as(p *auth.Principal) context.Context { return auth.NewContext(context.Background(), p) }

type getArgs struct {
	mcptool.Bot
	ThingID string `json:"thing_id" jsonschema:"the thing"`
	Verbose bool   `json:"verbose,omitempty"`
}

// Validate is run after decoding, as a request body's is.
func (a *getArgs) Validate() error {
	var p httpapi.Problems
	if a.ThingID == "" {
		p.Add("thing_id", "is required")
	}
	return p.Err()
}

// getThing answers what it was given and the bot the kernel loaded.
var getThing = mcptool.New("get_thing", "Get one thing.", httpapi.Need("things:read", auth.RightDialogs),
	func(ctx context.Context, in getArgs) (any, error) {
		return map[string]any{"bot": in.BotID, "thing": in.ThingID, "loaded": mcptool.LoadedBot(ctx), "caller": mcptool.Caller(ctx).TokenID}, nil
	})

func call(t *testing.T, tool mcptool.Tool, p *auth.Principal, args string) mcptool.Result {
	t.Helper()
	return tool.Call(as(p), deps(&publisher{}), json.RawMessage(args))
}

func TestCallAnswersWithTheLoadedBot(t *testing.T) {
	t.Parallel()
	res := call(t, getThing, pat(auth.Scopes{"things:read"}, auth.RightDialogs), `{"bot_id":"`+mine+`","thing_id":"th_1"}`)
	require.Nil(t, res.Err)
	assert.Equal(t, map[string]any{"bot": mine, "thing": "th_1", "loaded": "the loaded bot", "caller": "pat_1"}, res.Value)
	assert.Equal(t, http.StatusOK, res.Status())
	assert.True(t, getThing.BotScoped)
}

// Arguments are as strict as request bodies: an unknown one is named, with the ones the tool
// takes; a wrong type names its argument; a missing bot is a validation error.
func TestStrictArguments(t *testing.T) {
	t.Parallel()
	p := pat(auth.Scopes{"things:read"}, auth.RightDialogs)
	cases := []struct {
		name, args, code, field, detail string
	}{
		{"unknown argument", `{"bot_id":"` + mine + `","thing_id":"th_1","colour":"red"}`, "unknown_field", "colour",
			`unknown argument "colour": get_thing takes bot_id, thing_id, verbose`},
		{"wrong case", `{"Bot_ID":"` + mine + `","thing_id":"th_1"}`, "unknown_field", "Bot_ID", ""},
		{"wrong type", `{"bot_id":"` + mine + `","thing_id":7}`, "invalid_body", "thing_id", ""},
		{"given twice", `{"bot_id":"` + mine + `","thing_id":"a","thing_id":"b"}`, "duplicate_field", "thing_id", ""},
		{"not an object", `["bot_id"]`, "invalid_body", "", ""},
		{"missing bot", `{"thing_id":"th_1"}`, "validation_failed", "", "bot_id: is required: the id of the bot to act on"},
		{"own validation", `{"bot_id":"` + mine + `"}`, "validation_failed", "", "thing_id: is required"},
		{"no arguments", ``, "validation_failed", "", ""},
	}
	for _, c := range cases {
		res := call(t, getThing, p, c.args)
		require.NotNil(t, res.Err, c.name)
		assert.Equal(t, http.StatusBadRequest, res.Status(), c.name)
		assert.Equal(t, c.code, res.Err.Code, c.name)
		if c.field != "" {
			assert.Equal(t, c.field, res.Err.Extensions["field"], c.name)
		}
		if c.detail != "" {
			assert.Equal(t, c.detail, res.Err.Detail, c.name)
		}
	}
}

// The access checks are the routes': the token's scope (403), the bot's tenancy (404, the
// same answer as for a bot that does not exist), the user's right on the bot (403).
func TestAccess(t *testing.T) {
	t.Parallel()
	args := func(bot string) string { return `{"bot_id":"` + bot + `","thing_id":"th_1"}` }
	never := ids.At("bot", now.Add(time.Hour))

	res := call(t, getThing, pat(auth.Scopes{"other:read"}, auth.RightDialogs), args(mine))
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusForbidden, res.Status())
	assert.Equal(t, "insufficient_scope", res.Err.Code)
	assert.Equal(t, auth.Scope("things:read"), res.Err.Extensions["required_scope"])

	full := pat(auth.Scopes{auth.Full}, auth.RightDialogs)
	theirs, missing := call(t, getThing, full, args(other)), call(t, getThing, full, args(never))
	require.NotNil(t, theirs.Err)
	assert.Equal(t, http.StatusNotFound, theirs.Status())
	assert.Equal(t, missing.Err.Problem(""), theirs.Err.Problem(""), "another account's bot is answered as one that does not exist")

	res = call(t, getThing, pat(auth.Scopes{auth.Full}, auth.RightReactions), args(mine))
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusForbidden, res.Status())
	assert.Equal(t, "missing_right", res.Err.Code)

	// Without the right on another account's bot, still not found: a 403 would confirm it exists.
	res = call(t, getThing, pat(auth.Scopes{auth.Full}), args(other))
	assert.Equal(t, http.StatusNotFound, res.Status())
}

// A tool behind a rollout feature fails closed while the feature is not enabled for the
// account, and one behind a plan feature answers 402 without it; the handler never runs.
func TestEntitlements(t *testing.T) {
	t.Parallel()
	ran := false
	copilot := mcptool.New("propose", "Propose a change.", httpapi.Need("things:write").InRollout(auth.RolloutCopilot),
		func(context.Context, struct{}) (any, error) { ran = true; return map[string]any{}, nil })
	p := pat(auth.Scopes{auth.Full})

	res := call(t, copilot, p, `{}`)
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusForbidden, res.Status())
	assert.Equal(t, "feature_not_enabled", res.Err.Code)
	assert.False(t, ran)

	p.Entitlements.Rollout = []auth.Feature{auth.RolloutCopilot}
	res = call(t, copilot, p, `{}`)
	assert.Nil(t, res.Err)
	assert.True(t, ran)

	paid := mcptool.New("send", "Send.", httpapi.Need("things:write").InPlan(auth.FeatureBroadcasts),
		func(context.Context, struct{}) (any, error) { return map[string]any{}, nil })
	p.Entitlements.Plan = []auth.Feature{auth.FeatureAnalytics}
	res = call(t, paid, p, `{}`)
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusPaymentRequired, res.Status())
	assert.Equal(t, "feature_not_in_plan", res.Err.Code)
}

// Every call of a mutating tool is one audit event with its outcome, as a POST is; calls of
// a read tool leave none. A handler's panic is a 500, audited too.
func TestAuditOfMutatingTools(t *testing.T) {
	t.Parallel()
	type startArgs struct {
		mcptool.Bot
		Fail bool `json:"fail,omitempty"`
	}
	start := mcptool.New("start_thing", "Start a thing.", httpapi.Need("things:write", auth.RightReactions),
		func(_ context.Context, in startArgs) (any, error) {
			if in.Fail {
				panic("secret panic text")
			}
			return map[string]any{"status": "started"}, nil
		}).Mutating()
	pub := &publisher{}
	d := deps(pub)
	writer := pat(auth.Scopes{"things:write"}, auth.RightReactions)
	reader := pat(auth.Scopes{"things:read"}, auth.RightReactions, auth.RightDialogs)

	calls := []struct {
		ctx    context.Context
		args   string
		status int
		bot    string
	}{
		{as(writer), `{"bot_id":"` + mine + `"}`, 200, mine},
		{as(reader), `{"bot_id":"` + mine + `"}`, 403, mine},
		{as(writer), `{"bot_id":"` + other + `"}`, 404, other},
		{as(writer), `{"bot_id":"` + mine + `","bogus":1}`, 400, ""},
		{as(writer), `{"bot_id":"mbp_pasted_token"}`, 404, ""},
		{as(writer), `{"bot_id":"` + mine + `","fail":true}`, 500, mine},
	}
	for i, c := range calls {
		res := start.Call(c.ctx, d, json.RawMessage(c.args))
		assert.Equal(t, c.status, res.Status(), "call %d", i)
	}
	events := pub.published()
	require.Len(t, events, len(calls), "one event per call, whatever its outcome")
	for i, e := range events {
		assert.Equal(t, calls[i].status, e.Status, "call %d", i)
		assert.Equal(t, calls[i].bot, e.BotID, "call %d", i)
		assert.Equal(t, "POST", e.Method)
		assert.Equal(t, "POST /mcp/tools/start_thing", e.Route)
		assert.Equal(t, "pat_1", e.TokenID)
		assert.Equal(t, "acct_A", e.AccountID)
		assert.Equal(t, now, e.Time)
		assert.NotContains(t, e.BotID, "mbp_")
	}

	pub2 := &publisher{}
	res := getThing.Call(as(pat(auth.Scopes{"things:read"}, auth.RightDialogs)), deps(pub2), json.RawMessage(`{"bot_id":"`+mine+`","thing_id":"x"}`))
	assert.Nil(t, res.Err)
	assert.Empty(t, pub2.published(), "reads are not audited")
}

// A handler's errors reach the caller as the route would answer them: its own kind and
// code, or an opaque 500 for anything else.
func TestHandlerErrors(t *testing.T) {
	t.Parallel()
	fails := func(err error) mcptool.Tool {
		return mcptool.New("fails", "Fails.", httpapi.Need("things:read"), func(context.Context, struct{}) (any, error) { return nil, err })
	}
	p := pat(auth.Scopes{auth.Full})
	res := call(t, fails(httpapi.StaleRevision(4)), p, `{}`)
	assert.Equal(t, http.StatusConflict, res.Status())
	assert.Equal(t, int64(4), res.Err.Extensions["current_revision"])

	res = call(t, fails(errors.New("dial db: password=hunter2")), p, `{}`)
	assert.Equal(t, http.StatusInternalServerError, res.Status())
	assert.NotContains(t, res.Err.Detail, "hunter2")
}

func TestDeclarationsTheKernelCannotEnforce(t *testing.T) {
	t.Parallel()
	h := func(context.Context, struct{}) (any, error) { return nil, nil }
	assert.Panics(t, func() { mcptool.New("Get-Thing", "x", httpapi.Need("a:read"), h) }, "name")
	assert.Panics(t, func() { mcptool.New("get_thing", " ", httpapi.Need("a:read"), h) }, "description")
	assert.Panics(t, func() { mcptool.New("get_thing", "x", httpapi.Public(), h) }, "public")
	assert.Panics(t, func() { mcptool.New("get_thing", "x", httpapi.Need(""), h) }, "no scope")
	assert.Panics(t, func() { mcptool.New("get_thing", "x", httpapi.Need("a:read", auth.RightDialogs), h) }, "rights without a bot")
	assert.Panics(t, func() {
		mcptool.New("get_thing", "x", httpapi.Need("a:read"), func(context.Context, string) (any, error) { return nil, nil })
	}, "arguments that are no object")
}

func TestSummaryStatesTheAccess(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "Get one thing.\n\nScope: `things:read`. Bot rights: `dialogs`.", getThing.Summary())
	tool := mcptool.New("start", "Start.", httpapi.Need("a:write", auth.RightReactions).InPlan(auth.FeatureBroadcasts).AndScope("b:write"),
		func(context.Context, mcptool.Bot) (any, error) { return nil, nil }).Mutating()
	assert.Equal(t, "Start.\n\nScope: `a:write` and `b:write`. Bot rights: `reactions`. Plan feature: `broadcasts`. Audited.", tool.Summary())
}
