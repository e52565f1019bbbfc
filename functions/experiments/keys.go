package experiments

import (
	"fmt"

	"github.com/botplatform/api/shared/store"
)

// Every item of this package lives in the bot's experiments partition (the kernel has
// checked the bot is the caller's before a handler runs):
//
//	BOT#<bot>#EXPERIMENTS  EXP#<exp>                  an experiment (definition, status, revision)
//	                       VER#<exp>#<n, 6 digits>    a frozen version of its definition
//	                       COUNT#EXP                  how many experiments the bot has (the limit)
//
// An experiment is also in GSI1 by status (BOT#<bot>#EXPERIMENTS#S#<status>, sorted by id,
// so by creation time): the status filter of the list is one exact query.
//
// The exposures and the goal events the reports count are not here: they are in the bot's
// event log (shared/eventlog), which has its own purge.

func experimentsPK(bot string) string { return "BOT#" + bot + "#EXPERIMENTS" }

const experimentPrefix = "EXP#"

func experimentKey(bot, id string) store.Key {
	return store.Key{PK: experimentsPK(bot), SK: experimentPrefix + id}
}

func versionPrefix(id string) string { return "VER#" + id + "#" }

func versionKey(bot, id string, n int64) store.Key {
	return store.Key{PK: experimentsPK(bot), SK: fmt.Sprintf("%s%06d", versionPrefix(id), n)}
}

func countKey(bot string) store.Key { return store.Key{PK: experimentsPK(bot), SK: "COUNT#EXP"} }

func byStatusPK(bot string, s Status) string { return experimentsPK(bot) + "#S#" + string(s) }
