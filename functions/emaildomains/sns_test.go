package emaildomains

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testTopic = "arn:aws:sns:eu-west-1:123456789012:inbound-mail"

// fakeSNS plays SNS's side: it signs messages with a key whose certificate it serves over
// HTTPS (a self-signed httptest TLS server on 127.0.0.1), and counts subscription
// confirmations.
type fakeSNS struct {
	srv       *httptest.Server
	key       *rsa.PrivateKey
	certPEM   []byte
	fetches   atomic.Int32
	confirmed atomic.Int32
}

func newFakeSNS(t *testing.T) *fakeSNS {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(365 * 24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	require.NoError(t, err)
	f := &fakeSNS{key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/SimpleNotificationService-test.pem":
			f.fetches.Add(1)
			_, _ = w.Write(f.certPEM)
		case "/confirm":
			f.confirmed.Add(1)
			_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeSNS) certURL() string { return f.srv.URL + "/SimpleNotificationService-test.pem" }

// verifier trusts the fake's TLS certificate and host, as a deployment trusts AWS's.
func (f *fakeSNS) verifier() *SNSVerifier {
	return &SNSVerifier{Topics: []string{testTopic}, CertHost: regexp.MustCompile(`^127\.0\.0\.1$`), Client: f.srv.Client(),
		Now: func() time.Time { return t0 }}
}

// sign fills in m's signature fields (version "1" or "2") and returns it as SNS posts it.
func (f *fakeSNS) sign(t *testing.T, m SNSMessage, version string) []byte {
	t.Helper()
	if m.TopicARN == "" {
		m.TopicARN = testTopic
	}
	if m.MessageID == "" {
		m.MessageID = "2b6e3b1c-0000-4000-8000-" + strings.Repeat("0", 12)
	}
	m.Timestamp = t0.Format(time.RFC3339Nano)
	if m.SigningCertURL == "" {
		m.SigningCertURL = f.certURL()
	}
	m.SignatureVersion = version
	h := crypto.SHA256
	if version == "1" {
		h = crypto.SHA1
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.key, h, digest(h, m.StringToSign()))
	require.NoError(t, err)
	m.Signature = base64.StdEncoding.EncodeToString(sig)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	return b
}

func TestSNSVerifiesSignatures(t *testing.T) {
	t.Parallel()
	f := newFakeSNS(t)
	v := f.verifier()
	ctx := t.Context()
	subject := "Amazon SES Email Receipt Notification"
	for _, version := range []string{"1", "2"} {
		for _, subj := range []*string{nil, &subject} {
			body := f.sign(t, SNSMessage{Type: SNSNotification, Subject: subj, Message: `{"notificationType":"Received"}`}, version)
			m, err := v.Verify(ctx, body)
			require.NoError(t, err, "version %s", version)
			assert.Equal(t, `{"notificationType":"Received"}`, m.Message)
			assert.Equal(t, subj, m.Subject)
		}
	}
	assert.Equal(t, int32(1), f.fetches.Load(), "the certificate is fetched once")

	good := f.sign(t, SNSMessage{Type: SNSNotification, Message: "hello"}, "2")
	tampered := strings.Replace(string(good), `"Message":"hello"`, `"Message":"hellO"`, 1)
	require.NotEqual(t, string(good), tampered)
	_, err := v.Verify(ctx, []byte(tampered))
	assert.ErrorIs(t, err, ErrSNSUnverified)
	assert.ErrorContains(t, err, "bad signature")

	// A Subject added to a message signed without one.
	var m map[string]any
	require.NoError(t, json.Unmarshal(good, &m))
	m["Subject"] = ""
	withSubject, _ := json.Marshal(m)
	_, err = v.Verify(ctx, withSubject)
	assert.ErrorContains(t, err, "bad signature")

	refused := map[string]SNSMessage{
		"foreign host":  {Type: SNSNotification, Message: "x", SigningCertURL: "https://sns.evil.example/SimpleNotificationService-test.pem"},
		"plain http":    {Type: SNSNotification, Message: "x", SigningCertURL: strings.Replace(f.certURL(), "https://", "http://", 1)},
		"not a pem":     {Type: SNSNotification, Message: "x", SigningCertURL: f.srv.URL + "/confirm"},
		"other topic":   {Type: SNSNotification, Message: "x", TopicARN: "arn:aws:sns:eu-west-1:999999999999:attacker"},
		"unknown type":  {Type: "Surprise", Message: "x"},
		"userinfo host": {Type: SNSNotification, Message: "x", SigningCertURL: "https://sns.eu-west-1.amazonaws.com@127.0.0.1/x.pem"},
	}
	for name, msg := range refused {
		_, err := v.Verify(ctx, f.sign(t, msg, "2"))
		assert.ErrorIs(t, err, ErrSNSUnverified, name)
	}
	_, err = v.Verify(ctx, []byte(`{"Type":"Notification"`))
	assert.ErrorIs(t, err, ErrSNSUnverified)
	_, err = (&SNSVerifier{}).Verify(ctx, good)
	assert.ErrorIs(t, err, ErrSNSNotConfigured)

	// The default host pattern is SNS's: the fake's 127.0.0.1 is foreign to it.
	strict := f.verifier()
	strict.CertHost = nil
	_, err = strict.Verify(ctx, good)
	assert.ErrorContains(t, err, "not on an SNS host")
	for host, ok := range map[string]bool{"sns.eu-west-1.amazonaws.com": true, "sns.cn-north-1.amazonaws.com.cn": true,
		"sns.eu-west-1.amazonaws.com.evil.example": false, "evilsns.eu-west-1.amazonaws.com": false, "s3.amazonaws.com": false} {
		assert.Equal(t, ok, regexp.MustCompile(DefaultSNSCertHost).MatchString(host), host)
	}

	expired := f.verifier()
	expired.Now = func() time.Time { return t0.Add(2 * 365 * 24 * time.Hour) }
	_, err = expired.Verify(ctx, good)
	assert.ErrorContains(t, err, "not valid now")
}

func TestSNSConfirmsSubscriptions(t *testing.T) {
	t.Parallel()
	f := newFakeSNS(t)
	v := f.verifier()
	body := f.sign(t, SNSMessage{Type: SNSSubscriptionConfirmation, Message: "You have chosen to subscribe",
		Token: "tok", SubscribeURL: f.srv.URL + "/confirm"}, "1")
	m, err := v.Verify(t.Context(), body)
	require.NoError(t, err)
	require.NoError(t, v.Confirm(t.Context(), m))
	assert.Equal(t, int32(1), f.confirmed.Load())

	// The Token is signed.
	forged := strings.Replace(string(body), `"Token":"tok"`, `"Token":"tik"`, 1)
	_, err = v.Verify(t.Context(), []byte(forged))
	assert.ErrorIs(t, err, ErrSNSUnverified)

	m.SubscribeURL = "https://attacker.example/confirm"
	assert.Error(t, v.Confirm(t.Context(), m), "confirmation only visits SNS hosts")
	assert.Equal(t, int32(1), f.confirmed.Load())
}
