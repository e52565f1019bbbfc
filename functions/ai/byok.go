package ai

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	aiapi "github.com/botplatform/api/shared/ai"
	"github.com/botplatform/api/shared/store"
)

// An account's own provider keys (bring your own key) are the operator's to set, at the
// account's request (admin CLI, docs/ai.md): a request routed to a provider the account has
// a key of is made with that key, and its failure is the answer; it never falls back to the
// platform's paid managed keys.

var errNoSealer = errors.New("ai: this process has no sealer for provider keys")

// sealedKey is an account's key as stored: sealed, with what identifies it without opening it.
type sealedKey struct {
	Sealed []byte `json:"sealed"`
	// Fingerprint is the first 12 hex digits of the key's SHA-256: enough for an operator to
	// tell two keys apart, nothing to call the provider with.
	Fingerprint string    `json:"fingerprint"`
	SetAt       time.Time `json:"set_at"`
}

// KeyInfo describes an account's own key without revealing it.
type KeyInfo struct {
	Provider    string    `json:"provider"`
	Fingerprint string    `json:"fingerprint"`
	SetAt       time.Time `json:"set_at"`
}

// maxKeyLen bounds a provider key (the providers' keys are under 200 characters).
const maxKeyLen = 1024

// SetKey stores (or replaces) the account's own key of provider, sealed.
func (s *Service) SetKey(ctx context.Context, account, provider, key string) (KeyInfo, error) {
	key = strings.TrimSpace(key)
	switch {
	case !slices.Contains(aiapi.Providers, provider):
		return KeyInfo{}, fmt.Errorf("unknown provider %q (one of %s)", provider, strings.Join(aiapi.Providers, ", "))
	case key == "" || len(key) > maxKeyLen || strings.ContainsAny(key, " \t\r\n"):
		return KeyInfo{}, errors.New("the key must be 1 to 1024 characters without spaces")
	case s.sealer == nil:
		return KeyInfo{}, errNoSealer
	}
	sealed, err := s.sealer.Seal(ctx, []byte(key), byokAAD(account, provider))
	if err != nil {
		return KeyInfo{}, err
	}
	sum := sha256.Sum256([]byte(key))
	k := sealedKey{Sealed: sealed, Fingerprint: hex.EncodeToString(sum[:])[:12], SetAt: s.now().UTC().Truncate(time.Second)}
	it, err := item(byokKey(account, provider), 1, k)
	if err != nil {
		return KeyInfo{}, err
	}
	if err := s.store.Put(ctx, it, store.Always); err != nil {
		return KeyInfo{}, err
	}
	return KeyInfo{Provider: provider, Fingerprint: k.Fingerprint, SetAt: k.SetAt}, nil
}

// DeleteKey removes the account's own key of provider; requests go to managed keys again.
func (s *Service) DeleteKey(ctx context.Context, account, provider string) error {
	return s.store.Delete(ctx, byokKey(account, provider), store.Always)
}

// Keys lists the account's own keys.
func (s *Service) Keys(ctx context.Context, account string) ([]KeyInfo, error) {
	own, err := s.ownKeys(ctx, account)
	if err != nil {
		return nil, err
	}
	out := []KeyInfo{}
	for _, p := range aiapi.Providers {
		if k, ok := own[p]; ok {
			out = append(out, KeyInfo{Provider: p, Fingerprint: k.Fingerprint, SetAt: k.SetAt})
		}
	}
	return out, nil
}
