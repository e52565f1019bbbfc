package ai

import (
	"cmp"
	"context"
	"errors"
	"math"
	"time"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/httpapi"
)

// call is one provider model to try, with the key to call it with.
type call struct {
	Target
	key string
}

// plan chooses what a request is sent to, in order, and how it is billed:
//
//   - a named provider: the account's own key of it, else the platform's; that provider only
//     (the caller chose it);
//   - auto, for an account with its own key of a provider on the profile's route: the first
//     such provider, with that key, and nothing else: a tenant key is never replaced by paid
//     managed AI, so its failure is the answer;
//   - auto otherwise: the profile's route, each provider the platform has a key of, in order.
func (s *Service) plan(ctx context.Context, account string, req ResponseRequest) ([]call, string, error) {
	own, err := s.ownKeys(ctx, account)
	if err != nil {
		return nil, "", err
	}
	byok := func(t Target) ([]call, string, error) {
		key, err := s.open(ctx, account, t.Provider, own[t.Provider])
		if err != nil {
			return nil, "", err
		}
		return []call{{t, key}}, BillingBYOK, nil
	}
	if req.Provider != ProviderAuto {
		t := Target{Provider: req.Provider, Model: s.modelOf(req.Profile, req.Provider)}
		if _, ok := own[req.Provider]; ok {
			return byok(t)
		}
		if s.keys[req.Provider] == "" || s.clients[req.Provider] == nil || t.Model == "" {
			return nil, "", httpapi.Errorf(httpapi.KindUnavailable, "provider_not_configured",
				"this deployment has no managed access to %s; use provider auto", req.Provider).With("provider", req.Provider)
		}
		return []call{{t, s.keys[req.Provider]}}, BillingManaged, nil
	}
	route := s.routes[req.Profile]
	for _, t := range route {
		if _, ok := own[t.Provider]; ok && s.clients[t.Provider] != nil {
			return byok(t)
		}
	}
	var calls []call
	for _, t := range route {
		if k := s.keys[t.Provider]; k != "" && s.clients[t.Provider] != nil {
			calls = append(calls, call{t, k})
		}
	}
	if len(calls) == 0 {
		return nil, "", httpapi.E(httpapi.KindUnavailable, "ai_not_configured", "this deployment has no managed AI provider configured")
	}
	return calls, BillingManaged, nil
}

// modelOf is the model a profile uses at provider: the provider's model on the profile's
// route, else on the first route that has the provider ("" when none does).
func (s *Service) modelOf(profile, provider string) string {
	for _, p := range append([]string{profile}, Profiles...) {
		for _, t := range s.routes[p] {
			if t.Provider == provider {
				return t.Model
			}
		}
	}
	return ""
}

// generate sends the request to the planned calls in order until one answers. A managed
// call that fails for the provider's reasons (an outage, a rate limit, the platform's key
// refused) gives way to the next; a refusal of the request itself, an account's own key's
// failure, a failure after some text was streamed, or the failure of the only call there is
// (a named provider) is the answer.
func (s *Service) generate(ctx context.Context, req ResponseRequest, calls []call, billing string, delta func(string) error) (Response, error) {
	ctx, cancel := context.WithTimeout(ctx, generationTimeout)
	defer cancel()
	msgs := req.Input
	if req.Instructions != "" {
		msgs = append([]aiapi.Message{{Role: aiapi.RoleSystem, Content: req.Instructions}}, msgs...)
	}
	attempts := []Attempt{}
	var last error
	var wait time.Duration
	for _, c := range calls {
		cl := s.clients[c.Provider]
		in := aiapi.Request{Model: c.Model, Messages: msgs, MaxOutputTokens: req.MaxOutputTokens, Temperature: req.Temperature}
		streamed := false
		var out aiapi.Response
		var err error
		if delta != nil {
			out, err = cl.Stream(ctx, c.key, in, func(text string) error {
				streamed = true
				return delta(text)
			})
		} else {
			out, err = cl.Generate(ctx, c.key, in)
		}
		if err == nil {
			return Response{Provider: c.Provider, Model: cmp.Or(out.Model, c.Model), Billing: billing, OutputText: out.Text,
				StopReason: out.StopReason, Usage: s.usageOf(c.Target, billing, out.Usage), Attempts: attempts,
				ProviderResponseID: out.ID}, nil
		}
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return Response{}, err
		}
		if billing == BillingBYOK || streamed || !fallsBack(err) || len(calls) == 1 {
			return Response{}, answerOf(err, billing)
		}
		if errors.Is(err, aiapi.ErrUnauthorized) {
			s.log.ErrorContext(ctx, "ai: the provider refused the platform's managed key", "provider", c.Provider)
		}
		var rl *aiapi.RateLimitedError
		if errors.As(err, &rl) && (wait == 0 || rl.RetryAfter < wait) {
			wait = rl.RetryAfter
		}
		attempts = append(attempts, Attempt{Provider: c.Provider, Model: c.Model, Error: reasonOf(err)})
		last = err
	}
	s.log.WarnContext(ctx, "ai: every provider of the route failed", "attempts", len(attempts), "error", last)
	return Response{}, httpapi.E(httpapi.KindUnavailable, "ai_unavailable", "no AI provider could answer; retry shortly").
		With("attempts", attempts).With("retry_after_seconds", int64(math.Ceil(max(wait, time.Second).Seconds())))
}

// fallsBack reports whether a managed call's failure lets the next provider try: the
// provider's trouble, not the request's.
func fallsBack(err error) bool {
	var rl *aiapi.RateLimitedError
	var pe *aiapi.ProviderError
	return errors.Is(err, aiapi.ErrUnauthorized) || errors.As(err, &rl) || (errors.As(err, &pe) && pe.Temporary)
}

// reasonOf names a failure in an Attempt.
func reasonOf(err error) string {
	var rl *aiapi.RateLimitedError
	switch {
	case errors.Is(err, aiapi.ErrUnauthorized):
		return "provider_key_rejected"
	case errors.As(err, &rl):
		return "provider_rate_limited"
	}
	return "provider_unavailable"
}

// answerOf is the response to a failure that is the answer.
func answerOf(err error, billing string) error {
	var rl *aiapi.RateLimitedError
	var pe *aiapi.ProviderError
	switch {
	case errors.Is(err, aiapi.ErrUnauthorized) && billing == BillingBYOK:
		return httpapi.E(httpapi.KindUnprocessable, "byok_key_rejected",
			"the provider refused your account's own API key; ask for it to be replaced (managed AI is not used in its place)").Wrap(err)
	case errors.Is(err, aiapi.ErrUnauthorized):
		return httpapi.E(httpapi.KindUnavailable, "ai_unavailable", "the AI provider could not be used; retry shortly").Wrap(err)
	case errors.As(err, &rl):
		return httpapi.E(httpapi.KindTooManyRequests, "provider_rate_limited", "the AI provider is rate limiting these requests").
			With("retry_after_seconds", int64(math.Ceil(max(rl.RetryAfter, time.Second).Seconds()))).Wrap(err)
	case errors.As(err, &pe) && !pe.Temporary:
		return httpapi.Errorf(httpapi.KindUnprocessable, "ai_request_rejected", "the AI provider refused the request (HTTP %d): %s", pe.Status, pe.Message).
			With("provider_status", pe.Status).Wrap(err)
	}
	return httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the AI provider failed; retry shortly").Wrap(err)
}
