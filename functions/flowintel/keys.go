package flowintel

import "github.com/botplatform/api/shared/store"

// Storage layout. The counters are shared/flowstats' (written by the runtime, under
// BOT#<bot>#FLOWSTATS#<day>); this package keeps:
//
//	ACCT#<acct>#FLOWINTEL  POLICY          the account's policy (revisioned)
//	BOT#<bot>#FLOWINTEL    JOB#<job>       a reaggregation job
//	                       ACTIVE          the bot's running job (one at a time)
//	                       STARTS#<day>    how many jobs the bot started that UTC day
//
// Job ids sort by creation time, so the jobs list (a reverse prefix query) is newest first.

func policyKey(acct string) store.Key {
	return store.Key{PK: "ACCT#" + acct + "#FLOWINTEL", SK: "POLICY"}
}

func botPK(bot string) string { return "BOT#" + bot + "#FLOWINTEL" }

const jobPrefix = "JOB#"

func jobKey(bot, id string) store.Key { return store.Key{PK: botPK(bot), SK: jobPrefix + id} }

func activeKey(bot string) store.Key { return store.Key{PK: botPK(bot), SK: "ACTIVE"} }

func startsKey(bot, day string) store.Key { return store.Key{PK: botPK(bot), SK: "STARTS#" + day} }
