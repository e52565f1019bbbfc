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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/functions/auditlog"
	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/pats"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
)

// app is the local process's environment: every dependency, built once from the data directory.
type app struct {
	dataDir string
	now     func() time.Time
	log     *slog.Logger
	store   store.Store
	sqlite  *sqlite.Store
	auth    *auth.Service
	bots    *bots.Service
	audit   *audit.Log
	cursors *httpapi.Cursors
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
	now := time.Now
	st, err := sqlite.Open(filepath.Join(dataDir, "store.db"), sqlite.WithClock(now))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	a := &app{dataDir: dataDir, now: now, log: log, store: st, sqlite: st}
	a.auth = auth.NewService(st, now, log)
	a.bots = bots.NewService(st, a.auth, now)
	a.audit = audit.NewLog(st)
	a.cursors = httpapi.NewCursors(deriveKey(master, "list-cursors-v1"))
	return a, nil
}

func (a *app) Close() error { return a.store.Close() }

// handler builds the router with every family's routes.
func (a *app) handler() (*httpapi.Mux, error) {
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: httpapi.BearerAuth(a.auth),
		Bots:         a.bots,
		Audit:        a.audit,
		Log:          a.log,
		Now:          a.now,
	})
	if err != nil {
		return nil, err
	}
	mux.Handle("GET /openapi.yaml", httpapi.Public(), serveOpenAPI)
	mux.Handle("GET /healthz", httpapi.Public(), func(w http.ResponseWriter, r *http.Request) error {
		return httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	pats.Routes(mux, a.auth, a.cursors, a.now)
	bots.Routes(mux, a.bots, a.auth, a.cursors)
	auditlog.Routes(mux, a.audit, a.cursors)
	return mux, nil
}

func serveOpenAPI(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(http.StatusOK)
	_, err := w.Write(docs.OpenAPI)
	return err
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
					a.log.Warn("sweep of expired items failed", "error", err)
				}
				break
			}
			if total += n; n < 500 {
				break
			}
		}
		if total > 0 {
			a.log.Info("swept expired items", "count", total)
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
