package backoff_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/botplatform/api/shared/backoff"
)

func TestDelayBounds(t *testing.T) {
	t.Parallel()
	for _, jitter := range []backoff.Jitter{backoff.Equal, backoff.Full} {
		p := backoff.Policy{Base: 100 * time.Millisecond, Max: time.Second, Jitter: jitter}
		ceilings := []time.Duration{100, 200, 400, 800, 1000, 1000, 1000}
		for i, c := range ceilings {
			ceiling := c * time.Millisecond
			floor := ceiling / 2
			if jitter == backoff.Full {
				floor = 0
			}
			var lowest, highest time.Duration = ceiling, 0
			for range 2000 {
				d := p.Delay(i + 1)
				assert.GreaterOrEqual(t, d, floor, "retry %d", i+1)
				assert.LessOrEqual(t, d, ceiling, "retry %d", i+1)
				lowest, highest = min(lowest, d), max(highest, d)
			}
			// Randomized: over 2000 draws both ends of the range are approached.
			assert.Less(t, lowest, floor+(ceiling-floor)/10, "retry %d spreads down", i+1)
			assert.Greater(t, highest, ceiling-(ceiling-floor)/10, "retry %d spreads up", i+1)
		}
	}
}

func TestDelayEdges(t *testing.T) {
	t.Parallel()
	p := backoff.Policy{Base: time.Millisecond, Max: 4 * time.Millisecond}
	assert.Zero(t, p.Delay(0), "the first attempt does not wait")
	assert.Zero(t, p.Delay(-3))
	assert.Zero(t, backoff.Policy{}.Delay(5), "the zero policy never waits")
	assert.LessOrEqual(t, backoff.Policy{Base: time.Hour}.Delay(200), time.Duration(1<<63-1), "no Max, no overflow")
	assert.Positive(t, backoff.Policy{Base: time.Hour}.Delay(200))
}

func TestSleepEndsWithContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p := backoff.Policy{Base: time.Hour, Max: time.Hour}
	assert.ErrorIs(t, p.Sleep(ctx, 3), context.Canceled)
	assert.ErrorIs(t, backoff.Wait(ctx, 0), context.Canceled, "an ended context is reported even without a wait")
	assert.NoError(t, p.Sleep(t.Context(), 0), "retry 0 does not wait")
	assert.NoError(t, backoff.Policy{Base: time.Millisecond}.Sleep(t.Context(), 1))
}
