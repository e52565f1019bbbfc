package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/store"
)

// demoKey marks the demo account and bot, so that later starts and `admin bootstrap` reuse them.
var demoKey = store.Key{PK: "SYSTEM", SK: "DEMO"}

type demoRecord struct {
	AccountID string `json:"account_id"`
	UserID    string `json:"user_id"`
	BotID     string `json:"bot_id"`
}

// demoTokenLifetime is how long a bootstrap token lives.
const demoTokenLifetime = 90 * 24 * time.Hour

// bootstrapResult is what bootstrap prints and writes to bootstrap.json.
type bootstrapResult struct {
	AccountID string    `json:"account_id"`
	UserID    string    `json:"user_id"`
	BotID     string    `json:"bot_id"`
	Token     string    `json:"token"`
	TokenID   string    `json:"token_id"`
	ExpiresAt time.Time `json:"expires_at"`
}

// hasDemo reports whether the demo account exists.
func (a *app) hasDemo(ctx context.Context) (bool, error) {
	_, err := a.Store.Get(ctx, demoKey)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// bootstrap makes sure the demo account, owner and bot exist (reusing them when present)
// and mints a new full-access token for the owner.
func (a *app) bootstrap(ctx context.Context) (bootstrapResult, error) {
	d, err := a.ensureDemo(ctx)
	if err != nil {
		return bootstrapResult{}, err
	}
	pat, tok, err := a.Auth.IssuePAT(ctx, d.AccountID, d.UserID, "bootstrap", auth.Scopes{auth.Full}, a.Now().Add(demoTokenLifetime))
	if err != nil {
		return bootstrapResult{}, fmt.Errorf("issue demo token: %w", err)
	}
	return bootstrapResult{AccountID: d.AccountID, UserID: d.UserID, BotID: d.BotID, Token: tok, TokenID: pat.ID, ExpiresAt: pat.ExpiresAt}, nil
}

func (a *app) ensureDemo(ctx context.Context) (demoRecord, error) {
	it, err := a.Store.Get(ctx, demoKey)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return a.createDemo(ctx)
	case err != nil:
		return demoRecord{}, err
	}
	d, err := store.Decode[demoRecord](it)
	if err != nil {
		return demoRecord{}, err
	}
	if _, err := a.Bots.Get(ctx, d.AccountID, d.BotID); err == nil {
		return d, nil
	}
	// The demo bot was deleted through the API: give the demo account a new one.
	b, err := a.Bots.Create(ctx, d.AccountID, "Demo bot", nil)
	if err != nil {
		return demoRecord{}, err
	}
	d.BotID = b.ID
	return d, a.putDemo(ctx, d, store.RevisionIs(it.Revision), it.Revision+1)
}

func (a *app) createDemo(ctx context.Context) (demoRecord, error) {
	acct, owner, err := a.Auth.CreateAccount(ctx, "Demo")
	if err != nil {
		return demoRecord{}, err
	}
	b, err := a.Bots.Create(ctx, acct.ID, "Demo bot", nil)
	if err != nil {
		return demoRecord{}, err
	}
	d := demoRecord{AccountID: acct.ID, UserID: owner.ID, BotID: b.ID}
	if err := a.putDemo(ctx, d, store.MustNotExist, 1); errors.Is(err, store.ErrConditionFailed) {
		// Another process (serve and admin started together) won; use its demo.
		return a.ensureDemo(ctx)
	} else if err != nil {
		return demoRecord{}, err
	}
	return d, nil
}

func (a *app) putDemo(ctx context.Context, d demoRecord, cond store.Condition, rev int64) error {
	data, err := store.Encode(d)
	if err != nil {
		return err
	}
	return a.Store.Put(ctx, store.Item{Key: demoKey, Data: data, Revision: rev}, cond)
}

// writeBootstrapFile saves the demo credentials for scripts, readable by the owner only.
func writeBootstrapFile(dataDir string, res bootstrapResult) (string, error) {
	path := filepath.Join(dataDir, "bootstrap.json")
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dataDir, ".bootstrap-*.json")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return "", err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	return path, os.Rename(tmp.Name(), path)
}
