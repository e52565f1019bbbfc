package pats

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
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

func newServer(t *testing.T) *httpapitest.Server {
	t.Helper()
	now := func() time.Time { return t0 }
	s := httpapitest.New(t, httpapitest.Config{Now: now})
	Routes(s.Mux, s.Auth, s.Cursors, now)
	return s
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	full := s.PAT(t, s.Owner, "*")

	res := s.DoAs(t, full, "POST", "/api/personal-access-tokens",
		`{"name":"ci","scopes":["bots:read","audit:read"],"expires_in_days":30}`)
	require.Equal(t, 201, res.Code)
	created := res.JSON
	tok, _ := created["token"].(string)
	kind, ok := auth.ParseToken(tok)
	require.True(t, ok)
	assert.Equal(t, auth.KindPAT, kind)
	assert.Equal(t, "ci", created["name"])
	assert.Equal(t, []any{"audit:read", "bots:read"}, created["scopes"])
	assert.Equal(t, t0.Add(30*24*time.Hour).Format(time.RFC3339), created["expires_at"])
	assert.Equal(t, t0.Format(time.RFC3339), created["created_at"])

	res = s.DoAs(t, full, "GET", "/api/personal-access-tokens", "")
	require.Equal(t, 200, res.Code)
	assert.Len(t, res.JSON["data"], 2)
	assert.NotContains(t, res.Body, tok, "a listing never carries a token")
	assert.NotContains(t, res.Body, full)
	assert.NotContains(t, res.Body, `"token"`)

	// Only a full-scope PAT manages PATs.
	res = s.DoAs(t, tok, "GET", "/api/personal-access-tokens", "")
	assert.Equal(t, 403, res.Code)
	assert.Equal(t, "insufficient_scope", res.JSON["code"])

	res = s.DoAs(t, full, "POST", "/api/personal-access-tokens", `{"name":"","scopes":[],"expires_in_days":400}`)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "validation_failed", res.JSON["code"])
	assert.Len(t, res.JSON["errors"], 3)

	res = s.DoAs(t, full, "POST", "/api/personal-access-tokens", `{"name":"x","scopes":["*"],"expires_in_days":1,"token":"mine"}`)
	assert.Equal(t, 400, res.Code)
	assert.Equal(t, "unknown_field", res.JSON["code"])

	id, _ := created["id"].(string)
	res = s.DoAs(t, full, "DELETE", "/api/personal-access-tokens/"+id, "")
	assert.Equal(t, 204, res.Code)
	_, err := s.Auth.Authenticate(t.Context(), "Bearer "+tok)
	assert.ErrorIs(t, err, auth.ErrUnknownToken, "revoked at once")
	res = s.DoAs(t, full, "DELETE", "/api/personal-access-tokens/"+id, "")
	assert.Equal(t, 404, res.Code)
	assert.Equal(t, "not_found", res.JSON["code"])
	res = s.DoAs(t, full, "DELETE", "/api/personal-access-tokens/nope", "")
	assert.Equal(t, 404, res.Code)
}
