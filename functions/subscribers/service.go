// Package subscribers serves a bot's subscribers (the people who talk to it on its
// channels), the labels that tag them and the custom fields that describe them: routes,
// rules, storage keys and the background jobs that finish label and field deletions.
// docs/subscribers.md records every decision the specification left open.
package subscribers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/botplatform/api/shared/backoff"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/store"
)

// Service reads and writes subscribers, labels and custom fields. Its methods are the
// family's API for other code too: the reactions family reads and ensures labels and fields,
// and the conversation runtime upserts subscribers by channel identity, sets fields and adds
// or removes labels.
type Service struct {
	store store.Store
	now   func() time.Time
	// jobs runs the removal of deleted labels and fields from subscribers; nil runs it inline.
	jobs jobs.Starter
	// hook writes what follows a label the routes add (nil: nothing).
	hook LabelHook
	// events receives the changes stored (WithEvents; nil: none); log its failures.
	events eventlog.Log
	log    *slog.Logger
	// outbox stages the start of an erased subscriber's event erasure in the erasure's
	// transaction (WithOutbox; nil: the job is started after the commit).
	outbox outbox.Stager
}

// NewService returns a Service. starter runs the background removal that follows a label or
// field deletion; with nil the removal runs inside the deleting call (tests, tools).
func NewService(st store.Store, now func() time.Time, starter jobs.Starter) *Service {
	return &Service{store: st, now: now, jobs: starter}
}

// LabelHook is consulted about the labels added to a subscriber through this family's routes
// (the label route, and the labels of the create-or-update route): the platform starts their
// label_added reactions (the conversation runtime). What it returns is written in the
// change's own transaction (an outbox item holding the reactions' start messages), so the
// labels are never added without their reactions being started: the change and its
// consequences commit together. The Service's own methods never consult it: the runtime
// adds labels with AddLabel too, and a run starts the label_added reactions of the labels it
// adds itself, within its chain of runs.
type LabelHook interface {
	// LabelsAdded returns what the change that adds labels a must also write, in its
	// transaction, and a function to call once that transaction has committed (nil: none).
	// An error fails the change: nothing is stored.
	LabelsAdded(ctx context.Context, bot string, a LabelAddition) (writes []store.Write, committed func(context.Context), err error)
}

// LabelAddition is the labels one change adds to a subscriber.
type LabelAddition struct {
	SubscriberID string
	// Channel is the subscriber's channel type, which their reactions answer on.
	Channel string
	// LabelIDs are the labels the change adds: not those the subscriber has already.
	LabelIDs []string
	// Revision is the subscriber's revision the change makes. With the subscriber and a
	// label it names one addition, the same however often it is reported, so whatever the
	// hook starts can be made to happen once.
	Revision int64
}

// WithLabelHook returns a copy of the Service whose routes have h add its writes to every
// change that adds labels.
func (s *Service) WithLabelHook(h LabelHook) *Service {
	c := *s
	c.hook = h
	return &c
}

// hookWrites adds to pl what the hook writes for a change that adds labels, when the change
// comes from a route (hooked), and returns what to call once pl has committed.
func (s *Service) hookWrites(ctx context.Context, bot string, pl *plan, hooked bool, a LabelAddition) (func(context.Context), error) {
	none := func(context.Context) {}
	if !hooked || s.hook == nil || len(a.LabelIDs) == 0 {
		return none, nil
	}
	writes, committed, err := s.hook.LabelsAdded(ctx, bot, a)
	if err != nil {
		return nil, fmt.Errorf("subscribers: label_added reactions of %s: %w", a.SubscriberID, err)
	}
	for _, w := range writes {
		pl.add(w, guardNone, "")
	}
	if committed == nil {
		return none, nil
	}
	return committed, nil
}

// Errors a caller of the Service can test with errors.Is. Each arrives inside an
// *httpapi.Error that carries the client-facing status and code.
var (
	// ErrLimitReached: a bot already has the most labels or fields it may have, or a
	// subscriber the most labels.
	ErrLimitReached = errors.New("subscribers: limit reached")
	// ErrNameTaken: another label or field of the bot already has the name.
	ErrNameTaken = errors.New("subscribers: name taken")
	// ErrFieldTypeConflict: EnsureFields found a field of the name with another type.
	ErrFieldTypeConflict = errors.New("subscribers: field exists with another type")
)

func limitReached(format string, args ...any) error {
	return httpapi.Errorf(httpapi.KindConflict, "limit_reached", format, args...).Wrap(ErrLimitReached)
}

// stamp is how resource times are kept and shown: UTC, whole seconds. Ids keep the full
// clock, so they still order creations within one second.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// attempts bounds the retries of a read-modify-write that lost a race to another writer.
const attempts = 12

// contention spaces the retries of a read-modify-write that lost a race: a random time up
// to a bound that doubles with each try, from 1 ms to 64 ms, so that writers who collided
// spread out instead of colliding again.
var contention = backoff.Policy{Base: time.Millisecond, Max: 64 * time.Millisecond, Jitter: backoff.Full}

// pause waits before retry number try (none before the first attempt).
func pause(ctx context.Context, try int) error { return contention.Sleep(ctx, try) }

// busy is the answer when a write keeps losing races: 503, so the client retries later.
func busy(what string) error {
	return fmt.Errorf("subscribers: %s keeps changing: %w", what, store.ErrUnavailable)
}

// failedAt returns the index of the transaction write whose condition failed, or -1.
func failedAt(err error) int {
	var ce *store.ConditionError
	if errors.As(err, &ce) {
		return ce.Index
	}
	return -1
}

// queryAll reads every item of a small partition (labels, fields, markers).
func (s *Service) queryAll(ctx context.Context, q store.Query) ([]store.Item, error) {
	var out []store.Item
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// nameRef is the document of a name-uniqueness item: the id holding the name.
type nameRef struct {
	ID string `json:"id"`
}

func (s *Service) nameHolder(ctx context.Context, key store.Key) (string, error) {
	it, err := s.store.Get(ctx, key)
	if err != nil {
		return "", err
	}
	ref, err := store.Decode[nameRef](it)
	return ref.ID, err
}

func nameItem(key store.Key, id string) (store.Item, error) {
	data, err := store.Encode(nameRef{ID: id})
	return store.Item{Key: key, Data: data, Revision: 1}, err
}
