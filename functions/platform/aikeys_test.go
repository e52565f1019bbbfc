package platform

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	aiwiring "github.com/botplatform/api/functions/ai/wiring"
	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/awsfake"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/store/dynamo"
)

const (
	openAIKeyParam    = "/botplatform/test/ai/openai-api-key"
	anthropicKeyParam = "/botplatform/test/ai/anthropic-api-key"
	geminiKeyParam    = "botplatform-test-ai-gemini-api-key" // a name without a hierarchy
)

// The plain variables the platform refuses beside a parameter's name are the ones the ai
// family reads locally, and each parameter's variable is that name with _PARAMETER; the
// providers are shared/ai's.
func TestAIKeyVariablesAreTheFamilys(t *testing.T) {
	t.Parallel()
	assert.Equal(t, []parameterSecret{
		{aiapi.OpenAI, aiwiring.EnvOpenAIKey + "_PARAMETER", aiwiring.EnvOpenAIKey},
		{aiapi.Anthropic, aiwiring.EnvAnthropicKey + "_PARAMETER", aiwiring.EnvAnthropicKey},
		{aiapi.Gemini, aiwiring.EnvGeminiKey + "_PARAMETER", aiwiring.EnvGeminiKey},
	}, aiKeys)
	var providers []string
	for _, k := range aiKeys {
		providers = append(providers, k.provider)
	}
	assert.ElementsMatch(t, aiapi.Providers, providers, "every provider's key can come from SSM")
}

func TestAIKeysAreReadFromSSM(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		openAIKeyParam:    {Value: "sk-openai-s3cret\n"},
		anthropicKeyParam: {Value: "sk-ant-s3cret"},
		geminiKeyParam:    {Value: " gemini-s3cret "},
	})
	a, logs := awsAt(fake, AWSConfig{AIKeyParameters: map[string]string{
		aiapi.OpenAI: openAIKeyParam, aiapi.Anthropic: anthropicKeyParam, aiapi.Gemini: geminiKeyParam}})
	got, err := a.AIKeys(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{aiapi.OpenAI: "sk-openai-s3cret", aiapi.Anthropic: "sk-ant-s3cret", aiapi.Gemini: "gemini-s3cret"}, got)

	calls := fake.Calls("GetParameter")
	require.Len(t, calls, 3, "each parameter is read once")
	for i, name := range []string{openAIKeyParam, anthropicKeyParam, geminiKeyParam} {
		var body map[string]any
		require.NoError(t, json.Unmarshal(calls[i], &body))
		assert.Equal(t, map[string]any{"Name": name, "WithDecryption": true}, body)
	}
	for _, p := range []string{openAIKeyParam, anthropicKeyParam, geminiKeyParam} {
		assert.Contains(t, logs.String(), p, "the cold start says where the keys came from")
	}
	for _, v := range []string{"sk-openai-s3cret", "sk-ant-s3cret", "gemini-s3cret"} {
		assert.NotContains(t, logs.String(), v)
	}

	// One provider's key configured, the others not: only its parameter is read.
	fake = awsfake.ParameterStore(t, map[string]awsfake.Parameter{anthropicKeyParam: {Value: "sk-ant-s3cret"}})
	a, _ = awsAt(fake, AWSConfig{AIKeyParameters: map[string]string{aiapi.Anthropic: anthropicKeyParam}})
	got, err = a.AIKeys(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{aiapi.Anthropic: "sk-ant-s3cret"}, got)
	assert.Len(t, fake.Calls("GetParameter"), 1)
}

// Without a parameter named (every Lambda but ai, and ai when the stack names none) there is
// no key and no call.
func TestAIKeysUnsetCallNothing(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, nil)
	a, _ := awsAt(fake, AWSConfig{})
	got, err := a.AIKeys(context.Background())
	require.NoError(t, err)
	assert.Nil(t, got)
	assert.Empty(t, fake.Calls("GetParameter"))
}

// A key in the process environment beside its parameter's name is refused before any call:
// on AWS a secret is never a Lambda variable. Another provider's plain variable is no
// conflict.
func TestAIKeysRefuseTheKeyAsAVariable(t *testing.T) {
	t.Setenv(aiwiring.EnvOpenAIKey, "sk-in-the-environment")
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{
		openAIKeyParam: {Value: "sk-openai-s3cret"}, anthropicKeyParam: {Value: "sk-ant-s3cret"}})
	a, _ := awsAt(fake, AWSConfig{AIKeyParameters: map[string]string{aiapi.OpenAI: openAIKeyParam}})
	_, err := a.AIKeys(context.Background())
	require.ErrorContains(t, err, "both AI_OPENAI_API_KEY_PARAMETER and AI_OPENAI_API_KEY are set")
	assert.NotContains(t, err.Error(), "sk-in-the-environment")
	assert.Empty(t, fake.Calls("GetParameter"))

	a, _ = awsAt(fake, AWSConfig{AIKeyParameters: map[string]string{aiapi.Anthropic: anthropicKeyParam}})
	got, err := a.AIKeys(context.Background())
	require.NoError(t, err)
	assert.Equal(t, map[string]string{aiapi.Anthropic: "sk-ant-s3cret"}, got)
}

// The keys reach the family environment (family.Env.AIKeys) the ai family is built on, and
// an unusable parameter refuses the environment.
func TestDepsCarryTheAIKeys(t *testing.T) {
	t.Parallel()
	fake := awsfake.ParameterStore(t, map[string]awsfake.Parameter{openAIKeyParam: {Value: "sk-openai-s3cret"}})
	build := func(cfg AWSConfig) (*family.Env, error) {
		a, _ := awsAt(fake, cfg)
		st := dynamo.New(dynamodb.NewFromConfig(fake.Config()), "table") // never called
		d, err := a.deps(context.Background(), st, a.log, time.Now)
		if err != nil {
			return nil, err
		}
		d.Audit, d.CursorKey = noAudit{}, sdkKeyBytes(32)
		return family.NewEnv(d)
	}
	env, err := build(AWSConfig{AIKeyParameters: map[string]string{aiapi.OpenAI: openAIKeyParam}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{aiapi.OpenAI: "sk-openai-s3cret"}, env.AIKeys)
	assert.Nil(t, env.CRMClientSecrets, "the AI keys are not the CRM's secrets")

	env, err = build(AWSConfig{})
	require.NoError(t, err)
	assert.Nil(t, env.AIKeys, "not configured")

	_, err = build(AWSConfig{AIKeyParameters: map[string]string{aiapi.Anthropic: "/botplatform/test/ai/none"}})
	require.ErrorContains(t, err, EnvAIAnthropicKeyParameter)
}

func TestAWSConfigFromEnvReadsTheAIKeyParameters(t *testing.T) {
	t.Setenv(EnvAIOpenAIKeyParameter, " "+openAIKeyParam+"\n")
	t.Setenv(EnvAIAnthropicKeyParameter, "")
	t.Setenv(EnvAIGeminiKeyParameter, "")
	assert.Equal(t, map[string]string{aiapi.OpenAI: openAIKeyParam}, AWSConfigFromEnv().AIKeyParameters)
	t.Setenv(EnvAIOpenAIKeyParameter, "")
	assert.Nil(t, AWSConfigFromEnv().AIKeyParameters)
	t.Setenv(EnvAIGeminiKeyParameter, geminiKeyParam)
	t.Setenv(EnvAIAnthropicKeyParameter, anthropicKeyParam)
	assert.Equal(t, map[string]string{aiapi.Gemini: geminiKeyParam, aiapi.Anthropic: anthropicKeyParam}, AWSConfigFromEnv().AIKeyParameters)
}
