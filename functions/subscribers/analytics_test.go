package subscribers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/eventlog/eventlogtest"
)

// Stored changes reach the event log once each: the creation, each label added or removed,
// each field set or cleared (its id, not its value); a change that changes nothing records
// nothing.
func TestChangesFeedTheEventLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t, false)
	log := eventlogtest.NewMemory()
	f.svc = f.svc.WithEvents(log, nil)
	ctx := t.Context()
	vip, plan := f.label(t, "vip"), f.field(t, "plan", TypeString)

	sub, _, err := f.svc.Upsert(ctx, f.bot, "telegram", "42", Changes{AddLabels: []string{vip.ID}})
	require.NoError(t, err)
	_, err = f.svc.SetFields(ctx, f.bot, sub.ID, map[string]any{"plan": "pro"})
	require.NoError(t, err)
	_, err = f.svc.SetFields(ctx, f.bot, sub.ID, map[string]any{"plan": "pro"}) // the same value again
	require.NoError(t, err)
	_, err = f.svc.RemoveLabel(ctx, f.bot, sub.ID, vip.ID)
	require.NoError(t, err)
	_, err = f.svc.SetFields(ctx, f.bot, sub.ID, map[string]any{"plan": nil})
	require.NoError(t, err)

	var got []string
	require.NoError(t, log.Scan(ctx, eventlog.Query{BotID: f.bot, To: f.clock.Now().Add(time.Hour)}, func(e eventlog.Event) error {
		assert.Equal(t, sub.ID, e.SubscriberID)
		assert.Equal(t, "telegram", e.Channel)
		name := e.Name
		if id, ok := e.Properties["label_id"]; ok {
			assert.Equal(t, vip.ID, id)
		}
		if id, ok := e.Properties["field_id"]; ok {
			assert.Equal(t, plan.ID, id)
			if e.Properties["cleared"] == true {
				name += "(cleared)"
			}
		}
		got = append(got, name)
		return nil
	}))
	assert.ElementsMatch(t, []string{"subscriber_created", "label_added", "field_changed", "label_removed", "field_changed(cleared)"}, got)
}
