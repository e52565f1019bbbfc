package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/store"
)

// countTo is a job that counts from 0 to payload.To, one number per step.
func countTo(seen *[]int) Step {
	return func(_ context.Context, payload json.RawMessage, cursor string) (string, bool, error) {
		var p struct{ To int }
		if err := json.Unmarshal(payload, &p); err != nil {
			return "", false, err
		}
		n := 0
		if cursor != "" {
			var err error
			if n, err = strconv.Atoi(cursor); err != nil {
				return "", false, err
			}
		}
		*seen = append(*seen, n)
		if n >= p.To {
			return "", true, nil
		}
		return strconv.Itoa(n + 1), false, nil
	}
}

func TestQueueRunnerDrivesStepsToCompletion(t *testing.T) {
	t.Parallel()
	var seen []int
	reg := NewRegistry()
	reg.Register("count", countTo(&seen))
	q := &queuetest.Sender{}
	r := NewQueueRunner(q, reg)
	mux := queue.NewMux()
	r.Register(mux)

	require.NoError(t, r.Start(context.Background(), "count", map[string]int{"To": 3}))
	for delivered := 0; ; delivered++ {
		m, ok := q.Pop()
		if !ok {
			break
		}
		require.Less(t, delivered, 10, "the job must finish")
		require.NoError(t, mux.HandleMessage(context.Background(), m))
	}
	assert.Equal(t, []int{0, 1, 2, 3}, seen)
}

func TestFailedStepSendsNoContinuation(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	boom := errors.New("downstream is down")
	reg.Register("fail", func(context.Context, json.RawMessage, string) (string, bool, error) { return "x", false, boom })
	q := &queuetest.Sender{}
	r := NewQueueRunner(q, reg)
	mux := queue.NewMux()
	r.Register(mux)
	require.NoError(t, r.Start(context.Background(), "fail", nil))
	first := q.Take()[0]
	err := mux.HandleMessage(context.Background(), first)
	assert.ErrorIs(t, err, boom, "the queue retries the same step")
	assert.Empty(t, q.Sent())
}

// A step that fails with Later is acknowledged and sent again, the same step from the same
// cursor, after the delay: twice down, then through; the job goes on from there.
func TestLaterRunsTheSameStepAgainAfterTheDelay(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	down := errors.New("provider down")
	var cursors []string
	failures := 2
	reg.Register("later", func(_ context.Context, _ json.RawMessage, cursor string) (string, bool, error) {
		cursors = append(cursors, cursor)
		if cursor == "1" && failures > 0 {
			failures--
			return "", false, Later(down, 30*time.Second)
		}
		return "1", cursor == "1", nil
	})
	q := &queuetest.Sender{}
	r := NewQueueRunner(q, reg)
	mux := queue.NewMux()
	r.Register(mux)
	require.NoError(t, r.Start(context.Background(), "later", nil))
	var delays []time.Duration
	for range 10 {
		m, ok := q.Pop()
		if !ok {
			break
		}
		delays = append(delays, m.Delay)
		require.NoError(t, mux.HandleMessage(context.Background(), m), "a Later is no failure of the message")
	}
	assert.Equal(t, []string{"", "1", "1", "1"}, cursors)
	assert.Equal(t, []time.Duration{0, 0, 30 * time.Second, 30 * time.Second}, delays)

	d, ok := LaterDelay(fmt.Errorf("wrapped: %w", Later(down, time.Millisecond)))
	assert.True(t, ok)
	assert.Equal(t, time.Second, d, "at least a second")
	assert.ErrorIs(t, Later(down, time.Minute), down)
	assert.NoError(t, Later(nil, time.Minute))
	_, ok = LaterDelay(down)
	assert.False(t, ok)
}

func TestRunStep(t *testing.T) {
	t.Parallel()
	var seen []int
	reg := NewRegistry()
	reg.Register("count", countTo(&seen))
	st, err := reg.RunStep(context.Background(), State{Kind: "count", Payload: json.RawMessage(`{"To":1}`)})
	require.NoError(t, err)
	assert.Equal(t, State{Kind: "count", Payload: json.RawMessage(`{"To":1}`), Cursor: "1", Steps: 1}, st)
	st, err = reg.RunStep(context.Background(), st)
	require.NoError(t, err)
	assert.True(t, st.Done)
	again, err := reg.RunStep(context.Background(), st)
	require.NoError(t, err)
	assert.Equal(t, st, again, "a done job does not run again")

	_, err = reg.RunStep(context.Background(), State{Kind: "nope"})
	assert.ErrorIs(t, err, ErrUnknownKind)
	_, err = reg.RunStep(context.Background(), State{Kind: "count", Payload: json.RawMessage(`{}`), Steps: MaxSteps})
	assert.Error(t, err, "runaway jobs stop")
	assert.ErrorIs(t, NewQueueRunner(&queuetest.Sender{}, reg).Start(context.Background(), "nope", nil), ErrUnknownKind)
	assert.Equal(t, []string{"count"}, reg.Kinds())
	assert.Panics(t, func() { reg.Register("count", countTo(&seen)) })
}

func TestStartAfterDelaysOnlyTheFirstStep(t *testing.T) {
	t.Parallel()
	var seen []int
	reg := NewRegistry()
	reg.Register("count", countTo(&seen))
	q := &queuetest.Sender{}
	r := NewQueueRunner(q, reg)
	mux := queue.NewMux()
	r.Register(mux)

	require.NoError(t, r.StartAfter(context.Background(), 10*time.Minute, "count", map[string]int{"To": 1}))
	sent := q.Take()
	require.Len(t, sent, 1)
	assert.Equal(t, 10*time.Minute, sent[0].Delay)
	first := sent[0]
	require.NoError(t, mux.HandleMessage(context.Background(), first))
	sent = q.Sent()
	require.Len(t, sent, 1)
	assert.Zero(t, sent[0].Delay, "continuations run at once")

	assert.ErrorIs(t, r.StartAfter(context.Background(), time.Minute, "nope", nil), ErrUnknownKind)
	assert.Error(t, r.StartAfter(context.Background(), queue.MaxScheduledDelay+time.Second, "count", nil), "beyond what any queue keeps")
}

// StartMessage is the message StartAfter sends, for a caller that sends it through the
// outbox: the runner runs it like one it sent.
func TestStartMessageIsWhatStartAfterSends(t *testing.T) {
	t.Parallel()
	var seen []int
	reg := NewRegistry()
	reg.Register("count", countTo(&seen))
	q := &queuetest.Sender{}
	r := NewQueueRunner(q, reg)
	require.NoError(t, r.StartAfter(context.Background(), time.Minute, "count", map[string]int{"To": 0}))
	m, err := StartMessage(time.Minute, "count", map[string]int{"To": 0})
	require.NoError(t, err)
	assert.Equal(t, q.Sent()[0], m)

	mux := queue.NewMux()
	r.Register(mux)
	require.NoError(t, mux.HandleMessage(context.Background(), m))
	assert.Equal(t, []int{0}, seen)

	_, err = StartMessage(0, "", nil)
	assert.Error(t, err)
	_, err = StartMessage(queue.MaxScheduledDelay+time.Second, "count", nil)
	assert.Error(t, err)
	_, err = StartMessage(0, "count", func() {})
	assert.Error(t, err, "a payload that is no JSON")
}

// A numbered step's cursor reads back as the number it was written as; the first step has
// none, and anything else is refused rather than read as a step.
func TestStepNumber(t *testing.T) {
	t.Parallel()
	n, err := StepNumber("", 3)
	require.NoError(t, err)
	assert.Equal(t, int64(3), n, "the first step")
	n, err = StepNumber(strconv.FormatInt(41, 10), 3)
	require.NoError(t, err)
	assert.Equal(t, int64(41), n)
	for _, bad := range []string{"-1", "x", "1.5", "99999999999999999999"} {
		_, err := StepNumber(bad, 0)
		assert.Error(t, err, bad)
	}
}

// Failures counts one step's failures, and starts over for another step or run.
func TestFailuresCountOneStep(t *testing.T) {
	t.Parallel()
	var f Failures
	assert.Equal(t, 1, f.Add(1, 4))
	assert.Equal(t, 2, f.Add(1, 4))
	assert.Equal(t, 1, f.Add(1, 5), "the next step starts over")
	assert.Equal(t, 1, f.Add(2, 5), "a new run starts over")
	assert.Equal(t, Failures{Epoch: 2, Step: 5, Count: 1}, f)
}

// Only the store being unavailable becomes Later; Later stays as it was, anything else too.
func TestLaterWhenUnavailable(t *testing.T) {
	t.Parallel()
	err, later := LaterWhenUnavailable(fmt.Errorf("put: %w", store.ErrUnavailable), 30*time.Second)
	require.True(t, later)
	d, ok := LaterDelay(err)
	assert.True(t, ok)
	assert.Equal(t, 30*time.Second, d)
	assert.ErrorIs(t, err, store.ErrUnavailable)

	own := Later(fmt.Errorf("provider: %w", store.ErrUnavailable), time.Minute)
	err, later = LaterWhenUnavailable(own, 30*time.Second)
	assert.False(t, later, "already Later: its own delay")
	assert.Same(t, own, err)
	bug := errors.New("a bug")
	err, later = LaterWhenUnavailable(bug, 30*time.Second)
	assert.False(t, later)
	assert.Same(t, bug, err)
	err, later = LaterWhenUnavailable(nil, 30*time.Second)
	assert.False(t, later)
	assert.NoError(t, err)
}

// A step's panic is an error with its stack; what the step returns passes through.
func TestSafely(t *testing.T) {
	t.Parallel()
	next, done, err := Safely(func() (string, bool, error) { panic("boom") })
	assert.Empty(t, next)
	assert.False(t, done)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "boom")
	assert.Contains(t, err.Error(), "TestSafely", "with the stack")
	next, done, err = Safely(func() (string, bool, error) { return "7", true, nil })
	assert.Equal(t, "7", next)
	assert.True(t, done)
	assert.NoError(t, err)
}
