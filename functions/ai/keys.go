package ai

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/botplatform/api/shared/store"
)

// An account's managed AI state lives in one partition of the account:
//
//	ACCOUNT#<account>#AI  IDEM#<sha256 of the key>    an Idempotency-Key's request and answer
//	                                                  (expires 24 hours after the first use)
//	                      USAGE#<day>#<profile>#<provider>#<billing>#<metric>
//	                                                  a usage counter of one day (Count)
//	                      BYOK#<provider>             the account's own API key, sealed
//
// The Idempotency-Key itself is never stored, only its hash. The platform's ledger of managed
// usage, across accounts, is outside every account (reconcile.go):
//
//	AIPLATFORM#LEDGER#<day>#<shard>  <provider>#<model>#<metric>  a counter (Count)

func aiPK(account string) string { return "ACCOUNT#" + account + "#AI" }

func idemKey(account, key string) store.Key {
	return store.Key{PK: aiPK(account), SK: "IDEM#" + hashHex(key)}
}

const usagePrefix = "USAGE#"

func usageKey(account, day, profile, provider, billing, metric string) store.Key {
	return store.Key{PK: aiPK(account), SK: usagePrefix + day + "#" + profile + "#" + provider + "#" + billing + "#" + metric}
}

const byokPrefix = "BYOK#"

func byokKey(account, provider string) store.Key {
	return store.Key{PK: aiPK(account), SK: byokPrefix + provider}
}

// byokAAD binds a sealed key to its account and provider: copied elsewhere, it does not open.
func byokAAD(account, provider string) []byte {
	return []byte(account + "/ai/byok/" + provider)
}

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func item(key store.Key, rev int64, v any) (store.Item, error) {
	b, err := store.Encode(v)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{Key: key, Revision: rev, Data: b}, nil
}
