// Package snstest plays Amazon SNS's side for tests: a signing key and its self-signed
// certificate, served over TLS on 127.0.0.1 together with a subscription confirmation
// endpoint, and the messages it signs. The text it signs is written out here from AWS's
// documentation rather than taken from package sns, so that tests check sns against it.
package snstest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1" // SignatureVersion 1 is SHA1withRSA, as AWS defines it
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// CertPath is the path the server serves its signing certificate at.
const CertPath = "/SimpleNotificationService-test.pem"

// HostPattern matches the host the server runs on, 127.0.0.1: give it to the verifier
// under test as its host pattern.
var HostPattern = regexp.MustCompile(`^127\.0\.0\.1$`)

// Server is a fake SNS. GET CertPath serves the certificate; GET /confirm confirms a
// subscription (answering 200 and recording its Token query parameter); GET /refuse
// answers 400, as SNS does to a confirmation it refuses.
type Server struct {
	srv     *httptest.Server
	mux     *http.ServeMux
	key     *rsa.PrivateKey
	certPEM []byte

	mu       sync.Mutex
	fetches  int
	confirms []string
}

// NewServer starts a fake SNS whose certificate is valid from a day before now until a
// year after; it stops when tb ends.
func NewServer(tb testing.TB, now time.Time) *Server {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatalf("generate the SNS key: %v", err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.eu-west-1.amazonaws.com"},
		NotBefore: now.Add(-24 * time.Hour), NotAfter: now.Add(365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatalf("create the SNS certificate: %v", err)
	}
	s := &Server{mux: http.NewServeMux(), key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	s.mux.HandleFunc("GET "+CertPath, func(w http.ResponseWriter, _ *http.Request) {
		s.mu.Lock()
		s.fetches++
		s.mu.Unlock()
		_, _ = w.Write(s.certPEM)
	})
	s.mux.HandleFunc("GET /confirm", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.confirms = append(s.confirms, r.URL.Query().Get("Token"))
		s.mu.Unlock()
		_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
	})
	s.mux.HandleFunc("GET /refuse", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "<ErrorResponse/>", http.StatusBadRequest)
	})
	s.srv = httptest.NewTLSServer(s.mux)
	tb.Cleanup(s.srv.Close)
	return s
}

// URL is the server's base URL, https://127.0.0.1:<port>.
func (s *Server) URL() string { return s.srv.URL }

// CertURL is the URL of the signing certificate.
func (s *Server) CertURL() string { return s.srv.URL + CertPath }

// ConfirmURL is a SubscribeURL that confirms with token.
func (s *Server) ConfirmURL(token string) string {
	return s.srv.URL + "/confirm?Action=ConfirmSubscription&Token=" + token
}

// Close stops the server: a verifier then cannot reach it.
func (s *Server) Close() { s.srv.Close() }

// Client trusts the server's TLS certificate.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// CertPEM is the signing certificate, PEM-encoded.
func (s *Server) CertPEM() []byte { return s.certPEM }

// Handle serves more paths, for tests of what a certificate URL may answer.
func (s *Server) Handle(pattern string, h http.HandlerFunc) { s.mux.HandleFunc(pattern, h) }

// Fetches is how often the certificate was fetched.
func (s *Server) Fetches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetches
}

// Confirmed are the tokens of the confirmations received, in order.
func (s *Server) Confirmed() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.confirms...)
}

// Notification is an unsigned notification of topic carrying message.
func Notification(topic, message string) map[string]string {
	return map[string]string{
		"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": topic,
		"Message": message, "Timestamp": "2026-03-01T11:59:58.123Z",
		"UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
	}
}

// SubscriptionConfirmation is an unsigned subscription confirmation of topic.
func SubscriptionConfirmation(topic, subscribeURL, token string) map[string]string {
	return map[string]string{
		"Type": "SubscriptionConfirmation", "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
		"Token": token, "TopicArn": topic, "Timestamp": "2026-03-01T11:59:58.123Z",
		"Message":      "You have chosen to subscribe to the topic " + topic + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		"SubscribeURL": subscribeURL,
	}
}

// SignedText is AWS's string to sign for m: the signed members present in m, "Name\nvalue\n"
// each, in AWS's order for m's type.
func SignedText(m map[string]string) string {
	names := []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	if m["Type"] == "Notification" {
		names = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, n := range names {
		if v, ok := m[n]; ok {
			b.WriteString(n + "\n" + v + "\n")
		}
	}
	return b.String()
}

// Sign signs m with SignatureVersion version ("1" or "2"; any other signs as "2"), the
// certificate URL CertURL unless m names one, and returns m as SNS posts it. m is changed.
func (s *Server) Sign(tb testing.TB, m map[string]string, version string) []byte {
	tb.Helper()
	m["SignatureVersion"] = version
	if _, ok := m["SigningCertURL"]; !ok {
		m["SigningCertURL"] = s.CertURL()
	}
	text := []byte(SignedText(m))
	h, d := crypto.SHA256, sha256.Sum256(text)
	sum := d[:]
	if version == "1" {
		d1 := sha1.Sum(text)
		h, sum = crypto.SHA1, d1[:]
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, s.key, h, sum)
	if err != nil {
		tb.Fatalf("sign: %v", err)
	}
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	b, err := json.Marshal(m)
	if err != nil {
		tb.Fatalf("encode: %v", err)
	}
	return b
}
