// Package family is how route families are composed into a process: the environment of
// kernel dependencies every family is built on (Env), what a family is (Family: a name and
// how it builds its parts on an Env) and the composition of several families on one Env
// (Compose). It imports no family: each family declares its own Family value, a process
// (the local one, a family's Lambda, the jobs Lambda) composes the families it runs, and so
// links only those.
package family

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"

	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/mcptool"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/reqlog"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store"
)

// Env is every kernel dependency a family may use. NewEnv builds it and no field changes
// afterwards: families build their services from it once, in Family.Build, and Compose only
// adds the composed families' job kinds to what Jobs knows how to start and their MCP tools
// to Tools.
type Env struct {
	Store   store.Store
	Now     func() time.Time
	Log     *slog.Logger
	Auth    *auth.Service
	Audit   audit.Publisher
	Trail   *audit.Log
	Cursors *httpapi.Cursors
	// Tenancy is the check of every {botID} route: the bot must be the caller's.
	Tenancy httpapi.BotLoader
	// Requests records requests against bots (nil: none); RequestLog lists them.
	Requests   httpapi.RequestRecorder
	RequestLog *reqlog.Log
	// Secrets seals credentials at rest (provider tokens); nil where the process holds none.
	Secrets secrets.Sealer
	// CRMSecrets seals the CRM family's credentials (connections' tokens and keys, pending
	// OAuth starts' verifiers); nil where the process holds none. On AWS it is a sealer of
	// the same KMS key under the CRM encryption context, which the Lambdas that serve CRM
	// are granted the key under (alone, or beside the default one): such a Lambda cannot
	// open a channel's credentials. Locally it is the same key file as Secrets, whose aad
	// binds each value to its connection.
	CRMSecrets secrets.Sealer
	// Queue sends work-queue messages (the local queue, SQS on AWS); nil where none.
	Queue queue.Sender
	// Outbox stages queue messages in the transactions of the changes they follow and
	// delivers them to Queue once those have committed (docs/outbox.md); without a Queue it
	// stages only, for the sweep of a process that has one.
	Outbox *outbox.Outbox
	// Jobs starts background jobs as steps on Queue; nil without a Queue. It knows the job
	// kinds of the families composed on this Env (Compose).
	Jobs jobs.Starter
	// LongJobs starts jobs that may run longer than a queue's retries tolerate (a CRM sync
	// of many thousand records, paced to the provider): executions of the jobs state machine
	// on AWS (Deps.LongJobs); elsewhere Jobs. Nil when neither is there.
	LongJobs jobs.Starter
	// Adapters are the messaging providers this deployment speaks to.
	Adapters []channel.Adapter
	// PublicURL is the deployment's public base URL, where providers deliver webhooks ("" when
	// it has none: nothing is registered with providers).
	PublicURL string
	// WhatsAppVerifyToken answers Meta's webhook subscription check ("" refuses it).
	WhatsAppVerifyToken string
	// Email sends email (nil where the process sends none): the local sink or SMTP locally,
	// SES on AWS.
	Email email.Sender
	// Links signs and checks the tokens of sent emails' open pixels, tracked links and
	// unsubscribe links; nil where the process has no link key.
	Links *emaillinks.Signer
	// EmailSettings configure the email families.
	EmailSettings EmailSettings
	// Events is the bots' event log (shared/eventlog), which the platform's emitters append
	// to and reports read: sqlitelog locally, storelog over the table on AWS.
	Events eventlog.Log
	// SDKKey signs and checks the customer SDK's project keys (32 bytes or more); nil where
	// the deployment has none: enabling the SDK answers 503 sdk_not_configured.
	SDKKey []byte
	// CRMClientSecrets are the client secrets of the CRM family's OAuth applications, by
	// provider (shared/crm's HubSpot, Salesforce), where the platform read them: from SSM
	// on AWS (functions/platform). Nil elsewhere: the local process's crm family reads
	// CRM_*_CLIENT_SECRET from its environment itself.
	CRMClientSecrets map[string]string
	// AIKeys are the managed AI family's provider keys (the platform's own API keys), by
	// provider (shared/ai's OpenAI "openai", Anthropic "anthropic", Gemini "gemini"), where
	// the platform read them: from SSM on AWS, in the ai Lambda (functions/platform). Nil
	// elsewhere: the local process's ai family reads AI_*_API_KEY from its environment
	// itself.
	AIKeys map[string]string

	runner   *jobs.QueueRunner // Jobs, to register its step handler on a queue mux
	registry *jobs.Registry    // the job kinds Compose adds
	tools    []mcptool.Tool    // the MCP tools Compose adds (Tools)
}

// Deps are what the composition root supplies; the rest of Env is derived from them.
type Deps struct {
	Store store.Store
	// Audit publishes audit events: the store itself locally, EventBridge on AWS.
	Audit audit.Publisher
	// CursorKey signs list cursors; every process serving the same lists must share it.
	CursorKey []byte
	Log       *slog.Logger
	Now       func() time.Time
	// Tenancy builds the tenancy check of {botID} routes (the bots family's bot lookup).
	Tenancy func(env *Env) httpapi.BotLoader
	// AuthCacheTTL overrides auth.CacheTTL (the authorizer, behind API Gateway's own cache, uses 0).
	AuthCacheTTL *time.Duration
	// Requests records requests against bots (optional; nil keeps no request logs): a
	// buffered writer locally, the synchronous reqlog.Log on Lambda.
	Requests httpapi.RequestRecorder
	// Secrets seals stored credentials (optional: only families that store some need it):
	// the key file locally, KMS envelope encryption on AWS.
	Secrets secrets.Sealer
	// CRMSecrets is Env.CRMSecrets (optional: only the crm family uses it).
	CRMSecrets secrets.Sealer
	// Queue carries job steps and the families' messages (optional: a process without one
	// starts no jobs, and its outbox only stages).
	Queue queue.Sender
	// LongJobs builds Env.LongJobs where long jobs run elsewhere than on Queue (optional:
	// the Step Functions starter on AWS). known reports whether a job kind is registered on
	// the Env, so that a starter refuses a typo at once.
	LongJobs func(known func(kind string) bool) jobs.Starter
	// Adapters are the messaging providers this deployment speaks to.
	Adapters []channel.Adapter
	// PublicURL is Env.PublicURL.
	PublicURL string
	// WhatsAppVerifyToken is Env.WhatsAppVerifyToken.
	WhatsAppVerifyToken string
	// Email is Env.Email (optional).
	Email email.Sender
	// LinkKey signs email link tokens (optional; 32 bytes or more): every process that makes
	// or checks them must share it.
	LinkKey []byte
	// EmailSettings is Env.EmailSettings.
	EmailSettings EmailSettings
	// Events is Env.Events (required).
	Events eventlog.Log
	// SDKKey is Env.SDKKey (optional; 32 bytes or more).
	SDKKey []byte
	// CRMClientSecrets is Env.CRMClientSecrets (optional).
	CRMClientSecrets map[string]string
	// AIKeys is Env.AIKeys (optional).
	AIKeys map[string]string
}

// EmailSettings configure the email families (sending domains, campaigns, provider
// webhooks); the zero value is the default of each.
type EmailSettings struct {
	// Rate is the sending rate, in messages a second (0: SES's default quota, 14).
	Rate float64
	// LinkBaseURL is where sent emails' tracking and unsubscribe links point; "" is
	// PublicURL (on AWS, the API's own URL).
	LinkBaseURL string
	// DNSServer is the DNS server (host:port, UDP) domain verification asks; "" is the
	// system resolver.
	DNSServer string
	// InboundSecret authenticates POST /esp/local/inbound; "" refuses it.
	InboundSecret string
	// MailgunSigningKey verifies Mailgun's webhooks; "" refuses them.
	MailgunSigningKey string
	// SNSTopicARNs are the only SNS topics whose deliveries are accepted (none: every SNS
	// delivery is refused).
	SNSTopicARNs []string
	// SES, on AWS, is the SES v2 client sending domains register as identities with, and
	// ConfigurationSet the configuration set they get; nil locally (nothing registered).
	SES              *sesv2.Client
	ConfigurationSet string
	// InboundBucket, on AWS with inbound mail on, is the S3 bucket the stack's SES receipt
	// rule stores received mail in, and AWS the SDK configuration to read it with; "" and
	// nil locally. (The S3 client is made where it is used, so that only the Lambdas that
	// read the bucket link the S3 SDK.)
	InboundBucket string
	AWS           *aws.Config
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
	if d.Tenancy == nil {
		missing = append(missing, "Tenancy")
	}
	if d.Events == nil {
		missing = append(missing, "Events")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("family: missing %s", strings.Join(missing, ", "))
	}
	var opts []auth.Option
	if d.AuthCacheTTL != nil {
		opts = append(opts, auth.WithCacheTTL(*d.AuthCacheTTL))
	}
	o, err := outbox.New(d.Store, d.Queue, outbox.Config{Now: d.Now, Log: d.Log})
	if err != nil {
		return nil, err
	}
	env := &Env{
		Store:               d.Store,
		Now:                 d.Now,
		Log:                 d.Log,
		Auth:                auth.NewService(d.Store, d.Now, d.Log, opts...),
		Audit:               d.Audit,
		Trail:               audit.NewLog(d.Store),
		Cursors:             httpapi.NewCursors(d.CursorKey),
		Requests:            d.Requests,
		RequestLog:          reqlog.NewLog(d.Store),
		Secrets:             d.Secrets,
		CRMSecrets:          d.CRMSecrets,
		Queue:               d.Queue,
		Outbox:              o,
		Adapters:            d.Adapters,
		PublicURL:           d.PublicURL,
		WhatsAppVerifyToken: d.WhatsAppVerifyToken,
		Email:               d.Email,
		EmailSettings:       d.EmailSettings,
		Events:              d.Events,
		SDKKey:              d.SDKKey,
		// A copy: no field of Env changes after NewEnv.
		CRMClientSecrets: maps.Clone(d.CRMClientSecrets),
		AIKeys:           maps.Clone(d.AIKeys),
		registry:         jobs.NewRegistry(),
	}
	if d.Queue != nil {
		env.runner = jobs.NewQueueRunner(d.Queue, env.registry)
		env.Jobs = env.runner
		env.LongJobs = env.runner
	}
	if d.LongJobs != nil {
		env.LongJobs = d.LongJobs(func(kind string) bool { return slices.Contains(env.registry.Kinds(), kind) })
	}
	if d.LinkKey != nil {
		if env.Links, err = emaillinks.New(d.LinkKey); err != nil {
			return nil, err
		}
	}
	if d.SDKKey != nil && len(d.SDKKey) < 32 {
		return nil, errors.New("family: the SDK key must be at least 32 bytes")
	}
	for provider, secret := range d.CRMClientSecrets {
		if secret == "" {
			return nil, fmt.Errorf("family: the CRM client secret of %s is empty", provider)
		}
	}
	for provider, key := range d.AIKeys {
		if key == "" {
			return nil, fmt.Errorf("family: the managed AI key of %s is empty", provider)
		}
	}
	env.Tenancy = d.Tenancy(env)
	return env, nil
}
