package webpush

import "github.com/botplatform/api/shared/store"

// A bot's browser push lives in one partition of the bot (the kernel has checked the bot is
// the caller's before a handler runs):
//
//	BOT#<bot>#WEBPUSH  CONFIG          the configuration (sealed VAPID private key, revisioned)
//	                   COUNT#<what>    send counters: sent, expired (the push service answered
//	                                   404/410), failed
//
// The subscriptions are the customer SDK's, in its own partitions.

func webpushPK(bot string) string { return "BOT#" + bot + "#WEBPUSH" }

func configKey(bot string) store.Key { return store.Key{PK: webpushPK(bot), SK: "CONFIG"} }

func countKey(bot, what string) store.Key { return store.Key{PK: webpushPK(bot), SK: "COUNT#" + what} }

// The send counters.
const (
	countSent    = "sent"
	countExpired = "expired"
	countFailed  = "failed"
)
