package tests

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	metafake "github.com/botplatform/api/tests/fakes/meta"
	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

// problem sends r and checks that the answer is the problem status and code, as the
// operation (template) documents it; it returns the problem's members.
func (e *metaEnv) problem(t *testing.T, r req, template string, status int, code string) map[string]any {
	t.Helper()
	return problem(t, r.Method, template, r.Path, e.do(r), status, code)
}

// callbackProblem is problem for the public callback.
func (e *metaEnv) callbackProblem(t *testing.T, q url.Values, status int, code string) map[string]any {
	t.Helper()
	res := e.callback(t, q)
	require.Equal(t, status, res.Status, "%s", res.Body)
	assert.Equal(t, code, res.Code(t))
	return res.JSON(t)
}

// The Meta connection routes' error answers the OpenAPI document promises, each provoked
// through the real process: connection_not_active (pending, expired), the callback of a
// deleted connection, oauth_code_rejected, provider_unavailable (the token endpoint, Graph),
// meta_request_rejected (the callback, the check), credentials_rejected, asset_attached,
// channel_exists and channel_in_use. An account makes at most 3 starts a minute: the demo
// account makes 3, a second account the 3 others. (concurrent_update needs a race:
// functions/meta's TestConcurrentUpdate.)
func TestMetaErrors(t *testing.T) {
	t.Parallel()
	e := startMeta(t)
	s := e.s
	const conn = "/api/meta/connections/{connectionID}"
	phone := "phone:" + metafake.PhoneNumberID
	status := func(tok, id string) map[string]any {
		t.Helper()
		res := e.get(tok, "/api/meta/connections/"+id)
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		return res.JSON(t)
	}
	selectPhone := func(tok, id string) {
		t.Helper()
		a := e.get(tok, "/api/meta/connections/"+id+"/assets").JSON(t)
		res := e.put(tok, "/api/meta/connections/"+id+"/selection", map[string]any{"asset_ids": []string{phone}, "expected_revision": a["revision"]})
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	}
	attach := func(tok, id, bot string) req {
		return req{Method: http.MethodPost, Path: "/api/meta/connections/" + id + "/attachments", Token: tok,
			Body: map[string]any{"asset_id": phone, "bot_id": bot}}
	}

	t.Run("pending, then deleted before its callback", func(t *testing.T) {
		tok := s.demo.Token
		id, q := e.start(t, tok)
		p := "/api/meta/connections/" + id
		for _, c := range []struct {
			r        req
			template string
		}{
			{req{Method: http.MethodGet, Path: p + "/assets", Token: tok}, conn + "/assets"},
			{req{Method: http.MethodPost, Path: p + "/check", Token: tok}, conn + "/check"},
			{req{Method: http.MethodPut, Path: p + "/selection", Token: tok, Body: map[string]any{"asset_ids": []string{}, "expected_revision": 1}}, conn + "/selection"},
			{attach(tok, id, s.demo.BotID), conn + "/attachments"},
		} {
			pr := e.problem(t, c.r, c.template, http.StatusConflict, "connection_not_active")
			assert.Equal(t, "pending", pr["state"], "%s %s", c.r.Method, c.r.Path)
		}

		// Deleted before the callback (nothing attached, no token to revoke): the callback
		// consumes the state and finds no connection.
		revocations := e.fb.Revocations()
		res := e.do(req{Method: http.MethodDelete, Path: p, Token: tok})
		require.Equal(t, http.StatusNoContent, res.Status, "%s", res.Body)
		assert.Equal(t, revocations, e.fb.Revocations())
		e.callbackProblem(t, q, http.StatusNotFound, "not_found")
		e.callbackProblem(t, q, http.StatusBadRequest, "invalid_state")
	})

	t.Run("code rejected", func(t *testing.T) {
		id, q := e.start(t, s.demo.Token)
		forged := url.Values{"state": {q.Get("state")}, "code": {"AQDforged0123456789"}}
		e.callbackProblem(t, forged, http.StatusUnprocessableEntity, "oauth_code_rejected")
		c := status(s.demo.Token, id)
		assert.Equal(t, "failed", c["status"])
		assert.Equal(t, "code_rejected", c["failure_reason"])
	})

	t.Run("token endpoint down", func(t *testing.T) {
		id, q := e.start(t, s.demo.Token)
		e.fb.FailWith("oauth/access_token", 1, http.StatusInternalServerError, 1)
		e.callbackProblem(t, q, http.StatusServiceUnavailable, "provider_unavailable")
		c := status(s.demo.Token, id)
		assert.Equal(t, "failed", c["status"])
		assert.Equal(t, "provider_unavailable", c["failure_reason"])
	})

	// A second account for the next three starts.
	other := s.newAccount("Meta errors")
	tok := other.Token

	t.Run("assets refused at the callback", func(t *testing.T) {
		id, q := e.start(t, tok)
		e.fb.FailWith("me/accounts", 1, http.StatusBadRequest, 10)
		pr := e.callbackProblem(t, q, http.StatusUnprocessableEntity, "meta_request_rejected")
		assert.Equal(t, float64(10), pr["provider_code"])
		c := status(tok, id)
		assert.Equal(t, "failed", c["status"])
		assert.Equal(t, "assets_unreadable", c["failure_reason"])
	})

	// An active connection: the check's Graph failures, then its number attached.
	first, q := e.start(t, tok)
	res := e.callback(t, q)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	check := req{Method: http.MethodPost, Path: "/api/meta/connections/" + first + "/check", Token: tok}

	t.Run("check: Graph down, Graph refusing", func(t *testing.T) {
		e.fb.FailWith("me", 1, http.StatusServiceUnavailable, 2)
		e.problem(t, check, conn+"/check", http.StatusServiceUnavailable, "provider_unavailable")
		e.fb.FailWith("me/businesses", 1, http.StatusBadRequest, 10)
		pr := e.problem(t, check, conn+"/check", http.StatusUnprocessableEntity, "meta_request_rejected")
		assert.Equal(t, float64(10), pr["provider_code"])
		assert.Equal(t, "active", status(tok, first)["status"], "neither is the token's fault")
	})

	var channelID string
	t.Run("attach: credentials rejected, then attached once", func(t *testing.T) {
		selectPhone(tok, first)
		// The WhatsApp Cloud API does not know the connection's token yet.
		e.problem(t, attach(tok, first, other.Bot), conn+"/attachments", http.StatusUnprocessableEntity, "credentials_rejected")
		for _, long := range e.fb.LongLived() {
			e.wa.AddToken(long, fakewhatsapp.BusinessAccountID)
		}
		res := e.do(attach(tok, first, other.Bot))
		require.Equal(t, http.StatusCreated, res.Status, "%s", res.Body)
		channelID = res.JSON(t)["id"].(string)
		pr := e.problem(t, attach(tok, first, other.Bot), conn+"/attachments", http.StatusConflict, "asset_attached")
		assert.Equal(t, channelID, pr["channel_id"])
	})

	// A second connection, of another admin of the business, sees the same number.
	e.fb.SignInAs(metafake.SecondUserID, metafake.SecondUserName)
	before := len(e.fb.LongLived())
	second, q := e.start(t, tok)
	res = e.callback(t, q)
	require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	long := e.fb.LongLived()[before]
	e.wa.AddToken(long, fakewhatsapp.BusinessAccountID)
	otherBot := s.admin("bot", "create", "--account", other.ID, "--name", "Meta errors second")["bot_id"]

	t.Run("attach: channel exists, channel in use", func(t *testing.T) {
		selectPhone(tok, second)
		// The bot has a WhatsApp channel already (one per type)...
		e.problem(t, attach(tok, second, other.Bot), conn+"/attachments", http.StatusConflict, "channel_exists")
		// ... and the number is another bot's channel.
		e.problem(t, attach(tok, second, otherBot), conn+"/attachments", http.StatusConflict, "channel_in_use")
	})

	t.Run("expired", func(t *testing.T) {
		e.fb.RejectToken(long)
		p := "/api/meta/connections/" + second
		e.problem(t, req{Method: http.MethodPost, Path: p + "/check", Token: tok}, conn+"/check", http.StatusUnprocessableEntity, "meta_token_rejected")
		assert.Equal(t, "expired", status(tok, second)["status"])
		pr := e.problem(t, req{Method: http.MethodPost, Path: p + "/check", Token: tok}, conn+"/check", http.StatusConflict, "connection_not_active")
		assert.Equal(t, "expired", pr["state"])
		pr = e.problem(t, attach(tok, second, otherBot), conn+"/attachments", http.StatusConflict, "connection_not_active")
		assert.Equal(t, "expired", pr["state"])
		// What was read stays readable, and the selection the customer's to change.
		res := e.get(tok, p+"/assets")
		require.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
		res = e.put(tok, p+"/selection", map[string]any{"asset_ids": []string{}, "expected_revision": res.JSON(t)["revision"]})
		assert.Equal(t, http.StatusOK, res.Status, "%s", res.Body)
	})
}
