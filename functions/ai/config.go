package ai

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	aiapi "github.com/botplatform/api/shared/ai"
)

// The profiles a caller chooses from: what matters more, speed and price or the answer's
// quality. Each is an ordered list of provider models (Routes), the first reachable one
// answering.
const (
	ProfileFast     = "fast"
	ProfileBalanced = "balanced"
	ProfileQuality  = "quality"
)

// Profiles lists the profiles in a stable order.
var Profiles = []string{ProfileFast, ProfileBalanced, ProfileQuality}

// ProviderAuto lets the platform choose the provider by the profile's route.
const ProviderAuto = "auto"

// Target is one provider model a profile routes to.
type Target struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// DefaultRoutes are the profiles' routes unless the operator configures others (AI_ROUTES).
var DefaultRoutes = map[string][]Target{
	ProfileFast:     {{aiapi.Gemini, "gemini-2.0-flash"}, {aiapi.OpenAI, "gpt-4o-mini"}, {aiapi.Anthropic, "claude-3-5-haiku-latest"}},
	ProfileBalanced: {{aiapi.OpenAI, "gpt-4o"}, {aiapi.Anthropic, "claude-sonnet-4-0"}, {aiapi.Gemini, "gemini-2.5-pro"}},
	ProfileQuality:  {{aiapi.Anthropic, "claude-sonnet-4-0"}, {aiapi.Gemini, "gemini-2.5-pro"}, {aiapi.OpenAI, "gpt-4o"}},
}

// Price is what a model costs per token, in billionths of a US dollar (nano-USD): a price
// list's "USD per million tokens" times 1,000. Integers, so that costs add up exactly.
type Price struct {
	InputNanos  int64 `json:"input_nanos"`
	OutputNanos int64 `json:"output_nanos"`
}

// DefaultPrices are the providers' list prices of the default routes' models (operators
// override them with AI_PRICES when they change or a contract says otherwise).
var DefaultPrices = map[string]Price{
	aiapi.OpenAI + ":gpt-4o-mini":                {150, 600},
	aiapi.OpenAI + ":gpt-4o":                     {2500, 10000},
	aiapi.Anthropic + ":claude-3-5-haiku-latest": {800, 4000},
	aiapi.Anthropic + ":claude-sonnet-4-0":       {3000, 15000},
	aiapi.Gemini + ":gemini-2.0-flash":           {100, 400},
	aiapi.Gemini + ":gemini-2.5-pro":             {1250, 10000},
}

// ParseRoutes reads an operator's routes: "fast=gemini:gemini-2.0-flash,openai:gpt-4o-mini;
// quality=anthropic:claude-sonnet-4-0". Profiles left out keep their default route.
func ParseRoutes(s string) (map[string][]Target, error) {
	out := maps.Clone(DefaultRoutes)
	for _, part := range strings.Split(s, ";") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		profile, list, ok := strings.Cut(part, "=")
		profile = strings.TrimSpace(profile)
		if !ok || !slices.Contains(Profiles, profile) {
			return nil, fmt.Errorf("ai routes: %q is not profile=provider:model,...", part)
		}
		var ts []Target
		for _, t := range strings.Split(list, ",") {
			provider, model, ok := strings.Cut(strings.TrimSpace(t), ":")
			if !ok || !slices.Contains(aiapi.Providers, provider) || model == "" {
				return nil, fmt.Errorf("ai routes: %q is not provider:model", t)
			}
			ts = append(ts, Target{provider, model})
		}
		out[profile] = ts
	}
	return out, nil
}

// ParsePrices reads an operator's prices: "openai:gpt-4o=2500/10000,gemini:gemini-2.0-flash=100/400",
// nano-USD per input and output token. Models left out keep their default price.
func ParsePrices(s string) (map[string]Price, error) {
	out := maps.Clone(DefaultPrices)
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		model, price, ok := strings.Cut(part, "=")
		in, outp, ok2 := strings.Cut(price, "/")
		provider, _, ok3 := strings.Cut(model, ":")
		i, err1 := strconv.ParseInt(strings.TrimSpace(in), 10, 64)
		o, err2 := strconv.ParseInt(strings.TrimSpace(outp), 10, 64)
		if !ok || !ok2 || !ok3 || !slices.Contains(aiapi.Providers, provider) || err1 != nil || err2 != nil || i < 0 || o < 0 {
			return nil, fmt.Errorf("ai prices: %q is not provider:model=input/output nano-USD", part)
		}
		out[strings.TrimSpace(model)] = Price{i, o}
	}
	return out, nil
}
