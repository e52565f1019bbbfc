package funnels

import "github.com/botplatform/api/shared/store"

// Every item of this package lives in the bot's funnels partition:
//
//	BOT#<bot>#FUNNELS  FNL#<funnel>   a funnel definition (steps, window, revisions)
//	                   COUNT#FNL      how many funnels the bot has (the limit)
//
// Ids sort by creation time, so the list (a prefix query) is oldest first. Reports are
// computed from the event log on every request and stored nowhere; a cohort is stored by
// the segments family.

func funnelsPK(bot string) string { return "BOT#" + bot + "#FUNNELS" }

const funnelPrefix = "FNL#"

func funnelKey(bot, id string) store.Key { return store.Key{PK: funnelsPK(bot), SK: funnelPrefix + id} }

func countKey(bot string) store.Key { return store.Key{PK: funnelsPK(bot), SK: "COUNT#FNL"} }
