// Package pace keeps calls to a rate-limited party under its limit over every sliding window,
// as the party counts them, counting from the answers: broadcasts' sends to a channel,
// CRM sync's calls to a provider. Its state between two runs (a job's steps) is a Log.
package pace

import (
	"context"
	"time"
)

// Pacer keeps calls under a rate limit of n per sliding window (span), as a provider counts
// them: a call starts only once the call n before it was answered at least span ago.
// Counting from the answer, not from the start, keeps the provider's count under the rate
// whatever the round trip; and sends that waited (a claim, a settle) are caught up only as
// far as the window allows, never in a burst above the rate.
type Pacer struct {
	span time.Duration
	ring []*paceSlot
	next int
}

type paceSlot struct {
	done chan struct{}
	at   time.Time // when the send was answered
	// real is false for the slots New makes up for a pacer without history: they pace its
	// first calls, but no provider counted them.
	real bool
}

// PerSecond returns a Pacer of rate calls a second (any positive rate: 0.5 is one call in
// every two seconds), from start; recent as for New.
func PerSecond(rate float64, start time.Time, recent []time.Time) *Pacer {
	n := max(1, int(rate))
	return New(n, time.Duration(float64(n)*float64(time.Second)/rate), start, recent)
}

// New paces n calls per span from start. With the answers of the last window (recent,
// oldest first: the previous run's, as Log kept them), it counts them; without, it paces as
// if the last window had been used evenly up to start: the first calls go at the rate, not
// in a burst.
func New(n int, span time.Duration, start time.Time, recent []time.Time) *Pacer {
	n = max(1, n)
	p := &Pacer{span: span, ring: make([]*paceSlot, n)}
	recent = recent[max(0, len(recent)-n):]
	free := n - len(recent)
	for i := range p.ring {
		at := start.Add(-p.span + time.Duration(i)*p.span/time.Duration(n))
		switch {
		case len(recent) > 0 && i < free:
			at = start.Add(-p.span) // older than the window: free now
		case len(recent) > 0:
			at = recent[i-free]
		}
		sl := &paceSlot{done: make(chan struct{}), at: at, real: len(recent) > 0 && i >= free}
		close(sl.done)
		p.ring[i] = sl
	}
	return p
}

// Recent returns the answers of the last window before now, oldest first; call it once no
// call is in flight. Only calls made count, not the even use New assumes without history:
// what a run keeps (Log) is at most the calls of one window.
func (p *Pacer) Recent(now time.Time) []time.Time {
	var out []time.Time
	for i := range p.ring {
		sl := p.ring[(p.next+i)%len(p.ring)]
		if sl.real && sl.at.After(now.Add(-p.span)) {
			out = append(out, sl.at)
		}
	}
	return out
}

// Log is a pacer's recent answers as a job's state keeps them between steps: milliseconds
// after Base (Unix milliseconds), small enough for a rate of thousands a second.
type Log struct {
	Base int64   `json:"base"`
	MS   []int64 `json:"ms"`
}

// NewLog keeps ts (Recent's answers).
func NewLog(ts []time.Time) Log {
	if len(ts) == 0 {
		return Log{}
	}
	// Rounded up: an answer is never taken for earlier than it came.
	ceil := func(t time.Time) int64 { return (t.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond) }
	l := Log{Base: ceil(ts[0]), MS: make([]int64, len(ts))}
	for i, t := range ts {
		l.MS[i] = ceil(t) - l.Base
	}
	return l
}

// Times returns the answers kept, for New.
func (l Log) Times() []time.Time {
	out := make([]time.Time, len(l.MS))
	for i, ms := range l.MS {
		out[i] = time.UnixMilli(l.Base + ms)
	}
	return out
}

// Ready waits until the next call may start, without taking its turn.
func (p *Pacer) Ready(ctx context.Context, now func() time.Time, sleep func(context.Context, time.Duration) error) error {
	prev := p.ring[p.next]
	select {
	case <-prev.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if wait := prev.at.Add(p.span).Sub(now()); wait > 0 {
		return sleep(ctx, wait)
	}
	return nil
}

// Take waits for the next call's turn and returns the function that records its answer.
// Take is for one goroutine at a time; calls may be answered concurrently.
func (p *Pacer) Take(ctx context.Context, now func() time.Time, sleep func(context.Context, time.Duration) error) (func(), error) {
	if err := p.Ready(ctx, now, sleep); err != nil {
		return nil, err
	}
	sl := &paceSlot{done: make(chan struct{}), real: true}
	p.ring[p.next] = sl
	p.next = (p.next + 1) % len(p.ring)
	return func() { sl.at = now(); close(sl.done) }, nil
}
