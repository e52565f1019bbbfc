package stack

import (
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/botplatform/api/functions/ai"
	"github.com/botplatform/api/functions/emailcampaigns"
	"github.com/botplatform/api/shared/ai/aihttp"
	"github.com/botplatform/api/shared/channel/telegram"
	"github.com/botplatform/api/shared/channel/vk"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/crm/crmhttp"
)

// Config is the stack's configuration: CDK context values (cdk.json, -c key=value or
// CDK_CONTEXT_JSON) over defaults. The README's "Deploy to AWS" section lists them.
type Config struct {
	// Stage names the deployment (dev, staging, prod): resource names, aliases, the bus.
	Stage string
	// Domain is an optional custom domain for the API; CertificateArn (ACM, in the
	// stack's region) is then required.
	Domain         string
	CertificateArn string
	// DeletionProtection protects the table from deletion; with it, the table and the
	// keys are also retained when the stack is deleted. Default: true for stage prod.
	DeletionProtection bool
	// AssetDir holds the `make build` output: <AssetDir>/<lambda>/bootstrap.
	AssetDir string
	// LogRetentionDays is the retention of every log group (a CloudWatch Logs value).
	LogRetentionDays int
	// AlarmEmail, when set, is subscribed to the alarm topic.
	AlarmEmail string
	// ThrottleRateLimit (requests/s) and ThrottleBurstLimit bound the API's default stage.
	ThrottleRateLimit  float64
	ThrottleBurstLimit float64
	// Alarm5xxThreshold is how many 5xx answers in 5 minutes raise the API alarm.
	Alarm5xxThreshold float64

	// PublicURL is where providers deliver webhooks (an https URL without a trailing
	// slash); "" means the API's own: https://<Domain>, else the HTTP API's endpoint.
	PublicURL string
	// The providers' API base URLs and the Meta app id; "" talks to the real providers
	// (and leaves WhatsApp template header uploads off). See platform.Providers.
	TelegramBaseURL string
	VKBaseURL       string
	WhatsAppBaseURL string
	WhatsAppAppID   string
	// The names of the SSM SecureString parameters holding the WhatsApp app secret and
	// verify token. The operator creates them; the stack never holds a secret's value.
	WhatsAppAppSecretParameter   string
	WhatsAppVerifyTokenParameter string
	// SDKKeyParameter names the SSM SecureString parameter holding the customer SDK's
	// project-key secret: at least 32 random bytes in standard base64 (`openssl rand
	// -base64 32`), checked when the customersdk and sdk Lambdas read it at cold start.
	// Unset, those Lambdas run without it and enabling the SDK answers 503
	// sdk_not_configured.
	SDKKeyParameter string
	// The CRM family's OAuth applications (docs/crm.md): each provider's client id (not
	// secret, the crm Lambda's CRM_*_CLIENT_ID) and the name of the SSM SecureString
	// parameter holding its client secret, which the crm and MCP Lambdas alone read at cold
	// start (the MCP Lambda's CRM read tools refresh tokens as the crm routes do).
	// An application is configured by both or by neither; unset, that provider's OAuth
	// starts answer 503 oauth_not_configured. The redirect URLs are the callbacks at
	// PublicURL.
	CRMHubSpotClientID                 string
	CRMHubSpotClientSecretParameter    string
	CRMSalesforceClientID              string
	CRMSalesforceClientSecretParameter string
	// The CRM providers' endpoints, as the telegramBaseUrl and others are the messaging
	// providers' (https; "" is the real provider's): HubSpot's authorization page and API,
	// Salesforce's login server (https://test.salesforce.com for sandboxes), one Pipedrive
	// API root for every company, Microsoft Entra ID's login server (a sovereign cloud's).
	CRMHubSpotAuthBaseURL     string
	CRMHubSpotAPIBaseURL      string
	CRMSalesforceLoginBaseURL string
	CRMPipedriveAPIBaseURL    string
	CRMDynamicsLoginBaseURL   string
	// The managed AI family (docs/ai.md): the names of the SSM SecureString parameters
	// holding the platform's own API keys of OpenAI, Anthropic and Gemini, which the ai
	// Lambda alone reads at cold start (unset, that provider has no managed key: it is
	// reached only with an account's own key); the providers' API base URLs (https; "" is
	// the real provider's); and the profiles' routes and the models' prices as AI_ROUTES and
	// AI_PRICES take them (functions/ai.ParseRoutes, ParsePrices; "" keeps the defaults).
	AIOpenAIKeyParameter    string
	AIAnthropicKeyParameter string
	AIGeminiKeyParameter    string
	AIOpenAIBaseURL         string
	AIAnthropicBaseURL      string
	AIGeminiBaseURL         string
	AIRoutes                string
	AIPrices                string
	// The meta family's Facebook app (docs/meta.md): its id (META_APP_ID) and the name of
	// the SSM SecureString parameter holding its secret, which the meta and jobs Lambdas
	// alone read at cold start (both or neither; unset, starts answer 503
	// meta_not_configured), and the Graph API and Login dialog roots (https; "" is
	// Facebook's). The redirect URL is the callback at PublicURL.
	MetaAppID              string
	MetaAppSecretParameter string
	MetaGraphBaseURL       string
	MetaDialogBaseURL      string
	// MailgunSigningKeyParameter names the SSM SecureString parameter of the Mailgun
	// webhook signing key, which the emailevents Lambda alone reads at cold start (unset,
	// every Mailgun delivery is refused, 401).
	MailgunSigningKeyParameter string
	// SNSTopicARNs are SNS topics made outside the stack (comma-separated in context
	// snsTopicArns) whose deliveries the email provider routes accept besides the stack's own
	// topics (its SES events topic, and its inbound mail topic with EmailInbound).
	SNSTopicARNs string
	// EmailInbound has the stack receive mail (context emailInbound, default false): an S3
	// bucket for received mail, an SNS topic, and an SES receipt rule set that stores mail in
	// the bucket and notifies the topic. Off by default because SES receives mail only in
	// some regions; the rule set is left for the operator to activate (docs/aws.md).
	EmailInbound bool
	// EmailRate is the deployment's email sending rate in messages a second, shared by
	// every campaign (context emailRate, EMAIL_RATE), to send slower than the account's
	// quota. 0 leaves the default: the SES account's maximum send rate, which a Lambda's
	// first send step reads (14 when it cannot).
	EmailRate float64
}

// snsTopicARN is the shape of an SNS topic ARN.
var snsTopicARN = regexp.MustCompile(`^arn:aws(-[a-z]+)*:sns:[a-z0-9-]+:[0-9]{12}:[A-Za-z0-9_-]{1,256}$`)

// Defaults for the context values.
const (
	DefaultStage              = "dev"
	DefaultAssetDir           = "build/lambda"
	DefaultLogRetentionDays   = 30
	DefaultThrottleRateLimit  = 100
	DefaultThrottleBurstLimit = 200
	DefaultAlarm5xxThreshold  = 5
)

// Context keys, as given to `cdk -c key=value`.
const (
	CtxStage              = "stage"
	CtxDomain             = "domain"
	CtxCertificateArn     = "certificateArn"
	CtxDeletionProtection = "deletionProtection"
	CtxAssetDir           = "assetDir"
	CtxLogRetentionDays   = "logRetentionDays"
	CtxAlarmEmail         = "alarmEmail"
	CtxThrottleRateLimit  = "throttleRateLimit"
	CtxThrottleBurstLimit = "throttleBurstLimit"
	CtxAlarm5xxThreshold  = "alarm5xxThreshold"

	CtxPublicURL                    = "publicUrl"
	CtxTelegramBaseURL              = "telegramBaseUrl"
	CtxVKBaseURL                    = "vkBaseUrl"
	CtxWhatsAppBaseURL              = "whatsappBaseUrl"
	CtxWhatsAppAppID                = "whatsappAppId"
	CtxWhatsAppAppSecretParameter   = "whatsappAppSecretParameter"
	CtxWhatsAppVerifyTokenParameter = "whatsappVerifyTokenParameter"
	CtxSDKKeyParameter              = "sdkKeyParameter"
	CtxSNSTopicARNs                 = "snsTopicArns"
	CtxEmailInbound                 = "emailInbound"
	CtxEmailRate                    = "emailRate"

	CtxCRMHubSpotClientID                 = "crmHubSpotClientId"
	CtxCRMHubSpotClientSecretParameter    = "crmHubSpotClientSecretParameter"
	CtxCRMSalesforceClientID              = "crmSalesforceClientId"
	CtxCRMSalesforceClientSecretParameter = "crmSalesforceClientSecretParameter"
	CtxCRMHubSpotAuthBaseURL              = "crmHubSpotAuthBaseUrl"
	CtxCRMHubSpotAPIBaseURL               = "crmHubSpotApiBaseUrl"
	CtxCRMSalesforceLoginBaseURL          = "crmSalesforceLoginBaseUrl"
	CtxCRMPipedriveAPIBaseURL             = "crmPipedriveApiBaseUrl"
	CtxCRMDynamicsLoginBaseURL            = "crmDynamicsLoginBaseUrl"

	CtxAIOpenAIKeyParameter    = "aiOpenAIKeyParameter"
	CtxAIAnthropicKeyParameter = "aiAnthropicKeyParameter"
	CtxAIGeminiKeyParameter    = "aiGeminiKeyParameter"
	CtxAIOpenAIBaseURL         = "aiOpenAIBaseUrl"
	CtxAIAnthropicBaseURL      = "aiAnthropicBaseUrl"
	CtxAIGeminiBaseURL         = "aiGeminiBaseUrl"
	CtxAIRoutes                = "aiRoutes"
	CtxAIPrices                = "aiPrices"

	CtxMetaAppID              = "metaAppId"
	CtxMetaAppSecretParameter = "metaAppSecretParameter"
	CtxMetaGraphBaseURL       = "metaGraphBaseUrl"
	CtxMetaDialogBaseURL      = "metaDialogBaseUrl"

	CtxMailgunSigningKeyParameter = "mailgunSigningKeyParameter"
)

// secretContext are context keys someone might try for the secrets themselves. Context ends
// up in cdk.context.json, the cloud assembly and the template; they are refused.
var secretContext = map[string]string{
	"whatsappAppSecret":         CtxWhatsAppAppSecretParameter,
	"whatsappVerifyToken":       CtxWhatsAppVerifyTokenParameter,
	"sdkKey":                    CtxSDKKeyParameter,
	"crmHubSpotClientSecret":    CtxCRMHubSpotClientSecretParameter,
	"crmSalesforceClientSecret": CtxCRMSalesforceClientSecretParameter,
	"aiOpenAIKey":               CtxAIOpenAIKeyParameter,
	"aiAnthropicKey":            CtxAIAnthropicKeyParameter,
	"aiGeminiKey":               CtxAIGeminiKeyParameter,
	"metaAppSecret":             CtxMetaAppSecretParameter,
	"mailgunSigningKey":         CtxMailgunSigningKeyParameter,
}

// Prod reports whether the stage is production: its data is retained and protected.
func (c Config) Prod() bool { return c.Stage == "prod" }

// ConfigFrom reads the configuration through get (a construct node's TryGetContext), filling
// defaults. It reports every malformed value at once; call Validate for the rest.
func ConfigFrom(get func(key string) any) (Config, error) {
	var problems []error
	str := func(key, def string) string {
		switch v := get(key).(type) {
		case nil:
			return def
		case string:
			return strings.TrimSpace(v)
		default:
			problems = append(problems, fmt.Errorf("context %s: want a string, got %v", key, v))
			return def
		}
	}
	num := func(key string, def float64) float64 {
		switch v := get(key).(type) {
		case nil:
			return def
		case float64:
			return v
		case int:
			return float64(v)
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				problems = append(problems, fmt.Errorf("context %s: want a number, got %q", key, v))
				return def
			}
			return f
		default:
			problems = append(problems, fmt.Errorf("context %s: want a number, got %v", key, v))
			return def
		}
	}
	boolean := func(key string, def bool) bool {
		switch v := get(key).(type) {
		case nil:
			return def
		case bool:
			return v
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				problems = append(problems, fmt.Errorf("context %s: want true or false, got %q", key, v))
				return def
			}
			return b
		default:
			problems = append(problems, fmt.Errorf("context %s: want true or false, got %v", key, v))
			return def
		}
	}
	c := Config{
		Stage:              str(CtxStage, DefaultStage),
		Domain:             strings.ToLower(str(CtxDomain, "")),
		CertificateArn:     str(CtxCertificateArn, ""),
		AssetDir:           str(CtxAssetDir, DefaultAssetDir),
		AlarmEmail:         str(CtxAlarmEmail, ""),
		ThrottleRateLimit:  num(CtxThrottleRateLimit, DefaultThrottleRateLimit),
		ThrottleBurstLimit: num(CtxThrottleBurstLimit, DefaultThrottleBurstLimit),
		Alarm5xxThreshold:  num(CtxAlarm5xxThreshold, DefaultAlarm5xxThreshold),

		PublicURL:                    strings.TrimRight(str(CtxPublicURL, ""), "/"),
		TelegramBaseURL:              str(CtxTelegramBaseURL, ""),
		VKBaseURL:                    str(CtxVKBaseURL, ""),
		WhatsAppBaseURL:              str(CtxWhatsAppBaseURL, ""),
		WhatsAppAppID:                str(CtxWhatsAppAppID, ""),
		SNSTopicARNs:                 str(CtxSNSTopicARNs, ""),
		EmailInbound:                 boolean(CtxEmailInbound, false),
		EmailRate:                    num(CtxEmailRate, 0),
		WhatsAppAppSecretParameter:   str(CtxWhatsAppAppSecretParameter, ""),
		WhatsAppVerifyTokenParameter: str(CtxWhatsAppVerifyTokenParameter, ""),
		SDKKeyParameter:              str(CtxSDKKeyParameter, ""),

		CRMHubSpotClientID:                 str(CtxCRMHubSpotClientID, ""),
		CRMHubSpotClientSecretParameter:    str(CtxCRMHubSpotClientSecretParameter, ""),
		CRMSalesforceClientID:              str(CtxCRMSalesforceClientID, ""),
		CRMSalesforceClientSecretParameter: str(CtxCRMSalesforceClientSecretParameter, ""),
		CRMHubSpotAuthBaseURL:              strings.TrimRight(str(CtxCRMHubSpotAuthBaseURL, ""), "/"),
		CRMHubSpotAPIBaseURL:               strings.TrimRight(str(CtxCRMHubSpotAPIBaseURL, ""), "/"),
		CRMSalesforceLoginBaseURL:          strings.TrimRight(str(CtxCRMSalesforceLoginBaseURL, ""), "/"),
		CRMPipedriveAPIBaseURL:             strings.TrimRight(str(CtxCRMPipedriveAPIBaseURL, ""), "/"),
		CRMDynamicsLoginBaseURL:            strings.TrimRight(str(CtxCRMDynamicsLoginBaseURL, ""), "/"),

		AIOpenAIKeyParameter:    str(CtxAIOpenAIKeyParameter, ""),
		AIAnthropicKeyParameter: str(CtxAIAnthropicKeyParameter, ""),
		AIGeminiKeyParameter:    str(CtxAIGeminiKeyParameter, ""),
		AIOpenAIBaseURL:         strings.TrimRight(str(CtxAIOpenAIBaseURL, ""), "/"),
		AIAnthropicBaseURL:      strings.TrimRight(str(CtxAIAnthropicBaseURL, ""), "/"),
		AIGeminiBaseURL:         strings.TrimRight(str(CtxAIGeminiBaseURL, ""), "/"),
		AIRoutes:                str(CtxAIRoutes, ""),
		AIPrices:                str(CtxAIPrices, ""),

		MetaAppID:              str(CtxMetaAppID, ""),
		MetaAppSecretParameter: str(CtxMetaAppSecretParameter, ""),
		MetaGraphBaseURL:       strings.TrimRight(str(CtxMetaGraphBaseURL, ""), "/"),
		MetaDialogBaseURL:      strings.TrimRight(str(CtxMetaDialogBaseURL, ""), "/"),

		MailgunSigningKeyParameter: str(CtxMailgunSigningKeyParameter, ""),
	}
	for _, key := range slices.Sorted(maps.Keys(secretContext)) {
		if get(key) != nil {
			problems = append(problems, fmt.Errorf("context %s: secrets are never context values (they would be written to "+
				"cdk.context.json, the cloud assembly and the template): store it in an SSM SecureString parameter and pass its name as %s",
				key, secretContext[key]))
		}
	}
	days := num(CtxLogRetentionDays, DefaultLogRetentionDays)
	c.LogRetentionDays = int(days)
	if float64(c.LogRetentionDays) != days {
		problems = append(problems, fmt.Errorf("context %s: want whole days, got %v", CtxLogRetentionDays, days))
	}
	c.DeletionProtection = boolean(CtxDeletionProtection, c.Prod())
	return c, errors.Join(problems...)
}

// stageName: it becomes part of function names (64 characters at most), the bus name and
// key aliases.
var stageName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,19}$`)

// domainName is a lower-case host name with at least two labels.
var domainName = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$`)

// acmArn is an ACM certificate ARN in any partition.
var acmArn = regexp.MustCompile(`^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[A-Za-z0-9-]+$`)

// Validate reports every problem of the configuration at once.
func (c Config) Validate() error {
	var problems []error
	bad := func(format string, args ...any) { problems = append(problems, fmt.Errorf(format, args...)) }
	if !stageName.MatchString(c.Stage) {
		bad("%s %q: want 1-20 lower-case letters, digits or hyphens, starting with a letter", CtxStage, c.Stage)
	}
	switch {
	case c.Domain == "" && c.CertificateArn != "":
		bad("%s is set but %s is not", CtxCertificateArn, CtxDomain)
	case c.Domain != "" && !domainName.MatchString(c.Domain):
		bad("%s %q: not a host name", CtxDomain, c.Domain)
	case c.Domain != "" && c.CertificateArn == "":
		bad("%s %q needs %s (an ACM certificate for it, in the stack's region)", CtxDomain, c.Domain, CtxCertificateArn)
	case c.Domain != "" && !acmArn.MatchString(c.CertificateArn):
		bad("%s %q: not an ACM certificate ARN", CtxCertificateArn, c.CertificateArn)
	}
	if c.AssetDir == "" {
		bad("%s is empty", CtxAssetDir)
	}
	if _, ok := retentions()[c.LogRetentionDays]; !ok {
		bad("%s %d: CloudWatch Logs accepts %v", CtxLogRetentionDays, c.LogRetentionDays, slices.Sorted(maps.Keys(retentions())))
	}
	if c.AlarmEmail != "" {
		if a, err := mail.ParseAddress(c.AlarmEmail); err != nil || a.Address != c.AlarmEmail {
			bad("%s %q: not an email address", CtxAlarmEmail, c.AlarmEmail)
		}
	}
	if c.ThrottleRateLimit <= 0 {
		bad("%s %v: want more than 0", CtxThrottleRateLimit, c.ThrottleRateLimit)
	}
	if c.ThrottleBurstLimit <= 0 || c.ThrottleBurstLimit != float64(int(c.ThrottleBurstLimit)) {
		bad("%s %v: want a whole number more than 0", CtxThrottleBurstLimit, c.ThrottleBurstLimit)
	}
	if c.Alarm5xxThreshold < 0 {
		bad("%s %v: want 0 or more", CtxAlarm5xxThreshold, c.Alarm5xxThreshold)
	}
	if c.PublicURL != "" {
		if err := checkPublicURL(c.PublicURL); err != nil {
			bad("%s %q: %v", CtxPublicURL, c.PublicURL, err)
		}
	}
	for _, u := range []struct {
		key, value string
		check      func(string) error
	}{
		{CtxTelegramBaseURL, c.TelegramBaseURL, telegram.CheckBaseURL},
		{CtxVKBaseURL, c.VKBaseURL, vk.CheckBaseURL},
		{CtxWhatsAppBaseURL, c.WhatsAppBaseURL, whatsapp.CheckBaseURL},
		{CtxCRMHubSpotAuthBaseURL, c.CRMHubSpotAuthBaseURL, checkCRMBaseURL},
		{CtxCRMHubSpotAPIBaseURL, c.CRMHubSpotAPIBaseURL, checkCRMBaseURL},
		{CtxCRMSalesforceLoginBaseURL, c.CRMSalesforceLoginBaseURL, checkCRMBaseURL},
		{CtxCRMPipedriveAPIBaseURL, c.CRMPipedriveAPIBaseURL, checkCRMBaseURL},
		{CtxCRMDynamicsLoginBaseURL, c.CRMDynamicsLoginBaseURL, checkCRMBaseURL},
		{CtxAIOpenAIBaseURL, c.AIOpenAIBaseURL, checkAIBaseURL},
		{CtxAIAnthropicBaseURL, c.AIAnthropicBaseURL, checkAIBaseURL},
		{CtxAIGeminiBaseURL, c.AIGeminiBaseURL, checkAIBaseURL},
		{CtxMetaGraphBaseURL, c.MetaGraphBaseURL, checkCRMBaseURL},
		{CtxMetaDialogBaseURL, c.MetaDialogBaseURL, checkCRMBaseURL},
	} {
		if u.value != "" {
			if err := u.check(u.value); err != nil {
				bad("%s %q: %v", u.key, u.value, err)
			}
		}
	}
	for _, arn := range strings.Split(c.SNSTopicARNs, ",") {
		if c.SNSTopicARNs != "" && !snsTopicARN.MatchString(arn) {
			bad("%s: %q is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<topic>)", CtxSNSTopicARNs, arn)
		}
	}
	if c.EmailRate < 0 || c.EmailRate > emailcampaigns.MaxRate {
		bad("%s %v: want a rate in messages a second, up to %d (0: the default, 14)", CtxEmailRate, c.EmailRate, emailcampaigns.MaxRate)
	}
	// The ai Lambda reads AI_ROUTES and AI_PRICES with these: a typo fails the synthesis, not
	// a cold start (where it would leave the family answering 503 ai_not_configured).
	if _, err := ai.ParseRoutes(c.AIRoutes); err != nil {
		bad("%s: %v", CtxAIRoutes, err)
	}
	if _, err := ai.ParsePrices(c.AIPrices); err != nil {
		bad("%s: %v", CtxAIPrices, err)
	}
	if c.WhatsAppAppID != "" && !whatsapp.ValidAppID(c.WhatsAppAppID) {
		bad("%s %q: want the numeric id of the Meta app", CtxWhatsAppAppID, c.WhatsAppAppID)
	}
	// An OAuth application is its client id and its secret: one without the other would
	// deploy a provider that answers 503 (or a secret no one uses) with nothing said.
	for _, app := range []struct{ idKey, id, secretKey, secret string }{
		{CtxCRMHubSpotClientID, c.CRMHubSpotClientID, CtxCRMHubSpotClientSecretParameter, c.CRMHubSpotClientSecretParameter},
		{CtxCRMSalesforceClientID, c.CRMSalesforceClientID, CtxCRMSalesforceClientSecretParameter, c.CRMSalesforceClientSecretParameter},
		{CtxMetaAppID, c.MetaAppID, CtxMetaAppSecretParameter, c.MetaAppSecretParameter},
	} {
		switch {
		case app.id != "" && app.secret == "":
			bad("%s is set but %s is not: the OAuth application needs its client secret (the name of the SSM SecureString parameter holding it)",
				app.idKey, app.secretKey)
		case app.id == "" && app.secret != "":
			bad("%s is set but %s is not: the OAuth application needs its client id", app.secretKey, app.idKey)
		case app.id != "" && !clientID.MatchString(app.id):
			bad("%s %q: want the OAuth application's client id (printable characters without spaces, 256 at most)", app.idKey, app.id)
		}
	}
	// Each secret has its own parameter: one shared would make two secrets one value (and
	// the SDK key's base64 a WhatsApp secret, or the reverse).
	named := map[string]string{} // parameter name -> the first key naming it
	for _, p := range []struct{ key, name string }{
		{CtxWhatsAppAppSecretParameter, c.WhatsAppAppSecretParameter},
		{CtxWhatsAppVerifyTokenParameter, c.WhatsAppVerifyTokenParameter},
		{CtxSDKKeyParameter, c.SDKKeyParameter},
		{CtxCRMHubSpotClientSecretParameter, c.CRMHubSpotClientSecretParameter},
		{CtxCRMSalesforceClientSecretParameter, c.CRMSalesforceClientSecretParameter},
		{CtxAIOpenAIKeyParameter, c.AIOpenAIKeyParameter},
		{CtxAIAnthropicKeyParameter, c.AIAnthropicKeyParameter},
		{CtxAIGeminiKeyParameter, c.AIGeminiKeyParameter},
		{CtxMetaAppSecretParameter, c.MetaAppSecretParameter},
		{CtxMailgunSigningKeyParameter, c.MailgunSigningKeyParameter},
	} {
		if p.name == "" {
			continue
		}
		if err := checkParameterName(p.name); err != nil {
			bad("%s %q: %v", p.key, p.name, err)
		}
		if first, ok := named[p.name]; ok {
			bad("%s and %s name the same parameter: they are different secrets", first, p.key)
			continue
		}
		named[p.name] = p.key
	}
	return errors.Join(problems...)
}

// checkPublicURL: providers deliver webhooks only to https (Telegram and Meta refuse
// anything else), at a host, under an optional path.
func checkPublicURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
		return errors.New("want an absolute https URL")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "#") {
		return errors.New("want no user info, query or fragment")
	}
	return nil
}

// clientID is an OAuth client id as the CRM providers issue them (HubSpot: a UUID;
// Salesforce: a consumer key of letters, digits, "." and "_"): printable, without spaces.
var clientID = regexp.MustCompile(`^[\x21-\x7e]{1,256}$`)

// checkCRMBaseURL: the crm Lambda calls only public https addresses (CRM_PRIVATE_PROVIDER_ADDRESSES
// is never set on AWS), so an endpoint override is an https base URL.
func checkCRMBaseURL(s string) error {
	if _, err := crmhttp.CheckInstanceURL(s, false); err != nil {
		return errors.New("want an absolute https URL without user info, query or fragment")
	}
	return nil
}

// checkAIBaseURL: the ai Lambda calls the providers over https only (the key travels in a
// header, and AI_PRIVATE_PROVIDER_ADDRESSES is never set on AWS), as its clients check
// (aihttp.Config.Open).
func checkAIBaseURL(s string) error {
	if _, _, err := (aihttp.Config{BaseURL: s}).Open(""); err != nil {
		return errors.New("want an absolute https URL without user info, query or fragment")
	}
	return nil
}

// parameterName is an SSM parameter name as Parameter Store accepts it: letters, digits and
// _.-/, a hierarchical name starting with "/" and no empty level; names beginning with
// aws or ssm are reserved.
var parameterName = regexp.MustCompile(`^(/[A-Za-z0-9_.-]+)+$|^[A-Za-z0-9_.-]+$`)

// checkParameterName accepts the name of a parameter of the stack's account and region (not
// an ARN: a parameter elsewhere would need a grant the stack does not make).
func checkParameterName(name string) error {
	lower := strings.ToLower(strings.TrimPrefix(name, "/"))
	switch {
	case strings.HasPrefix(name, "arn:"):
		return errors.New("want the parameter's name, not its ARN (it must be in the stack's account and region)")
	case !parameterName.MatchString(name):
		return errors.New(`want a Parameter Store name: letters, digits and _.-, levels separated by "/" after a leading "/"`)
	case len(name) > 1011:
		return errors.New("longer than Parameter Store allows")
	case strings.HasPrefix(lower, "aws") || strings.HasPrefix(lower, "ssm"):
		return errors.New(`names beginning with "aws" or "ssm" are reserved`)
	case strings.Count(name, "/") > 15:
		return errors.New("Parameter Store allows at most 15 levels")
	}
	return nil
}

// checkAssets reports every Lambda whose bootstrap is missing from dir, before CDK would
// fail on the first one with a less helpful message.
func checkAssets(dir string, names []string) error {
	var missing []string
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n, "bootstrap")); err != nil {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s: no bootstrap for %s (run `make build`, or set -c %s=...)",
			dir, strings.Join(missing, ", "), CtxAssetDir)
	}
	return nil
}
