package wiring_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/broadcasts"
	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/functions/reactions"
	reactionswiring "github.com/botplatform/api/functions/reactions/wiring"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/mcptool"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// captured records what the Lambda publishes and sends, as EventBridge and SQS would take it:
// neither is a store operation of the mcp Lambda.
type captured struct {
	queuetest.Sender
	mu     sync.Mutex
	events []audit.Event
}

func (c *captured) Publish(_ context.Context, e audit.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
	return nil
}

// jobs are the kinds of the jobs the sent messages start.
func (c *captured) jobs(t *testing.T) []string {
	var out []string
	for _, st := range queuetest.Decode[jobs.State](t, c.Sent()) {
		out = append(out, st.Kind)
	}
	return out
}

// The broadcast tools, as the MCP Lambda composes them: without a key to open channel
// credentials (the Lambda is granted the credentials key only under the CRM encryption
// context, for the CRM read tools: TestCRMToolsInTheLambda), with the jobs queue. Each
// answers what its REST route answers (the broadcasts family's, with a key); start, resume
// and cancel start the send job through the outbox; pause, resume and cancel act on legacy
// broadcasts only; mutations are audited; the store operations stay within the mcp row of
// infra/access (TestMain).
func TestBroadcastToolsInTheLambda(t *testing.T) {
	t.Parallel()
	out := &captured{}
	env := familytest.Env(t, family.Deps{Tenancy: bots.Tenancy, Audit: out, Queue: out})
	require.Nil(t, env.Secrets, "the Lambda opens no channel credentials")
	tools := lambdaTools(env)

	// Setup, not the Lambda's doing: an account, a bot, a published reaction, a label and a
	// subscriber having it.
	setup := sqlitetest.Unrecorded(t.Context())
	acct, owner, err := env.Auth.CreateAccount(setup, "Acme")
	require.NoError(t, err)
	bot, err := bots.NewService(env.Store, env.Auth, env.Now).Create(setup, acct.ID, "Shop", nil)
	require.NoError(t, err)
	var content reactions.Content
	require.NoError(t, json.Unmarshal([]byte(`{"name":"Promo","trigger":{"type":"api"},"steps":[{"id":"s","type":"send_text","text":"Sale"}]}`), &content))
	rxs := reactionswiring.Service(env)
	rx, err := rxs.Create(setup, bot.ID, content)
	require.NoError(t, err)
	_, err = rxs.Publish(setup, bot.ID, rx.ID, rx.Revision)
	require.NoError(t, err)
	subs := subscribers.NewService(env.Store, env.Now, env.Jobs)
	vip, err := subs.CreateLabel(setup, bot.ID, "vip")
	require.NoError(t, err)
	_, _, err = subs.Upsert(setup, bot.ID, "telegram", "42", subscribers.Changes{AddLabels: []string{vip.ID}})
	require.NoError(t, err)

	p := &auth.Principal{AccountID: acct.ID, UserID: owner.ID, TokenID: "pat_x", Kind: auth.KindPAT, Scopes: auth.Scopes{auth.Full}, Role: auth.RoleOwner}
	ctx := auth.NewContext(t.Context(), p)
	d := mcptool.Deps{Bots: env.Tenancy, Audit: env.Audit, Log: env.Log, Now: env.Now}
	call := func(tool, args string) mcptool.Result {
		t.Helper()
		tl, ok := tools[tool]
		require.True(t, ok, "the Lambda serves %s", tool)
		return tl.Call(ctx, d, json.RawMessage(args))
	}
	value := func(res mcptool.Result) string {
		t.Helper()
		require.Nil(t, res.Err, "%v", res.Err)
		b, err := json.Marshal(res.Value)
		require.NoError(t, err)
		return string(b)
	}

	// The REST routes, served by the broadcasts family with a key (as the broadcasts Lambda:
	// its store operations are recorded as that Lambda's).
	key, err := keyfile.New(bytes.Repeat([]byte{3}, 32))
	require.NoError(t, err)
	rest := familytest.Env(t, family.Deps{Store: env.Store, Tenancy: bots.Tenancy, Secrets: key})
	mux, err := family.Compose(rest, families.All()...).Mux(func(*http.Request) (*auth.Principal, error) { return p, nil })
	require.NoError(t, err)
	do := func(method, path, body string, want int) string {
		t.Helper()
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r := httptest.NewRequestWithContext(sqlitetest.As(context.Background(), "broadcasts"), method, path, rd)
		if body != "" {
			r.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		require.Equal(t, want, rec.Code, "%s %s: %s", method, path, rec.Body)
		return rec.Body.String()
	}
	base := "/api/bots/" + bot.ID
	botArg := `"bot_id":"` + bot.ID + `"`

	// start_broadcast: the route's checks, then the broadcast, its send job queued.
	res := call("start_broadcast", `{`+botArg+`,"reaction_id":"`+rx.ID+`","paid":true}`)
	require.NotNil(t, res.Err)
	assert.Equal(t, "paid_broadcasts_not_enabled", res.Err.Code)
	assert.Equal(t, http.StatusForbidden, res.Status())
	res = call("start_broadcast", `{`+botArg+`,"reaction_id":"`+rx.ID+`","labels":["lbl_nope"]}`)
	require.NotNil(t, res.Err)
	assert.Equal(t, "unknown_label", res.Err.Code)
	require.Empty(t, out.jobs(t), "a refused start starts nothing")
	started := value(call("start_broadcast", `{`+botArg+`,"reaction_id":"`+rx.ID+`","labels":["`+vip.ID+`"]}`))
	var lbc broadcasts.LegacyBroadcast
	require.NoError(t, json.Unmarshal([]byte(started), &lbc))
	assert.Equal(t, "reaction_broadcast", lbc.Type)
	assert.Equal(t, []string{vip.ID}, lbc.Labels)
	assert.Equal(t, broadcasts.Scheduled, lbc.Status)
	assert.Equal(t, []string{broadcasts.JobSend}, out.jobs(t), "the send job is queued after the commit")

	// get_broadcast answers the shared GET, for the legacy broadcast.
	assert.JSONEq(t, do("GET", base+"/broadcasts/"+lbc.ID, "", 200), value(call("get_broadcast", `{`+botArg+`,"broadcast_id":"`+lbc.ID+`"}`)))

	// pause, resume, cancel: the legacy answers; resume and cancel start a new run.
	one := `{` + botArg + `,"broadcast_id":"` + lbc.ID + `"}`
	assert.JSONEq(t, `{"status":"pausing"}`, value(call("pause_broadcast", one)))
	assert.Equal(t, "paused", mustJSON(t, do("GET", base+"/broadcasts/"+lbc.ID, "", 200))["status"])
	res = call("pause_broadcast", one)
	require.NotNil(t, res.Err)
	assert.Equal(t, "invalid_transition", res.Err.Code, "a paused broadcast is not paused again")
	assert.JSONEq(t, `{"status":"resuming"}`, value(call("resume_broadcast", one)))
	assert.JSONEq(t, `{"status":"canceled"}`, value(call("cancel_broadcast", one)))
	assert.Equal(t, "canceled", mustJSON(t, do("GET", base+"/broadcasts/"+lbc.ID, "", 200))["status"])
	assert.Equal(t, []string{broadcasts.JobSend, broadcasts.JobSend}, out.jobs(t),
		"start and resume each queued a run; a cancel before the first send needs none")

	// A second-generation broadcast: readable, listed, reported; not paused, resumed or
	// canceled by the tools (422, nothing changes).
	created := mustJSON(t, do("POST", base+"/broadcasts", `{"name":"Spring","channels":["telegram"]}`, 201))
	bc := created["id"].(string)
	two := `{` + botArg + `,"broadcast_id":"` + bc + `"}`
	assert.JSONEq(t, do("GET", base+"/broadcasts/"+bc, "", 200), value(call("get_broadcast", two)))
	assert.JSONEq(t, do("GET", base+"/broadcasts/"+bc+"/report", "", 200), value(call("get_content_broadcast_report", two)))
	for _, tool := range []string{"pause_broadcast", "resume_broadcast", "cancel_broadcast"} {
		res := call(tool, two)
		require.NotNil(t, res.Err, tool)
		assert.Equal(t, "unsupported_broadcast_type", res.Err.Code, tool)
		assert.Equal(t, http.StatusUnprocessableEntity, res.Status(), tool)
		assert.Contains(t, res.Err.Detail, "/broadcasts/"+bc+"/", tool)
	}
	assert.JSONEq(t, do("GET", base+"/broadcasts/"+bc, "", 200), value(call("get_broadcast", two)), "unchanged")
	res = call("get_content_broadcast_report", one)
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusNotFound, res.Status(), "the report tool is the second generation's, as its route")
	res = call("pause_broadcast", `{`+botArg+`,"broadcast_id":"lbc_nope"}`)
	require.NotNil(t, res.Err)
	assert.Equal(t, http.StatusNotFound, res.Status())

	var want, got map[string]any
	require.NoError(t, json.Unmarshal([]byte(do("GET", base+"/broadcasts?archived=true", "", 200)), &want))
	require.NoError(t, json.Unmarshal([]byte(value(call("list_content_broadcasts", `{`+botArg+`,"archived":true}`))), &got))
	assert.Equal(t, want["data"], got["data"])
	assert.Len(t, got["data"], 1, "the legacy broadcast is not listed")
	assert.Nil(t, got["next_cursor"])

	// Every call of a mutating tool was audited, refusals included; reads were not.
	out.mu.Lock()
	var routes []string
	for _, e := range out.events {
		if strings.HasPrefix(e.Route, "POST /mcp/tools/") {
			routes = append(routes, strings.TrimPrefix(e.Route, "POST /mcp/tools/"))
		}
	}
	out.mu.Unlock()
	assert.Equal(t, []string{"start_broadcast", "start_broadcast", "start_broadcast", "pause_broadcast", "pause_broadcast",
		"resume_broadcast", "cancel_broadcast", "pause_broadcast", "resume_broadcast", "cancel_broadcast", "pause_broadcast"}, routes)
}

func mustJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(s), &m), s)
	return m
}
