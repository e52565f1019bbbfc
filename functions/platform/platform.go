// Package platform composes the API on AWS: each Lambda's environment (shared/family.Env) on
// DynamoDB, EventBridge, SQS, KMS and SSM, built once per container, and the handlers of the
// family Lambdas, the jobs Lambda and the worker Lambdas. It imports the bots family only,
// for the tenancy check every {botID} route goes through; each Lambda's main passes the
// families it serves, so that a Lambda links the kernel, its family and what that family
// calls (functions/families lists them all, for the processes that run them all).
package platform

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/botplatform/api/functions/public"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

// OutboxSweepEvent is the payload of the schedule that invokes the jobs Lambda every minute
// to relay what the outbox could not deliver after its commit (JobsHandler, infra/stack).
const OutboxSweepEvent = `{"outbox":"sweep"}`

// PublicMux serves only the public family. It needs no store, keys or bus, so the public
// Lambda has no permissions at all; anything else registered on it fails closed (401).
func PublicMux(log *slog.Logger, now func() time.Time) (*httpapi.Mux, error) {
	mux, err := httpapi.NewMux(httpapi.Config{
		Authenticate: func(*http.Request) (*auth.Principal, error) { return nil, auth.ErrMissingCredentials },
		Bots:         noBots{},
		Audit:        noAudit{},
		Log:          log,
		Now:          now,
	})
	if err != nil {
		return nil, err
	}
	public.Routes(mux)
	return mux, nil
}

type noBots struct{}

func (noBots) LoadBot(context.Context, string, string) (any, error) {
	return nil, httpapi.NotFound("bot")
}

type noAudit struct{}

func (noAudit) Publish(context.Context, audit.Event) error {
	return errors.New("platform: the public mux has no audit trail")
}
