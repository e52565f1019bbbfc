package emailcampaigns

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// The event types Record applies.
const (
	EventOpen        = "open"
	EventClick       = "click"
	EventUnsubscribe = "unsubscribe"
	EventDelivered   = "delivered"
	EventBounce      = "bounce"
	EventComplaint   = "complaint"
)

// Event is something that happened to a sent message: reported by the provider
// (delivered, bounce, complaint) or by the recipient's mail client through a tracked URL
// (open, click, unsubscribe).
type Event struct {
	Type string
	// Link is a click's link, by index in the campaign's link table.
	Link int
	// Machine marks an open or click by a machine rather than a person: a privacy proxy's
	// fetch, a security gateway following every link.
	Machine bool
	// Permanent marks a hard bounce.
	Permanent bool
	At        time.Time
	// Address is the address the event concerns, when the provider names it (unused: the
	// row knows its address).
	Address string
}

// Record applies an event to its recipient row, with the report's counters in the same
// transaction. Each counter counts recipients, so a repeated event changes only the row's
// own tallies: a second delivered, bounce, complaint or unsubscribe changes nothing, a
// second open or click adds to the row's counts but not to opened or clicked. A human open
// sets opened once; a privacy proxy's open counts apart (machine_opened, once per row); a
// click is an open too when no human open came before it. A machine's click (a security
// gateway that follows every link before delivery) counts apart too (machine_clicked, once
// per row), in neither opened, clicked nor the link's clicks. A click's link is ev.Link (the
// caller passes the token's ref.Link there); it must be in the link table. An event proves
// the message left: a row counted interrupted becomes sent. An event for a row never sent
// changes nothing.
func (s *Service) Record(ctx context.Context, ref emaillinks.Ref, ev Event) error {
	switch ev.Type {
	case EventOpen, EventUnsubscribe, EventDelivered, EventBounce, EventComplaint:
	case EventClick:
		links, err := s.linkTable(ctx, ref.Bot, ref.Campaign)
		if err != nil {
			return err
		}
		if ev.Link < 0 || ev.Link >= len(links) {
			return httpapi.NotFound("link")
		}
	default:
		return httpapi.Errorf(httpapi.KindInvalid, "invalid_event", "unknown email event type %q", ev.Type)
	}
	if !ids.Valid("ecmp", ref.Campaign) {
		return httpapi.NotFound("recipient")
	}
	at := stamp(ev.At)
	if ev.At.IsZero() {
		at = stamp(s.d.Now())
	}
	bot, cmp := ref.Bot, ref.Campaign
	var logged []eventlog.Event // what the stored change adds to the event log
	_, err := mutateRow(ctx, s.d.Store, bot, cmp, ref.Recipient, nil, func(r *row, d deltas) ([]store.Write, error) {
		logged = logged[:0]
		log := func(name string, nth int, props map[string]any) {
			logged = append(logged, s.recipientEvent(bot, cmp, r.Recipient, name, nth, at, props))
		}
		changed := false
		switch r.State {
		case RowSent:
		case RowSending, RowInterrupted:
			r.State, r.ClaimedAt, changed = RowSent, nil, true
			if r.SentAt == nil {
				r.SentAt = &at
			}
		default:
			return nil, errNoChange // never sent: nothing can have happened to it
		}
		count := func(name string) { d.add(bot, cmp, name, 1); changed = true }
		switch ev.Type {
		case EventDelivered:
			if r.DeliveredAt == nil {
				r.DeliveredAt = &at
				count(evDelivered)
				log(eventlog.EmailDelivered, 0, nil)
			}
		case EventBounce:
			switch {
			case r.Bounce == nil:
				r.Bounce = &Bounce{Permanent: ev.Permanent, At: at}
				count(evBounced)
				log(eventlog.EmailBounced, 0, map[string]any{"permanent": ev.Permanent})
			case ev.Permanent && !r.Bounce.Permanent:
				r.Bounce = &Bounce{Permanent: true, At: at}
				changed = true
			}
		case EventComplaint:
			if r.ComplainedAt == nil {
				r.ComplainedAt = &at
				count(evComplained)
				log(eventlog.EmailComplained, 0, nil)
			}
		case EventUnsubscribe:
			if r.UnsubscribedAt == nil {
				r.UnsubscribedAt = &at
				count(evUnsubscribed)
				log(eventlog.EmailUnsubscribed, 0, nil)
			}
		case EventOpen:
			if ev.Machine {
				if r.Opens.Machine == 0 {
					count(evMachineOpened)
				}
				r.Opens.Machine++
				changed = true
			} else {
				humanOpen(r, at, func() { count(evOpened) })
				log(eventlog.EmailOpened, int(r.Opens.Count), nil)
				changed = true
			}
		case EventClick:
			if ev.Machine {
				if r.MachineClicks == 0 {
					count(evMachineClicked)
				}
				r.MachineClicks++
				changed = true
				break
			}
			if r.Opens.FirstAt == nil {
				humanOpen(r, at, func() { count(evOpened) })
				log(eventlog.EmailOpened, int(r.Opens.Count), nil)
			}
			if len(r.Clicks) == 0 {
				count(evClicked)
			}
			found := false
			for i := range r.Clicks {
				if r.Clicks[i].Link == ev.Link {
					r.Clicks[i].Count++
					found = true
				}
			}
			if !found {
				r.Clicks = append(r.Clicks, LinkClicks{Link: ev.Link, Count: 1})
				d[linkCounterKey(bot, cmp, ev.Link, "clickers")]++
			}
			d[linkCounterKey(bot, cmp, ev.Link, "clicks")]++
			clicks := 0
			for _, c := range r.Clicks {
				clicks += int(c.Count)
			}
			log(eventlog.EmailClicked, clicks, map[string]any{"link": float64(ev.Link)})
			changed = true
		}
		if !changed {
			return nil, errNoChange
		}
		return nil, nil
	})
	if err != nil {
		return fmt.Errorf("record %s: %w", ev.Type, err)
	}
	eventlog.EmitAll(ctx, s.d.Events, s.d.Log, logged)
	return nil
}

// recipientEvent is an event of the event log about a campaign's recipient: its ID names
// the campaign, the row, the kind and, for what may happen many times (opens, clicks), the
// how-manieth it is, so a retried Record appends nothing twice.
func (s *Service) recipientEvent(bot, campaign string, r Recipient, name string, nth int, at time.Time, props map[string]any) eventlog.Event {
	p := map[string]any{"campaign_id": campaign}
	for k, v := range props {
		p[k] = v
	}
	cause := name + ":" + bot + ":" + campaign + ":" + r.ID
	if nth > 0 {
		cause += ":" + strconv.Itoa(nth)
	}
	return eventlog.Event{ID: eventlog.CauseID(cause), BotID: bot, SubscriberID: r.SubscriberID, Name: name, At: at,
		Channel: "email", Source: eventlog.SourceEmail, Properties: p}
}

// humanOpen counts an open by a person; first is called for the first.
func humanOpen(r *row, at time.Time, first func()) {
	if r.Opens.FirstAt == nil {
		r.Opens.FirstAt = &at
		first()
	}
	r.Opens.Count++
}

// LinkTarget returns the URL of link ref.Link of the campaign as sent.
func (s *Service) LinkTarget(ctx context.Context, ref emaillinks.Ref) (string, error) {
	if !ids.Valid("ecmp", ref.Campaign) {
		return "", httpapi.NotFound("link")
	}
	links, err := s.linkTable(ctx, ref.Bot, ref.Campaign)
	if err != nil {
		return "", err
	}
	if ref.Link < 0 || ref.Link >= len(links) {
		return "", httpapi.NotFound("link")
	}
	return links[ref.Link], nil
}

// ByMessageID finds the recipient a provider's message id belongs to (with or without
// angle brackets).
func (s *Service) ByMessageID(ctx context.Context, messageID string) (emaillinks.Ref, error) {
	id := bareMessageID(messageID)
	if id == "" || len(id) > 250 {
		return emaillinks.Ref{}, httpapi.NotFound("message")
	}
	it, err := s.d.Store.Get(ctx, pointerKey(id))
	if errors.Is(err, store.ErrNotFound) {
		return emaillinks.Ref{}, httpapi.NotFound("message")
	}
	if err != nil {
		return emaillinks.Ref{}, err
	}
	p, err := store.Decode[pointer](it)
	if err != nil {
		return emaillinks.Ref{}, err
	}
	return emaillinks.Ref{Bot: p.Bot, Campaign: p.Campaign, Recipient: p.Recipient}, nil
}

// Recipient returns the address a recipient row was sent to (for the unsubscribe page to
// suppress it).
func (s *Service) Recipient(ctx context.Context, ref emaillinks.Ref) (string, error) {
	if !ids.Valid("ecmp", ref.Campaign) {
		return "", httpapi.NotFound("recipient")
	}
	it, err := s.d.Store.Get(ctx, rowKey(ref.Bot, ref.Campaign, ref.Recipient))
	if errors.Is(err, store.ErrNotFound) {
		return "", httpapi.NotFound("recipient")
	}
	if err != nil {
		return "", err
	}
	r, err := decodeRow(it)
	return r.Address, err
}
