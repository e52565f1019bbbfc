package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/logtest"
	"github.com/botplatform/api/shared/store"
)

var (
	now  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	botA = ids.At("bot", now)                  // account A
	botB = ids.At("bot", now.Add(time.Second)) // account A
	botC = ids.At("bot", now.Add(time.Minute)) // account B
)

// principals by bearer token of the stub authenticator.
var principals = map[string]*auth.Principal{
	"owner":  {AccountID: "acct_A", UserID: "usr_owner", TokenID: "pat_owner", Kind: auth.KindPAT, Scopes: auth.Scopes{auth.Full}, Role: auth.RoleOwner},
	"reader": {AccountID: "acct_A", UserID: "usr_reader", TokenID: "pat_reader", Kind: auth.KindPAT, Scopes: auth.Scopes{"bots:read"}, Role: auth.RoleMember},
	"member": {AccountID: "acct_A", UserID: "usr_member", TokenID: "pat_member", Kind: auth.KindPAT, Scopes: auth.Scopes{"bots:*", "things:*"}, Role: auth.RoleMember,
		BotRights: map[string]auth.RightSet{botA: auth.RightsOf(auth.RightReactions)}},
	"bot": {AccountID: "acct_A", TokenID: "btk_a", Kind: auth.KindBot, BotID: botA, Scopes: auth.Scopes{auth.Full}, Role: auth.RoleMember},
}

func stubAuthenticate(r *http.Request) (*auth.Principal, error) {
	h := r.Header.Get("Authorization")
	switch h {
	case "":
		return nil, auth.ErrMissingCredentials
	case "Bearer malformed":
		return nil, auth.ErrMalformedToken
	case "Bearer unknown":
		return nil, auth.ErrUnknownToken
	case "Bearer expired":
		return nil, auth.ErrExpiredToken
	case "Bearer busy":
		return nil, fmt.Errorf("read credential: %w", store.ErrUnavailable)
	}
	if p, ok := principals[strings.TrimPrefix(h, "Bearer ")]; ok {
		return p, nil
	}
	return nil, auth.ErrUnknownToken
}

// botLoader knows which bot is whose and records every call.
type botLoader struct {
	mu    sync.Mutex
	calls []string
}

func (b *botLoader) LoadBot(_ context.Context, account, bot string) (any, error) {
	b.mu.Lock()
	b.calls = append(b.calls, account+"/"+bot)
	b.mu.Unlock()
	owners := map[string]string{botA: "acct_A", botB: "acct_A", botC: "acct_B"}
	if owners[bot] != account {
		return nil, httpapi.NotFound("bot")
	}
	return "loaded " + bot, nil
}

func (b *botLoader) called() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

// publisher records events; fail makes Publish fail, check runs inside Publish.
type publisher struct {
	mu     sync.Mutex
	events []audit.Event
	fail   bool
	check  func(audit.Event)
}

func (p *publisher) Publish(_ context.Context, e audit.Event) error {
	if p.check != nil {
		p.check(e)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.events = append(p.events, e)
	if p.fail {
		return errors.New("bus down")
	}
	return nil
}

func (p *publisher) published() []audit.Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]audit.Event(nil), p.events...)
}

type kernel struct {
	mux   *httpapi.Mux
	bots  *botLoader
	audit *publisher
	logs  *logtest.Buffer
}

func newKernel(t testing.TB) *kernel {
	t.Helper()
	k := &kernel{bots: &botLoader{}, audit: &publisher{}}
	logs := &logtest.Buffer{}
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: stubAuthenticate,
		Bots:         k.bots,
		Audit:        k.audit,
		Log:          slog.New(slog.NewJSONHandler(logs, nil)),
		Now:          func() time.Time { return now },
	})
	require.NoError(t, err)
	k.mux, k.logs = mux, logs

	ok := func(status int) httpapi.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error {
			return httpapi.WriteJSON(w, status, map[string]any{"bot": httpapi.LoadedBot(r.Context())})
		}
	}
	mux.Handle("GET /healthz", httpapi.Public(), ok(200))
	mux.Handle("GET /api/things", httpapi.Need("things:read"), ok(200))
	mux.Handle("POST /api/things", httpapi.NeedPAT("things:write"), ok(201))
	mux.Handle("POST /api/things/invalid", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.E(httpapi.KindInvalid, "validation_failed", "name: is required")
	})
	mux.Handle("POST /api/things/panic", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
		panic("secret panic text")
	})
	mux.Handle("POST /api/things/silent", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
		return nil
	})
	mux.Handle("GET /api/things/panic", httpapi.Need("things:read"), func(w http.ResponseWriter, r *http.Request) error {
		panic("secret panic text")
	})
	mux.Handle("GET /api/things/silent", httpapi.Need("things:read"), func(w http.ResponseWriter, r *http.Request) error {
		return nil
	})
	mux.Handle("GET /api/things/conflict", httpapi.Need("things:read"), func(w http.ResponseWriter, r *http.Request) error {
		// Set directly: With refuses these names outright.
		e := httpapi.StaleRevision(7)
		e.Extensions["type"], e.Extensions["status"] = "https://evil.example/", 200
		return e
	})
	mux.Handle("GET /api/things/busy", httpapi.Need("things:read"), func(w http.ResponseWriter, r *http.Request) error {
		return fmt.Errorf("query: %w", store.ErrUnavailable)
	})
	mux.Handle("GET /api/things/broken", httpapi.Need("things:read"), func(w http.ResponseWriter, r *http.Request) error {
		return errors.New("dial db: password=hunter2")
	})
	// A route that finds its bot in the body (as a playbook install's routes find theirs in
	// the install) and checks it with Authorize.
	mux.Handle("POST /api/things/onbot", httpapi.NeedPAT("things:write"), func(w http.ResponseWriter, r *http.Request) error {
		if _, err := httpapi.Authorize(r.Context(), k.bots, httpapi.Need("bots:read"), httpapi.Caller(r), true, r.URL.Query().Get("bot")); err != nil {
			return err
		}
		return httpapi.WriteJSON(w, 201, map[string]any{})
	})
	mux.Handle("GET /api/bots/{botID}", httpapi.Need("bots:read"), ok(200))
	mux.Handle("PATCH /api/bots/{botID}", httpapi.Need("bots:write", auth.RightReactions), ok(200))
	mux.Handle("DELETE /api/bots/{botID}", httpapi.NeedPAT("bots:write", auth.RightReactions), func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.NoContent(w)
	})
	mux.Handle("POST /api/bots/{botID}/tokens", httpapi.NeedPAT("bots:write", auth.RightReactions, auth.RightDialogs), ok(201))
	return k
}

type response struct {
	*httptest.ResponseRecorder
	problem map[string]any
}

func (k *kernel) do(t *testing.T, method, target, token string, headers ...string) response {
	t.Helper()
	var body *strings.Reader
	if method == http.MethodGet || method == http.MethodDelete {
		body = strings.NewReader("")
	} else {
		body = strings.NewReader("{}")
	}
	r := httptest.NewRequest(method, target, body)
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		r.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	k.mux.ServeHTTP(rec, r)
	res := response{ResponseRecorder: rec}
	if rec.Header().Get("Content-Type") == "application/problem+json" {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res.problem))
	}
	return res
}

func TestAccess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, target, token string
		status                      int
		code                        string
		wwwAuthenticate             string
		loaderCalled                bool
	}{
		{"public needs nothing", "GET", "/healthz", "", 200, "", "", false},

		{"missing credentials", "GET", "/api/bots/" + botA, "", 401, "missing_credentials", `Bearer realm="api"`, false},
		{"malformed token", "GET", "/api/bots/" + botA, "malformed", 401, "invalid_token", `Bearer realm="api", error="invalid_token"`, false},
		{"unknown token", "GET", "/api/bots/" + botA, "unknown", 401, "invalid_token", `Bearer realm="api", error="invalid_token"`, false},
		{"expired token", "GET", "/api/bots/" + botA, "expired", 401, "token_expired", `Bearer realm="api", error="invalid_token"`, false},
		{"missing credentials on a mutation", "DELETE", "/api/bots/" + botA, "", 401, "missing_credentials", `Bearer realm="api"`, false},
		{"credential store busy", "GET", "/api/things", "busy", 503, "temporarily_unavailable", "", false},

		{"scope held", "GET", "/api/bots/" + botA, "reader", 200, "", "", true},
		{"scope missing", "PATCH", "/api/bots/" + botA, "reader", 403, "insufficient_scope", "", false},
		{"scope missing on an account route", "GET", "/api/things", "reader", 403, "insufficient_scope", "", false},
		{"scope checked before the bot", "PATCH", "/api/bots/" + botC, "reader", 403, "insufficient_scope", "", false},

		{"bot token on its own bot", "GET", "/api/bots/" + botA, "bot", 200, "", "", true},
		{"bot token mutating its own bot", "PATCH", "/api/bots/" + botA, "bot", 200, "", "", true},
		{"bot token on a PAT-only route of its bot", "DELETE", "/api/bots/" + botA, "bot", 403, "insufficient_scope", "", false},
		{"bot token on an account route", "GET", "/api/things", "bot", 403, "insufficient_scope", "", false},
		{"bot token on another bot", "GET", "/api/bots/" + botB, "bot", 404, "not_found", "", false},
		{"bot token on another account's bot", "PATCH", "/api/bots/" + botC, "bot", 404, "not_found", "", false},
		{"bot token on a PAT-only route of another bot", "DELETE", "/api/bots/" + botB, "bot", 404, "not_found", "", false},

		{"owner on another account's bot", "GET", "/api/bots/" + botC, "owner", 404, "not_found", "", true},
		{"owner on a malformed bot id", "GET", "/api/bots/nope", "owner", 404, "not_found", "", true},
		{"owner holds every right", "DELETE", "/api/bots/" + botB, "owner", 204, "", "", true},
		{"member with the per-bot right", "PATCH", "/api/bots/" + botA, "member", 200, "", "", true},
		{"member without the right", "PATCH", "/api/bots/" + botB, "member", 403, "missing_right", "", true},
		{"member lacking one of two rights", "POST", "/api/bots/" + botA + "/tokens", "member", 403, "missing_right", "", true},
		{"another account's bot is 404 before rights", "PATCH", "/api/bots/" + botC, "member", 404, "not_found", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := newKernel(t)
			res := k.do(t, tt.method, tt.target, tt.token)
			require.Equal(t, tt.status, res.Code, res.Body.String())
			if tt.code != "" {
				assert.Equal(t, tt.code, res.problem["code"])
			}
			assert.Equal(t, tt.wwwAuthenticate, res.Header().Get("WWW-Authenticate"))
			if tt.loaderCalled {
				assert.NotEmpty(t, k.bots.called())
			} else {
				assert.Empty(t, k.bots.called(), "the bot loader is not consulted")
			}
			switch tt.code {
			case "insufficient_scope":
				assert.NotEmpty(t, res.problem["required_scope"])
			case "missing_right":
				want := []any{"reactions"}
				if strings.HasSuffix(tt.target, "/tokens") {
					want = []any{"dialogs"} // reactions is held on botA
				}
				assert.Equal(t, want, res.problem["missing_rights"])
			}
		})
	}
}

func TestLoadedBotReachesTheHandler(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	res := k.do(t, "GET", "/api/bots/"+botA, "owner")
	require.Equal(t, 200, res.Code)
	assert.JSONEq(t, `{"bot":"loaded `+botA+`"}`, res.Body.String())
	assert.Equal(t, []string{"acct_A/" + botA}, k.bots.called(), "loaded once, for the caller's account")

	res = k.do(t, "GET", "/api/things", "owner")
	assert.JSONEq(t, `{"bot":null}`, res.Body.String(), "no bot on account routes")
}

func TestAuditOnePerMutation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, method, target, token string
		status                      int // of the response, and of the event when audited
		audited                     bool
	}{
		{"2xx", "POST", "/api/things", "owner", 201, true},
		{"204", "DELETE", "/api/bots/" + botA, "owner", 204, true},
		{"4xx from the handler", "POST", "/api/things/invalid", "owner", 400, true},
		{"403 scope", "PATCH", "/api/bots/" + botA, "reader", 403, true},
		{"403 bot token on a PAT route", "DELETE", "/api/bots/" + botA, "bot", 403, true},
		{"403 right", "PATCH", "/api/bots/" + botB, "member", 403, true},
		{"404 foreign bot", "PATCH", "/api/bots/" + botC, "owner", 404, true},
		{"404 bot token on another bot", "PATCH", "/api/bots/" + botB, "bot", 404, true},
		{"panic", "POST", "/api/things/panic", "owner", 500, true},
		{"handler wrote nothing", "POST", "/api/things/silent", "owner", 500, true},
		{"GET is not audited", "GET", "/api/bots/" + botA, "owner", 200, false},
		{"failed GET is not audited", "GET", "/api/bots/" + botC, "owner", 404, false},
		{"401 is not audited", "POST", "/api/things", "", 401, false},
		{"401 unknown token is not audited", "PATCH", "/api/bots/" + botA, "unknown", 401, false},
		{"unrouted is not audited", "POST", "/api/nowhere", "owner", 404, false},
		{"wrong method is not audited", "PUT", "/api/bots/" + botA, "owner", 405, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := newKernel(t)
			res := k.do(t, tt.method, tt.target, tt.token)
			require.Equal(t, tt.status, res.Code, res.Body.String())
			events := k.audit.published()
			if !tt.audited {
				assert.Empty(t, events)
				return
			}
			require.Len(t, events, 1)
			assert.Equal(t, tt.status, events[0].Status)
			assert.Equal(t, tt.method, events[0].Method)
		})
	}
}

func TestAuditEventFields(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	res := k.do(t, "PATCH", "/api/bots/"+botA+"?secret=shh", "member", "X-Request-Id", "req-abc.123")
	require.Equal(t, 200, res.Code)
	events := k.audit.published()
	require.Len(t, events, 1)
	e := events[0]
	assert.True(t, ids.Valid("evt", e.ID), e.ID)
	assert.Equal(t, audit.Event{
		ID:          e.ID,
		Time:        now,
		AccountID:   "acct_A",
		ActorUserID: "usr_member",
		TokenID:     "pat_member",
		TokenKind:   "pat",
		BotID:       botA,
		Method:      "PATCH",
		Route:       "PATCH /api/bots/{botID}",
		Status:      200,
		RequestID:   "req-abc.123",
	}, e)
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "shh", "no query string in the trail")

	// A bot token's event names the token and its kind but no user.
	k = newKernel(t)
	require.Equal(t, 200, k.do(t, "PATCH", "/api/bots/"+botA, "bot").Code)
	e = k.audit.published()[0]
	assert.Equal(t, "btk_a", e.TokenID)
	assert.Equal(t, "bot", e.TokenKind)
	assert.Empty(t, e.ActorUserID)
	assert.Equal(t, botA, e.BotID)

	// Account routes carry no bot.
	k = newKernel(t)
	require.Equal(t, 201, k.do(t, "POST", "/api/things", "owner").Code)
	e = k.audit.published()[0]
	assert.Empty(t, e.BotID)

	// A route whose path names no bot carries the bot its handler authorized: the caller's
	// only, never one Authorize refused.
	k = newKernel(t)
	require.Equal(t, 201, k.do(t, "POST", "/api/things/onbot?bot="+botA, "owner").Code)
	require.Equal(t, 404, k.do(t, "POST", "/api/things/onbot?bot="+botC, "owner").Code)
	events = k.audit.published()
	require.Len(t, events, 2)
	assert.Equal(t, botA, events[0].BotID)
	assert.Empty(t, events[1].BotID, "another account's bot is not recorded")
	assert.Equal(t, "POST /api/things", e.Route)
	assert.True(t, ids.Valid("req", e.RequestID), "a generated request id: %q", e.RequestID)
}

// trackingWriter notes when the response starts, so a publisher can check it has not.
type trackingWriter struct {
	*httptest.ResponseRecorder
	mu      sync.Mutex
	started bool
}

func (w *trackingWriter) WriteHeader(code int) {
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	w.ResponseRecorder.WriteHeader(code)
}

func (w *trackingWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.started = true
	w.mu.Unlock()
	return w.ResponseRecorder.Write(b)
}

func (w *trackingWriter) hasStarted() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started
}

func TestAuditPublishedBeforeTheResponse(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"/api/things", "/api/things/invalid", "/api/things/panic", "/api/things/silent"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			k := newKernel(t)
			w := &trackingWriter{ResponseRecorder: httptest.NewRecorder()}
			checked := false
			k.audit.check = func(audit.Event) {
				checked = true
				assert.False(t, w.hasStarted(), "the event is published before any byte of the response")
			}
			r := httptest.NewRequest(http.MethodPost, target, strings.NewReader("{}"))
			r.Header.Set("Authorization", "Bearer owner")
			k.mux.ServeHTTP(w, r)
			assert.True(t, checked)
			assert.True(t, w.hasStarted())
			assert.NotZero(t, w.Body.Len())
		})
	}
}

func TestAuditFailureKeepsTheResponse(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	k.audit.fail = true
	res := k.do(t, "POST", "/api/things", "owner")
	assert.Equal(t, 201, res.Code, "the mutation happened; the client hears so")
	assert.JSONEq(t, `{"bot":null}`, res.Body.String())
	assert.Len(t, k.audit.published(), 1)
	assert.Contains(t, k.logs.String(), "audit publish failed")

	res = k.do(t, "POST", "/api/things/invalid", "owner")
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "validation_failed", res.problem["code"])
}

func TestProblemRendering(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	res := k.do(t, "GET", "/api/things/conflict", "owner", "X-Request-Id", "req-1")
	require.Equal(t, http.StatusConflict, res.Code)
	assert.Equal(t, "application/problem+json", res.Header().Get("Content-Type"))
	assert.Equal(t, fmt.Sprint(res.Body.Len()), res.Header().Get("Content-Length"))
	assert.Equal(t, map[string]any{
		"type":             "https://docs.botplatform.dev/errors/stale_revision",
		"title":            "Conflict",
		"status":           float64(409),
		"detail":           "expected_revision does not match the current revision 7; reload and retry",
		"code":             "stale_revision",
		"request_id":       "req-1",
		"current_revision": float64(7),
	}, res.problem, "extensions cannot override the standard members")
	assert.Empty(t, res.Header().Get("Retry-After"))

	res = k.do(t, "GET", "/api/things/busy", "owner")
	assert.Equal(t, http.StatusServiceUnavailable, res.Code)
	assert.Equal(t, "temporarily_unavailable", res.problem["code"])
	assert.Equal(t, "1", res.Header().Get("Retry-After"))

	res = k.do(t, "GET", "/api/things/broken", "owner")
	assert.Equal(t, http.StatusInternalServerError, res.Code)
	assert.Equal(t, "internal_error", res.problem["code"])
	assert.Equal(t, "Internal Server Error", res.problem["title"])
	assert.NotContains(t, res.Body.String(), "hunter2", "the cause is not sent")
	assert.Contains(t, k.logs.String(), "hunter2", "it is logged")
}

func TestPanicsAndSilentHandlers(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"GET", "POST"} {
		k := newKernel(t)
		res := k.do(t, method, "/api/things/panic", "owner")
		assert.Equal(t, http.StatusInternalServerError, res.Code, method)
		assert.Equal(t, "internal_error", res.problem["code"], method)
		assert.NotContains(t, res.Body.String(), "secret panic text", method)
		assert.Equal(t, res.Header().Get("X-Request-Id"), res.problem["request_id"], method)
		assert.Contains(t, k.logs.String(), "secret panic text", "%s: the panic is logged", method)

		res = k.do(t, method, "/api/things/silent", "owner")
		assert.Equal(t, http.StatusInternalServerError, res.Code, method)
		assert.Equal(t, "internal_error", res.problem["code"], method)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, sent string
		kept       bool
	}{
		{"plain", "abc-123", true},
		{"every allowed character", "aZ09-_.:", true},
		{"uuid", "3f2b1c9e-8a4d-4f6b-9c1e-2d7a5b8c0e1f", true},
		{"128 characters", strings.Repeat("a", 128), true},
		{"129 characters", strings.Repeat("a", 129), false},
		{"space", "abc 123", false},
		{"header injection", "abc\r\nX-Evil: 1", false},
		{"quote", `abc"`, false},
		{"non-ASCII", "abcé", false},
		{"slash", "a/b", false},
		{"absent", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := newKernel(t)
			var headers []string
			if tt.sent != "" {
				headers = []string{"X-Request-Id", tt.sent}
			}
			res := k.do(t, "POST", "/api/things/invalid", "owner", headers...)
			got := res.Header().Get("X-Request-Id")
			if tt.kept {
				assert.Equal(t, tt.sent, got)
			} else {
				assert.NotEqual(t, tt.sent, got)
				assert.True(t, ids.Valid("req", got), "a fresh id: %q", got)
			}
			assert.Equal(t, got, res.problem["request_id"])
			require.Len(t, k.audit.published(), 1)
			assert.Equal(t, got, k.audit.published()[0].RequestID)
		})
	}
}

func TestUnrouted(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	res := k.do(t, "GET", "/api/nowhere", "owner")
	assert.Equal(t, http.StatusNotFound, res.Code)
	assert.Equal(t, "application/problem+json", res.Header().Get("Content-Type"))
	assert.Equal(t, "not_found", res.problem["code"])
	assert.NotEmpty(t, res.problem["request_id"])

	res = k.do(t, "GET", "/", "")
	assert.Equal(t, http.StatusNotFound, res.Code)

	res = k.do(t, "PUT", "/api/bots/"+botA, "owner")
	assert.Equal(t, http.StatusMethodNotAllowed, res.Code)
	assert.Equal(t, "GET, PATCH, DELETE", res.Header().Get("Allow"))
	assert.Equal(t, "method_not_allowed", res.problem["code"])

	res = k.do(t, "DELETE", "/api/things", "")
	assert.Equal(t, http.StatusMethodNotAllowed, res.Code, "405 needs no credentials: it reveals only the public route table")
	assert.Equal(t, "GET, POST", res.Header().Get("Allow"))

	// http.ServeMux would redirect these to the cleaned path with an HTML 301.
	for _, p := range []string{"/api//bots", "//api/bots", "/api/bots/./" + botA, "/api/x/../bots/" + botA, "/api/bots/" + botA + "/.."} {
		res = k.do(t, "GET", p, "owner")
		assert.Equal(t, http.StatusNotFound, res.Code, p)
		assert.Equal(t, "application/problem+json", res.Header().Get("Content-Type"), p)
		assert.Equal(t, "not_found", res.problem["code"], p)
		assert.Empty(t, res.Header().Get("Location"), p)
	}
}

func TestRequestLog(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	k.do(t, "PATCH", "/api/bots/"+botA, "owner", "X-Request-Id", "req-log")
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(k.logs.String()), "\n") {
		require.NoError(t, json.Unmarshal([]byte(l), &line))
		if line["msg"] == "request" {
			break
		}
	}
	assert.Equal(t, "request", line["msg"])
	assert.Equal(t, "req-log", line["request_id"])
	assert.Equal(t, "PATCH /api/bots/{botID}", line["route"])
	assert.Equal(t, float64(200), line["status"])
	assert.Equal(t, "acct_A", line["account_id"])
	assert.Equal(t, "pat_owner", line["token_id"])
}

func TestNewMuxRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	_, err := httpapi.NewMux(httpapi.Config{})
	require.Error(t, err)
	for _, dep := range []string{"Authenticate", "Bots", "Audit", "Log", "Now"} {
		assert.Contains(t, err.Error(), dep)
	}
	_, err = httpapi.NewMux(httpapi.Config{
		Authenticate: stubAuthenticate, Bots: &botLoader{}, Audit: &publisher{}, Now: time.Now,
	})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Log")
	assert.NotContains(t, err.Error(), "Audit")
}

func TestHandleRefusesBadDeclarations(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	h := func(w http.ResponseWriter, r *http.Request) error { return nil }
	assert.PanicsWithValue(t, "httpapi: non-public route without a scope: GET /api/x",
		func() { k.mux.Handle("GET /api/x", httpapi.Access{}, h) })
	assert.PanicsWithValue(t, "httpapi: non-public route without a scope: GET /api/y",
		func() { k.mux.Handle("GET /api/y", httpapi.Need(""), h) })
	assert.Panics(t, func() { k.mux.Handle("/api/z", httpapi.Public(), h) }, "no method")
	assert.Panics(t, func() { k.mux.Handle("GET api/z", httpapi.Public(), h) }, "no leading slash")
}

func TestRoutesTable(t *testing.T) {
	t.Parallel()
	k := newKernel(t)
	byPattern := map[string]httpapi.Route{}
	for _, rt := range k.mux.Routes() {
		byPattern[rt.Pattern()] = rt
	}
	rt := byPattern["PATCH /api/bots/{botID}"]
	assert.True(t, rt.BotScoped)
	assert.True(t, rt.Mutating())
	assert.Equal(t, httpapi.Need("bots:write", auth.RightReactions), rt.Access)
	rt = byPattern["GET /api/things"]
	assert.False(t, rt.BotScoped)
	assert.False(t, rt.Mutating())
	assert.True(t, byPattern["GET /healthz"].Access.Public)
	assert.True(t, byPattern["DELETE /api/bots/{botID}"].Access.PATOnly)
}
