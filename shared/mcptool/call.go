package mcptool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/httpapi"
)

// Deps are what running a tool needs of the kernel: the tenancy check of bot_id (the
// routes' own, family.Env.Tenancy), the audit trail, a log and the clock.
type Deps struct {
	Bots  httpapi.BotLoader
	Audit audit.Publisher
	Log   *slog.Logger
	Now   func() time.Time
}

// Validate reports every missing dependency.
func (d Deps) Validate() error {
	var errs []error
	for name, missing := range map[string]bool{"Bots": d.Bots == nil, "Audit": d.Audit == nil, "Log": d.Log == nil, "Now": d.Now == nil} {
		if missing {
			errs = append(errs, fmt.Errorf("mcptool: missing %s", name))
		}
	}
	return errors.Join(errs...)
}

// Result is the outcome of one call: the value the tool answered (the JSON the matching
// REST route answers), or the client-safe error it was refused with.
type Result struct {
	Value any
	Err   *httpapi.Error
}

// Status is the HTTP status the matching REST request would have answered: what the audit
// event of a mutating call records.
func (r Result) Status() int {
	if r.Err != nil {
		return r.Err.Status()
	}
	return http.StatusOK
}

// AuditRoute is what a tool's audit events name as their route: the MCP endpoint and the
// tool, in the shape of a route (the audit event schema's).
func AuditRoute(tool string) string { return "POST /mcp/tools/" + tool }

// Call runs the tool for the caller authenticated in ctx (the MCP route's): it decodes the
// arguments strictly, applies the tool's access exactly as a route's (httpapi.Authorize),
// runs the handler and, for a mutating tool, publishes the audit event before the result
// leaves, whatever the outcome. A panic in the handler is an internal error, audited too.
func (t Tool) Call(ctx context.Context, d Deps, args json.RawMessage) (res Result) {
	start := d.Now()
	p := Caller(ctx)
	if p == nil {
		// The MCP route is authenticated: no caller is a wiring fault, not a client's.
		return Result{Err: httpapi.AsError(errors.New("mcptool: a tool call without an authenticated caller"))}
	}
	bot := ""
	if t.Mutates {
		defer func() {
			httpapi.PublishAudit(ctx, d.Audit, d.Log, httpapi.Audited{
				Principal: p, Method: http.MethodPost, Route: AuditRoute(t.Name), Bot: bot,
				Status: res.Status(), Start: start, RequestID: httpapi.RequestID(ctx),
			})
		}()
	}
	defer func() {
		if v := recover(); v != nil {
			d.Log.ErrorContext(ctx, "panic", "request_id", httpapi.RequestID(ctx), "tool", t.Name, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			res = Result{Err: httpapi.AsError(nil)}
		}
	}()
	value, err := t.run(ctx, d, args, &bot)
	if err != nil {
		e := httpapi.AsError(err)
		if e.Status() >= 500 {
			d.Log.ErrorContext(ctx, "tool failed", "request_id", httpapi.RequestID(ctx), "tool", t.Name, "code", e.Code, "error", err)
		}
		return Result{Err: e}
	}
	return Result{Value: value}
}

// run decodes, authorizes and runs; *bot is set once the arguments name one.
func (t Tool) run(ctx context.Context, d Deps, args json.RawMessage, bot *string) (any, error) {
	if t.decode == nil {
		return nil, errors.New("mcptool: tool " + t.Name + " was not declared with New")
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}") // no arguments at all: none given
	}
	b, run, err := t.decode(args)
	if err != nil {
		return nil, err
	}
	*bot = b
	loaded, err := httpapi.Authorize(ctx, d.Bots, t.Access, Caller(ctx), t.BotScoped, b)
	if err != nil {
		return nil, err
	}
	if loaded != nil {
		ctx = context.WithValue(ctx, loadedKey{}, loaded)
	}
	return run(ctx)
}
