// Package smtp is a real SMTP server (emersion/go-smtp) on 127.0.0.1 that keeps every message
// it accepts, for end-to-end tests of what the platform sends: the local process is started
// with --smtp-addr pointing here (plain SMTP, allowed to a loopback relay only).
package smtp

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	gosmtp "github.com/emersion/go-smtp"

	"github.com/botplatform/api/tests/fakes/fakehttp"
)

// Message is one accepted message.
type Message struct {
	From string
	To   []string
	Data []byte
	At   time.Time
}

// Server is the running fake.
type Server struct {
	// Addr is host:port.
	Addr string
	srv  *gosmtp.Server
	log  fakehttp.Log[Message]
	mu   sync.Mutex
	// reject, when set, answers RCPT TO for these addresses with 550.
	reject map[string]bool
}

// New starts a server until the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, err := Listen()
	if err != nil {
		t.Fatalf("fake smtp: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// Listen starts a server outside a test; Close stops it.
func Listen() (*Server, error) {
	s := &Server{reject: map[string]bool{}}
	s.srv = gosmtp.NewServer(backend{s})
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.MaxMessageBytes = 20 << 20
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Addr = l.Addr().String()
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Messages returns every accepted message, in order.
func (s *Server) Messages() []Message { return s.log.All() }

// Reject makes the server refuse the address with 550 at RCPT TO.
func (s *Server) Reject(address string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reject[address] = true
}

type backend struct{ s *Server }

func (b backend) NewSession(*gosmtp.Conn) (gosmtp.Session, error) { return &session{s: b.s}, nil }

type session struct {
	s    *Server
	from string
	to   []string
}

func (x *session) AuthMechanisms() []string { return nil }

func (x *session) Mail(from string, _ *gosmtp.MailOptions) error {
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *gosmtp.RcptOptions) error {
	x.s.mu.Lock()
	rejected := x.s.reject[to]
	x.s.mu.Unlock()
	if rejected {
		return &gosmtp.SMTPError{Code: 550, EnhancedCode: gosmtp.EnhancedCode{5, 1, 1}, Message: "no such user"}
	}
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	var b bytes.Buffer
	if _, err := io.Copy(&b, r); err != nil {
		return err
	}
	if x.from == "" || len(x.to) == 0 {
		return errors.New("DATA before MAIL and RCPT")
	}
	x.s.log.Add(Message{From: x.from, To: append([]string(nil), x.to...), Data: b.Bytes(), At: time.Now()})
	return nil
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }
