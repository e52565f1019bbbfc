package queue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/queue"
)

func TestMuxRoutesByType(t *testing.T) {
	t.Parallel()
	mux := queue.NewMux()
	var got string
	mux.HandleFunc("a.job", func(ctx context.Context, m queue.Message) error {
		var b struct{ X string }
		require.NoError(t, m.Decode(&b))
		got = b.X
		return nil
	})
	m, err := queue.New("a.job", map[string]string{"x": "1", "later_field": "tolerated"})
	require.NoError(t, err)
	require.NoError(t, mux.HandleMessage(context.Background(), m))
	assert.Equal(t, "1", got)

	m.Type = "b.job"
	assert.ErrorIs(t, mux.HandleMessage(context.Background(), m), queue.ErrUnknownType)
	assert.Panics(t, func() { mux.HandleFunc("a.job", func(context.Context, queue.Message) error { return nil }) })
}

func TestNewRefusesBadMessages(t *testing.T) {
	t.Parallel()
	_, err := queue.New("", 1)
	assert.Error(t, err)
	_, err = queue.New("ok", func() {})
	assert.Error(t, err)
	_, err = queue.New("has space", 1)
	assert.Error(t, err)
	m, err := queue.New("ok", 1)
	require.NoError(t, err)
	assert.Equal(t, len("1")+len("type")+len("String")+len("ok"), m.Size())
}

type extender struct{ got time.Duration }

func (e *extender) ExtendVisibility(_ context.Context, d time.Duration) error { e.got = d; return nil }

func TestExtendVisibilityReachesTheConsumer(t *testing.T) {
	t.Parallel()
	assert.True(t, errors.Is(queue.ExtendVisibility(context.Background(), time.Second), queue.ErrNotHandling))
	e := &extender{}
	require.NoError(t, queue.ExtendVisibility(queue.WithExtender(context.Background(), e), time.Minute))
	assert.Equal(t, time.Minute, e.got)
}

func TestRetryAfterWrapsAndReports(t *testing.T) {
	t.Parallel()
	base := errors.New("throttled")
	err := queue.RetryAfter(base, 3*time.Second)
	assert.ErrorIs(t, err, base)
	assert.Equal(t, "throttled", err.Error())
	assert.Equal(t, 3*time.Second, queue.RetryDelay(fmt.Errorf("step: %w", err)))
	assert.Zero(t, queue.RetryDelay(base))
	assert.NoError(t, queue.RetryAfter(nil, time.Second))
	assert.Equal(t, base, queue.RetryAfter(base, 0))
}
