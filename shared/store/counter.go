package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/backoff"
)

// Counter is a count read so that it can be moved in a transaction: a limit ("at most 100
// tokens per user") holds under concurrency when each creation moves the counter in its own
// transaction, conditioned on the revision it read. Two creations that read the same count
// cannot both commit: one of them fails its condition, reads again and sees the other.
type Counter struct {
	// Count is the count read (0 when the counter does not exist yet).
	Count int64
	// Exists reports whether the counter item was there.
	Exists bool
	// Write sets the count to Count plus the delta given to ReadCounter (never below 0),
	// on the condition that the counter has not changed since it was read.
	Write Write

	key      Key
	revision int64
}

// ReadCounter reads the counter at key and prepares the write that moves it by delta.
func ReadCounter(ctx context.Context, st Store, key Key, delta int64) (Counter, error) {
	it, err := st.Get(ctx, key)
	switch {
	case errors.Is(err, ErrNotFound):
		return Counter{key: key}.Set(delta), nil
	case err != nil:
		return Counter{}, err
	}
	return Counter{Count: it.Count, Exists: true, key: key, revision: it.Revision}.Set(it.Count + delta), nil
}

// Set returns c with its Write setting the count to n (never below 0), under the same
// condition. A caller that recounted what the counter counts repairs it this way: a counter
// of things that can vanish without a decrement (items that expire) only ever drifts up.
func (c Counter) Set(n int64) Counter {
	if c.Exists {
		c.Write = PutOp(Item{Key: c.key, Count: max(n, 0), Revision: c.revision + 1}, RevisionIs(c.revision))
	} else {
		c.Write = PutOp(Item{Key: c.key, Count: max(n, 0), Revision: 1}, MustNotExist)
	}
	return c
}

// CounterAttempts bounds how often Counted reads again after a concurrent writer moved the
// counter first; then it gives up with ErrUnavailable (503: the client retries later).
const CounterAttempts = 16

// counterContention spaces those attempts: up to 1 ms before the first retry, doubling to
// 100 ms, full jitter, so that writers contending for one counter spread out.
var counterContention = backoff.Policy{Base: time.Millisecond, Max: 100 * time.Millisecond, Jitter: backoff.Full}

// Counted runs write with the counter at key read and prepared to move by delta. write must
// put the Counter's Write FIRST in its transaction (or return its own error): when that
// write fails its condition, another writer moved the counter meanwhile, and Counted reads
// it again and calls write again. Any other outcome of write is returned as it is.
func Counted(ctx context.Context, st Store, key Key, delta int64, write func(Counter) error) error {
	for attempt := range CounterAttempts {
		if err := counterContention.Sleep(ctx, attempt); err != nil {
			return err
		}
		c, err := ReadCounter(ctx, st, key, delta)
		if err != nil {
			return err
		}
		err = write(c)
		if ce := (*ConditionError)(nil); !errors.As(err, &ce) || ce.Index != 0 {
			return err
		}
	}
	return fmt.Errorf("store: counter %s/%s keeps changing: %w", key.PK, key.SK, ErrUnavailable)
}
