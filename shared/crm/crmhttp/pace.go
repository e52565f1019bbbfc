package crmhttp

import (
	"context"
	"sync"
	"time"

	"github.com/botplatform/api/shared/pace"
)

// Pace shares one pacer among the goroutines of a sync that call the same provider account:
// every API call a Client makes under a context carrying it waits for its turn, so a sync
// keeps under the provider's rate limit instead of learning it from 429s.
type Pace struct {
	mu sync.Mutex
	p  *pace.Pacer
}

// NewPace wraps p.
func NewPace(p *pace.Pacer) *Pace { return &Pace{p: p} }

// Recent returns the answers of the last window (pace.Pacer.Recent), to keep between steps.
func (p *Pace) Recent(now time.Time) []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Recent(now)
}

type paceKey struct{}

// WithPace returns ctx whose provider calls wait for p's turns.
func WithPace(ctx context.Context, p *Pace) context.Context {
	return context.WithValue(ctx, paceKey{}, p)
}

// turn waits for the next call's turn when ctx carries a Pace and returns what records its
// answer (a no-op without one).
func turn(ctx context.Context) (func(), error) {
	p, _ := ctx.Value(paceKey{}).(*Pace)
	if p == nil {
		return func() {}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p.Take(ctx, time.Now, sleep)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
