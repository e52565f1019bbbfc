package mcptool_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/mcptool"
)

// numbers is a list of 0..n-1 paged by a store cursor that is the next number.
func numbers(n int) func(limit int, cursor string) ([]int, string, error) {
	return func(limit int, cursor string) ([]int, string, error) {
		from := 0
		if cursor != "" {
			from, _ = strconv.Atoi(cursor)
		}
		var out []int
		for i := from; i < n && len(out) < limit; i++ {
			out = append(out, i)
		}
		next := ""
		if from+len(out) < n {
			next = strconv.Itoa(from + len(out))
		}
		return out, next, nil
	}
}

// A list tool pages as its REST list does, with the REST list's cursors: the route continues
// the tool's page and the tool the route's; a cursor of another list or another caller, or
// a bad limit, is refused as the route refuses it.
func TestListPagesLikeTheRoute(t *testing.T) {
	t.Parallel()
	cursors := httpapi.NewCursors([]byte("0123456789abcdef0123456789abcdef"))
	ctx := as(pat(auth.Scopes{auth.Full}))
	const path = "/api/bots/bot_1/things"
	filters := url.Values{"label": {"lbl_1"}}
	two := 2

	first, err := mcptool.List(ctx, cursors, path, filters, mcptool.Page{Limit: &two}, numbers(5))
	require.NoError(t, err)
	assert.Equal(t, []int{0, 1}, first.Data)
	require.NotNil(t, first.NextCursor)

	// The REST route continues from the tool's cursor.
	r := httptest.NewRequestWithContext(ctx, http.MethodGet, path+"?label=lbl_1&limit=2&cursor="+*first.NextCursor, nil)
	rec := httptest.NewRecorder()
	require.NoError(t, httpapi.ServeList(rec, r, cursors, numbers(5)))
	var page struct {
		Data       []int   `json:"data"`
		NextCursor *string `json:"next_cursor"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
	assert.Equal(t, []int{2, 3}, page.Data)

	// And the tool from the route's.
	last, err := mcptool.List(ctx, cursors, path, filters, mcptool.Page{Cursor: page.NextCursor}, numbers(5))
	require.NoError(t, err)
	assert.Equal(t, []int{4}, last.Data)
	assert.Nil(t, last.NextCursor, "the list is complete")

	_, err = mcptool.List(ctx, cursors, path, url.Values{"label": {"lbl_2"}}, mcptool.Page{Cursor: first.NextCursor}, numbers(5))
	assert.Equal(t, "invalid_cursor", httpapi.AsError(err).Code, "a cursor of the list under another filter")
	_, err = mcptool.List(as(&auth.Principal{AccountID: "acct_B", UserID: "usr_2"}), cursors, path, filters, mcptool.Page{Cursor: first.NextCursor}, numbers(5))
	assert.Equal(t, "invalid_cursor", httpapi.AsError(err).Code, "another caller's cursor")
	zero := 0
	_, err = mcptool.List(ctx, cursors, path, filters, mcptool.Page{Limit: &zero}, numbers(5))
	assert.Equal(t, "invalid_parameter", httpapi.AsError(err).Code)
	assert.Equal(t, "limit", httpapi.AsError(err).Extensions["parameter"])

	empty, err := mcptool.List(ctx, cursors, path, nil, mcptool.Page{}, numbers(0))
	require.NoError(t, err)
	b, err := json.Marshal(empty)
	require.NoError(t, err)
	assert.JSONEq(t, `{"data":[],"next_cursor":null}`, string(b))
}
