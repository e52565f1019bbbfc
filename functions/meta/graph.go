package meta

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// defaultMaxPages bounds the pages read of one Graph edge: 20 pages of 100 is more than any
// customer's pages or numbers, and a provider that pages forever cannot hold a request.
const defaultMaxPages = 20

// maxResponseBytes bounds one Graph answer read.
const maxResponseBytes = 4 << 20

// graph calls the Graph API (<GraphURL>/<version>) with a user token. Tokens travel in the
// Authorization header, with the app secret proof Meta recommends for server calls, never in
// a URL the platform builds; no error it returns holds a URL, a token or Graph's message
// (which may quote the request), only the status and Graph's codes.
type graph struct {
	base      string
	appID     string
	appSecret string
	http      *http.Client
}

// graphError is a failed Graph call.
type graphError struct {
	Status  int
	Code    int
	Subcode int
	Type    string
	// Temporary is true for what a retry may fix: no answer, a 5xx, a throttle.
	Temporary bool
}

func (e *graphError) Error() string {
	if e.Status == 0 {
		return "graph: unreachable"
	}
	return fmt.Sprintf("graph: HTTP %d, code %d, subcode %d, type %s", e.Status, e.Code, e.Subcode, safeCode(e.Type))
}

// tokenRejected reports whether Graph refused the token itself: code 190 (expired,
// revoked, changed password, app removed) or 102 (session).
func tokenRejected(err error) bool {
	var ge *graphError
	return errors.As(err, &ge) && (ge.Code == 190 || ge.Code == 102)
}

// temporary reports whether err is worth a retry later.
func temporary(err error) bool {
	var ge *graphError
	return errors.As(err, &ge) && ge.Temporary
}

// proof is the appsecret_proof of token: HMAC-SHA256 of the token keyed by the app secret.
func (g *graph) proof(token string) string {
	m := hmac.New(sha256.New, []byte(g.appSecret))
	m.Write([]byte(token))
	return hex.EncodeToString(m.Sum(nil))
}

// do sends req (token in the header when given) and decodes a 2xx answer into out.
func (g *graph) do(req *http.Request, token string, out any) error {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Accept", "application/json")
	res, err := g.http.Do(req)
	if err != nil {
		// The transport's error quotes the URL (a paging link may carry a token, the long-lived
		// exchange carries the app secret): dropped.
		return &graphError{Temporary: true}
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBytes))
	if err != nil {
		return &graphError{Status: res.StatusCode, Temporary: true}
	}
	if res.StatusCode/100 != 2 {
		var env struct {
			Error struct {
				Type    string `json:"type"`
				Code    int    `json:"code"`
				Subcode int    `json:"error_subcode"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &env)
		ge := &graphError{Status: res.StatusCode, Code: env.Error.Code, Subcode: env.Error.Subcode, Type: env.Error.Type}
		switch env.Error.Code {
		case 1, 2, 4, 17, 32, 341, 613, 80001, 80002, 80004, 80005, 80006, 80007, 130429:
			ge.Temporary = true
		}
		if res.StatusCode >= 500 || res.StatusCode == http.StatusTooManyRequests {
			ge.Temporary = true
		}
		return ge
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &graphError{Status: res.StatusCode, Code: -1, Type: "bad_json", Temporary: true}
	}
	return nil
}

// url is the Graph URL of path with q (and the token's appsecret_proof).
func (g *graph) url(path string, q url.Values, token string) string {
	if q == nil {
		q = url.Values{}
	}
	if token != "" && g.appSecret != "" {
		q.Set("appsecret_proof", g.proof(token))
	}
	return g.base + "/" + strings.TrimLeft(path, "/") + "?" + q.Encode()
}

// get reads path into out.
func (g *graph) get(ctx context.Context, token, path string, q url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.url(path, q, token), nil)
	if err != nil {
		return err
	}
	return g.do(req, token, out)
}

// delete deletes path.
func (g *graph) delete(ctx context.Context, token, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, g.url(path, nil, token), nil)
	if err != nil {
		return err
	}
	return g.do(req, token, nil)
}

// page is one page of a Graph edge.
type page[T any] struct {
	Data   []T `json:"data"`
	Paging struct {
		Next string `json:"next"`
	} `json:"paging"`
}

// getAll reads every page of an edge, following paging.next at most maxPages times.
// truncated is true when pages were left: the bound was reached. A next link that leaves
// the configured Graph API (another host, another version) is not followed: the token
// would go with it.
func getAll[T any](ctx context.Context, g *graph, token, path string, q url.Values, maxPages int) ([]T, bool, error) {
	var out []T
	next := g.url(path, q, token)
	for range maxPages {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next, nil)
		if err != nil {
			return nil, false, err
		}
		var p page[T]
		if err := g.do(req, token, &p); err != nil {
			return nil, false, err
		}
		out = append(out, p.Data...)
		if p.Paging.Next == "" || len(p.Data) == 0 {
			return out, false, nil
		}
		if !strings.HasPrefix(p.Paging.Next, g.base+"/") {
			return out, true, nil
		}
		next = p.Paging.Next
	}
	return out, true, nil
}

// tokenAnswer is the token endpoint's answer.
type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
}

// exchange trades a user token (short-lived, or a long-lived one before it expires) for a
// long-lived one: GET oauth/access_token?grant_type=fb_exchange_token. expiry is zero when
// Graph gives none.
func (g *graph) exchange(ctx context.Context, token string, now time.Time) (string, time.Time, error) {
	q := url.Values{"grant_type": {"fb_exchange_token"}, "client_id": {g.appID}, "client_secret": {g.appSecret},
		"fb_exchange_token": {token}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.base+"/oauth/access_token?"+q.Encode(), nil)
	if err != nil {
		return "", time.Time{}, errors.New("meta: build the token exchange")
	}
	var ans tokenAnswer
	if err := g.do(req, "", &ans); err != nil {
		return "", time.Time{}, err
	}
	if ans.AccessToken == "" || len(ans.AccessToken) > 4096 {
		return "", time.Time{}, &graphError{Status: http.StatusOK, Code: -1, Type: "no_access_token", Temporary: true}
	}
	var expiry time.Time
	if ans.ExpiresIn > 0 {
		expiry = now.Add(time.Duration(ans.ExpiresIn) * time.Second)
	}
	return ans.AccessToken, expiry, nil
}

// permission is one entry of /me/permissions.
type permission struct {
	Permission string `json:"permission"`
	Status     string `json:"status"`
}

// permissions reads what the user granted and declined.
func (g *graph) permissions(ctx context.Context, token string, maxPages int) (granted, declined []string, err error) {
	perms, _, err := getAll[permission](ctx, g, token, "me/permissions", url.Values{"limit": {"100"}}, maxPages)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range perms {
		switch p.Status {
		case "granted":
			granted = append(granted, p.Permission)
		case "declined", "expired":
			declined = append(declined, p.Permission)
		}
	}
	return granted, declined, nil
}

// itoa is strconv.Itoa, for Graph ids given as numbers.
func itoa(n int) string { return strconv.Itoa(n) }
