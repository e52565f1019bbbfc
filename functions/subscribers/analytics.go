package subscribers

import (
	"context"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/eventlog"
)

// WithEvents returns a copy of the Service that appends the subscriber changes it stores
// to the bot's event log: subscriber_created, label_added, label_removed and field_changed
// (the field's id, never its value: values are personal data that reports do not need).
// log receives the events that could not be appended.
func (s *Service) WithEvents(l eventlog.Log, log *slog.Logger) *Service {
	c := *s
	c.events, c.log = l, log
	return &c
}

// recordChange appends the events of a stored change from before (nil: a creation) to
// after, which became revision rev. Each event's ID names the subscriber, the revision and
// the label or field, so the same change reported twice is recorded once.
func (s *Service) recordChange(ctx context.Context, bot string, before *record, after record, rev int64, at time.Time) {
	if s.events == nil {
		return
	}
	var evs []eventlog.Event
	add := func(name, what string, props map[string]any) {
		cause := name + ":" + bot + ":" + after.ID
		if name != eventlog.SubscriberCreated {
			cause += ":" + strconv.FormatInt(rev, 10) + ":" + what
		}
		evs = append(evs, eventlog.Event{ID: eventlog.CauseID(cause), BotID: bot, SubscriberID: after.ID, Name: name, At: at,
			Channel: after.Channel, Source: eventlog.SourceRuntime, Properties: props})
	}
	var prev record
	if before == nil {
		add(eventlog.SubscriberCreated, "", nil)
	} else {
		prev = *before
	}
	for _, l := range addedLabels(prev.Labels, after.Labels) {
		add(eventlog.LabelAdded, l, map[string]any{"label_id": l})
	}
	for _, l := range addedLabels(after.Labels, prev.Labels) {
		add(eventlog.LabelRemoved, l, map[string]any{"label_id": l})
	}
	var changed []string
	for id, v := range after.Values {
		if old, ok := prev.Values[id]; !ok || !reflect.DeepEqual(old, v) {
			changed = append(changed, id)
		}
	}
	for id := range prev.Values {
		if _, ok := after.Values[id]; !ok {
			changed = append(changed, id)
		}
	}
	slices.Sort(changed)
	for _, id := range changed {
		_, set := after.Values[id]
		add(eventlog.FieldChanged, id, map[string]any{"field_id": id, "cleared": !set})
	}
	eventlog.EmitAll(ctx, s.events, s.log, evs)
}
