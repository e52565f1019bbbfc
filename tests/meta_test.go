package tests

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/tests/fakes/crm/crmfake"
	metafake "github.com/botplatform/api/tests/fakes/meta"
	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

// metaEnv is the local process configured (META_* environment) with the fake Facebook app,
// Login dialog and Graph API, and the fake WhatsApp Cloud API for the channels attached.
type metaEnv struct {
	s  *server
	fb *metafake.Server
	wa *fakewhatsapp.Server

	mu     sync.Mutex
	bodies []string   // every response body, for the token check at the end
	query  url.Values // a callback's query (code and state), which no log may hold
}

func startMeta(t *testing.T) *metaEnv {
	t.Helper()
	e := &metaEnv{fb: metafake.New(t), wa: fakewhatsapp.New(t)}
	e.s = startWithEnv(t, t.TempDir(), []string{
		"META_APP_ID=" + metafake.AppID,
		"META_APP_SECRET=" + metafake.AppSecret,
		"META_REDIRECT_URL=" + metafake.RedirectURI,
		"META_GRAPH_BASE_URL=" + e.fb.URL(),
		"META_DIALOG_BASE_URL=" + e.fb.URL(),
	}, "--whatsapp-base-url", e.wa.URL(), "--whatsapp-app-id", fakewhatsapp.AppID)
	// At the end: no token the fake issued (nor the app secret, nor a callback's code or
	// state) in any response, the process log or the bot's request log.
	t.Cleanup(func() {
		secrets := append(e.fb.Tokens(), metafake.AppSecret)
		e.mu.Lock()
		code, state := e.query.Get("code"), e.query.Get("state")
		bodies := strings.Join(e.bodies, "\n")
		e.mu.Unlock()
		require.NotEmpty(t, code)
		logs := e.s.stderr.String()
		for i, secret := range append(secrets, code) {
			assert.False(t, strings.Contains(bodies, secret), "a response holds a token, the app secret or a callback's code (#%d)", i)
			assert.False(t, strings.Contains(logs, secret), "the log holds a token, the app secret or a callback's code (#%d)", i)
		}
		// The state is in the start's answer (authorize_url), by design; never in the log.
		assert.False(t, strings.Contains(logs, state), "the log holds a callback's state")
	})
	return e
}

// do sends a request and keeps its answer's body for the final check.
func (e *metaEnv) do(r req) resp {
	res := e.s.do(r)
	e.mu.Lock()
	e.bodies = append(e.bodies, string(res.Body))
	e.mu.Unlock()
	return res
}

func (e *metaEnv) get(tok, path string) resp {
	return e.do(req{Method: http.MethodGet, Path: path, Token: tok})
}
func (e *metaEnv) post(tok, path string, body any) resp {
	return e.do(req{Method: http.MethodPost, Path: path, Token: tok, Body: body})
}
func (e *metaEnv) put(tok, path string, body any) resp {
	return e.do(req{Method: http.MethodPut, Path: path, Token: tok, Body: body})
}

// start begins a connection and follows its dialog: the fake redirects to the registered
// redirect URI with a code and the state (or the denial).
func (e *metaEnv) start(t *testing.T, tok string) (string, url.Values) {
	t.Helper()
	res := e.post(tok, "/api/meta/connections", nil)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, "/api/meta/connections", "/api/meta/connections", res)
	c := res.JSON(t)
	assert.Equal(t, "pending", c["status"])
	id := c["id"].(string)
	assert.Equal(t, "/api/meta/connections/"+id, res.Header.Get("Location"))
	u, err := url.Parse(c["authorize_url"].(string))
	require.NoError(t, err)
	assert.Equal(t, e.fb.URL()+"/v21.0/dialog/oauth", u.Scheme+"://"+u.Host+u.Path)
	assert.Equal(t, metafake.AppID, u.Query().Get("client_id"))
	assert.Equal(t, metafake.RedirectURI, u.Query().Get("redirect_uri"))
	assert.Contains(t, strings.Fields(u.Query().Get("scope")), "whatsapp_business_messaging")
	assert.Len(t, u.Query().Get("state"), 43)
	q, err := crmfake.Consent(u.String())
	require.NoError(t, err)
	e.mu.Lock()
	e.query = q
	e.mu.Unlock()
	return id, q
}

// callback is the browser arriving at the process's callback: no token.
func (e *metaEnv) callback(t *testing.T, q url.Values) resp {
	t.Helper()
	res := e.get("", "/api/meta/callback?"+q.Encode())
	conforms(t, http.MethodGet, "/api/meta/callback", "/api/meta/callback", res)
	return res
}

// The whole flow through the real process: start, the dialog, the callback, the assets,
// check, selection, a WhatsApp number attached to the demo bot as a channel, a denied
// dialog, the refresh job, access by status class (another account's token is 404 on every
// route of the connection) and deletion, refused while the channel holds the connection's
// token; no token anywhere.
func TestMetaConnections(t *testing.T) {
	t.Parallel()
	e := startMeta(t)
	s := e.s
	tok, bot := s.demo.Token, s.demo.BotID

	id, q := e.start(t, tok)
	res := e.callback(t, q)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
	assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	c := res.JSON(t)
	assert.Equal(t, "active", c["status"])
	assert.Equal(t, map[string]any{"id": metafake.UserID, "name": metafake.UserName}, c["facebook_user"])
	assert.Equal(t, map[string]any{"pages": float64(2), "instagram_accounts": float64(1), "whatsapp_business_accounts": float64(1),
		"whatsapp_phone_numbers": float64(2)}, c["asset_counts"])
	assert.NotEmpty(t, c["expires_at"])

	res = e.callback(t, q)
	assert.Equal(t, http.StatusBadRequest, res.Status, "the state is single-use")
	assert.Equal(t, "invalid_state", res.Code(t))

	res = e.get(tok, "/api/meta/connections/"+id)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, "/api/meta/connections/{connectionID}", "/api/meta/connections/"+id, res)
	res = e.get(tok, "/api/meta/connections")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Len(t, res.JSON(t)["data"], 1)

	// Assets: a page with its Instagram account, a page without messaging, the WhatsApp
	// Business account with its two numbers.
	res = e.get(tok, "/api/meta/connections/"+id+"/assets")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodGet, "/api/meta/connections/{connectionID}/assets", "/api/meta/connections/"+id+"/assets", res)
	a := res.JSON(t)
	assert.Len(t, a["pages"], 2)
	ig := a["instagram_accounts"].([]any)
	require.Len(t, ig, 1)
	assert.Equal(t, metafake.InstagramUser, ig[0].(map[string]any)["username"])
	wabas := a["whatsapp_business_accounts"].([]any)
	require.Len(t, wabas, 1)
	phones := wabas[0].(map[string]any)["phone_numbers"].([]any)
	require.Len(t, phones, 2)
	phone := phones[0].(map[string]any)
	assert.Equal(t, "phone:"+metafake.PhoneNumberID, phone["id"])
	assert.Equal(t, metafake.DisplayPhoneNumber, phone["display_phone_number"])

	// Check: the page without MESSAGING and the unverified number have problems.
	res = e.post(tok, "/api/meta/connections/"+id+"/check", nil)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, "/api/meta/connections/{connectionID}/check", "/api/meta/connections/"+id+"/check", res)
	problems := map[string]any{}
	for _, a := range res.JSON(t)["assets"].([]any) {
		m := a.(map[string]any)
		problems[m["id"].(string)] = m["problems"]
	}
	assert.Equal(t, []any{}, problems["phone:"+metafake.PhoneNumberID])
	assert.Equal(t, []any{"messaging_task_missing"}, problems["page:"+metafake.OtherPageID])
	assert.Equal(t, []any{"phone_not_verified"}, problems["phone:"+metafake.UnverifiedPhoneID])
	assert.Equal(t, []any{}, res.JSON(t)["missing_permissions"])

	// Selection, then attachment of the number to the demo bot.
	a = e.get(tok, "/api/meta/connections/"+id+"/assets").JSON(t) // the check refreshed them: a new revision
	attach := map[string]any{"asset_id": "phone:" + metafake.PhoneNumberID, "bot_id": bot, "name": "Support line"}
	res = e.post(tok, "/api/meta/connections/"+id+"/attachments", attach)
	assert.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	assert.Equal(t, "asset_not_selected", res.Code(t))
	res = e.put(tok, "/api/meta/connections/"+id+"/selection", map[string]any{"asset_ids": []string{"phone:" + metafake.PhoneNumberID}, "expected_revision": 99})
	assert.Equal(t, http.StatusConflict, res.Status)
	assert.Equal(t, "stale_revision", res.Code(t))
	res = e.put(tok, "/api/meta/connections/"+id+"/selection", map[string]any{"asset_ids": []string{"phone:1"}, "expected_revision": a["revision"]})
	assert.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "validation_failed", res.Code(t))
	res = e.put(tok, "/api/meta/connections/"+id+"/selection", map[string]any{
		"asset_ids": []string{"phone:" + metafake.PhoneNumberID, "page:" + metafake.PageID}, "expected_revision": a["revision"]})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	conforms(t, http.MethodPut, "/api/meta/connections/{connectionID}/selection", "/api/meta/connections/"+id+"/selection", res)

	res = e.post(tok, "/api/meta/connections/"+id+"/attachments", map[string]any{"asset_id": "page:" + metafake.PageID, "bot_id": bot})
	assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
	assert.Equal(t, "channel_kind_unsupported", res.Code(t))

	// The WhatsApp Cloud API accepts the connection's long-lived token for its account.
	for _, long := range e.fb.LongLived() {
		e.wa.AddToken(long, fakewhatsapp.BusinessAccountID)
	}
	res = e.post(tok, "/api/meta/connections/"+id+"/attachments", attach)
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	conforms(t, http.MethodPost, "/api/meta/connections/{connectionID}/attachments", "/api/meta/connections/"+id+"/attachments", res)
	ch := res.JSON(t)
	assert.Equal(t, "whatsapp", ch["type"])
	assert.Equal(t, "Support line", ch["name"])
	res = e.get(tok, "/api/bots/"+bot+"/channels")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	found := false
	for _, c := range res.JSON(t)["data"].([]any) {
		found = found || c.(map[string]any)["id"] == ch["id"]
	}
	assert.True(t, found, "the bot's channels list the attached number")
	res = e.get(tok, "/api/meta/connections/"+id+"/assets")
	phone = res.JSON(t)["whatsapp_business_accounts"].([]any)[0].(map[string]any)["phone_numbers"].([]any)[0].(map[string]any)
	assert.Equal(t, ch["id"], phone["channel_id"])
	assert.Equal(t, bot, phone["bot_id"])

	t.Run("denied", func(t *testing.T) {
		e.fb.Deny(true)
		defer e.fb.Deny(false)
		denied, q := e.start(t, tok)
		res := e.callback(t, q)
		assert.Equal(t, http.StatusBadRequest, res.Status, "%s", res.Body)
		assert.Equal(t, "oauth_denied", res.Code(t))
		c := e.get(tok, "/api/meta/connections/"+denied).JSON(t)
		assert.Equal(t, "failed", c["status"])
		assert.Equal(t, "user_denied", c["failure_reason"])
	})

	t.Run("401 403 404", func(t *testing.T) {
		res := e.get("", "/api/meta/connections")
		assert.Equal(t, http.StatusUnauthorized, res.Status)
		res = e.get("mbp_notatoken", "/api/meta/connections/"+id)
		assert.Equal(t, http.StatusUnauthorized, res.Status)

		reader := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "integrations:read")["token"]
		assert.Equal(t, http.StatusOK, e.get(reader, "/api/meta/connections/"+id).Status)
		res = e.post(reader, "/api/meta/connections", nil)
		assert.Equal(t, http.StatusForbidden, res.Status)
		assert.Equal(t, "insufficient_scope", res.Code(t))
		integrations := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "integrations:write")["token"]
		res = e.post(integrations, "/api/meta/connections/"+id+"/attachments", attach)
		assert.Equal(t, http.StatusForbidden, res.Status, "attaching needs bots:write too")
		assert.Equal(t, "insufficient_scope", res.Code(t))
		crm := s.admin("pat", "create", "--account", s.demo.AccountID, "--scopes", "crm:*")["token"]
		assert.Equal(t, http.StatusForbidden, e.get(crm, "/api/meta/connections").Status)

		other := s.newAccount("Other")
		res = e.get(other.Token, "/api/meta/connections/"+id)
		assert.Equal(t, http.StatusNotFound, res.Status, "another account's connection")
		res = e.get(other.Token, "/api/meta/connections")
		assert.Equal(t, []any{}, res.JSON(t)["data"])
		res = e.post(tok, "/api/meta/connections/"+id+"/attachments", map[string]any{"asset_id": "phone:" + metafake.PhoneNumberID, "bot_id": other.Bot})
		assert.Equal(t, http.StatusNotFound, res.Status, "another account's bot")
		res = e.get(tok, "/api/meta/connections/mtc_1h1kjx5t2b0qg7m1r9c8f3e4dz")
		assert.Equal(t, http.StatusNotFound, res.Status)

		// Another account's token: 404 on every route of the connection, which stays as it was.
		revocations := e.fb.Revocations()
		for _, r := range []req{
			{Method: http.MethodDelete, Path: "/api/meta/connections/" + id},
			{Method: http.MethodGet, Path: "/api/meta/connections/" + id + "/assets"},
			{Method: http.MethodPost, Path: "/api/meta/connections/" + id + "/check"},
			{Method: http.MethodPut, Path: "/api/meta/connections/" + id + "/selection", Body: map[string]any{"asset_ids": []string{}, "expected_revision": 1}},
			{Method: http.MethodPost, Path: "/api/meta/connections/" + id + "/attachments", Body: map[string]any{"asset_id": "phone:" + metafake.PhoneNumberID, "bot_id": other.Bot}},
		} {
			r.Token = other.Token
			res := e.do(r)
			assert.Equal(t, http.StatusNotFound, res.Status, "%s %s: %s", r.Method, r.Path, res.Body)
			assert.Equal(t, "not_found", res.Code(t), "%s %s", r.Method, r.Path)
		}
		assert.Equal(t, revocations, e.fb.Revocations(), "another account's delete revoked nothing")
		res = e.get(tok, "/api/meta/connections/"+id)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		assert.Equal(t, "active", res.JSON(t)["status"])
		mine := e.get(tok, "/api/meta/connections/"+id+"/assets").JSON(t)["whatsapp_business_accounts"].([]any)[0].(map[string]any)["phone_numbers"].([]any)[0].(map[string]any)
		assert.Equal(t, true, mine["selected"], "the selection is the owner's")
		assert.Equal(t, ch["id"], mine["channel_id"])

		// 429: the fourth start of an account within a minute.
		for range 3 {
			res = e.post(other.Token, "/api/meta/connections", nil)
			require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		}
		res = e.post(other.Token, "/api/meta/connections", nil)
		assert.Equal(t, http.StatusTooManyRequests, res.Status)
		assert.Equal(t, "rate_limited", res.Code(t))
		assert.NotEmpty(t, res.Header.Get("Retry-After"))
	})

	t.Run("refresh", func(t *testing.T) {
		// A token that expires within 7 days is refreshed by the job the callback starts.
		// Another admin of the business connects (the same user would update the first
		// connection: TestMetaReconnect).
		e.fb.SetLongLivedTTL(6 * 24 * time.Hour)
		defer e.fb.SetLongLivedTTL(60 * 24 * time.Hour)
		e.fb.SignInAs(metafake.SecondUserID, metafake.SecondUserName)
		defer e.fb.SignInAs(metafake.UserID, metafake.UserName)
		before := len(e.fb.LongLived())
		rid, q := e.start(t, tok)
		res := e.callback(t, q)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		require.Equal(t, rid, res.JSON(t)["id"], "another user, another connection")
		rev := res.JSON(t)["revision"].(float64)
		require.Eventually(t, func() bool { return len(e.fb.LongLived()) >= before+2 }, 20*time.Second, 50*time.Millisecond,
			"the refresh job exchanged the long-lived token")
		require.Eventually(t, func() bool {
			return e.get(tok, "/api/meta/connections/"+rid).JSON(t)["revision"].(float64) > rev
		}, 20*time.Second, 100*time.Millisecond, "the connection records the refresh")
		assert.Equal(t, "active", e.get(tok, "/api/meta/connections/"+rid).JSON(t)["status"])
		// The callback's token refused, the connection works on: it holds the refreshed one.
		e.fb.RejectToken(e.fb.LongLived()[before])
		res = e.post(tok, "/api/meta/connections/"+rid+"/check", nil)
		assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)

		// Graph refusing the token (190) makes the connection expired.
		for _, long := range e.fb.LongLived()[before:] {
			e.fb.RejectToken(long)
		}
		res = e.post(tok, "/api/meta/connections/"+rid+"/check", nil)
		assert.Equal(t, http.StatusUnprocessableEntity, res.Status, "%s", res.Body)
		assert.Equal(t, "meta_token_rejected", res.Code(t))
		assert.Equal(t, "expired", e.get(tok, "/api/meta/connections/"+rid).JSON(t)["status"])
	})

	// Delete: refused while the attached channel holds the connection's token (the
	// revocation would cut the channel off); once the channel is disconnected through the
	// channels route, Graph is asked to revoke and the connection is gone.
	del := req{Method: http.MethodDelete, Path: "/api/meta/connections/" + id, Token: tok}
	revocations := e.fb.Revocations()
	res = e.do(del)
	require.Equal(t, http.StatusConflict, res.Status, "%s", res.Body)
	conforms(t, http.MethodDelete, "/api/meta/connections/{connectionID}", del.Path, res)
	assert.Equal(t, "connection_in_use", res.Code(t))
	assert.Equal(t, []any{ch["id"]}, res.JSON(t)["channel_ids"])
	assert.Equal(t, revocations, e.fb.Revocations(), "a refused delete revokes nothing")
	assert.Equal(t, http.StatusOK, e.get(tok, "/api/meta/connections/"+id).Status)
	res = e.do(req{Method: http.MethodDelete, Path: "/api/bots/" + bot + "/channels/" + ch["id"].(string), Token: tok})
	require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	res = e.do(del)
	assert.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
	conforms(t, http.MethodDelete, "/api/meta/connections/{connectionID}", del.Path, res)
	assert.Equal(t, revocations+1, e.fb.Revocations())
	assert.Equal(t, http.StatusNotFound, e.get(tok, "/api/meta/connections/"+id).Status)

	// The bot's request log and the account's audit events hold no token either (their
	// bodies join the check at the end); the callback is audited as the start's caller's.
	res = e.get(tok, "/api/bots/"+bot+"/request-logs")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	res = e.get(tok, "/api/audit-events?limit=200")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Contains(t, string(res.Body), "GET /api/meta/callback")
	assert.Contains(t, string(res.Body), "POST /api/meta/connections/{connectionID}/attachments")
}

// The same Facebook user connecting again, through the real process: the callback answers
// 200 with the user's connection (Content-Location its URL, not the start's), updated in
// place: new token and expiry, revision incremented, the selection and the attached channel
// kept; the start's pending connection is gone, the list has one connection, and the
// callback is audited as the start's caller's (200). Two callbacks of a user at once still
// leave one. (That the channel is given the new token: functions/meta's
// TestReconnectUpdatesInPlace.)
func TestMetaReconnect(t *testing.T) {
	t.Parallel()
	e := startMeta(t)
	s := e.s
	tok, bot := s.demo.Token, s.demo.BotID

	id, q := e.start(t, tok)
	res := e.callback(t, q)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	first := res.JSON(t)
	assert.Equal(t, "/api/meta/connections/"+id, res.Header.Get("Content-Location"))
	a := e.get(tok, "/api/meta/connections/"+id+"/assets").JSON(t)
	phone := "phone:" + metafake.PhoneNumberID
	res = e.put(tok, "/api/meta/connections/"+id+"/selection", map[string]any{"asset_ids": []string{phone}, "expected_revision": a["revision"]})
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	e.wa.AddToken(e.fb.LongLived()[0], fakewhatsapp.BusinessAccountID)
	res = e.post(tok, "/api/meta/connections/"+id+"/attachments", map[string]any{"asset_id": phone, "bot_id": bot})
	require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
	channelID := res.JSON(t)["id"].(string)

	// The token is about to lapse: the user connects again.
	e.fb.SetLongLivedTTL(90 * 24 * time.Hour)
	pending, q := e.start(t, tok)
	res = e.callback(t, q)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	assert.Equal(t, "/api/meta/connections/"+id, res.Header.Get("Content-Location"))
	again := res.JSON(t)
	assert.Equal(t, id, again["id"], "the user's connection, not a second one")
	assert.Equal(t, "active", again["status"])
	assert.Greater(t, again["revision"].(float64), first["revision"].(float64))
	assert.Greater(t, again["expires_at"].(string), first["expires_at"].(string), "the new token's expiry")
	assert.Equal(t, first["created_at"], again["created_at"])

	res = e.get(tok, "/api/meta/connections/"+pending)
	assert.Equal(t, http.StatusNotFound, res.Status, "the start's pending connection was folded into it: %s", res.Body)
	res = e.get(tok, "/api/meta/connections")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	list := res.JSON(t)["data"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].(map[string]any)["id"])
	a = e.get(tok, "/api/meta/connections/"+id+"/assets").JSON(t)
	mine := a["whatsapp_business_accounts"].([]any)[0].(map[string]any)["phone_numbers"].([]any)[0].(map[string]any)
	assert.Equal(t, true, mine["selected"])
	assert.Equal(t, channelID, mine["channel_id"])

	// Two first callbacks of a user at once (another account: 3 starts a minute): one
	// connection still, which both answer.
	other := s.newAccount("Meta reconnect")
	_, q1 := e.start(t, other.Token)
	_, q2 := e.start(t, other.Token)
	got := make([]any, 2)
	var wg sync.WaitGroup
	for i, q := range []url.Values{q1, q2} {
		wg.Go(func() {
			res := e.callback(t, q)
			assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
			got[i] = res.JSON(t)["id"]
		})
	}
	wg.Wait()
	list = e.get(other.Token, "/api/meta/connections").JSON(t)["data"].([]any)
	require.Len(t, list, 1)
	assert.Equal(t, []any{list[0].(map[string]any)["id"], list[0].(map[string]any)["id"]}, got)

	res = e.get(tok, "/api/audit-events?limit=200")
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	callbacks := 0
	for _, ev := range res.JSON(t)["data"].([]any) {
		m := ev.(map[string]any)
		if m["route"] == "GET /api/meta/callback" {
			callbacks++
			assert.Equal(t, float64(http.StatusOK), m["status"], "audited as an update")
		}
	}
	assert.Equal(t, 2, callbacks)
}

// Without a Facebook app, starts answer 503 meta_not_configured, before anything is counted.
func TestMetaNotConfigured(t *testing.T) {
	t.Parallel()
	s := start(t)
	for range 4 {
		res := s.post(s.demo.Token, "/api/meta/connections", nil)
		assert.Equal(t, http.StatusServiceUnavailable, res.Status, "%s", res.Body)
		assert.Equal(t, "meta_not_configured", res.Code(t))
	}
	res := s.get("", "/api/meta/callback?"+url.Values{"state": {"forged"}, "code": {"c"}}.Encode())
	assert.Equal(t, http.StatusBadRequest, res.Status)
	assert.Equal(t, "invalid_state", res.Code(t))
}
