// Package httpapi is the HTTP kernel every route family registers with: routing on
// net/http ServeMux patterns with each route's scope and bot right declared next to it,
// authentication, tenancy and right checks, audit of mutations, strict JSON bodies,
// RFC 9457 problem responses, request ids, request logs and sealed list cursors.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// HandlerFunc serves one route. A returned error becomes a problem response; a handler
// writes its own response only on success.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Access is what a route requires of its caller. It is declared next to the route so that
// the whole access table can be read (and is tested) in one place.
type Access struct {
	// Public routes take no credentials.
	Public bool
	// Scope the token must hold.
	Scope auth.Scope
	// AlsoScope is a second scope the token must hold ("" for none): saving a funnel's
	// cohort as a segment needs analytics:read and segments:write (spec 4.7).
	AlsoScope auth.Scope
	// Rights the user must hold on the route's bot ({botID} in the pattern).
	Rights auth.RightSet
	// PATOnly refuses bot API tokens even on the routes of their own bot.
	PATOnly bool
	// Plan is the plan feature the account must have (402 feature_not_in_plan).
	Plan auth.Feature
	// Rollout is the rollout feature that must be enabled for the account (403
	// feature_not_enabled; unassigned counts as disabled).
	Rollout auth.Feature
	// PaidBroadcasts requires paid broadcasts to be enabled for the route's bot (403
	// paid_broadcasts_not_enabled).
	PaidBroadcasts bool
	// SecretPath routes carry a bearer capability in their path (an unsubscribe token): the
	// request log shows the route's pattern, never the path.
	SecretPath bool
	// PerCall routes carry several operations in their body, each with access of its own
	// (the MCP endpoint's tools): the kernel authenticates the caller and leaves the rest to
	// the handler, which checks each call's declared access with Authorize and audits the
	// mutating ones with PublishAudit (shared/mcptool). The route itself needs no scope and
	// is not audited as a whole.
	PerCall bool
}

// AndScope returns a requiring scope s as well as a.Scope.
func (a Access) AndScope(s auth.Scope) Access { a.AlsoScope = s; return a }

// InPlan returns a with the plan feature f required.
func (a Access) InPlan(f auth.Feature) Access { a.Plan = f; return a }

// InRollout returns a with the rollout feature f required.
func (a Access) InRollout(f auth.Feature) Access { a.Rollout = f; return a }

// WithPaidBroadcasts returns a requiring paid broadcasts on the route's bot.
func (a Access) WithPaidBroadcasts() Access { a.PaidBroadcasts = true; return a }

// Need declares a route that requires scope and, on a bot's routes, the given rights.
// Bot API tokens may call it on their own bot.
func Need(scope auth.Scope, rights ...auth.Right) Access {
	return Access{Scope: scope, Rights: auth.RightsOf(rights...)}
}

// NeedPAT is Need for routes only personal access tokens may call: account-level
// administration and credential management.
func NeedPAT(scope auth.Scope, rights ...auth.Right) Access {
	a := Need(scope, rights...)
	a.PATOnly = true
	return a
}

// Public declares a route that needs no credentials.
func Public() Access { return Access{Public: true} }

// PerCall declares an authenticated route whose access is declared per operation in its
// body (Access.PerCall): the MCP endpoint. It has no {botID}, so only PATs reach it.
func PerCall() Access { return Access{PerCall: true} }

// PublicSecretPath declares a public route whose path holds a capability token (a sent
// email's unsubscribe or tracking link): whoever has the path can act on it, so it is
// logged as the route's pattern only.
func PublicSecretPath() Access { return Access{Public: true, SecretPath: true} }

// Route is one registered route.
type Route struct {
	Method string
	Path   string
	Access Access
	// BotScoped routes have {botID} in their path: the bot must be in the caller's account.
	BotScoped bool
}

// Pattern is the ServeMux pattern, e.g. "GET /api/bots/{botID}".
func (rt Route) Pattern() string { return rt.Method + " " + rt.Path }

// Mutating reports whether the route's calls are audited. A PerCall route's are audited
// per operation, by its handler.
func (rt Route) Mutating() bool {
	if rt.Access.PerCall {
		return false
	}
	switch rt.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// Authenticator resolves a request's credentials. Locally it checks the Authorization
// header; behind API Gateway it reads the principal the authorizer passed along.
type Authenticator func(r *http.Request) (*auth.Principal, error)

// BearerAuth authenticates the Authorization header with the credentials service.
func BearerAuth(s *auth.Service) Authenticator {
	return func(r *http.Request) (*auth.Principal, error) {
		return s.Authenticate(r.Context(), r.Header.Get("Authorization"))
	}
}

// BotLoader loads a bot of an account for the tenancy check of every {botID} route. It
// returns the bot, or an error that becomes the response (a 404 for a bot that is not the
// account's). The kernel keeps the bot for the request (LoadedBot), so handlers need not
// read it again.
type BotLoader interface {
	LoadBot(ctx context.Context, accountID, botID string) (any, error)
}

// RequestRecord is one request made against a bot, for the bot's request log.
type RequestRecord struct {
	Time      time.Time
	BotID     string
	Method    string
	Route     string
	Status    int
	Latency   time.Duration
	TokenID   string
	TokenKind string
	RequestID string
}

// RequestRecorder keeps the request logs of bots.
type RequestRecorder interface {
	RecordRequest(ctx context.Context, r RequestRecord) error
}

// Config holds the kernel's dependencies; NewMux refuses to start without any of them but
// Requests, which is optional (a process that keeps no request logs).
type Config struct {
	Authenticate Authenticator
	Bots         BotLoader
	Audit        audit.Publisher
	Log          *slog.Logger
	Now          func() time.Time
	// Requests records every request made against a bot: authenticated, on a {botID} route,
	// and the bot found in the caller's account (others' bots keep no log of strangers).
	Requests RequestRecorder
}

// Mux routes requests to families' handlers through the kernel's checks.
type Mux struct {
	cfg    Config
	mux    *http.ServeMux
	routes []Route
}

// NewMux returns an empty Mux.
func NewMux(cfg Config) (*Mux, error) {
	var missing []string
	if cfg.Authenticate == nil {
		missing = append(missing, "Authenticate")
	}
	if cfg.Bots == nil {
		missing = append(missing, "Bots")
	}
	if cfg.Audit == nil {
		missing = append(missing, "Audit")
	}
	if cfg.Log == nil {
		missing = append(missing, "Log")
	}
	if cfg.Now == nil {
		missing = append(missing, "Now")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("httpapi: missing dependencies: %s", strings.Join(missing, ", "))
	}
	m := &Mux{cfg: cfg, mux: http.NewServeMux()}
	m.mux.HandleFunc("/", m.unrouted)
	return m, nil
}

// Handle registers a route. pattern must name a method ("GET /api/bots/{botID}").
func (m *Mux) Handle(pattern string, access Access, h HandlerFunc) {
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || method == "" || !strings.HasPrefix(path, "/") {
		panic("httpapi: pattern needs a method and a path: " + pattern)
	}
	if !access.Public && !access.PerCall && access.Scope == "" {
		panic("httpapi: non-public route without a scope: " + pattern)
	}
	rt := Route{Method: method, Path: path, Access: access, BotScoped: strings.Contains(path, "{botID}")}
	m.routes = append(m.routes, rt)
	m.mux.Handle(pattern, m.route(rt, h))
}

// Routes lists every registered route in registration order.
func (m *Mux) Routes() []Route { return slices.Clone(m.routes) }

// requestInfo is filled in as a request passes the kernel, for the request log.
type requestInfo struct {
	id        string
	start     time.Time
	principal *auth.Principal
	bot       any
	// secretPath: the matched route's path holds a capability; log the pattern only.
	secretPath bool

	// actedOn is the first bot Authorize found the caller's during a route whose path names
	// none (a playbook install's, a copilot proposal's): its audit event's bot.
	mu      sync.Mutex
	actedOn string
	// audit is a mutating route's audit writer (StageAudit), nil otherwise.
	audit *auditWriter
}

// noteBot records bot, known to be the caller's, as the one ctx's request acts on, unless
// it already has one.
func noteBot(ctx context.Context, bot string) {
	if ri, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		ri.mu.Lock()
		if ri.actedOn == "" {
			ri.actedOn = bot
		}
		ri.mu.Unlock()
	}
}

// actedOn is the bot noteBot recorded for r, or "".
func actedOn(r *http.Request) string {
	ri := info(r)
	ri.mu.Lock()
	defer ri.mu.Unlock()
	return ri.actedOn
}

type infoKey struct{}

func info(r *http.Request) *requestInfo {
	if ri, ok := r.Context().Value(infoKey{}).(*requestInfo); ok {
		return ri
	}
	return &requestInfo{}
}

// Caller returns the principal of a request to a non-public route; the kernel authenticated
// it before the handler runs, so it is never nil there.
func Caller(r *http.Request) *auth.Principal {
	p, _ := auth.FromContext(r.Context())
	return p
}

// LoadedBot returns the bot the kernel loaded for the request's {botID}, or nil.
func LoadedBot(ctx context.Context) any {
	if ri, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		return ri.bot
	}
	return nil
}

// BotDeleted tells the kernel that the request deleted the bot it was made against: it is
// then kept out of the bot's request log, which is erased with the bot (an entry written
// after the erasure would outlive it). The audit trail still records the deletion.
func BotDeleted(ctx context.Context) {
	if ri, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		ri.bot = nil
	}
}

// RequestID returns the id of the request being served.
func RequestID(ctx context.Context) string {
	if ri, ok := ctx.Value(infoKey{}).(*requestInfo); ok {
		return ri.id
	}
	return ""
}

// ServeHTTP gives every request an id, a log line and a safety net against panics.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ri := &requestInfo{id: requestID(r), start: m.cfg.Now()}
	w.Header().Set("X-Request-Id", ri.id)
	sw := &statusWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), infoKey{}, ri))
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			m.cfg.Log.ErrorContext(r.Context(), "panic", "request_id", ri.id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !sw.wrote {
				writeProblem(sw, ri.id, asError(nil))
			}
		}
		m.logRequest(r, ri, sw)
		m.recordRequest(r, ri, sw)
	}()
	if !canonical(r.URL.Path) {
		// http.ServeMux would answer an HTML 301 to the cleaned path; a client of a JSON
		// API gets a problem, and a mistyped path is not silently rewritten into another.
		m.fail(sw, r, E(KindNotFound, "not_found", "no such route: the path has an empty, '.' or '..' segment"))
		return
	}
	m.mux.ServeHTTP(sw, r)
}

// canonical reports whether p is a path http.ServeMux serves as it is: no empty segment
// ("//"), no "." or ".." segment. A trailing slash is a path of its own (no route has one).
func canonical(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return !strings.Contains(p, "//")
}

func (m *Mux) logRequest(r *http.Request, ri *requestInfo, sw *statusWriter) {
	route := r.Pattern
	if route == "/" {
		route = "" // the unrouted catch-all
	}
	attrs := []slog.Attr{
		slog.String("request_id", ri.id),
		slog.String("method", r.Method),
		slog.String("path", loggedPath(r, ri)),
		slog.String("route", route),
		slog.Int("status", sw.status),
		slog.Int64("bytes", sw.bytes),
		slog.Float64("duration_ms", float64(m.cfg.Now().Sub(ri.start).Microseconds())/1000),
	}
	if p := ri.principal; p != nil {
		attrs = append(attrs, slog.String("account_id", p.AccountID), slog.String("token_id", p.TokenID))
	}
	m.cfg.Log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

// recordRequest adds the request to its bot's request log when it was made against a bot of
// the caller's account.
func (m *Mux) recordRequest(r *http.Request, ri *requestInfo, sw *statusWriter) {
	if m.cfg.Requests == nil || ri.principal == nil || ri.bot == nil {
		return
	}
	rec := RequestRecord{
		Time:      ri.start,
		BotID:     r.PathValue("botID"),
		Method:    r.Method,
		Route:     r.Pattern,
		Status:    sw.status,
		Latency:   m.cfg.Now().Sub(ri.start),
		TokenID:   ri.principal.TokenID,
		TokenKind: string(ri.principal.Kind),
		RequestID: ri.id,
	}
	if err := m.cfg.Requests.RecordRequest(context.WithoutCancel(r.Context()), rec); err != nil {
		m.cfg.Log.ErrorContext(r.Context(), "request log entry lost", "request_id", ri.id, "error", err)
	}
}

// loggedPath is the path the request log shows: the route's pattern where the path holds a
// capability.
func loggedPath(r *http.Request, ri *requestInfo) string {
	if ri.secretPath {
		_, pattern, _ := strings.Cut(r.Pattern, " ")
		return pattern
	}
	return r.URL.Path
}

// route wraps a handler with authentication, audit and access checks.
func (m *Mux) route(rt Route, h HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := info(r)
		ri.secretPath = rt.Access.SecretPath
		if rt.Access.Public {
			m.serve(w, r, h)
			return
		}
		p, err := m.cfg.Authenticate(r)
		if err != nil {
			m.fail(w, r, authError(w, err))
			return
		}
		ri.principal = p
		r = r.WithContext(auth.NewContext(r.Context(), p))
		if rt.Mutating() {
			// The handler's writes leave their disk sync to the audit event's, which is
			// committed before the response's first byte (store.Deferral).
			ctx, d := store.DeferSync(r.Context())
			r = r.WithContext(ctx)
			aw := &auditWriter{ResponseWriter: w, m: m, r: r, rt: rt, p: p, start: ri.start, deferral: d,
				eventID: ids.At("evt", ri.start)}
			ri.audit = aw
			w = aw
			// Writes made after the response started (a stream's) are synced on their own;
			// this settles what a handler that never answered left.
			defer aw.settle()
			// A panic below still answers (500) and so still produces its audit event.
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					m.cfg.Log.ErrorContext(r.Context(), "panic", "request_id", ri.id, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
					if !aw.wrote {
						writeProblem(aw, ri.id, asError(nil))
					}
				}
			}()
		}
		if err := m.authorize(r, rt, p); err != nil {
			m.fail(w, r, err)
			return
		}
		m.serve(w, r, h)
	})
}

func (m *Mux) serve(w http.ResponseWriter, r *http.Request, h HandlerFunc) {
	err := h(w, r)
	if err == nil && !written(w) {
		err = errors.New("handler wrote no response")
	}
	if err != nil {
		if written(w) {
			m.cfg.Log.ErrorContext(r.Context(), "error after response started", "request_id", RequestID(r.Context()), "error", err)
			return
		}
		m.fail(w, r, err)
	}
}

// authorize applies the route's declared access to the principal (Authorize), keeping the
// bot it loaded for the request log.
func (m *Mux) authorize(r *http.Request, rt Route, p *auth.Principal) error {
	loaded, err := Authorize(r.Context(), m.cfg.Bots, rt.Access, p, rt.BotScoped, r.PathValue("botID"))
	if loaded != nil {
		info(r).bot = loaded
	}
	return err
}

// Authorize applies access to the principal p for one call: a route's request (botScoped
// when its pattern has {botID}, bot the path's value) or an MCP tool's call (botScoped when
// the tool takes a bot, bot the argument). It returns the bot it loaded, once the bot is
// known to be the caller's, even when a later check refuses the call.
//
// Order matters: a bot token sees nothing outside its bot (404); the token kind and scope
// are properties of the token and reveal nothing, so they come next (403); rights are
// checked only once the bot is known to be the caller's (else 404), so a 403 never confirms
// that another account's bot exists. Entitlements come last: they are the account's own,
// and a 402 or 403 about them is only useful to a caller who could otherwise make the call
// (docs/access.md).
func Authorize(ctx context.Context, bots BotLoader, access Access, p *auth.Principal, botScoped bool, bot string) (any, error) {
	// Outside its own bot, nothing exists for a bot token: 404 before anything else.
	if p.Kind == auth.KindBot && botScoped && bot != p.BotID {
		return nil, NotFound("bot")
	}
	if p.Kind == auth.KindBot && (access.PATOnly || !botScoped) {
		e := E(KindForbidden, "insufficient_scope", "bot API tokens cannot call this route; use a personal access token")
		if access.Scope != "" {
			e = e.With("required_scope", access.Scope)
		}
		return nil, e
	}
	for _, s := range []auth.Scope{access.Scope, access.AlsoScope} {
		if s != "" && !p.Scopes.Allows(s) {
			return nil, Errorf(KindForbidden, "insufficient_scope", "this route needs the %q scope", s).
				With("required_scope", s)
		}
	}
	var loaded any
	if botScoped {
		var err error
		if loaded, err = bots.LoadBot(ctx, p.AccountID, bot); err != nil {
			return nil, err
		}
		// The caller's bot: a route whose path names no bot is audited against it.
		noteBot(ctx, bot)
		if missing := p.RightsOn(bot).Missing(access.Rights); len(missing) > 0 {
			return loaded, Errorf(KindForbidden, "missing_right", "your user lacks the %s right on this bot", auth.RightsOf(missing...)).
				With("missing_rights", missing)
		}
	}
	return loaded, entitled(access, p.Entitlements, bot)
}

// entitled checks the account's entitlements the route declares: plan, then rollout, then
// the bot's paid broadcasts.
func entitled(a Access, e auth.Entitlements, bot string) error {
	if a.Plan != "" && !e.InPlan(a.Plan) {
		return Errorf(KindPaymentRequired, "feature_not_in_plan", "your account's plan does not include %s; upgrade the plan to use this route", a.Plan).
			With("feature", a.Plan)
	}
	if a.Rollout != "" && !e.Enabled(a.Rollout) {
		return Errorf(KindForbidden, "feature_not_enabled", "%s is not enabled for your account", a.Rollout).
			With("feature", a.Rollout)
	}
	if a.PaidBroadcasts && !e.PaidBroadcasts(bot) {
		return E(KindForbidden, "paid_broadcasts_not_enabled", "paid broadcasts are not enabled for this bot")
	}
	return nil
}

// authError maps an authentication failure to 401 (with RFC 6750's WWW-Authenticate), or
// passes through a failure of the lookup itself.
func authError(w http.ResponseWriter, err error) error {
	var e *Error
	switch {
	case errors.Is(err, auth.ErrMissingCredentials):
		w.Header().Set("WWW-Authenticate", `Bearer realm="api"`)
		return E(KindUnauthenticated, "missing_credentials", "send a token as Authorization: Bearer <token>")
	case errors.Is(err, auth.ErrMalformedToken):
		e = E(KindUnauthenticated, "invalid_token", "the token is malformed")
	case errors.Is(err, auth.ErrUnknownToken):
		e = E(KindUnauthenticated, "invalid_token", "the token is unknown or has been revoked")
	case errors.Is(err, auth.ErrExpiredToken):
		e = E(KindUnauthenticated, "token_expired", "the token has expired")
	default:
		return err
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="api", error="invalid_token"`)
	return e
}

// fail answers with err as a problem; 5xx causes are logged, client errors are not.
func (m *Mux) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := asError(err)
	if e.Status() >= 500 {
		m.cfg.Log.ErrorContext(r.Context(), "request failed", "request_id", RequestID(r.Context()), "code", e.Code, "error", err)
	}
	writeProblem(w, RequestID(r.Context()), e)
}

// unrouted answers requests no route matches: 405 with Allow when the path exists under
// other methods, else 404.
func (m *Mux) unrouted(w http.ResponseWriter, r *http.Request) {
	var allowed []string
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = method
		if _, pattern := m.mux.Handler(probe); pattern != "" && pattern != "/" {
			allowed = append(allowed, method)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		m.fail(w, r, Errorf(KindMethodNotAllowed, "method_not_allowed", "%s is not allowed here; allowed: %s", r.Method, strings.Join(allowed, ", ")))
		return
	}
	m.fail(w, r, E(KindNotFound, "not_found", "no such route"))
}

// requestID accepts a caller's X-Request-Id when it is short and plain, else mints one. An
// id that looks like it holds a token is refused too: the id is echoed, logged and audited.
func requestID(r *http.Request) string {
	id := r.Header.Get("X-Request-Id")
	if id == "" || len(id) > 128 || strings.Contains(id, auth.PATPrefix) || strings.Contains(id, auth.BotPrefix) {
		return ids.New("req")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return ids.New("req")
		}
	}
	return id
}

// statusWriter remembers what was written, for the request log.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// auditWriter publishes the request's audit event the moment the status is known and
// before any byte of the response leaves, so a client never sees an unaudited outcome.
type auditWriter struct {
	http.ResponseWriter
	m     *Mux
	r     *http.Request
	rt    Route
	p     *auth.Principal
	start time.Time
	wrote bool

	deferral *store.Deferral
	// eventID is the request's audit event's id, whether staged or published.
	eventID string
	// staged is the status of the event the handler committed in its own transaction
	// (StageAudit), 0 for none.
	staged int
}

func (w *auditWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.publish(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *auditWriter) publish(status int) {
	// Closed first, so the event is a synced commit: locally it makes the handler's
	// deferred writes durable with it, and settle finds nothing left to sync.
	w.deferral.Close()
	// An event the handler committed with this status is the request's; any other status
	// (the handler failed after staging) is published under the same id, replacing it.
	if w.staged != status {
		PublishAudit(w.r.Context(), w.m.cfg.Audit, w.m.cfg.Log, w.audited(status))
	}
	w.settle()
}

// audited is the request's audited operation, answered with status.
func (w *auditWriter) audited(status int) Audited {
	bot := ""
	if w.rt.BotScoped {
		bot = w.r.PathValue("botID")
	} else {
		// A route that finds its bot through a resource or a body (a playbook install's)
		// checked it with Authorize, which noted it.
		bot = actedOn(w.r)
	}
	return Audited{Principal: w.p, Method: w.rt.Method, Route: w.rt.Pattern(), Bot: bot,
		Status: status, Start: w.start, RequestID: RequestID(w.r.Context()), EventID: w.eventID}
}

// StageAudit returns the write that stores the audit event of ctx's request as answered with
// status, for the handler to commit to st in the same transaction as its own writes (one
// commit instead of two), and the function to call once that transaction has committed: the
// kernel then publishes no event of its own if the response's status is status, and
// otherwise publishes the real one under the same id, replacing it. ok is false, and the
// kernel publishes as usual, when the trail is not in st (on AWS it is the bus), ctx is not a
// mutating route's request, or its response has started.
func StageAudit(ctx context.Context, st store.Store, status int) (w store.Write, committed func(), ok bool) {
	ri, _ := ctx.Value(infoKey{}).(*requestInfo)
	if ri == nil || ri.audit == nil || ri.audit.wrote {
		return store.Write{}, nil, false
	}
	aw := ri.audit
	stager, isStager := aw.m.cfg.Audit.(audit.Stager)
	if !isStager {
		return store.Write{}, nil, false
	}
	w, ok, err := stager.Stage(st, auditEvent(aw.audited(status)))
	if err != nil || !ok {
		return store.Write{}, nil, false
	}
	return w, func() { aw.staged = status }, true
}

// settle syncs the handler's deferred writes that the audit event did not cover (it went
// to another store, or failed). A failure is an operator alarm like a lost audit event: the
// status is decided, and the writes are committed, only not known to be on disk.
func (w *auditWriter) settle() {
	if err := w.deferral.Settle(context.WithoutCancel(w.r.Context())); err != nil {
		w.m.cfg.Log.ErrorContext(w.r.Context(), "sync of deferred writes failed", "request_id", RequestID(w.r.Context()), "route", w.rt.Pattern(), "error", err)
	}
}

// CommitAudited commits writes and, where the trail is in the store (StageAudit), the
// request's audit event answered with status, in one transaction. Otherwise it commits the
// writes alone: a single put or delete as itself (DynamoDB bills a transaction's writes
// twice), more in one transaction.
func CommitAudited(ctx context.Context, st store.Store, status int, writes ...store.Write) error {
	if event, committed, ok := StageAudit(ctx, st, status); ok {
		if err := st.Transact(ctx, append(writes, event)); err != nil {
			return err
		}
		committed()
		return nil
	}
	if len(writes) == 1 {
		switch w := writes[0]; {
		case w.Put != nil:
			return st.Put(ctx, *w.Put, w.Cond)
		case w.Delete != nil:
			return st.Delete(ctx, *w.Delete, w.Cond)
		}
	}
	return st.Transact(ctx, writes)
}

// Audited is one audited operation: a mutating route's request, or a mutating MCP tool's
// call (shared/mcptool), whatever its outcome.
type Audited struct {
	Principal *auth.Principal
	Method    string
	// Route is the route's pattern ("PATCH /api/bots/{botID}"), or what stands for one
	// (an MCP tool's "POST /mcp/tools/start_broadcast").
	Route string
	// Bot is the bot the operation was made against ("" for none): the client's text, so
	// only a well-formed bot id is recorded.
	Bot       string
	Status    int
	Start     time.Time
	RequestID string
	// EventID is the event's id ("": a new one).
	EventID string
}

// PublishAudit records op in the audit trail. It does not fail: the operation has happened
// whatever the trail says, and a lost event is an operator alarm (logged), not a client
// error (a 500 here would invite a retry of a done mutation).
func PublishAudit(ctx context.Context, pub audit.Publisher, log *slog.Logger, op Audited) {
	e := auditEvent(op)
	if err := pub.Publish(context.WithoutCancel(ctx), e); err != nil {
		log.ErrorContext(ctx, "audit publish failed", "request_id", e.RequestID, "event_id", e.ID, "route", e.Route, "status", op.Status, "error", err)
	}
}

// auditEvent is op's audit event.
func auditEvent(op Audited) audit.Event {
	id := op.EventID
	if id == "" {
		id = ids.At("evt", op.Start)
	}
	e := audit.Event{
		ID:          id,
		Time:        op.Start.UTC().Truncate(time.Millisecond),
		AccountID:   op.Principal.AccountID,
		ActorUserID: op.Principal.UserID,
		TokenID:     op.Principal.TokenID,
		TokenKind:   string(op.Principal.Kind),
		Method:      op.Method,
		Route:       op.Route,
		Status:      op.Status,
		RequestID:   op.RequestID,
	}
	if ids.Valid("bot", op.Bot) {
		e.BotID = op.Bot
	}
	return e
}

// written reports whether w (one of ours) has started a response.
func written(w http.ResponseWriter) bool {
	for {
		switch x := w.(type) {
		case *auditWriter:
			return x.wrote
		case *statusWriter:
			return x.wrote
		default:
			u, ok := w.(interface{ Unwrap() http.ResponseWriter })
			if !ok {
				return false
			}
			w = u.Unwrap()
		}
	}
}
