// Package audit records who changed what: one Event per authenticated mutating request,
// whatever its outcome. Publishers deliver events (straight to the store locally, through
// EventBridge on AWS); Log stores and lists them.
package audit

import (
	"context"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/store"
)

// Event is one audited request. It names the route template, never the path's query,
// body or headers, so no secret can ride along.
type Event struct {
	ID          string    `json:"id"`
	Time        time.Time `json:"time"`
	AccountID   string    `json:"account_id"`
	ActorUserID string    `json:"actor_user_id,omitempty"`
	TokenID     string    `json:"token_id"`
	TokenKind   string    `json:"token_kind"`
	BotID       string    `json:"bot_id,omitempty"`
	Method      string    `json:"method"`
	Route       string    `json:"route"`
	Status      int       `json:"status"`
	RequestID   string    `json:"request_id"`
}

// Publisher delivers events to the audit trail. Publish returns once the event is durable
// (stored, or accepted by the bus), so a client never sees a response whose event was lost.
type Publisher interface {
	Publish(ctx context.Context, e Event) error
}

// Retention is how long the trail keeps an event.
const Retention = 365 * 24 * time.Hour

// Log is the audit trail in the store. It is the local Publisher and the writer behind the
// AWS audit sink.
type Log struct {
	store store.Store
}

// NewLog returns a Log over s.
func NewLog(s store.Store) *Log { return &Log{store: s} }

func accountPK(account string) string { return "AUDIT#" + account }

func botPK(account, bot string) string { return "AUDIT#" + account + "#BOT#" + bot }

// Stager is a Publisher whose trail is in the platform's store (the Log): a caller may
// commit an event in a transaction of its own instead of publishing it (one commit for a
// handler's write and its event, shared/httpapi.StageAudit). Stage returns that write, and
// ok false when st, the store the caller's transaction goes to, is not the trail's. An
// event published again under the same id replaces the staged one.
type Stager interface {
	Publisher
	Stage(st store.Store, e Event) (w store.Write, ok bool, err error)
}

// Publish stores e, scrubbed of anything shaped like a credential. Event ids are
// time-ordered, so the sort key orders the trail by time; a second index partition per bot
// serves the bot_id filter.
func (l *Log) Publish(ctx context.Context, e Event) error {
	it, err := eventItem(e)
	if err != nil {
		return err
	}
	// Always, not MustNotExist: a redelivered event (EventBridge is at-least-once)
	// overwrites itself instead of failing, and so does a staged one published again.
	if err := l.store.Put(ctx, it, store.Always); err != nil {
		return fmt.Errorf("audit: store event: %w", err)
	}
	return nil
}

// Stage implements Stager: the write that stores e as Publish would, for a transaction on
// the Log's own store.
func (l *Log) Stage(st store.Store, e Event) (store.Write, bool, error) {
	if st != l.store {
		return store.Write{}, false, nil
	}
	it, err := eventItem(e)
	if err != nil {
		return store.Write{}, false, err
	}
	return store.PutOp(it, store.Always), true, nil
}

// eventItem is e, scrubbed, as the item the trail keeps.
func eventItem(e Event) (store.Item, error) {
	e = e.Scrubbed()
	b, err := store.Encode(e)
	if err != nil {
		return store.Item{}, err
	}
	it := store.Item{
		Key:       store.Key{PK: accountPK(e.AccountID), SK: e.ID},
		Data:      b,
		Revision:  1,
		ExpiresAt: e.Time.Add(Retention),
	}
	if e.BotID != "" {
		it.GSI1 = store.IndexKey{PK: botPK(e.AccountID, e.BotID), SK: e.ID}
	}
	return it, nil
}

// List returns one page of the account's events, newest first, optionally only those of bot.
func (l *Log) List(ctx context.Context, account, bot string, limit int, cursor string) ([]Event, string, error) {
	q := store.Query{PK: accountPK(account), Reverse: true, Limit: limit, Cursor: cursor}
	if bot != "" {
		q.Index, q.PK = store.GSI1, botPK(account, bot)
	}
	page, err := l.store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Event, 0, len(page.Items))
	for _, it := range page.Items {
		e, err := store.Decode[Event](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, e)
	}
	return out, page.Next, nil
}
