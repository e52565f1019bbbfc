// Package secrets seals secrets at rest (bot credentials, provider keys): values the
// platform must read back, unlike tokens, which it only ever hashes.
//
// A Sealer encrypts with AES-256-GCM and binds each sealed value to caller-chosen
// associated data (aad): the record it belongs to, such as "bot_123/slack/signing-secret".
// A sealed value copied into another record, or altered in any bit, does not open.
//
// Implementations live in sub-packages: kms (AWS: envelope encryption under a KMS key, one
// data key per process cached) and keyfile (local: a key derived from the master key file
// in the data directory). Sealed values start with a format byte, so each refuses the
// other's values plainly instead of failing as if tampered.
//
// Neither plaintext nor sealed values belong in logs, errors or responses. The sealers'
// String, GoString, Format and LogValue print no key material.
package secrets

import (
	"context"
	"errors"
)

// Sealer seals and opens secrets. Implementations are safe for concurrent use.
type Sealer interface {
	// Seal encrypts plaintext bound to aad. aad is not secret and not stored: Open needs
	// the same aad.
	Seal(ctx context.Context, plaintext, aad []byte) ([]byte, error)
	// Open returns the plaintext of sealed, or an error matching ErrOpen when sealed was
	// altered, sealed with other aad or another key, or not made by this kind of Sealer.
	Open(ctx context.Context, sealed, aad []byte) ([]byte, error)
}

// ErrOpen means a sealed value cannot be opened: tampered, wrong aad, wrong key or wrong
// format. Deliberately one error, so it tells an attacker nothing about which.
var ErrOpen = errors.New("secrets: cannot open sealed value")

// Format bytes: the first byte of every sealed value.
const (
	// FormatKeyFile: 0x01 | nonce (12) | ciphertext and tag.
	FormatKeyFile byte = 0x01
	// FormatKMS: 0x02 | encrypted data key length (2, big endian) | encrypted data key |
	// nonce (12) | ciphertext and tag.
	FormatKMS byte = 0x02
)
