package mcptool

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/botplatform/api/shared/httpapi"
)

// Page is the paging arguments of a list tool: embed it in the tool's arguments.
type Page struct {
	Limit  *int    `json:"limit,omitempty" jsonschema:"how many items to return, 1 to 200 (default 50)"`
	Cursor *string `json:"cursor,omitempty" jsonschema:"the next_cursor of the previous page, sent back unchanged, for the next page"`
}

// List answers a list tool with a page of the REST list at path (a plain path such as
// "/api/bots/bot_.../reactions"), as httpapi.ServeList answers it: query holds the list's
// filters as the route takes them, p the paging arguments. The cursors are the route's
// own, bound to the caller, the path and the filters: the tool and the route can continue
// each other's pages, and a cursor of another list is refused (invalid_cursor).
func List[T any](ctx context.Context, c *httpapi.Cursors, path string, query url.Values, p Page, fetch func(limit int, cursor string) ([]T, string, error)) (httpapi.List[T], error) {
	q := url.Values{}
	for k, vs := range query {
		q[k] = append([]string(nil), vs...)
	}
	if p.Limit != nil {
		q.Set("limit", strconv.Itoa(*p.Limit))
	}
	if p.Cursor != nil {
		q.Set("cursor", *p.Cursor)
	}
	u := &url.URL{Path: path, RawQuery: q.Encode()}
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return httpapi.List[T]{}, err
	}
	page, err := c.Page(r)
	if err != nil {
		return httpapi.List[T]{}, err
	}
	items, next, err := fetch(page.Limit, page.Cursor)
	if err != nil {
		return httpapi.List[T]{}, err
	}
	return httpapi.List[T]{Data: items, NextCursor: c.Next(page, next)}, nil
}
