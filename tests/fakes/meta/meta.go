// Package meta is a fake of Facebook Login and the Graph API on 127.0.0.1, for tests of the
// Meta connections family. It speaks the real wire format and checks what Facebook checks:
//
//   - the Login dialog (GET /<version>/dialog/oauth): the app id, the registered redirect
//     URI, response_type=code and a state; it answers the browser with a redirect to the
//     redirect URI carrying a code and the state, or, when told to, the denial
//     (error=access_denied&error_reason=user_denied);
//   - the token endpoint (/<version>/oauth/access_token): the authorization code grant
//     (app id and secret, the same redirect URI, a code used once within 10 minutes) and
//     grant_type=fb_exchange_token (a valid user token in, a long-lived one out);
//   - one Facebook user signed in to the dialog at a time (UserID by default, SignInAs), each
//     token the user's: me answers the token's user, DELETE me/permissions revokes that
//     user's tokens;
//   - Graph reads with a user token (Authorization: Bearer, or access_token): the
//     appsecret_proof must be the token's HMAC-SHA256 under the app secret; me, me/permissions
//     (GET and DELETE), me/accounts, me/businesses, {business}/owned_whatsapp_business_accounts
//     and {waba}/phone_numbers, paged with a small page size and absolute paging.next links
//     that carry the token as Graph's do;
//   - Graph's error shape {"error": {"message", "type", "code", "error_subcode",
//     "fbtrace_id"}}, code 190 for a token it refuses, and any other failure a test injects
//     on a path (FailWith).
//
// The WhatsApp Business account and phone number it shows are the WhatsApp Cloud API fake's
// (tests/fakes/whatsapp) defaults, so a number read here can be connected as a channel there
// once the fake's long-lived token is given to that fake (AddToken). It imports nothing of
// the family, so a mismatch shows up as a failing test.
package meta

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// The app and the account every fake starts with.
const (
	Version     = "v21.0"
	AppID       = "874512093651234"
	AppSecret   = "fake-meta-app-secret-0123456789"
	RedirectURI = "https://api.example/api/meta/callback"

	UserID   = "10000000000001"
	UserName = "Dana Demo"
	// SecondUserID is another admin of the same business (SignInAs): the same assets.
	SecondUserID   = "10000000000002"
	SecondUserName = "Sam Second"

	PageID        = "201000000000001"
	PageName      = "Demo Shop"
	OtherPageID   = "201000000000002"
	OtherPageName = "Demo Shop Blog"
	InstagramID   = "17841400000000001"
	InstagramUser = "demo.shop"
	BusinessID    = "301000000000001"
	BusinessName  = "Demo Shop LLC"
	// WABAID and PhoneNumberID are tests/fakes/whatsapp's BusinessAccountID and PhoneNumberID.
	WABAID             = "102290129340398"
	WABAName           = "Demo Shop WhatsApp"
	PhoneNumberID      = "106540352242922"
	DisplayPhoneNumber = "+1 555-010-0199"
	VerifiedName       = "Demo Shop"
	// UnverifiedPhoneID is a second number of the account, not yet verified.
	UnverifiedPhoneID = "106540352242923"
)

// DefaultPageSize is the fake's page size: 1, so that every edge with two entries pages.
const DefaultPageSize = 1

// Scopes are every permission the fake grants unless told to decline some.
var Scopes = []string{"pages_show_list", "pages_messaging", "instagram_basic", "instagram_manage_messages",
	"whatsapp_business_management", "whatsapp_business_messaging", "business_management", "public_profile"}

type code struct {
	user     string
	redirect string
	expires  time.Time
	used     bool
}

// Server is the fake. Its methods are safe for concurrent use.
type Server struct {
	srv      *httptest.Server
	requests fakehttp.Log[string]

	mu          sync.Mutex
	codes       map[string]*code
	tokens      map[string]string // valid user tokens (short- and long-lived) -> their user's id
	users       map[string]string // user id -> name
	user        string            // who signs in to the dialog
	long        []string          // long-lived tokens, in the order issued
	issued      []string          // every token issued
	rejected    map[string]bool
	deny        bool
	declined    []string
	longTTL     time.Duration
	pageSize    int
	revocations int
	n           int
	failures    map[string][]*apiError // by path after the version: the next answers
}

// New starts a fake on 127.0.0.1, closed when the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{codes: map[string]*code{}, tokens: map[string]string{}, rejected: map[string]bool{},
		users: map[string]string{UserID: UserName}, user: UserID, longTTL: 60 * 24 * time.Hour, pageSize: DefaultPageSize}
	s.srv = fakehttp.Start(t, http.HandlerFunc(s.serve))
	return s
}

// URL is the fake's root: the Graph base URL and the dialog base URL (without a version).
func (s *Server) URL() string { return s.srv.URL }

// Deny makes the dialog answer the user's refusal from now on (or approval again).
func (s *Server) Deny(deny bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = deny
}

// SignInAs makes the dialog sign in as the Facebook user id (named name) from now on: the
// codes it gives, and the tokens they are exchanged for, are that user's. Every user sees
// the same assets (admins of the same pages and business).
func (s *Server) SignInAs(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users[id] = name
	s.user = id
}

// Decline makes the user decline these permissions in the dialog.
func (s *Server) Decline(perms ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.declined = append([]string(nil), perms...)
}

// SetLongLivedTTL sets the lifetime of the long-lived tokens issued from now on (60 days
// by default, Facebook's).
func (s *Server) SetLongLivedTTL(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.longTTL = d
}

// RejectToken makes token invalid from now on (code 190).
func (s *Server) RejectToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejected[token] = true
}

// FailWith makes the next n requests to path (after the version: "me/accounts",
// "oauth/access_token") answer Graph's error shape with status and code, as Graph does when
// it is down (5xx, code 1 or 2) or refuses a call (400, code 10: a permission, 100: a
// parameter). The failures are answered before anything else is checked.
func (s *Server) FailWith(path string, n, status, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failures == nil {
		s.failures = map[string][]*apiError{}
	}
	for range n {
		s.failures[path] = append(s.failures[path], &apiError{status: status, code: code,
			message: fmt.Sprintf("(#%d) failure injected by the test", code)})
	}
}

// failure is the next injected failure of path, if any.
func (s *Server) failure(path string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.failures[path]
	if len(f) == 0 {
		return nil
	}
	s.failures[path] = f[1:]
	return f[0]
}

// Tokens are every token the fake issued (codes' short-lived ones and long-lived ones).
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// LongLived are the long-lived tokens issued, in order.
func (s *Server) LongLived() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.long)
}

// Revocations counts DELETE me/permissions calls that succeeded.
func (s *Server) Revocations() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.revocations
}

// Requests are "METHOD /path" of every request, in order (never a query).
func (s *Server) Requests() []string { return s.requests.All() }

func (s *Server) mint(prefix string) string {
	s.n++
	return prefix + strconv.Itoa(s.n) + fakehttp.RandomString(24)
}

type apiError struct {
	status, code, subcode int
	typ, message          string
}

func (e *apiError) write(w http.ResponseWriter) {
	typ := e.typ
	if typ == "" {
		typ = "OAuthException"
	}
	fakehttp.WriteJSON(w, e.status, map[string]any{"error": map[string]any{"message": e.message, "type": typ, "code": e.code,
		"error_subcode": e.subcode, "fbtrace_id": "AbCdEfGhIjK"}})
}

func invalid(format string, args ...any) *apiError {
	return &apiError{status: 400, code: 100, message: fmt.Sprintf(format, args...)}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(r.Method + " " + r.URL.Path)
	if err := s.route(w, r); err != nil {
		err.write(w)
	}
}

func (s *Server) route(w http.ResponseWriter, r *http.Request) *apiError {
	rest, ok := strings.CutPrefix(r.URL.Path, "/"+Version+"/")
	if !ok {
		return &apiError{status: 400, code: 2500, message: "Unknown path components: " + r.URL.Path}
	}
	if f := s.failure(rest); f != nil {
		return f
	}
	switch rest {
	case "dialog/oauth":
		s.dialog(w, r)
		return nil
	case "oauth/access_token":
		return s.token(w, r)
	}
	token, aerr := s.authenticate(r)
	if aerr != nil {
		return aerr
	}
	parts := strings.Split(rest, "/")
	switch {
	case rest == "me" && r.Method == http.MethodGet:
		s.mu.Lock()
		user := s.tokens[token]
		name := s.users[user]
		s.mu.Unlock()
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"id": user, "name": name})
		return nil
	case rest == "me/permissions" && r.Method == http.MethodGet:
		return s.page(w, r, s.permissions())
	case rest == "me/permissions" && r.Method == http.MethodDelete:
		s.mu.Lock()
		user := s.tokens[token]
		for t, u := range s.tokens {
			if u == user {
				s.rejected[t] = true
			}
		}
		s.revocations++
		s.mu.Unlock()
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"success": true})
		return nil
	case rest == "me/accounts" && r.Method == http.MethodGet:
		return s.page(w, r, []any{
			map[string]any{"id": PageID, "name": PageName, "tasks": []string{"ANALYZE", "ADVERTISE", "MESSAGING", "MODERATE", "CREATE_CONTENT", "MANAGE"},
				"instagram_business_account": map[string]any{"id": InstagramID, "username": InstagramUser, "name": PageName}},
			map[string]any{"id": OtherPageID, "name": OtherPageName, "tasks": []string{"ANALYZE"}},
		})
	case rest == "me/businesses" && r.Method == http.MethodGet:
		return s.page(w, r, []any{map[string]any{"id": BusinessID, "name": BusinessName}})
	case len(parts) == 2 && parts[0] == BusinessID && parts[1] == "owned_whatsapp_business_accounts" && r.Method == http.MethodGet:
		return s.page(w, r, []any{map[string]any{"id": WABAID, "name": WABAName}})
	case len(parts) == 2 && parts[0] == WABAID && parts[1] == "phone_numbers" && r.Method == http.MethodGet:
		return s.page(w, r, []any{
			map[string]any{"id": PhoneNumberID, "display_phone_number": DisplayPhoneNumber, "verified_name": VerifiedName,
				"quality_rating": "GREEN", "code_verification_status": "VERIFIED"},
			map[string]any{"id": UnverifiedPhoneID, "display_phone_number": "+1 555-010-0200", "verified_name": VerifiedName,
				"quality_rating": "UNKNOWN", "code_verification_status": "NOT_VERIFIED"},
		})
	}
	return &apiError{status: 400, code: 100, subcode: 33, message: fmt.Sprintf("Unsupported %s request. Object with ID '%s' does not exist, "+
		"cannot be loaded due to missing permissions, or does not support this operation.", strings.ToLower(r.Method), parts[0])}
}

func (s *Server) permissions() []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []any{}
	for _, p := range Scopes {
		status := "granted"
		if slices.Contains(s.declined, p) {
			status = "declined"
		}
		out = append(out, map[string]any{"permission": p, "status": status})
	}
	return out
}

// page answers items a page at a time: limit (at most the fake's page size), after (an
// index), and an absolute paging.next with the request's query, as Graph's (which carries
// the access token).
func (s *Server) page(w http.ResponseWriter, r *http.Request, items []any) *apiError {
	s.mu.Lock()
	size := s.pageSize
	s.mu.Unlock()
	q := r.URL.Query()
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			return invalid("(#100) Param limit must be a positive integer")
		}
		size = min(size, n)
	}
	from := 0
	if a := q.Get("after"); a != "" {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 || n > len(items) {
			return invalid("(#100) Invalid cursor")
		}
		from = n
	}
	to := min(from+size, len(items))
	paging := map[string]any{"cursors": map[string]any{"before": strconv.Itoa(from), "after": strconv.Itoa(to)}}
	if to < len(items) {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("after", strconv.Itoa(to))
		if next.Get("access_token") == "" {
			if tok, ok := bearer(r); ok {
				next.Set("access_token", tok)
			}
		}
		paging["next"] = s.srv.URL + r.URL.Path + "?" + next.Encode()
	}
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"data": items[from:to], "paging": paging})
	return nil
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, v, ok := strings.Cut(h, " ")
	if !ok || (!strings.EqualFold(scheme, "Bearer") && !strings.EqualFold(scheme, "OAuth")) {
		return "", false
	}
	return strings.TrimSpace(v), true
}

// authenticate reads the token (Authorization, else access_token) and checks it and its
// appsecret_proof.
func (s *Server) authenticate(r *http.Request) (string, *apiError) {
	tok := r.URL.Query().Get("access_token")
	if h := r.Header.Get("Authorization"); h != "" {
		t, ok := bearer(r)
		if !ok {
			return "", &apiError{status: 401, code: 190, message: "Invalid OAuth access token - Cannot parse access token"}
		}
		tok = t
	}
	if tok == "" {
		return "", &apiError{status: 400, code: 2500, message: "An active access token must be used to query information about the current user."}
	}
	s.mu.Lock()
	valid, rejected := s.tokens[tok] != "", s.rejected[tok]
	s.mu.Unlock()
	if rejected {
		return "", &apiError{status: 401, code: 190, subcode: 463, message: "Error validating access token: Session has expired."}
	}
	if !valid {
		return "", &apiError{status: 401, code: 190, message: "Invalid OAuth access token - Cannot parse access token"}
	}
	m := hmac.New(sha256.New, []byte(AppSecret))
	m.Write([]byte(tok))
	if want := hex.EncodeToString(m.Sum(nil)); !hmac.Equal([]byte(r.URL.Query().Get("appsecret_proof")), []byte(want)) {
		return "", &apiError{status: 400, code: 100, typ: "GraphMethodException", message: "Invalid appsecret_proof provided in the API argument"}
	}
	return tok, nil
}

// dialog is the Login dialog as the consenting user's browser sees it.
func (s *Server) dialog(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("client_id") != AppID || q.Get("redirect_uri") != RedirectURI || q.Get("response_type") != "code" || q.Get("state") == "" {
		http.Error(w, "Invalid App ID, redirect URI, response type or state", http.StatusBadRequest)
		return
	}
	back := url.Values{"state": {q.Get("state")}}
	s.mu.Lock()
	if s.deny {
		back.Set("error", "access_denied")
		back.Set("error_code", "200")
		back.Set("error_description", "Permissions error")
		back.Set("error_reason", "user_denied")
	} else {
		c := s.mint("AQD")
		s.codes[c] = &code{user: s.user, redirect: q.Get("redirect_uri"), expires: time.Now().Add(10 * time.Minute)}
		back.Set("code", c)
	}
	s.mu.Unlock()
	http.Redirect(w, r, RedirectURI+"?"+back.Encode(), http.StatusFound)
}

// token is /oauth/access_token: the code grant, or fb_exchange_token.
func (s *Server) token(w http.ResponseWriter, r *http.Request) *apiError {
	if err := r.ParseForm(); err != nil {
		return invalid("bad form")
	}
	f := r.Form
	if f.Get("client_id") != AppID || f.Get("client_secret") != AppSecret {
		return &apiError{status: 400, code: 1, message: "Error validating client secret."}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.Get("grant_type") == "fb_exchange_token" {
		old := f.Get("fb_exchange_token")
		if s.tokens[old] == "" || s.rejected[old] {
			return &apiError{status: 400, code: 190, message: "Error validating access token: Session has expired."}
		}
		tok := s.mint("EAALong")
		s.tokens[tok] = s.tokens[old]
		s.long = append(s.long, tok)
		s.issued = append(s.issued, tok)
		fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": int64(s.longTTL / time.Second)})
		return nil
	}
	c, ok := s.codes[f.Get("code")]
	if !ok || c.used || time.Now().After(c.expires) || c.redirect != f.Get("redirect_uri") {
		return &apiError{status: 400, code: 100, subcode: 36009, message: "This authorization code has been used."}
	}
	c.used = true
	tok := s.mint("EAAShort")
	s.tokens[tok] = c.user
	s.issued = append(s.issued, tok)
	fakehttp.WriteJSON(w, http.StatusOK, map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": 5183})
	return nil
}
