package emailevents

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSNS plays AWS's side of SNS: a signing key and its self-signed certificate, served
// with subscription confirmation over TLS on 127.0.0.1, and the messages it signs.
type fakeSNS struct {
	key     *rsa.PrivateKey
	srv     *httptest.Server
	mu      sync.Mutex
	fetches int
	confirm int
}

// snsHosts is the host pattern the tests' service is given: their TLS server's.
var snsHosts = regexp.MustCompile(`^127\.0\.0\.1$`)

const topic = "arn:aws:sns:eu-west-1:123456789012:email-events"

func newFakeSNS(t *testing.T) *fakeSNS {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.eu-west-1.amazonaws.com"},
		NotBefore: t0.Add(-24 * time.Hour), NotAfter: t0.Add(365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	require.NoError(t, err)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	f := &fakeSNS{key: key}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /SimpleNotificationService-test.pem", func(w http.ResponseWriter, _ *http.Request) {
		f.mu.Lock()
		f.fetches++
		f.mu.Unlock()
		_, _ = w.Write(certPEM)
	})
	mux.HandleFunc("GET /confirm", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("Token") != "tok-1" {
			http.Error(w, "bad token", http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.confirm++
		f.mu.Unlock()
		_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
	})
	f.srv = httptest.NewTLSServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSNS) counts() (fetches, confirms int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fetches, f.confirm
}

func (f *fakeSNS) certURL() string { return f.srv.URL + "/SimpleNotificationService-test.pem" }

// config is the service configuration that trusts the fake.
func (f *fakeSNS) config() Config {
	return Config{SNSHostPattern: snsHosts, HTTPClient: f.srv.Client()}
}

// signedText is AWS's documented string to sign, written out here rather than taken from
// the code under test.
func signedText(m map[string]string) string {
	var names []string
	if m["Type"] == SNSNotification {
		names = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	} else {
		names = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, n := range names {
		v, ok := m[n]
		if !ok {
			continue
		}
		b.WriteString(n + "\n" + v + "\n")
	}
	return b.String()
}

// sign signs m with version "1" or "2" and returns it as SNS posts it.
func (f *fakeSNS) sign(t *testing.T, m map[string]string, version string) []byte {
	t.Helper()
	m["SignatureVersion"] = version
	if _, ok := m["SigningCertURL"]; !ok {
		m["SigningCertURL"] = f.certURL()
	}
	text := []byte(signedText(m))
	var sig []byte
	var err error
	if version == "1" {
		d := sha1.Sum(text)
		sig, err = rsa.SignPKCS1v15(rand.Reader, f.key, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256(text)
		sig, err = rsa.SignPKCS1v15(rand.Reader, f.key, crypto.SHA256, d[:])
	}
	require.NoError(t, err)
	m["Signature"] = base64.StdEncoding.EncodeToString(sig)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

// notification is an SNS notification carrying message.
func notification(message string) map[string]string {
	return map[string]string{
		"Type": SNSNotification, "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": topic,
		"Message": message, "Timestamp": "2026-03-01T11:59:58.123Z",
		"UnsubscribeURL": "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe",
	}
}

func TestSNSVerify(t *testing.T) {
	t.Parallel()
	f := newFakeSNS(t)
	now := t0
	v := NewSNSVerifier(noRedirects(f.srv.Client()), snsHosts, func() time.Time { return now })
	ctx := t.Context()

	for _, version := range []string{"1", "2"} {
		m, err := v.Verify(ctx, f.sign(t, notification(`{"a":1}`), version))
		require.NoError(t, err, "SignatureVersion %s", version)
		assert.Equal(t, `{"a":1}`, m.Message)
		assert.Equal(t, topic, m.TopicARN)
	}
	withSubject := notification("hello")
	withSubject["Subject"] = "Amazon SES Email Event Notification"
	m, err := v.Verify(ctx, f.sign(t, withSubject, "2"))
	require.NoError(t, err, "the subject is signed when present")
	assert.Equal(t, "Amazon SES Email Event Notification", *m.Subject)
	fetches, _ := f.counts()
	assert.Equal(t, 1, fetches, "the certificate is fetched once and cached")

	// Tampering with any signed member breaks the signature.
	var doc map[string]string
	require.NoError(t, json.Unmarshal(f.sign(t, notification(`{"bounceType":"Transient"}`), "2"), &doc))
	for _, member := range []string{"Message", "MessageId", "Timestamp", "TopicArn"} {
		forged := map[string]string{}
		for k, val := range doc {
			forged[k] = val
		}
		forged[member] += "x"
		b, _ := json.Marshal(forged)
		_, err := v.Verify(ctx, b)
		assert.ErrorIs(t, err, ErrSNSUnauthentic, member)
	}
	noSubject := map[string]string{}
	for k, val := range doc {
		noSubject[k] = val
	}
	noSubject["Subject"] = "added"
	b, _ := json.Marshal(noSubject)
	_, err = v.Verify(ctx, b)
	assert.ErrorIs(t, err, ErrSNSUnauthentic, "a subject added afterwards")

	// Certificates only from SNS's hosts, over https, as .pem: refused before any fetch.
	_, port, _ := strings.Cut(strings.TrimPrefix(f.srv.URL, "https://"), ":")
	for _, u := range []string{
		"https://localhost:" + port + "/SimpleNotificationService-test.pem",
		"http://127.0.0.1:" + port + "/SimpleNotificationService-test.pem",
		"https://evil.example/SimpleNotificationService-test.pem",
		"https://user@127.0.0.1:" + port + "/SimpleNotificationService-test.pem",
		f.srv.URL + "/confirm",
	} {
		m := notification("x")
		m["SigningCertURL"] = u
		_, err := v.Verify(ctx, f.sign(t, m, "2"))
		assert.ErrorIs(t, err, ErrSNSUnauthentic, u)
	}
	fetches, _ = f.counts()
	assert.Equal(t, 1, fetches, "no foreign certificate was fetched")

	// Another key signing with the same certificate URL: refused.
	other := newFakeSNS(t)
	forged := notification("x")
	forged["SigningCertURL"] = f.certURL()
	_, err = v.Verify(ctx, other.sign(t, forged, "2"))
	assert.ErrorIs(t, err, ErrSNSUnauthentic)

	m3 := notification("x")
	b = f.sign(t, m3, "3")
	_, err = v.Verify(ctx, b)
	assert.ErrorIs(t, err, ErrSNSUnauthentic, "unknown signature version")

	for _, bad := range []string{`not json`, `{"Type":"Other"}`, `{"Type":"Notification"}`, `[]`} {
		_, err := v.Verify(ctx, []byte(bad))
		assert.ErrorIs(t, err, ErrSNSMalformed, bad)
	}

	// An expired certificate.
	now = t0.Add(400 * 24 * time.Hour)
	_, err = v.Verify(ctx, f.sign(t, notification("x"), "2"))
	assert.ErrorIs(t, err, ErrSNSUnauthentic)
}

func TestSNSCertificateFetchFailures(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /down.pem", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	mux.HandleFunc("GET /missing.pem", http.NotFound)
	mux.HandleFunc("GET /junk.pem", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("junk")) })
	mux.HandleFunc("GET /moved.pem", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://evil.example/cert.pem", http.StatusFound)
	})
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	f := newFakeSNS(t)
	v := NewSNSVerifier(noRedirects(srv.Client()), snsHosts, func() time.Time { return t0 })
	for path, unauthentic := range map[string]bool{"/down.pem": false, "/missing.pem": true, "/junk.pem": true, "/moved.pem": true} {
		m := notification("x")
		m["SigningCertURL"] = srv.URL + path
		_, err := v.Verify(t.Context(), f.sign(t, m, "2"))
		require.Error(t, err, path)
		assert.Equal(t, unauthentic, errors.Is(err, ErrSNSUnauthentic), "%s: %v", path, err)
	}
}
