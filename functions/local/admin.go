package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/auth"
)

// admin runs one operator command. Each prints exactly one JSON object on stdout: the
// result, or {"error": "..."} with exit code 1 (2 for usage errors).
//
// `admin --help` (or -h, help) prints the usage of every command, and `admin <cmd> --help`
// that command's flags, on stdout with exit code 0: asking for help is not a mistake.
func admin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	name := strings.Join(args[:min(2, len(args))], " ")
	var rest []string
	cmd, ok := adminCommands[name]
	if ok {
		rest = args[2:]
	} else if len(args) > 0 {
		cmd, ok = adminCommands[args[0]]
		rest = args[1:]
	}
	if !ok {
		fmt.Fprint(stderr, usage)
		return printJSON(stdout, map[string]string{"error": fmt.Sprintf("unknown admin command %q", strings.Join(args, " "))}, 2)
	}
	fs := flag.NewFlagSet("admin "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {} // help goes to stdout, a mistake's usage to stderr: both below
	dataDir := fs.String("data", "./.data", "data directory")
	run := cmd(fs)
	if err := fs.Parse(rest); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stdout, "usage: local admin %s [flags]\n", name)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(stderr, "usage: local admin %s [flags]\n", name)
		fs.PrintDefaults()
		return printJSON(stdout, map[string]string{"error": err.Error()}, 2)
	}
	if fs.NArg() > 0 {
		return printJSON(stdout, map[string]string{"error": fmt.Sprintf("unexpected arguments: %v", fs.Args())}, 2)
	}
	a, err := openApp(*dataDir, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return printJSON(stdout, map[string]string{"error": err.Error()}, 1)
	}
	defer a.Close()
	ctx, cancel := ctxOrTimeout(ctx)
	defer cancel()
	out, err := run(ctx, a)
	if err != nil {
		var ue usageError
		if errors.As(err, &ue) {
			fmt.Fprintln(stderr, ue.Error())
			return printJSON(stdout, map[string]string{"error": ue.Error()}, 2)
		}
		return printJSON(stdout, map[string]string{"error": err.Error()}, 1)
	}
	return printJSON(stdout, out, 0)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "--help" || arg == "-help"
}

type usageError string

func (u usageError) Error() string { return string(u) }

// adminCommand declares its flags on fs and returns the function that runs it.
type adminCommand func(fs *flag.FlagSet) func(ctx context.Context, a *app) (any, error)

var adminCommands = map[string]adminCommand{
	"channel connect":    channelConnect,   // channel.go
	"queue dead-letters": queueDeadLetters, // deadletters.go
	"queue redrive":      queueRedrive,
	"bootstrap": func(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
		return func(ctx context.Context, a *app) (any, error) {
			res, err := a.bootstrap(ctx)
			if err != nil {
				return nil, err
			}
			// Keep bootstrap.json current, also when bootstrap ran before the first serve.
			if _, err := writeBootstrapFile(a.dataDir, res); err != nil {
				return nil, fmt.Errorf("write bootstrap file: %w", err)
			}
			return map[string]string{"account_id": res.AccountID, "user_id": res.UserID, "bot_id": res.BotID, "token": res.Token}, nil
		}
	},
	"account create": func(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
		name := fs.String("name", "", "account name")
		return func(ctx context.Context, a *app) (any, error) {
			if *name == "" {
				return nil, usageError("--name is required")
			}
			acct, owner, err := a.Auth.CreateAccount(ctx, *name)
			if err != nil {
				return nil, err
			}
			return map[string]string{"account_id": acct.ID, "user_id": owner.ID}, nil
		}
	},
	"user create": func(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
		account := fs.String("account", "", "account id")
		rights := fs.String("rights", "", `rights on every bot: a comma-separated subset of reactions,dialogs,analytics ("" for none)`)
		name := fs.String("name", "", "display name")
		return func(ctx context.Context, a *app) (any, error) {
			if *account == "" {
				return nil, usageError("--account is required")
			}
			rs, err := auth.ParseRights(*rights)
			if err != nil {
				return nil, usageError(err.Error())
			}
			u, err := a.Auth.CreateUser(ctx, *account, *name, rs)
			if err != nil {
				return nil, notFoundAs(err, "account "+*account)
			}
			return map[string]string{"user_id": u.ID}, nil
		}
	},
	"user grant": func(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
		account := fs.String("account", "", "account id")
		user := fs.String("user", "", "user id")
		bot := fs.String("bot", "", "bot id")
		rights := fs.String("rights", "", `rights on this bot, beyond the user's account-wide ones: a subset of reactions,dialogs,analytics ("" removes the grant)`)
		return func(ctx context.Context, a *app) (any, error) {
			if *account == "" || *user == "" || *bot == "" {
				return nil, usageError("--account, --user and --bot are required")
			}
			rs, err := auth.ParseRights(*rights)
			if err != nil {
				return nil, usageError(err.Error())
			}
			if _, err := a.Bots.Get(ctx, *account, *bot); err != nil {
				return nil, fmt.Errorf("bot %s of account %s not found", *bot, *account)
			}
			u, err := a.Auth.SetBotRights(ctx, *account, *user, *bot, rs)
			if err != nil {
				return nil, notFoundAs(err, "user "+*user+" of account "+*account)
			}
			return map[string]any{"user_id": u.ID, "bot_id": *bot, "rights": u.BotRights[*bot].Names()}, nil
		}
	},
	"bot create": func(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
		account := fs.String("account", "", "account id")
		name := fs.String("name", "", "bot name")
		return func(ctx context.Context, a *app) (any, error) {
			if *account == "" || *name == "" {
				return nil, usageError("--account and --name are required")
			}
			if _, err := a.Auth.Account(ctx, *account); err != nil {
				return nil, notFoundAs(err, "account "+*account)
			}
			b, err := a.Bots.Create(ctx, *account, *name, nil)
			if err != nil {
				return nil, err
			}
			return map[string]string{"bot_id": b.ID}, nil
		}
	},
	"pat create": func(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
		account := fs.String("account", "", "account id")
		user := fs.String("user", "", "user id (default: the account owner)")
		scopes := fs.String("scopes", "", `comma-separated scopes, e.g. "bots:read,bots:write" or "*"`)
		expiresIn := fs.String("expires-in", "30d", "lifetime: a Go duration (1h, 90m) or days (30d), at most 365d")
		name := fs.String("name", "admin", "token name")
		return func(ctx context.Context, a *app) (any, error) {
			if *account == "" || *scopes == "" {
				return nil, usageError("--account and --scopes are required")
			}
			life, err := parseLifetime(*expiresIn)
			if err != nil {
				return nil, usageError(err.Error())
			}
			uid := *user
			if uid == "" {
				acct, err := a.Auth.Account(ctx, *account)
				if err != nil {
					return nil, notFoundAs(err, "account "+*account)
				}
				uid = acct.OwnerUserID
			}
			list := strings.Split(*scopes, ",")
			for i := range list {
				list[i] = strings.TrimSpace(list[i])
			}
			pat, tok, err := a.Auth.IssuePAT(ctx, *account, uid, *name, list, a.Now().Add(life))
			if err != nil {
				return nil, notFoundAs(err, "user "+uid+" of account "+*account)
			}
			return map[string]string{"token_id": pat.ID, "token": tok, "expires_at": pat.ExpiresAt.Format(time.RFC3339)}, nil
		}
	},
}

func notFoundAs(err error, what string) error {
	if errors.Is(err, auth.ErrNotFound) {
		return fmt.Errorf("%s not found", what)
	}
	return err
}

// parseLifetime accepts Go durations and whole days ("30d").
func parseLifetime(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil {
			return 0, fmt.Errorf("--expires-in %q: want a duration such as 1h or 30d", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("--expires-in %q: want a duration such as 1h or 30d", s)
		}
	}
	if d < time.Second || d > auth.MaxPATLifetime {
		return 0, fmt.Errorf("--expires-in must be from 1s to 365d")
	}
	return d, nil
}

func printJSON(w io.Writer, v any, code int) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(w, `{"error":%q}`+"\n", err.Error())
		return 1
	}
	fmt.Fprintf(w, "%s\n", b)
	return code
}
