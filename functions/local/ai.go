package main

import (
	"bufio"
	"context"
	"flag"
	"os"
	"strings"

	aiwiring "github.com/botplatform/api/functions/ai/wiring"
)

// The managed AI operator commands: an account's own provider keys (bring your own key),
// which the operator sets at the account's request. The key is read from stdin, never a
// flag (flags show in the process list), and is never printed: only its fingerprint.
func init() {
	adminCommands["ai set-key"] = aiSetKey
	adminCommands["ai delete-key"] = aiDeleteKey
	adminCommands["ai keys"] = aiKeys
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
