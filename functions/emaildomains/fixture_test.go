package emaildomains

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/jobs"
	"github.com/botplatform/api/shared/logtest"
	"github.com/botplatform/api/shared/outbox"
	"github.com/botplatform/api/shared/queue"
	"github.com/botplatform/api/shared/queue/queuetest"
	"github.com/botplatform/api/shared/secrets/keyfile"
	"github.com/botplatform/api/shared/secrets/kms"
	"github.com/botplatform/api/shared/secrets/secretstest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// testKey is one DKIM key for the whole test binary: generating 2048-bit keys is slow.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := email.GenerateKey()
	if err != nil {
		panic(err)
	}
	return k
})

// keyTexts are spellings of the test key's private part that no response may contain.
func keyTexts() []string {
	k := testKey()
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(k)
	return []string{
		base64.StdEncoding.EncodeToString(pkcs8)[:64],
		base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(k))[:64],
		base64.StdEncoding.EncodeToString(k.D.Bytes())[:32],
	}
}

// fakeDNS is an authoritative DNS server on 127.0.0.1 (UDP) that serves the TXT, MX and
// CNAME records a test sets: NXDOMAIN for a name it has nothing for, an empty answer for a
// type it lacks at a name it has.
type fakeDNS struct {
	addr string

	mu    sync.Mutex
	txt   map[string][]string
	mx    map[string][]string
	cname map[string]string
	fail  bool
}

func newFakeDNS(t *testing.T) *fakeDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	f := &fakeDNS{addr: pc.LocalAddr().String(), txt: map[string][]string{}, mx: map[string][]string{}, cname: map[string]string{}}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: f, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return f
}

func (f *fakeDNS) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		m.Rcode = dns.RcodeServerFailure
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	name := strings.ToLower(strings.TrimSuffix(q.Name, "."))
	hdr := func(t uint16) dns.RR_Header {
		return dns.RR_Header{Name: q.Name, Rrtype: t, Class: dns.ClassINET, Ttl: 60}
	}
	known := false
	if target, ok := f.cname[name]; ok {
		known = true
		if q.Qtype == dns.TypeCNAME || q.Qtype == dns.TypeA || q.Qtype == dns.TypeAAAA {
			m.Answer = append(m.Answer, &dns.CNAME{Hdr: hdr(dns.TypeCNAME), Target: dns.Fqdn(target)})
		}
	}
	if values, ok := f.txt[name]; ok {
		known = true
		if q.Qtype == dns.TypeTXT {
			for _, v := range values {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: hdr(dns.TypeTXT), Txt: chunks(v, 255)})
			}
		}
	}
	if hosts, ok := f.mx[name]; ok {
		known = true
		if q.Qtype == dns.TypeMX {
			for _, h := range hosts {
				m.Answer = append(m.Answer, &dns.MX{Hdr: hdr(dns.TypeMX), Preference: 10, Mx: dns.Fqdn(h)})
			}
		}
	}
	if !known {
		m.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(m)
}

// chunks splits a long TXT value into the strings of one record, as DNS providers do.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}

// publish serves every record of d as asked (the records two bots share, once).
func (f *fakeDNS) publish(d Domain) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range d.Records {
		switch r.Type {
		case "TXT":
			if !slices.Contains(f.txt[r.Name], r.Value) {
				f.txt[r.Name] = append(f.txt[r.Name], r.Value)
			}
		case "MX":
			if !slices.Contains(f.mx[r.Name], r.Value) {
				f.mx[r.Name] = append(f.mx[r.Name], r.Value)
			}
		case "CNAME":
			f.cname[r.Name] = r.Value
		}
	}
}

func (f *fakeDNS) setTXT(name string, values ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.txt[name] = values
}

func (f *fakeDNS) setFail(fail bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail = fail
}

// fakeIdentities records what the service registers with the provider.
type fakeIdentities struct {
	mu           sync.Mutex
	registered   map[string]string // domain -> selector
	keys         map[string][]byte
	deregistered []string
	err          error
	// registering, when set, runs as a registration begins: what happens meanwhile.
	registering func()
}

func (f *fakeIdentities) Register(_ context.Context, domain, selector string, key []byte) error {
	if f.registering != nil {
		f.registering()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.registered[domain], f.keys[domain] = selector, key
	return nil
}

func (f *fakeIdentities) Deregister(_ context.Context, domain string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deregistered = append(f.deregistered, domain)
	return f.err
}

// fakeActions records the actions inbound routes run.
type fakeActions struct {
	mu        sync.Mutex
	forwards  []string // bot/to/message id
	reactions []string // bot/reaction/from
	last      InboundMessage
	err       error
}

func (f *fakeActions) Forward(_ context.Context, bot, to string, m InboundMessage) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forwards = append(f.forwards, bot+"/"+to+"/"+m.ID)
	f.last = m
	return f.err
}

func (f *fakeActions) RunReaction(_ context.Context, bot, reaction string, from mail.Address, _ InboundMessage) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reactions = append(f.reactions, bot+"/"+reaction+"/"+from.Address)
	return "sub_of_" + from.Address, f.err
}

type fixture struct {
	queue *queuetest.Sender // the jobs queue: release jobs, through the outbox
	svc   *Service
	st    store.Store
	clock *httpapitest.Clock
	bot   string
	dns   *fakeDNS
	ids   *fakeIdentities
	acts  *fakeActions
	logs  *logtest.Buffer
}

const (
	testSecret   = "inbound-secret-for-tests"
	trackingHost = "api.platform.test"
)

func newFixture(t *testing.T, opts ...func(*Config)) *fixture {
	t.Helper()
	c := httpapitest.NewClock(t0, 0)
	st := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	key, err := keyfile.New(make([]byte, 32))
	require.NoError(t, err)
	q := &queuetest.Sender{}
	box, err := outbox.New(st, q, outbox.Config{Now: c.Now})
	require.NoError(t, err)
	f := &fixture{st: st, clock: c, bot: ids.At("bot", t0), dns: newFakeDNS(t), queue: q,
		ids:  &fakeIdentities{registered: map[string]string{}, keys: map[string][]byte{}},
		acts: &fakeActions{}, logs: &logtest.Buffer{}}
	cfg := Config{
		Store: st, Sealer: secretstest.Wrap(key, kms.PurposeSecrets), Resolver: NewResolver(f.dns.addr), Identities: f.ids, Actions: f.acts,
		Outbox:        box,
		Records:       RecordValues{Region: "eu-west-1", TrackingHost: trackingHost},
		InboundSecret: testSecret,
		GenerateKey:   func() (*rsa.PrivateKey, error) { return testKey(), nil },
		Log:           slog.New(slog.NewTextHandler(f.logs, nil)),
		Now:           c.Now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	f.svc, err = New(cfg)
	require.NoError(t, err)
	return f
}

// verified adds name to bot and verifies it with every record published.
func (f *fixture) verified(t *testing.T, bot, name string) Domain {
	t.Helper()
	ctx := t.Context()
	d, err := f.svc.Add(ctx, bot, NewDomain{Name: name})
	require.NoError(t, err)
	f.dns.publish(d)
	d, err = f.svc.Verify(ctx, bot, d.ID)
	require.NoError(t, err)
	require.Equal(t, StatusVerified, d.Status)
	return d
}

// releases runs the release jobs staged since the last call, as the jobs Lambda runs them
// once their delay is over, and returns the names they were for. A job that fails is
// returned to the queue, as SQS would redeliver it, and its error returned.
func (f *fixture) releases(t *testing.T) ([]string, error) {
	t.Helper()
	var names []string
	for _, m := range f.queue.Take() {
		require.Equal(t, releaseDelay, m.Delay, "a release waits out any registration under way")
		st := queuetest.Decode[jobs.State](t, []queue.Message{m})[0]
		require.Equal(t, JobRelease, st.Kind)
		var p releasePayload
		require.NoError(t, json.Unmarshal(st.Payload, &p))
		_, done, err := f.svc.ReleaseStep(sqlitetest.As(t.Context(), "jobs"), st.Payload, "")
		if err != nil {
			require.NoError(t, f.queue.Send(t.Context(), m))
			return names, err
		}
		require.True(t, done)
		names = append(names, p.Name)
	}
	return names, nil
}
