package crm

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/botplatform/api/shared/store"
)

// A bot's CRM connections live in one partition of the bot; the pending OAuth starts live
// under the hash of their state, which is all the callback has:
//
//	BOT#<bot>#CRM          CONN#<connection>                the connection's summary (revisioned)
//	                       CRED#<connection>                its sealed credentials, the access
//	                                                        token's expiry and the refresh lease
//	                                                        (revisioned on its own: a token
//	                                                        refresh is no change of the summary)
//	                       ACCT#<provider>#<sha256 of id>   which connection holds this provider
//	                                                        account (one connection per account)
//	CRMSTATE#<sha256 of state>  STATE                       a pending OAuth start: expires after
//	                                                        5 minutes, deleted by its callback
//
// The state itself is never stored, only its hash: a reader of the table cannot finish
// someone else's authorization.

func crmPK(bot string) string { return "BOT#" + bot + "#CRM" }

const connPrefix = "CONN#"

func connKey(bot, id string) store.Key { return store.Key{PK: crmPK(bot), SK: connPrefix + id} }

func credKey(bot, id string) store.Key { return store.Key{PK: crmPK(bot), SK: "CRED#" + id} }

func accountKey(bot, provider, accountID string) store.Key {
	return store.Key{PK: crmPK(bot), SK: "ACCT#" + provider + "#" + hashHex(accountID)}
}

// stateFamily is the partition prefix of the pending OAuth starts (shared/oauthstate).
const stateFamily = "CRMSTATE"

func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// credAAD binds sealed credentials to their connection: copied to another one, they do not open.
func credAAD(bot, id string) []byte { return []byte(bot + "/crm/" + id + "/credentials") }

// verifierAAD binds a pending start's sealed PKCE verifier to its state.
func verifierAAD(stateHash string) []byte {
	return []byte("crm/oauth-state/" + stateHash + "/verifier")
}
