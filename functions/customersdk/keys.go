package customersdk

import (
	"github.com/botplatform/api/shared/store"
)

// Every item of this package lives in the bot's SDK partition, except the token lookups:
//
//	BOT#<bot>#SDK   PROJECT                            the project (settings, sealed identity secrets, revision)
//	                INST#<installation>                an installation (a device); ids sort by creation time
//	                PUSH#<token>                       a push token of an installation: wps_ (web push
//	                                                   subscription), apns_ or fcm_, sharing the
//	                                                   installation id's body (one of each per installation)
//	                RCPT#<token>#<message>#<kind>      a receipt already counted (idempotence), expiring
//	                COUNT#<name>                       counters (store.Add): installations, push tokens
//	                                                   by kind and state, receipts by kind
//	SDKTOKEN#<sha256 of the installation token>  TOKEN
//	                                                   which installation the token is; also in GSI1
//	                                                   under BOT#<bot>#SDKTOKENS, so a purge finds it
//
// The token lookup is keyed by the token's hash on the table itself (not an index): a device
// authenticates with one consistent read, and revoking deletes it in the same transaction as
// the installation, so the device's next call is refused at once.

func sdkPK(bot string) string { return "BOT#" + bot + "#SDK" }

func projectKey(bot string) store.Key { return store.Key{PK: sdkPK(bot), SK: "PROJECT"} }

const instPrefix = "INST#"

func instKey(bot, id string) store.Key { return store.Key{PK: sdkPK(bot), SK: instPrefix + id} }

const pushPrefix = "PUSH#"

func pushKey(bot, id string) store.Key { return store.Key{PK: sdkPK(bot), SK: pushPrefix + id} }

func receiptKey(bot, token, message string, kind ReceiptKind) store.Key {
	return store.Key{PK: sdkPK(bot), SK: "RCPT#" + token + "#" + message + "#" + string(kind)}
}

func countKey(bot, name string) store.Key { return store.Key{PK: sdkPK(bot), SK: "COUNT#" + name} }

func tokenKey(hash string) store.Key { return store.Key{PK: "SDKTOKEN#" + hash, SK: "TOKEN"} }

func tokensIndexPK(bot string) string { return "BOT#" + bot + "#SDKTOKENS" }

// Counter names.
const countInstallations = "INST"

func countPush(kind PushKind, state PushState) string {
	return "PUSH#" + string(kind) + "#" + string(state)
}

func countReceipts(kind ReceiptKind) string { return "RCPT#" + string(kind) }
