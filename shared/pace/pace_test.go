package pace

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The pacer keeps every sliding second at or under the rate, counted from the answers, and
// otherwise sends at the rate: a slow answer delays the send n turns later, not the next.
func TestPacerSlidingSecond(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	sleep := func(_ context.Context, d time.Duration) error { clock = clock.Add(d); return nil }
	const rate = 10
	p := PerSecond(rate, clock, nil)
	start := clock
	var starts, answers []time.Time
	for i := range 60 {
		answered, err := p.Take(t.Context(), now, sleep)
		require.NoError(t, err)
		starts = append(starts, clock)
		if i == 25 {
			clock = clock.Add(700 * time.Millisecond) // one slow answer
		}
		answered()
		answers = append(answers, clock)
	}
	for i := rate; i < len(starts); i++ {
		assert.GreaterOrEqual(t, starts[i].Sub(answers[i-rate]), time.Second, "send %d starts a second after the answer to send %d", i, i-rate)
	}
	assert.Equal(t, starts[26], answers[25], "the send after the slow answer does not wait for it")
	took := clock.Sub(start)
	// 60 sends at 10 a second end at 5.9 s; the 0.7 s answer is made up within the window
	// but for what the sliding second cannot hold.
	assert.InDelta(t, 6.2, took.Seconds(), 0.01, "60 sends at 10 a second, and one 0.7 s answer")
}

// ready waits for the next turn without taking it: the turn is still there for take.
func TestPacerReadyDoesNotTakeTheTurn(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	slept := time.Duration(0)
	sleep := func(_ context.Context, d time.Duration) error { clock = clock.Add(d); slept += d; return nil }
	p := PerSecond(2, clock, nil)
	require.NoError(t, p.Ready(t.Context(), now, sleep))
	first := slept
	require.NoError(t, p.Ready(t.Context(), now, sleep))
	assert.Equal(t, first, slept, "a second ready waits no more")
	answered, err := p.Take(t.Context(), now, sleep)
	require.NoError(t, err)
	answered()
	assert.Equal(t, first, slept, "take finds the turn ready")
}

// A step's answers, kept in RUN, pace the next step: across the boundary, too, a send starts
// only a second after the answer n sends before it, however the first step ended.
func TestPacerAcrossSteps(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 26, 9, 0, 0, 123_456_789, time.UTC)
	now := func() time.Time { return clock }
	sleep := func(_ context.Context, d time.Duration) error { clock = clock.Add(d); return nil }
	const rate = 10
	var starts, answers []time.Time
	send := func(p *Pacer, k int) {
		for range k {
			answered, err := p.Take(t.Context(), now, sleep)
			require.NoError(t, err)
			starts = append(starts, clock)
			clock = clock.Add(3 * time.Millisecond) // the round trip
			if len(starts) == 18 {
				clock = clock.Add(700 * time.Millisecond) // a slow one: the sends after it catch up
			}
			answered()
			answers = append(answers, clock)
		}
	}
	p := PerSecond(rate, clock, nil)
	send(p, 25)
	kept := NewLog(p.Recent(clock))
	require.NotEmpty(t, kept.MS)
	clock = clock.Add(150 * time.Millisecond) // the next step starts a little later
	send(PerSecond(rate, clock, kept.Times()), 25)
	for i := rate; i < len(starts); i++ {
		assert.GreaterOrEqual(t, starts[i].Sub(answers[i-rate]), time.Second, "send %d after the answer to send %d", i, i-rate)
	}
}

// What a run keeps is the calls it made, not the even use a pacer without history assumes:
// a run that made 3 calls keeps 3 answers, whatever the rate.
func TestRecentKeepsOnlyCallsMade(t *testing.T) {
	t.Parallel()
	clock := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	sleep := func(_ context.Context, d time.Duration) error { clock = clock.Add(d); return nil }
	p := New(1000, time.Second, clock, nil)
	assert.Empty(t, p.Recent(clock), "nothing was called")
	for range 3 {
		answered, err := p.Take(t.Context(), now, sleep)
		require.NoError(t, err)
		answered()
	}
	assert.Len(t, p.Recent(clock), 3)
	assert.Len(t, New(1000, time.Second, clock, p.Recent(clock)).Recent(clock), 3, "kept across runs")
}
