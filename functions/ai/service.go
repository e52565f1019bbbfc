// Package ai is the managed AI family (spec 4.8): one generation route in front of three AI
// providers, idempotent as Stripe's API is (an Idempotency-Key replays the first answer),
// routed by profile with fallback across the platform's managed keys, never falling back
// from an account's own key (BYOK) to paid managed AI, metered per request in tokens and
// exact integer costs, and the account's usage by day, profile and provider.
//
// The provider keyring, routes and prices are the operator's (configuration and the admin
// CLI): no customer route or MCP tool reads or changes them (docs/ai.md).
package ai

import (
	"context"
	"log/slog"
	"strings"
	"time"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/secrets"
	"github.com/botplatform/api/shared/store"
)

// Config is what the service is built from.
type Config struct {
	Store store.Store
	// Sealer seals the accounts' own provider keys (BYOK) at rest; nil refuses to store one.
	Sealer secrets.Sealer
	Now    func() time.Time
	Log    *slog.Logger
	// Clients are the providers' API clients, by provider (aiapi.OpenAI...).
	Clients map[string]aiapi.Client
	// Keys is the managed keyring: the platform's API key of each provider ("" or absent:
	// the provider has no managed key, and only an account's own key reaches it).
	Keys map[string]string
	// Routes are the profiles' provider models, in order (DefaultRoutes when nil).
	Routes map[string][]Target
	// Prices are the models' prices by "provider:model" (DefaultPrices when nil). A model
	// without a price is metered at 0 and logged: the operator's list is incomplete.
	Prices map[string]Price
}

// Service serves the managed AI routes.
type Service struct {
	store   store.Store
	sealer  secrets.Sealer
	now     func() time.Time
	log     *slog.Logger
	clients map[string]aiapi.Client
	keys    map[string]string
	routes  map[string][]Target
	prices  map[string]Price
}

// New builds the service.
func New(c Config) *Service {
	s := &Service{store: c.Store, sealer: c.Sealer, now: c.Now, log: c.Log, clients: c.Clients, keys: c.Keys,
		routes: c.Routes, prices: c.Prices}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.routes == nil {
		s.routes = DefaultRoutes
	}
	if s.prices == nil {
		s.prices = DefaultPrices
	}
	return s
}

// ownKeys reads which providers the account has its own key of, sealed, in one query of
// its partition: a request reads it once, whatever its route.
func (s *Service) ownKeys(ctx context.Context, account string) (map[string]sealedKey, error) {
	out := map[string]sealedKey{}
	q := store.Query{PK: aiPK(account), Prefix: byokPrefix}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			k, err := store.Decode[sealedKey](it)
			if err != nil {
				return nil, err
			}
			out[strings.TrimPrefix(it.SK, byokPrefix)] = k
		}
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// open opens the account's sealed key of provider.
func (s *Service) open(ctx context.Context, account, provider string, k sealedKey) (string, error) {
	if s.sealer == nil {
		return "", errNoSealer
	}
	plain, err := s.sealer.Open(ctx, k.Sealed, byokAAD(account, provider))
	if err != nil {
		return "", err
	}
	return string(plain), nil
}
