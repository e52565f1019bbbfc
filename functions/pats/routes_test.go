package pats

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store/sqlite"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func TestParseCreateRequest(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	at := func(t time.Time) *string { return ptr(t.Format(time.RFC3339)) }
	tests := []struct {
		name     string
		req      createRequest
		want     time.Time
		problems []string // fields with a problem; nil when valid
	}{
		{"expires_at", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0.Add(30 * day))}, t0.Add(30 * day), nil},
		{"expires_at with an offset", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: ptr("2026-03-02T14:00:00+02:00")}, t0.Add(day), nil},
		{"expires_at a minute away", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0.Add(time.Minute))}, t0.Add(time.Minute), nil},
		{"expires_at 365 days away", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0.Add(365 * day))}, t0.Add(365 * day), nil},
		{"expires_in_days 1", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresInDays: ptr(1)}, t0.Add(day), nil},
		{"expires_in_days 365", createRequest{Name: "ci", Scopes: []string{"*"}, ExpiresInDays: ptr(365)}, t0.Add(365 * day), nil},

		{"neither", createRequest{Name: "ci", Scopes: []string{"bots:read"}}, time.Time{}, []string{"expires_at"}},
		{"both", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0.Add(day)), ExpiresInDays: ptr(1)}, time.Time{}, []string{"expires_at"}},
		{"not RFC 3339", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: ptr("2027-01-31")}, time.Time{}, []string{"expires_at"}},
		{"no zone", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: ptr("2026-04-01T00:00:00")}, time.Time{}, []string{"expires_at"}},
		{"empty string", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: ptr("")}, time.Time{}, []string{"expires_at"}},
		{"in the past", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0.Add(-time.Hour))}, time.Time{}, []string{"expires_at"}},
		{"now", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0)}, time.Time{}, []string{"expires_at"}},
		{"under a minute", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0.Add(59 * time.Second))}, time.Time{}, []string{"expires_at"}},
		{"over 365 days", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresAt: at(t0.Add(366 * day))}, time.Time{}, []string{"expires_at"}},
		{"expires_in_days 0", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresInDays: ptr(0)}, time.Time{}, []string{"expires_in_days"}},
		{"expires_in_days -1", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresInDays: ptr(-1)}, time.Time{}, []string{"expires_in_days"}},
		{"expires_in_days 366", createRequest{Name: "ci", Scopes: []string{"bots:read"}, ExpiresInDays: ptr(366)}, time.Time{}, []string{"expires_in_days"}},

		{"no name", createRequest{Scopes: []string{"bots:read"}, ExpiresInDays: ptr(1)}, time.Time{}, []string{"name"}},
		{"long name", createRequest{Name: strings.Repeat("n", auth.MaxNameLen+1), Scopes: []string{"bots:read"}, ExpiresInDays: ptr(1)}, time.Time{}, []string{"name"}},
		{"no scopes", createRequest{Name: "ci", ExpiresInDays: ptr(1)}, time.Time{}, []string{"scopes"}},
		{"unknown scope", createRequest{Name: "ci", Scopes: []string{"bots:delete"}, ExpiresInDays: ptr(1)}, time.Time{}, []string{"scopes"}},
		{"everything wrong", createRequest{Scopes: []string{"x"}}, time.Time{}, []string{"name", "scopes", "expires_at"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scopes, exp, err := tt.req.parse(t0)
			if tt.problems != nil {
				var he *httpapi.Error
				require.True(t, errors.As(err, &he), "%v", err)
				assert.Equal(t, 400, he.Status())
				assert.Equal(t, "validation_failed", he.Code)
				var got []string
				for _, fe := range he.Extensions["errors"].([]httpapi.FieldError) {
					got = append(got, fe.Field)
				}
				assert.Equal(t, tt.problems, got)
				return
			}
			require.NoError(t, err)
			assert.True(t, tt.want.Equal(exp), "expiry %v, want %v", exp, tt.want)
			assert.NotEmpty(t, scopes)
		})
	}
}

// The routes, served by the real kernel over a real store.

type noBots struct{}

func (noBots) LoadBot(context.Context, string, string) (any, error) {
	return nil, httpapi.NotFound("bot")
}

type server struct {
	mux   *httpapi.Mux
	auth  *auth.Service
	acct  auth.Account
	owner auth.User
}

func newServer(t *testing.T) *server {
	t.Helper()
	now := func() time.Time { return t0 }
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"), sqlite.WithClock(now))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	a := auth.NewService(st, now, nil)
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: httpapi.BearerAuth(a), Bots: noBots{}, Audit: audit.NewLog(st),
		Log: slog.New(slog.DiscardHandler), Now: now,
	})
	require.NoError(t, err)
	Routes(mux, a, httpapi.NewCursors([]byte("0123456789abcdef0123456789abcdef")), now)
	acct, owner, err := a.CreateAccount(t.Context(), "Acme")
	require.NoError(t, err)
	return &server{mux: mux, auth: a, acct: acct, owner: owner}
}

func (s *server) token(t *testing.T, scopes ...string) string {
	t.Helper()
	_, tok, err := s.auth.IssuePAT(t.Context(), s.acct.ID, s.owner.ID, "t", scopes, t0.Add(time.Hour))
	require.NoError(t, err)
	return tok
}

func (s *server) do(t *testing.T, method, path, tok, body string) (int, map[string]any, string) {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+tok)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	s.mux.ServeHTTP(w, r)
	var m map[string]any
	if w.Body.Len() > 0 {
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &m), w.Body.String())
	}
	return w.Code, m, w.Body.String()
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	full := s.token(t, "*")

	status, created, _ := s.do(t, "POST", "/api/personal-access-tokens", full,
		`{"name":"ci","scopes":["bots:read","audit:read"],"expires_in_days":30}`)
	require.Equal(t, 201, status)
	tok, _ := created["token"].(string)
	kind, ok := auth.ParseToken(tok)
	require.True(t, ok)
	assert.Equal(t, auth.KindPAT, kind)
	assert.Equal(t, "ci", created["name"])
	assert.Equal(t, []any{"audit:read", "bots:read"}, created["scopes"])
	assert.Equal(t, t0.Add(30*24*time.Hour).Format(time.RFC3339), created["expires_at"])
	assert.Equal(t, t0.Format(time.RFC3339), created["created_at"])

	status, list, body := s.do(t, "GET", "/api/personal-access-tokens", full, "")
	require.Equal(t, 200, status)
	assert.Len(t, list["data"], 2)
	assert.NotContains(t, body, tok, "a listing never carries a token")
	assert.NotContains(t, body, full)
	assert.NotContains(t, body, `"token"`)

	// Only a full-scope PAT manages PATs.
	status, p, _ := s.do(t, "GET", "/api/personal-access-tokens", tok, "")
	assert.Equal(t, 403, status)
	assert.Equal(t, "insufficient_scope", p["code"])

	status, p, _ = s.do(t, "POST", "/api/personal-access-tokens", full, `{"name":"","scopes":[],"expires_in_days":400}`)
	assert.Equal(t, 400, status)
	assert.Equal(t, "validation_failed", p["code"])
	assert.Len(t, p["errors"], 3)

	status, p, _ = s.do(t, "POST", "/api/personal-access-tokens", full, `{"name":"x","scopes":["*"],"expires_in_days":1,"token":"mine"}`)
	assert.Equal(t, 400, status)
	assert.Equal(t, "unknown_field", p["code"])

	id, _ := created["id"].(string)
	status, _, _ = s.do(t, "DELETE", "/api/personal-access-tokens/"+id, full, "")
	assert.Equal(t, 204, status)
	_, err := s.auth.Authenticate(t.Context(), "Bearer "+tok)
	assert.ErrorIs(t, err, auth.ErrUnknownToken, "revoked at once")
	status, p, _ = s.do(t, "DELETE", "/api/personal-access-tokens/"+id, full, "")
	assert.Equal(t, 404, status)
	assert.Equal(t, "not_found", p["code"])
	status, _, _ = s.do(t, "DELETE", "/api/personal-access-tokens/nope", full, "")
	assert.Equal(t, 404, status)
}
