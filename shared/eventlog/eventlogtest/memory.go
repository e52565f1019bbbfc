// Package eventlogtest holds the conformance suite every eventlog.Log must pass and an
// in-memory Log for the unit tests of the packages that report over events.
package eventlogtest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/botplatform/api/shared/eventlog"
)

// Memory is an eventlog.Log held in memory, for unit tests. It refuses what every Log
// refuses (eventlog.Validate) and keeps At to eventlog.Precision, like the stores; it is not
// bounded otherwise.
type Memory struct {
	mu     sync.Mutex
	events map[string]map[string]eventlog.Event // bot → id → event
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{events: map[string]map[string]eventlog.Event{}} }

// Append implements eventlog.Log.
func (m *Memory) Append(ctx context.Context, events ...eventlog.Event) (int, error) {
	added, err := m.AppendNew(ctx, events...)
	return eventlog.Count(added), err
}

// AppendNew implements eventlog.Reporter.
func (m *Memory) AppendNew(ctx context.Context, events ...eventlog.Event) ([]bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(events) > eventlog.MaxEventsPerAppend {
		return nil, fmt.Errorf("%w: %d events in one append, more than %d", eventlog.ErrInvalid, len(events), eventlog.MaxEventsPerAppend)
	}
	for _, e := range events {
		if err := eventlog.Validate(e); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	added := make([]bool, len(events))
	for i, e := range events {
		bot := m.events[e.BotID]
		if bot == nil {
			bot = map[string]eventlog.Event{}
			m.events[e.BotID] = bot
		}
		if _, ok := bot[e.ID]; ok {
			continue
		}
		e.At = e.At.UTC().Truncate(eventlog.Precision)
		e.Properties = maps.Clone(e.Properties)
		if e.Revenue != nil {
			r := *e.Revenue
			e.Revenue = &r
		}
		bot[e.ID] = e
		added[i] = true
	}
	return added, nil
}

// selected returns the events q selects, in order. For Counts (days), the range is widened
// to the whole UTC days it touches and the subscriber and position are ignored.
func (m *Memory) selected(q eventlog.Query, days bool) []eventlog.Event {
	if days {
		q.From = q.From.UTC().Truncate(24 * time.Hour)
		if to := q.To.UTC().Truncate(24 * time.Hour); to.Before(q.To) {
			q.To = to.Add(24 * time.Hour)
		}
		q.SubscriberID, q.AfterID = "", ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []eventlog.Event
	for _, e := range m.events[q.BotID] {
		if e.At.Before(q.From) || !e.At.Before(q.To) {
			continue
		}
		if q.AfterID != "" && e.At.Equal(q.From) && e.ID <= q.AfterID {
			continue
		}
		if len(q.Names) > 0 && !slices.Contains(q.Names, e.Name) {
			continue
		}
		if q.SubscriberID != "" && e.SubscriberID != q.SubscriberID {
			continue
		}
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b eventlog.Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}

// Scan implements eventlog.Log.
func (m *Memory) Scan(ctx context.Context, q eventlog.Query, fn func(eventlog.Event) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, e := range m.selected(q, false) {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// Counts implements eventlog.Log by counting the selected events.
func (m *Memory) Counts(ctx context.Context, q eventlog.Query) ([]eventlog.DayCount, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	type key struct{ day, name, channel string }
	n := map[key]int64{}
	for _, e := range m.selected(q, true) {
		n[key{e.At.Format("2006-01-02"), e.Name, e.Channel}]++
	}
	out := make([]eventlog.DayCount, 0, len(n))
	for k, c := range n {
		out = append(out, eventlog.DayCount{Day: k.day, Name: k.name, Channel: k.channel, Count: c})
	}
	slices.SortFunc(out, func(a, b eventlog.DayCount) int {
		return cmp.Or(cmp.Compare(a.Day, b.Day), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Channel, b.Channel))
	})
	return out, nil
}

// DeleteBot implements eventlog.Log.
func (m *Memory) DeleteBot(ctx context.Context, bot string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.events, bot)
	return true, nil
}

// MemoryDeleteBatch is the most events one DeleteSubscriber call of a Memory erases: small,
// so that the callers' tests drive it over several calls, as the stores need.
const MemoryDeleteBatch = 50

// DeleteSubscriber implements eventlog.Log: the subscriber's earliest events first, at most
// MemoryDeleteBatch a call. Counts, computed from the events, count them no more.
func (m *Memory) DeleteSubscriber(ctx context.Context, bot, subscriber string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := eventlog.CheckDeleteSubscriber(bot, subscriber); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var theirs []eventlog.Event
	for _, e := range m.events[bot] {
		if e.SubscriberID == subscriber {
			theirs = append(theirs, e)
		}
	}
	slices.SortFunc(theirs, func(a, b eventlog.Event) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.ID, b.ID))
	})
	for _, e := range theirs[:min(len(theirs), MemoryDeleteBatch)] {
		delete(m.events[bot], e.ID)
	}
	return len(theirs) <= MemoryDeleteBatch, nil
}

var (
	_ eventlog.Log      = (*Memory)(nil)
	_ eventlog.Reporter = (*Memory)(nil)
)
