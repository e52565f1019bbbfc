package stack

import (
	"slices"
	"strconv"

	aiwiring "github.com/botplatform/api/functions/ai/wiring"
	crmwiring "github.com/botplatform/api/functions/crm/wiring"
	metawiring "github.com/botplatform/api/functions/meta/wiring"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/infra/access"
)

// The grant table lives in infra/access, which the families' tests import without the CDK;
// these names keep the stack's code as it reads.
type (
	// Resource is access.Resource.
	Resource = access.Resource
	// Grant is access.Grant.
	Grant = access.Grant
	// Condition is access.Condition.
	Condition = access.Condition
)

// CRMCredentials is access.CRMCredentials.
var CRMCredentials = access.CRMCredentials

// The resources of access.
const (
	Table                              = access.Table
	Bus                                = access.Bus
	CursorKey                          = access.CursorKey
	SecretsKey                         = access.SecretsKey
	JobsQueue                          = access.JobsQueue
	JobsStateMachine                   = access.JobsStateMachine
	AuditDLQ                           = access.AuditDLQ
	JobsFunction                       = access.JobsFunction
	OwnLogGroup                        = access.OwnLogGroup
	NoResource                         = access.NoResource
	WhatsAppAppSecretParameter         = access.WhatsAppAppSecretParameter
	WhatsAppVerifyTokenParameter       = access.WhatsAppVerifyTokenParameter
	SDKKeyParameter                    = access.SDKKeyParameter
	CRMHubSpotClientSecretParameter    = access.CRMHubSpotClientSecretParameter
	CRMSalesforceClientSecretParameter = access.CRMSalesforceClientSecretParameter
	AIOpenAIKeyParameter               = access.AIOpenAIKeyParameter
	AIAnthropicKeyParameter            = access.AIAnthropicKeyParameter
	AIGeminiKeyParameter               = access.AIGeminiKeyParameter
	MetaAppSecretParameter             = access.MetaAppSecretParameter
	MailgunSigningKeyParameter         = access.MailgunSigningKeyParameter
	ParameterKey                       = access.ParameterKey
	Schedules                          = access.Schedules
	ScheduleRole                       = access.ScheduleRole
	EmailIdentities                    = access.EmailIdentities
	InboundMailBucket                  = access.InboundMailBucket
	SESAccount                         = access.SESAccount
	QueueScheduleRole                  = access.QueueScheduleRole
	StateMachineRole                   = access.StateMachineRole
	OutboxScheduleRole                 = access.OutboxScheduleRole
)

// Access is access.Access: every grant.
func Access() map[string][]Grant { return access.Access() }

// ServiceRoles is access.ServiceRoles.
func ServiceRoles() []string { return access.ServiceRoles() }

// parameters are the Resources that are SSM parameters named in the configuration.
var parameters = []Resource{WhatsAppAppSecretParameter, WhatsAppVerifyTokenParameter, SDKKeyParameter,
	CRMHubSpotClientSecretParameter, CRMSalesforceClientSecretParameter,
	AIOpenAIKeyParameter, AIAnthropicKeyParameter, AIGeminiKeyParameter, MetaAppSecretParameter, MailgunSigningKeyParameter}

// parameterName is the name the configuration gives parameter r ("" when unset or when r
// is no parameter).
func (c Config) parameterName(r Resource) string {
	switch r {
	case WhatsAppAppSecretParameter:
		return c.WhatsAppAppSecretParameter
	case WhatsAppVerifyTokenParameter:
		return c.WhatsAppVerifyTokenParameter
	case SDKKeyParameter:
		return c.SDKKeyParameter
	case CRMHubSpotClientSecretParameter:
		return c.CRMHubSpotClientSecretParameter
	case CRMSalesforceClientSecretParameter:
		return c.CRMSalesforceClientSecretParameter
	case AIOpenAIKeyParameter:
		return c.AIOpenAIKeyParameter
	case AIAnthropicKeyParameter:
		return c.AIAnthropicKeyParameter
	case AIGeminiKeyParameter:
		return c.AIGeminiKeyParameter
	case MetaAppSecretParameter:
		return c.MetaAppSecretParameter
	case MailgunSigningKeyParameter:
		return c.MailgunSigningKeyParameter
	}
	return ""
}

// AccessFor is the Lambda's row of Access as deployed with cfg: without the grants on SSM
// parameters cfg does not name, without ParameterKey when none is left, and without the
// grants on InboundMailBucket when the stack receives no mail (cfg.EmailInbound off: there
// is no bucket).
func AccessFor(name string, cfg Config) []Grant {
	var out []Grant
	named := false
	for _, g := range Access()[name] {
		if g.On == InboundMailBucket && !cfg.EmailInbound {
			continue
		}
		if slices.Contains(parameters, g.On) {
			if cfg.parameterName(g.On) == "" {
				continue
			}
			named = true
		}
		out = append(out, g)
	}
	if !named {
		out = slices.DeleteFunc(out, func(g Grant) bool { return g.On == ParameterKey })
	}
	return out
}

// Setting is non-secret provider configuration a Lambda receives as an environment
// variable: CDK context, see Config.
type Setting int

// The provider settings.
const (
	// PublicURL is where providers deliver webhooks: always set (context publicUrl, by
	// default the API's own URL).
	PublicURL Setting = iota + 1
	// The providers' API base URLs and the Meta app id: set only when configured (unset,
	// the Lambdas talk to the real providers).
	TelegramBaseURL
	VKBaseURL
	WhatsAppBaseURL
	WhatsAppAppID
	// SNSTopicARNs are the SNS topics the email provider routes accept: always set, to the
	// stack's own topics (SES events; inbound mail with emailInbound) followed by those of
	// context snsTopicArns (topics the operator made).
	SNSTopicARNs
	// The CRM family's OAuth applications' client ids (their secrets are SSM parameters)
	// and its providers' endpoint overrides: set only when configured (unset, no OAuth
	// application, and the real providers).
	CRMHubSpotClientID
	CRMSalesforceClientID
	CRMHubSpotAuthBaseURL
	CRMHubSpotAPIBaseURL
	CRMSalesforceLoginBaseURL
	CRMPipedriveAPIBaseURL
	CRMDynamicsLoginBaseURL
	// The managed AI family's providers' endpoints, routes and prices (its keys are SSM
	// parameters): set only when configured (unset, the real providers, the default
	// routes and prices).
	AIOpenAIBaseURL
	AIAnthropicBaseURL
	AIGeminiBaseURL
	AIRoutes
	AIPrices
	// The meta family's Facebook app id (its secret is an SSM parameter) and its Graph API
	// and Login dialog endpoints: set only when configured (unset, no app, and Facebook's).
	MetaAppID
	MetaGraphBaseURL
	MetaDialogBaseURL
	// EmailRate is the deployment's email sending rate: set only when configured (unset,
	// the campaigns' default).
	EmailRate
)

// crmSettings are the CRM family's configuration: its Lambda's, the MCP Lambda's, which
// serves the family's read tools, and the jobs Lambda's, which runs its steps.
var crmSettings = []Setting{PublicURL, CRMHubSpotClientID, CRMSalesforceClientID, CRMHubSpotAuthBaseURL, CRMHubSpotAPIBaseURL,
	CRMSalesforceLoginBaseURL, CRMPipedriveAPIBaseURL, CRMDynamicsLoginBaseURL}

// Settings is the one table of which Lambda receives which provider setting, as Access is
// of permissions; EnvNames reads both. The secrets are not settings: a Lambda that needs one
// has a grant on its SSM parameter in Access, which gives it the parameter's name.
func Settings() map[string][]Setting {
	return map[string][]Setting{
		// Connect checks credentials with the provider and registers the webhook at
		// PUBLIC_URL; templates are submitted to WhatsApp, their header media uploaded under
		// the Meta app (WHATSAPP_APP_ID).
		"channels": {PublicURL, TelegramBaseURL, VKBaseURL, WhatsAppBaseURL, WhatsAppAppID},
		// The conversation runtime sends through the providers' APIs, and the purge of a
		// deleted bot removes its channels' webhooks there. Its channels service is the
		// channels family's, built with PUBLIC_URL.
		// The CRM family's steps call the CRMs with its configuration (crmSettings).
		// The meta family's token refreshes exchange tokens with the Facebook app at Graph.
		// The email campaigns' send steps pace to the deployment's rate.
		Jobs: append([]Setting{TelegramBaseURL, VKBaseURL, WhatsAppBaseURL, MetaAppID, MetaGraphBaseURL, EmailRate}, crmSettings...),
		// A test send of a message goes out through the providers' APIs.
		"content": {TelegramBaseURL, VKBaseURL, WhatsAppBaseURL},
		// Campaign messages carry tracking and unsubscribe links at PUBLIC_URL, which the
		// email events family serves; the service is built with the deployment's rate, as
		// in the jobs Lambda, which runs its send steps.
		"emailcampaigns": {PublicURL, EmailRate},
		// The SES events webhook (emailevents) and the SES inbound route (emaildomains)
		// accept the SNS deliveries of these topics only.
		"emailevents":  {PublicURL, SNSTopicARNs},
		"emaildomains": {SNSTopicARNs},
		// An OAuth start's redirect_uri defaults to the callback at PUBLIC_URL; the client ids
		// go with the secrets (Access). The providers are called from here and from the MCP
		// Lambda's CRM read tools (fields, pipelines), which refresh tokens as the routes do
		// and so need the same applications (an application without its redirect URL is
		// not configured); and from the jobs Lambda, whose CRM steps (sync) refresh tokens
		// too.
		"crm": crmSettings,
		"mcp": crmSettings,
		// The managed AI family calls the providers at their base URLs, routes profiles to
		// their models and meters them at their prices; the keys go with the grants on their
		// parameters (Access).
		"ai": {AIOpenAIBaseURL, AIAnthropicBaseURL, AIGeminiBaseURL, AIRoutes, AIPrices},
		// Copilot proposals are generated through the managed AI family in process, with
		// its configuration.
		"copilot": {AIOpenAIBaseURL, AIAnthropicBaseURL, AIGeminiBaseURL, AIRoutes, AIPrices},
		// The Facebook app and its endpoints; the redirect URL defaults to the callback at
		// PUBLIC_URL. Attaching a WhatsApp number connects a channel in process: the
		// WhatsApp adapter's configuration, as the channels Lambda's.
		"meta": {PublicURL, WhatsAppBaseURL, WhatsAppAppID, MetaAppID, MetaGraphBaseURL, MetaDialogBaseURL},
	}
}

// The environment contract of the Lambda mains.
const (
	EnvStage               = "STAGE"
	EnvLogLevel            = "LOG_LEVEL"
	EnvTableName           = "TABLE_NAME"
	EnvAuditBusName        = "AUDIT_BUS_NAME"
	EnvCursorKeyID         = "CURSOR_KEY_ID"
	EnvSecretsKeyID        = "SECRETS_KEY_ID"
	EnvCRMSecretsKeyID     = platform.EnvCRMSecretsKeyID
	EnvJobsQueueURL        = "JOBS_QUEUE_URL"
	EnvJobsStateMachineARN = "JOBS_STATE_MACHINE_ARN"
	EnvSchedulerRoleARN    = platform.EnvSchedulerRoleARN
	EnvSESConfigurationSet = platform.EnvSESConfigurationSet
	EnvSNSTopicARNs        = platform.EnvSNSTopicARNs
	EnvInboundMailBucket   = platform.EnvInboundMailBucket
	EnvEmailRate           = platform.EnvEmailRate
	// Provider configuration, named where the platform reads it.
	EnvPublicURL                    = platform.EnvPublicURL
	EnvTelegramBaseURL              = platform.EnvTelegramBaseURL
	EnvVKBaseURL                    = platform.EnvVKBaseURL
	EnvWhatsAppBaseURL              = platform.EnvWhatsAppBaseURL
	EnvWhatsAppAppID                = platform.EnvWhatsAppAppID
	EnvWhatsAppAppSecretParameter   = platform.EnvWhatsAppAppSecretParameter
	EnvWhatsAppVerifyTokenParameter = platform.EnvWhatsAppVerifyTokenParameter
	EnvSDKKeyParameter              = platform.EnvSDKKeyParameter
	// The CRM family's configuration, named where its wiring reads it, and the names of the
	// parameters of its client secrets, where the platform reads them.
	EnvCRMHubSpotClientID                 = crmwiring.EnvHubSpotClientID
	EnvCRMSalesforceClientID              = crmwiring.EnvSalesforceClientID
	EnvCRMHubSpotAuthBaseURL              = crmwiring.EnvHubSpotAuthBaseURL
	EnvCRMHubSpotAPIBaseURL               = crmwiring.EnvHubSpotAPIBaseURL
	EnvCRMSalesforceLoginBaseURL          = crmwiring.EnvSalesforceLoginBaseURL
	EnvCRMPipedriveAPIBaseURL             = crmwiring.EnvPipedriveAPIBaseURL
	EnvCRMDynamicsLoginBaseURL            = crmwiring.EnvDynamicsLoginBaseURL
	EnvCRMHubSpotClientSecretParameter    = platform.EnvCRMHubSpotClientSecretParameter
	EnvCRMSalesforceClientSecretParameter = platform.EnvCRMSalesforceClientSecretParameter
	// The managed AI family's configuration, named where its wiring reads it, and the names
	// of the parameters of its provider keys, where the platform reads them.
	EnvAIOpenAIBaseURL         = aiwiring.EnvOpenAIBaseURL
	EnvAIAnthropicBaseURL      = aiwiring.EnvAnthropicBaseURL
	EnvAIGeminiBaseURL         = aiwiring.EnvGeminiBaseURL
	EnvAIRoutes                = aiwiring.EnvRoutes
	EnvAIPrices                = aiwiring.EnvPrices
	EnvAIOpenAIKeyParameter    = platform.EnvAIOpenAIKeyParameter
	EnvAIAnthropicKeyParameter = platform.EnvAIAnthropicKeyParameter
	EnvAIGeminiKeyParameter    = platform.EnvAIGeminiKeyParameter
	// The meta family's configuration, named where its wiring reads it, and the name of the
	// parameter of its app secret, where the platform reads it.
	EnvMetaAppID              = metawiring.EnvAppID
	EnvMetaGraphBaseURL       = metawiring.EnvGraphURL
	EnvMetaDialogBaseURL      = metawiring.EnvDialogURL
	EnvMetaAppSecretParameter = platform.EnvMetaAppSecretParameter
	// The Mailgun webhook signing key's parameter, where the platform reads it.
	EnvMailgunSigningKeyParameter = platform.EnvMailgunSigningKeyParameter
)

// settingVar is the variable of s, and its value in cfg ("" for PublicURL means the stack's
// default, which only the stack knows). For SNSTopicARNs the value is only the operator's
// part (snsTopicArns): the stack puts its own topics first (builder.snsTopicARNs).
func settingVar(s Setting, cfg Config) (name, value string, set bool) {
	switch s {
	case PublicURL:
		return EnvPublicURL, cfg.PublicURL, true
	case TelegramBaseURL:
		return EnvTelegramBaseURL, cfg.TelegramBaseURL, cfg.TelegramBaseURL != ""
	case VKBaseURL:
		return EnvVKBaseURL, cfg.VKBaseURL, cfg.VKBaseURL != ""
	case WhatsAppBaseURL:
		return EnvWhatsAppBaseURL, cfg.WhatsAppBaseURL, cfg.WhatsAppBaseURL != ""
	case WhatsAppAppID:
		return EnvWhatsAppAppID, cfg.WhatsAppAppID, cfg.WhatsAppAppID != ""
	case SNSTopicARNs:
		return EnvSNSTopicARNs, cfg.SNSTopicARNs, true
	case CRMHubSpotClientID:
		return EnvCRMHubSpotClientID, cfg.CRMHubSpotClientID, cfg.CRMHubSpotClientID != ""
	case CRMSalesforceClientID:
		return EnvCRMSalesforceClientID, cfg.CRMSalesforceClientID, cfg.CRMSalesforceClientID != ""
	case CRMHubSpotAuthBaseURL:
		return EnvCRMHubSpotAuthBaseURL, cfg.CRMHubSpotAuthBaseURL, cfg.CRMHubSpotAuthBaseURL != ""
	case CRMHubSpotAPIBaseURL:
		return EnvCRMHubSpotAPIBaseURL, cfg.CRMHubSpotAPIBaseURL, cfg.CRMHubSpotAPIBaseURL != ""
	case CRMSalesforceLoginBaseURL:
		return EnvCRMSalesforceLoginBaseURL, cfg.CRMSalesforceLoginBaseURL, cfg.CRMSalesforceLoginBaseURL != ""
	case CRMPipedriveAPIBaseURL:
		return EnvCRMPipedriveAPIBaseURL, cfg.CRMPipedriveAPIBaseURL, cfg.CRMPipedriveAPIBaseURL != ""
	case CRMDynamicsLoginBaseURL:
		return EnvCRMDynamicsLoginBaseURL, cfg.CRMDynamicsLoginBaseURL, cfg.CRMDynamicsLoginBaseURL != ""
	case AIOpenAIBaseURL:
		return EnvAIOpenAIBaseURL, cfg.AIOpenAIBaseURL, cfg.AIOpenAIBaseURL != ""
	case AIAnthropicBaseURL:
		return EnvAIAnthropicBaseURL, cfg.AIAnthropicBaseURL, cfg.AIAnthropicBaseURL != ""
	case AIGeminiBaseURL:
		return EnvAIGeminiBaseURL, cfg.AIGeminiBaseURL, cfg.AIGeminiBaseURL != ""
	case AIRoutes:
		return EnvAIRoutes, cfg.AIRoutes, cfg.AIRoutes != ""
	case AIPrices:
		return EnvAIPrices, cfg.AIPrices, cfg.AIPrices != ""
	case MetaAppID:
		return EnvMetaAppID, cfg.MetaAppID, cfg.MetaAppID != ""
	case MetaGraphBaseURL:
		return EnvMetaGraphBaseURL, cfg.MetaGraphBaseURL, cfg.MetaGraphBaseURL != ""
	case MetaDialogBaseURL:
		return EnvMetaDialogBaseURL, cfg.MetaDialogBaseURL, cfg.MetaDialogBaseURL != ""
	case EmailRate:
		return EnvEmailRate, strconv.FormatFloat(cfg.EmailRate, 'f', -1, 64), cfg.EmailRate > 0
	}
	return "", "", false
}

// envVar is the variable that names g's resource to a Lambda holding g. Resources without
// one are reached through the platform (a destination, a log group). SecretsKey under
// CRMCredentials is CRM_SECRETS_KEY_ID: the platform builds the CRM family's sealer from it
// (family.Env.CRMSecrets), and a Lambda without an unconditioned grant has no
// SECRETS_KEY_ID, so no sealer for the default purpose that its grant would refuse.
func envVar(g Grant) (string, bool) {
	if g.On == SecretsKey && g.If == CRMCredentials {
		return EnvCRMSecretsKeyID, true
	}
	switch g.On {
	case Table:
		return EnvTableName, true
	case Bus:
		return EnvAuditBusName, true
	case CursorKey:
		return EnvCursorKeyID, true
	case SecretsKey:
		return EnvSecretsKeyID, true
	case JobsQueue:
		return EnvJobsQueueURL, true
	case JobsStateMachine:
		return EnvJobsStateMachineARN, true
	case ScheduleRole:
		return EnvSchedulerRoleARN, true
	case EmailIdentities:
		return EnvSESConfigurationSet, true
	case InboundMailBucket:
		return EnvInboundMailBucket, true
	case WhatsAppAppSecretParameter:
		return EnvWhatsAppAppSecretParameter, true
	case WhatsAppVerifyTokenParameter:
		return EnvWhatsAppVerifyTokenParameter, true
	case SDKKeyParameter:
		return EnvSDKKeyParameter, true
	case CRMHubSpotClientSecretParameter:
		return EnvCRMHubSpotClientSecretParameter, true
	case CRMSalesforceClientSecretParameter:
		return EnvCRMSalesforceClientSecretParameter, true
	case AIOpenAIKeyParameter:
		return EnvAIOpenAIKeyParameter, true
	case AIAnthropicKeyParameter:
		return EnvAIAnthropicKeyParameter, true
	case AIGeminiKeyParameter:
		return EnvAIGeminiKeyParameter, true
	case MetaAppSecretParameter:
		return EnvMetaAppSecretParameter, true
	case MailgunSigningKeyParameter:
		return EnvMailgunSigningKeyParameter, true
	}
	return "", false
}

// EnvNames returns the names of the variables the Lambda called name receives when deployed
// with cfg: STAGE and LOG_LEVEL, one per resource it has a grant on (AccessFor), and one per
// provider setting of its row in Settings that cfg sets.
func EnvNames(name string, cfg Config) []string {
	names := []string{EnvStage, EnvLogLevel}
	for _, g := range AccessFor(name, cfg) {
		if v, ok := envVar(g); ok && !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	for _, s := range Settings()[name] {
		if v, _, set := settingVar(s, cfg); set && !slices.Contains(names, v) {
			names = append(names, v)
		}
	}
	return names
}
