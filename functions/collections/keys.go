package collections

import (
	"strings"

	"github.com/botplatform/api/shared/store"
)

// Every item of this package lives in a partition that starts with BOT#<bot>#: the kernel
// has checked that the bot is the caller's before any handler runs, so a key built from the
// path's bot can never reach another tenant's data.
//
//	BOT#<bot>#COLLECTIONS  COL#<col>        the collection (schema, name, revision)
//	                       NAME#<name>      claim of a name, lower-cased: names are unique per bot
//	                       COUNT            how many collections the bot has (limit)
//	                       RECORDS#<col>    how many records the collection has (limit, record_count)
//	                       PURGE#<col>      a deleted collection whose items are being purged
//	BOT#<bot>#COL#<col>#REC     <rec>                a record (current and pending version)
//	BOT#<bot>#COL#<col>#EXT     <external key>       claim of an external key -> record id
//	BOT#<bot>#COL#<col>#IDX#<f> <token>#<rec>        index entry of indexed field f
//	BOT#<bot>#COL#<col>#BATCH   <batch>              status of a batch upsert
//
// One index partition per field (rather than per value) keeps every item of a collection
// enumerable, so removing a field or the collection can purge its entries.

func collectionsPK(bot string) string { return "BOT#" + bot + "#COLLECTIONS" }

func collectionKey(bot, col string) store.Key {
	return store.Key{PK: collectionsPK(bot), SK: "COL#" + col}
}

func nameKey(bot, name string) store.Key {
	return store.Key{PK: collectionsPK(bot), SK: "NAME#" + strings.ToLower(name)}
}

func collectionCountKey(bot string) store.Key {
	return store.Key{PK: collectionsPK(bot), SK: "COUNT"}
}

func recordCountKey(bot, col string) store.Key {
	return store.Key{PK: collectionsPK(bot), SK: "RECORDS#" + col}
}

func tombstoneKey(bot, col string) store.Key {
	return store.Key{PK: collectionsPK(bot), SK: "PURGE#" + col}
}

func colPK(bot, col, kind string) string { return "BOT#" + bot + "#COL#" + col + "#" + kind }

func recordsPK(bot, col string) string { return colPK(bot, col, "REC") }

func recordKey(bot, col, rec string) store.Key {
	return store.Key{PK: recordsPK(bot, col), SK: rec}
}

func externalPK(bot, col string) string { return colPK(bot, col, "EXT") }

func externalKey(bot, col, key string) store.Key {
	return store.Key{PK: externalPK(bot, col), SK: key}
}

func indexPK(bot, col, field string) string { return colPK(bot, col, "IDX#"+field) }

func indexKey(bot, col, field, token, rec string) store.Key {
	return store.Key{PK: indexPK(bot, col, field), SK: token + "#" + rec}
}

func batchPK(bot, col string) string { return colPK(bot, col, "BATCH") }

func batchKey(bot, col, batch string) store.Key {
	return store.Key{PK: batchPK(bot, col), SK: batch}
}
