package email

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"strings"
	"time"
)

// DefaultSMTPTimeout bounds a whole SMTP delivery (connect to QUIT) when SMTP.Timeout is
// zero.
const DefaultSMTPTimeout = 30 * time.Second

// TLSMode says how an SMTP connection is encrypted.
type TLSMode int

// The TLS modes. The zero value, StartTLS, is the safe default.
const (
	// StartTLS connects in plain text and requires the server to offer STARTTLS
	// (submission port 587). Without it, Send fails before sending anything.
	StartTLS TLSMode = iota
	// StartTLSOpportunistic upgrades with STARTTLS when the server offers it and
	// otherwise continues in plain text; AUTH is still refused over plain text except to
	// a loopback host.
	StartTLSOpportunistic
	// ImplicitTLS speaks TLS from the first byte (port 465).
	ImplicitTLS
	// NoTLS never encrypts. Allowed only when the host is loopback (a local relay or a
	// test server).
	NoTLS
)

// String names the mode.
func (m TLSMode) String() string {
	switch m {
	case StartTLS:
		return "starttls"
	case StartTLSOpportunistic:
		return "starttls-opportunistic"
	case ImplicitTLS:
		return "implicit-tls"
	case NoTLS:
		return "none"
	default:
		return fmt.Sprintf("TLSMode(%d)", int(m))
	}
}

// SMTP sends through an SMTP relay (submission server): it builds the message, signs it
// when DKIM is set, and delivers it with MAIL FROM (the From address), RCPT TO and DATA.
// AUTH PLAIN is used when Username is set, and only over an encrypted connection or to a
// loopback host.
type SMTP struct {
	// Addr is the server as host:port.
	Addr string
	// Username and Password, when Username is not empty, authenticate with AUTH PLAIN.
	Username string
	// Password is the AUTH PLAIN password.
	Password string
	// TLS is the encryption mode; the zero value requires STARTTLS.
	TLS TLSMode
	// TLSConfig configures TLS (nil means the system roots). When its ServerName is empty
	// the host of Addr is used.
	TLSConfig *tls.Config
	// HelloName is the name sent with EHLO; empty means "localhost".
	HelloName string
	// DKIM, when not nil, signs every message before it is sent.
	DKIM *Signer
	// Timeout bounds one delivery; zero means DefaultSMTPTimeout.
	Timeout time.Duration
	// Pool, when not nil, keeps connections open between messages (see SMTPPool); nil
	// means a new connection for every message, closed with QUIT once it is sent.
	Pool *SMTPPool
}

var _ Sender = (*SMTP)(nil)

// Validate checks the configuration without connecting: Addr must be host:port, the TLS
// mode known, NoTLS used only with a loopback host, and HelloName a single line. Errors
// wrap ErrConfig. Send calls it first.
func (s *SMTP) Validate() error {
	host, port, err := net.SplitHostPort(s.Addr)
	if err != nil || host == "" || port == "" {
		return fmt.Errorf("%w: smtp addr %q is not host:port", ErrConfig, s.Addr)
	}
	if s.TLS < StartTLS || s.TLS > NoTLS {
		return fmt.Errorf("%w: unknown smtp tls mode %d", ErrConfig, int(s.TLS))
	}
	if s.TLS == NoTLS && !isLoopback(host) {
		return fmt.Errorf("%w: smtp without tls is allowed only to a loopback host, not %q", ErrConfig, host)
	}
	if strings.ContainsAny(s.HelloName, "\r\n \t") {
		return fmt.Errorf("%w: smtp hello name %q must be one word", ErrConfig, s.HelloName)
	}
	if strings.ContainsAny(s.Username+s.Password, "\r\n\x00") {
		return fmt.Errorf("%w: smtp credentials contain CR, LF or NUL", ErrConfig)
	}
	return nil
}

// authAllowed reports whether credentials may be sent on a connection to host: only
// when it is encrypted or the host is loopback (the password never leaves the machine).
func authAllowed(host string, encrypted bool) bool {
	return encrypted || isLoopback(host)
}

// isLoopback reports whether host is "localhost" or a loopback IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Send builds, signs and delivers m. Failures are *SendError: a 5xx reply to MAIL, RCPT
// or DATA is permanent; 4xx replies, network and TLS failures, and replies to the
// connection setup (greeting, EHLO, STARTTLS, AUTH) are temporary. The Receipt's
// MessageID is the Message-ID header, angle brackets included.
func (s *SMTP) Send(ctx context.Context, m Message) (Receipt, error) {
	if err := s.Validate(); err != nil {
		return Receipt{}, &SendError{Err: err}
	}
	// The message is built into one buffer, and its DATA (the signature, the message with
	// its dots stuffed, the final dot) into another, which is written to the connection in
	// one piece; with a Pool both are reused from message to message.
	bufs := s.Pool.buffers()
	defer s.Pool.release(bufs)
	raw, id, err := compose(bufs.msg[:0], m, time.Now(), "")
	if err != nil {
		return Receipt{}, buildFailure(err)
	}
	bufs.msg = raw
	data := bufs.data[:0]
	if s.DKIM != nil {
		if data, err = signature(data, raw, *s.DKIM, time.Now()); err != nil {
			return Receipt{}, &SendError{Err: err}
		}
	}
	data = appendData(data, raw)
	bufs.data = data

	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultSMTPTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	host, _, _ := net.SplitHostPort(s.Addr)
	sc, err := s.open(ctx, host)
	if err != nil {
		return Receipt{}, err
	}
	err = transaction(ctx, sc.c, m, data)
	sc.done(s.Pool, s.poolKey(), err == nil)
	if err != nil {
		return Receipt{}, err
	}
	return Receipt{MessageID: id, Provider: "smtp"}, nil
}

// sendBuffer holds the two buffers of a send: the built message and its DATA.
type sendBuffer struct{ msg, data []byte }

// appendData appends msg as the text of a DATA command (RFC 5321 section 4.5.2) exactly
// as net/textproto's DotWriter writes it, byte for byte (FuzzAppendData holds the two
// equal): a lone LF becomes CRLF, a dot at the start of a line is doubled, and the text
// ends with a line break and the line ".". It copies a line's text at a time.
func appendData(dst, msg []byte) []byte {
	const (
		begin = iota
		beginLine
		afterCR
		text
	)
	state := begin
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		switch state {
		case begin, beginLine:
			state = text
			if c == '.' {
				dst = append(dst, '.')
			}
			fallthrough
		case text:
			switch c {
			case '\r':
				state = afterCR
			case '\n':
				dst = append(dst, '\r')
				state = beginLine
			default:
				end := len(msg)
				if j := bytes.IndexByte(msg[i:], '\n'); j >= 0 {
					end = i + j
				}
				if j := bytes.IndexByte(msg[i:end], '\r'); j >= 0 {
					end = i + j
				}
				dst = append(dst, msg[i:end]...)
				i = end - 1
				continue
			}
		case afterCR:
			state = text
			if c == '\n' {
				state = beginLine
			}
		}
		dst = append(dst, c)
	}
	switch state {
	case beginLine:
	case afterCR:
		dst = append(dst, '\n')
	default:
		dst = append(dst, '\r', '\n')
	}
	return append(dst, ".\r\n"...)
}

// open returns a connection ready for a mail transaction: an idle one of the Pool that
// answers RSET, else a new one (connected, greeted, EHLO, STARTTLS and AUTH as
// configured). Either is bound to ctx.
func (s *SMTP) open(ctx context.Context, host string) (*smtpConn, error) {
	if s.Pool != nil {
		if sc := s.Pool.reuse(ctx, s.poolKey()); sc != nil {
			return sc, nil
		}
	}
	conn, err := s.dial(ctx, host)
	if err != nil {
		return nil, smtpFailure(ctx, "connect", err, false)
	}
	sc := &smtpConn{conn: conn}
	sc.bind(ctx)
	c, err := smtp.NewClient(conn, host)
	if err != nil {
		sc.stop()
		_ = conn.Close()
		return nil, smtpFailure(ctx, "greeting", err, false)
	}
	sc.c = c
	if err := s.setup(ctx, c, host); err != nil {
		sc.stop()
		_ = c.Close()
		return nil, err
	}
	return sc, nil
}

// transaction sends one message on a ready connection: MAIL FROM, RCPT TO, DATA, data
// being the DATA text as appendData makes it. The message is accepted when the reply to
// the end of DATA is; nothing before that can have delivered it.
func transaction(ctx context.Context, c *smtp.Client, m Message, data []byte) error {
	if err := c.Mail(m.From.Address); err != nil {
		return smtpFailure(ctx, "MAIL FROM", err, true)
	}
	if err := c.Rcpt(m.To.Address); err != nil {
		return smtpFailure(ctx, "RCPT TO", err, true)
	}
	// DATA as smtp.Client.Data and its writer's Close do it, but the text goes out in one
	// write instead of a byte at a time through a DotWriter.
	id, err := c.Text.Cmd("DATA")
	if err == nil {
		c.Text.StartResponse(id)
		_, _, err = c.Text.ReadResponse(354)
		c.Text.EndResponse(id)
	}
	if err != nil {
		return smtpFailure(ctx, "DATA", err, true)
	}
	if _, err := c.Text.W.Write(data); err != nil {
		return smtpFailure(ctx, "DATA", err, true)
	}
	if err := c.Text.W.Flush(); err != nil {
		return smtpFailure(ctx, "DATA", err, true)
	}
	if _, _, err := c.Text.ReadResponse(250); err != nil {
		return smtpFailure(ctx, "DATA", err, true)
	}
	return nil
}

// dial opens the TCP (or, for ImplicitTLS, TLS) connection.
func (s *SMTP) dial(ctx context.Context, host string) (net.Conn, error) {
	nd := &net.Dialer{}
	if s.TLS == ImplicitTLS {
		td := &tls.Dialer{NetDialer: nd, Config: s.tlsConfig(host)}
		return td.DialContext(ctx, "tcp", s.Addr)
	}
	return nd.DialContext(ctx, "tcp", s.Addr)
}

// setup says EHLO, upgrades with STARTTLS as the mode requires, and authenticates.
func (s *SMTP) setup(ctx context.Context, c *smtp.Client, host string) error {
	hello := s.HelloName
	if hello == "" {
		hello = "localhost"
	}
	if err := c.Hello(hello); err != nil {
		return smtpFailure(ctx, "EHLO", err, false)
	}
	encrypted := s.TLS == ImplicitTLS
	if s.TLS == StartTLS || s.TLS == StartTLSOpportunistic {
		if ok, _ := c.Extension("STARTTLS"); ok {
			if err := c.StartTLS(s.tlsConfig(host)); err != nil {
				return smtpFailure(ctx, "STARTTLS", err, false)
			}
			encrypted = true
		} else if s.TLS == StartTLS {
			return &SendError{Err: fmt.Errorf("smtp: %s does not offer STARTTLS, which is required", s.Addr)}
		}
	}
	if s.Username == "" {
		return nil
	}
	if !authAllowed(host, encrypted) {
		return configFailure("refusing smtp AUTH over an unencrypted connection to %s", s.Addr)
	}
	if ok, _ := c.Extension("AUTH"); !ok {
		return &SendError{Err: fmt.Errorf("smtp: %s does not offer AUTH", s.Addr)}
	}
	if err := c.Auth(smtp.PlainAuth("", s.Username, s.Password, host)); err != nil {
		return smtpFailure(ctx, "AUTH", err, false)
	}
	return nil
}

// tlsConfig returns a copy of TLSConfig with ServerName defaulting to host and at least
// TLS 1.2.
func (s *SMTP) tlsConfig(host string) *tls.Config {
	var cfg *tls.Config
	if s.TLSConfig != nil {
		cfg = s.TLSConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	return cfg
}

// smtpFailure classifies an error from one SMTP step. A 5xx reply is permanent only when
// canBePermanent (MAIL, RCPT, DATA: the message or recipient was refused); a 5xx to EHLO
// or AUTH is the relay's or our configuration's problem, not the message's.
func smtpFailure(ctx context.Context, step string, err error, canBePermanent bool) *SendError {
	ctxErr := ctx.Err()
	var netErr net.Error
	if ctxErr == nil && errors.As(err, &netErr) && netErr.Timeout() {
		// The connection deadline is the context's; it can fire before ctx.Err is set.
		if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
			ctxErr = context.DeadlineExceeded
		}
	}
	if ctxErr != nil {
		return &SendError{Err: fmt.Errorf("smtp %s: %w (%w)", step, ctxErr, err)}
	}
	se := &SendError{Err: fmt.Errorf("smtp %s: %w", step, err)}
	var tpe *textproto.Error
	if errors.As(err, &tpe) {
		se.Code = tpe.Code
		se.Permanent = canBePermanent && tpe.Code >= 500 && tpe.Code < 600
	}
	return se
}
