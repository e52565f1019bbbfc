// Package httpapitest serves route families in process for their tests. A Server is an
// httpapi.Mux behind the kernel's real authentication: an auth.Service over a store, one
// account with its owner, and tokens minted on demand. Do sends it a request and returns
// the Reply with its JSON decoded. Clock is the test clock to give the kernel, the store
// and the family alike; AsError and InvalidFields look into the errors a family returns.
//
// A family's test registers its routes on the Server's Mux:
//
//	s := httpapitest.New(t, httpapitest.Config{Now: clock.Now, Store: st, BotIDs: []string{bot}})
//	Routes(s.Mux, svc, s.Cursors)
//	res := s.Do(t, "POST", "/api/bots/"+bot+"/labels", `{"name":"VIP"}`)
//	require.Equal(t, 201, res.Code, res.Body)
package httpapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Config is what a Server is made of. Only Now is required; every other member has a
// default.
type Config struct {
	// Now is the clock of the kernel and the credentials, and of the store when the Server
	// opens it.
	Now func() time.Time
	// Store keeps the credentials and the audit trail; nil opens a fresh SQLite store.
	Store store.Store
	// Auth authenticates requests; nil is an auth.Service over Store. A family whose service
	// revokes tokens passes the one its service holds, so that the revocation reaches the
	// cache that authenticates.
	Auth *auth.Service
	// Bots is the tenancy check of {botID} routes; nil is one that finds exactly BotIDs.
	Bots httpapi.BotLoader
	// BotIDs are the bots of the Server's account, for the default tenancy check.
	BotIDs []string
	// Audit receives the audit events of mutations; nil is an audit.Log over Store.
	Audit audit.Publisher
	// Log is the kernel's log; nil discards.
	Log *slog.Logger
}

// Server is a kernel Mux with real authentication, for a family to register its routes on.
type Server struct {
	// Mux is the mux Do serves; replace it (with NewMux) to serve another service's routes
	// to the same account and tokens.
	Mux *httpapi.Mux
	// Auth and Store are Config's, or the defaults made for it.
	Auth  *auth.Service
	Store store.Store
	// Account and its Owner are created with the Server.
	Account auth.Account
	Owner   auth.User
	// Cursors seal list cursors with a fixed test key.
	Cursors *httpapi.Cursors

	cfg   Config
	mu    sync.Mutex
	token string // the owner's full-scope PAT, minted by the first Do
}

// New returns a Server with an empty Mux and a new account, its owner named Owner.
func New(t testing.TB, cfg Config) *Server {
	t.Helper()
	require.NotNil(t, cfg.Now, "httpapitest: Config.Now is required")
	if cfg.Store == nil {
		cfg.Store = sqlitetest.Open(t, sqlite.WithClock(cfg.Now))
	}
	if cfg.Auth == nil {
		cfg.Auth = auth.NewService(cfg.Store, cfg.Now, nil)
	}
	if cfg.Audit == nil {
		// On AWS the family's Lambda publishes the event and the audit sink stores it.
		cfg.Audit = sinkLog{audit.NewLog(cfg.Store)}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	acct, owner, err := cfg.Auth.CreateAccount(sqlitetest.Unrecorded(t.Context()), "Acme")
	require.NoError(t, err)
	if cfg.Bots == nil {
		cfg.Bots = accountBots{account: acct.ID, bots: slices.Clone(cfg.BotIDs)}
	}
	s := &Server{Auth: cfg.Auth, Store: cfg.Store, Account: acct, Owner: owner,
		Cursors: httpapi.NewCursors([]byte("0123456789abcdef0123456789abcdef")), cfg: cfg}
	s.Mux = s.NewMux(t)
	return s
}

// NewMux returns an empty Mux with the Server's kernel configuration.
func (s *Server) NewMux(t testing.TB) *httpapi.Mux {
	t.Helper()
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: s.authenticate, Bots: s.cfg.Bots, Audit: s.cfg.Audit, Log: s.cfg.Log, Now: s.cfg.Now,
	})
	require.NoError(t, err)
	return mux
}

// authenticate is the kernel's bearer authentication; on AWS the authorizer Lambda does it,
// so the store reads and writes it makes are recorded as that Lambda's (sqlitetest.As).
func (s *Server) authenticate(r *http.Request) (*auth.Principal, error) {
	return s.Auth.Authenticate(sqlitetest.As(r.Context(), "authorizer"), r.Header.Get("Authorization"))
}

// sinkLog stores audit events as the audit sink Lambda does on AWS (the family's Lambda
// only publishes them to the bus).
type sinkLog struct{ log *audit.Log }

func (l sinkLog) Publish(ctx context.Context, e audit.Event) error {
	return l.log.Publish(sqlitetest.As(ctx, "auditsink"), e)
}

// accountBots is the default tenancy check: the listed bots are the account's.
type accountBots struct {
	account string
	bots    []string
}

func (b accountBots) LoadBot(_ context.Context, account, bot string) (any, error) {
	if account != b.account || !slices.Contains(b.bots, bot) {
		return nil, httpapi.NotFound("bot")
	}
	return bot, nil
}

// PAT mints a personal access token of user (the Owner, or a user made with s.Auth) with
// scopes, auth.Full when none are given, valid for 30 days.
func (s *Server) PAT(t testing.TB, user auth.User, scopes ...auth.Scope) string {
	t.Helper()
	if len(scopes) == 0 {
		scopes = auth.Scopes{auth.Full}
	}
	_, tok, err := s.Auth.IssuePAT(sqlitetest.Unrecorded(t.Context()), user.AccountID, user.ID, "test", scopes, s.cfg.Now().Add(30*24*time.Hour))
	require.NoError(t, err)
	return tok
}

// BotToken mints a bot API token bound to bot in the Server's account.
func (s *Server) BotToken(t testing.TB, bot string) string {
	t.Helper()
	_, tok, err := s.Auth.IssueBotToken(sqlitetest.Unrecorded(t.Context()), s.Account.ID, bot, s.Owner.ID, "test")
	require.NoError(t, err)
	return tok
}

// Do is DoAs with the Owner's full-scope PAT, minted at the first call.
func (s *Server) Do(t testing.TB, method, path string, body any, header ...string) Reply {
	t.Helper()
	s.mu.Lock()
	if s.token == "" {
		s.token = s.PAT(t, s.Owner)
	}
	tok := s.token
	s.mu.Unlock()
	return s.DoAs(t, tok, method, path, body, header...)
}

// DoAs serves one request with token as its bearer token ("" sends none). A string body is
// sent as application/json, a []byte as it is (with the Content-Type the header pairs give),
// nil as none and anything else marshalled to JSON. header lists names and values, set last.
func (s *Server) DoAs(t testing.TB, token, method, path string, body any, header ...string) Reply {
	t.Helper()
	var rd io.Reader
	ct := ""
	switch b := body.(type) {
	case nil:
	case string:
		if b != "" {
			rd, ct = strings.NewReader(b), "application/json"
		}
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		require.NoError(t, err)
		rd, ct = bytes.NewReader(j), "application/json"
	}
	r := httptest.NewRequest(method, path, rd)
	if ct != "" {
		r.Header.Set("Content-Type", ct)
	}
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	require.True(t, len(header)%2 == 0, "header pairs: %q", header)
	for i := 0; i < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	s.Mux.ServeHTTP(w, r)
	rep := Reply{Code: w.Code, Header: w.Header(), Body: w.Body.String()}
	if mt := rep.mediaType(); rep.Body != "" && (mt == "application/json" || strings.HasSuffix(mt, "+json")) {
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &rep.JSON), "a JSON reply that is no JSON object: %s", rep.Body)
	}
	return rep
}

// Reply is a response of the Server.
type Reply struct {
	Code   int
	Header http.Header
	Body   string
	// JSON is the body decoded when it is JSON (application/json, problem+json); nil for
	// other bodies and an empty one. Do fails the test on a JSON body that is no object.
	JSON map[string]any
}

// Problem returns the code of a problem+json reply, "" for any other.
func (r Reply) Problem() string {
	if r.mediaType() != "application/problem+json" {
		return ""
	}
	code, _ := r.JSON["code"].(string)
	return code
}

func (r Reply) mediaType() string {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return mt
}

// AsError returns the *httpapi.Error in err's chain, the problem a handler would answer,
// and fails the test when there is none.
func AsError(t testing.TB, err error) *httpapi.Error {
	t.Helper()
	var he *httpapi.Error
	require.True(t, errors.As(err, &he), "want an *httpapi.Error, got %v", err)
	return he
}

// InvalidFields returns the field paths of a validation_failed error in its order, and
// fails the test for any other error.
func InvalidFields(t testing.TB, err error) []string {
	t.Helper()
	he := AsError(t, err)
	require.Equal(t, "validation_failed", he.Code, "%v", err)
	list, ok := he.Extensions["errors"].([]httpapi.FieldError)
	require.True(t, ok, "validation_failed without its errors: %v", err)
	var out []string
	for _, fe := range list {
		out = append(out, fe.Field)
	}
	return out
}
