// Package backoff is the one exponential backoff of the platform: how long to wait before
// retrying work that failed for a reason that may pass (a throttled AWS call, a queue
// message whose handler failed, a conditional write that lost a race).
//
// A Policy doubles Base per retry up to Max and randomizes each delay (jitter), so that
// callers that failed together (one outage, one contended item) do not retry in lockstep.
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Jitter says how a delay is randomized below its ceiling d.
type Jitter int

const (
	// Equal waits a uniformly random time in [d/2, d]: never much sooner than d. For
	// retries of work that failed downstream (a queue message, a batch of events), where
	// coming back too soon only fails again.
	Equal Jitter = iota
	// Full waits a uniformly random time in [0, d]: the fastest to spread contenders out.
	// For races over one item (conditional writes) and throttling, where any spread helps.
	Full
)

// Policy is an exponential backoff: the ceiling of retry n (1, 2, ...) is
// min(Max, Base*2^(n-1)). The zero Policy never waits.
type Policy struct {
	Base, Max time.Duration
	Jitter    Jitter
}

// Delay returns the wait before retry n (n >= 1; the first retry is 1). It is 0 for n < 1
// or a Base that is not positive.
func (p Policy) Delay(n int) time.Duration {
	if n < 1 || p.Base <= 0 {
		return 0
	}
	d := p.Base
	for i := 1; i < n && (p.Max <= 0 || d < p.Max); i++ {
		if d > time.Duration(1<<62) { // no overflow without a Max
			break
		}
		d *= 2
	}
	if p.Max > 0 {
		d = min(d, p.Max)
	}
	if p.Jitter == Full {
		return rand.N(d + 1)
	}
	return d/2 + rand.N(d-d/2+1)
}

// Sleep waits Delay(n), or returns ctx's error as soon as ctx ends. Retry 0 (the first
// attempt) does not wait, so a loop can call Sleep(ctx, attempt) before every attempt.
func (p Policy) Sleep(ctx context.Context, n int) error {
	return Wait(ctx, p.Delay(n))
}

// Wait waits d, or returns ctx's error as soon as ctx ends (at once when it already has).
func Wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
