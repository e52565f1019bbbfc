package platform

import (
	"context"
	"fmt"
	"strings"
)

// parameterSecret is one secret, of a family's set keyed by provider, that can come from an
// SSM SecureString parameter: its provider (the key of the family.Deps map it reaches), the
// variable naming its parameter, and the variable the local process gives the secret itself
// in (the family's wiring's), which must not be set beside it.
type parameterSecret struct{ provider, parameterVar, plainVar string }

// secretParametersFromEnv reads the names of secrets' parameters, by provider: nil when none
// is named.
func secretParametersFromEnv(secrets []parameterSecret, getenv func(string) string) map[string]string {
	var names map[string]string
	for _, s := range secrets {
		if v := strings.TrimSpace(getenv(s.parameterVar)); v != "" {
			if names == nil {
				names = map[string]string{}
			}
			names[s.provider] = v
		}
	}
	return names
}

// readParameterSecrets reads the parameters names gives (by provider), in the order of
// secrets, each once (GetParameter with decryption, readSecureString): nil, without a call,
// when none is named. client is made only when one is named, and getenv is the process
// environment the plain variables are checked in: a secret there beside its parameter's name
// is refused before any call (on AWS a secret is never a Lambda variable). The error names
// the variables and the parameter, never a value.
func readParameterSecrets(ctx context.Context, client func() parameterGetter, secrets []parameterSecret,
	names map[string]string, getenv func(string) string) (map[string]string, error) {
	var (
		c   parameterGetter
		out map[string]string
	)
	for _, s := range secrets {
		name := names[s.provider]
		if name == "" {
			continue
		}
		if strings.TrimSpace(getenv(s.plainVar)) != "" {
			return nil, fmt.Errorf("platform: both %s and %s are set: set only the parameter's name", s.parameterVar, s.plainVar)
		}
		if c == nil {
			c = client()
		}
		v, err := readSecureString(ctx, c, name, s.parameterVar)
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		out[s.provider] = v
	}
	return out, nil
}
