// Package oauthstate keeps the single-use states of OAuth starts (the CRM and Meta
// connections): a random state goes to the provider's dialog, its start waits in the store
// under the state's hash, and the callback consumes it once. A state is a bearer secret for
// a few minutes, so the store keeps only its hash, and the answers to an unknown, expired,
// used or foreign state are one error that tells them apart to nobody.
package oauthstate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"

	"github.com/botplatform/api/shared/store"
)

// MaxLen bounds a state read from a callback's query (New makes 43 characters).
const MaxLen = 128

// ErrInvalid is the answer to a state that is missing, too long, unknown, expired, already
// consumed, or refused by the caller's check.
var ErrInvalid = errors.New("oauthstate: invalid state")

// New returns a fresh state: 32 random bytes in base64url.
func New() string {
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// Hash is the hex SHA-256 of state: how the store and associated data name it.
func Hash(state string) string {
	sum := sha256.Sum256([]byte(state))
	return hex.EncodeToString(sum[:])
}

// Key is where a family keeps the pending start of state: its own partition prefix
// ("CRMSTATE"), so that one family's states cannot be consumed by another's callback.
func Key(prefix, state string) store.Key {
	return store.Key{PK: prefix + "#" + Hash(state), SK: "STATE"}
}

// Consume reads the start pending under state, lets ok accept it (its age, its provider),
// and deletes it, so that of two callbacks with one state exactly one gets it. Every refusal
// is ErrInvalid; a store failure is returned as it is.
func Consume[T any](ctx context.Context, st store.Store, prefix, state string, ok func(T) bool) (T, error) {
	var zero T
	if state == "" || len(state) > MaxLen {
		return zero, ErrInvalid
	}
	key := Key(prefix, state)
	it, err := st.Get(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return zero, ErrInvalid
	}
	if err != nil {
		return zero, err
	}
	pending, err := store.Decode[T](it)
	if err != nil {
		return zero, err
	}
	if !ok(pending) {
		return zero, ErrInvalid
	}
	if err := st.Delete(ctx, key, store.RevisionIs(it.Revision)); err != nil {
		if errors.Is(err, store.ErrConditionFailed) {
			return zero, ErrInvalid
		}
		return zero, err
	}
	return pending, nil
}
