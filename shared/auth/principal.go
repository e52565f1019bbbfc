// Package auth holds the platform's identities and credentials: accounts, users and their
// per-bot rights, personal access tokens and bot API tokens (formats, hashing, issuance,
// revocation), scopes, and Authenticate, which turns an Authorization header into a Principal.
package auth

import (
	"context"
	"time"
)

// Role is a user's standing in its account.
type Role string

// Roles. An owner holds every right on every bot and sees account-wide records (audit trail).
const (
	RoleOwner  Role = "owner"
	RoleMember Role = "member"
)

// Principal is who is calling: the account, the user behind the token, the token itself and
// what it may do. A Principal returned by Authenticate is shared and must not be modified.
type Principal struct {
	AccountID string    `json:"account_id"`
	UserID    string    `json:"user_id"`
	TokenID   string    `json:"token_id"`
	Kind      TokenKind `json:"token_kind"`
	// BotID is the bot a bot API token is bound to; empty for PATs.
	BotID  string `json:"bot_id,omitempty"`
	Scopes Scopes `json:"scopes"`
	Role   Role   `json:"role"`
	// Rights hold on every bot of the account; BotRights add rights on single bots.
	Rights    RightSet            `json:"rights"`
	BotRights map[string]RightSet `json:"bot_rights,omitempty"`
	// Entitlements are the account's, read when the token was last looked up.
	Entitlements Entitlements `json:"entitlements"`
	// ExpiresAt is the token's expiry (zero for bot tokens, which live until deleted).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// RightsOn returns the rights the principal holds on bot. A bot token holds every right on
// its own bot and none elsewhere; an owner holds every right everywhere.
func (p *Principal) RightsOn(bot string) RightSet {
	switch {
	case p.Kind == KindBot:
		if bot == p.BotID {
			return AllRightsSet
		}
		return 0
	case p.Role == RoleOwner:
		return AllRightsSet
	default:
		return p.Rights | p.BotRights[bot]
	}
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the authenticated principal, if any.
func FromContext(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}
