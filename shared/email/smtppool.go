package email

import (
	"context"
	"crypto/tls"
	"net"
	"net/smtp"
	"sync"
	"time"
)

// Defaults of SMTPPool.
const (
	// DefaultSMTPMaxIdle is how many idle connections a pool keeps per server.
	DefaultSMTPMaxIdle = 8
	// DefaultSMTPMaxMessages is how many messages one pooled connection carries before it
	// is closed: relays limit messages per connection, and a fresh one now and then spreads
	// the load over a relay's servers.
	DefaultSMTPMaxMessages = 50
	// DefaultSMTPIdleTimeout is how long an idle connection is kept: well inside the few
	// minutes a relay waits for the next command (RFC 5321 section 4.5.3.2.7 suggests 5).
	DefaultSMTPIdleTimeout = 30 * time.Second
)

// rsetTimeout bounds the RSET that checks an idle connection before it is reused: a
// connection that died silently while idle (a frozen Lambda, a dropped NAT entry) must
// not hold up the message for the whole send timeout.
const rsetTimeout = 5 * time.Second

// SMTPPool keeps the connections of SMTP senders open between messages, so that many
// messages (a campaign's) do not each pay for a connection, the greeting, EHLO, STARTTLS
// and AUTH. It is safe for concurrent use; each connection carries one message at a time.
// The zero value is ready to use, with the defaults above.
//
// A connection is reused only by a sender with the same server, TLS settings, hello name
// and credentials. Before each reuse it must answer RSET: one that does not (it died
// while idle) is closed and the message goes on another or a new connection, which is
// safe because nothing of the message was sent on it. Once MAIL FROM is sent, a failure is
// returned as it is, never retried, and closes the connection: a message is never sent
// twice. A connection is also closed after MaxMessages messages or IdleTimeout idle.
//
// The pool also keeps its senders' message buffers between sends: a campaign's messages,
// 12 KB and more each, would otherwise each allocate two.
type SMTPPool struct {
	// MaxIdle bounds the idle connections kept per server (0: DefaultSMTPMaxIdle).
	MaxIdle int
	// MaxMessages is how many messages a connection carries (0: DefaultSMTPMaxMessages).
	MaxMessages int
	// IdleTimeout is how long an idle connection is kept (0: DefaultSMTPIdleTimeout).
	IdleTimeout time.Duration

	mu      sync.Mutex
	idle    map[smtpKey][]*smtpConn
	closed  bool
	reaping bool             // a reap is scheduled
	now     func() time.Time // tests
	bufs    sync.Pool        // *sendBuffer
}

// maxPooledBuffer bounds the buffers kept for reuse: a rare huge message's are dropped.
const maxPooledBuffer = 1 << 20

// buffers returns a send's buffers: reused ones when p keeps some (p may be nil).
func (p *SMTPPool) buffers() *sendBuffer {
	if p != nil {
		if b, ok := p.bufs.Get().(*sendBuffer); ok {
			return b
		}
	}
	return new(sendBuffer)
}

// release keeps a send's buffers for the next one, unless p is nil or they grew too big.
func (p *SMTPPool) release(b *sendBuffer) {
	if p != nil && cap(b.msg) <= maxPooledBuffer && cap(b.data) <= maxPooledBuffer {
		p.bufs.Put(b)
	}
}

// smtpKey is what a connection is bound to: the settings of the SMTP that opened it.
type smtpKey struct {
	addr, username, password, hello string
	tls                             TLSMode
	tlsConfig                       *tls.Config
}

func (s *SMTP) poolKey() smtpKey {
	return smtpKey{addr: s.Addr, username: s.Username, password: s.Password, hello: s.HelloName, tls: s.TLS, tlsConfig: s.TLSConfig}
}

// smtpConn is an open SMTP connection, ready for a mail transaction.
type smtpConn struct {
	conn net.Conn
	c    *smtp.Client
	// stop unbinds the connection from the context of the send using it; false when the
	// context already interrupted it.
	stop  func() bool
	sent  int
	since time.Time // idle since
}

// bind makes every read and write on the connection give up at ctx's deadline, and
// cancelling ctx interrupt a blocked call at once (the deadline moves to the past).
func (sc *smtpConn) bind(ctx context.Context) {
	dl, _ := ctx.Deadline()
	_ = sc.conn.SetDeadline(dl)
	sc.stop = context.AfterFunc(ctx, func() { _ = sc.conn.SetDeadline(time.Unix(1, 0)) })
}

// done ends a send's use of the connection: it goes back to the pool when the message
// was accepted and the connection is sound; otherwise it is closed, with QUIT after an
// accepted message (a failed QUIT changes nothing about that).
func (sc *smtpConn) done(p *SMTPPool, k smtpKey, accepted bool) {
	sound := sc.stop()
	if accepted {
		sc.sent++
	}
	if accepted && sound && p != nil && p.put(k, sc) {
		return
	}
	if accepted {
		_ = sc.c.Quit()
	}
	_ = sc.c.Close()
}

func (p *SMTPPool) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// reuse returns an idle connection for k that answers RSET, bound to ctx, or nil. The
// ones found dead or too old are closed.
func (p *SMTPPool) reuse(ctx context.Context, k smtpKey) *smtpConn {
	for {
		sc := p.take(k)
		if sc == nil {
			return nil
		}
		sc.bind(ctx)
		dl, _ := ctx.Deadline()
		_ = sc.conn.SetDeadline(earliest(dl, time.Now().Add(rsetTimeout)))
		err := sc.c.Reset()
		_ = sc.conn.SetDeadline(dl)
		if err == nil {
			return sc
		}
		sc.stop()
		_ = sc.c.Close()
		if ctx.Err() != nil {
			return nil // the send is over: the other idle connections are not to blame
		}
	}
}

// take removes the most recently used idle connection for k from the pool (the oldest
// ones then age out), closing those idle too long.
func (p *SMTPPool) take(k smtpKey) *smtpConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	cutoff := p.clock().Add(-p.idleTimeout())
	for conns := p.idle[k]; len(conns) > 0; conns = p.idle[k] {
		sc := conns[len(conns)-1]
		p.idle[k] = conns[:len(conns)-1]
		if sc.since.After(cutoff) {
			return sc
		}
		go sc.quit()
	}
	return nil
}

// put keeps an idle connection; false when the pool will not (closed, full, or the
// connection has carried its share of messages).
func (p *SMTPPool) put(k smtpKey, sc *smtpConn) bool {
	maxMessages := p.MaxMessages
	if maxMessages <= 0 {
		maxMessages = DefaultSMTPMaxMessages
	}
	maxIdle := p.MaxIdle
	if maxIdle <= 0 {
		maxIdle = DefaultSMTPMaxIdle
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || sc.sent >= maxMessages || len(p.idle[k]) >= maxIdle {
		return false
	}
	if err := sc.conn.SetDeadline(time.Time{}); err != nil {
		return false
	}
	if p.idle == nil {
		p.idle = map[smtpKey][]*smtpConn{}
	}
	sc.since = p.clock()
	p.idle[k] = append(p.idle[k], sc)
	if !p.reaping {
		p.reaping = true
		time.AfterFunc(p.idleTimeout(), p.reap)
	}
	return true
}

// reap closes the connections idle for IdleTimeout, so that none lingers once the sends
// are over, and looks again later while any is left.
func (p *SMTPPool) reap() {
	p.mu.Lock()
	cutoff := p.clock().Add(-p.idleTimeout())
	var old []*smtpConn
	left := 0
	for k, conns := range p.idle {
		keep := conns[:0]
		for _, sc := range conns {
			if sc.since.After(cutoff) {
				keep = append(keep, sc)
			} else {
				old = append(old, sc)
			}
		}
		if len(keep) == 0 {
			delete(p.idle, k)
		} else {
			p.idle[k] = keep
		}
		left += len(keep)
	}
	p.reaping = left > 0
	if p.reaping {
		time.AfterFunc(p.idleTimeout(), p.reap)
	}
	p.mu.Unlock()
	for _, sc := range old {
		sc.quit()
	}
}

func (p *SMTPPool) idleTimeout() time.Duration {
	if p.IdleTimeout <= 0 {
		return DefaultSMTPIdleTimeout
	}
	return p.IdleTimeout
}

// Close closes the idle connections (with QUIT) and makes the pool keep no more; sends
// in flight finish on their connections, which are then closed.
func (p *SMTPPool) Close() error {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, conns := range idle {
		for _, sc := range conns {
			sc.quit()
		}
	}
	return nil
}

// quit says QUIT, waiting a little for the answer, and closes the connection.
func (sc *smtpConn) quit() {
	_ = sc.conn.SetDeadline(time.Now().Add(time.Second))
	_ = sc.c.Quit()
	_ = sc.c.Close()
}

func earliest(a, b time.Time) time.Time {
	if !a.IsZero() && a.Before(b) {
		return a
	}
	return b
}
