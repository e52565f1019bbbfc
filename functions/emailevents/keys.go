package emailevents

import (
	"time"

	"github.com/botplatform/api/shared/store"
)

// The items of this package:
//
//	BOT#<bot>#EMAILSUPPRESS  <address, lower-cased>  a suppressed address of the bot
//	MAILGUN#TOKEN#<token>    SEEN                    a Mailgun signature token already
//	                                                 used, expiring when its timestamp
//	                                                 would be refused anyway
//
// A suppression is also in GSI1 by reason (BOT#<bot>#EMAILSUPPRESS#R#<reason>, sorted by
// address): the reason filter of the list is one exact query.
//
// Suppressions are keyed by address, not by a generated id, so that the check before a
// send is a Get per address (Suppressed), which stays as cheap with a million suppressed
// addresses as with ten; a Query would read the partition. The token markers are no bot's
// data (a delivery names no bot until its message is found), each in its own partition so
// that a burst of events spreads over the table; they expire on their own.

func suppressPK(bot string) string { return "BOT#" + bot + "#EMAILSUPPRESS" }

func suppressKey(bot, address string) store.Key {
	return store.Key{PK: suppressPK(bot), SK: address}
}

func byReasonPK(bot, reason string) string { return suppressPK(bot) + "#R#" + reason }

func tokenKey(token string) store.Key {
	return store.Key{PK: "MAILGUN#TOKEN#" + token, SK: "SEEN"}
}

// tokenExpiry is when a token marker may go: once the timestamp it came with is too old
// to be accepted, the signature is refused without it. A minute of slack covers the
// stores' whole-second expiry.
func tokenExpiry(signed time.Time) time.Time { return signed.Add(MailgunMaxAge + time.Minute) }
