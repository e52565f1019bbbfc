package subscribers

import "github.com/botplatform/api/shared/store"

// Every item of this family lives in a partition of its bot, "BOT#<bot>#SUBS...". The kernel
// has checked that the bot is the caller's before any handler runs, so a key built from the
// path's bot can never reach another tenant's data. docs/subscribers.md draws the layout.

func botPrefix(bot string) string { return "BOT#" + bot + "#SUBS" }

// subscriberKey is the subscriber's record. Ids sort by creation time, so the partition
// reads oldest first and a creation range is a sort-key range.
func subscriberKey(bot, id string) store.Key {
	return store.Key{PK: botPrefix(bot), SK: id}
}

// channelIndex places a subscriber in its channel's GSI1 partition (a sparse index on the
// record itself, so it costs no extra write).
func channelIndex(bot, channel, id string) store.IndexKey {
	return store.IndexKey{PK: botPrefix(bot) + "#CH#" + channel, SK: id}
}

// identityKey makes (bot, channel, external_id) unique: it is written with MustNotExist in
// the transaction that creates the subscriber and deleted in the one that erases it.
func identityKey(bot, channel, externalID string) store.Key {
	return store.Key{PK: botPrefix(bot) + "#IDENT", SK: channel + "#" + externalID}
}

// nameWordKey is one search entry: a folded name word, then the subscriber. A prefix query
// on a word finds every subscriber with a name word starting with it.
func nameWordKey(bot, word, id string) store.Key {
	return store.Key{PK: botPrefix(bot) + "#NAME", SK: word + "#" + id}
}

func namePartition(bot string) string { return botPrefix(bot) + "#NAME" }

// tombstoneKey keeps the anonymous facts of an erased subscriber (channel, creation time).
func tombstoneKey(bot, id string) store.Key {
	return store.Key{PK: botPrefix(bot) + "#GONE", SK: id}
}

// memberKey is one label membership; the label's partition lists exactly its subscribers,
// oldest first, so a label filter never scans the others.
func memberKey(bot, label, id string) store.Key {
	return store.Key{PK: memberPartition(bot, label), SK: id}
}

func memberPartition(bot, label string) string { return botPrefix(bot) + "#LABEL#" + label }

func labelKey(bot, id string) store.Key {
	return store.Key{PK: labelsPartition(bot), SK: id}
}

func labelsPartition(bot string) string { return botPrefix(bot) + "#LABELS" }

// labelNameKey makes label names unique per bot, case-insensitively (the sort key is folded).
func labelNameKey(bot, folded string) store.Key {
	return store.Key{PK: botPrefix(bot) + "#LABELNAMES", SK: folded}
}

// labelGoneKey marks a deleted label whose removal from subscribers is under way or recently
// done; reads hide the labels it names (see goneMarker).
func labelGoneKey(bot, id string) store.Key {
	return store.Key{PK: labelGonePartition(bot), SK: id}
}

func labelGonePartition(bot string) string { return botPrefix(bot) + "#LABELGONE" }

func fieldKey(bot, id string) store.Key {
	return store.Key{PK: fieldsPartition(bot), SK: id}
}

func fieldsPartition(bot string) string { return botPrefix(bot) + "#FIELDS" }

// fieldNameKey makes field names unique per bot (names are lower case already).
func fieldNameKey(bot, name string) store.Key {
	return store.Key{PK: botPrefix(bot) + "#FIELDNAMES", SK: name}
}

// fieldGoneKey marks a deleted field whose stored values are still being erased.
func fieldGoneKey(bot, id string) store.Key {
	return store.Key{PK: botPrefix(bot) + "#FIELDGONE", SK: id}
}

// countKey holds how many labels or fields a bot has, for the per-bot limits.
func countKey(bot, what string) store.Key {
	return store.Key{PK: botPrefix(bot) + "#COUNTS", SK: what}
}
