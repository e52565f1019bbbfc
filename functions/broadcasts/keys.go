package broadcasts

import (
	"crypto/sha256"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// The items of this package. A bot's broadcasts share one partition; each broadcast's send
// (its recipient rows, their counters and the job's progress) has a partition of its own, so
// that a broadcast of 100,000 recipients is read and erased without touching the others:
//
//	BOT#<bot>#BCAST          BC#<broadcast>    a second-generation broadcast (GSI1: BOT#<bot>#BCAST#LIVE / <id> while not archived)
//	                         LBC#<broadcast>   a legacy reaction broadcast
//	                         COUNT#BC          how many broadcasts the bot has that are not archived
//	BOT#<bot>#BCAST#BLOCKED  SUB#<subscriber>  the subscriber blocked the bot (a send said so): later plans skip it
//	BOT#<bot>#BCAST#<id>     RUN               the send job's progress (epoch, step, phase, audience cursor)
//	                         N#<channel>#<name> a count kept with the rows (N#telegram#state#sent, N#vk#fail#blocked, ...)
//	                         RCP#<recipient>   a recipient row (GSI1: BOT#<bot>#BCAST#<id>#S#<state>#<channel> / <recipient>)
//
// Second-generation and legacy ids have their own prefixes (bc_, lbc_), so a shared route
// finds its broadcast with at most two reads and never confuses the two.

func broadcastsPK(bot string) string { return "BOT#" + bot + "#BCAST" }

func broadcastKey(bot, id string) store.Key { return store.Key{PK: broadcastsPK(bot), SK: "BC#" + id} }

func legacyKey(bot, id string) store.Key { return store.Key{PK: broadcastsPK(bot), SK: "LBC#" + id} }

const broadcastPrefix = "BC#"

func countKey(bot string) store.Key { return store.Key{PK: broadcastsPK(bot), SK: "COUNT#BC"} }

// livePK is the GSI1 partition of the bot's broadcasts that are not archived.
func livePK(bot string) string { return broadcastsPK(bot) + "#LIVE" }

func blockedPK(bot string) string { return broadcastsPK(bot) + "#BLOCKED" }

func blockedKey(bot, subscriber string) store.Key {
	return store.Key{PK: blockedPK(bot), SK: "SUB#" + subscriber}
}

// dataPK is the partition of one broadcast's send.
func dataPK(bot, id string) string { return broadcastsPK(bot) + "#" + id }

func runKey(bot, id string) store.Key { return store.Key{PK: dataPK(bot, id), SK: "RUN"} }

func counterKey(bot, id, ch, name string) store.Key {
	return store.Key{PK: dataPK(bot, id), SK: counterPrefix + ch + "#" + name}
}

const counterPrefix = "N#"

func rowKey(bot, id, recipient string) store.Key {
	return store.Key{PK: dataPK(bot, id), SK: rowPrefix + recipient}
}

const rowPrefix = "RCP#"

func rowStatePK(bot, id string, s RowState, ch string) string {
	return dataPK(bot, id) + "#S#" + string(s) + "#" + ch
}

// alphabet is the ids package's (Crockford's base32, lower case).
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// recipientID is the id of a subscriber's row in a broadcast: derived from the subscriber id,
// so that a repeated plan step writes the same rows (and MustNotExist keeps the first). An
// ordered id keeps the subscriber id's order (ids sort by creation time, the audience's
// order), so that a plan appends its rows to the partition and its state index instead of
// scattering them (4 times faster planning on SQLite: docs/performance.md).
func recipientID(subscriberID string, ordered bool) string {
	if rest, ok := strings.CutPrefix(subscriberID, "sub_"); ordered && ok && rest != "" {
		return "rcp_" + rest
	}
	h := sha256.Sum256([]byte(subscriberID))
	var b strings.Builder
	b.WriteString("rcp_")
	var acc uint64
	bits := 0
	for i := 0; b.Len() < 4+26; {
		if bits < 5 {
			acc = acc<<8 | uint64(h[i])
			i++
			bits += 8
		}
		bits -= 5
		b.WriteByte(alphabet[(acc>>bits)&31])
	}
	return b.String()
}

// The provider's message ids of a bot's WhatsApp broadcast messages, for their later
// delivery statuses:
//
//	BOT#<bot>#BCAST#WAMSG    M#<wamid>         the broadcast and recipient row the message was sent for
func waMsgPK(bot string) string { return broadcastsPK(bot) + "#WAMSG" }

func waMsgKey(bot, messageID string) store.Key {
	return store.Key{PK: waMsgPK(bot), SK: "M#" + messageID}
}
