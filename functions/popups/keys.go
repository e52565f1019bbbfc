package popups

import (
	"github.com/botplatform/api/shared/store"
)

// Every item of this package lives in one of two partitions of the bot:
//
//	BOT#<bot>#POPUPS    POP#<popup>                 a popup (its whole definition, revision)
//	                    ORIGIN#<origin>#<popup>     the popup allows <origin> (CORS is one query)
//	                    COUNT#POP                   how many popups the bot has (the limit)
//	BOT#<bot>#POPSTATS  <popup>#<yyyy-mm-dd>#<variant>#<type>
//	                                                an atomic counter (store.Add) of one event
//	                                                type, UTC day and variant ("-": none)
//
// A popup is also in GSI1 by status (BOT#<bot>#POPUPS#S#<active|paused>, sorted by id, so by
// creation time): the status filter of the list and the script's read of the active popups
// are each one exact query.
//
// The counters of all the bot's popups share one partition, rather than one partition per
// popup: a deleted popup's counters are then still found (and erased) with the bot's, and a
// popup's stats over a range are one query (From <popup>#<from>, To <popup>#<to>#~). The
// counters expire StatsRetention after their day, so a deleted popup's do not stay forever.

func popupsPK(bot string) string { return "BOT#" + bot + "#POPUPS" }

func popupKey(bot, id string) store.Key { return store.Key{PK: popupsPK(bot), SK: "POP#" + id} }

const popupPrefix = "POP#"

func originPrefix(origin string) string { return "ORIGIN#" + origin + "#" }

func originKey(bot, origin, id string) store.Key {
	return store.Key{PK: popupsPK(bot), SK: originPrefix(origin) + id}
}

func countKey(bot string) store.Key { return store.Key{PK: popupsPK(bot), SK: "COUNT#POP"} }

func byStatusPK(bot string, s Status) string { return popupsPK(bot) + "#S#" + string(s) }

func statsPK(bot string) string { return "BOT#" + bot + "#POPSTATS" }

// noVariant is the variant of the events of a popup without an experiment. Variant keys
// start with a letter, so it never meets one.
const noVariant = "-"

func statKey(bot, popup, day, variant string, t EventType) store.Key {
	return store.Key{PK: statsPK(bot), SK: popup + "#" + day + "#" + variant + "#" + string(t)}
}
