package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash/crc32"
	"strings"
)

// TokenKind tells personal access tokens, bot API tokens and SDK installation tokens apart.
type TokenKind string

// The credential kinds. /api/* accepts KindPAT and KindBot; KindInstallation is the customer
// SDK's device credential, which only /sdk/v1/* accepts (functions/customersdk keeps them:
// no credential record exists for one, so /api/* finds none and answers 401).
const (
	KindPAT          TokenKind = "pat"
	KindBot          TokenKind = "bot"
	KindInstallation TokenKind = "installation"
)

// Token prefixes. Distinct prefixes let a secret scanner (and a human) tell the kinds
// apart and let us refuse a token of the wrong kind before any lookup.
const (
	PATPrefix          = "mbp_"
	BotPrefix          = "mbb_"
	InstallationPrefix = "mbi_"
)

const (
	base62      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	secretLen   = 30 // ~178 bits of randomness
	checksumLen = 6  // CRC32 in base62 (62^6 > 2^32)
	tokenLen    = 4 + secretLen + checksumLen
)

// NewToken mints a token of the kind: prefix, 30 random base62 characters, and a 6-character
// CRC32 checksum of the prefix and the random part, so that a typo, a truncated paste or a
// changed prefix is rejected offline (as GitHub's ghp_ tokens are) and scanners can verify a
// candidate without a lookup.
func NewToken(kind TokenKind) string {
	prefix := PATPrefix
	switch kind {
	case KindBot:
		prefix = BotPrefix
	case KindInstallation:
		prefix = InstallationPrefix
	}
	secret := make([]byte, secretLen)
	// Rejection sampling keeps every character uniformly likely: 248 = 4*62.
	buf := make([]byte, 64)
	for i := 0; i < secretLen; {
		if _, err := rand.Read(buf); err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		for _, b := range buf {
			if b < 248 && i < secretLen {
				secret[i] = base62[b%62]
				i++
			}
		}
	}
	return prefix + string(secret) + checksum(prefix, secret)
}

// checksum covers the prefix too: a PAT whose prefix is changed to the bot prefix is then
// refused before any lookup, like any other one-character change.
func checksum(prefix string, secret []byte) string {
	sum := crc32.Update(crc32.ChecksumIEEE([]byte(prefix)), crc32.IEEETable, secret)
	out := make([]byte, checksumLen)
	for i := checksumLen - 1; i >= 0; i-- {
		out[i] = base62[sum%62]
		sum /= 62
	}
	return string(out)
}

// ParseToken checks a token's shape and checksum without touching storage and returns its kind.
func ParseToken(tok string) (TokenKind, bool) {
	if len(tok) != tokenLen {
		return "", false
	}
	var kind TokenKind
	switch tok[:4] {
	case PATPrefix:
		kind = KindPAT
	case BotPrefix:
		kind = KindBot
	case InstallationPrefix:
		kind = KindInstallation
	default:
		return "", false
	}
	body := tok[4:]
	for i := 0; i < len(body); i++ {
		if strings.IndexByte(base62, body[i]) < 0 {
			return "", false
		}
	}
	if checksum(tok[:4], []byte(body[:secretLen])) != body[secretLen:] {
		return "", false
	}
	return kind, true
}

// HashToken is the only form in which a token is stored: SHA-256 of the whole token, hex.
// Tokens carry ~178 random bits, so a fast unsalted hash is enough (no dictionary to attack).
func HashToken(tok string) string {
	sum := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(sum[:])
}

// MaskToken returns the listing form: the prefix and the last four characters.
func MaskToken(tok string) string {
	if len(tok) < 8 {
		return "****"
	}
	return tok[:4] + strings.Repeat("*", 8) + tok[len(tok)-4:]
}
