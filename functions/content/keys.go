package content

import (
	"fmt"

	"github.com/botplatform/api/shared/store"
)

// Every item of this package lives in the bot's content partition (the kernel has checked
// the bot is the caller's before a handler runs):
//
//	BOT#<bot>#CONTENT  DOC#<doc>              a document (draft, revision, newest version's number)
//	                   VER#<doc>#<n, 6 digits> a published version's frozen body
//	                   TPL#<tpl>              a content template
//	                   COUNT#DOC, COUNT#TPL   how many documents, templates the bot has (limits)
//
// A document is also in two indexes so that every list filter is one exact query:
// GSI1 by type and state (BOT#<bot>#CONTENT#T#<type>#<live|archived>) and GSI2 by state
// (BOT#<bot>#CONTENT#S#<live|archived>), both sorted by id, which sorts by creation time.

func contentPK(bot string) string { return "BOT#" + bot + "#CONTENT" }

func documentKey(bot, doc string) store.Key { return store.Key{PK: contentPK(bot), SK: "DOC#" + doc} }

func versionKey(bot, doc string, n int) store.Key {
	return store.Key{PK: contentPK(bot), SK: fmt.Sprintf("VER#%s#%06d", doc, n)}
}

func versionPrefix(doc string) string { return "VER#" + doc + "#" }

func templateKey(bot, tpl string) store.Key { return store.Key{PK: contentPK(bot), SK: "TPL#" + tpl} }

func countKey(bot, what string) store.Key { return store.Key{PK: contentPK(bot), SK: "COUNT#" + what} }

func state(archived bool) string {
	if archived {
		return "archived"
	}
	return "live"
}

func byTypePK(bot string, t Type, archived bool) string {
	return contentPK(bot) + "#T#" + string(t) + "#" + state(archived)
}

func byStatePK(bot string, archived bool) string { return contentPK(bot) + "#S#" + state(archived) }
