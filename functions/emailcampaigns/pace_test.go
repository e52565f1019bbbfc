package emailcampaigns

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/queue"
)

// Two campaigns sending at once share the provider's rate: together they send no faster
// than one alone may (one message every 1/Rate seconds), each recipient of each once. The
// steps run side by side, as two jobs Lambdas run them, on the real clock; the check is a
// lower bound on when each message left, which a slow machine only makes easier to meet.
func TestCampaignsSendingAtOnceShareTheRate(t *testing.T) {
	t.Parallel()
	const rate, people = 50, 40
	f := newFixture(t, people, func(c *Config) { c.Rate, c.StepDuration = rate, time.Second })
	// The fixture's clock moves on at every sleep, whoever sleeps, so it cannot time two
	// steps at once: the real clock does. (The store keeps the fixture's clock for expiry.)
	f.build(t, time.Now, nil)
	var (
		mu sync.Mutex
		at []time.Time
	)
	f.mail.before = func(int, email.Message) error {
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		return nil
	}
	a, b := f.schedule(t, f.create(t)), f.schedule(t, f.create(t))
	began := time.Now()
	for range 50 {
		msgs := f.q.Take()
		if len(msgs) == 0 {
			break
		}
		var wg sync.WaitGroup
		for _, m := range msgs {
			wg.Go(func() {
				if err := queue.Call(jobCtx(t), f.jobs, m); err != nil {
					t.Errorf("step: %v", err)
				}
			})
		}
		wg.Wait()
	}
	require.Empty(t, f.q.Sent(), "the jobs ended")
	require.Len(t, at, 2*people)
	slices.SortFunc(at, func(x, y time.Time) int { return x.Compare(y) })
	for n, tm := range at {
		assert.False(t, tm.Before(began.Add(time.Duration(n)*time.Second/rate)), "message %d left at %s", n, tm.Sub(began))
	}
	for _, c := range []Campaign{a, b} {
		done := f.get(t, c.ID)
		assert.Equal(t, Sent, done.State)
		assert.Equal(t, int64(people), done.Counts.Sent)
	}
	for addr, n := range f.sentTo() {
		assert.Equal(t, 2, n, "%s: once by each campaign", addr)
	}
}

// The provider's quota replaces the default rate: asked once, when a send first needs the
// rate, bounded by MaxRate; one it cannot give leaves the default; a configured rate asks
// nothing.
func TestSendRateAsksTheQuotaOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 0)
	build := func(rate float64, quota func(context.Context) (float64, error)) *Service {
		d := f.svc.d
		d.Quota = quota
		svc, err := New(d, Config{Rate: rate, PublicURL: publicURL})
		require.NoError(t, err)
		return svc
	}
	var calls atomic.Int32
	answer := func(r float64, err error) func(context.Context) (float64, error) {
		return func(context.Context) (float64, error) { calls.Add(1); return r, err }
	}
	svc := build(0, answer(40, nil))
	assert.Zero(t, calls.Load(), "New asks nothing")
	assert.Equal(t, 40.0, svc.sendRate(t.Context()))
	assert.Equal(t, 40.0, svc.sendRate(t.Context()))
	assert.Equal(t, int32(1), calls.Load(), "asked once")

	assert.Equal(t, float64(MaxRate), build(0, answer(50_000, nil)).sendRate(t.Context()))
	assert.Equal(t, float64(DefaultRate), build(0, answer(0, errors.New("no"))).sendRate(t.Context()))
	assert.Equal(t, float64(DefaultRate), build(0, answer(0, nil)).sendRate(t.Context()))
	calls.Store(0)
	assert.Equal(t, 25.0, build(25, answer(40, nil)).sendRate(t.Context()))
	assert.Zero(t, calls.Load(), "a configured rate asks nothing")
}
