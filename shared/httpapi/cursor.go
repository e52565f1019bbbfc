package httpapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/botplatform/api/shared/auth"
)

// Page size bounds of every list.
const (
	DefaultLimit = 50
	MaxLimit     = 200
)

// Cursors seals store cursors into opaque, tamper-proof list cursors. A sealed cursor is
// bound (HMAC) to the list it came from: the path, the filters and the account. Replaying
// it against another list, another filter or another account is a 400 invalid_cursor.
type Cursors struct {
	key []byte
}

// NewCursors returns Cursors signing with key (at least 32 bytes, secret, shared by every
// process that serves the same lists).
func NewCursors(key []byte) *Cursors { return &Cursors{key: key} }

const cursorVersion = 1
const macLen = 16

// seal returns base64url(version | store cursor | HMAC(binding, store cursor)[:16]).
func (c *Cursors) seal(binding, storeCursor string) string {
	raw := make([]byte, 0, 1+len(storeCursor)+macLen)
	raw = append(raw, cursorVersion)
	raw = append(raw, storeCursor...)
	raw = append(raw, c.mac(binding, storeCursor)...)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func (c *Cursors) open(binding, token string) (string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) < 1+macLen+1 || raw[0] != cursorVersion {
		return "", false
	}
	storeCursor := string(raw[1 : len(raw)-macLen])
	if !hmac.Equal(raw[len(raw)-macLen:], c.mac(binding, storeCursor)) {
		return "", false
	}
	return storeCursor, true
}

func (c *Cursors) mac(binding, storeCursor string) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(binding))
	m.Write([]byte{0})
	m.Write([]byte(storeCursor))
	return m.Sum(nil)[:macLen]
}

// PageRequest is a parsed page request: the limit and the store cursor to continue from.
type PageRequest struct {
	Limit  int
	Cursor string
	// binding is what the next cursor will be bound to.
	binding string
}

// Page parses limit (1..MaxLimit, default DefaultLimit) and cursor from the query.
func (c *Cursors) Page(r *http.Request) (PageRequest, error) {
	q := r.URL.Query()
	p := PageRequest{Limit: DefaultLimit, binding: binding(r, q)}
	if s := q.Get("limit"); s != "" || q.Has("limit") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxLimit {
			return p, InvalidParam("limit", "limit must be an integer from 1 to "+strconv.Itoa(MaxLimit))
		}
		p.Limit = n
	}
	if tok := q.Get("cursor"); tok != "" || q.Has("cursor") {
		sc, ok := c.open(p.binding, tok)
		if !ok {
			return p, E(KindInvalid, "invalid_cursor", "cursor is malformed, altered, or belongs to another list")
		}
		p.Cursor = sc
	}
	return p, nil
}

// Next seals the store's next cursor for the response; nil means the list is complete.
func (c *Cursors) Next(p PageRequest, storeNext string) *string {
	if storeNext == "" {
		return nil
	}
	s := c.seal(p.binding, storeNext)
	return &s
}

// binding identifies the list a cursor belongs to: the caller (account and user), method,
// path and every query parameter except the paging ones, in canonical order.
func binding(r *http.Request, q url.Values) string {
	var b strings.Builder
	if p, ok := auth.FromContext(r.Context()); ok {
		// The user too: some lists (a user's own PATs) differ between users of one account.
		b.WriteString(p.AccountID)
		b.WriteByte('/')
		b.WriteString(p.UserID)
	}
	b.WriteByte('|')
	b.WriteString(r.Method)
	b.WriteByte(' ')
	b.WriteString(r.URL.Path)
	keys := make([]string, 0, len(q))
	for k := range q {
		if k != "limit" && k != "cursor" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range q[k] {
			b.WriteByte('|')
			b.WriteString(url.QueryEscape(k))
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(v))
		}
	}
	return b.String()
}

// ServeList answers a list route: it parses limit and cursor (400 when bad), asks fetch for
// that page, and writes it with its sealed next cursor.
func ServeList[T any](w http.ResponseWriter, r *http.Request, c *Cursors, fetch func(limit int, cursor string) ([]T, string, error)) error {
	page, err := c.Page(r)
	if err != nil {
		return err
	}
	items, next, err := fetch(page.Limit, page.Cursor)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, List[T]{Data: items, NextCursor: c.Next(page, next)})
}

// List is the response shape of every list route.
type List[T any] struct {
	Data       []T     `json:"data"`
	NextCursor *string `json:"next_cursor"`
}

// MarshalJSON writes an empty list as [] (never null), whichever way the slice was built.
func (l List[T]) MarshalJSON() ([]byte, error) {
	type plain List[T]
	if l.Data == nil {
		l.Data = []T{}
	}
	return json.Marshal(plain(l))
}
