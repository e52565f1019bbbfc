package store

import (
	"context"
	"errors"
	"sync"
)

// Deferral lets the writes of one piece of work skip waiting for their own disk sync,
// because a flush before the work acknowledges anything makes them durable together. Two
// pieces of work open one: a mutating request (shared/httpapi), whose audit event, a synced
// commit before the response's first byte, covers the store's deferred writes; and a queue
// message's handler in the conversation runtime (functions/runtime), which settles before
// the queue deletes the message and syncs (Sync) before it sends to a provider. A store
// whose commits wait for a sync (the SQLite store and the SQLite event log under full
// durability) commits a write made under an open Deferral without that wait and leaves a
// flush with the Deferral; Settle runs the flushes still needed, so a response never
// acknowledges a write that a power loss could take back, whatever became of the audit
// event. Stores that do not wait for a local disk (DynamoDB, memory) ignore it.
//
// The win is latency, not safety: a request that writes three times under full durability
// pays one sync instead of three. Another request may read a deferred write before it is
// durable (it is committed); if a power loss then takes it back, that reader acted on a
// write nobody had acknowledged, the same window as PostgreSQL's synchronous_commit=off.
type Deferral struct {
	mu     sync.Mutex
	closed bool
	marks  map[Flusher]uint64
	order  []Flusher
}

// Flusher is a store whose commits wait for a disk sync unless deferred. Its marks count its
// commits: Flush(mark) returns once every commit up to mark is durable.
type Flusher interface {
	Flush(ctx context.Context, mark uint64) error
}

type deferralKey struct{}

// DeferSync returns ctx carrying a new open Deferral, and the Deferral. The caller must
// Settle it before it acknowledges anything written under ctx.
func DeferSync(ctx context.Context) (context.Context, *Deferral) {
	d := &Deferral{}
	return context.WithValue(ctx, deferralKey{}, d), d
}

// DeferralOf returns ctx's Deferral, or nil. A store calls Defer on it after a commit.
func DeferralOf(ctx context.Context) *Deferral {
	d, _ := ctx.Value(deferralKey{}).(*Deferral)
	return d
}

// Defer leaves with d the sync of f's commits up to mark (the highest mark of f wins: its
// flush covers the earlier ones). It reports false once d is closed (or nil): the store must
// then sync the write itself before returning.
func (d *Deferral) Defer(f Flusher, mark uint64) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	if d.marks == nil {
		d.marks = make(map[Flusher]uint64, 1)
	}
	old, ok := d.marks[f]
	if !ok {
		d.order = append(d.order, f)
	}
	d.marks[f] = max(old, mark)
	return true
}

// Close ends the deferral: writes made under d's context from now on sync on their own.
// The kernel closes it before it writes the audit event, so that event is a synced commit.
func (d *Deferral) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
}

// Settle closes d and flushes what was left with it, once. A flush whose commits a later
// synced commit already covered costs nothing (the SQLite store counts its syncs).
func (d *Deferral) Settle(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	marks, order := d.marks, d.order
	d.marks, d.order = nil, nil
	d.mu.Unlock()
	return flush(ctx, marks, order)
}

// Sync flushes what was left with d so far and keeps d open (a nil d has nothing to flush).
// Work that is about to act outside its stores, say send a message to a provider, calls it
// first: a power loss after the act must not take back the writes that decided it (the run
// state the act's idempotency key derives from). What Sync flushed costs Settle nothing.
func (d *Deferral) Sync(ctx context.Context) error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	marks := make(map[Flusher]uint64, len(d.marks))
	for f, m := range d.marks {
		marks[f] = m
	}
	order := append([]Flusher(nil), d.order...)
	d.mu.Unlock()
	return flush(ctx, marks, order)
}

// flush flushes each store up to its mark. Different stores are different files, whose
// syncs run at once rather than one after the other.
func flush(ctx context.Context, marks map[Flusher]uint64, order []Flusher) error {
	if len(order) == 1 {
		return order[0].Flush(ctx, marks[order[0]])
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, f := range order {
		wg.Go(func() { errs[i] = f.Flush(ctx, marks[f]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
