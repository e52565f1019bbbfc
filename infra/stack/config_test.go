package stack

import (
	"strings"
	"testing"
)

func context(m map[string]any) func(string) any {
	return func(k string) any { return m[k] }
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	c, err := ConfigFrom(context(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Stage: "dev", AssetDir: "build/lambda", LogRetentionDays: 30,
		ThrottleRateLimit: 100, ThrottleBurstLimit: 200, Alarm5xxThreshold: 5,
	}
	if c != want {
		t.Errorf("defaults %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestConfigDeletionProtection(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ctx  map[string]any
		want bool
	}{
		{map[string]any{"stage": "prod"}, true},
		{map[string]any{"stage": "staging"}, false},
		{map[string]any{"stage": "prod", "deletionProtection": "false"}, false},
		{map[string]any{"stage": "dev", "deletionProtection": true}, true},
	} {
		c, err := ConfigFrom(context(tt.ctx))
		if err != nil || c.DeletionProtection != tt.want {
			t.Errorf("%v: deletion protection %v (%v), want %v", tt.ctx, c.DeletionProtection, err, tt.want)
		}
	}
}

// Context values arrive as strings from `-c key=value` and typed from cdk.json.
func TestConfigParsesStringsAndTypes(t *testing.T) {
	t.Parallel()
	c, err := ConfigFrom(context(map[string]any{
		"logRetentionDays": "90", "throttleRateLimit": 25.5, "throttleBurstLimit": "50",
		"domain": " API.Example.com ", "certificateArn": "arn:aws:acm:us-east-1:123456789012:certificate/abc-123",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.LogRetentionDays != 90 || c.ThrottleRateLimit != 25.5 || c.ThrottleBurstLimit != 50 || c.Domain != "api.example.com" {
		t.Errorf("parsed %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
	_, err = ConfigFrom(context(map[string]any{"logRetentionDays": "a month", "deletionProtection": "maybe", "stage": 7}))
	for _, want := range []string{"logRetentionDays", "deletionProtection", "stage"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// emailInbound is a boolean as deletionProtection is: true or false, typed (cdk.json) or as
// a string (-c emailInbound=true); anything else is refused, not taken as off.
func TestConfigEmailInbound(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		value any
		want  bool
	}{
		{nil, false},
		{"true", true},
		{" TRUE ", true},
		{true, true},
		{"false", false},
		{false, false},
	} {
		c, err := ConfigFrom(context(map[string]any{"emailInbound": tt.value}))
		if err != nil || c.EmailInbound != tt.want {
			t.Errorf("emailInbound %#v: %v (%v), want %v", tt.value, c.EmailInbound, err, tt.want)
		}
	}
	for _, bad := range []any{"yes", "on", "", 1} {
		c, err := ConfigFrom(context(map[string]any{"emailInbound": bad}))
		if err == nil || !strings.Contains(err.Error(), "emailInbound") {
			t.Errorf("emailInbound %#v: error %v, want one naming emailInbound", bad, err)
		}
		if c.EmailInbound {
			t.Errorf("emailInbound %#v: on", bad)
		}
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	t.Parallel()
	c := Config{
		Stage: "Prod_1", Domain: "api.example.com", LogRetentionDays: 31, AlarmEmail: "ops at example",
		ThrottleRateLimit: 0, ThrottleBurstLimit: 1.5, Alarm5xxThreshold: -1,
	}
	err := c.Validate()
	for _, want := range []string{"stage", "certificateArn", "logRetentionDays", "alarmEmail", "throttleRateLimit", "throttleBurstLimit", "alarm5xxThreshold", "assetDir"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	c = Config{Stage: "dev", AssetDir: "x", LogRetentionDays: 30, ThrottleRateLimit: 1, ThrottleBurstLimit: 1,
		Domain: "api.example.com", CertificateArn: "arn:aws:iam::123456789012:role/x"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "not an ACM certificate") {
		t.Errorf("a non-ACM ARN: %v", err)
	}
	c.Domain = ""
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "domain") {
		t.Errorf("a certificate without a domain: %v", err)
	}
}

func TestConfigProviders(t *testing.T) {
	t.Parallel()
	c, err := ConfigFrom(context(map[string]any{
		"publicUrl": " https://hooks.example.com/ ", "telegramBaseUrl": "https://tg.example.com",
		"vkBaseUrl": "https://vk.example.com/method", "whatsappBaseUrl": "https://graph.example.com/v21.0",
		"whatsappAppId": "1029384756", "whatsappAppSecretParameter": "/botplatform/prod/whatsapp/app-secret",
		"whatsappVerifyTokenParameter":       "whatsapp-verify-token",
		"snsTopicArns":                       "arn:aws:sns:eu-west-1:123456789012:ses-events,arn:aws:sns:eu-west-1:123456789012:ses-inbound",
		"sdkKeyParameter":                    " /botplatform/prod/customer-sdk/key ",
		"crmHubSpotClientId":                 "6f1c2b7e-0d4a-4a8e-9a77-3c1f0e5b2d10",
		"crmHubSpotClientSecretParameter":    "/botplatform/prod/crm/hubspot-client-secret",
		"crmSalesforceClientId":              "3MVG9.consumer_key",
		"crmSalesforceClientSecretParameter": "botplatform-prod-crm-salesforce-client-secret",
		"crmHubSpotAuthBaseUrl":              "https://hubspot-auth.example.com/",
		"crmHubSpotApiBaseUrl":               "https://hubspot-api.example.com",
		"crmSalesforceLoginBaseUrl":          "https://test.salesforce.com",
		"crmPipedriveApiBaseUrl":             "https://pipedrive.example.com/api",
		"crmDynamicsLoginBaseUrl":            "https://login.microsoftonline.us",
		"aiOpenAIKeyParameter":               "/botplatform/prod/ai/openai-api-key",
		"aiAnthropicKeyParameter":            " /botplatform/prod/ai/anthropic-api-key ",
		"aiGeminiKeyParameter":               "botplatform-prod-ai-gemini-api-key",
		"aiOpenAIBaseUrl":                    "https://openai-proxy.example.com/",
		"aiAnthropicBaseUrl":                 "https://anthropic-proxy.example.com",
		"aiGeminiBaseUrl":                    "https://gemini-proxy.example.com/v",
		"aiRoutes":                           " fast=openai:gpt-4o-mini;quality=anthropic:claude-sonnet-4-0 ",
		"aiPrices":                           "openai:gpt-4o-mini=150/600",
		"emailRate":                          "250",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{PublicURL: "https://hooks.example.com", TelegramBaseURL: "https://tg.example.com",
		VKBaseURL: "https://vk.example.com/method", WhatsAppBaseURL: "https://graph.example.com/v21.0",
		WhatsAppAppID: "1029384756", WhatsAppAppSecretParameter: "/botplatform/prod/whatsapp/app-secret",
		WhatsAppVerifyTokenParameter: "whatsapp-verify-token",
		SNSTopicARNs:                 "arn:aws:sns:eu-west-1:123456789012:ses-events,arn:aws:sns:eu-west-1:123456789012:ses-inbound",
		SDKKeyParameter:              "/botplatform/prod/customer-sdk/key",
		CRMHubSpotClientID:           "6f1c2b7e-0d4a-4a8e-9a77-3c1f0e5b2d10", CRMHubSpotClientSecretParameter: "/botplatform/prod/crm/hubspot-client-secret",
		CRMSalesforceClientID: "3MVG9.consumer_key", CRMSalesforceClientSecretParameter: "botplatform-prod-crm-salesforce-client-secret",
		CRMHubSpotAuthBaseURL: "https://hubspot-auth.example.com", CRMHubSpotAPIBaseURL: "https://hubspot-api.example.com",
		CRMSalesforceLoginBaseURL: "https://test.salesforce.com", CRMPipedriveAPIBaseURL: "https://pipedrive.example.com/api",
		CRMDynamicsLoginBaseURL: "https://login.microsoftonline.us",
		AIOpenAIKeyParameter:    "/botplatform/prod/ai/openai-api-key", AIAnthropicKeyParameter: "/botplatform/prod/ai/anthropic-api-key",
		AIGeminiKeyParameter: "botplatform-prod-ai-gemini-api-key", AIOpenAIBaseURL: "https://openai-proxy.example.com",
		AIAnthropicBaseURL: "https://anthropic-proxy.example.com", AIGeminiBaseURL: "https://gemini-proxy.example.com/v",
		AIRoutes: "fast=openai:gpt-4o-mini;quality=anthropic:claude-sonnet-4-0", AIPrices: "openai:gpt-4o-mini=150/600",
		EmailRate: 250}
	got := c
	got.Stage, got.AssetDir, got.LogRetentionDays, got.ThrottleRateLimit, got.ThrottleBurstLimit, got.Alarm5xxThreshold = "", "", 0, 0, 0, 0
	if got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}

func TestConfigValidateProviders(t *testing.T) {
	t.Parallel()
	base := Config{Stage: "dev", AssetDir: "x", LogRetentionDays: 30, ThrottleRateLimit: 1, ThrottleBurstLimit: 1}
	for _, tt := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.PublicURL = "http://hooks.example.com" }, "publicUrl"},
		{func(c *Config) { c.PublicURL = "https://hooks.example.com?x=1" }, "publicUrl"},
		{func(c *Config) { c.PublicURL = "hooks.example.com" }, "publicUrl"},
		{func(c *Config) { c.TelegramBaseURL = "api.telegram.org" }, "telegramBaseUrl"},
		{func(c *Config) { c.SNSTopicARNs = "arn:aws:sqs:eu-west-1:123456789012:q" }, "snsTopicArns"},
		{func(c *Config) { c.SNSTopicARNs = "arn:aws:sns:eu-west-1:123456789012:ses,nope" }, "snsTopicArns"},
		{func(c *Config) { c.VKBaseURL = "https://user:pw@vk.example.com" }, "vkBaseUrl"},
		{func(c *Config) { c.WhatsAppBaseURL = "graph.facebook.com" }, "whatsappBaseUrl"},
		{func(c *Config) { c.WhatsAppAppID = "my-app" }, "whatsappAppId"},
		{func(c *Config) { c.WhatsAppAppSecretParameter = "botplatform/prod/secret" }, "whatsappAppSecretParameter"},
		{func(c *Config) {
			c.WhatsAppAppSecretParameter = "arn:aws:ssm:eu-west-1:123456789012:parameter/x"
		}, "not its ARN"},
		{func(c *Config) { c.WhatsAppVerifyTokenParameter = "/aws/reserved" }, "reserved"},
		{func(c *Config) { c.WhatsAppVerifyTokenParameter = "/a//b" }, "whatsappVerifyTokenParameter"},
		{func(c *Config) { c.WhatsAppVerifyTokenParameter = "/a b" }, "whatsappVerifyTokenParameter"},
		{func(c *Config) {
			c.WhatsAppAppSecretParameter, c.WhatsAppVerifyTokenParameter = "/same", "/same"
		}, "the same parameter"},
		{func(c *Config) { c.SDKKeyParameter = "botplatform/prod/sdk-key/" }, "sdkKeyParameter"},
		{func(c *Config) { c.SDKKeyParameter = "arn:aws:ssm:eu-west-1:123456789012:parameter/sdk-key" }, "not its ARN"},
		{func(c *Config) { c.SDKKeyParameter = "/ssm/sdk-key" }, "reserved"},
		// The project-key secret is neither WhatsApp secret.
		{func(c *Config) {
			c.WhatsAppVerifyTokenParameter, c.SDKKeyParameter = "/same", "/same"
		}, "whatsappVerifyTokenParameter and sdkKeyParameter name the same parameter"},
		{func(c *Config) {
			c.WhatsAppAppSecretParameter, c.SDKKeyParameter = "/same", "/same"
		}, "whatsappAppSecretParameter and sdkKeyParameter name the same parameter"},
		// A CRM OAuth application is its client id and its secret's parameter, both or neither.
		{func(c *Config) { c.CRMHubSpotClientID = "hs-id" },
			"crmHubSpotClientId is set but crmHubSpotClientSecretParameter is not"},
		{func(c *Config) { c.CRMSalesforceClientSecretParameter = "/crm/sf" },
			"crmSalesforceClientSecretParameter is set but crmSalesforceClientId is not"},
		{func(c *Config) {
			c.CRMHubSpotClientID, c.CRMHubSpotClientSecretParameter = "hs id", "/crm/hs"
		}, "crmHubSpotClientId \"hs id\": want the OAuth application's client id"},
		{func(c *Config) {
			c.CRMSalesforceClientID, c.CRMSalesforceClientSecretParameter = "sf-id", "arn:aws:ssm:eu-west-1:123456789012:parameter/sf"
		}, "crmSalesforceClientSecretParameter"},
		{func(c *Config) {
			c.CRMHubSpotClientID, c.CRMHubSpotClientSecretParameter = "hs-id", "/crm/secret"
			c.CRMSalesforceClientID, c.CRMSalesforceClientSecretParameter = "sf-id", "/crm/secret"
		}, "crmHubSpotClientSecretParameter and crmSalesforceClientSecretParameter name the same parameter"},
		{func(c *Config) {
			c.CRMHubSpotClientID, c.CRMHubSpotClientSecretParameter, c.SDKKeyParameter = "hs-id", "/same", "/same"
		}, "sdkKeyParameter and crmHubSpotClientSecretParameter name the same parameter"},
		// The crm Lambda calls public https addresses only.
		{func(c *Config) { c.CRMSalesforceLoginBaseURL = "http://test.salesforce.com" }, "crmSalesforceLoginBaseUrl"},
		{func(c *Config) { c.CRMHubSpotAPIBaseURL = "api.hubapi.com" }, "crmHubSpotApiBaseUrl"},
		{func(c *Config) { c.CRMHubSpotAuthBaseURL = "https://app.hubspot.com?x=1" }, "crmHubSpotAuthBaseUrl"},
		{func(c *Config) { c.CRMPipedriveAPIBaseURL = "https://user:pw@pipedrive.example.com" }, "crmPipedriveApiBaseUrl"},
		{func(c *Config) { c.CRMDynamicsLoginBaseURL = "login.microsoftonline.com" }, "crmDynamicsLoginBaseUrl"},
		// The ai Lambda calls the providers over https only, and reads its routes and prices
		// as these are checked: a typo fails the synthesis.
		{func(c *Config) { c.AIOpenAIBaseURL = "http://api.openai.com" }, "aiOpenAIBaseUrl"},
		{func(c *Config) { c.AIAnthropicBaseURL = "api.anthropic.com" }, "aiAnthropicBaseUrl"},
		{func(c *Config) { c.AIGeminiBaseURL = "https://user:pw@gemini.example.com" }, "aiGeminiBaseUrl"},
		{func(c *Config) { c.AIRoutes = "fastest=openai:gpt-4o-mini" }, "aiRoutes"},
		{func(c *Config) { c.AIRoutes = "fast=openia:gpt-4o-mini" }, "aiRoutes"},
		{func(c *Config) { c.AIPrices = "openai:gpt-4o=2500" }, "aiPrices"},
		{func(c *Config) { c.AIPrices = "mistral:large=1/2" }, "aiPrices"},
		{func(c *Config) { c.EmailRate = -1 }, "emailRate"},
		{func(c *Config) { c.EmailRate = 10_001 }, "emailRate"},
		{func(c *Config) { c.AIOpenAIKeyParameter = "arn:aws:ssm:eu-west-1:123456789012:parameter/openai" }, "aiOpenAIKeyParameter"},
		{func(c *Config) { c.AIGeminiKeyParameter = "/ssm/gemini" }, "reserved"},
		// Each provider's key is its own secret, and none is another family's.
		{func(c *Config) {
			c.AIOpenAIKeyParameter, c.AIAnthropicKeyParameter = "/ai/key", "/ai/key"
		}, "aiOpenAIKeyParameter and aiAnthropicKeyParameter name the same parameter"},
		{func(c *Config) {
			c.SDKKeyParameter, c.AIGeminiKeyParameter = "/same", "/same"
		}, "sdkKeyParameter and aiGeminiKeyParameter name the same parameter"},
	} {
		c := base
		tt.change(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want one about %s", c, err, tt.want)
		}
	}
	ok := base
	ok.PublicURL, ok.WhatsAppVerifyTokenParameter = "https://example.com/prefix", "/botplatform/dev/verify-token"
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
	// The SDK key's parameter alone, or beside both WhatsApp ones: each its own.
	ok = base
	ok.SDKKeyParameter = "botplatform-dev-sdk-key"
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
	ok.WhatsAppAppSecretParameter, ok.WhatsAppVerifyTokenParameter = "/botplatform/dev/app-secret", "/botplatform/dev/verify-token"
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
	// One managed AI key alone, with the defaults' routes and prices overridden.
	ok = base
	ok.AIAnthropicKeyParameter, ok.AIAnthropicBaseURL = "/botplatform/dev/ai/anthropic", "https://anthropic.example.com"
	ok.AIRoutes, ok.AIPrices = "quality=anthropic:claude-sonnet-4-0", "anthropic:claude-sonnet-4-0=3000/15000"
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
	// One CRM application without the other.
	ok = base
	ok.CRMSalesforceClientID, ok.CRMSalesforceClientSecretParameter = "3MVG9.consumer_key", "/botplatform/dev/crm/salesforce"
	if err := ok.Validate(); err != nil {
		t.Error(err)
	}
}

// A secret given as a context value would be written to cdk.context.json, the cloud
// assembly and the template: refused, naming the parameter to use instead.
func TestConfigRefusesSecretsAsContext(t *testing.T) {
	t.Parallel()
	_, err := ConfigFrom(context(map[string]any{"whatsappAppSecret": "s3cret", "whatsappVerifyToken": "vt",
		"sdkKey": "c2RrLWtleS1ieXRlcw==", "crmHubSpotClientSecret": "hs-client-s3cret", "crmSalesforceClientSecret": "sf-client-s3cret",
		"aiOpenAIKey": "sk-openai-s3cret", "aiAnthropicKey": "sk-ant-s3cret", "aiGeminiKey": "gemini-s3cret"}))
	for _, want := range []string{"whatsappAppSecret", "whatsappAppSecretParameter", "whatsappVerifyToken:", "whatsappVerifyTokenParameter",
		"sdkKey:", "sdkKeyParameter", "crmHubSpotClientSecret:", "crmHubSpotClientSecretParameter",
		"crmSalesforceClientSecret:", "crmSalesforceClientSecretParameter", "aiOpenAIKey:", "aiOpenAIKeyParameter",
		"aiAnthropicKey:", "aiAnthropicKeyParameter", "aiGeminiKey:", "aiGeminiKeyParameter"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
	if err != nil && (strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), `"vt"`) || strings.Contains(err.Error(), "c2RrLWtleS1ieXRlcw")) {
		t.Errorf("error %v repeats the secret", err)
	}
}
