package crm

import (
	"fmt"
	"regexp"

	"github.com/botplatform/api/shared/store"
)

// A connection's discovery cache and mapping live in the bot's CRM partition beside it:
//
//	BOT#<bot>#CRM   DISC#<connection>#OBJECTS            the CRM's objects (expires, DiscoveryTTL)
//	                DISC#<connection>#FIELDS#<object>    one object's fields (expires)
//	                DISC#<connection>#PIPELINES          deal pipelines and stages (expires)
//	                MAP#<connection>                     the current mapping (revisioned)
//	                MAPREV#<connection>#<revision, 10 digits>  every saved revision
//
// Disconnecting removes the mapping and its revisions; the bot's purge erases the partition.

// objectName is what an object name may be in a path or a mapping: HubSpot's contacts,
// Salesforce's Contact, Pipedrive's persons, a Dataverse entity set such as new_subscribers.
var objectName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,99}$`)

func discPrefix(id string) string { return "DISC#" + id + "#" }

func objectsKey(bot, id string) store.Key {
	return store.Key{PK: crmPK(bot), SK: discPrefix(id) + "OBJECTS"}
}

func fieldsKey(bot, id, object string) store.Key {
	return store.Key{PK: crmPK(bot), SK: discPrefix(id) + "FIELDS#" + object}
}

func pipelinesKey(bot, id string) store.Key {
	return store.Key{PK: crmPK(bot), SK: discPrefix(id) + "PIPELINES"}
}

func mappingKey(bot, id string) store.Key { return store.Key{PK: crmPK(bot), SK: "MAP#" + id} }

func revisionPrefix(id string) string { return "MAPREV#" + id + "#" }

func revisionKey(bot, id string, rev int64) store.Key {
	return store.Key{PK: crmPK(bot), SK: revisionPrefix(id) + fmt.Sprintf("%010d", rev)}
}
