package auth

import (
	"fmt"
	"slices"
	"strings"
)

// Scope is a token permission of the form resource:action (action may itself contain
// colons, e.g. managed_ai:usage:read), resource:* for every action on a resource, or * for all.
type Scope = string

// Full is the scope that grants everything, including management of personal access tokens.
const Full Scope = "*"

// knownScopes is the catalog of scopes a token may be granted. It is the list of the API
// specification plus the ones later route families introduced; docs/access.md lists it, and a
// test keeps the OpenAPI Scope enum equal to it.
var knownScopes = []Scope{
	"analytics:read", "analytics:write",
	"audit:read",
	"bots:read", "bots:write",
	"broadcasts:write",
	"collections:read", "collections:write",
	"content:read", "content:write",
	"crm:read", "crm:write",
	"customer_sdk:read", "customer_sdk:write",
	"email_campaigns:read", "email_campaigns:write",
	"experiments:read", "experiments:write",
	"integrations:read", "integrations:write",
	"logs:read",
	"managed_ai:invoke", "managed_ai:usage:read",
	"popups:read", "popups:write",
	"reactions:read", "reactions:write",
	"segments:write",
	"settings:read", "settings:write",
	"stats:read",
	"subscribers:read", "subscribers:write",
	"web_push:read", "web_push:write",
}

// KnownScopes returns a copy of the scope catalog, sorted.
func KnownScopes() []Scope { return slices.Clone(knownScopes) }

func resourceOf(s Scope) string {
	r, _, _ := strings.Cut(s, ":")
	return r
}

func knownResource(r string) bool {
	for _, k := range knownScopes {
		if resourceOf(k) == r {
			return true
		}
	}
	return false
}

// Scopes is the set of scopes a token holds.
type Scopes []Scope

// Allows reports whether the held scopes grant the required one: an exact match,
// the resource wildcard, or the full scope. Write does not imply read: routes name
// exactly the scope they need, so a token's power is readable from its scope list.
func (s Scopes) Allows(required Scope) bool {
	for _, h := range s {
		if h == Full || h == required {
			return true
		}
		if r, ok := strings.CutSuffix(h, ":*"); ok && required != Full && resourceOf(required) == r {
			return true
		}
	}
	return false
}

// Covers reports whether every scope in want is within s, so a token minted with want
// can never do more than the token (s) that minted it.
func (s Scopes) Covers(want Scopes) bool {
	for _, w := range want {
		switch {
		case w == Full:
			if !slices.Contains(s, Full) {
				return false
			}
		case strings.HasSuffix(w, ":*"):
			if !slices.Contains(s, Full) && !slices.Contains(s, w) {
				return false
			}
		default:
			if !s.Allows(w) {
				return false
			}
		}
	}
	return true
}

// ValidateScopes checks a requested scope list: non-empty, no duplicates, each either *,
// a known resource with :*, or a scope from the catalog. It returns the normalized (sorted) list.
func ValidateScopes(want []string) (Scopes, error) {
	if len(want) == 0 {
		return nil, fmt.Errorf("at least one scope is required")
	}
	out := make(Scopes, 0, len(want))
	seen := map[string]bool{}
	for _, w := range want {
		switch {
		case seen[w]:
			return nil, fmt.Errorf("scope %q is listed twice", w)
		case w == Full, slices.Contains(knownScopes, w):
		case strings.HasSuffix(w, ":*") && knownResource(strings.TrimSuffix(w, ":*")):
		default:
			return nil, fmt.Errorf("unknown scope %q", w)
		}
		seen[w] = true
		out = append(out, w)
	}
	slices.Sort(out)
	return out, nil
}
