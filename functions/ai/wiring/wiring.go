// Package wiring composes the managed AI family with the process: the provider clients at
// their configured base URLs, the managed keyring, routes and prices from the operator's
// configuration (the environment; on AWS the keys come from SSM, never as variables: the
// platform reads them and hands them over in family.Env.AIKeys), and the sealer of the
// accounts' own keys.
package wiring

import (
	"fmt"
	"maps"
	"os"
	"strings"

	"github.com/botplatform/api/functions/ai"
	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/ai/anthropic"
	"github.com/botplatform/api/shared/ai/gemini"
	"github.com/botplatform/api/shared/ai/openai"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/httpapi"
)

// The environment variables of the family's configuration. The API keys are secrets: the
// local process reads them from its environment only (never flags, which show in ps); on
// AWS they are never variables: the platform reads them from SSM
// (AI_*_API_KEY_PARAMETER name the parameters) and hands them over in family.Env.AIKeys.
const (
	EnvOpenAIKey        = "AI_OPENAI_API_KEY"
	EnvAnthropicKey     = "AI_ANTHROPIC_API_KEY"
	EnvGeminiKey        = "AI_GEMINI_API_KEY"
	EnvOpenAIBaseURL    = "AI_OPENAI_BASE_URL"
	EnvAnthropicBaseURL = "AI_ANTHROPIC_BASE_URL"
	EnvGeminiBaseURL    = "AI_GEMINI_BASE_URL"
	// EnvRoutes and EnvPrices override the profiles' routes and the models' prices
	// (ai.ParseRoutes, ai.ParsePrices).
	EnvRoutes = "AI_ROUTES"
	EnvPrices = "AI_PRICES"
	// EnvPrivateAddresses set to "allow" lets the clients call providers on private and
	// loopback addresses over plain http: the fakes of local tests.
	EnvPrivateAddresses = "AI_PRIVATE_PROVIDER_ADDRESSES"
)

// Family is the managed AI family.
func Family() family.Family {
	return family.Family{Name: "ai", Build: func(env *family.Env) family.Parts {
		svc, err := Service(env, os.Getenv)
		if err != nil {
			// A malformed operator configuration must not pass unnoticed, nor take the other
			// families down: the routes answer 503 ai_not_configured, and the log says why.
			env.Log.Error("ai: configuration refused", "error", err)
			svc = ai.New(ai.Config{Store: env.Store, Now: env.Now, Log: env.Log})
		}
		return family.Parts{Routes: func(mux *httpapi.Mux) { ai.Routes(mux, svc) }}
	}}
}

// Service builds the service from getenv (os.Getenv in production).
func Service(env *family.Env, getenv func(string) string) (*ai.Service, error) {
	routes, err := ai.ParseRoutes(getenv(EnvRoutes))
	if err != nil {
		return nil, err
	}
	prices, err := ai.ParsePrices(getenv(EnvPrices))
	if err != nil {
		return nil, err
	}
	private := strings.TrimSpace(getenv(EnvPrivateAddresses)) == "allow"
	clients := map[string]aiapi.Client{}
	oa, err := openai.New(openai.Config{BaseURL: getenv(EnvOpenAIBaseURL), AllowPrivate: private})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvOpenAIBaseURL, err)
	}
	an, err := anthropic.New(anthropic.Config{BaseURL: getenv(EnvAnthropicBaseURL), AllowPrivate: private})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvAnthropicBaseURL, err)
	}
	ge, err := gemini.New(gemini.Config{BaseURL: getenv(EnvGeminiBaseURL), AllowPrivate: private})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvGeminiBaseURL, err)
	}
	clients[aiapi.OpenAI], clients[aiapi.Anthropic], clients[aiapi.Gemini] = oa, an, ge
	return ai.New(ai.Config{Store: env.Store, Sealer: env.Secrets, Now: env.Now, Log: env.Log, Clients: clients,
		Keys: keysOf(env, getenv), Routes: routes, Prices: prices}), nil
}

// keysOf is the managed keyring in env's process: the keys the platform read for it
// (env.AIKeys: from SSM on AWS, where a key is never a Lambda variable) when it handed some
// over, else getenv's AI_*_API_KEY (the local process). A provider without a key has none
// ("": reached only with an account's own key).
func keysOf(env *family.Env, getenv func(string) string) map[string]string {
	if env.AIKeys != nil {
		return maps.Clone(env.AIKeys)
	}
	return map[string]string{
		aiapi.OpenAI:    strings.TrimSpace(getenv(EnvOpenAIKey)),
		aiapi.Anthropic: strings.TrimSpace(getenv(EnvAnthropicKey)),
		aiapi.Gemini:    strings.TrimSpace(getenv(EnvGeminiKey)),
	}
}
