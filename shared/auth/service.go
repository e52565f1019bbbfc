package auth

import (
	"errors"
	"log/slog"
	"time"

	"github.com/botplatform/api/shared/store"
)

// Errors Authenticate returns. Each means 401; they differ only in what the server logs
// and in the error code the client sees.
var (
	ErrMissingCredentials = errors.New("auth: no credentials")
	ErrMalformedToken     = errors.New("auth: malformed token")
	ErrUnknownToken       = errors.New("auth: unknown or revoked token")
	ErrExpiredToken       = errors.New("auth: token expired")
)

// Errors of issuance and lookups.
var (
	ErrNotFound       = errors.New("auth: not found")
	ErrInvalidExpiry  = errors.New("auth: invalid expiry")
	ErrScopeTooBroad  = errors.New("auth: requested scopes exceed the creating token's")
	ErrLimitReached   = errors.New("auth: token limit reached")
	ErrMissingRight   = errors.New("auth: missing right")
	ErrInvalidRequest = errors.New("auth: invalid request")
)

// Limits on credentials, so that one leaked token cannot mint unbounded others.
const (
	// MaxPATLifetime is the longest a personal access token may live.
	MaxPATLifetime = 365 * 24 * time.Hour
	// MaxPATsPerUser caps live personal access tokens per user.
	MaxPATsPerUser = 100
	// MaxBotTokensPerBot caps bot API tokens per bot (a bot deletion removes them all in one transaction of at most 100 writes).
	MaxBotTokensPerBot = 25
	// CacheTTL bounds how long another process may keep accepting a revoked token or
	// applying changed rights. This process forgets a revoked token at once.
	CacheTTL = 30 * time.Second
	// lastUsedEvery is how often last_used_at is written per token.
	lastUsedEvery = time.Minute
	// credentialGrace keeps an expired PAT's credential readable for a while so the
	// client hears "expired" rather than "unknown".
	credentialGrace = 30 * 24 * time.Hour
)

// Service is the credentials authority: it reads and writes accounts, users and tokens in the
// store and authenticates requests, caching principals briefly.
type Service struct {
	store store.Store
	now   func() time.Time
	log   *slog.Logger
	cache *cache
}

// Option adjusts a Service.
type Option func(*Service)

// WithCacheTTL sets how long authenticated principals are cached (0 disables the cache). The
// AWS authorizer uses 0: API Gateway already caches its answers.
func WithCacheTTL(ttl time.Duration) Option {
	return func(s *Service) { s.cache.ttl = ttl }
}

// NewService returns a Service over s. now is the clock (time.Now in production).
func NewService(s store.Store, now func() time.Time, log *slog.Logger, opts ...Option) *Service {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	svc := &Service{store: s, now: now, log: log, cache: newCache(CacheTTL, 10000)}
	for _, o := range opts {
		o(svc)
	}
	return svc
}

func notFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return ErrNotFound
	}
	return err
}

// mapCond turns a failed precondition into ErrNotFound: the thing it guarded is gone.
func mapCond(err error) error {
	if errors.Is(err, store.ErrConditionFailed) {
		return ErrNotFound
	}
	return err
}

// Store keys of the records this package owns. Everything of an account lives in its
// partition, so a lookup can only ever see the caller's own account.
func accountPK(account string) string { return "ACCT#" + account }

func accountKey(account string) store.Key {
	return store.Key{PK: accountPK(account), SK: "ACCOUNT"}
}

func userKey(account, user string) store.Key {
	return store.Key{PK: accountPK(account), SK: "USER#" + user}
}

func patKey(account, user, id string) store.Key {
	return store.Key{PK: accountPK(account), SK: "PAT#" + user + "#" + id}
}

func botTokenKey(account, bot, id string) store.Key {
	return store.Key{PK: accountPK(account), SK: "BOTTOKEN#" + bot + "#" + id}
}

func credentialKey(hash string) store.Key {
	return store.Key{PK: "CRED#" + hash, SK: "CRED"}
}

func (s *Service) clock() time.Time { return s.now().UTC() }

// stamp is now in whole seconds, the precision of every timestamp the API shows. Ids keep
// the full clock so that they still sort by creation within a second.
func stamp(now time.Time) time.Time { return now.Truncate(time.Second) }
