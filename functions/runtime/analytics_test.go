package runtime

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/eventlog"
)

// A run feeds the event log: the update's message_received and subscriber_created, then the
// run's reaction_started, one message_sent per message and reaction_completed; an update
// delivered again appends nothing.
func TestRunsFeedTheEventLog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.publish(`{"name":"W","trigger":{"type":"start"},"steps":[{"id":"a","type":"send_text","text":"one"},{"id":"b","type":"send_text","text":"two"}]}`)
	m := f.inbound("/start", "")
	require.NoError(t, f.deliver(m))
	require.NoError(t, f.deliver(m))

	names := func() map[string]int {
		n := map[string]int{}
		require.NoError(t, f.events.Scan(context.Background(), eventlog.Query{BotID: f.bot, From: time.Time{}, To: time.Now().Add(time.Hour * 24 * 365 * 10)},
			func(e eventlog.Event) error {
				n[e.Name]++
				assert.Equal(t, f.subs.only(t).ID, e.SubscriberID)
				assert.Equal(t, eventlog.SourceRuntime, e.Source)
				assert.NotEmpty(t, e.Channel)
				if e.Name != eventlog.MessageReceived && e.Name != eventlog.SubscriberCreated {
					assert.Equal(t, id, e.Properties["reaction_id"])
				}
				return nil
			}))
		return n
	}
	assert.Equal(t, map[string]int{
		eventlog.MessageReceived: 1, eventlog.SubscriberCreated: 1,
		eventlog.ReactionStarted: 1, eventlog.MessageSent: 2, eventlog.ReactionCompleted: 1,
	}, names())

	// A second /start from the same subscriber: a second run, no second creation.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	assert.Equal(t, map[string]int{
		eventlog.MessageReceived: 2, eventlog.SubscriberCreated: 1,
		eventlog.ReactionStarted: 2, eventlog.MessageSent: 4, eventlog.ReactionCompleted: 2,
	}, names())
}
