package emaildomains

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/botplatform/api/shared/store"
)

// Every item of a bot lives in one of two partitions of the bot (the kernel has checked the
// bot is the caller's before a handler runs):
//
//	BOT#<bot>#EMAIL    DOM#<domain>             a sending domain (records, sealed DKIM key)
//	                   DNAME#<name>             the id of the bot's domain of that name (unique
//	                                            per bot; what Signer and inbound mail look up)
//	                   RT#<route>               an inbound route
//	                   RTM#<domain>#<match>     makes a route's match unique per domain
//	                   COUNT#DOM, COUNT#RT      how many domains, routes the bot has (limits)
//	                   COUNT#RTD#<domain>       how many routes a domain has (a domain with
//	                                            routes is not deleted)
//	BOT#<bot>#EMAILIN  MSG#<message>            a stored inbound message (expires)
//	                   SEEN#<sha256 of its key> an inbound message already taken (expires with it)
//	                   DAY#<yyyy-mm-dd>         inbound messages taken that day (expires)
//
// One item is deployment-wide, outside every bot, because a domain is someone's in the whole
// deployment (two bots cannot both verify it) and inbound mail names a domain, not a bot:
//
//	EMAILDOMAIN#<name> CLAIM                    the bot and domain id that verified the name
//
// Inbound messages have their own partition: mail arrives at the rate senders choose, and
// the bot's configuration reads must not share a partition with it.

func emailPK(bot string) string   { return "BOT#" + bot + "#EMAIL" }
func inboundPK(bot string) string { return "BOT#" + bot + "#EMAILIN" }

const (
	domainPrefix  = "DOM#"
	routePrefix   = "RT#"
	messagePrefix = "MSG#"
)

func domainKey(bot, id string) store.Key { return store.Key{PK: emailPK(bot), SK: domainPrefix + id} }

func nameKey(bot, name string) store.Key { return store.Key{PK: emailPK(bot), SK: "DNAME#" + name} }

func routeKey(bot, id string) store.Key { return store.Key{PK: emailPK(bot), SK: routePrefix + id} }

func matchKey(bot, domainID, match string) store.Key {
	return store.Key{PK: emailPK(bot), SK: "RTM#" + domainID + "#" + match}
}

func countKey(bot, what string) store.Key { return store.Key{PK: emailPK(bot), SK: "COUNT#" + what} }

func messageKey(bot, id string) store.Key {
	return store.Key{PK: inboundPK(bot), SK: messagePrefix + id}
}

// seenKey hashes the message's idempotency key: it is text from the sender (a Message-ID),
// of any length and any characters.
func seenKey(bot, key string) store.Key {
	sum := sha256.Sum256([]byte(key))
	return store.Key{PK: inboundPK(bot), SK: "SEEN#" + hex.EncodeToString(sum[:])}
}

func dayKey(bot, day string) store.Key { return store.Key{PK: inboundPK(bot), SK: "DAY#" + day} }

func claimKey(name string) store.Key { return store.Key{PK: "EMAILDOMAIN#" + name, SK: "CLAIM"} }

// pointer is what a DNAME item holds.
type pointer struct {
	DomainID string `json:"domain_id"`
}

// claim is what a deployment-wide EMAILDOMAIN item holds. A releasing claim belongs to a
// deleted domain whose name is being deregistered from the provider (release.go): it still
// holds the name against every bot, and routes no mail.
type claim struct {
	BotID     string `json:"bot_id"`
	DomainID  string `json:"domain_id"`
	Releasing bool   `json:"releasing,omitempty"`
}
