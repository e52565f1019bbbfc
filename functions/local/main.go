// Command local is the all-in-one local process: `serve` runs every route family on one
// address over an embedded SQLite store; `admin ...` manages accounts, users, bots and
// tokens in the same data directory, also while serve runs.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage:
  local serve [--addr 127.0.0.1:8080] [--data ./.data] [--log-format text|json] [--durability full|normal] [--public-url URL] [--telegram-base-url URL] [--vk-base-url URL]
        [--smtp-addr HOST:PORT] [--smtp-user USER] [--smtp-tls starttls|implicit-tls|none]  (env SMTP_PASSWORD)
        [--dns-server HOST:PORT] [--email-rate N]  (env INBOUND_SECRET, MAILGUN_SIGNING_KEY)
        [--whatsapp-base-url URL] [--whatsapp-app-id ID]  (env WHATSAPP_APP_SECRET, WHATSAPP_VERIFY_TOKEN)
        (managed AI: env AI_OPENAI_API_KEY, AI_ANTHROPIC_API_KEY, AI_GEMINI_API_KEY, AI_*_BASE_URL, AI_ROUTES, AI_PRICES: docs/ai.md)
  local admin bootstrap [--data DIR]
  local admin account create --name NAME [--data DIR]
  local admin account plan --account ID --features f1,f2|standard [--data DIR]
  local admin account rollout --account ID [--enable copilot,flow_intelligence,replay,playbooks] [--disable ...] [--data DIR]
  local admin user create --account ID --rights reactions,dialogs,analytics [--name NAME] [--data DIR]
  local admin user grant --account ID --user ID --bot ID --rights reactions,dialogs,analytics [--data DIR]
  local admin bot create --account ID --name NAME [--data DIR]
  local admin bot paid-broadcasts --bot ID --enable|--disable [--account ID] [--data DIR]
  local admin pat create --account ID [--user ID] --scopes "bots:read,bots:write" [--expires-in 30d] [--name NAME] [--data DIR]
  local admin channel connect --bot ID --type telegram --token TOKEN|- [--base-url URL] [--name NAME] [--account ID] [--public-url URL] [--data DIR]
  local admin queue dead-letters [--limit 100] [--data DIR]
  local admin queue redrive --id ID [--data DIR]
  local admin ai set-key --account ID --provider openai|anthropic|gemini [--data DIR]  (the key on stdin)
  local admin ai delete-key --account ID --provider openai|anthropic|gemini [--data DIR]
  local admin ai keys --account ID [--data DIR]
`

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, stderr)
	case "admin":
		return admin(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
	return 2
}
