// Package eventlog is each bot's append-only log of what happened to its subscribers: the
// runtime's runs, subscriber changes, email, popups, broadcasts and push, and the custom
// conversion events customers post. Funnels and experiments report over it.
//
// Two implementations pass the conformance suite in eventlogtest: an indexed SQLite table
// for the local process (sqlitelog) and one over the single table (storelog) that the AWS
// deployment runs on DynamoDB, with per-day aggregates beside the events.
package eventlog

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sources of events: which part of the platform appended one.
const (
	SourceRuntime   = "runtime"
	SourceBuilder   = "builder"
	SourceBroadcast = "broadcast"
	SourceEmail     = "email"
	SourcePush      = "push"
	SourcePopup     = "popup"
	SourceCustom    = "custom" // POST /api/bots/{botID}/events
)

// Bounds every implementation enforces on an event (Validate).
const (
	MaxNameBytes       = 64
	MaxProperties      = 32
	MaxPropertyKey     = 64
	MaxPropertyString  = 256
	MaxIDBytes         = 128
	MaxEventsPerAppend = 100
)

// Revenue is an amount of money in the currency's minor unit (cents for USD, yen for JPY):
// never a float.
type Revenue struct {
	Minor    int64  `json:"minor"`
	Currency string `json:"currency"` // ISO 4217 alphabetic code, upper case
}

// Event is one thing that happened to a subscriber of a bot.
type Event struct {
	// ID identifies the event within its bot; appending an ID that exists is a no-op, so an
	// emitter that retries derives the ID from its cause (the custom events route derives it
	// from the client's event id).
	ID           string    `json:"id"`
	BotID        string    `json:"bot_id"`
	SubscriberID string    `json:"subscriber_id"`
	Name         string    `json:"name"`
	At           time.Time `json:"at"`
	// Channel is the subscriber's channel type (telegram, whatsapp, web, email, ...), ""
	// when unknown.
	Channel string `json:"channel,omitempty"`
	Source  string `json:"source"`
	// Properties are flat: each value a string, a float64 or a bool.
	Properties map[string]any `json:"properties,omitempty"`
	Revenue    *Revenue       `json:"revenue,omitempty"`
	// ClientEventID is the id the client gave a custom event (POST .../events), from which
	// ID is derived; "" for platform events.
	ClientEventID string `json:"client_event_id,omitempty"`
}

// Precision is what every implementation keeps of At: whole milliseconds (the rest is
// dropped on Append).
const Precision = time.Millisecond

// Query selects events of one bot in [From, To) whose name is one of Names (all names
// when empty), optionally of one subscriber.
type Query struct {
	BotID        string
	Names        []string
	From, To     time.Time
	SubscriberID string
	// AfterID, when set, also leaves out the events at exactly From whose ID is not after
	// it: a list that stopped at an event (At, ID) goes on with From = At, AfterID = ID.
	AfterID string
}

// ErrInvalid wraps an event that breaks a bound (Validate).
var ErrInvalid = errors.New("eventlog: invalid event")

// Log is a bot's event log.
type Log interface {
	// Append stores events (at most MaxEventsPerAppend, of any bots); one whose (BotID, ID)
	// is stored already is skipped, not compared. It reports how many were new.
	Append(ctx context.Context, events ...Event) (int, error)
	// Scan calls fn for each event q selects, in order of At then ID, and stops at fn's
	// first error, which it returns.
	Scan(ctx context.Context, q Query, fn func(Event) error) error
	// Counts returns how many events of each name in Names (all names when empty) each UTC
	// day in [From, To) holds, per channel, from aggregates kept on Append: its cost grows
	// with days and names, not with events. Days without events are left out. It counts
	// whole days: every day [From, To) touches (From and To are meant to be midnights).
	// SubscriberID and AfterID are ignored: the aggregates are not kept per subscriber.
	Counts(ctx context.Context, q Query) ([]DayCount, error)
	// DeleteBot erases a bot's events (and aggregates), a bounded amount per call: done
	// reports that none is left.
	DeleteBot(ctx context.Context, bot string) (done bool, err error)
	// DeleteSubscriber erases the events of one subscriber of a bot (the erasure of a
	// person: their events carry their id, channel, properties and revenue), a bounded
	// amount per call: done reports that none is left. Each event goes with its id, so an
	// erased event's ID is free again: appending it stores it anew (it no longer exists; a
	// client replaying it is not told "duplicate"). The aggregates are decremented by the
	// events erased, in the same write, so Counts keeps agreeing with Scan (no aggregate
	// ever names a subscriber; decrementing is exact, so it is done). An event appended
	// while the erasure runs may be missed: the caller erases again later to catch those.
	// An empty subscriber is refused (ErrInvalid): events without one belong to no one.
	DeleteSubscriber(ctx context.Context, bot, subscriber string) (done bool, err error)
}

// CheckDeleteSubscriber is the check every DeleteSubscriber makes of its arguments first:
// both are ids as an event's BotID and SubscriberID are (Validate), the subscriber not empty.
func CheckDeleteSubscriber(bot, subscriber string) error {
	switch {
	case !isID(bot, keySafe):
		return invalid("bot_id", "must be 1 to %d letters, digits, _ or -", MaxIDBytes)
	case !isID(subscriber, keySafe):
		return invalid("subscriber_id", "must be 1 to %d letters, digits, _ or -", MaxIDBytes)
	}
	return nil
}

// DayCount is how many events of one name and channel a UTC day holds.
type DayCount struct {
	Day     string `json:"day"` // 2006-01-02
	Name    string `json:"name"`
	Channel string `json:"channel"`
	Count   int64  `json:"count"`
}

// Reporter is a Log that tells which events of an append were new. Every Log of this
// module is one; AppendNew works with any Log.
type Reporter interface {
	// AppendNew is Append that reports, for each event, whether it was new: false when its
	// id was stored already or an earlier event of the same call had it.
	AppendNew(ctx context.Context, events ...Event) ([]bool, error)
}

// AppendNew appends events to l and reports which were new (Reporter.AppendNew). A Log
// that is no Reporter appends them one at a time.
func AppendNew(ctx context.Context, l Log, events ...Event) ([]bool, error) {
	if r, ok := l.(Reporter); ok {
		return r.AppendNew(ctx, events...)
	}
	if len(events) > MaxEventsPerAppend {
		return nil, fmt.Errorf("%w: %d events in one append, more than %d", ErrInvalid, len(events), MaxEventsPerAppend)
	}
	for _, e := range events {
		if err := Validate(e); err != nil {
			return nil, err
		}
	}
	added := make([]bool, len(events))
	for i, e := range events {
		n, err := l.Append(ctx, e)
		if err != nil {
			return nil, err
		}
		added[i] = n == 1
	}
	return added, nil
}

// Count is how many events AppendNew reported new: what Append returns.
func Count(added []bool) int {
	n := 0
	for _, a := range added {
		if a {
			n++
		}
	}
	return n
}
