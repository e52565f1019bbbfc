package httpapi_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

var cursorKey = []byte("0123456789abcdef0123456789abcdef")

// listRequest is a GET of target by a principal of account ("" for none); account may
// name a user too, as "account/user".
func listRequest(account, target string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	if account != "" {
		acct, user, _ := strings.Cut(account, "/")
		r = r.WithContext(auth.NewContext(r.Context(), &auth.Principal{AccountID: acct, UserID: user}))
	}
	return r
}

// sealed returns the cursor a first page of target would hand out for storeNext.
func sealed(t *testing.T, c *httpapi.Cursors, account, target, storeNext string) string {
	t.Helper()
	p, err := c.Page(listRequest(account, target))
	require.NoError(t, err)
	next := c.Next(p, storeNext)
	require.NotNil(t, next)
	return *next
}

func withCursor(target, cursor string) string {
	u, _ := url.Parse(target)
	q := u.Query()
	q.Set("cursor", cursor)
	u.RawQuery = q.Encode()
	return u.String()
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	c := httpapi.NewCursors(cursorKey)
	const target = "/api/audit-events?bot_id=bot_1&limit=10"
	storeNext := "opaque store cursor \x00 with bytes \xff"
	cur := sealed(t, c, "acct_A", target, storeNext)
	assert.NotContains(t, cur, "opaque", "the store cursor is not readable as is")

	p, err := c.Page(listRequest("acct_A", withCursor(target, cur)))
	require.NoError(t, err)
	assert.Equal(t, storeNext, p.Cursor)
	assert.Equal(t, 10, p.Limit)

	// The limit is not part of the binding: a client may change page size mid-list.
	p, err = c.Page(listRequest("acct_A", withCursor("/api/audit-events?bot_id=bot_1&limit=3", cur)))
	require.NoError(t, err)
	assert.Equal(t, storeNext, p.Cursor)

	// An empty store cursor means the list is complete.
	assert.Nil(t, c.Next(p, ""))
}

func TestCursorRejected(t *testing.T) {
	t.Parallel()
	c := httpapi.NewCursors(cursorKey)
	const target = "/api/bots/bot_1/api-tokens?status=active"
	cur := sealed(t, c, "acct_A", target, "next-page")
	raw, err := base64.RawURLEncoding.DecodeString(cur)
	require.NoError(t, err)

	type attempt struct {
		name, account, target string
	}
	attempts := []attempt{
		{"another path", "acct_A", withCursor("/api/bots/bot_2/api-tokens?status=active", cur)},
		{"another list", "acct_A", withCursor("/api/personal-access-tokens?status=active", cur)},
		{"another filter value", "acct_A", withCursor("/api/bots/bot_1/api-tokens?status=revoked", cur)},
		{"a filter dropped", "acct_A", withCursor("/api/bots/bot_1/api-tokens", cur)},
		{"a filter added", "acct_A", withCursor("/api/bots/bot_1/api-tokens?status=active&x=1", cur)},
		{"a filter repeated", "acct_A", withCursor("/api/bots/bot_1/api-tokens?status=active&status=active", cur)},
		{"another account", "acct_B", withCursor(target, cur)},
		{"another user of the account", "acct_A/usr_2", withCursor(target, cur)},
		{"no account", "", withCursor(target, cur)},
		{"empty cursor", "acct_A", withCursor(target, "")},
		{"garbage", "acct_A", withCursor(target, "!!!not base64")},
		{"truncated", "acct_A", withCursor(target, cur[:len(cur)-2])},
		{"too short", "acct_A", withCursor(target, base64.RawURLEncoding.EncodeToString(raw[:16]))},
	}
	// Every single changed byte, the version byte and the MAC included.
	for i := range raw {
		tampered := append([]byte(nil), raw...)
		tampered[i] ^= 0x01
		attempts = append(attempts, attempt{fmt.Sprintf("byte %d tampered", i), "acct_A", withCursor(target, base64.RawURLEncoding.EncodeToString(tampered))})
	}
	// A cursor sealed by a process with another key.
	foreign := sealed(t, httpapi.NewCursors([]byte("another key, another deployment!")), "acct_A", target, "next-page")
	attempts = append(attempts, attempt{"another key", "acct_A", withCursor(target, foreign)})

	for _, a := range attempts {
		_, err := c.Page(listRequest(a.account, a.target))
		he := asHTTPError(t, err)
		assert.Equal(t, http.StatusBadRequest, he.Status(), a.name)
		assert.Equal(t, "invalid_cursor", he.Code, a.name)
	}

	// Query parameters in another order are the same list.
	reordered := sealed(t, c, "acct_A", "/api/x?b=2&a=1", "n")
	p, err := c.Page(listRequest("acct_A", withCursor("/api/x?a=1&b=2", reordered)))
	require.NoError(t, err)
	assert.Equal(t, "n", p.Cursor)
}

func TestPageLimit(t *testing.T) {
	t.Parallel()
	c := httpapi.NewCursors(cursorKey)
	tests := []struct {
		query string
		want  int
		ok    bool
	}{
		{"", httpapi.DefaultLimit, true},
		{"?limit=1", 1, true},
		{"?limit=200", 200, true},
		{"?limit=37", 37, true},
		{"?limit=0", 0, false},
		{"?limit=201", 0, false},
		{"?limit=-1", 0, false},
		{"?limit=abc", 0, false},
		{"?limit=", 0, false},
		{"?limit", 0, false},
		{"?limit=1.5", 0, false},
		{"?limit=%2010", 0, false},
		{"?limit=99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			t.Parallel()
			p, err := c.Page(listRequest("acct_A", "/api/bots"+tt.query))
			if tt.ok {
				require.NoError(t, err)
				assert.Equal(t, tt.want, p.Limit)
				assert.Empty(t, p.Cursor)
				return
			}
			he := asHTTPError(t, err)
			assert.Equal(t, http.StatusBadRequest, he.Status())
			assert.Equal(t, "invalid_parameter", he.Code)
			assert.Equal(t, "limit", he.Extensions["parameter"])
		})
	}
}
