package auth

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/botplatform/api/shared/store"
)

// BearerToken extracts the token from an Authorization header value ("Bearer <token>",
// scheme case-insensitive). Both PATs and bot API tokens travel this way.
func BearerToken(header string) (string, error) {
	if header == "" {
		return "", ErrMissingCredentials
	}
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrMalformedToken
	}
	return strings.TrimSpace(tok), nil
}

// Authenticate resolves an Authorization header to a Principal. A malformed token is
// refused before any lookup; a known token is cached for CacheTTL.
func (s *Service) Authenticate(ctx context.Context, header string) (*Principal, error) {
	tok, err := BearerToken(header)
	if err != nil {
		return nil, err
	}
	return s.AuthenticateToken(ctx, tok)
}

// AuthenticateToken is Authenticate for a bare token.
func (s *Service) AuthenticateToken(ctx context.Context, tok string) (*Principal, error) {
	kind, ok := ParseToken(tok)
	if !ok {
		return nil, ErrMalformedToken
	}
	if kind == KindInstallation {
		// The customer SDK's device tokens are checked by the sdk family alone; here they
		// are unknown without a store read.
		return nil, ErrUnknownToken
	}
	hash := HashToken(tok)
	now := s.clock()
	p, ok := s.cache.get(hash, now)
	if !ok {
		// A revocation that lands while the store is read must not be undone by caching
		// what was read before it: cache only if nothing was forgotten in between.
		epoch := s.cache.epochNow()
		var err error
		if p, err = s.load(ctx, kind, hash); err != nil {
			return nil, err
		}
		s.cache.put(hash, p, now, epoch)
	}
	if err := s.checkExpiry(p, now); err != nil {
		return nil, err
	}
	s.touch(ctx, p, now)
	return p, nil
}

func (s *Service) checkExpiry(p *Principal, now time.Time) error {
	if !p.ExpiresAt.IsZero() && !now.Before(p.ExpiresAt) {
		return ErrExpiredToken
	}
	return nil
}

func (s *Service) load(ctx context.Context, kind TokenKind, hash string) (*Principal, error) {
	it, err := s.store.Get(ctx, credentialKey(hash))
	if errors.Is(err, store.ErrNotFound) {
		return nil, ErrUnknownToken
	}
	if err != nil {
		return nil, err
	}
	c, err := store.Decode[credential](it)
	if err != nil {
		return nil, err
	}
	if c.Kind != kind {
		return nil, ErrUnknownToken
	}
	p := &Principal{AccountID: c.AccountID, UserID: c.UserID, TokenID: c.TokenID, Kind: c.Kind, BotID: c.BotID, ExpiresAt: c.ExpiresAt}
	// The account (entitlements) and the user (role, rights) are independent reads.
	var (
		acct Account
		u    User
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) { acct, err = s.Account(gctx, c.AccountID); return err })
	if c.Kind == KindPAT {
		g.Go(func() (err error) { u, err = s.User(gctx, c.AccountID, c.UserID); return err })
	}
	if err := g.Wait(); errors.Is(err, ErrNotFound) {
		return nil, ErrUnknownToken // the account or the user was removed: its tokens die with it
	} else if err != nil {
		return nil, err
	}
	p.Entitlements = acct.Entitlements
	if c.Kind == KindBot {
		// A bot token acts on its own bot with every right; the router keeps it off
		// account-level routes.
		p.Scopes = Scopes{Full}
		p.Role = RoleMember
		return p, nil
	}
	p.Scopes, p.Role, p.Rights, p.BotRights = c.Scopes, u.Role, u.Rights, u.BotRights
	return p, nil
}

// touch records last_used_at at most once per lastUsedEvery per token across processes:
// this process remembers when it last wrote, and the conditional write lets only one
// process win a given minute. Failures are logged, never surfaced: use is bookkeeping.
func (s *Service) touch(ctx context.Context, p *Principal, now time.Time) {
	if !s.cache.dueTouch(p.TokenID, now) {
		return
	}
	c := credential{Kind: p.Kind, TokenID: p.TokenID, AccountID: p.AccountID, UserID: p.UserID, BotID: p.BotID}
	key := c.metaKey()
	it, err := s.store.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.WarnContext(ctx, "last_used_at read failed", "token_id", p.TokenID, "error", err)
		}
		return
	}
	// The record is a patRecord or a botTokenRecord; both carry last_used_at at the top level.
	var rec map[string]json.RawMessage
	if err := json.Unmarshal(it.Data, &rec); err != nil {
		s.log.WarnContext(ctx, "last_used_at decode failed", "token_id", p.TokenID, "error", err)
		return
	}
	var prev *time.Time
	if err := json.Unmarshal(rec["last_used_at"], &prev); err == nil && prev != nil && now.Sub(*prev) < lastUsedEvery {
		return // another process recorded this minute
	}
	rec["last_used_at"], _ = json.Marshal(now.Truncate(time.Second))
	b, err := json.Marshal(rec)
	if err != nil {
		return
	}
	it.Data, it.Revision = b, it.Revision+1
	if err := s.store.Put(ctx, it, store.RevisionIs(it.Revision-1)); err != nil && !errors.Is(err, store.ErrConditionFailed) {
		s.log.WarnContext(ctx, "last_used_at write failed", "token_id", p.TokenID, "error", err)
	}
}

// Forget drops a token from this process's cache (after revocation elsewhere in the process).
func (s *Service) Forget(hash string) { s.cache.forget(hash) }

// cache keeps recently authenticated principals and the last use-time written per token.
type cache struct {
	mu      sync.Mutex
	ttl     time.Duration
	max     int
	entries map[string]cacheEntry
	touched map[string]time.Time
	// epoch counts forgets, so a lookup that raced a revocation is not cached.
	epoch uint64
}

type cacheEntry struct {
	p       *Principal
	expires time.Time
}

func newCache(ttl time.Duration, max int) *cache {
	return &cache{ttl: ttl, max: max, entries: map[string]cacheEntry{}, touched: map[string]time.Time{}}
}

func (c *cache) get(hash string, now time.Time) (*Principal, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[hash]
	if !ok || !now.Before(e.expires) {
		return nil, false
	}
	return e.p, true
}

func (c *cache) epochNow() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// put caches p unless a token was forgotten since epoch was read.
func (c *cache) put(hash string, p *Principal, now time.Time, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch || c.ttl <= 0 {
		return
	}
	if len(c.entries) >= c.max {
		for h, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, h)
			}
		}
		if len(c.entries) >= c.max {
			clear(c.entries) // a burst of distinct tokens: start over rather than grow
		}
	}
	c.entries[hash] = cacheEntry{p: p, expires: now.Add(c.ttl)}
}

func (c *cache) forget(hash string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, hash)
	c.epoch++
}

// dueTouch reports whether this process should write last_used_at for the token now,
// and if so marks it written.
func (c *cache) dueTouch(tokenID string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.touched[tokenID]; ok && now.Sub(last) < lastUsedEvery {
		return false
	}
	if len(c.touched) >= c.max {
		clear(c.touched)
	}
	c.touched[tokenID] = now
	return true
}
