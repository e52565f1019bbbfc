// Package platform composes the API: the environment of dependencies every route family
// receives and the list of families. The local process builds one environment and serves
// every family; each Lambda builds the same environment and serves one.
package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/functions/auditlog"
	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/functions/channels"
	"github.com/botplatform/api/functions/collections"
	"github.com/botplatform/api/functions/pats"
	"github.com/botplatform/api/functions/public"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/requestlogs"
	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/stats"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/functions/webhooks"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/purge"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/reqlog"
	"github.com/botplatform/api/shared/secrets"
	sharedstats "github.com/botplatform/api/shared/stats"
	"github.com/botplatform/api/shared/store"
)

// Env is every dependency a family may use. Build it with NewEnv.
type Env struct {
	Store   store.Store
	Now     func() time.Time
	Log     *slog.Logger
	Auth    *auth.Service
	Bots    *bots.Service
	Audit   audit.Publisher
	Trail   *audit.Log
	Cursors *httpapi.Cursors
	// Requests records requests against bots (nil: none); RequestLog lists them.
	Requests   httpapi.RequestRecorder
	RequestLog *reqlog.Log
	// Secrets seals credentials at rest (provider tokens); nil where the process holds none.
	Secrets secrets.Sealer
	// Channels stores and resolves connected channels; nil without Secrets.
	Channels *channels.Service
	// Queue sends work-queue messages (the local queue, SQS on AWS); nil where none.
	Queue queue.Sender
	// Outbox stages queue messages in the transactions of the changes they follow and
	// delivers them to Queue once those have committed (docs/outbox.md); without a Queue it
	// stages only, for the sweep of a process that has one. RunJobsOn sets it to deliver.
	Outbox *outbox.Outbox
	// Jobs starts background jobs; nil where the process runs none. Set it with RunJobsOn
	// once the environment exists (job steps may use the environment).
	Jobs jobs.Starter
	// WhatsAppVerifyToken answers Meta's webhook subscription check ("" refuses it).
	WhatsAppVerifyToken string
	// Adapters are the messaging providers this deployment speaks to (Deps.Adapters).
	Adapters []channel.Adapter
}

// RunJobsOn makes the environment start jobs as steps on q and returns the runner, whose
// Register adds the step handler to the consumer of q.
func (e *Env) RunJobsOn(q queue.Sender) *jobs.QueueRunner {
	r := jobs.NewQueueRunner(q, JobRegistry(e))
	e.Jobs, e.Queue = r, q
	e.Outbox = newOutbox(e.Store, q, e.Now, e.Log)
	return r
}

// newOutbox is the environment's outbox: the defaults of shared/outbox are the platform's.
func newOutbox(st store.Store, q queue.Sender, now func() time.Time, log *slog.Logger) *outbox.Outbox {
	o, err := outbox.New(st, q, outbox.Config{Now: now, Log: log})
	if err != nil {
		panic(err) // the store is never nil here (NewEnv refuses without one), and the defaults are valid
	}
	return o
}

// OutboxSweepEvent is the payload of the schedule that invokes the jobs Lambda every minute
// to relay what the outbox could not deliver after its commit (JobsHandler, infra/stack).
const OutboxSweepEvent = `{"outbox":"sweep"}`

// Deps are what the composition root supplies; the rest of Env is derived from them.
type Deps struct {
	Store store.Store
	// Audit publishes audit events: the store itself locally, EventBridge on AWS.
	Audit audit.Publisher
	// CursorKey signs list cursors; every process serving the same lists must share it.
	CursorKey []byte
	Log       *slog.Logger
	Now       func() time.Time
	// AuthCacheTTL overrides auth.CacheTTL (the authorizer, behind API Gateway's own cache, uses 0).
	AuthCacheTTL *time.Duration
	// Requests records requests against bots (optional; nil keeps no request logs): a
	// buffered writer locally, the synchronous reqlog.Log on Lambda.
	Requests httpapi.RequestRecorder
	// Secrets seals stored credentials (optional: only families that store some need it):
	// the key file locally, KMS envelope encryption on AWS.
	Secrets secrets.Sealer
	// Adapters are the messaging providers this deployment speaks to.
	Adapters []channel.Adapter
	// PublicURL is the deployment's public base URL, where providers deliver webhooks ("" when
	// it has none: nothing is registered with providers).
	PublicURL string
	// WhatsAppVerifyToken is Providers.WhatsAppVerifyToken: the webhooks family answers Meta's
	// subscription check with it.
	WhatsAppVerifyToken string
}

// NewEnv builds the environment, refusing to start when a dependency is missing.
func NewEnv(d Deps) (*Env, error) {
	var missing []string
	if d.Store == nil {
		missing = append(missing, "Store")
	}
	if d.Audit == nil {
		missing = append(missing, "Audit")
	}
	if len(d.CursorKey) < 32 {
		missing = append(missing, "CursorKey (32 bytes or more)")
	}
	if d.Log == nil {
		missing = append(missing, "Log")
	}
	if d.Now == nil {
		missing = append(missing, "Now")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("platform: missing %s", strings.Join(missing, ", "))
	}
	var opts []auth.Option
	if d.AuthCacheTTL != nil {
		opts = append(opts, auth.WithCacheTTL(*d.AuthCacheTTL))
	}
	a := auth.NewService(d.Store, d.Now, d.Log, opts...)
	var chans *channels.Service
	if d.Secrets != nil {
		chans = channels.NewService(d.Store, d.Secrets, d.Adapters, d.Now, d.PublicURL)
	}
	// A bot's channels go in its deletion's transaction: their webhooks stop with the bot.
	botService := bots.NewService(d.Store, a, d.Now).WithDependents(channels.BotDeletes(d.Store, chans))
	return &Env{
		Channels:   chans,
		Outbox:     newOutbox(d.Store, nil, d.Now, d.Log),
		Store:      d.Store,
		Now:        d.Now,
		Log:        d.Log,
		Auth:       a,
		Bots:       botService,
		Audit:      d.Audit,
		Trail:      audit.NewLog(d.Store),
		Cursors:    httpapi.NewCursors(d.CursorKey),
		Requests:   d.Requests,
		Secrets:    d.Secrets,
		RequestLog: reqlog.NewLog(d.Store),

		WhatsAppVerifyToken: d.WhatsAppVerifyToken,
		Adapters:            d.Adapters,
	}, nil
}

// Family is one route family: its name (the Lambda that serves it, functions/<name>), how
// it registers its routes and, optionally, the background job kinds it runs.
type Family struct {
	Name     string
	Register func(mux *httpapi.Mux, env *Env)
	Jobs     func(reg *jobs.Registry, env *Env)
	// Queue registers the family's handlers of work-queue messages (the conversation
	// runtime's inbound updates, for one): run by the local process's workers and by the
	// jobs Lambda.
	Queue func(mux *queue.Mux, env *Env)
	// Purge returns the step that erases everything the family stores for a deleted bot
	// (payload purge.Payload; the cursor is the family's own). A family that stores data
	// under a bot must declare it: the job purge.Job runs every family's step in turn
	// (purge.go), and shared/purge builds one from the family's partitions.
	Purge func(env *Env) jobs.Step
}

// QueueMux returns the handlers of every queue message type: job steps and each family's own.
func (e *Env) QueueMux(runner *jobs.QueueRunner) *queue.Mux {
	mux := queue.NewMux()
	runner.Register(mux)
	for _, f := range Families() {
		if f.Queue != nil {
			f.Queue(mux, e)
		}
	}
	return mux
}

// JobRegistry collects the job kinds of every family; the local process and the jobs Lambda
// run jobs from it.
func JobRegistry(env *Env) *jobs.Registry {
	reg := jobs.NewRegistry()
	reg.Register(purge.Job, purgeStep(env))
	for _, f := range Families() {
		if f.Jobs != nil {
			f.Jobs(reg, env)
		}
	}
	return reg
}

// Families lists every route family. Adding a family here serves it locally, gives it a
// Lambda (functions/<name>/lambda) and, through the OpenAPI document, its API Gateway routes.
func Families() []Family {
	return []Family{
		{Name: "public", Register: func(mux *httpapi.Mux, env *Env) { public.Routes(mux) }},
		{Name: "pats", Register: func(mux *httpapi.Mux, env *Env) { pats.Routes(mux, env.Auth, env.Cursors, env.Now) }},
		{Name: "bots", Register: func(mux *httpapi.Mux, env *Env) {
			bots.Routes(mux, env.Bots.WithPurge(env.Outbox, env.Log), env.Auth, env.Cursors)
		}},
		{Name: "auditlog", Register: func(mux *httpapi.Mux, env *Env) { auditlog.Routes(mux, env.Trail, env.Cursors) }},
		{Name: "requestlogs", Register: func(mux *httpapi.Mux, env *Env) { requestlogs.Routes(mux, env.RequestLog, env.Cursors) },
			Purge: func(env *Env) jobs.Step { return reqlog.PurgeStep(env.Store) }},
		{Name: "collections",
			Register: func(mux *httpapi.Mux, env *Env) {
				collections.Routes(mux, collections.NewService(env.Store, env.Jobs, env.Now, env.Log), env.Cursors)
			},
			Jobs: func(reg *jobs.Registry, env *Env) {
				reg.Register(collections.PurgeJob, collections.NewService(env.Store, env.Jobs, env.Now, env.Log).PurgeStep)
			},
			Purge: func(env *Env) jobs.Step { return collections.PurgeBotStep(env.Store) }},
		{Name: "reactions", Register: func(mux *httpapi.Mux, env *Env) {
			reactions.Routes(mux, reactionService(env), env.Cursors)
		},
			Purge: func(env *Env) jobs.Step { return reactions.PurgeStep(env.Store) }},
		{Name: "stats", Register: func(mux *httpapi.Mux, env *Env) { stats.Routes(mux, env.Store) },
			Purge: func(env *Env) jobs.Step { return sharedstats.PurgeStep(env.Store, env.Now) }},
		{Name: "subscribers",
			Register: subscriberRoutes,
			Jobs:     func(reg *jobs.Registry, env *Env) { subscribers.NewService(env.Store, env.Now, nil).RegisterJobs(reg) },
			Purge:    func(env *Env) jobs.Step { return subscribers.PurgeStep(env.Store) }},
		// Without Secrets (SECRETS_KEY_ID) env.Channels is nil and every channel route
		// answers 503: the routes exist, credentials cannot be sealed.
		{Name: "channels", Register: func(mux *httpapi.Mux, env *Env) { channels.Routes(mux, env.Channels, env.Cursors) },
			Purge: func(env *Env) jobs.Step { return channels.PurgeStep(env.Store) }},
		{Name: "webhooks", Register: webhookRoutes,
			Purge: func(env *Env) jobs.Step { return webhooks.PurgeStep(env.Store) }},
		{Name: "runtime", Register: traceRoutes, Queue: registerRuntime,
			Purge: func(env *Env) jobs.Step { return runtime.PurgeStep(env.Store) }},
	}
}

// Workers lists the Lambdas that serve no route of their own: the shared authorizer, the
// audit sink (EventBridge rule target) and the jobs worker (SQS consumer and Step Functions
// task).
func Workers() []string { return []string{"authorizer", "auditsink", "jobs"} }

// FamilyNamed returns the family called name.
func FamilyNamed(name string) (Family, error) {
	i := slices.IndexFunc(Families(), func(f Family) bool { return f.Name == name })
	if i < 0 {
		return Family{}, fmt.Errorf("platform: no family %q", name)
	}
	return Families()[i], nil
}

// Mux returns a router serving the given families. authn is how requests are
// authenticated: the bearer token locally, the authorizer's context on AWS.
func (e *Env) Mux(authn httpapi.Authenticator, families ...Family) (*httpapi.Mux, error) {
	if len(families) == 0 {
		return nil, errors.New("platform: no family to serve")
	}
	mux, err := httpapi.NewMux(httpapi.Config{Authenticate: authn, Bots: e.Bots, Audit: e.Audit, Log: e.Log, Now: e.Now, Requests: e.Requests})
	if err != nil {
		return nil, err
	}
	for _, f := range families {
		f.Register(mux, e)
	}
	return mux, nil
}

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
