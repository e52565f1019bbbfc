package emailcampaigns

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/botplatform/api/shared/store"
)

// The items of this package. A bot's campaigns share one partition; each campaign's send
// (its recipient rows, their counters, its link table and job progress) has a partition of
// its own, so that a campaign of 100,000 recipients is read and erased without touching the
// others:
//
//	BOT#<bot>#ECMP         CMP#<campaign>     a campaign (GSI1: BOT#<bot>#ECMP#S#<state> / <campaign>)
//	                       COUNT#CMP          how many campaigns the bot has that are not archived
//	BOT#<bot>#ECMP#<cmp>   RUN                the send job's progress (epoch, step, phase, audience cursor)
//	                       LINKS              the link table: the tracked URLs, by index
//	                       N#<counter>        a count kept with the rows (N#state#sent, N#skip#no_email, N#ev#opened, ...)
//	                       L#<nnn>#clicks     clicks of link nnn; L#<nnn>#clickers: recipients who clicked it
//	                       ADDR#<sha256>      the claim of a lower-cased address by its one planned row
//	                       RCP#<recipient>    a recipient row (GSI1: BOT#<bot>#ECMP#<cmp>#S#<state> / <recipient>;
//	                                          once sent, GSI2: BOT#<bot>#ECMP#MSG / <cmp>#<recipient>)
//	EMAILMSG#<message id>  REF                the recipient a provider's message id belongs to
//
// The message-id pointers are the one kind of item outside BOT#<bot>#: a provider's event
// names only the message. They hold ids, no address, and the purge finds them through the
// sent rows' GSI2 entries (purge.go).

func campaignsPK(bot string) string { return "BOT#" + bot + "#ECMP" }

// campaignPrefix begins the sort key of every campaign in the bot's campaigns partition.
const campaignPrefix = "CMP#"

func campaignKey(bot, id string) store.Key {
	return store.Key{PK: campaignsPK(bot), SK: campaignPrefix + id}
}

func countKey(bot string) store.Key { return store.Key{PK: campaignsPK(bot), SK: "COUNT#CMP"} }

func byStatePK(bot string, s State) string { return campaignsPK(bot) + "#S#" + string(s) }

// dataPK is the partition of one campaign's send.
func dataPK(bot, campaign string) string { return campaignsPK(bot) + "#" + campaign }

func runKey(bot, campaign string) store.Key { return store.Key{PK: dataPK(bot, campaign), SK: "RUN"} }

func linksKey(bot, campaign string) store.Key {
	return store.Key{PK: dataPK(bot, campaign), SK: "LINKS"}
}

func counterKey(bot, campaign, name string) store.Key {
	return store.Key{PK: dataPK(bot, campaign), SK: "N#" + name}
}

// counterPrefix is the prefix of every counter of a campaign (one query reads them all).
const counterPrefix = "N#"

func linkCounterKey(bot, campaign string, link int, what string) store.Key {
	return store.Key{PK: dataPK(bot, campaign), SK: fmt.Sprintf("L#%03d#%s", link, what)}
}

const linkCounterPrefix = "L#"

// addressKey is the claim of a lower-cased address: hashed, so the key is bounded and the
// address is not spelled in a key.
func addressKey(bot, campaign, lower string) store.Key {
	h := sha256.Sum256([]byte(lower))
	return store.Key{PK: dataPK(bot, campaign), SK: "ADDR#" + hex.EncodeToString(h[:])}
}

func rowKey(bot, campaign, recipient string) store.Key {
	return store.Key{PK: dataPK(bot, campaign), SK: rowPrefix + recipient}
}

const rowPrefix = "RCP#"

func rowStatePK(bot, campaign string, s RowState) string {
	return dataPK(bot, campaign) + "#S#" + string(s)
}

// sentIndexPK is the GSI2 partition of every sent row of a bot, for the purge of their
// message-id pointers.
func sentIndexPK(bot string) string { return campaignsPK(bot) + "#MSG" }

func pointerKey(messageID string) store.Key {
	return store.Key{PK: "EMAILMSG#" + bareMessageID(messageID), SK: "REF"}
}

// bareMessageID is a message id without the angle brackets an SMTP Message-ID carries, so
// that "<a@b>" and "a@b" (how providers report it) find the same pointer.
func bareMessageID(id string) string {
	return strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(id), "<"), ">")
}

// alphabet is the ids package's (Crockford's base32, lower case), so recipient ids look
// like every other id.
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// recipientID is the id of a subscriber's row in a campaign: derived from the subscriber id,
// so that a repeated plan step writes the same rows (and MustNotExist keeps the first).
func recipientID(subscriberID string) string {
	h := sha256.Sum256([]byte(subscriberID))
	var b strings.Builder
	b.WriteString("rcp_")
	// 26 characters of 5 bits: the first 130 bits of the hash.
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
