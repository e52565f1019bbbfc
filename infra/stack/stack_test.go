package stack_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/functions/families"
	"github.com/botplatform/api/infra/stack"
	kmssealer "github.com/botplatform/api/shared/secrets/kms"
)

// dev is the stack with default context, synthesized once for every test that reads it.
var dev *synthesized

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	// jsii unpacks ~200 MB of modules: keep them in the project's ignored .cache (`make`
	// sets these for synth and deploy; `go test` may run without them).
	if os.Getenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT") == "" {
		if root, err := filepath.Abs(filepath.Join("..", "..", ".cache", "jsii")); err == nil {
			os.Setenv("JSII_RUNTIME_PACKAGE_CACHE_ROOT", root)
		}
	}
	if os.Getenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION") == "" {
		os.Setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
	}
	// jsii prepared its node process when the CDK packages were initialized, with the
	// environment of that moment; closing it (it has not started) makes the first call
	// below start one that sees the variables above.
	jsii.Close()
	defer closeJSII()
	var err error
	dev, err = synth(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "synthesize the dev stack:", err)
		return 1
	}
	defer dev.cleanup()
	withProviders, err = synth(providerContext)
	if err != nil {
		fmt.Fprintln(os.Stderr, "synthesize the stack with provider configuration:", err)
		return 1
	}
	defer withProviders.cleanup()
	return m.Run()
}

// withProviders is the stack with every provider context value set (providerContext),
// inbound mail on and an operator's SNS topic.
var withProviders *synthesized

// operatorTopic is an SNS topic of snsTopicArns, made outside the stack.
const operatorTopic = "arn:aws:sns:eu-west-1:123456789012:operator-ses"

const (
	appSecretParameter    = "/botplatform/staging/whatsapp-app-secret"
	verifyTokenParameter  = "botplatform-staging-whatsapp-verify-token" // a name without a hierarchy
	sdkKeyParameter       = "/botplatform/staging/customer-sdk/project-key"
	hubSpotSecretParam    = "/botplatform/staging/crm/hubspot-client-secret"
	salesforceSecretParam = "botplatform-staging-crm-salesforce-client-secret"
	openAIKeyParam        = "/botplatform/staging/ai/openai-api-key"
	anthropicKeyParam     = "/botplatform/staging/ai/anthropic-api-key"
	geminiKeyParam        = "botplatform-staging-ai-gemini-api-key"
	aiRoutes              = "fast=openai:gpt-4o-mini,gemini:gemini-2.0-flash"
	aiPrices              = "openai:gpt-4o-mini=150/600"
	metaSecretParam       = "/botplatform/staging/meta/app-secret"
	mailgunKeyParam       = "/botplatform/staging/mailgun-signing-key"
)

var providerContext = map[string]any{
	stack.CtxStage:                              "staging",
	stack.CtxPublicURL:                          "https://hooks.example.com/bots/",
	stack.CtxTelegramBaseURL:                    "https://telegram-proxy.example.com",
	stack.CtxVKBaseURL:                          "https://vk-proxy.example.com/method",
	stack.CtxWhatsAppBaseURL:                    "https://graph.example.com/v21.0",
	stack.CtxWhatsAppAppID:                      "1029384756",
	stack.CtxWhatsAppAppSecretParameter:         appSecretParameter,
	stack.CtxWhatsAppVerifyTokenParameter:       verifyTokenParameter,
	stack.CtxSDKKeyParameter:                    sdkKeyParameter,
	stack.CtxCRMHubSpotClientID:                 "6f1c2b7e-0d4a-4a8e-9a77-3c1f0e5b2d10",
	stack.CtxCRMHubSpotClientSecretParameter:    hubSpotSecretParam,
	stack.CtxCRMSalesforceClientID:              "3MVG9.consumer_key",
	stack.CtxCRMSalesforceClientSecretParameter: salesforceSecretParam,
	stack.CtxCRMSalesforceLoginBaseURL:          "https://test.salesforce.com",
	stack.CtxCRMDynamicsLoginBaseURL:            "https://login.microsoftonline.us",
	stack.CtxAIOpenAIKeyParameter:               openAIKeyParam,
	stack.CtxAIAnthropicKeyParameter:            anthropicKeyParam,
	stack.CtxAIGeminiKeyParameter:               geminiKeyParam,
	stack.CtxAIOpenAIBaseURL:                    "https://openai-proxy.example.com/",
	stack.CtxAIRoutes:                           aiRoutes,
	stack.CtxAIPrices:                           aiPrices,
	stack.CtxMetaAppID:                          "874512093651234",
	stack.CtxMetaAppSecretParameter:             metaSecretParam,
	stack.CtxMetaGraphBaseURL:                   "https://graph-proxy.example.com",
	stack.CtxMailgunSigningKeyParameter:         mailgunKeyParam,
	stack.CtxEmailRate:                          200,
	stack.CtxEmailInbound:                       "true", // as the CLI passes it
	stack.CtxSNSTopicARNs:                       operatorTopic,
}

type synthesized struct {
	stack   *stack.Stack
	tmpl    assertions.Template
	res     map[string]resource // logical id -> resource
	outputs map[string]any
	// routes are the resources of the nested route stack, with every reference to one of
	// its parameters replaced by the parent's expression the parameter is given.
	routes  map[string]resource
	cleanup func()
}

type resource struct {
	Type           string
	Properties     map[string]any
	DeletionPolicy string
}

// placeholderAssets writes a `bootstrap` for every Lambda, so no real build is needed.
func placeholderAssets() (string, error) {
	dir, err := os.MkdirTemp("", "infra-assets-")
	if err != nil {
		return "", err
	}
	names, err := stack.LambdaNames()
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(dir, n, "bootstrap"), []byte("placeholder "+n), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// synth synthesizes the stack with the given context over placeholder assets. A jsii
// failure panics; it comes back as an error.
func synth(context map[string]any) (s *synthesized, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("jsii: %v", r)
		}
	}()
	assets, err := placeholderAssets()
	if err != nil {
		return nil, err
	}
	out, err := os.MkdirTemp("", "infra-cdk-out-")
	if err != nil {
		return nil, err
	}
	cleanup := func() { os.RemoveAll(assets); os.RemoveAll(out) }
	ctx := map[string]any{
		"aws:cdk:bundling-stacks": []any{}, // skip bundling (there is none, but keep it so)
		stack.CtxAssetDir:         assets,
	}
	for k, v := range context {
		ctx[k] = v
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out), Context: &ctx})
	cfg, err := stack.ConfigFrom(func(key string) any { return app.Node().TryGetContext(jsii.String(key)) })
	if err != nil {
		cleanup()
		return nil, err
	}
	st, err := stack.New(app, "BotPlatform-"+cfg.Stage, cfg)
	if err != nil {
		cleanup()
		return nil, err
	}
	tmpl := assertions.Template_FromStack(st.Stack, nil)
	raw, err := json.Marshal(tmpl.ToJSON())
	if err != nil {
		cleanup()
		return nil, err
	}
	var doc struct {
		Resources map[string]resource
		Outputs   map[string]any
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		cleanup()
		return nil, err
	}
	routes, err := nestedResources(st.RouteStack, doc.Resources)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &synthesized{stack: st, tmpl: tmpl, res: doc.Resources, outputs: doc.Outputs, routes: routes, cleanup: cleanup}, nil
}

// nestedResources reads the template of a nested stack of the parent whose resources are
// given, and substitutes each {"Ref": parameter} with what the parent passes it.
func nestedResources(nested awscdk.NestedStack, parent map[string]resource) (map[string]resource, error) {
	raw, err := json.Marshal(assertions.Template_FromStack(nested, nil).ToJSON())
	if err != nil {
		return nil, err
	}
	var doc struct{ Resources map[string]resource }
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	var params map[string]any
	for _, r := range parent {
		if r.Type == "AWS::CloudFormation::Stack" {
			if params != nil {
				return nil, errors.New("more than one nested stack")
			}
			params, _ = r.Properties["Parameters"].(map[string]any)
		}
	}
	var subst func(v any) any
	subst = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			if name, ok := x["Ref"].(string); ok && len(x) == 1 {
				if p, ok := params[name]; ok {
					return p
				}
			}
			out := map[string]any{}
			for k, e := range x {
				out[k] = subst(e)
			}
			return out
		case []any:
			out := make([]any, len(x))
			for i, e := range x {
				out[i] = subst(e)
			}
			return out
		}
		return v
	}
	for id, r := range doc.Resources {
		r.Properties = subst(r.Properties).(map[string]any)
		doc.Resources[id] = r
	}
	return doc.Resources, nil
}

// check runs a jsii assertion: a failed one panics, which would end the test binary.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

// ofType returns the resources of a type by logical id.
func (s *synthesized) ofType(typ string) map[string]resource {
	out := map[string]resource{}
	for id, r := range s.res {
		if r.Type == typ {
			out[id] = r
		}
	}
	return out
}

// only returns the single resource of a type matching keep.
func (s *synthesized) only(t *testing.T, typ string, keep func(resource) bool) (string, resource) {
	t.Helper()
	var ids []string
	for id, r := range s.ofType(typ) {
		if keep == nil || keep(r) {
			ids = append(ids, id)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one %s, found %v", typ, ids)
	}
	return ids[0], s.res[ids[0]]
}

// refs returns the logical ids v refers to (Ref, Fn::GetAtt), anywhere inside it.
func refs(v any) []string {
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			if id, ok := x["Ref"].(string); ok && !strings.HasPrefix(id, "AWS::") {
				out = append(out, id)
			}
			if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) > 0 {
				out = append(out, ga[0].(string))
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	sort.Strings(out)
	return slices.Compact(out)
}

// ref returns the single logical id v refers to.
func ref(t *testing.T, v any) string {
	t.Helper()
	r := refs(v)
	if len(r) != 1 {
		t.Fatalf("want one reference in %v, found %v", v, r)
	}
	return r[0]
}

// functions maps each Lambda's name (botplatform-<stage>-<name>) to its logical id.
func (s *synthesized) functions(t *testing.T) map[string]string {
	t.Helper()
	prefix := stack.FunctionName(s.stack.Config.Stage, "")
	out := map[string]string{}
	for id, r := range s.ofType("AWS::Lambda::Function") {
		name, _ := r.Properties["FunctionName"].(string)
		if !strings.HasPrefix(name, prefix) {
			t.Fatalf("function %s has name %q", id, name)
		}
		out[strings.TrimPrefix(name, prefix)] = id
	}
	return out
}

// documented reads the OpenAPI document independently of the stack: route key -> family,
// and the set of public route keys.
func documented(t *testing.T) (map[string]string, []string) {
	t.Helper()
	families := map[string]string{}
	var public []string
	for _, raw := range docs.Documents {
		doc, err := openapi3.NewLoader().LoadFromData(raw)
		if err != nil {
			t.Fatal(err)
		}
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				key := method + " " + path
				families[key], _ = op.Extensions["x-family"].(string)
				gatewayPublic, _ := op.Extensions["x-gateway-public"].(bool)
				if op.Security != nil && len(*op.Security) == 0 || gatewayPublic {
					public = append(public, key)
				}
			}
		}
	}
	sort.Strings(public)
	return families, public
}

func TestEveryOperationHasItsRoute(t *testing.T) {
	families, public := documented(t)
	fns := dev.functions(t)
	authorizerID, _ := dev.only(t, "AWS::ApiGatewayV2::Authorizer", nil)
	routes := map[string]resource{}
	for id, r := range dev.routes {
		if r.Type == "AWS::ApiGatewayV2::Route" {
			routes[id] = r
		}
	}
	if n := len(dev.ofType("AWS::ApiGatewayV2::Route")); n != 0 {
		t.Errorf("%d routes in the parent stack, want all in the nested route stack", n)
	}
	if len(routes) != len(families) {
		t.Errorf("%d routes for %d operations", len(routes), len(families))
	}
	seen := map[string]bool{}
	var gotPublic []string
	for id, r := range routes {
		key, _ := r.Properties["RouteKey"].(string)
		family, ok := families[key]
		if !ok {
			t.Errorf("route %s: %q is no operation of the document", id, key)
			continue
		}
		if seen[key] {
			t.Errorf("route %q defined twice", key)
		}
		seen[key] = true

		integration := dev.routes[ref(t, r.Properties["Target"])]
		if integration.Type != "AWS::ApiGatewayV2::Integration" {
			t.Fatalf("route %q targets a %s", key, integration.Type)
		}
		if got := ref(t, integration.Properties["IntegrationUri"]); got != fns[family] {
			t.Errorf("route %q is integrated with %s, want the %s Lambda (%s)", key, got, family, fns[family])
		}
		if integration.Properties["IntegrationType"] != "AWS_PROXY" || integration.Properties["PayloadFormatVersion"] != "2.0" {
			t.Errorf("route %q: integration %v, want AWS_PROXY with payload 2.0", key, integration.Properties)
		}

		switch auth := r.Properties["AuthorizationType"]; {
		case slices.Contains(public, key):
			gotPublic = append(gotPublic, key)
			if auth != "NONE" || r.Properties["AuthorizerId"] != nil {
				t.Errorf("public route %q: authorization %v with authorizer %v, want NONE", key, auth, r.Properties["AuthorizerId"])
			}
		default:
			if auth != "CUSTOM" || ref(t, r.Properties["AuthorizerId"]) != authorizerID {
				t.Errorf("route %q: authorization %v with authorizer %v, want CUSTOM with %s", key, auth, r.Properties["AuthorizerId"], authorizerID)
			}
		}
	}
	sort.Strings(gotPublic)
	want := slices.Sorted(slices.Values(stack.PublicRoutes()))
	if !slices.Equal(gotPublic, want) || !slices.Equal(public, want) {
		t.Errorf("public routes: template %q, document %q, reviewed list %q", gotPublic, public, want)
	}
}

func TestAuthorizer(t *testing.T) {
	check(t, "authorizer", func() {
		dev.tmpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::Authorizer"), jsii.Number(1))
		dev.tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Authorizer"), map[string]any{
			"AuthorizerType":                 "REQUEST",
			"EnableSimpleResponses":          true,
			"AuthorizerPayloadFormatVersion": "2.0",
			"IdentitySource":                 []any{"$request.header.Authorization"},
			"AuthorizerResultTtlInSeconds":   30,
		})
	})
	_, a := dev.only(t, "AWS::ApiGatewayV2::Authorizer", nil)
	if got, want := refs(a.Properties["AuthorizerUri"]), []string{dev.functions(t)[stack.Authorizer]}; !slices.Equal(got, want) {
		t.Errorf("authorizer invokes %v, want the authorizer Lambda %v", got, want)
	}
}

func TestAPIStage(t *testing.T) {
	_, st := dev.only(t, "AWS::ApiGatewayV2::Stage", nil)
	if st.Properties["StageName"] != "$default" || st.Properties["AutoDeploy"] != true {
		t.Errorf("stage %v, want $default with auto-deploy", st.Properties)
	}
	settings, _ := st.Properties["DefaultRouteSettings"].(map[string]any)
	if settings["ThrottlingRateLimit"] != float64(stack.DefaultThrottleRateLimit) || settings["ThrottlingBurstLimit"] != float64(stack.DefaultThrottleBurstLimit) {
		t.Errorf("throttling %v", settings)
	}
	logs, _ := st.Properties["AccessLogSettings"].(map[string]any)
	if dev.res[ref(t, logs["DestinationArn"])].Type != "AWS::Logs::LogGroup" {
		t.Errorf("access logs go to %v", logs["DestinationArn"])
	}
	var format map[string]string
	if err := json.Unmarshal([]byte(logs["Format"].(string)), &format); err != nil || format["requestId"] == "" {
		t.Errorf("access log format %q is not one JSON object with the request id: %v", logs["Format"], err)
	}
	// The route's pattern, never the path: some paths carry a bearer capability (an
	// unsubscribe or tracking token).
	if format["routeKey"] != "$context.routeKey" {
		t.Errorf("access log format %q has no route key", logs["Format"])
	}
	for k, v := range format {
		if strings.Contains(v, "$context.path") || strings.Contains(v, "$context.requestOverride") {
			t.Errorf("access log field %s = %q: the path may hold a token", k, v)
		}
	}
}

func TestFunctions(t *testing.T) {
	fns := dev.functions(t)
	want, err := stack.LambdaNames()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families.All() {
		if !slices.Contains(want, f.Name) {
			t.Errorf("family %s has no Lambda", f.Name)
		}
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for n := range fns {
			if !yield(n) {
				return
			}
		}
	}); !slices.Equal(got, slices.Sorted(slices.Values(want))) {
		t.Errorf("Lambdas %v, want %v", got, want)
	}
	for name, id := range fns {
		p := dev.res[id].Properties
		if a, _ := p["Architectures"].([]any); len(a) != 1 || a[0] != "arm64" {
			t.Errorf("%s: architectures %v, want [arm64]", name, p["Architectures"])
		}
		if p["Runtime"] != "provided.al2023" || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v handler %v", name, p["Runtime"], p["Handler"])
		}
		if p["MemorySize"] != float64(256) {
			t.Errorf("%s: memory %v", name, p["MemorySize"])
		}
		if p["Timeout"] != stack.Timeout(name).Seconds() {
			t.Errorf("%s: timeout %v, want %v", name, p["Timeout"], stack.Timeout(name))
		}
		logging, _ := p["LoggingConfig"].(map[string]any)
		lg := dev.res[ref(t, logging["LogGroup"])]
		if lg.Type != "AWS::Logs::LogGroup" || lg.Properties["RetentionInDays"] != float64(30) {
			t.Errorf("%s: log group %v", name, lg)
		}
	}
	for name, timeout := range map[string]float64{"pats": 10, stack.Authorizer: 10, stack.AuditSink: 60, stack.Jobs: 300} {
		if got := dev.res[fns[name]].Properties["Timeout"]; got != timeout {
			t.Errorf("%s: timeout %v, want %v", name, got, timeout)
		}
	}
}

// The environment contract the Lambda mains read, spelled out here on purpose: a change to
// Access or Settings that changes what a main receives fails this test too. With default
// context; TestEnvironmentContractWithProviders has the provider configuration.
func TestEnvironmentContract(t *testing.T) {
	base := []string{"LOG_LEVEL", "STAGE"}
	want := map[string][]string{
		"public":         base,
		"pats":           append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"bots":           append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "TABLE_NAME"}, base...),
		"auditlog":       append([]string{"CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"requestlogs":    append([]string{"CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"collections":    append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "TABLE_NAME"}, base...),
		"stats":          append([]string{"CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"reactions":      append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"subscribers":    append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "TABLE_NAME"}, base...),
		"channels":       append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "PUBLIC_URL", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		stack.Authorizer: append([]string{"TABLE_NAME"}, base...),
		stack.AuditSink:  append([]string{"TABLE_NAME"}, base...),
		"webhooks":       append([]string{"CURSOR_KEY_ID", "JOBS_QUEUE_URL", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		"runtime":        append([]string{"CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"content":        append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "TABLE_NAME"}, base...),
		"popups":         append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		// The SES events webhook and the SES inbound route accept the stack's topics
		// (SNS_TOPIC_ARNS); without inbound mail there is no bucket to read.
		"emaildomains":   append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "SNS_TOPIC_ARNS", "TABLE_NAME"}, base...),
		"emailcampaigns": append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "PUBLIC_URL", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "TABLE_NAME"}, base...),
		"emailevents":    append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "PUBLIC_URL", "SNS_TOPIC_ARNS", "TABLE_NAME"}, base...),
		"events":         append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"funnels":        append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"replay":         append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"flowintel":      append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "TABLE_NAME"}, base...),
		"segments":       append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"ai":             append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		"copilot":        append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		"playbooks":      append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "TABLE_NAME"}, base...),
		"onboarding":     append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"broadcasts":     append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		"experiments":    append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "TABLE_NAME"}, base...),
		"webpush":        append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		"customersdk":    append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		// Both sealers: the Meta tokens (CRM encryption context) and the channels it attaches.
		"meta": append([]string{"AUDIT_BUS_NAME", "CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "PUBLIC_URL", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		// The CRM credentials' sealer only (the key under the CRM encryption context).
		"crm": append([]string{"AUDIT_BUS_NAME", "CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_STATE_MACHINE_ARN", "PUBLIC_URL", "TABLE_NAME"}, base...),
		"sdk": append([]string{"CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME"}, base...),
		"mcp": append([]string{"AUDIT_BUS_NAME", "CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "PUBLIC_URL", "TABLE_NAME"}, base...),
		// Both sealers: channel credentials (the runtime's sends) and CRM credentials.
		stack.Jobs: append([]string{"CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "JOBS_STATE_MACHINE_ARN", "PUBLIC_URL", "SCHEDULER_ROLE_ARN", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "TABLE_NAME"}, base...),
	}
	checkEnvironment(t, dev, want)

	// PUBLIC_URL defaults to the HTTP API's endpoint, resolved at deploy time.
	apiID, _ := dev.only(t, "AWS::ApiGatewayV2::Api", nil)
	for _, name := range []string{"channels", stack.Jobs} {
		got := dev.env(t, name)["PUBLIC_URL"]
		if ga, _ := got.(map[string]any)["Fn::GetAtt"].([]any); len(ga) != 2 || ga[0] != apiID || ga[1] != "ApiEndpoint" {
			t.Errorf("%s: PUBLIC_URL %v, want the API's endpoint", name, got)
		}
	}
}

// With every provider context value set: the settings go to the Lambdas that use them, and
// of the secrets only the parameters' names: the WhatsApp ones to the webhooks Lambda alone,
// the customer SDK's project-key secret to the customersdk and sdk Lambdas alone, the CRM
// client secrets to the crm Lambda, the MCP Lambda (its CRM read tools refresh tokens) and
// the jobs Lambda (its CRM steps do) alone, the managed AI keys (and the AI family's base
// URLs, routes and prices) to the ai and copilot Lambdas alone.
func TestEnvironmentContractWithProviders(t *testing.T) {
	base := []string{"LOG_LEVEL", "STAGE"}
	urls := []string{"PUBLIC_URL", "TELEGRAM_BASE_URL", "VK_BASE_URL", "WHATSAPP_BASE_URL"}
	want := map[string][]string{}
	for name, vars := range map[string][]string{
		"channels": append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME", "WHATSAPP_APP_ID"}, urls...),
		"webhooks": {"CURSOR_KEY_ID", "JOBS_QUEUE_URL", "SECRETS_KEY_ID", "TABLE_NAME",
			"WHATSAPP_APP_SECRET_PARAMETER", "WHATSAPP_VERIFY_TOKEN_PARAMETER"},
		stack.Jobs: append([]string{"CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "JOBS_STATE_MACHINE_ARN", "SCHEDULER_ROLE_ARN", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "TABLE_NAME",
			"CRM_HUBSPOT_CLIENT_ID", "CRM_HUBSPOT_CLIENT_SECRET_PARAMETER", "CRM_SALESFORCE_CLIENT_ID",
			"CRM_SALESFORCE_CLIENT_SECRET_PARAMETER", "CRM_SALESFORCE_LOGIN_BASE_URL", "CRM_DYNAMICS_LOGIN_BASE_URL",
			"META_APP_ID", "META_APP_SECRET_PARAMETER", "META_GRAPH_BASE_URL", "EMAIL_RATE"}, urls...),
		// Inbound mail on: the SES inbound route reads the bucket the receipt rule stores in.
		"emaildomains": {"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "SNS_TOPIC_ARNS", "TABLE_NAME",
			"INBOUND_MAIL_BUCKET"},
		// The deployment's email rate, to the campaigns' service and their send steps.
		"emailcampaigns": {"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "PUBLIC_URL", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "TABLE_NAME", "EMAIL_RATE"},
		// The Mailgun signing key's parameter's name, to the Lambda that verifies Mailgun's
		// webhooks alone.
		"emailevents": {"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "PUBLIC_URL", "SNS_TOPIC_ARNS", "TABLE_NAME", "MAILGUN_SIGNING_KEY_PARAMETER"},
		// The Facebook app (its secret's parameter's name) and endpoints, and the WhatsApp
		// adapter's configuration for the numbers it attaches.
		"meta": {"AUDIT_BUS_NAME", "CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "PUBLIC_URL", "SECRETS_KEY_ID", "TABLE_NAME",
			"WHATSAPP_BASE_URL", "WHATSAPP_APP_ID", "META_APP_ID", "META_APP_SECRET_PARAMETER", "META_GRAPH_BASE_URL"},
		// A test send of a message goes out through the providers' APIs.
		"content":     append([]string{"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "SES_CONFIGURATION_SET", "TABLE_NAME"}, urls[1:]...),
		"customersdk": {"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SDK_KEY_PARAMETER", "SECRETS_KEY_ID", "TABLE_NAME"},
		"sdk":         {"CURSOR_KEY_ID", "SDK_KEY_PARAMETER", "SECRETS_KEY_ID", "TABLE_NAME"},
		// The CRM OAuth applications: the client ids and the overridden endpoints, and the
		// names of the client secrets' parameters, to the crm, MCP and jobs Lambdas alone.
		"crm": {"AUDIT_BUS_NAME", "CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_STATE_MACHINE_ARN", "PUBLIC_URL", "TABLE_NAME",
			"CRM_HUBSPOT_CLIENT_ID", "CRM_HUBSPOT_CLIENT_SECRET_PARAMETER", "CRM_SALESFORCE_CLIENT_ID",
			"CRM_SALESFORCE_CLIENT_SECRET_PARAMETER", "CRM_SALESFORCE_LOGIN_BASE_URL", "CRM_DYNAMICS_LOGIN_BASE_URL"},
		"mcp": {"AUDIT_BUS_NAME", "CRM_SECRETS_KEY_ID", "CURSOR_KEY_ID", "JOBS_QUEUE_URL", "PUBLIC_URL", "TABLE_NAME",
			"CRM_HUBSPOT_CLIENT_ID", "CRM_HUBSPOT_CLIENT_SECRET_PARAMETER", "CRM_SALESFORCE_CLIENT_ID",
			"CRM_SALESFORCE_CLIENT_SECRET_PARAMETER", "CRM_SALESFORCE_LOGIN_BASE_URL", "CRM_DYNAMICS_LOGIN_BASE_URL"},
		// The managed AI keys' parameters' names, and the configured endpoint, routes and
		// prices (the Anthropic and Gemini base URLs are not configured: not set).
		"ai": {"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME",
			"AI_OPENAI_API_KEY_PARAMETER", "AI_ANTHROPIC_API_KEY_PARAMETER", "AI_GEMINI_API_KEY_PARAMETER",
			"AI_OPENAI_BASE_URL", "AI_ROUTES", "AI_PRICES"},
		// Copilot proposals are generated through managed AI in process: the same.
		"copilot": {"AUDIT_BUS_NAME", "CURSOR_KEY_ID", "SECRETS_KEY_ID", "TABLE_NAME",
			"AI_OPENAI_API_KEY_PARAMETER", "AI_ANTHROPIC_API_KEY_PARAMETER", "AI_GEMINI_API_KEY_PARAMETER",
			"AI_OPENAI_BASE_URL", "AI_ROUTES", "AI_PRICES"},
	} {
		want[name] = append(vars, base...)
	}
	// Every other Lambda is as with default context.
	for name := range withProviders.functions(t) {
		if _, ok := want[name]; !ok {
			want[name] = stack.EnvNames(name, dev.stack.Config)
		}
	}
	checkEnvironment(t, withProviders, want)

	// The CRM family's configuration, in its Lambda, in the MCP Lambda (its read tools) and
	// in the jobs Lambda (its steps).
	crmVars := map[string]string{"PUBLIC_URL": "https://hooks.example.com/bots", "CRM_HUBSPOT_CLIENT_ID": "6f1c2b7e-0d4a-4a8e-9a77-3c1f0e5b2d10",
		"CRM_HUBSPOT_CLIENT_SECRET_PARAMETER": hubSpotSecretParam, "CRM_SALESFORCE_CLIENT_ID": "3MVG9.consumer_key",
		"CRM_SALESFORCE_CLIENT_SECRET_PARAMETER": salesforceSecretParam,
		"CRM_SALESFORCE_LOGIN_BASE_URL":          "https://test.salesforce.com", "CRM_DYNAMICS_LOGIN_BASE_URL": "https://login.microsoftonline.us"}
	jobsVars := maps.Clone(crmVars)
	jobsVars["TELEGRAM_BASE_URL"] = "https://telegram-proxy.example.com"
	metaVars := map[string]string{"META_APP_ID": "874512093651234", "META_APP_SECRET_PARAMETER": metaSecretParam,
		"META_GRAPH_BASE_URL": "https://graph-proxy.example.com"}
	maps.Copy(jobsVars, metaVars)
	jobsVars["EMAIL_RATE"] = "200"
	for name, vars := range map[string]map[string]string{
		"channels": {"PUBLIC_URL": "https://hooks.example.com/bots", "TELEGRAM_BASE_URL": "https://telegram-proxy.example.com",
			"VK_BASE_URL": "https://vk-proxy.example.com/method", "WHATSAPP_BASE_URL": "https://graph.example.com/v21.0",
			"WHATSAPP_APP_ID": "1029384756"},
		stack.Jobs:       jobsVars,
		"webhooks":       {"WHATSAPP_APP_SECRET_PARAMETER": appSecretParameter, "WHATSAPP_VERIFY_TOKEN_PARAMETER": verifyTokenParameter},
		"customersdk":    {"SDK_KEY_PARAMETER": sdkKeyParameter},
		"sdk":            {"SDK_KEY_PARAMETER": sdkKeyParameter},
		"crm":            crmVars,
		"mcp":            crmVars,
		"meta":           metaVars,
		"emailcampaigns": {"EMAIL_RATE": "200"},
		"emailevents":    {"MAILGUN_SIGNING_KEY_PARAMETER": mailgunKeyParam},
		"ai": {"AI_OPENAI_API_KEY_PARAMETER": openAIKeyParam, "AI_ANTHROPIC_API_KEY_PARAMETER": anthropicKeyParam,
			"AI_GEMINI_API_KEY_PARAMETER": geminiKeyParam, "AI_OPENAI_BASE_URL": "https://openai-proxy.example.com",
			"AI_ROUTES": aiRoutes, "AI_PRICES": aiPrices},
		"copilot": {"AI_OPENAI_API_KEY_PARAMETER": openAIKeyParam, "AI_ANTHROPIC_API_KEY_PARAMETER": anthropicKeyParam,
			"AI_GEMINI_API_KEY_PARAMETER": geminiKeyParam, "AI_OPENAI_BASE_URL": "https://openai-proxy.example.com",
			"AI_ROUTES": aiRoutes, "AI_PRICES": aiPrices},
	} {
		env := withProviders.env(t, name)
		for k, v := range vars {
			if env[k] != v {
				t.Errorf("%s: %s = %v, want %q", name, k, env[k], v)
			}
		}
	}
}

// env returns the environment variables of the Lambda called name.
func (s *synthesized) env(t *testing.T, name string) map[string]any {
	t.Helper()
	env, _ := s.res[s.functions(t)[name]].Properties["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	return vars
}

// checkEnvironment holds every Lambda's variables to want and to stack.EnvNames.
func checkEnvironment(t *testing.T, s *synthesized, want map[string][]string) {
	t.Helper()
	for name := range s.functions(t) {
		vars := s.env(t, name)
		var got []string
		for k := range vars {
			got = append(got, k)
		}
		sort.Strings(got)
		w, ok := want[name]
		if !ok {
			t.Errorf("%s: a new Lambda; add its environment here", name)
			continue
		}
		if !slices.Equal(got, slices.Sorted(slices.Values(w))) {
			t.Errorf("%s: environment %v, want %v", name, got, slices.Sorted(slices.Values(w)))
		}
		names := stack.EnvNames(name, s.stack.Config)
		if !slices.Equal(got, slices.Sorted(slices.Values(names))) {
			t.Errorf("%s: environment %v, stack.EnvNames says %v", name, got, names)
		}
		if vars["STAGE"] != s.stack.Config.Stage || vars["LOG_LEVEL"] != "info" {
			t.Errorf("%s: STAGE %v LOG_LEVEL %v", name, vars["STAGE"], vars["LOG_LEVEL"])
		}
	}
}

func TestTable(t *testing.T) {
	check(t, "table", func() {
		dev.tmpl.ResourceCountIs(jsii.String("AWS::DynamoDB::Table"), jsii.Number(1))
		index := func(name string) map[string]any {
			return map[string]any{
				"IndexName": name,
				"KeySchema": []any{
					map[string]any{"AttributeName": name + "PK", "KeyType": "HASH"},
					map[string]any{"AttributeName": name + "SK", "KeyType": "RANGE"},
				},
				"Projection": map[string]any{"ProjectionType": "ALL"},
			}
		}
		dev.tmpl.HasResourceProperties(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"KeySchema": []any{
				map[string]any{"AttributeName": "PK", "KeyType": "HASH"},
				map[string]any{"AttributeName": "SK", "KeyType": "RANGE"},
			},
			"BillingMode":                      "PAY_PER_REQUEST",
			"PointInTimeRecoverySpecification": map[string]any{"PointInTimeRecoveryEnabled": true},
			"TimeToLiveSpecification":          map[string]any{"AttributeName": "expires", "Enabled": true},
			"GlobalSecondaryIndexes":           []any{index("GSI1"), index("GSI2")},
			"SSESpecification":                 map[string]any{"SSEEnabled": true},
			"DeletionProtectionEnabled":        false,
		})
		dev.tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{"DeletionPolicy": "Delete"})
	})
}

// dlqs returns every queue used as a dead-letter queue: a redrive target, an EventBridge
// target's dead-letter config, a Lambda on-failure destination.
func (s *synthesized) dlqs(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for _, q := range s.ofType("AWS::SQS::Queue") {
		if rp, ok := q.Properties["RedrivePolicy"].(map[string]any); ok {
			out[ref(t, rp["deadLetterTargetArn"])] = true
		}
	}
	for _, rule := range s.ofType("AWS::Events::Rule") {
		targets, _ := rule.Properties["Targets"].([]any)
		for _, tg := range targets {
			if dl, ok := tg.(map[string]any)["DeadLetterConfig"]; ok {
				out[ref(t, dl)] = true
			}
		}
	}
	for _, c := range s.ofType("AWS::Lambda::EventInvokeConfig") {
		out[ref(t, c.Properties["DestinationConfig"])] = true
	}
	return out
}

// alarmed returns the logical ids of the queues with an alarm on a visible message.
func (s *synthesized) alarmed(t *testing.T) map[string]bool {
	out := map[string]bool{}
	for _, a := range s.ofType("AWS::CloudWatch::Alarm") {
		p := a.Properties
		if p["MetricName"] != "ApproximateNumberOfMessagesVisible" {
			continue
		}
		if p["Threshold"] != float64(0) || p["ComparisonOperator"] != "GreaterThanThreshold" || len(refs(p["AlarmActions"])) == 0 {
			t.Errorf("queue alarm %v does not fire on one message", p)
		}
		out[ref(t, p["Dimensions"])] = true
	}
	return out
}

func TestQueuesHaveDeadLettersAndAlarms(t *testing.T) {
	dlqs, alarmed := dev.dlqs(t), dev.alarmed(t)
	queues := dev.ofType("AWS::SQS::Queue")
	if len(queues) < 3 {
		t.Errorf("%d queues, want the jobs queue and two dead-letter queues", len(queues))
	}
	for id, q := range queues {
		if q.Properties["SqsManagedSseEnabled"] != true {
			t.Errorf("queue %s is not encrypted with SQS-managed keys", id)
		}
		if dlqs[id] {
			if q.Properties["MessageRetentionPeriod"] != float64(14*24*3600) {
				t.Errorf("dead-letter queue %s keeps messages %v s, want 14 days", id, q.Properties["MessageRetentionPeriod"])
			}
			if !alarmed[id] {
				t.Errorf("dead-letter queue %s has no depth alarm", id)
			}
			continue
		}
		rp, ok := q.Properties["RedrivePolicy"].(map[string]any)
		if !ok || rp["maxReceiveCount"] != float64(5) {
			t.Errorf("queue %s has redrive policy %v, want a DLQ after 5 receives", id, q.Properties["RedrivePolicy"])
		}
	}
	_, esm := dev.only(t, "AWS::Lambda::EventSourceMapping", nil)
	jobsQueue := ref(t, esm.Properties["EventSourceArn"])
	if vt := queues[jobsQueue].Properties["VisibilityTimeout"].(float64); vt < 6*stack.JobsTimeout.Seconds() {
		t.Errorf("jobs queue visibility timeout %v s, want at least 6 x %v", vt, stack.JobsTimeout)
	}
}

func TestJobsEventSource(t *testing.T) {
	_, esm := dev.only(t, "AWS::Lambda::EventSourceMapping", nil)
	p := esm.Properties
	if ref(t, p["FunctionName"]) != dev.functions(t)[stack.Jobs] {
		t.Errorf("event source feeds %v, want the jobs Lambda", p["FunctionName"])
	}
	if p["BatchSize"] != float64(10) || !slices.Equal(p["FunctionResponseTypes"].([]any), []any{"ReportBatchItemFailures"}) {
		t.Errorf("event source %v, want batches of 10 with partial failures", p)
	}
	q := dev.res[ref(t, p["EventSourceArn"])]
	if q.Type != "AWS::SQS::Queue" || q.Properties["RedrivePolicy"] == nil {
		t.Errorf("event source reads %v, want the jobs queue", p["EventSourceArn"])
	}
}

// definition renders a state machine's DefinitionString with its tokens as "TOKEN".
func definition(t *testing.T, v any) map[string]any {
	t.Helper()
	var sb strings.Builder
	switch d := v.(type) {
	case string:
		sb.WriteString(d)
	case map[string]any:
		parts := d["Fn::Join"].([]any)[1].([]any)
		for _, p := range parts {
			if s, ok := p.(string); ok {
				sb.WriteString(s)
			} else {
				sb.WriteString("TOKEN")
			}
		}
	}
	var def map[string]any
	if err := json.Unmarshal([]byte(sb.String()), &def); err != nil {
		t.Fatalf("definition %s: %v", sb.String(), err)
	}
	return def
}

func TestJobsStateMachine(t *testing.T) {
	_, sm := dev.only(t, "AWS::StepFunctions::StateMachine", nil)
	if sm.Properties["StateMachineType"] != "STANDARD" {
		t.Errorf("state machine type %v", sm.Properties["StateMachineType"])
	}
	lc, _ := sm.Properties["LoggingConfiguration"].(map[string]any)
	if lc["Level"] != "ALL" || lc["IncludeExecutionData"] != false || len(refs(lc["Destinations"])) != 1 {
		t.Errorf("logging %v", lc)
	}
	def := definition(t, sm.Properties["DefinitionString"])
	states := def["States"].(map[string]any)
	state := func(name string) map[string]any {
		s, ok := states[name].(map[string]any)
		if !ok {
			t.Fatalf("no state %q in %v", name, def)
		}
		return s
	}
	step := state(def["StartAt"].(string))
	if step["Type"] != "Task" || step["OutputPath"] != "$.Payload" {
		t.Errorf("first state %v, want the Lambda task returning the next job state", step)
	}
	if params := step["Parameters"].(map[string]any); params["Payload.$"] != "$" {
		t.Errorf("the task sends %v, want the whole job state", params)
	}
	retry := step["Retry"].([]any)[0].(map[string]any)
	if !slices.Contains(retry["ErrorEquals"].([]any), "Lambda.ServiceException") || retry["BackoffRate"] != float64(2) {
		t.Errorf("first retrier %v, want Lambda service errors with backoff", retry)
	}
	catch := step["Catch"].([]any)[0].(map[string]any)
	if state(catch["Next"].(string))["Type"] != "Fail" {
		t.Errorf("catch goes to %v, want a Fail state", catch["Next"])
	}
	choice := state(step["Next"].(string))
	when := choice["Choices"].([]any)[0].(map[string]any)
	if choice["Type"] != "Choice" || when["Variable"] != "$.done" || when["BooleanEquals"] != true || state(when["Next"].(string))["Type"] != "Succeed" {
		t.Errorf("after the step %v, want a Choice on $.done ending in Succeed", choice)
	}
	wait := state(choice["Default"].(string))
	if wait["Type"] != "Wait" || wait["Next"] != def["StartAt"] {
		t.Errorf("not done goes to %v, want a Wait looping back to the step", wait)
	}
}

func TestAudit(t *testing.T) {
	busID, bus := dev.only(t, "AWS::Events::EventBus", nil)
	if bus.Properties["Name"] != "botplatform-dev" {
		t.Errorf("bus name %v", bus.Properties["Name"])
	}
	_, rule := dev.only(t, "AWS::Events::Rule", nil)
	p := rule.Properties
	if ref(t, p["EventBusName"]) != busID {
		t.Errorf("rule is on %v", p["EventBusName"])
	}
	pattern := p["EventPattern"].(map[string]any)
	if !slices.Equal(pattern["source"].([]any), []any{"botplatform.api"}) || !slices.Equal(pattern["detail-type"].([]any), []any{"audit.event"}) {
		t.Errorf("rule pattern %v", pattern)
	}
	targets := p["Targets"].([]any)
	target := targets[0].(map[string]any)
	if len(targets) != 1 || ref(t, target["Arn"]) != dev.functions(t)[stack.AuditSink] {
		t.Errorf("rule targets %v, want the audit sink", targets)
	}
	if target["DeadLetterConfig"] == nil || target["RetryPolicy"] == nil {
		t.Errorf("rule target %v has no DLQ or retry policy", target)
	}
	_, archive := dev.only(t, "AWS::Events::Archive", nil)
	if ref(t, archive.Properties["SourceArn"]) != busID || archive.Properties["RetentionDays"] != float64(365) {
		t.Errorf("archive %v", archive.Properties)
	}
	_, async := dev.only(t, "AWS::Lambda::EventInvokeConfig", nil)
	if ref(t, async.Properties["FunctionName"]) != dev.functions(t)[stack.AuditSink] ||
		ref(t, async.Properties["DestinationConfig"]) != ref(t, target["DeadLetterConfig"]) {
		t.Errorf("audit sink failures go to %v, want the audit DLQ", async.Properties)
	}
}

func TestKeys(t *testing.T) {
	check(t, "keys", func() {
		dev.tmpl.ResourceCountIs(jsii.String("AWS::KMS::Key"), jsii.Number(2))
		dev.tmpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
			"KeySpec": "SYMMETRIC_DEFAULT", "KeyUsage": "ENCRYPT_DECRYPT", "EnableKeyRotation": true,
		})
		dev.tmpl.HasResourceProperties(jsii.String("AWS::KMS::Key"), map[string]any{
			"KeySpec": "HMAC_256", "KeyUsage": "GENERATE_VERIFY_MAC",
		})
		dev.tmpl.HasResourceProperties(jsii.String("AWS::KMS::Alias"), map[string]any{"AliasName": "alias/botplatform-dev-secrets"})
		dev.tmpl.HasResourceProperties(jsii.String("AWS::KMS::Alias"), map[string]any{"AliasName": "alias/botplatform-dev-cursors"})
	})
}

// statements returns every policy statement in the template: IAM policies, roles' inline
// and trust policies, key policies, queue policies.
func statements(v any) []map[string]any {
	var out []map[string]any
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			switch st := x["Statement"].(type) {
			case []any:
				for _, s := range st {
					out = append(out, s.(map[string]any))
				}
			case map[string]any:
				out = append(out, st)
			}
			for _, e := range x {
				walk(e)
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return out
}

func actions(s map[string]any) ([]string, bool) {
	switch a := s["Action"].(type) {
	case string:
		return []string{a}, true
	case []any:
		var out []string
		for _, x := range a {
			str, ok := x.(string)
			if !ok {
				return nil, false
			}
			out = append(out, str)
		}
		return out, true
	}
	return nil, false
}

// No statement allows a wildcard action. A Deny may have one: it gives nothing (the inbound
// bucket's denies every s3 action without TLS).
func TestNoWildcardActions(t *testing.T) {
	for name, s := range map[string]*synthesized{"default": dev, "providers": withProviders} {
		all := map[string]any{}
		for id, r := range s.res {
			all[id] = r.Properties
		}
		sts := statements(all)
		if len(sts) < 10 {
			t.Fatalf("%s: found only %d statements", name, len(sts))
		}
		for _, st := range sts {
			if _, ok := st["NotAction"]; ok {
				t.Errorf("%s: statement %v uses NotAction", name, st)
			}
			acts, ok := actions(st)
			if !ok {
				t.Errorf("%s: statement %v: actions are not plain strings", name, st)
			}
			if st["Effect"] == "Deny" {
				continue
			}
			for _, a := range acts {
				if strings.Contains(a, "*") {
					t.Errorf("%s: statement %v: wildcard action %q", name, st, a)
				}
			}
		}
	}
}

// Each role's synthesized policy is exactly its row of stack.Access (as the configuration
// deploys it: stack.AccessFor): the same actions on the same resources under the same
// conditions, nothing more, and no managed policy. With default context and with every
// provider context value set. (The conditions of the parameters' key grant are the stack's,
// held by TestProviderSecretsLeastPrivilege.)
func TestRolesMatchAccessTable(t *testing.T) {
	t.Run("default", func(t *testing.T) { checkRoles(t, dev) })
	t.Run("providers", func(t *testing.T) { checkRoles(t, withProviders) })
}

// render writes an ARN or other template value as a string: references as ${id} or
// ${id.Attribute}, joins joined.
func render(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]any:
		if id, ok := x["Ref"].(string); ok {
			return "${" + id + "}"
		}
		if ga, ok := x["Fn::GetAtt"].([]any); ok && len(ga) == 2 {
			return fmt.Sprintf("${%v.%v}", ga[0], ga[1])
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			var parts []string
			for _, p := range j[1].([]any) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, j[0].(string))
		}
	case []any:
		var parts []string
		for _, p := range x {
			parts = append(parts, render(p))
		}
		return strings.Join(parts, "+")
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// parameterARN is the ARN the stack must grant for an SSM parameter name.
func parameterARN(name string) string {
	return "arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/" + strings.TrimPrefix(name, "/")
}

// parameterKeys is the resource of the kms:Decrypt grant for SecureString parameters.
const parameterKeys = "arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/*"

func checkRoles(t *testing.T, s *synthesized) {
	fns := s.functions(t)
	roleOf := map[string]string{} // role logical id -> Access key
	logGroupOf := map[string]string{}
	for name, id := range fns {
		p := s.res[id].Properties
		roleOf[ref(t, p["Role"])] = name
		logGroupOf[name] = ref(t, p["LoggingConfig"])
	}
	_, sm := s.only(t, "AWS::StepFunctions::StateMachine", nil)
	roleOf[ref(t, sm.Properties["RoleArn"])] = stack.StateMachineRole
	_, sweep := s.only(t, "AWS::Scheduler::Schedule", nil)
	roleOf[ref(t, sweep.Properties["Target"].(map[string]any)["RoleArn"])] = stack.OutboxScheduleRole
	queueScheduleRole := ""
	for id := range s.ofType("AWS::IAM::Role") {
		if strings.HasPrefix(id, "QueueScheduleRole") {
			queueScheduleRole = id
		}
	}
	if queueScheduleRole == "" {
		t.Fatal("no role for the schedules of long waits")
	}
	roleOf[queueScheduleRole] = stack.QueueScheduleRole

	keys := map[string]string{}
	for id, k := range s.ofType("AWS::KMS::Key") {
		keys[k.Properties["KeySpec"].(string)] = id
	}
	tableID, _ := s.only(t, "AWS::DynamoDB::Table", nil)
	busID, _ := s.only(t, "AWS::Events::EventBus", nil)
	_, machine := s.only(t, "AWS::StepFunctions::StateMachine", nil)
	// Grants on the machine name it by its fixed name: hold the machine to it.
	if want := stack.FunctionName(s.stack.Config.Stage, "jobs"); machine.Properties["StateMachineName"] != want {
		t.Errorf("the jobs state machine is named %v, want %s", machine.Properties["StateMachineName"], want)
	}
	jobsQueue, auditDLQ := "", ""
	for id, q := range s.ofType("AWS::SQS::Queue") {
		if q.Properties["RedrivePolicy"] != nil {
			jobsQueue = id
		}
	}
	_, rule := s.only(t, "AWS::Events::Rule", nil)
	auditDLQ = ref(t, rule.Properties["Targets"].([]any)[0].(map[string]any)["DeadLetterConfig"])
	cfg := s.stack.Config
	resourceIDs := func(name string, r stack.Resource) string {
		switch r {
		case stack.Table:
			return tableID
		case stack.Bus:
			return busID
		case stack.CursorKey:
			return keys["HMAC_256"]
		case stack.SecretsKey:
			return keys["SYMMETRIC_DEFAULT"]
		case stack.JobsQueue:
			return jobsQueue
		case stack.JobsStateMachine:
			// By its fixed name (the jobs Lambda starts executions of the machine that
			// invokes it); the machine is held to that name below.
			return "arn:${AWS::Partition}:states:${AWS::Region}:${AWS::AccountId}:stateMachine:" + stack.FunctionName(cfg.Stage, "jobs")
		case stack.AuditDLQ:
			return auditDLQ
		case stack.JobsFunction:
			return fns[stack.Jobs]
		case stack.OwnLogGroup:
			return logGroupOf[name]
		case stack.NoResource, stack.SESAccount:
			return "*"
		case stack.WhatsAppAppSecretParameter:
			return parameterARN(cfg.WhatsAppAppSecretParameter)
		case stack.WhatsAppVerifyTokenParameter:
			return parameterARN(cfg.WhatsAppVerifyTokenParameter)
		case stack.SDKKeyParameter:
			return parameterARN(cfg.SDKKeyParameter)
		case stack.CRMHubSpotClientSecretParameter:
			return parameterARN(cfg.CRMHubSpotClientSecretParameter)
		case stack.CRMSalesforceClientSecretParameter:
			return parameterARN(cfg.CRMSalesforceClientSecretParameter)
		case stack.AIOpenAIKeyParameter:
			return parameterARN(cfg.AIOpenAIKeyParameter)
		case stack.AIAnthropicKeyParameter:
			return parameterARN(cfg.AIAnthropicKeyParameter)
		case stack.AIGeminiKeyParameter:
			return parameterARN(cfg.AIGeminiKeyParameter)
		case stack.MetaAppSecretParameter:
			return parameterARN(cfg.MetaAppSecretParameter)
		case stack.MailgunSigningKeyParameter:
			return parameterARN(cfg.MailgunSigningKeyParameter)
		case stack.ParameterKey:
			return parameterKeys
		case stack.Schedules:
			return "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/default/q-*"
		case stack.ScheduleRole:
			return queueScheduleRole
		case stack.EmailIdentities:
			// The account's identities (an ARN with no resource of the stack) and the
			// stack's configuration set.
			id, _ := s.only(t, "AWS::SES::ConfigurationSet", nil)
			return id
		case stack.InboundMailBucket:
			// The bucket and its objects (TestEmailInbound holds the ARNs).
			id, _ := s.only(t, "AWS::S3::Bucket", nil)
			return id
		}
		t.Fatalf("unknown resource %d", r)
		return ""
	}
	grant := func(acts []string, on, cond string) string {
		g := strings.Join(slices.Sorted(slices.Values(acts)), ",") + " on " + on
		if cond != "" {
			g += " if " + cond
		}
		return g
	}

	got := map[string][]string{}
	for id, pol := range s.ofType("AWS::IAM::Policy") {
		roles := refs(pol.Properties["Roles"])
		if len(roles) != 1 || roleOf[roles[0]] == "" {
			t.Errorf("policy %s is attached to %v, not to one known role", id, roles)
			continue
		}
		for _, st := range statements(pol.Properties["PolicyDocument"]) {
			acts, _ := actions(st)
			on := strings.Join(refs(st["Resource"]), "+")
			switch {
			case st["Resource"] == "*":
				on = "*"
			case on == "": // an ARN of the account and region, not of a resource of the stack
				on = render(st["Resource"])
			}
			if st["Effect"] != "Allow" {
				t.Errorf("policy %s: statement %v", id, st)
			}
			cond := ""
			if c, ok := st["Condition"].(map[string]any); ok && on != parameterKeys {
				cond = conditionOf(c)
			}
			got[roleOf[roles[0]]] = append(got[roleOf[roles[0]]], grant(acts, on, cond))
		}
	}
	for id, r := range s.ofType("AWS::IAM::Role") {
		if r.Properties["Policies"] != nil || r.Properties["ManagedPolicyArns"] != nil {
			t.Errorf("role %s has inline or managed policies: %v", id, r.Properties)
		}
	}
	for name := range stack.Access() {
		var want []string
		for _, g := range stack.AccessFor(name, cfg) {
			cond := ""
			if g.If != (stack.Condition{}) {
				cond = conditionOf(map[string]any{"StringEquals": map[string]any{g.If.Key: g.If.Value}})
			}
			want = append(want, grant(g.Actions, resourceIDs(name, g.On), cond))
		}
		sort.Strings(want)
		sort.Strings(got[name])
		if !slices.Equal(got[name], want) {
			t.Errorf("%s: role policy\n  %s\nwant (stack.Access)\n  %s", name, strings.Join(got[name], "\n  "), strings.Join(want, "\n  "))
		}
	}
	// The table's resources are the table and its indexes, nothing else.
	_, pats := s.only(t, "AWS::IAM::Policy", func(r resource) bool { return roleOf[ref(t, r.Properties["Roles"])] == "pats" })
	for _, st := range statements(pats.Properties["PolicyDocument"]) {
		if acts, _ := actions(st); strings.HasPrefix(acts[0], "dynamodb:") {
			b, _ := json.Marshal(st["Resource"])
			if !strings.Contains(string(b), `"/index/*"`) || len(st["Resource"].([]any)) != 2 {
				t.Errorf("DynamoDB statement covers %s, want the table and its indexes", b)
			}
		}
	}
}

// conditionOf writes a statement's Condition as "Operator key=value; ...", sorted.
func conditionOf(c map[string]any) string {
	var parts []string
	for op, keys := range c {
		m, _ := keys.(map[string]any)
		for k, v := range m {
			parts = append(parts, op+" "+k+"="+render(v))
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// policyOf returns the statements of the Lambda called name's role policy.
func (s *synthesized) policyOf(t *testing.T, name string) []map[string]any {
	t.Helper()
	role := ref(t, s.res[s.functions(t)[name]].Properties["Role"])
	_, pol := s.only(t, "AWS::IAM::Policy", func(r resource) bool { return slices.Equal(refs(r.Properties["Roles"]), []string{role}) })
	return statements(pol.Properties["PolicyDocument"])
}

// The secrets in SSM: the stack creates no parameter and holds no value; the webhooks Lambda
// alone may read exactly the two WhatsApp parameters, the customersdk and sdk Lambdas alone
// exactly the customer SDK's project-key parameter, the crm, MCP and jobs Lambdas alone
// exactly the CRM client secrets' parameters, the ai and copilot Lambdas alone exactly the
// managed AI keys' parameters, the emailevents Lambda alone the Mailgun signing key's, and
// each may decrypt only those, only through SSM.
func TestProviderSecretsLeastPrivilege(t *testing.T) {
	check(t, "no parameter is created", func() {
		withProviders.tmpl.ResourceCountIs(jsii.String("AWS::SSM::Parameter"), jsii.Number(0))
		withProviders.tmpl.ResourceCountIs(jsii.String("AWS::SecretsManager::Secret"), jsii.Number(0))
	})
	readers := map[string][]string{
		"webhooks":    {parameterARN(appSecretParameter), parameterARN(verifyTokenParameter)},
		"customersdk": {parameterARN(sdkKeyParameter)},
		"sdk":         {parameterARN(sdkKeyParameter)},
		"crm":         {parameterARN(hubSpotSecretParam), parameterARN(salesforceSecretParam)},
		"mcp":         {parameterARN(hubSpotSecretParam), parameterARN(salesforceSecretParam)},
		stack.Jobs:    {parameterARN(hubSpotSecretParam), parameterARN(salesforceSecretParam), parameterARN(metaSecretParam)},
		"meta":        {parameterARN(metaSecretParam)},
		"ai":          {parameterARN(openAIKeyParam), parameterARN(anthropicKeyParam), parameterARN(geminiKeyParam)},
		"copilot":     {parameterARN(openAIKeyParam), parameterARN(anthropicKeyParam), parameterARN(geminiKeyParam)},
		"emailevents": {parameterARN(mailgunKeyParam)},
	}
	for name := range withProviders.functions(t) {
		var reads, decrypts []map[string]any
		for _, st := range withProviders.policyOf(t, name) {
			acts, _ := actions(st)
			for _, a := range acts {
				if strings.HasPrefix(a, "ssm:") {
					reads = append(reads, st)
				}
			}
			if isParameterKeyGrant(st) {
				decrypts = append(decrypts, st)
			}
		}
		secretARNs, ok := readers[name]
		if !ok {
			if len(reads)+len(decrypts) > 0 {
				t.Errorf("%s may read or decrypt parameters: %v %v", name, reads, decrypts)
			}
			continue
		}
		secretARNs = slices.Sorted(slices.Values(secretARNs))
		var granted []string
		for _, st := range reads {
			if acts, _ := actions(st); !slices.Equal(acts, []string{"ssm:GetParameter"}) {
				t.Errorf("%s: parameter actions %v, want ssm:GetParameter only", name, acts)
			}
			granted = append(granted, render(st["Resource"]))
		}
		sort.Strings(granted)
		if !slices.Equal(granted, secretARNs) {
			t.Errorf("%s reads parameters %v, want exactly %v", name, granted, secretARNs)
		}
		if len(decrypts) != 1 {
			t.Fatalf("%s: %d statements on the account's keys, want the one kms:Decrypt for the parameters", name, len(decrypts))
		}
		st := decrypts[0]
		if acts, _ := actions(st); !slices.Equal(acts, []string{"kms:Decrypt"}) || render(st["Resource"]) != parameterKeys {
			t.Errorf("%s: parameter key grant %v on %s, want kms:Decrypt on %s", name, acts, render(st["Resource"]), parameterKeys)
		}
		cond, _ := st["Condition"].(map[string]any)
		eq, _ := cond["StringEquals"].(map[string]any)
		if len(cond) != 1 || len(eq) != 2 {
			t.Fatalf("%s: key grant conditions %v, want StringEquals on the service and the encryption context", name, cond)
		}
		if got := render(eq["kms:ViaService"]); got != "ssm.${AWS::Region}.amazonaws.com" {
			t.Errorf("%s: kms:ViaService %s, want SSM of the stack's region", name, got)
		}
		var contexts []string
		for _, a := range eq["kms:EncryptionContext:PARAMETER_ARN"].([]any) {
			contexts = append(contexts, render(a))
		}
		sort.Strings(contexts)
		if !slices.Equal(contexts, secretARNs) {
			t.Errorf("%s may decrypt for %v, want exactly %v", name, contexts, secretARNs)
		}
	}
	// With default context nothing reads a parameter, and no Lambda is told of one: the
	// customersdk and sdk Lambdas run without the key (503 sdk_not_configured), the crm
	// Lambda without OAuth applications (503 oauth_not_configured), the ai Lambda without
	// managed keys (only accounts' own keys) and with the default endpoints, routes and prices.
	for name := range dev.functions(t) {
		for _, st := range dev.policyOf(t, name) {
			if acts, _ := actions(st); strings.HasPrefix(acts[0], "ssm:") || isParameterKeyGrant(st) {
				t.Errorf("%s: %v without a configured parameter", name, st)
			}
		}
		for k := range dev.env(t, name) {
			if strings.HasSuffix(k, "_PARAMETER") || (strings.HasPrefix(k, "CRM_") && k != "CRM_SECRETS_KEY_ID") || strings.HasPrefix(k, "AI_") {
				t.Errorf("%s: %s without a configured parameter", name, k)
			}
		}
	}
}

// isParameterKeyGrant tells the statement that lets SSM decrypt parameters for the role: on
// the account's keys, not on a key of the stack.
func isParameterKeyGrant(st map[string]any) bool {
	return render(st["Resource"]) == parameterKeys
}

// The CRM credentials are scoped by the KMS encryption context: the crm and MCP Lambdas may
// use the credentials key (Decrypt, GenerateDataKey) only under the CRM purpose, which the
// CRM family's sealer (shared/secrets/kms, family.Env.CRMSecrets) asks with, so neither can
// open a channel's token (sealed under the default purpose); the jobs Lambda holds the
// same conditioned grant for the CRM steps beside its unconditioned Decrypt (the runtime's
// sends) and GenerateDataKey (a Meta token refresh passes the new token on to the attached
// channels, whose credentials it seals again), and no other role has a conditioned grant on the key. Each Lambda learns the key
// from the variable of its grant: CRM_SECRETS_KEY_ID for the conditioned one, SECRETS_KEY_ID
// for the other. With default context and with every provider context value set.
func TestCRMCredentialsScopedByEncryptionContext(t *testing.T) {
	if stack.CRMCredentials.Key != kmssealer.ContextCondition || stack.CRMCredentials.Value != kmssealer.PurposeCRMCredentials ||
		kmssealer.ContextCondition != "kms:EncryptionContext:purpose" {
		t.Fatalf("the condition %v is not the CRM sealer's encryption context", stack.CRMCredentials)
	}
	const crmOnly = "StringEquals kms:EncryptionContext:purpose=botplatform-crm-credentials"
	type keyGrant struct{ actions, cond string }
	want := map[string][]keyGrant{
		"crm":      {{"kms:Decrypt,kms:GenerateDataKey", crmOnly}},
		"mcp":      {{"kms:Decrypt,kms:GenerateDataKey", crmOnly}},
		stack.Jobs: {{"kms:Decrypt,kms:GenerateDataKey", ""}, {"kms:Decrypt,kms:GenerateDataKey", crmOnly}},
		// Meta tokens under the CRM purpose; the channels it attaches under the default one.
		"meta": {{"kms:Decrypt,kms:GenerateDataKey", ""}, {"kms:Decrypt,kms:GenerateDataKey", crmOnly}},
	}
	for _, s := range []*synthesized{dev, withProviders} {
		keyID := ""
		for id, k := range s.ofType("AWS::KMS::Key") {
			if k.Properties["KeySpec"] == "SYMMETRIC_DEFAULT" {
				keyID = id
			}
		}
		for name := range s.functions(t) {
			var got []keyGrant
			for _, st := range s.policyOf(t, name) {
				if !slices.Equal(refs(st["Resource"]), []string{keyID}) {
					continue
				}
				acts, _ := actions(st)
				g := keyGrant{actions: strings.Join(slices.Sorted(slices.Values(acts)), ",")}
				if c, ok := st["Condition"].(map[string]any); ok {
					g.cond = conditionOf(c)
				}
				got = append(got, g)
			}
			slices.SortFunc(got, func(a, b keyGrant) int { return strings.Compare(a.actions+a.cond, b.actions+b.cond) })
			if w := want[name]; !slices.Equal(got, w) && (w != nil || slices.ContainsFunc(got, func(g keyGrant) bool { return g.cond != "" })) {
				t.Errorf("%s: grants on the credentials key %v, want %v", name, got, w)
			}
			// Each grant's variable, and only its: CRM_SECRETS_KEY_ID for the conditioned one.
			env := s.env(t, name)
			for v, conditioned := range map[string]bool{"CRM_SECRETS_KEY_ID": true, "SECRETS_KEY_ID": false} {
				granted := slices.ContainsFunc(got, func(g keyGrant) bool { return (g.cond != "") == conditioned })
				if _, set := env[v]; set != granted {
					t.Errorf("%s: %s set %v, its grant %v", name, v, set, granted)
				} else if set && !slices.Equal(refs(env[v]), []string{keyID}) {
					t.Errorf("%s: %s %v, want the credentials key", name, v, env[v])
				}
			}
		}
	}
}

// The template holds no value of a secret, and the outputs say where Meta delivers.
func TestProviderConfigurationInTheTemplate(t *testing.T) {
	raw, err := json.Marshal(withProviders.tmpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"WHATSAPP_APP_SECRET\"", "WHATSAPP_VERIFY_TOKEN\"", "CRM_HUBSPOT_CLIENT_SECRET\"", "CRM_SALESFORCE_CLIENT_SECRET\"",
		"AI_OPENAI_API_KEY\"", "AI_ANTHROPIC_API_KEY\"", "AI_GEMINI_API_KEY\""} {
		if strings.Contains(string(raw), v) {
			t.Errorf("the template sets %s", v)
		}
	}
	if got := render(withProviders.outputs["WhatsAppWebhookUrl"].(map[string]any)["Value"]); got != "https://hooks.example.com/bots/webhooks/whatsapp" {
		t.Errorf("WhatsAppWebhookUrl %s", got)
	}
	if got := render(dev.outputs["WhatsAppWebhookUrl"].(map[string]any)["Value"]); !strings.HasSuffix(got, ".ApiEndpoint}/webhooks/whatsapp") {
		t.Errorf("default WhatsAppWebhookUrl %s, want the API's endpoint", got)
	}
}

func TestAlarms(t *testing.T) {
	topicID, _ := dev.only(t, "AWS::SNS::Topic", func(r resource) bool { return r.Properties["DisplayName"] == "botplatform dev alarms" })
	type metric struct{ namespace, name, dimension string }
	have := map[metric]bool{}
	for id, a := range dev.ofType("AWS::CloudWatch::Alarm") {
		p := a.Properties
		if !slices.Equal(refs(p["AlarmActions"]), []string{topicID}) {
			t.Errorf("alarm %s notifies %v, want the alarm topic", id, p["AlarmActions"])
		}
		dims := refs(p["Dimensions"])
		dim := ""
		if len(dims) == 1 {
			dim = dims[0]
		}
		have[metric{p["Namespace"].(string), p["MetricName"].(string), dim}] = true
	}
	apiID, _ := dev.only(t, "AWS::ApiGatewayV2::Api", nil)
	smID, _ := dev.only(t, "AWS::StepFunctions::StateMachine", nil)
	want := []metric{
		{"AWS/ApiGateway", "5xx", apiID},
		{"AWS/States", "ExecutionsFailed", smID},
	}
	for _, id := range dev.functions(t) {
		want = append(want, metric{"AWS/Lambda", "Errors", id}, metric{"AWS/Lambda", "Throttles", id})
	}
	for _, m := range want {
		if !have[m] {
			t.Errorf("no alarm on %v", m)
		}
	}
	check(t, "5xx threshold", func() {
		dev.tmpl.HasResourceProperties(jsii.String("AWS::CloudWatch::Alarm"), map[string]any{
			"MetricName": "5xx", "Threshold": stack.DefaultAlarm5xxThreshold, "ComparisonOperator": "GreaterThanThreshold",
		})
		// No one to email without alarmEmail (the SES events topic has the API's
		// subscription: TestEmailEvents).
		dev.tmpl.ResourcePropertiesCountIs(jsii.String("AWS::SNS::Subscription"), map[string]any{"Protocol": "email"}, jsii.Number(0))
	})
}

func TestOutputs(t *testing.T) {
	for _, name := range []string{"ApiUrl", "TableName", "BusName"} {
		if dev.outputs[name] == nil {
			t.Errorf("no output %s", name)
		}
	}
}

func TestProductionWithDomain(t *testing.T) {
	prod, err := synth(map[string]any{
		stack.CtxStage:          "prod",
		stack.CtxDomain:         "api.example.com",
		stack.CtxCertificateArn: "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-1111-2222-3333-444455556666",
		stack.CtxAlarmEmail:     "ops@example.com",
		stack.CtxEmailInbound:   true, // as cdk.json gives it
		// As the CLI passes them: strings.
		stack.CtxLogRetentionDays:  "90",
		stack.CtxThrottleRateLimit: "50",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.cleanup()
	if !prod.stack.Config.DeletionProtection {
		t.Error("prod defaults to deletion protection")
	}
	check(t, "prod", func() {
		prod.tmpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]any{
			"DeletionPolicy": "Retain",
			"Properties":     map[string]any{"DeletionProtectionEnabled": true},
		})
		prod.tmpl.AllResources(jsii.String("AWS::KMS::Key"), map[string]any{"DeletionPolicy": "Retain"})
		prod.tmpl.AllResources(jsii.String("AWS::S3::Bucket"), map[string]any{"DeletionPolicy": "Retain"})
		prod.tmpl.ResourceCountIs(jsii.String("AWS::S3::Bucket"), jsii.Number(1))
		prod.tmpl.AllResourcesProperties(jsii.String("AWS::Logs::LogGroup"), map[string]any{"RetentionInDays": 90})
		prod.tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::DomainName"), map[string]any{"DomainName": "api.example.com"})
		prod.tmpl.ResourceCountIs(jsii.String("AWS::ApiGatewayV2::ApiMapping"), jsii.Number(1))
		prod.tmpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{"Protocol": "email", "Endpoint": "ops@example.com"})
		// SNS delivers SES's notifications at the custom domain.
		prod.tmpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{"Protocol": "https", "Endpoint": "https://api.example.com/esp/ses/webhook"})
		prod.tmpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]any{"Protocol": "https", "Endpoint": "https://api.example.com/esp/ses/inbound"})
		prod.tmpl.HasResourceProperties(jsii.String("AWS::Events::EventBus"), map[string]any{"Name": "botplatform-prod"})
		prod.tmpl.HasResourceProperties(jsii.String("AWS::ApiGatewayV2::Stage"), map[string]any{
			"DefaultRouteSettings": map[string]any{"ThrottlingRateLimit": 50},
		})
	})
	if prod.outputs["ApiDomainTarget"] == nil {
		t.Error("no DNS target output for the custom domain")
	}
	if _, ok := prod.functions(t)["pats"]; !ok {
		t.Error("no botplatform-prod-pats")
	}
	if got := prod.env(t, "channels")["PUBLIC_URL"]; got != "https://api.example.com" {
		t.Errorf("PUBLIC_URL %v, want the custom domain's URL", got)
	}
}

func TestNewReportsMissingAssets(t *testing.T) {
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("panicked: %v", r)
		}
	}()
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	cfg, err := stack.ConfigFrom(func(string) any { return nil })
	if err != nil {
		t.Fatal(err)
	}
	cfg.AssetDir = t.TempDir()
	_, err = stack.New(app, "Missing", cfg)
	if err == nil {
		t.Fatal("no error without assets")
	}
	names, _ := stack.LambdaNames()
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %s", err, n)
		}
	}
}

// CloudFormation refuses a stack of more than 500 resources. Routes grow with every family,
// so each function gets one API-wide invoke permission rather than one per route, and the
// stack keeps headroom: past 450 it is time to split it (nested stacks per family group).
func TestStackSize(t *testing.T) {
	if n := len(dev.res); n > 450 {
		t.Errorf("the stack has %d resources: CloudFormation allows 500; split it before it fails to deploy", n)
	}
	if n := len(dev.routes); n > 450 {
		t.Errorf("the route stack has %d resources: CloudFormation allows 500; split it before it fails to deploy", n)
	}
	perms := map[string]int{}
	for _, p := range slices.Concat(slices.Collect(maps.Values(dev.res)), slices.Collect(maps.Values(dev.routes))) {
		if p.Type == "AWS::Lambda::Permission" && p.Properties["Principal"] == "apigateway.amazonaws.com" {
			for _, fn := range refs(p.Properties["FunctionName"]) {
				perms[fn]++
			}
		}
	}
	for fn, n := range perms {
		if n != 1 {
			t.Errorf("function %s has %d API Gateway invoke permissions, want one for the API", fn, n)
		}
	}
	if len(perms) < 10 {
		t.Errorf("only %d functions may be invoked by API Gateway", len(perms))
	}
}
