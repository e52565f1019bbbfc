// Package mcptool declares MCP tools next to the routes of their families, with the same
// access a route declares (scope, bot rights, plan and rollout features), and runs a call of
// one the way the HTTP kernel runs a request: strict arguments, the access checks of
// httpapi.Authorize (another account's bot is not found), the audit event of a mutation
// (httpapi.PublishAudit), client-safe errors. It knows nothing of the MCP protocol:
// functions/mcp serves the composed families' tools over Streamable HTTP.
//
// A tool is a few lines beside the family's routes:
//
//	mcptool.New("get_reaction", "Get one reaction of a bot.", httpapi.Need("reactions:read"),
//		func(ctx context.Context, in getArgs) (any, error) {
//			return svc.Get(ctx, in.BotID, in.ReactionID)
//		})
//
// where getArgs is a struct that embeds Bot (the tool acts on one of the caller's bots) and
// holds the other arguments with their JSON names and `jsonschema` descriptions.
package mcptool

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"strings"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// Tool is one MCP tool: its name, what it does, who may call it and how it runs. Build
// tools with New; the zero value is not a tool.
type Tool struct {
	// Name is the tool's name in tools/list and tools/call (lower_snake_case).
	Name string
	// Description tells a model what the tool does and returns.
	Description string
	// Access is what a caller needs, exactly as a route declares it (httpapi.Need...).
	Access httpapi.Access
	// Mutates marks a tool that changes something: each of its calls is audited like a POST,
	// whatever its outcome.
	Mutates bool
	// BotScoped tools act on one bot, named by their bot_id argument (their arguments embed
	// Bot): the bot must be the caller's, and the rights are checked on it.
	BotScoped bool
	// Route is the REST route the tool mirrors ("GET /api/bots/{botID}"), "" for none: the
	// tool answers what the route answers, and its access must be the route's (the MCP
	// family's tests hold every composed tool to its route).
	Route string

	args   reflect.Type
	decode func(raw []byte) (bot string, run func(ctx context.Context) (any, error), err error)
}

// Bot is the argument of a tool that acts on one of the caller's bots: embed it in the
// tool's arguments. A bot of another account is not found, as on the REST routes.
type Bot struct {
	BotID string `json:"bot_id" jsonschema:"the bot's id (bot_...), as list_bots returns it"`
}

func (b *Bot) bot() string { return b.BotID }

type botScoped interface{ bot() string }

var botScopedType = reflect.TypeFor[botScoped]()

var nameRe = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// New declares a tool whose arguments are In: a struct whose exported fields are the
// arguments, by their JSON names (each optional one with omitempty), with a `jsonschema`
// tag describing each. Arguments are decoded strictly (an unknown argument is an error
// naming it) and In's Validate, if it has one, runs after decoding, as for a request body.
// h returns what the matching REST route would answer; its errors are answered as the
// route's would be. New panics on a declaration the kernel could not enforce.
func New[In any](name, description string, access httpapi.Access, h func(ctx context.Context, in In) (any, error)) Tool {
	t := Tool{Name: name, Description: description, Access: access, args: reflect.TypeFor[In]()}
	if t.args.Kind() != reflect.Struct {
		panic("mcptool: the arguments of " + name + " must be a struct")
	}
	t.BotScoped = reflect.PointerTo(t.args).Implements(botScopedType)
	t.check()
	t.decode = func(raw []byte) (string, func(context.Context) (any, error), error) {
		var in In
		if err := httpapi.DecodeJSON(raw, &in, ""); err != nil {
			return "", nil, t.argumentError(err)
		}
		bot := ""
		if b, ok := any(&in).(botScoped); ok {
			if bot = b.bot(); bot == "" {
				var p httpapi.Problems
				p.Add("bot_id", "is required: the id of the bot to act on")
				return "", nil, p.Err()
			}
		}
		return bot, func(ctx context.Context) (any, error) { return h(ctx, in) }, nil
	}
	return t
}

// Mutating returns t marked as a tool that changes something (audited like a POST).
func (t Tool) Mutating() Tool { t.Mutates = true; return t }

// Mirroring returns t marked as the MCP form of the REST route pattern ("GET
// /api/bots/{botID}/reactions"): same access, same answer.
func (t Tool) Mirroring(pattern string) Tool { t.Route = pattern; return t }

// check refuses declarations the kernel could not enforce.
func (t Tool) check() {
	switch {
	case !nameRe.MatchString(t.Name):
		panic(fmt.Sprintf("mcptool: tool name %q is not lower_snake_case (at most 64 characters)", t.Name))
	case strings.TrimSpace(t.Description) == "":
		panic("mcptool: tool " + t.Name + " has no description")
	case t.Access.Public || t.Access.PerCall || t.Access.Scope == "":
		panic("mcptool: tool " + t.Name + " needs a scope")
	case !t.BotScoped && (t.Access.Rights != 0 || t.Access.PaidBroadcasts):
		panic("mcptool: tool " + t.Name + " needs bot rights but takes no bot: embed mcptool.Bot in its arguments")
	}
}

// Args is the Go type of the tool's arguments, from which its input schema is derived.
func (t Tool) Args() reflect.Type { return t.args }

// Summary is the description with the access the tool needs, as tools/list shows it.
func (t Tool) Summary() string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(t.Description))
	b.WriteString("\n\nScope: `")
	b.WriteString(string(t.Access.Scope))
	b.WriteString("`")
	if t.Access.AlsoScope != "" {
		b.WriteString(" and `" + string(t.Access.AlsoScope) + "`")
	}
	b.WriteString(".")
	if names := t.Access.Rights.Names(); len(names) > 0 {
		s := make([]string, len(names))
		for i, n := range names {
			s[i] = "`" + string(n) + "`"
		}
		b.WriteString(" Bot rights: " + strings.Join(s, ", ") + ".")
	}
	if t.Access.Plan != "" {
		b.WriteString(" Plan feature: `" + string(t.Access.Plan) + "`.")
	}
	if t.Access.Rollout != "" {
		b.WriteString(" Rollout feature: `" + string(t.Access.Rollout) + "`.")
	}
	if t.Mutates {
		b.WriteString(" Audited.")
	}
	if t.Route != "" {
		b.WriteString(" The MCP form of `" + t.Route + "`.")
	}
	return b.String()
}

// argumentError words a strict-decoding error for a tool: an unknown argument is named,
// with the arguments the tool takes.
func (t Tool) argumentError(err error) error {
	e := httpapi.AsError(err)
	if e.Code == "unknown_field" {
		field, _ := e.Extensions["field"].(string)
		e.Detail = fmt.Sprintf("unknown argument %q: %s takes %s", field, t.Name, strings.Join(t.argNames(), ", "))
	}
	return e
}

// argNames lists the tool's arguments by their JSON names, in declaration order.
func (t Tool) argNames() []string {
	var out []string
	for _, f := range reflect.VisibleFields(t.args) {
		if !f.IsExported() || f.Anonymous && f.Tag.Get("json") == "" {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return []string{"no arguments"}
	}
	return out
}

type loadedKey struct{}

// LoadedBot returns the bot the kernel loaded for the call's bot_id (the tenancy check's
// read, as httpapi.LoadedBot is for a route), or nil.
func LoadedBot(ctx context.Context) any { return ctx.Value(loadedKey{}) }

// Caller returns the principal of the call; the MCP route authenticated it before any tool
// runs, so it is never nil inside a tool's handler.
func Caller(ctx context.Context) *auth.Principal {
	p, _ := auth.FromContext(ctx)
	return p
}
