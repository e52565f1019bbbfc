package wiring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
)

// The keys the platform hands over (family.Env.AIKeys, from SSM on AWS) are the managed
// keyring, in place of AI_*_API_KEY: a variable does not fill in a provider the platform
// handed no key for. Without any handed over (the local process), the variables are.
func TestAIKeysWinOverTheVariables(t *testing.T) {
	t.Parallel()
	vars := map[string]string{EnvOpenAIKey: "sk-from-variable", EnvAnthropicKey: " sk-ant-from-variable\n", EnvGeminiKey: "gm-from-variable"}
	getenv := func(k string) string { return vars[k] }

	handed := map[string]string{aiapi.OpenAI: "sk-from-ssm", aiapi.Gemini: "gm-from-ssm"}
	env := familytest.Env(t, family.Deps{AIKeys: handed})
	keys := keysOf(env, getenv)
	assert.Equal(t, map[string]string{aiapi.OpenAI: "sk-from-ssm", aiapi.Gemini: "gm-from-ssm"}, keys)
	assert.Empty(t, keys[aiapi.Anthropic], "no key handed for Anthropic: none, whatever the variable says")
	keys[aiapi.OpenAI] = "changed"
	assert.Equal(t, "sk-from-ssm", env.AIKeys[aiapi.OpenAI], "the keyring is the service's own copy")

	local := familytest.Env(t, family.Deps{})
	assert.Equal(t, map[string]string{aiapi.OpenAI: "sk-from-variable", aiapi.Anthropic: "sk-ant-from-variable", aiapi.Gemini: "gm-from-variable"},
		keysOf(local, getenv))
	assert.Equal(t, map[string]string{aiapi.OpenAI: "", aiapi.Anthropic: "", aiapi.Gemini: ""},
		keysOf(local, func(string) string { return "" }), "no key anywhere: every provider without one")

	// The service builds on either.
	_, err := Service(env, getenv)
	require.NoError(t, err)
	_, err = Service(local, getenv)
	require.NoError(t, err)
}
