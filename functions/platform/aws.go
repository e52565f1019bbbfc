package platform

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	awssfn "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/jobs/sfn"

	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/shared/eventlog/storelog"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/reqlog"
	"github.com/botplatform/api/shared/secrets"
	kmssealer "github.com/botplatform/api/shared/secrets/kms"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	awseventbridge "github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	kmstypes "github.com/aws/aws-sdk-go-v2/service/kms/types"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/sesv2"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/botplatform/api/shared/apigw"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/audit/eventbridge"
	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/sqs"
	"github.com/botplatform/api/shared/store/dynamo"
)

// AWSConfig is the Lambda environment contract; infra/ sets exactly these variables, each
// only on the Lambdas that use it.
type AWSConfig struct {
	Table        string // TABLE_NAME: the DynamoDB table
	AuditBus     string // AUDIT_BUS_NAME: the EventBridge bus audit events go to
	CursorKeyID  string // CURSOR_KEY_ID: the KMS HMAC key list cursors are signed with
	SecretsKeyID string // SECRETS_KEY_ID: the KMS key for envelope encryption of credentials
	// CRMSecretsKeyID (CRM_SECRETS_KEY_ID) is the same key, given to the Lambdas granted it
	// under the CRM encryption context (the crm family's credentials: AWS.CRMSecrets); ""
	// elsewhere. A Lambda granted the key under both has both variables.
	CRMSecretsKeyID     string
	JobsQueueURL        string // JOBS_QUEUE_URL: the SQS queue job steps travel on
	JobsStateMachineARN string // JOBS_STATE_MACHINE_ARN: the state machine for long jobs
	// SchedulerRoleARN (SCHEDULER_ROLE_ARN) is the role EventBridge Scheduler assumes to send
	// a message that is due later than SQS can delay one (a long wait step) to the jobs
	// queue; "" where the Lambda sends none (sqs.Schedules).
	SchedulerRoleARN string
	// SESConfigurationSet (SES_CONFIGURATION_SET) is the SES configuration set email is sent
	// with; "" where the Lambda sends no email (family.Deps.Email stays nil).
	SESConfigurationSet string
	// EmailRate (EMAIL_RATE) is the deployment's email sending rate in messages a second,
	// as written ("" where unset: the campaigns' default); Deps refuses a value that is no
	// number.
	EmailRate string
	// PublicURL (PUBLIC_URL) is the API's public base URL, where providers deliver
	// webhooks; "" registers no webhook with a provider.
	PublicURL string
	// Providers are the messaging providers' settings (TELEGRAM_BASE_URL, ...): unset, the
	// real providers. Its secrets are empty on AWS: SecretParameters names where they are.
	Providers Providers
	// SecretParameters name the SSM SecureString parameters of the providers' secrets
	// (WHATSAPP_APP_SECRET_PARAMETER, WHATSAPP_VERIFY_TOKEN_PARAMETER); AWS.Providers reads
	// them at cold start.
	SecretParameters SecretParameters
	// SDKKeyParameter (SDK_KEY_PARAMETER) names the SSM SecureString parameter of the
	// customer SDK's project-key secret, which AWS.SDKKey reads at cold start; "" where
	// the Lambda has none (family.Deps.SDKKey stays nil).
	SDKKeyParameter string
	// CRMClientSecretParameters name, by CRM provider (shared/crm's HubSpot, Salesforce), the
	// SSM SecureString parameters of the CRM family's OAuth client secrets
	// (CRM_HUBSPOT_CLIENT_SECRET_PARAMETER, CRM_SALESFORCE_CLIENT_SECRET_PARAMETER), which
	// AWS.CRMClientSecrets reads at cold start; nil where the Lambda has none (every one but
	// crm, mcp and jobs, the ones granted those parameters: family.Deps.CRMClientSecrets
	// stays nil).
	CRMClientSecretParameters map[string]string
	// AIKeyParameters name, by AI provider (shared/ai's OpenAI, Anthropic, Gemini), the SSM
	// SecureString parameters of the managed AI family's provider keys
	// (AI_OPENAI_API_KEY_PARAMETER, AI_ANTHROPIC_API_KEY_PARAMETER,
	// AI_GEMINI_API_KEY_PARAMETER), which AWS.AIKeys reads at cold start; nil where the
	// Lambda has none (every one but ai, the one granted those parameters:
	// family.Deps.AIKeys stays nil).
	AIKeyParameters map[string]string
	// MailgunSigningKeyParameter (MAILGUN_SIGNING_KEY_PARAMETER) names the SSM SecureString
	// parameter of the Mailgun webhook signing key, which AWS.MailgunSigningKey reads at cold
	// start; "" where the Lambda has none (every one but emailevents: Mailgun deliveries are
	// refused).
	MailgunSigningKeyParameter string
}

// AWSConfigFromEnv reads the contract from the process environment.
func AWSConfigFromEnv() AWSConfig {
	return AWSConfig{
		Table:               os.Getenv("TABLE_NAME"),
		AuditBus:            os.Getenv("AUDIT_BUS_NAME"),
		CursorKeyID:         os.Getenv("CURSOR_KEY_ID"),
		SecretsKeyID:        os.Getenv("SECRETS_KEY_ID"),
		CRMSecretsKeyID:     os.Getenv(EnvCRMSecretsKeyID),
		JobsQueueURL:        os.Getenv("JOBS_QUEUE_URL"),
		JobsStateMachineARN: os.Getenv("JOBS_STATE_MACHINE_ARN"),
		SchedulerRoleARN:    os.Getenv(EnvSchedulerRoleARN),
		SESConfigurationSet: os.Getenv(EnvSESConfigurationSet),
		EmailRate:           strings.TrimSpace(os.Getenv(EnvEmailRate)),
		PublicURL:           os.Getenv(EnvPublicURL),
		Providers:           ProvidersFromEnv(os.Getenv),
		SecretParameters: SecretParameters{
			WhatsAppAppSecret:   strings.TrimSpace(os.Getenv(EnvWhatsAppAppSecretParameter)),
			WhatsAppVerifyToken: strings.TrimSpace(os.Getenv(EnvWhatsAppVerifyTokenParameter)),
		},
		SDKKeyParameter:            strings.TrimSpace(os.Getenv(EnvSDKKeyParameter)),
		CRMClientSecretParameters:  crmClientSecretParametersFromEnv(os.Getenv),
		AIKeyParameters:            aiKeyParametersFromEnv(os.Getenv),
		MailgunSigningKeyParameter: strings.TrimSpace(os.Getenv(EnvMailgunSigningKeyParameter)),
	}
}

// cursorKeyMessage is what the cursor key is derived from: kms:GenerateMac over it with the
// HMAC key gives every container the same 32 bytes, and the key never exists outside memory.
const cursorKeyMessage = "list-cursors-v1"

// AWS holds the clients of one Lambda container, built once per cold start.
type AWS struct {
	cfg AWSConfig
	aws aws.Config
	log *slog.Logger
}

// LoadAWS loads the SDK configuration (region, credentials, endpoint overrides from the
// standard AWS_* variables) once.
func LoadAWS(ctx context.Context, cfg AWSConfig, log *slog.Logger) (*AWS, error) {
	ac, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("platform: load AWS config: %w", err)
	}
	return &AWS{cfg: cfg, aws: ac, log: log}, nil
}

// Store is the DynamoDB store over TABLE_NAME.
func (a *AWS) Store() (*dynamo.Store, error) {
	if a.cfg.Table == "" {
		return nil, errors.New("platform: TABLE_NAME is not set")
	}
	return dynamo.New(dynamodb.NewFromConfig(a.aws), a.cfg.Table), nil
}

// CursorKey derives the list-cursor signing key with kms:GenerateMac.
func (a *AWS) CursorKey(ctx context.Context) ([]byte, error) {
	return a.deriveKey(ctx, cursorKeyMessage)
}

// LinkKey derives the key email link tokens are signed with, as CursorKey does with another
// message: every Lambda that makes or checks link tokens derives the same key.
func (a *AWS) LinkKey(ctx context.Context) ([]byte, error) {
	return a.deriveKey(ctx, linkKeyMessage)
}

// linkKeyMessage is what the email link key is derived from.
const linkKeyMessage = "email-links-v1"

// deriveKey is kms:GenerateMac of message under CURSOR_KEY_ID: a key only this deployment's
// KMS key can produce, never stored.
func (a *AWS) deriveKey(ctx context.Context, message string) ([]byte, error) {
	if a.cfg.CursorKeyID == "" {
		return nil, errors.New("platform: CURSOR_KEY_ID is not set")
	}
	out, err := kms.NewFromConfig(a.aws).GenerateMac(ctx, &kms.GenerateMacInput{
		KeyId:        aws.String(a.cfg.CursorKeyID),
		MacAlgorithm: kmstypes.MacAlgorithmSpecHmacSha256,
		Message:      []byte(message),
	})
	if err != nil {
		return nil, fmt.Errorf("platform: derive the %s key: %w", message, err)
	}
	return out.Mac, nil
}

// Audit is the EventBridge publisher to AUDIT_BUS_NAME. A Lambda without a bus (one that
// serves only reads) gets a publisher that fails, so a mutation added to it later cannot go
// unaudited silently: its failure is logged as a lost audit event.
func (a *AWS) Audit() (audit.Publisher, error) {
	if a.cfg.AuditBus == "" {
		return noAudit{}, nil
	}
	return eventbridge.New(awseventbridge.NewFromConfig(a.aws), eventbridge.Config{BusName: a.cfg.AuditBus})
}

// Secrets is the KMS envelope sealer under SECRETS_KEY_ID with the default encryption
// context (kmssealer.PurposeSecrets), or nil when the Lambda has no grant on the key (the
// variable is set only where infra grants it).
func (a *AWS) Secrets() (secrets.Sealer, error) {
	return a.sealer(a.cfg.SecretsKeyID, kmssealer.PurposeSecrets)
}

// EnvCRMSecretsKeyID names AWSConfig.CRMSecretsKeyID.
const EnvCRMSecretsKeyID = "CRM_SECRETS_KEY_ID"

// CRMSecrets is the KMS envelope sealer of the CRM family's credentials: the key
// CRM_SECRETS_KEY_ID names under the CRM encryption context (kmssealer.PurposeCRMCredentials),
// the only context the crm and MCP Lambdas are granted it under (infra/access); nil where
// the variable is not set (the Lambda has no such grant).
func (a *AWS) CRMSecrets() (secrets.Sealer, error) {
	return a.sealer(a.cfg.CRMSecretsKeyID, kmssealer.PurposeCRMCredentials)
}

// sealer is the envelope sealer under key for purpose, or nil without a key.
func (a *AWS) sealer(key, purpose string) (secrets.Sealer, error) {
	if key == "" {
		return nil, nil
	}
	return kmssealer.New(kms.NewFromConfig(a.aws), kmssealer.Config{KeyID: key, EncryptionContext: kmssealer.Context(purpose)})
}

// JobsSender is the SQS sender to JOBS_QUEUE_URL.
func (a *AWS) JobsSender() (queue.Sender, error) {
	if a.cfg.JobsQueueURL == "" {
		return nil, errors.New("platform: JOBS_QUEUE_URL is not set")
	}
	cfg := sqs.SenderConfig{QueueURL: a.cfg.JobsQueueURL}
	if a.cfg.SchedulerRoleARN != "" {
		arn, err := sqs.QueueARN(a.cfg.JobsQueueURL)
		if err != nil {
			return nil, err
		}
		cfg.Schedules = &sqs.Schedules{Client: scheduler.NewFromConfig(a.aws), RoleARN: a.cfg.SchedulerRoleARN, QueueARN: arn}
	}
	return sqs.NewSender(awssqs.NewFromConfig(a.aws), cfg)
}

// EnvSchedulerRoleARN names AWSConfig.SchedulerRoleARN.
const EnvSchedulerRoleARN = "SCHEDULER_ROLE_ARN"

// EnvSESConfigurationSet names the SES configuration set of the Lambdas that send email.
const EnvSESConfigurationSet = "SES_CONFIGURATION_SET"

// EnvEmailRate is the deployment's email sending rate, messages a second (AWSConfig.EmailRate).
const EnvEmailRate = "EMAIL_RATE"

// emailRate reads EMAIL_RATE: 0 when unset (the campaigns' default), else a positive
// number; the campaigns' service checks its upper bound (emailcampaigns.MaxRate) when built.
func emailRate(v string) (float64, error) {
	if v == "" {
		return 0, nil
	}
	r, err := strconv.ParseFloat(v, 64)
	if err != nil || !(r > 0) || math.IsInf(r, 0) {
		return 0, fmt.Errorf("%s %q: want a positive number of messages a second", EnvEmailRate, v)
	}
	return r, nil
}

// EnvSNSTopicARNs lists, comma-separated, the SNS topics whose deliveries the email
// provider routes accept (SES events and SES inbound mail); unset refuses every one.
const EnvSNSTopicARNs = "SNS_TOPIC_ARNS"

// EnvInboundMailBucket names the S3 bucket the stack's SES receipt rule stores inbound mail
// in (its S3 action): the SES inbound route reads each message there once its SNS
// notification arrives, then deletes it. Unset: notifications without the message's
// content are logged and acknowledged.
const EnvInboundMailBucket = "INBOUND_MAIL_BUCKET"

// SQS is the SQS client, for the jobs consumer's visibility changes.
func (a *AWS) SQS() *awssqs.Client { return awssqs.NewFromConfig(a.aws) }

// loadStore loads the SDK configuration and the store over TABLE_NAME: what every Lambda but
// the public one needs.
func loadStore(ctx context.Context, log *slog.Logger) (*AWS, *dynamo.Store, error) {
	a, err := LoadAWS(ctx, AWSConfigFromEnv(), log)
	if err != nil {
		return nil, nil, err
	}
	st, err := a.Store()
	if err != nil {
		return nil, nil, err
	}
	return a, st, nil
}

// deps are the dependencies shared by the Lambdas that build an environment: the store, the
// tenancy check, what talks to providers (the secrets sealers, the adapters with their
// configuration and secrets, the public URL) and to the jobs queue, and the customer SDK's
// project-key secret, the CRM OAuth applications' client secrets and the managed AI
// family's provider keys where the environment names their parameters. Callers add the rest
// (audit, cursor key, request log).
func (a *AWS) deps(ctx context.Context, st *dynamo.Store, log *slog.Logger, now func() time.Time) (family.Deps, error) {
	sealer, err := a.Secrets()
	if err != nil {
		return family.Deps{}, err
	}
	crmSealer, err := a.CRMSecrets()
	if err != nil {
		return family.Deps{}, err
	}
	providers, err := a.Providers(ctx)
	if err != nil {
		return family.Deps{}, err
	}
	sdkKey, err := a.SDKKey(ctx)
	if err != nil {
		return family.Deps{}, err
	}
	crmSecrets, err := a.CRMClientSecrets(ctx)
	if err != nil {
		return family.Deps{}, err
	}
	aiKeys, err := a.AIKeys(ctx)
	if err != nil {
		return family.Deps{}, err
	}
	d := family.Deps{Store: st, Log: log, Now: now, Tenancy: bots.Tenancy, Secrets: sealer, Adapters: providers.Adapters(),
		PublicURL: a.cfg.PublicURL, WhatsAppVerifyToken: providers.WhatsAppVerifyToken, SDKKey: sdkKey,
		CRMSecrets: crmSealer, CRMClientSecrets: crmSecrets, AIKeys: aiKeys,
		// The event log is items of the same table (shared/eventlog/storelog).
		Events: storelog.New(st)}
	if a.cfg.SESConfigurationSet != "" {
		client := sesv2.NewFromConfig(a.aws)
		d.Email = &email.SES{Client: client, ConfigurationSet: a.cfg.SESConfigurationSet}
		d.EmailSettings.SES, d.EmailSettings.ConfigurationSet = client, a.cfg.SESConfigurationSet
	}
	if d.EmailSettings.Rate, err = emailRate(a.cfg.EmailRate); err != nil {
		return family.Deps{}, err
	}
	if topics := strings.TrimSpace(os.Getenv(EnvSNSTopicARNs)); topics != "" {
		d.EmailSettings.SNSTopicARNs = strings.Split(topics, ",")
	}
	if d.EmailSettings.MailgunSigningKey, err = a.MailgunSigningKey(ctx); err != nil {
		return family.Deps{}, err
	}
	if bucket := strings.TrimSpace(os.Getenv(EnvInboundMailBucket)); bucket != "" {
		d.EmailSettings.InboundBucket, d.EmailSettings.AWS = bucket, &a.aws
	}
	if a.cfg.JobsQueueURL != "" {
		if d.Queue, err = a.JobsSender(); err != nil {
			return family.Deps{}, err
		}
	}
	if arn := a.cfg.JobsStateMachineARN; arn != "" {
		client := awssfn.NewFromConfig(a.aws)
		d.LongJobs = func(known func(string) bool) jobs.Starter { return sfn.NewStarter(client, arn, known) }
	}
	return d, nil
}

// FamilyHandler builds, once per container, the Lambda handler of one HTTP family: its
// environment on DynamoDB, EventBridge and KMS (and the provider secrets, the customer SDK's
// project-key secret, the CRM client secrets and the managed AI keys from SSM where the
// environment names their parameters), and a
// router that trusts only the authorizer's context. tools are families composed beside it
// for their MCP tools alone (family.ToolsOnly): the MCP Lambda's.
func FamilyHandler(ctx context.Context, f family.Family, log *slog.Logger, tools ...family.Family) (func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error), error) {
	a, st, err := loadStore(ctx, log)
	if err != nil {
		return nil, err
	}
	deps, err := a.deps(ctx, st, log, time.Now)
	if err != nil {
		return nil, err
	}
	if deps.Audit, err = a.Audit(); err != nil {
		return nil, err
	}
	if deps.CursorKey, err = a.CursorKey(ctx); err != nil {
		return nil, err
	}
	if deps.LinkKey, err = a.LinkKey(ctx); err != nil {
		return nil, err
	}
	deps.Requests = reqlog.NewLog(st)
	env, err := family.NewEnv(deps)
	if err != nil {
		return nil, err
	}
	composed := []family.Family{f}
	for _, t := range tools {
		composed = append(composed, family.ToolsOnly(t))
	}
	mux, err := family.Compose(env, composed...).Mux(apigw.Authenticator(time.Now))
	if err != nil {
		return nil, err
	}
	log.Info("cold start", "family", f.Name, "routes", len(mux.Routes()), "tools", len(env.Tools()))
	return apigw.Handler(mux), nil
}
