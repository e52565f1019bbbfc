package telegram

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Limit answers 429 with retry_after 1 to the send beyond its count within a sliding second,
// records nothing for it, and accepts again once the oldest send is a second old; every
// accepted message carries the fake's time.
func TestLimitSlidingSecond(t *testing.T) {
	t.Parallel()
	s := New(t)
	b := s.AddBot("x_bot")
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.mu.Lock()
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	s.mu.Unlock()
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	send := func() (int, answer) { return call(t, s, b.Token, "sendMessage", `{"chat_id":1,"text":"hi"}`) }

	s.Limit(3)
	for range 2 {
		status, _ := send()
		require.Equal(t, 200, status)
	}
	advance(500 * time.Millisecond)
	status, _ := send()
	require.Equal(t, 200, status)
	status, a := send()
	assert.Equal(t, 429, status, "the fourth send within a second")
	assert.Equal(t, "Too Many Requests: retry after 1", a.Description)
	assert.Len(t, s.AllSent(), 3, "a refused send is not recorded")

	advance(500 * time.Millisecond) // the first two are now a second old
	for range 2 {
		status, _ := send()
		require.Equal(t, 200, status)
	}
	status, _ = send()
	assert.Equal(t, 429, status, "the one at +500 ms and the two just sent fill the second")

	s.Limit(0)
	status, _ = send()
	assert.Equal(t, 200, status, "Limit(0) lifts the limit")

	sent := s.AllSent()
	require.Len(t, sent, 6)
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), sent[0].At)
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC), sent[5].At)
}
