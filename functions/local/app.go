package main

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store/sqlite"
)

// app is the local process's environment: every dependency, built once from the data directory.
type app struct {
	*platform.Env
	dataDir string
	sqlite  *sqlite.Store
}

// openApp opens (creating if needed) the data directory: the SQLite store and the master key.
func openApp(dataDir string, log *slog.Logger) (*app, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	master, err := loadOrCreateKey(filepath.Join(dataDir, "master.key"))
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(filepath.Join(dataDir, "store.db"), sqlite.WithClock(time.Now))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	env, err := platform.NewEnv(platform.Deps{
		Store:     st,
		Audit:     audit.NewLog(st), // locally the trail is written straight to the store
		CursorKey: deriveKey(master, "list-cursors-v1"),
		Log:       log,
		Now:       time.Now,
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	return &app{Env: env, dataDir: dataDir, sqlite: st}, nil
}

func (a *app) Close() error { return a.Store.Close() }

// handler builds the router with every family's routes, authenticating bearer tokens itself.
func (a *app) handler() (*httpapi.Mux, error) {
	return a.Mux(httpapi.BearerAuth(a.Auth), platform.Families()...)
}

// sweepEvery is how often the local process reclaims expired items (DynamoDB's TTL does it on AWS).
const sweepEvery = 10 * time.Minute

// sweep deletes expired items now and every sweepEvery until ctx ends, in small batches so
// that the admin CLI and requests never wait long for the write lock.
func (a *app) sweep(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	for {
		var total int64
		for {
			n, err := a.sqlite.DeleteExpired(ctx, 500)
			if err != nil {
				if ctx.Err() == nil {
					a.Log.Warn("sweep of expired items failed", "error", err)
				}
				break
			}
			if total += n; n < 500 {
				break
			}
		}
		if total > 0 {
			a.Log.Info("swept expired items", "count", total)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// loadOrCreateKey reads the 32-byte master key (hex) or creates it, readable by the owner only.
func loadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		key, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(key) != 32 {
			return nil, fmt.Errorf("master key %s is corrupt: want 64 hex characters", path)
		}
		return key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read master key: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	// O_EXCL: when serve and the admin CLI start together, one creates and the other reads.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		time.Sleep(50 * time.Millisecond)
		return loadOrCreateKey(path)
	}
	if err != nil {
		return nil, fmt.Errorf("create master key: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(hex.EncodeToString(key) + "\n"); err != nil {
		return nil, fmt.Errorf("write master key: %w", err)
	}
	return key, f.Sync()
}

// deriveKey derives a purpose-bound key from the master key, so a leak of one derived key
// (say, in a debugging session) exposes nothing else.
func deriveKey(master []byte, purpose string) []byte {
	m := hmac.New(sha256.New, master)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// ctxOrTimeout bounds one admin command.
func ctxOrTimeout(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, 30*time.Second)
}
