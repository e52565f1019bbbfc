package platform

import (
	"context"
	"maps"
	"os"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/ssm"

	aiapi "github.com/botplatform/api/shared/ai"
)

// The variables that name the SSM SecureString parameters holding the managed AI family's
// provider keys (the platform's own API keys of OpenAI, Anthropic and Gemini) on AWS
// (AWSConfig.AIKeyParameters). infra/stack sets them only on the ai Lambda, the one granted
// ssm:GetParameter on those parameters, and only when the stack's configuration names them.
// Every Lambda reads what its variables name at cold start (AWS.deps): the variables, not
// the Lambda's name, decide.
const (
	EnvAIOpenAIKeyParameter    = "AI_OPENAI_API_KEY_PARAMETER"
	EnvAIAnthropicKeyParameter = "AI_ANTHROPIC_API_KEY_PARAMETER"
	EnvAIGeminiKeyParameter    = "AI_GEMINI_API_KEY_PARAMETER"
)

// aiKeys are the managed AI family's provider keys (functions/ai/wiring's AI_*_API_KEY, the
// variables the local process gives them in).
var aiKeys = []parameterSecret{
	{aiapi.OpenAI, EnvAIOpenAIKeyParameter, "AI_OPENAI_API_KEY"},
	{aiapi.Anthropic, EnvAIAnthropicKeyParameter, "AI_ANTHROPIC_API_KEY"},
	{aiapi.Gemini, EnvAIGeminiKeyParameter, "AI_GEMINI_API_KEY"},
}

// aiKeyParametersFromEnv reads the parameters' names, by provider: nil when none is named
// (every Lambda but ai).
func aiKeyParametersFromEnv(getenv func(string) string) map[string]string {
	return secretParametersFromEnv(aiKeys, getenv)
}

// AIKeys returns the managed AI family's provider keys, by provider (shared/ai's OpenAI,
// Anthropic, Gemini), each read once from the SSM parameter its variable names (GetParameter
// with decryption): nil, without a call, when none is named (every Lambda but ai; there, no
// managed key, and a provider is reached only with an account's own key). A named parameter
// that is missing, unreadable, not a SecureString or blank fails the cold start, naming the
// parameter and its variable, never the value; so does the key itself in the environment
// beside its parameter's name (on AWS a secret is never a Lambda variable).
func (a *AWS) AIKeys(ctx context.Context) (map[string]string, error) {
	names := a.cfg.AIKeyParameters
	keys, err := readParameterSecrets(ctx, func() parameterGetter { return ssm.NewFromConfig(a.aws) }, aiKeys, names, os.Getenv)
	if err != nil {
		return nil, err
	}
	if len(keys) > 0 {
		var attrs []any
		for _, p := range slices.Sorted(maps.Keys(names)) {
			attrs = append(attrs, p+"_key_parameter", names[p])
		}
		a.log.Info("managed AI keys read from SSM", attrs...)
	}
	return keys, nil
}
