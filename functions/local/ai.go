package main

import (
	"bufio"
	"context"
	"flag"
	"os"
	"strings"
	"time"

	"github.com/botplatform/api/functions/ai"
	aiwiring "github.com/botplatform/api/functions/ai/wiring"
)

// The managed AI operator commands: an account's own provider keys (bring your own key),
// which the operator sets at the account's request. The key is read from stdin, never a
// flag (flags show in the process list), and is never printed: only its fingerprint.
func init() {
	adminCommands["ai set-key"] = aiSetKey
	adminCommands["ai delete-key"] = aiDeleteKey
	adminCommands["ai keys"] = aiKeys
	adminCommands["ai reconcile"] = aiReconcile
}

// aiReconcile compares the platform's ledger of managed usage with the providers' invoice
// lines (docs/ai.md, "Reconciliation"); without --invoice it prints the ledger alone. The
// answer's differences counts the rows that do not match, for a scheduled check to alert on.
func aiReconcile(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	from := fs.String("from", "", "first day, YYYY-MM-DD (UTC)")
	to := fs.String("to", "", "last day, YYYY-MM-DD (UTC), inclusive")
	invoice := fs.String("invoice", "", "CSV file: date,provider,model,input_tokens,output_tokens,cost_usd")
	return func(ctx context.Context, a *app) (any, error) {
		first, err1 := time.Parse(time.DateOnly, *from)
		last, err2 := time.Parse(time.DateOnly, *to)
		if err1 != nil || err2 != nil {
			return nil, usageError("--from and --to are required days, YYYY-MM-DD")
		}
		svc, err := aiwiring.Service(a.Env, os.Getenv)
		if err != nil {
			return nil, err
		}
		if *invoice == "" {
			rows, err := svc.Ledger(ctx, first, last)
			if err != nil {
				return nil, usageError(err.Error())
			}
			return map[string]any{"from": *from, "to": *to, "ledger": rows}, nil
		}
		f, err := os.Open(*invoice)
		if err != nil {
			return nil, usageError(err.Error())
		}
		defer f.Close()
		lines, err := ai.ReadInvoice(f)
		if err != nil {
			return nil, usageError(err.Error())
		}
		rec, err := svc.Reconcile(ctx, first, last, lines)
		if err != nil {
			return nil, usageError(err.Error())
		}
		return rec, nil
	}
}

func aiSetKey(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	account := fs.String("account", "", "account id")
	provider := fs.String("provider", "", "openai, anthropic or gemini")
	return func(ctx context.Context, a *app) (any, error) {
		if *account == "" || *provider == "" {
			return nil, usageError("--account and --provider are required; the key is read from stdin")
		}
		if _, err := a.Auth.Account(ctx, *account); err != nil {
			return nil, notFoundAs(err, "account "+*account)
		}
		line, err := bufio.NewReader(os.Stdin).ReadString('\n')
		if strings.TrimSpace(line) == "" {
			return nil, usageError("no key on stdin")
		}
		if err != nil && line == "" {
			return nil, err
		}
		svc, err := aiwiring.Service(a.Env, os.Getenv)
		if err != nil {
			return nil, err
		}
		info, err := svc.SetKey(ctx, *account, *provider, line)
		if err != nil {
			return nil, usageError(err.Error())
		}
		return info, nil
	}
}

func aiDeleteKey(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	account := fs.String("account", "", "account id")
	provider := fs.String("provider", "", "openai, anthropic or gemini")
	return func(ctx context.Context, a *app) (any, error) {
		if *account == "" || *provider == "" {
			return nil, usageError("--account and --provider are required")
		}
		svc, err := aiwiring.Service(a.Env, os.Getenv)
		if err != nil {
			return nil, err
		}
		if err := svc.DeleteKey(ctx, *account, *provider); err != nil {
			return nil, err
		}
		return map[string]string{"account_id": *account, "provider": *provider, "status": "deleted"}, nil
	}
}

func aiKeys(fs *flag.FlagSet) func(context.Context, *app) (any, error) {
	account := fs.String("account", "", "account id")
	return func(ctx context.Context, a *app) (any, error) {
		if *account == "" {
			return nil, usageError("--account is required")
		}
		svc, err := aiwiring.Service(a.Env, os.Getenv)
		if err != nil {
			return nil, err
		}
		keys, err := svc.Keys(ctx, *account)
		if err != nil {
			return nil, err
		}
		return map[string]any{"account_id": *account, "keys": keys}, nil
	}
}
