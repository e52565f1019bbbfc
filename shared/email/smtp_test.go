package email

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/mail"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// delivery is one message the test server accepted.
type delivery struct {
	from, to string
	data     []byte
	tls      bool   // the DATA was received over TLS
	user     string // the authenticated user, if any
}

// backend is a go-smtp Backend that stores what it receives. Recipients in reject are
// refused at RCPT with the given error; block, when not nil, makes RCPT wait on it.
type backend struct {
	user, pass string // required AUTH PLAIN credentials; empty means no AUTH

	mu        sync.Mutex
	received  []delivery
	authTries int
	reject    map[string]*smtp.SMTPError
	block     chan struct{}
	conns     []*smtp.Conn // one per session, in order
}

func (b *backend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	b.mu.Lock()
	b.conns = append(b.conns, c)
	b.mu.Unlock()
	return &session{b: b, conn: c}, nil
}

// connections counts the connections opened to the server (a STARTTLS starts a new
// session on the same connection).
func (b *backend) connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	peers := map[string]bool{}
	for _, c := range b.conns {
		peers[c.Conn().RemoteAddr().String()] = true
	}
	return len(peers)
}

func (b *backend) deliveries() []delivery {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]delivery(nil), b.received...)
}

func (b *backend) tries() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.authTries
}

type session struct {
	b    *backend
	conn *smtp.Conn
	cur  delivery
}

func (s *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(identity, username, password string) error {
		s.b.mu.Lock()
		s.b.authTries++
		s.b.mu.Unlock()
		if username != s.b.user || password != s.b.pass {
			return smtp.ErrAuthFailed
		}
		s.cur.user = username
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtp.MailOptions) error {
	if s.b.user != "" && s.cur.user == "" {
		return smtp.ErrAuthRequired
	}
	s.cur.from = from
	return nil
}

func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	if s.b.block != nil {
		<-s.b.block
	}
	if err := s.b.reject[to]; err != nil {
		return err
	}
	s.cur.to = to
	return nil
}

func (s *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	d := s.cur
	d.data = data
	_, d.tls = s.conn.TLSConnectionState()
	s.b.mu.Lock()
	s.b.received = append(s.b.received, d)
	s.b.mu.Unlock()
	return nil
}

func (s *session) Reset()        { s.cur = delivery{user: s.cur.user} }
func (s *session) Logout() error { return nil }

// testTLS makes a self-signed certificate for 127.0.0.1 and localhost and returns the
// server config and a client config that trusts it.
func testTLS(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test smtp"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	server = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	return server, &tls.Config{RootCAs: pool}
}

type serverOpts struct {
	starttls     *tls.Config // offer STARTTLS with this config
	implicit     *tls.Config // speak TLS from the start with this config
	insecureAuth bool
	host         string // listen host; default 127.0.0.1
}

// startServer runs a go-smtp server for be and returns its address.
func startServer(t *testing.T, be *backend, o serverOpts) string {
	t.Helper()
	s := smtp.NewServer(be)
	s.Domain = "localhost"
	s.AllowInsecureAuth = o.insecureAuth
	s.TLSConfig = o.starttls
	s.ErrorLog = log.New(io.Discard, "", 0)
	s.ReadTimeout = 10 * time.Second
	s.WriteTimeout = 10 * time.Second
	host := o.host
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	require.NoError(t, err)
	if o.implicit != nil {
		l = tls.NewListener(l, o.implicit)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return l.Addr().String()
}

func TestSMTPStartTLSAuthAndDKIM(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := testTLS(t)
	be := &backend{user: "relay-user", pass: "s3cret"}
	addr := startServer(t, be, serverOpts{starttls: serverTLS})

	sender := &SMTP{
		Addr: addr, Username: "relay-user", Password: "s3cret",
		TLS: StartTLS, TLSConfig: clientTLS, HelloName: "api.example.com",
		DKIM: testSigner(), Timeout: 10 * time.Second,
	}
	m := sampleMessage()
	rcpt, err := sender.Send(context.Background(), m)
	require.NoError(t, err)
	assert.Equal(t, "smtp", rcpt.Provider)

	got := be.deliveries()
	require.Len(t, got, 1)
	d := got[0]
	assert.True(t, d.tls, "STARTTLS happened before DATA")
	assert.Equal(t, "relay-user", d.user)
	assert.Equal(t, "bot@example.com", d.from)
	assert.Equal(t, "lukasz@example.org", d.to)

	requireCRLF(t, d.data)
	v := verifyDKIM(t, d.data)
	assert.Contains(t, v.HeaderKeys, "List-Unsubscribe")
	p := parseMultipart(t, d.data)
	assert.Equal(t, rcpt.MessageID, p.msg.Header.Get("Message-ID"))
	assert.Equal(t, m.Text, p.text)
	from, err := mail.ParseAddress(p.msg.Header.Get("From"))
	require.NoError(t, err)
	assert.Equal(t, m.From.Name, from.Name)
}

func TestSMTPImplicitTLS(t *testing.T) {
	t.Parallel()
	serverTLS, clientTLS := testTLS(t)
	be := &backend{user: "u", pass: "p"}
	addr := startServer(t, be, serverOpts{implicit: serverTLS})
	_, err := (&SMTP{Addr: addr, Username: "u", Password: "p", TLS: ImplicitTLS, TLSConfig: clientTLS}).
		Send(context.Background(), sampleMessage())
	require.NoError(t, err)
	got := be.deliveries()
	require.Len(t, got, 1)
	assert.True(t, got[0].tls)
	assert.Equal(t, "u", got[0].user)
}

func TestSMTPUntrustedCertificateFails(t *testing.T) {
	t.Parallel()
	serverTLS, _ := testTLS(t)
	_, otherClientTLS := testTLS(t) // trusts a different certificate
	be := &backend{}
	addr := startServer(t, be, serverOpts{starttls: serverTLS})
	_, err := (&SMTP{Addr: addr, TLSConfig: otherClientTLS}).Send(context.Background(), sampleMessage())
	require.Error(t, err)
	var se *SendError
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Permanent)
	var unknown x509.UnknownAuthorityError
	assert.ErrorAs(t, err, &unknown)
	assert.Empty(t, be.deliveries())
}

func TestSMTPStartTLSRequiredButNotOffered(t *testing.T) {
	t.Parallel()
	be := &backend{}
	addr := startServer(t, be, serverOpts{}) // no TLS config: no STARTTLS

	_, err := (&SMTP{Addr: addr, TLS: StartTLS}).Send(context.Background(), sampleMessage())
	require.ErrorContains(t, err, "does not offer STARTTLS")
	assert.False(t, IsPermanent(err))
	assert.Empty(t, be.deliveries(), "nothing is sent in plain text")

	// Opportunistic mode goes on in plain text (no credentials involved).
	_, err = (&SMTP{Addr: addr, TLS: StartTLSOpportunistic}).Send(context.Background(), sampleMessage())
	require.NoError(t, err)
	got := be.deliveries()
	require.Len(t, got, 1)
	assert.False(t, got[0].tls)
}

func TestSMTPPlainAuthToLoopbackIsAllowed(t *testing.T) {
	t.Parallel()
	be := &backend{user: "u", pass: "p"}
	addr := startServer(t, be, serverOpts{insecureAuth: true})
	_, err := (&SMTP{Addr: addr, Username: "u", Password: "p", TLS: NoTLS}).Send(context.Background(), sampleMessage())
	require.NoError(t, err)
	got := be.deliveries()
	require.Len(t, got, 1)
	assert.Equal(t, "u", got[0].user)
	assert.False(t, got[0].tls)
}

func TestSMTPRefusesPlainAuthToOtherHosts(t *testing.T) {
	t.Parallel()
	// Without network: the policy and the configuration check.
	assert.False(t, authAllowed("smtp.example.com", false))
	assert.False(t, authAllowed("192.0.2.10", false))
	assert.True(t, authAllowed("smtp.example.com", true))
	assert.True(t, authAllowed("127.0.0.1", false))
	assert.True(t, authAllowed("::1", false))
	assert.True(t, authAllowed("localhost", false))

	// With a server on a non-loopback address of this machine, when it has one: the
	// password must never be sent in plain text.
	ip := nonLoopbackIP()
	if ip == "" {
		t.Log("no usable non-loopback IPv4 address; runtime check skipped")
		return
	}
	be := &backend{user: "u", pass: "p"}
	addr := startServer(t, be, serverOpts{insecureAuth: true, host: ip})
	_, err := (&SMTP{Addr: addr, Username: "u", Password: "p", TLS: StartTLSOpportunistic}).
		Send(context.Background(), sampleMessage())
	require.ErrorIs(t, err, ErrConfig)
	assert.ErrorContains(t, err, "refusing smtp AUTH")
	assert.False(t, IsPermanent(err))
	assert.Zero(t, be.tries(), "no AUTH attempt reached the server")
	assert.Empty(t, be.deliveries())
}

// nonLoopbackIP returns an IPv4 address of this machine that is not loopback and can be
// listened on, or "".
func nonLoopbackIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok || n.IP.IsLoopback() || n.IP.To4() == nil {
			continue
		}
		if l, err := net.Listen("tcp", net.JoinHostPort(n.IP.String(), "0")); err == nil {
			_ = l.Close()
			return n.IP.String()
		}
	}
	return ""
}

func TestSMTPValidate(t *testing.T) {
	t.Parallel()
	ok := []SMTP{
		{Addr: "smtp.example.com:587"},
		{Addr: "smtp.example.com:465", TLS: ImplicitTLS},
		{Addr: "127.0.0.1:25", TLS: NoTLS, Username: "u", Password: "p"},
		{Addr: "[::1]:25", TLS: NoTLS},
		{Addr: "localhost:1025", TLS: NoTLS},
	}
	for _, s := range ok {
		assert.NoError(t, s.Validate(), "%+v", s)
	}
	bad := map[string]SMTP{
		"no TLS to a remote host": {Addr: "smtp.example.com:25", TLS: NoTLS},
		"no TLS to a private IP":  {Addr: "10.0.0.5:25", TLS: NoTLS},
		"no port":                 {Addr: "smtp.example.com"},
		"empty":                   {},
		"unknown mode":            {Addr: "smtp.example.com:587", TLS: TLSMode(9)},
		"hello injection":         {Addr: "smtp.example.com:587", HelloName: "x\r\nMAIL FROM:<a@b>"},
	}
	for name, s := range bad {
		err := s.Validate()
		assert.ErrorIs(t, err, ErrConfig, name)
		// Send refuses the same configuration before connecting.
		_, sendErr := s.Send(context.Background(), sampleMessage())
		assert.ErrorIs(t, sendErr, ErrConfig, name)
	}
}

func TestSMTPErrorClassification(t *testing.T) {
	t.Parallel()
	be := &backend{reject: map[string]*smtp.SMTPError{
		"gone@example.org":  {Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user"},
		"later@example.org": {Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Try again later"},
	}}
	addr := startServer(t, be, serverOpts{})
	sender := &SMTP{Addr: addr, TLS: NoTLS}

	cases := []struct {
		to        string
		permanent bool
		code      int
	}{
		{"gone@example.org", true, 550},
		{"later@example.org", false, 451},
	}
	for _, tc := range cases {
		m := sampleMessage()
		m.To = mail.Address{Address: tc.to}
		_, err := sender.Send(context.Background(), m)
		var se *SendError
		require.ErrorAs(t, err, &se, tc.to)
		assert.Equal(t, tc.permanent, se.Permanent, tc.to)
		assert.Equal(t, tc.permanent, IsPermanent(err), tc.to)
		assert.Equal(t, tc.code, se.Code, tc.to)
		assert.ErrorContains(t, err, "RCPT TO", tc.to)
	}
	assert.Empty(t, be.deliveries())

	// A refused AUTH is a 5xx too, but it says nothing about the message: temporary.
	authBE := &backend{user: "u", pass: "right"}
	authAddr := startServer(t, authBE, serverOpts{insecureAuth: true})
	_, err := (&SMTP{Addr: authAddr, TLS: NoTLS, Username: "u", Password: "wrong"}).Send(context.Background(), sampleMessage())
	var se *SendError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, 535, se.Code)
	assert.False(t, se.Permanent)

	// An invalid message is permanent, and no connection is needed to know it.
	bad := sampleMessage()
	bad.Subject = "a\r\nBcc: x@example.net"
	_, err = (&SMTP{Addr: "127.0.0.1:1", TLS: NoTLS}).Send(context.Background(), bad)
	assert.True(t, IsPermanent(err))
	assert.ErrorIs(t, err, ErrInvalidMessage)
}

func TestSMTPNetworkErrorsAreTemporary(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now

	_, err = (&SMTP{Addr: addr, TLS: NoTLS}).Send(context.Background(), sampleMessage())
	var se *SendError
	require.ErrorAs(t, err, &se)
	assert.False(t, se.Permanent)
	assert.Zero(t, se.Code)
	var opErr *net.OpError
	assert.ErrorAs(t, err, &opErr)
}

func TestSMTPHonoursContext(t *testing.T) {
	t.Parallel()
	be := &backend{block: make(chan struct{})}
	t.Cleanup(func() { close(be.block) })
	addr := startServer(t, be, serverOpts{})

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := (&SMTP{Addr: addr, TLS: NoTLS, Timeout: time.Minute}).Send(ctx, sampleMessage())
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.True(t, errors.Is(err, context.DeadlineExceeded), "err = %v", err)
	assert.False(t, IsPermanent(err))

	// Timeout alone bounds the delivery too.
	start = time.Now()
	_, err = (&SMTP{Addr: addr, TLS: NoTLS, Timeout: 200 * time.Millisecond}).Send(context.Background(), sampleMessage())
	require.Error(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
