package segments

import (
	"fmt"

	"github.com/botplatform/api/shared/store"
)

// Every item of this package lives in one of two partitions of the bot:
//
//	BOT#<bot>#SEGMENTS       SEG#<segment>        a segment (name, source, count; no members)
//	                         COUNT#SEG            how many segments the bot has (the limit)
//	BOT#<bot>#SEGMEMBERS     <segment>#<chunk>    up to ChunkSize member ids, sorted; chunk is
//	                                              a 6-digit index from 000000
//
// Members are kept in chunks of ids rather than one item per member: a 100,000-member
// cohort is then 100 items written in a handful of transactions (not 100,000 writes), a
// page of members is one or two reads, and deleting a segment is one or two transactions.
// The members of every segment of a bot share one partition so that the purge of a bot
// erases two partitions whatever its segments were.

func segmentsPK(bot string) string { return "BOT#" + bot + "#SEGMENTS" }

const segmentPrefix = "SEG#"

func segmentKey(bot, id string) store.Key {
	return store.Key{PK: segmentsPK(bot), SK: segmentPrefix + id}
}

func countKey(bot string) store.Key { return store.Key{PK: segmentsPK(bot), SK: "COUNT#SEG"} }

func membersPK(bot string) string { return "BOT#" + bot + "#SEGMEMBERS" }

func chunkKey(bot, id string, chunk int) store.Key {
	return store.Key{PK: membersPK(bot), SK: fmt.Sprintf("%s#%06d", id, chunk)}
}
