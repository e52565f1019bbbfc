package storelog

import (
	"crypto/sha256"
	"fmt"
	"strings"
	"time"

	"github.com/botplatform/api/shared/store"
)

// Every item of the log lives in one of three kinds of partition of its bot:
//
//	BOT#<bot>#EV#<day>#<name>#<shard>  <at>#<id>               an event (its JSON), in time order
//	BOT#<bot>#EVID#<shard>             <id>                    the event's id: MustNotExist makes
//	                                                           appends idempotent
//	BOT#<bot>#EVAGG#<shard>            <day>#<name>#<channel>  the aggregate: an atomic counter
//	                                                           (Count) of the day's events of the
//	                                                           name and channel ("-": none)
//
// <day> is the event's UTC day (2006-01-02), <at> its Unix milliseconds in 16 digits (so
// that sort keys order by time, then id), <shard> a digit from the event id's hash. An event
// with a subscriber is also in GSI1 by subscriber (BOT#<bot>#EVSUB#<subscriber>, <at>#<id>).
//
// Why shards: DynamoDB serves one partition key from one partition, which takes about 1,000
// writes a second. The events of a bot's busiest name on one day, the ids of all its events
// and its counters are each spread over Shards partitions, so a bot has to append eight
// times that before any one partition throttles; every event, its id and its counter fall in
// the same shard. Why day partitions: a report over a range reads only the days (and names)
// it covers, and the counters say which of those partitions hold anything (Scan reads no
// empty one).

// Shards is how many partitions each kind of item of a bot is spread over.
const Shards = 8

const dayLayout = "2006-01-02"

func botPrefix(bot string) string { return "BOT#" + bot + "#" }

// shard is the shard of the event id.
func shard(id string) int {
	sum := sha256.Sum256([]byte(id))
	return int(sum[0]) % Shards
}

func eventPK(bot, day, name string, s int) string {
	return fmt.Sprintf("%sEV#%s#%s#%d", botPrefix(bot), day, name, s)
}

func idKey(bot, id string) store.Key {
	return store.Key{PK: idPK(bot, shard(id)), SK: id}
}

func idPK(bot string, s int) string { return fmt.Sprintf("%sEVID#%d", botPrefix(bot), s) }

func aggPK(bot string, s int) string { return fmt.Sprintf("%sEVAGG#%d", botPrefix(bot), s) }

// noChannel is the channel of events without one in counter keys: channels are lower-case
// letters, digits and _, so it meets none.
const noChannel = "-"

func aggKey(bot string, s int, day, name, channel string) store.Key {
	if channel == "" {
		channel = noChannel
	}
	return store.Key{PK: aggPK(bot, s), SK: day + "#" + name + "#" + channel}
}

// parseAgg reads a counter's sort key.
func parseAgg(sk string) (day, name, channel string, ok bool) {
	day, rest, ok1 := strings.Cut(sk, "#")
	name, channel, ok2 := strings.Cut(rest, "#")
	if channel == noChannel {
		channel = ""
	}
	return day, name, channel, ok1 && ok2
}

func subPK(bot, subscriber string) string { return botPrefix(bot) + "EVSUB#" + subscriber }

// atKey is the sort key prefix of the events at ms.
func atKey(ms int64) string { return fmt.Sprintf("%016d", ms) }

func eventSK(at time.Time, id string) string { return atKey(at.UnixMilli()) + "#" + id }

// rangeKeys bound the sort keys of the events in [from, to) (Unix ms), both inclusive as
// store.Query takes them; after, when set, starts the range at the event (from, after). '$'
// follows '#': every key of the last millisecond sorts before it.
func rangeKeys(from, to int64, after string) (lo, hi string) {
	lo = atKey(from)
	if after != "" {
		lo += "#" + after
	}
	return lo, atKey(to-1) + "$"
}
