package httpapitest

import (
	"sync"
	"time"
)

// Clock is a test clock, safe for concurrent use. It reads the same until Advance moves it,
// so that times in replies and records are exact; made with a step, it moves on by the step
// before every reading, for code that needs distinct, ordered instants (ids minted at one
// instant sort by their random part, not by creation).
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

// NewClock returns a Clock at start that moves on by step at every reading; a step of 0
// stands still.
func NewClock(start time.Time, step time.Duration) *Clock {
	return &Clock{now: start, step: step}
}

// Now reads the clock; c.Now is the func() time.Time that services, stores and the kernel take.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
