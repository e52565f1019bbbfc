package queuetest_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
)

func msg(t *testing.T, n int) queue.Message {
	t.Helper()
	m, err := queue.New("test.n", struct{ N int }{n})
	require.NoError(t, err)
	return m
}

func TestSenderRecordsRefusesAndHandsOut(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var q queuetest.Sender
	require.NoError(t, q.Send(ctx, msg(t, 1), msg(t, 2)))
	assert.Equal(t, []queue.Message{msg(t, 1), msg(t, 2)}, q.Sent())
	assert.Len(t, q.Sent(), 2, "Sent leaves the messages recorded")

	bad := queue.Message{Type: "bad type!", Body: json.RawMessage(`{}`)}
	require.Error(t, q.Send(ctx, msg(t, 3), bad))
	assert.Len(t, q.Sent(), 2, "an invalid message refuses its whole batch")

	down := errors.New("queue down")
	q.Fail(down)
	assert.ErrorIs(t, q.Send(ctx, msg(t, 3)), down)
	q.Fail(nil)
	require.NoError(t, q.Send(ctx, msg(t, 3)))

	m, ok := q.Pop()
	require.True(t, ok)
	assert.Equal(t, msg(t, 1), m)
	taken := q.Take()
	assert.Equal(t, []struct{ N int }{{2}, {3}}, queuetest.Decode[struct{ N int }](t, taken))
	assert.Empty(t, q.Take())
	_, ok = q.Pop()
	assert.False(t, ok)
	assert.NotNil(t, queuetest.Decode[struct{ N int }](t, nil))
}
