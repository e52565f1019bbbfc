package awsshape

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/customersdk"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/apigw"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/awsfake"
)

const (
	// sdkKeyParam is the SSM SecureString parameter of the customer SDK's project-key secret.
	sdkKeyParam = "/botplatform/boot/sdk-key"
	// sdkSecretsKey is the KMS key the identity secrets are sealed under.
	sdkSecretsKey = "alias/boot-secrets"
	// shop is the web origin the samples' browser page runs on.
	shop = "https://shop.example"
)

// sdkEnv is the world's environment as the Lambda called name receives it on AWS
// (infra/access grants customersdk and sdk the same resources, except that only customersdk
// publishes audit events) with the SDK key parameter served by params.
func (w *world) sdkEnv(name string, params *awsfake.Server) []string {
	env := slices.Clone(w.env)
	if name == "sdk" {
		env = slices.DeleteFunc(env, func(v string) bool { return strings.HasPrefix(v, "AUDIT_BUS_NAME=") })
	}
	return append(env, "AWS_ENDPOINT_URL_SSM="+params.URL, "SECRETS_KEY_ID="+sdkSecretsKey,
		platform.EnvSDKKeyParameter+"="+sdkKeyParam)
}

// randomKey is n random bytes, standard base64 as `openssl rand -base64 n` prints them.
func randomKey(t *testing.T, n int) (raw []byte, encoded string) {
	t.Helper()
	raw = make([]byte, n)
	_, err := crand.Read(raw)
	require.NoError(t, err)
	return raw, base64.StdEncoding.EncodeToString(raw)
}

// The customersdk and sdk Lambdas take the customer SDK's project-key secret from the same
// SSM SecureString parameter at cold start: a project key the customersdk Lambda signs on
// enable is the one an in-process service computes with that key, and the sdk Lambda accepts
// it to register a browser installation from an allowed origin, while a tampered key and
// one signed with another secret are refused (401 invalid_project_key). Each Lambda reads
// the parameter once, and neither logs the key or the credentials it hands out.
func TestCustomerSDKLambdasShareTheKeyFromSSM(t *testing.T) {
	w := setup(t)
	ctx := context.Background()
	key, encoded := randomKey(t, platform.MinSDKKeyBytes)
	params := awsfake.ParameterStore(t, map[string]awsfake.Parameter{sdkKeyParam: {Value: encoded}})
	w.dataKeys(sdkSecretsKey)

	// The authorizer's answer for a PAT that may manage the customer SDK.
	_, pat, err := w.auth.IssuePAT(ctx, w.account.ID, w.owner.ID, "sdk", auth.Scopes{"customer_sdk:write"}, time.Now().Add(time.Hour))
	require.NoError(t, err)
	principal, err := w.auth.Authenticate(ctx, "Bearer "+pat)
	require.NoError(t, err)
	answer, err := apigw.Allow(principal)
	require.NoError(t, err)
	principalJSON, ok := answer.Context[apigw.ContextPrincipal].(string)
	require.True(t, ok)

	// 1. The customersdk Lambda enables the SDK and signs the project key.
	w.env = w.sdkEnv("customersdk", params)
	manage, mp := w.boot("customersdk")
	enable := sample(t, "apigw-customer-sdk-enable.json", map[string]string{"TOKEN": pat, "BOT_ID": w.bot.ID, "PRINCIPAL_JSON": jsonString(principalJSON)})
	var res events.APIGatewayV2HTTPResponse
	w.invoke(manage, enable, &res)
	require.Equal(t, 201, res.StatusCode, res.Body)
	var enabled struct {
		customersdk.Project
		IdentitySecret string `json:"identity_secret"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &enabled))
	assert.Equal(t, []string{shop}, enabled.WebOrigins)
	assert.Equal(t, "us-east-1", enabled.Region)
	require.True(t, strings.HasPrefix(enabled.IdentitySecret, "mbs_"), res.Body)
	projectKey := enabled.ProjectKey
	assert.Equal(t, customersdk.NewService(customersdk.Config{Key: key}).ProjectKeyFor(w.bot.ID), projectKey,
		"the project key is signed with the key from SSM")
	w.invoke(manage, enable, &res) // enable again: settings unchanged, the same key
	require.Equal(t, 200, res.StatusCode, res.Body)
	assert.Contains(t, res.Body, `"project_key":"`+projectKey+`"`)
	assert.NotContains(t, res.Body, `"identity_secret":`, "shown once")

	// The first enable was audited through EventBridge without the secret; the second
	// changed nothing but is a mutating route's call all the same.
	puts := w.bus.Calls("PutEvents")
	require.Len(t, puts, 2)
	var put struct{ Entries []struct{ Detail string } }
	require.NoError(t, json.Unmarshal(puts[0], &put))
	require.Len(t, put.Entries, 1)
	var ev audit.Event
	require.NoError(t, json.Unmarshal([]byte(put.Entries[0].Detail), &ev))
	assert.Equal(t, "POST /api/bots/{botID}/customer-sdk/enable", ev.Route)
	assert.Equal(t, 201, ev.Status)
	assert.Equal(t, w.bot.ID, ev.BotID)
	assert.NotContains(t, string(puts[0]), enabled.IdentitySecret)

	// Read once, at cold start, decrypted.
	want := `{"Name":"` + sdkKeyParam + `","WithDecryption":true}`
	calls := params.Calls("GetParameter")
	require.Len(t, calls, 1)
	assert.JSONEq(t, want, string(calls[0]))

	// 2. The sdk Lambda, with the same parameter, accepts that project key from the page of
	// an allowed origin. The route is public: the request carries no authorizer context.
	w.env = w.sdkEnv("sdk", params)
	device, dp := w.boot("sdk")
	register := func(key string) events.APIGatewayV2HTTPResponse {
		t.Helper()
		var res events.APIGatewayV2HTTPResponse
		w.invoke(device, sample(t, "apigw-sdk-register.json", map[string]string{"PROJECT_KEY": key}), &res)
		return res
	}
	res = register(projectKey)
	require.Equal(t, 201, res.StatusCode, res.Body)
	assert.Equal(t, shop, res.Headers["Access-Control-Allow-Origin"])
	assert.Equal(t, "no-store", res.Headers["Cache-Control"])
	var inst struct {
		customersdk.Installation
		Token string `json:"token"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.Body), &inst))
	assert.Equal(t, w.bot.ID, inst.BotID)
	assert.Equal(t, customersdk.PlatformWeb, inst.Platform)
	assert.Equal(t, shop, inst.AppID)
	assert.True(t, strings.HasPrefix(inst.ID, "inst_"), inst.ID)
	kind, ok := auth.ParseToken(inst.Token)
	require.True(t, ok, "an installation token: %q", inst.Token)
	assert.Equal(t, auth.KindInstallation, kind)
	assert.True(t, strings.HasPrefix(inst.Token, auth.InstallationPrefix))

	// A tampered key and one signed with another secret are refused before any read.
	otherKey, _ := randomKey(t, platform.MinSDKKeyBytes)
	forged := map[string]string{
		"tampered":           tamper(projectKey),
		"another deployment": customersdk.NewService(customersdk.Config{Key: otherKey}).ProjectKeyFor(w.bot.ID),
	}
	for name, key := range forged {
		res = register(key)
		assert.Equal(t, 401, res.StatusCode, "%s: %s", name, res.Body)
		assert.Equal(t, "application/problem+json", res.Headers["Content-Type"], name)
		assert.Contains(t, res.Body, `"invalid_project_key"`, name)
		assert.Empty(t, res.Headers["Access-Control-Allow-Origin"], "%s: the page cannot read a refusal", name)
	}

	// Each Lambda read the parameter once: the sdk Lambda at its cold start, not per request.
	calls = params.Calls("GetParameter")
	require.Len(t, calls, 2)
	assert.JSONEq(t, want, string(calls[1]))

	// Neither Lambda logs the key or a credential; both name where the key came from.
	for name, logs := range map[string]string{"customersdk": mp.Logs(), "sdk": dp.Logs()} {
		assert.Contains(t, logs, "customer SDK key read from SSM", name)
		assert.Contains(t, logs, sdkKeyParam, name)
		for what, secret := range map[string]string{"the SDK key": encoded, "the PAT": pat,
			"the identity secret": enabled.IdentitySecret, "the installation token": inst.Token} {
			assert.NotContains(t, logs, secret, "%s logged %s", name, what)
		}
		assert.NotContains(t, logs, "audit publish failed", name)
	}
}

// tamper changes the last character of a project key's MAC.
func tamper(key string) string {
	last := key[len(key)-1]
	repl := byte('A')
	if last == 'A' {
		repl = 'B'
	}
	return key[:len(key)-1] + string(repl)
}

// A parameter whose value decodes to fewer than 32 bytes would sign project keys anyone
// could forge: the sdk Lambda's cold start fails before it asks for an invocation (the main
// exits with status 1, which Lambda reports as an init failure), naming the parameter and
// the length, never the value.
func TestSDKLambdaRefusesAShortKeyFromSSM(t *testing.T) {
	w := setup(t)
	_, short := randomKey(t, 16)
	params := awsfake.ParameterStore(t, map[string]awsfake.Parameter{sdkKeyParam: {Value: short}})
	w.dataKeys(sdkSecretsKey)
	w.env = w.sdkEnv("sdk", params)
	_, p := w.boot("sdk")

	require.Eventually(t, func() bool { exited, _ := p.Exited(); return exited }, time.Minute, 50*time.Millisecond,
		"the cold start did not fail")
	_, err := p.Exited()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "exited with %v", err)
	assert.Equal(t, 1, exit.ExitCode())

	logs := p.Logs()
	assert.Contains(t, logs, "cold start failed")
	assert.Contains(t, logs, `\"`+sdkKeyParam+`\"`)
	assert.Contains(t, logs, platform.EnvSDKKeyParameter)
	assert.Contains(t, logs, "decodes to 16 bytes")
	assert.NotContains(t, logs, short)
	assert.NotContains(t, logs, "customer SDK key read from SSM")
	calls := params.Calls("GetParameter")
	require.Len(t, calls, 1)
	assert.JSONEq(t, `{"Name":"`+sdkKeyParam+`","WithDecryption":true}`, string(calls[0]))
}
