// Package familytest builds family environments for tests: a fresh SQLite store (recorded,
// see sqlitetest), the sealers given recorded (see secretstest), its audit trail, a fixed cursor key, a discarding log and the real clock,
// unless the test gives its own.
package familytest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// Env returns family.NewEnv(d) with d's zero members filled in: a new store, its audit log,
// a 32-byte cursor key, a log that discards, time.Now, a tenancy check that knows no bot,
// and an event log in memory (eventlogtest.Memory). d's sealers record their uses
// (secretstest) under the purposes the AWS platform gives them (functions/platform):
// Secrets the default one, CRMSecrets the CRM credentials'.
func Env(t testing.TB, d family.Deps) *family.Env {
	t.Helper()
	d.Secrets = secretstest.Wrap(d.Secrets, kms.PurposeSecrets)
	d.CRMSecrets = secretstest.Wrap(d.CRMSecrets, kms.PurposeCRMCredentials)
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Store == nil {
		d.Store = sqlitetest.Open(t, sqlite.WithClock(d.Now))
	}
	if d.Audit == nil {
		d.Audit = audit.NewLog(d.Store)
	}
	if d.CursorKey == nil {
		d.CursorKey = []byte("0123456789abcdef0123456789abcdef")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if d.Tenancy == nil {
		d.Tenancy = func(*family.Env) httpapi.BotLoader { return noBots{} }
	}
	if d.Events == nil {
		d.Events = eventlogtest.NewMemory()
	}
	env, err := family.NewEnv(d)
	if err != nil {
		t.Fatalf("family environment: %v", err)
	}
	return env
}

type noBots struct{}

func (noBots) LoadBot(context.Context, string, string) (any, error) {
	return nil, httpapi.NotFound("bot")
}
