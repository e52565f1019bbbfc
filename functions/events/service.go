// Package events serves a bot's event log over the API (docs/events.md): custom conversion
// events posted by the customer's systems, the list of every event (the platform's and the
// customer's) and the per-day counts the log keeps. The log itself is shared/eventlog; this
// package stores nothing of its own.
package events

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
)

// Subscribers is what this package asks of the subscribers family.
type Subscribers interface {
	// Channel returns the channel type of the bot's subscriber, or an error of kind
	// httpapi.KindNotFound when the bot has no such subscriber.
	Channel(ctx context.Context, bot, subscriberID string) (string, error)
}

// Service posts and reads a bot's events.
type Service struct {
	log  eventlog.Log
	subs Subscribers
	now  func() time.Time
}

// NewService returns the service over the event log.
func NewService(log eventlog.Log, subs Subscribers, now func() time.Time) *Service {
	return &Service{log: log, subs: subs, now: now}
}

// Bounds of the custom events route and of the reads.
const (
	// MaxFuture is how far ahead of the server's clock an event's at may be (clock skew).
	MaxFuture = 5 * time.Minute
	// MaxAge is how far back an event's at may be: as far as a report reaches.
	MaxAge = 366 * 24 * time.Hour
	// MaxRange is the longest list range, and MaxRangeDays the most days of a counts range.
	MaxRange     = 366 * 24 * time.Hour
	MaxRangeDays = 366
	// DefaultDays is the range of a list or counts call that gives none: the last 30 days.
	DefaultDays = 30
	// MaxCountNames is how many names one counts call may ask for.
	MaxCountNames = 20
)

// EventID derives the stored id of a custom event from the bot and the client's event id,
// so that a replay of the same client id stores nothing twice.
func EventID(bot, clientEventID string) string {
	sum := sha256.Sum256([]byte("custom\x00" + bot + "\x00" + clientEventID))
	return "cev_" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// Result is what became of one posted event.
type Result struct {
	EventID string `json:"event_id"`
	ID      string `json:"id"`
	// Status is created, or duplicate when the bot has an event of this event_id already
	// (or the request held it twice): nothing was stored for it.
	Status string `json:"status"`
}

// Ingested answers a post of events, in the order they were given.
type Ingested struct {
	Data       []Result `json:"data"`
	Created    int      `json:"created"`
	Duplicates int      `json:"duplicates"`
}

// Ingest stores the posted events of the bot, all or none: a batch with a problem that only
// the bot's data or the clock can reveal (an unknown subscriber, a reserved name, a
// currency that ISO 4217 does not list, a time out of bounds) is refused whole with 422
// events_rejected naming every problem, so that a client fixes them and posts again (events
// it posted before are skipped as duplicates).
func (s *Service) Ingest(ctx context.Context, bot string, req PostRequest) (Ingested, error) {
	now := s.now()
	var p httpapi.Problems
	channels := map[string]string{}
	events := make([]eventlog.Event, len(req.Events))
	for i, in := range req.Events {
		field := func(name string) string { return fmt.Sprintf("events[%d].%s", i, name) }
		at := now
		if in.At != nil {
			at = in.At.UTC()
		}
		switch {
		case at.After(now.Add(MaxFuture)):
			p.Add(field("at"), "is more than %s ahead of the server's clock (%s)", MaxFuture, now.UTC().Format(time.RFC3339))
		case at.Before(now.Add(-MaxAge)):
			p.Add(field("at"), "is more than 366 days ago")
		}
		if eventlog.Reserved(in.Name) {
			p.Add(field("name"), "%q is reserved for the platform's own events (docs/events.md lists them)", in.Name)
		}
		var rev *eventlog.Revenue
		if in.Revenue != nil {
			rev = &eventlog.Revenue{Minor: *in.Revenue.Minor, Currency: in.Revenue.Currency}
			if _, ok := eventlog.Currency(rev.Currency); !ok {
				p.Add(field("revenue.currency"), "%q is not an active ISO 4217 currency code with a minor unit", rev.Currency)
			}
		}
		ch, known := channels[in.SubscriberID]
		if !known {
			var err error
			ch, err = s.subs.Channel(ctx, bot, in.SubscriberID)
			switch {
			case httpapi.KindOf(err) == httpapi.KindNotFound:
				ch = ""
			case err != nil:
				return Ingested{}, err
			}
			channels[in.SubscriberID] = ch
		}
		if ch == "" {
			p.Add(field("subscriber_id"), "the bot has no subscriber %s", in.SubscriberID)
		}
		events[i] = eventlog.Event{ID: EventID(bot, in.EventID), BotID: bot, SubscriberID: in.SubscriberID, Name: in.Name,
			At: at, Channel: ch, Source: eventlog.SourceCustom, Properties: in.Properties, Revenue: rev, ClientEventID: in.EventID}
	}
	if err := p.Unprocessable("events_rejected"); err != nil {
		return Ingested{}, err
	}
	for i, e := range events {
		if err := eventlog.Validate(e); err != nil {
			// Every bound was checked above; one that was not is ours to fix, not the client's.
			return Ingested{}, fmt.Errorf("events: event %d: %w", i, err)
		}
	}
	added, err := eventlog.AppendNew(ctx, s.log, events...)
	if err != nil {
		return Ingested{}, err
	}
	out := Ingested{Data: make([]Result, len(events))}
	for i, e := range events {
		r := Result{EventID: e.ClientEventID, ID: e.ID, Status: "duplicate"}
		if added[i] {
			r.Status = "created"
			out.Created++
		} else {
			out.Duplicates++
		}
		out.Data[i] = r
	}
	return out, nil
}

// View is an event as the API shows it.
type View struct {
	ID           string  `json:"id"`
	EventID      *string `json:"event_id"`
	Name         string  `json:"name"`
	SubscriberID *string `json:"subscriber_id"`
	Channel      *string `json:"channel"`
	Source       string  `json:"source"`
	At           string  `json:"at"`
	// Properties is {} when the event has none.
	Properties map[string]any    `json:"properties"`
	Revenue    *eventlog.Revenue `json:"revenue"`
}

func view(e eventlog.Event) View {
	v := View{ID: e.ID, EventID: orNull(e.ClientEventID), Name: e.Name, SubscriberID: orNull(e.SubscriberID),
		Channel: orNull(e.Channel), Source: e.Source, At: e.At.UTC().Format(time.RFC3339Nano), Properties: e.Properties, Revenue: e.Revenue}
	if v.Properties == nil {
		v.Properties = map[string]any{}
	}
	return v
}

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Filter selects the events a list returns: [From, To), of one name and one subscriber
// when given.
type Filter struct {
	Name, SubscriberID string
	From, To           time.Time
}

// errPageFull stops a scan once a page and one more event are read.
var errPageFull = errors.New("page full")

// List returns a page of the bot's events in f, oldest first (time, then id), and the
// position after it ("" at the end): "<Unix ms>:<id>" of the page's last event.
func (s *Service) List(ctx context.Context, bot string, f Filter, limit int, cursor string) ([]View, string, error) {
	q := eventlog.Query{BotID: bot, From: f.From, To: f.To, SubscriberID: f.SubscriberID}
	if f.Name != "" {
		q.Names = []string{f.Name}
	}
	if cursor != "" {
		ms, id, ok := strings.Cut(cursor, ":")
		at, err := strconv.ParseInt(ms, 10, 64)
		if !ok || err != nil || id == "" {
			return nil, "", store.ErrInvalidCursor
		}
		// The cursor is sealed to this list's filters, so its position is within them.
		q.From, q.AfterID = time.UnixMilli(at).UTC(), id
	}
	var out []View
	more := false
	err := s.log.Scan(ctx, q, func(e eventlog.Event) error {
		if len(out) == limit {
			more = true
			return errPageFull
		}
		out = append(out, view(e))
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, "", err
	}
	if !more {
		return out, "", nil
	}
	last := out[len(out)-1]
	at, err := time.Parse(time.RFC3339Nano, last.At)
	if err != nil {
		return nil, "", err
	}
	return out, strconv.FormatInt(at.UnixMilli(), 10) + ":" + last.ID, nil
}

// DayCount is how many events of one name and channel a UTC day holds.
type DayCount struct {
	Date    string  `json:"date"`
	Name    string  `json:"name"`
	Channel *string `json:"channel"`
	Count   int64   `json:"count"`
}

// NameTotal is how many events of one name the range holds.
type NameTotal struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Counts answers the counts route: the range's days with events, and totals per name.
type Counts struct {
	From   string      `json:"from"`
	To     string      `json:"to"`
	Totals []NameTotal `json:"totals"`
	Days   []DayCount  `json:"days"`
}

// Counts returns the bot's counts of the names (all when empty) per UTC day from the first
// day to the last, both included, from the log's aggregates.
func (s *Service) Counts(ctx context.Context, bot string, first, last time.Time, names []string) (Counts, error) {
	cs, err := s.log.Counts(ctx, eventlog.Query{BotID: bot, Names: names, From: first, To: last.AddDate(0, 0, 1)})
	if err != nil {
		return Counts{}, err
	}
	out := Counts{From: first.Format(time.DateOnly), To: last.Format(time.DateOnly), Totals: []NameTotal{}, Days: make([]DayCount, 0, len(cs))}
	totals := map[string]int{}
	for _, c := range cs {
		out.Days = append(out.Days, DayCount{Date: c.Day, Name: c.Name, Channel: orNull(c.Channel), Count: c.Count})
		i, ok := totals[c.Name]
		if !ok {
			i = len(out.Totals)
			totals[c.Name] = i
			out.Totals = append(out.Totals, NameTotal{Name: c.Name})
		}
		out.Totals[i].Count += c.Count
	}
	slices.SortFunc(out.Totals, func(a, b NameTotal) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}
