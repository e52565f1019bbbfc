// Package crmfake is what the fake CRM providers (tests/fakes/crm/...) share beneath their
// wire formats: an OAuth 2.0 authorization server (authorization code with PKCE S256,
// refresh, expiry on demand, revocation), a traffic gate (request counting, a configurable
// rate limit of N requests per sliding window, failures injected once), and an in-memory
// record store with update times. Each fake speaks its provider's paths, bodies, headers and
// error envelopes itself on top of these, so that a client's mismatch with the provider shows
// up as a failing test. Generic plumbing (httptest lifecycle, logs, queues) is fakehttp's.
package crmfake

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// Clock is a fake's time, which a test may replace to expire tokens or move a window.
type Clock struct {
	mu  sync.Mutex
	now func() time.Time
}

// Now returns the current time of the clock (the real time unless Set).
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now == nil {
		return time.Now().UTC()
	}
	return c.now().UTC()
}

// Set makes now the clock's source.
func (c *Clock) Set(now func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = now
}

// OAuthError is a refusal of the authorization server, in RFC 6749's terms; each fake writes
// it in its provider's shape.
type OAuthError struct {
	Status      int
	Code        string // invalid_request, invalid_client, invalid_grant, ...
	Description string
}

func (e *OAuthError) Error() string { return e.Code + ": " + e.Description }

// App is a registered OAuth application.
type App struct {
	ClientID     string
	ClientSecret string
	RedirectURI  string
}

// Token is what the token endpoint issues.
type Token struct {
	AccessToken  string
	RefreshToken string // empty on a refresh that does not rotate it
	ExpiresIn    time.Duration
	Scope        string
}

type grant struct {
	clientID, redirectURI, challenge, scope string
	expires                                 time.Time
	used                                    bool
	issued                                  []string // access and refresh tokens issued from it
}

type access struct {
	clientID, refresh string
	expires           time.Time
}

// OAuth is an authorization server: authorization codes (single use, 10 minutes, PKCE S256
// mandatory), access tokens that expire after AccessTTL, refresh tokens that do not, and
// revocation. Its methods are safe for concurrent use.
type OAuth struct {
	clock *Clock

	mu        sync.Mutex
	apps      map[string]App
	codes     map[string]*grant
	access    map[string]*access
	refresh   map[string]string // refresh token -> client id
	accessTTL time.Duration
	exchanges int
	revoked   int
}

// NewOAuth returns an authorization server on clock whose access tokens live ttl (0: they
// never expire, as Salesforce's carry no expires_in).
func NewOAuth(clock *Clock, ttl time.Duration) *OAuth {
	return &OAuth{clock: clock, apps: map[string]App{}, codes: map[string]*grant{}, access: map[string]*access{},
		refresh: map[string]string{}, accessTTL: ttl}
}

// AddApp registers an application.
func (o *OAuth) AddApp(a App) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.apps[a.ClientID] = a
}

// verifierRE is RFC 7636's code_verifier: 43 to 128 unreserved characters.
var verifierRE = regexp.MustCompile(`^[A-Za-z0-9\-._~]{43,128}$`)

// challengeRE is an S256 code_challenge: 43 base64url characters.
var challengeRE = regexp.MustCompile(`^[A-Za-z0-9\-_]{43}$`)

// Authorize handles the query of an authorization request as the consenting user's browser
// sends it, and returns where the browser is redirected (redirect_uri with code and state).
// An unknown client or a redirect_uri other than the registered one is refused without a
// redirect (redirecting would hand a code to an attacker's URL); other faults redirect with
// error and state, as RFC 6749 4.1.2.1 says.
func (o *OAuth) Authorize(q url.Values) (string, *OAuthError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	app, ok := o.apps[q.Get("client_id")]
	if !ok {
		return "", &OAuthError{400, "invalid_client", "unknown client_id"}
	}
	if q.Get("redirect_uri") != app.RedirectURI {
		return "", &OAuthError{400, "redirect_uri_mismatch", "redirect_uri is not the one registered for the app"}
	}
	back := func(v url.Values) string {
		if s := q.Get("state"); s != "" {
			v.Set("state", s)
		}
		sep := "?"
		if strings.Contains(app.RedirectURI, "?") {
			sep = "&"
		}
		return app.RedirectURI + sep + v.Encode()
	}
	refuse := func(code, desc string) (string, *OAuthError) {
		return back(url.Values{"error": {code}, "error_description": {desc}}), nil
	}
	switch {
	case q.Get("response_type") != "code":
		return refuse("unsupported_response_type", "response_type must be code")
	case q.Get("code_challenge_method") != "S256":
		return refuse("invalid_request", "code_challenge_method must be S256")
	case !challengeRE.MatchString(q.Get("code_challenge")):
		return refuse("invalid_request", "code_challenge is missing or malformed")
	}
	code := fakehttp.RandomString(32)
	o.codes[code] = &grant{clientID: app.ClientID, redirectURI: app.RedirectURI, challenge: q.Get("code_challenge"),
		scope: q.Get("scope"), expires: o.clock.Now().Add(10 * time.Minute)}
	return back(url.Values{"code": {code}}), nil
}

// Exchange serves the token endpoint's form: the authorization_code grant (client secret,
// code single use and unexpired, the same redirect_uri, the code_verifier against the
// challenge; a reused code also revokes what it issued, per RFC 6749 4.1.2) and the
// refresh_token grant (a new access token; the refresh token stays).
func (o *OAuth) Exchange(form url.Values) (Token, *OAuthError) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.exchanges++
	app, ok := o.apps[form.Get("client_id")]
	if !ok || subtle.ConstantTimeCompare([]byte(form.Get("client_secret")), []byte(app.ClientSecret)) != 1 {
		return Token{}, &OAuthError{401, "invalid_client", "client authentication failed"}
	}
	switch form.Get("grant_type") {
	case "authorization_code":
		g, ok := o.codes[form.Get("code")]
		switch {
		case !ok || g.clientID != app.ClientID:
			return Token{}, &OAuthError{400, "invalid_grant", "unknown authorization code"}
		case g.used:
			for _, t := range g.issued {
				delete(o.access, t)
				delete(o.refresh, t)
			}
			return Token{}, &OAuthError{400, "invalid_grant", "authorization code already used"}
		case o.clock.Now().After(g.expires):
			return Token{}, &OAuthError{400, "invalid_grant", "authorization code expired"}
		case form.Get("redirect_uri") != g.redirectURI:
			return Token{}, &OAuthError{400, "invalid_grant", "redirect_uri does not match the authorization request"}
		case !verifierRE.MatchString(form.Get("code_verifier")) || s256(form.Get("code_verifier")) != g.challenge:
			return Token{}, &OAuthError{400, "invalid_grant", "code_verifier does not match the code_challenge"}
		}
		g.used = true
		t := o.issue(app.ClientID, "")
		t.Scope = g.scope
		g.issued = append(g.issued, t.AccessToken, t.RefreshToken)
		return t, nil
	case "refresh_token":
		if id, ok := o.refresh[form.Get("refresh_token")]; !ok || id != app.ClientID {
			return Token{}, &OAuthError{400, "invalid_grant", "unknown or revoked refresh token"}
		}
		t := o.issue(app.ClientID, form.Get("refresh_token"))
		t.RefreshToken = ""
		return t, nil
	}
	return Token{}, &OAuthError{400, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token"}
}

func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// issue makes an access token (and a refresh token unless refresh names the existing one).
func (o *OAuth) issue(clientID, refresh string) Token {
	if refresh == "" {
		refresh = fakehttp.RandomString(40)
		o.refresh[refresh] = clientID
	}
	a := &access{clientID: clientID, refresh: refresh}
	if o.accessTTL > 0 {
		a.expires = o.clock.Now().Add(o.accessTTL)
	}
	t := fakehttp.RandomString(48)
	o.access[t] = a
	return Token{AccessToken: t, RefreshToken: refresh, ExpiresIn: o.accessTTL}
}

// Issue makes a token pair for clientID without the code flow (a test's ready connection).
func (o *OAuth) Issue(clientID string) Token {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.issue(clientID, "")
}

// Check reports whether token is a valid access token now; expired tells an expired one
// from an unknown or revoked one.
func (o *OAuth) Check(token string) (ok, expired bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, found := o.access[token]
	if !found {
		return false, false
	}
	if !a.expires.IsZero() && !o.clock.Now().Before(a.expires) {
		return false, true
	}
	return true, false
}

// ExpireAccessTokens makes every access token issued so far expired (refresh tokens stay).
func (o *OAuth) ExpireAccessTokens() {
	o.mu.Lock()
	defer o.mu.Unlock()
	past := o.clock.Now().Add(-time.Second)
	for _, a := range o.access {
		a.expires = past
	}
}

// Revoke revokes token, a refresh or an access token, and every access token issued with
// the same refresh token; it reports whether token was known.
func (o *OAuth) Revoke(token string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	refresh := token
	if a, ok := o.access[token]; ok {
		refresh = a.refresh
	} else if _, ok := o.refresh[token]; !ok {
		return false
	}
	delete(o.refresh, refresh)
	for t, a := range o.access {
		if a.refresh == refresh {
			delete(o.access, t)
		}
	}
	o.revoked++
	return true
}

// Revocations counts the grants revoked (a known token presented for revocation).
func (o *OAuth) Revocations() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.revoked
}

// RefreshValid reports whether a refresh token is still valid.
func (o *OAuth) RefreshValid(token string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	_, ok := o.refresh[token]
	return ok
}

// Exchanges counts token endpoint calls.
func (o *OAuth) Exchanges() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.exchanges
}

// Verdict is what the traffic gate decided for one API request.
type Verdict struct {
	// Fail is a queued failure status to answer instead (0: none).
	Fail int
	// Limited is true when the request is over the rate limit; RetryAfter is then when the
	// oldest request of the window leaves it, Limit the window's allowance.
	Limited    bool
	RetryAfter time.Duration
	Limit      int
	Window     time.Duration
	// Remaining is what is left of the window's allowance after this request.
	Remaining int
}

// Traffic counts a fake's API requests and enforces its rate limit: at most Limit requests
// in any sliding Window (the providers' "rolling" limits). It is safe for concurrent use.
type Traffic struct {
	clock *Clock
	fails fakehttp.Queue[int]

	mu       sync.Mutex
	limit    int
	window   time.Duration
	recent   []time.Time
	requests int
	limited  int
}

// NewTraffic returns a gate without a limit.
func NewTraffic(clock *Clock) *Traffic { return &Traffic{clock: clock} }

// SetLimit allows n requests per sliding window; n <= 0 lifts the limit.
func (t *Traffic) SetLimit(n int, window time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.limit, t.window, t.recent = n, window, nil
}

// FailNext makes the next n API requests answer status (a 5xx), once each.
func (t *Traffic) FailNext(n, status int) { t.fails.Push(n, status) }

// Admit counts one API request and decides it.
func (t *Traffic) Admit() Verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.requests++
	v := Verdict{Limit: t.limit, Window: t.window}
	if t.limit > 0 {
		now := t.clock.Now()
		cut := 0
		for cut < len(t.recent) && !t.recent[cut].After(now.Add(-t.window)) {
			cut++
		}
		t.recent = t.recent[cut:]
		if len(t.recent) >= t.limit {
			t.limited++
			v.Limited = true
			v.RetryAfter = t.recent[0].Add(t.window).Sub(now)
			return v
		}
		t.recent = append(t.recent, now)
		v.Remaining = t.limit - len(t.recent)
	}
	if status, ok := t.fails.Take(nil); ok {
		v.Fail = status
	}
	return v
}

// Requests counts the API requests received, refused ones included.
func (t *Traffic) Requests() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.requests
}

// Limited counts the API requests refused for the rate limit.
func (t *Traffic) Limited() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.limited
}

// Record is one CRM record as a fake stores it.
type Record struct {
	ID      string
	Props   map[string]any
	Created time.Time
	Updated time.Time
	seq     int // creation order, for merging lookups
}

func (r *Record) clone() Record {
	c := *r
	c.Props = maps.Clone(r.Props)
	return c
}

// Records is a fake's in-memory CRM: records by object type and id, with creation and
// update times from its clock. It is safe for concurrent use.
type Records struct {
	clock *Clock
	newID func(object string, n int) string

	mu      sync.Mutex
	objects map[string]map[string]*Record
	order   map[string][]string
	n       int
	seq     int // records made, by Create or Put
	// folded indexes the values of the properties FindFold was asked for: object ->
	// property -> folded value (foldKey) -> records. A sync looks every record up by email, and a
	// scan per lookup made a 10,000-record test quadratic.
	folded map[string]map[string]map[string]map[*Record]struct{}
}

// NewRecords returns an empty store whose ids newID makes from the object and a sequence
// number (each provider has its own id format).
func NewRecords(clock *Clock, newID func(object string, n int) string) *Records {
	return &Records{clock: clock, newID: newID, objects: map[string]map[string]*Record{}, order: map[string][]string{}}
}

// Create stores a new record of object with props.
func (s *Records) Create(object string, props map[string]any) Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	now := s.clock.Now()
	r := &Record{ID: s.newID(object, s.n), Props: maps.Clone(props), Created: now, Updated: now}
	s.seq++
	r.seq = s.seq
	if r.Props == nil {
		r.Props = map[string]any{}
	}
	if s.objects[object] == nil {
		s.objects[object] = map[string]*Record{}
	}
	s.objects[object][r.ID] = r
	s.order[object] = append(s.order[object], r.ID)
	for k := range s.folded[object] {
		s.index(object, k, r, true)
	}
	return r.clone()
}

// Put merges props into the record of object with id or, when there is none, creates it with
// that id (a provider's upsert by id, Dataverse's PATCH without If-Match), and reports
// whether it created it.
func (s *Records) Put(object, id string, props map[string]any) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	r, ok := s.objects[object][id]
	if !ok {
		s.seq++
		r = &Record{ID: id, Props: map[string]any{}, Created: now, seq: s.seq}
		if s.objects[object] == nil {
			s.objects[object] = map[string]*Record{}
		}
		s.objects[object][id] = r
		s.order[object] = append(s.order[object], id)
	}
	s.merge(object, r, props)
	r.Updated = now
	return r.clone(), !ok
}

// Update merges props into a record (a nil value removes the property) and reports whether
// it exists.
func (s *Records) Update(object, id string, props map[string]any) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.objects[object][id]
	if !ok {
		return Record{}, false
	}
	s.merge(object, r, props)
	r.Updated = s.clock.Now()
	return r.clone(), true
}

// merge sets props on r (a nil value removes the property), keeping the indexes current.
func (s *Records) merge(object string, r *Record, props map[string]any) {
	for k, v := range props {
		_, indexed := s.folded[object][k]
		if indexed {
			s.index(object, k, r, false)
		}
		if v == nil {
			delete(r.Props, k)
		} else {
			r.Props[k] = v
		}
		if indexed {
			s.index(object, k, r, true)
		}
	}
}

// index adds r under the values of its property key, or removes it.
func (s *Records) index(object, key string, r *Record, add bool) {
	byValue := s.folded[object][key]
	for _, v := range Strings(r.Props[key]) {
		v = foldKey(v)
		if add {
			if byValue[v] == nil {
				byValue[v] = map[*Record]struct{}{}
			}
			byValue[v][r] = struct{}{}
		} else if set := byValue[v]; set != nil {
			delete(set, r)
			if len(set) == 0 {
				delete(byValue, v)
			}
		}
	}
}

// FindFold returns the records of object with a value of one of keys (as Strings lists a
// property's values) equal to value under case folding, in creation order: a provider's
// exact-match search. The first lookup of a property indexes it; writes keep the index.
func (s *Records) FindFold(object string, keys []string, value string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[*Record]bool{}
	var hits []*Record
	for _, k := range keys {
		if _, ok := s.folded[object][k]; !ok {
			if s.folded == nil {
				s.folded = map[string]map[string]map[string]map[*Record]struct{}{}
			}
			if s.folded[object] == nil {
				s.folded[object] = map[string]map[string]map[*Record]struct{}{}
			}
			s.folded[object][k] = map[string]map[*Record]struct{}{}
			for _, r := range s.objects[object] {
				s.index(object, k, r, true)
			}
		}
		for r := range s.folded[object][k][foldKey(value)] {
			if !seen[r] {
				seen[r] = true
				hits = append(hits, r)
			}
		}
	}
	slices.SortFunc(hits, func(a, b *Record) int { return a.seq - b.seq })
	out := make([]Record, len(hits))
	for i, r := range hits {
		out[i] = r.clone()
	}
	return out
}

// foldKey maps each letter of v to the least of its case-folding orbit, so that two strings
// have one key exactly when strings.EqualFold holds (lowering is not enough: the long s folds
// to s but lowers to itself).
func foldKey(v string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return least
	}, v)
}

// Strings lists a property's values as a search compares them: a string is itself; a list
// of {"value": ...} objects (Pipedrive's emails and phones) is their values; nil is none;
// anything else is its default formatting.
func Strings(v any) []string {
	switch x := v.(type) {
	case nil:
		return nil
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if m, isMap := e.(map[string]any); isMap {
				out = append(out, fmt.Sprint(m["value"]))
			}
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

// Get returns a record.
func (s *Records) Get(object, id string) (Record, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.objects[object][id]
	if !ok {
		return Record{}, false
	}
	return r.clone(), true
}

// All returns the records of object in creation order.
func (s *Records) All(object string) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Record, 0, len(s.order[object]))
	for _, id := range s.order[object] {
		if r, ok := s.objects[object][id]; ok {
			out = append(out, r.clone())
		}
	}
	return out
}

// Find returns the records of object that match accepts, in creation order. match runs
// under the store's lock on the stored record (only matches are copied, so a search over
// thousands stays cheap): it must not keep the record or call the store.
func (s *Records) Find(object string, match func(Record) bool) []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Record
	for _, id := range s.order[object] {
		if r, ok := s.objects[object][id]; ok && match(*r) {
			out = append(out, r.clone())
		}
	}
	return out
}

// ChangedSince returns the records of object updated at or after since, oldest first (ties
// by id order of creation).
func (s *Records) ChangedSince(object string, since time.Time) []Record {
	out := s.Find(object, func(r Record) bool { return !r.Updated.Before(since) })
	slices.SortStableFunc(out, func(a, b Record) int { return a.Updated.Compare(b.Updated) })
	return out
}

// Delete removes a record and reports whether it existed.
func (s *Records) Delete(object, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.objects[object][id]
	if !ok {
		return false
	}
	for k := range s.folded[object] {
		s.index(object, k, r, false)
	}
	delete(s.objects[object], id)
	s.order[object] = slices.DeleteFunc(s.order[object], func(x string) bool { return x == id })
	return true
}

// Count returns how many records of object there are.
func (s *Records) Count(object string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.objects[object])
}
