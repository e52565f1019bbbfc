// Package envelope is the AES-256-GCM layer the sealers share.
package envelope

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
)

// KeySize is the AES-256 key size.
const KeySize = 32

// NonceSize and Overhead are GCM's.
const (
	NonceSize = 12
	Overhead  = 16
)

// NewAEAD returns AES-256-GCM with key.
func NewAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("secrets: key is %d bytes, want %d", len(key), KeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Seal appends nonce | ciphertext | tag to header and returns it. The tag covers header and
// aad, so neither the format byte, nor an encrypted data key in the header, nor the record
// the value belongs to can be swapped. header has a fixed or length-prefixed layout, which
// makes header || aad unambiguous.
func Seal(aead cipher.AEAD, header, plaintext, aad []byte) []byte {
	out := make([]byte, len(header)+NonceSize, len(header)+NonceSize+len(plaintext)+Overhead)
	copy(out, header)
	nonce := out[len(header):]
	// Random 96-bit nonces: safe for 2^32 values per key; the sealers rotate far sooner.
	if _, err := rand.Read(nonce); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return aead.Seal(out, nonce, plaintext, additional(header, aad))
}

// Open opens what Seal returned, given the same header length.
func Open(aead cipher.AEAD, sealed []byte, headerLen int, aad []byte) ([]byte, error) {
	if len(sealed) < headerLen+NonceSize+Overhead {
		return nil, errors.New("too short")
	}
	header := sealed[:headerLen]
	nonce := sealed[headerLen : headerLen+NonceSize]
	return aead.Open(nil, nonce, sealed[headerLen+NonceSize:], additional(header, aad))
}

func additional(header, aad []byte) []byte {
	ad := make([]byte, 0, len(header)+len(aad))
	return append(append(ad, header...), aad...)
}
