// Package dns is an authoritative DNS server on 127.0.0.1 (UDP, miekg/dns) serving the
// records a test sets, so that sending-domain verification runs against real DNS answers:
// the local process is started with its resolver pointed here.
package dns

import (
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

// Server is the running fake.
type Server struct {
	// Addr is host:port (UDP).
	Addr    string
	srv     *dns.Server
	mu      sync.Mutex
	records map[string][]dns.RR // by lower-case FQDN
}

// New starts a server until the test ends.
func New(t testing.TB) *Server {
	t.Helper()
	s, stop, err := Listen()
	if err != nil {
		t.Fatalf("fake dns: %v", err)
	}
	t.Cleanup(stop)
	return s
}

// Listen starts a server outside a test (a benchmark program, say); stop shuts it down.
func Listen() (s *Server, stop func(), err error) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	s = &Server{Addr: pc.LocalAddr().String(), records: map[string][]dns.RR{}}
	s.srv = &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(s.serve)}
	go func() { _ = s.srv.ActivateAndServe() }()
	return s, func() { _ = s.srv.Shutdown() }, nil
}

func fqdn(name string) string { return dns.Fqdn(strings.ToLower(name)) }

// TXT publishes a TXT record (long values are split into 255-byte strings, as DNS requires).
func (s *Server) TXT(name, value string) {
	var parts []string
	for len(value) > 255 {
		parts, value = append(parts, value[:255]), value[255:]
	}
	parts = append(parts, value)
	s.add(&dns.TXT{Hdr: dns.RR_Header{Name: fqdn(name), Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: parts})
}

// CNAME publishes a CNAME record.
func (s *Server) CNAME(name, target string) {
	s.add(&dns.CNAME{Hdr: dns.RR_Header{Name: fqdn(name), Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: 60}, Target: fqdn(target)})
}

// MX publishes an MX record.
func (s *Server) MX(name, host string, pref uint16) {
	s.add(&dns.MX{Hdr: dns.RR_Header{Name: fqdn(name), Rrtype: dns.TypeMX, Class: dns.ClassINET, Ttl: 60}, Mx: fqdn(host), Preference: pref})
}

func (s *Server) add(rr dns.RR) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := rr.Header().Name
	s.records[name] = append(s.records[name], rr)
}

// Clear removes every record of name.
func (s *Server) Clear(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.records, fqdn(name))
}

func (s *Server) serve(w dns.ResponseWriter, req *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	s.mu.Lock()
	found := false
	for _, q := range req.Question {
		rrs := s.records[strings.ToLower(q.Name)]
		for _, rr := range rrs {
			found = true
			if rr.Header().Rrtype == q.Qtype || rr.Header().Rrtype == dns.TypeCNAME {
				m.Answer = append(m.Answer, dns.Copy(rr))
			}
		}
	}
	s.mu.Unlock()
	if !found {
		m.Rcode = dns.RcodeNameError
	}
	_ = w.WriteMsg(m)
}
