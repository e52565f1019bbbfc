package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/eventlog/sqlitelog"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	localqueue "github.com/botplatform/api/shared/queue/local"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/store/sqlite"
)

// app is the local process's environment: every dependency, built once from the data
// directory, and every family composed on it.
type app struct {
	*family.Env
	dataDir string
	sqlite  *sqlite.Store
	// events is the event log, in a file of its own beside the store (sqlitelog).
	events *sqlitelog.Log
	// jobs is the in-process work queue, persisted in the store; serve runs its workers.
	jobs *localqueue.Queue
	// families are every family, built once on the environment.
	families *family.Composed
	// Bots is the bots family's service, for the admin CLI.
	Bots *bots.Service
}

// appConfig is what the process is told beyond its data directory (serve's flags and the
// environment): the zero value registers no webhooks and talks to the real providers.
type appConfig struct {
	// PublicURL is where providers reach this process ("" when they cannot).
	PublicURL string
	// Providers locates the messaging providers' APIs.
	Providers platform.Providers
	// Durability is what a commit survives (serve's --durability; sqlite.Full by default).
	Durability sqlite.Durability
	// Email configures the email families (serve's flags).
	Email family.EmailSettings
	// SMTP, when set, sends email through this relay; otherwise mail is written as .eml
	// files under <data>/mail, so that the product works offline.
	SMTP *email.SMTP
	// NoSDKKey runs the process without the customer SDK's project-key secret (serve's
	// --sdk-key off), as a deployment that has not configured it.
	NoSDKKey bool
}

// sdkKey is the customer SDK's project-key secret: derived from the master key, or none.
func (c appConfig) sdkKey(keys *keyfile.Key) []byte {
	if c.NoSDKKey {
		return nil
	}
	return keys.Derive("sdk-project-keys-v1")
}

// mailer is the process's email sender.
func (c appConfig) mailer(dataDir string) email.Sender {
	if c.SMTP != nil {
		return c.SMTP
	}
	return &email.Sink{Dir: filepath.Join(dataDir, "mail")}
}

// openApp opens (creating if needed) the data directory: the SQLite store and the master key.
func openApp(dataDir string, log *slog.Logger) (*app, error) {
	return openAppWith(dataDir, log, appConfig{})
}

// openAppWith is openApp with the process's configuration.
func openAppWith(dataDir string, log *slog.Logger, cfg appConfig) (*app, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	keys, err := keyfile.LoadOrCreate(filepath.Join(dataDir, "master.key"))
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(filepath.Join(dataDir, "store.db"), sqlite.WithClock(time.Now), sqlite.WithDurability(cfg.Durability))
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	events, err := sqlitelog.Open(filepath.Join(dataDir, "events.db"), sqlitelog.WithDurability(cfg.Durability))
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("open event log: %w", err)
	}
	q, err := localqueue.New(st, localqueue.Config{Name: "jobs", Log: log})
	if err != nil {
		events.Close()
		st.Close()
		return nil, err
	}
	env, err := family.NewEnv(family.Deps{
		Tenancy:   bots.Tenancy,
		Queue:     q,
		Store:     st,
		Audit:     audit.NewLog(st), // locally the trail is written straight to the store
		CursorKey: keys.Derive("list-cursors-v1"),
		Secrets:   keys,
		Log:       log,
		Now:       time.Now,
		Adapters:  cfg.Providers.Adapters(),
		PublicURL: cfg.PublicURL,
		Email:     cfg.mailer(dataDir),
		LinkKey:   keys.Derive("email-links-v1"),
		Events:    events,
		SDKKey:    cfg.sdkKey(keys),

		EmailSettings: cfg.Email,

		// The same key file: the CRM family's values are bound to their connection by
		// their aad (on AWS the key is the same too, under another encryption context).
		CRMSecrets: keys,

		WhatsAppVerifyToken: cfg.Providers.WhatsAppVerifyToken,
	})
	if err != nil {
		events.Close()
		st.Close()
		return nil, err
	}
	return &app{Env: env, dataDir: dataDir, sqlite: st, events: events, jobs: q, families: family.Compose(env, families.All()...),
		Bots: bots.NewService(env.Store, env.Auth, env.Now)}, nil
}

// runJobs starts the job workers; the returned function stops them, waiting for running
// steps until ctx ends.
func (a *app) runJobs() (stop func(ctx context.Context) error, err error) {
	handlers, err := a.families.QueueMux()
	if err != nil {
		return nil, err
	}
	if err := a.jobs.Start(handlers); err != nil {
		return nil, err
	}
	return a.jobs.Stop, nil
}

func (a *app) Close() error { return errors.Join(a.events.Close(), a.Store.Close()) }

// handler builds the router with every family's routes, authenticating bearer tokens itself.
func (a *app) handler() (*httpapi.Mux, error) {
	return a.families.Mux(httpapi.BearerAuth(a.Auth))
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

// relayEvery is how often the local process sweeps the outbox (the jobs Lambda's schedule
// does it every minute on AWS). Items younger than the outbox's grace (30 s) wait for the
// next sweep, so a message a request could not send goes out within 45 s.
const relayEvery = 15 * time.Second

// relay sweeps the outbox now and every relayEvery until ctx ends: it sends the messages a
// request staged with its change but could not send after the commit, this run or a run of
// the process that ended between the two (docs/outbox.md).
func (a *app) relay(ctx context.Context) {
	t := time.NewTicker(relayEvery)
	defer t.Stop()
	for {
		for {
			res, err := a.Outbox.Sweep(ctx)
			if err != nil {
				if ctx.Err() == nil {
					a.Log.Error("outbox sweep left messages unsent; it tries again", "error", err)
				}
				break
			}
			if !res.More {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ctxOrTimeout bounds one admin command.
func ctxOrTimeout(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, 30*time.Second)
}
