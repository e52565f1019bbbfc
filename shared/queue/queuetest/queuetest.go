// Package queuetest is the work queue of tests: a queue.Sender that records what it is
// sent, for the test to inspect or deliver by hand, and that can be made to refuse every
// message, as a queue outage would.
package queuetest

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/queue"
)

// Sender is a queue.Sender that keeps every message it accepts, in the order sent. Like
// the real queues it accepts a batch only if every message of it is valid
// (queue.Message.Validate), and then all of it. Its zero value is ready to use; it is
// safe for concurrent use.
type Sender struct {
	mu   sync.Mutex
	msgs []queue.Message
	err  error
}

var _ queue.Sender = (*Sender)(nil)

// Send implements queue.Sender: it returns the error set by Fail, if any, or the first
// message's validation error, and otherwise records msgs.
func (s *Sender) Send(_ context.Context, msgs ...queue.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	for _, m := range msgs {
		if err := m.Validate(); err != nil {
			return err
		}
	}
	s.msgs = append(s.msgs, msgs...)
	return nil
}

// Fail makes every later Send return err and record nothing; Fail(nil) makes the queue
// accept messages again.
func (s *Sender) Fail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// Sent returns the messages recorded and not yet taken, oldest first, leaving them
// recorded.
func (s *Sender) Sent() []queue.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.msgs)
}

// Take returns the messages recorded, oldest first, and forgets them, as a queue hands its
// messages to a consumer.
func (s *Sender) Take() []queue.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.msgs
	s.msgs = nil
	return out
}

// Pop takes the oldest message recorded, reporting false when there is none.
func (s *Sender) Pop() (queue.Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.msgs) == 0 {
		return queue.Message{}, false
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, true
}

// Decode decodes the body of each of msgs into a T, failing the test at the first that
// does not decode. It returns an empty, non-nil slice for no messages.
func Decode[T any](t testing.TB, msgs []queue.Message) []T {
	t.Helper()
	out := make([]T, len(msgs))
	for i, m := range msgs {
		require.NoError(t, m.Decode(&out[i]), "%s: %s", m.Type, m.Body)
	}
	return out
}
