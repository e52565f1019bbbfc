package crm

import (
	"fmt"

	"github.com/botplatform/api/shared/store"
)

// A connection's sync state lives in a partition of its own, so that disconnecting erases
// it in one purge and a sync of 100,000 subscribers does not grow the bot's CRM partition:
//
//	BOT#<bot>#CRMSYNC#<connection>  LINK#<subscriber>        the subscriber's CRM record and the
//	                                                         values both sides last agreed on
//	                                REC#<record id>          which subscriber a record is (reconcile
//	                                                         reads the CRM's changed records)
//	                                DEAL#<deal id>           which subscriber a deal the sync opened
//	                                                         is (reconcile reads the changed deals)
//	                                JOB#<job>                a sync job (revisioned)
//	                                JOBERR#<job>#<seq, 6>    one per-record error of a job
//	                                ACTIVE                   the job running now: one at a time
//	                                WATERMARK                where the next reconcile reads the
//	                                                         CRM's changes from
//	                                CONFLICT#<conflict>      a conflict (revisioned)
//	                                OPEN#<subscriber>#<sha256 of target>  the open conflict of
//	                                                         one field of one subscriber

func syncPK(bot, conn string) string { return "BOT#" + bot + "#CRMSYNC#" + conn }

func linkKey(bot, conn, sub string) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: "LINK#" + sub}
}

func recordKey(bot, conn, recordID string) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: "REC#" + hashHex(recordID)}
}

func dealKey(bot, conn, dealID string) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: "DEAL#" + hashHex(dealID)}
}

const jobPrefix = "JOB#"

func jobKey(bot, conn, job string) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: jobPrefix + job}
}

func jobErrorPrefix(job string) string { return "JOBERR#" + job + "#" }

func jobErrorKey(bot, conn, job string, seq int) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: jobErrorPrefix(job) + fmt.Sprintf("%06d", seq)}
}

func activeKey(bot, conn string) store.Key { return store.Key{PK: syncPK(bot, conn), SK: "ACTIVE"} }

func watermarkKey(bot, conn string) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: "WATERMARK"}
}

const conflictPrefix = "CONFLICT#"

func conflictKey(bot, conn, id string) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: conflictPrefix + id}
}

func openConflictKey(bot, conn, sub, target string) store.Key {
	return store.Key{PK: syncPK(bot, conn), SK: "OPEN#" + sub + "#" + hashHex(target)}
}
