package playbooks

import "github.com/botplatform/api/shared/store"

// Storage layout. An install lives under its bot, so that the bot's purge erases it, and a
// pointer under its account finds it from its id alone (the /api/playbook-installs/{id}
// routes name no bot), and only within the caller's account:
//
//	BOT#<bot>#PBI    <pbi_id>  an install (record: the install, its journal, what it created)
//	ACCT#<acct>#PBI  <pbi_id>  where it is ({"bot_id"})
//
// Ids sort by creation time, so both lists (prefix queries) are oldest first. The catalog
// is code (package catalog) and stored nowhere; KPIs are computed from the event log on
// every read.
func installsPK(bot string) string { return "BOT#" + bot + "#PBI" }

func installKey(bot, id string) store.Key { return store.Key{PK: installsPK(bot), SK: id} }

func pointersPK(account string) string { return "ACCT#" + account + "#PBI" }

func pointerKey(account, id string) store.Key { return store.Key{PK: pointersPK(account), SK: id} }

// pointer is where an install is.
type pointer struct {
	BotID string `json:"bot_id"`
}
