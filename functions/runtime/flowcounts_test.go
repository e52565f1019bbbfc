package runtime

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/flowstats"
)

// The flow counters the runtime writes with each step are what FlowWrites derives from the
// recorded traces of the same runs: a press counts the buttons step continued (not entered
// again), a wait counts its time, a normal end continues the last step, a failure counts an
// error and leaves nothing to continue.
func TestFlowCountersMatchTheTraces(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.publish(`{"name":"menu","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hello"},
		{"id":"ask","type":"buttons","text":"Pick","buttons":[{"title":"Yes","step_id":"yes"},{"title":"No","step_id":"no"}]},
		{"id":"yes","type":"wait","seconds":60},
		{"id":"after","type":"send_text","text":"after"},
		{"id":"done","type":"end"},
		{"id":"no","type":"send_text","text":"bye"}]}`)

	// Run 1: hi, ask (press Yes after 2 minutes), yes (wait 60 s), after, done.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	f.clock.advance(2 * time.Minute)
	yes := f.adapter.last().Msg.Buttons[0].Payload
	require.NoError(t, f.deliver(f.inbound("", yes)))
	f.clock.advance(61 * time.Second)
	f.drain()
	// Run 2: hi, ask, then a text ends the wait (reply): ask is dropped.
	require.NoError(t, f.deliver(f.inbound("/start", "")))
	require.NoError(t, f.deliver(f.inbound("whatever", "")))
	// Run 3: hi fails (the provider refuses): an error, nothing continued.
	f.adapter.failNext(&channel.Error{Kind: channel.ErrBlocked, Provider: channel.Telegram, Code: "403", Message: "blocked"})
	require.NoError(t, f.deliver(f.inbound("/start", "")))

	sub := f.subs.only(t)
	runs := f.runs(sub.ID)
	require.Len(t, runs, 3)
	assert.Equal(t, EndStep, *runs[2].EndReason)
	assert.Equal(t, StatusFailed, runs[0].Status)

	now := f.clock.Now()
	got, err := flowstats.Query(t.Context(), f.st, f.bot, id, 1, now.Add(-24*time.Hour), now.Add(time.Hour))
	require.NoError(t, err)
	c := func(step string) flowstats.Counts {
		if got[step] == nil {
			return flowstats.Counts{}
		}
		return *got[step]
	}
	assert.Equal(t, int64(3), c("hi").Entered)
	assert.Equal(t, int64(2), c("hi").Completed)
	assert.Equal(t, int64(1), c("hi").Errors)
	assert.Equal(t, int64(2), c("hi").Continued)
	assert.Equal(t, int64(2), c("ask").Entered, "the press is no second visit")
	assert.Equal(t, int64(2), c("ask").Completed)
	assert.Equal(t, int64(1), c("ask").Continued, "the reply abandoned the other")
	m, ok := flowstats.EstimateMedian(c("ask").Times)
	require.True(t, ok)
	assert.LessOrEqual(t, m.Low, float64(2*time.Minute/time.Millisecond))
	assert.Greater(t, *m.High, float64(2*time.Minute/time.Millisecond), "the time to the press")
	assert.Equal(t, int64(1), c("yes").Continued)
	m, _ = flowstats.EstimateMedian(c("yes").Times)
	assert.Greater(t, *m.High, float64(61*time.Second/time.Millisecond), "the wait's time")
	assert.Equal(t, int64(1), c("done").Entered)
	assert.Equal(t, int64(1), c("done").Continued, "an end step ends normally")
	assert.Equal(t, flowstats.Counts{}, c("no"))

	// The live counters of every day equal what the traces recount.
	tr := NewTraces(f.st, f.subs, f.clock.Now)
	want := flowstats.Tally{}
	require.NoError(t, tr.RecentRuns(t.Context(), f.bot, 100, func(e Execution) (bool, error) {
		steps, err := tr.Steps(t.Context(), f.bot, e.ID)
		if err != nil {
			return false, err
		}
		want.Add(FlowWrites(Detail{Execution: e, Steps: steps}))
		return true, nil
	}))
	have := flowstats.Tally{}
	for _, d := range flowstats.Days(now.Add(-24*time.Hour), now.Add(time.Hour)) {
		day, err := flowstats.DayCounters(t.Context(), f.st, f.bot, d)
		require.NoError(t, err)
		for k, n := range day {
			have[k] = n
		}
	}
	assert.NotEmpty(t, have)
	assert.True(t, flowstats.Equal(have, want), "live %v\nrecount %v", have, want)
}
