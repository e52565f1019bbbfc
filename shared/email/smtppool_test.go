package email

import (
	"context"
	"fmt"
	"net/mail"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// numbered is the sample message to a recipient of its own, with a Message-ID of its own.
func numbered(i int) Message {
	m := sampleMessage()
	m.To = mail.Address{Address: fmt.Sprintf("r%d@example.org", i)}
	m.MessageID = fmt.Sprintf("<m%d@example.com>", i)
	return m
}

// Messages sent through a pool share one connection: STARTTLS and AUTH once, each
// message delivered once, signed, to its recipient, each after an RSET.
func TestSMTPPoolReusesConnections(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := testTLS(t)
	be := &backend{user: "relay-user", pass: "s3cret"}
	addr := startServer(t, be, serverOpts{starttls: serverTLS})
	pool := &SMTPPool{}
	sender := &SMTP{Addr: addr, Username: "relay-user", Password: "s3cret", TLS: StartTLS, TLSConfig: clientTLS,
		DKIM: testSigner(), Pool: pool}
	for i := range 5 {
		rc, err := sender.Send(context.Background(), numbered(i))
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("<m%d@example.com>", i), rc.MessageID)
	}
	got := be.deliveries()
	require.Len(t, got, 5)
	for i, d := range got {
		assert.Equal(t, fmt.Sprintf("r%d@example.org", i), d.to)
		assert.True(t, d.tls)
		assert.Equal(t, "relay-user", d.user)
		verifyDKIM(t, d.data)
	}
	assert.Equal(t, 1, be.connections())
	assert.Equal(t, 1, be.tries(), "one AUTH for the five messages")
	require.NoError(t, pool.Close())

	// Closed, the pool keeps nothing: a connection a message.
	for i := range 2 {
		_, err := sender.Send(context.Background(), numbered(10+i))
		require.NoError(t, err)
	}
	assert.Equal(t, 3, be.connections())
}

// A connection that died while idle fails its RSET: the message goes on a new one, once.
func TestSMTPPoolRedialsADeadConnection(t *testing.T) {
	t.Parallel()
	be := &backend{}
	addr := startServer(t, be, serverOpts{})
	sender := &SMTP{Addr: addr, TLS: NoTLS, Pool: &SMTPPool{}}
	_, err := sender.Send(context.Background(), numbered(1))
	require.NoError(t, err)
	be.mu.Lock()
	require.NoError(t, be.conns[0].Close()) // the server drops the idle connection
	be.mu.Unlock()

	_, err = sender.Send(context.Background(), numbered(2))
	require.NoError(t, err)
	got := be.deliveries()
	require.Len(t, got, 2)
	assert.Equal(t, "r2@example.org", got[1].to)
	assert.Equal(t, 2, be.connections())
}

// A failed send closes its connection (its state is the server's to know): the next
// message opens a new one. Refused, the message is not tried again.
func TestSMTPPoolClosesAfterAFailure(t *testing.T) {
	t.Parallel()
	be := &backend{reject: map[string]*smtp.SMTPError{"r1@example.org": {Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "later"}}}
	addr := startServer(t, be, serverOpts{})
	sender := &SMTP{Addr: addr, TLS: NoTLS, Pool: &SMTPPool{}}
	_, err := sender.Send(context.Background(), numbered(0))
	require.NoError(t, err)
	_, err = sender.Send(context.Background(), numbered(1))
	var se *SendError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 451, se.Code)
	_, err = sender.Send(context.Background(), numbered(2))
	require.NoError(t, err)
	assert.Len(t, be.deliveries(), 2)
	assert.Equal(t, 2, be.connections(), "the failure's connection was not reused")
}

// A connection carries MaxMessages messages, and is not reused after IdleTimeout.
func TestSMTPPoolLimits(t *testing.T) {
	t.Parallel()
	be := &backend{}
	addr := startServer(t, be, serverOpts{})
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	pool := &SMTPPool{MaxMessages: 2, IdleTimeout: time.Minute, now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	sender := &SMTP{Addr: addr, TLS: NoTLS, Pool: pool}
	for i := range 5 {
		_, err := sender.Send(context.Background(), numbered(i))
		require.NoError(t, err)
	}
	assert.Equal(t, 3, be.connections(), "2 + 2 + 1 messages")

	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	_, err := sender.Send(context.Background(), numbered(5))
	require.NoError(t, err)
	assert.Equal(t, 4, be.connections(), "the connection idle too long was closed")
	assert.Len(t, be.deliveries(), 6)

	// Once the sends are over, the reaper closes what stays idle too long.
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	pool.reap()
	pool.mu.Lock()
	assert.Empty(t, pool.idle)
	assert.False(t, pool.reaping)
	pool.mu.Unlock()
}

// Only a sender with the same server, TLS, hello name and credentials shares a connection.
func TestSMTPPoolKeepsSendersApart(t *testing.T) {
	t.Parallel()
	be := &backend{}
	addr := startServer(t, be, serverOpts{})
	pool := &SMTPPool{}
	a := &SMTP{Addr: addr, TLS: NoTLS, Pool: pool}
	b := &SMTP{Addr: addr, TLS: NoTLS, HelloName: "other.example", Pool: pool}
	for i := range 4 {
		s := a
		if i%2 == 1 {
			s = b
		}
		_, err := s.Send(context.Background(), numbered(i))
		require.NoError(t, err)
	}
	assert.Equal(t, 2, be.connections())
	signed := *a // a copy that signs (as the campaigns' mailer makes) shares a's connection
	signed.DKIM = testSigner()
	_, err := signed.Send(context.Background(), numbered(9))
	require.NoError(t, err)
	assert.Equal(t, 2, be.connections())
}

// Many senders at once through one pool: every message delivered exactly once, on no more
// connections than were ever in use at once. Run with -race.
func TestSMTPPoolConcurrentSends(t *testing.T) {
	t.Parallel()
	be := &backend{}
	addr := startServer(t, be, serverOpts{})
	sender := &SMTP{Addr: addr, TLS: NoTLS, Pool: &SMTPPool{MaxIdle: 4}}
	const workers, each = 4, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				_, err := sender.Send(context.Background(), numbered(w*each+i))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	got := be.deliveries()
	require.Len(t, got, workers*each)
	seen := map[string]int{}
	for _, d := range got {
		seen[d.to]++
	}
	assert.Len(t, seen, workers*each)
	assert.LessOrEqual(t, be.connections(), workers)
}
