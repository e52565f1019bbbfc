package replay

import "github.com/botplatform/api/shared/store"

// Storage layout. Everything is under the bot ("BOT#<bot>#RPL..."), so the bot's purge
// (PurgeStep) finds all of it:
//
//	BOT#<bot>#RPLFIX          rfx_...            a fixture; GSI1 BOT#<bot>#RPLFIX#<reaction> / rfx_...
//	BOT#<bot>#RPLFIX          COUNT#<reaction>   how many fixtures the reaction has (MaxFixtures)
//	BOT#<bot>#RPLRUNS         rpr_...            a regression run's report; GSI1 BOT#<bot>#RPLRUNS#<reaction> / rpr_...
//	BOT#<bot>#RPLRUN#<run>    R#rfx_...          the result of one fixture in that run
//
// Ids sort by creation time: lists read in reverse are newest first. Fixtures are kept until
// deleted (or the bot is); a run and its results expire RunRetention after the run. A
// simulation is answered, never stored.

func fixturesPK(bot string) string { return "BOT#" + bot + "#RPLFIX" }

func fixtureKey(bot, id string) store.Key { return store.Key{PK: fixturesPK(bot), SK: id} }

func reactionFixtures(bot, reaction string) string { return fixturesPK(bot) + "#" + reaction }

func countKey(bot, reaction string) store.Key {
	return store.Key{PK: fixturesPK(bot), SK: "COUNT#" + reaction}
}

func runsPK(bot string) string { return "BOT#" + bot + "#RPLRUNS" }

func runKey(bot, id string) store.Key { return store.Key{PK: runsPK(bot), SK: id} }

func reactionRuns(bot, reaction string) string { return runsPK(bot) + "#" + reaction }

func resultsPK(bot, run string) string { return "BOT#" + bot + "#RPLRUN#" + run }

const resultPrefix = "R#"

func resultKey(bot, run, fixture string) store.Key {
	return store.Key{PK: resultsPK(bot, run), SK: resultPrefix + fixture}
}

// Id prefixes.
const (
	fixturePrefix = "rfx"
	runPrefix     = "rpr"
)
