package wiring

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/runtime"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/queue"
)

// sentMessages is a queue.Sender that keeps what it is given.
type sentMessages struct{ msgs []queue.Message }

func (s *sentMessages) Send(_ context.Context, msgs ...queue.Message) error {
	s.msgs = append(s.msgs, msgs...)
	return nil
}

// Labels added over the API reach the runtime as its own label events: one runtime.trigger
// message per label, caused by the subscriber's revision that added it, staged in the
// outbox (one write of the change's transaction for every label) and sent once the change
// has committed.
func TestLabelTriggers(t *testing.T) {
	t.Parallel()
	q := &sentMessages{}
	env := familytest.Env(t, family.Deps{Queue: q})
	hook := labelTrigger{env.Outbox}
	writes, committed, err := hook.LabelsAdded(t.Context(), "bot_1", subscribers.LabelAddition{
		SubscriberID: "sub_1", Channel: "vk", LabelIDs: []string{"lbl_a", "lbl_b"}, Revision: 3})
	require.NoError(t, err)
	require.Len(t, writes, 1, "one outbox item")
	assert.Empty(t, q.msgs, "nothing is sent before the commit")
	require.NoError(t, env.Store.Transact(t.Context(), writes))
	committed(t.Context())
	require.Len(t, q.msgs, 2)
	for i, label := range []string{"lbl_a", "lbl_b"} {
		m := q.msgs[i]
		assert.Equal(t, runtime.TriggerMessage, m.Type)
		want, err := runtime.LabelAddedMessage("bot_1", "sub_1", channel.VK, label, 3)
		require.NoError(t, err)
		assert.JSONEq(t, string(want.Body), string(m.Body))
		assert.JSONEq(t, `{"bot_id":"bot_1","subscriber_id":"sub_1","kind":"vk","label_id":"`+label+`","cause":"sub_1.3.`+label+`","from_execution_id":"","hops":0}`, string(m.Body))
	}
}
