package wiring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/queue/queuetest"
)

// Labels added over the API reach the runtime as its own label events: one runtime.trigger
// message per label, caused by the subscriber's revision that added it, staged in the
// outbox (one write of the change's transaction for every label) and sent once the change
// has committed.
func TestLabelTriggers(t *testing.T) {
	t.Parallel()
	q := &queuetest.Sender{}
	env := familytest.Env(t, family.Deps{Queue: q})
	hook := labelTrigger{env.Outbox}
	writes, committed, err := hook.LabelsAdded(t.Context(), "bot_1", subscribers.LabelAddition{
		SubscriberID: "sub_1", Channel: "vk", LabelIDs: []string{"lbl_a", "lbl_b"}, Revision: 3})
	require.NoError(t, err)
	require.Len(t, writes, 1, "one outbox item")
	assert.Empty(t, q.Sent(), "nothing is sent before the commit")
	require.NoError(t, env.Store.Transact(t.Context(), writes))
	committed(t.Context())
	sent := q.Sent()
	require.Len(t, sent, 2)
	for i, label := range []string{"lbl_a", "lbl_b"} {
		m := sent[i]
		assert.Equal(t, runtime.TriggerMessage, m.Type)
		want, err := runtime.LabelAddedMessage("bot_1", "sub_1", channel.VK, label, 3)
		require.NoError(t, err)
		assert.JSONEq(t, string(want.Body), string(m.Body))
		assert.JSONEq(t, `{"bot_id":"bot_1","subscriber_id":"sub_1","kind":"vk","label_id":"`+label+`","cause":"sub_1.3.`+label+`","from_execution_id":"","hops":0}`, string(m.Body))
	}
}
