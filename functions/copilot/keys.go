package copilot

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/botplatform/api/shared/store"
)

// Storage layout. A proposal lives under its bot, so that the bot's purge erases it, and a
// pointer under its account finds it from its id alone (the /api/copilot/proposals/{id}
// routes name no bot), and only within the caller's account:
//
//	BOT#<bot>#CPP      <rct_id>#<cpp_id>  a proposal (Proposal)
//	ACCT#<acct>#CPP    <cpp_id>           where it is ({"bot_id", "reaction_id"})
//	ACCT#<acct>#CPPKEY <sha256 of key>    the proposal a create with that Idempotency-Key made
//	                                      (once), expiring after ai.IdempotencyTTL
//
// Ids sort by creation time, so a reaction's proposals (a prefix query, reversed) list
// newest first.
func proposalsPK(bot string) string { return "BOT#" + bot + "#CPP" }

func proposalKey(bot, reaction, id string) store.Key {
	return store.Key{PK: proposalsPK(bot), SK: reaction + "#" + id}
}

func pointersPK(account string) string { return "ACCT#" + account + "#CPP" }

func pointerKey(account, id string) store.Key { return store.Key{PK: pointersPK(account), SK: id} }

// pointer is where a proposal is.
type pointer struct {
	BotID      string `json:"bot_id"`
	ReactionID string `json:"reaction_id"`
}

// idemKey is where a create's Idempotency-Key is kept: as its hash, as managed AI keeps its
// keys (a key is the client's string, not ours to store).
func idemKey(account, key string) store.Key {
	return store.Key{PK: "ACCT#" + account + "#CPPKEY", SK: sha256Hex(key)}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// created is what a create with an Idempotency-Key made: the proposal, and the hash of the
// request it was made for (the reaction and the body).
type created struct {
	ProposalID  string `json:"proposal_id"`
	RequestHash string `json:"request_hash"`
}
