package meta

import (
	"github.com/botplatform/api/shared/store"
)

// An account's Meta connections live in one partition of the account; the pending starts
// live under the hash of their state, which is all the callback has:
//
//	ACCT#<account>#META          CONN#<connection>     the connection (revisioned)
//	                             CRED#<connection>     its sealed long-lived token and expiry
//	                             ASSETS#<connection>   its assets, selection and attachments
//	                                                   (revisioned on their own)
//	                             USER#<Meta user id>   the connection of that Facebook user
//	                                                   (written with MustNotExist: one a user)
//	METASTATE#<sha256 of state>  STATE                 a pending start: expires after 5
//	                                                   minutes, deleted by its callback
//
// The state itself is never stored, only its hash: a reader of the table cannot finish
// someone else's authorization.

func metaPK(account string) string { return "ACCT#" + account + "#META" }

const connPrefix = "CONN#"

func connKey(account, id string) store.Key {
	return store.Key{PK: metaPK(account), SK: connPrefix + id}
}

func credKey(account, id string) store.Key { return store.Key{PK: metaPK(account), SK: "CRED#" + id} }

func assetsKey(account, id string) store.Key {
	return store.Key{PK: metaPK(account), SK: "ASSETS#" + id}
}

// userKey is the item that reserves a Facebook user for one connection of the account
// (userRef): a connection is identified by the account and the Meta user id.
func userKey(account, metaUser string) store.Key {
	return store.Key{PK: metaPK(account), SK: "USER#" + metaUser}
}

// userRef is the connection a Facebook user's userKey reserves.
type userRef struct {
	ConnectionID string `json:"connection_id"`
}

// stateFamily is the partition prefix of the pending starts (shared/oauthstate).
const stateFamily = "METASTATE"

// credAAD binds a sealed token to its connection: copied to another one, it does not open.
func credAAD(account, id string) []byte { return []byte(account + "/meta/" + id + "/user-token") }

// idPrefix prefixes connection ids.
const idPrefix = "mtc"
