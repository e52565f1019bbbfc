package sns

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/sns/snstest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const topic = "arn:aws:sns:eu-west-1:123456789012:email"

// newVerifier trusts f's TLS certificate and host, as a deployment trusts AWS's, and
// accepts topic.
func newVerifier(f *snstest.Server, now *time.Time) *Verifier {
	return New(Config{Topics: []string{topic}, HostPattern: snstest.HostPattern, Client: f.Client(),
		Now: func() time.Time { return *now }})
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestStringToSign(t *testing.T) {
	t.Parallel()
	subject, empty := "Hi", ""
	base := Message{MessageID: "id", TopicARN: "arn", Message: "m\nline", Timestamp: "ts", Token: "tok",
		SubscribeURL: "https://sub", UnsubscribeURL: "https://unsub", Signature: "sig", SigningCertURL: "https://c.pem"}
	for _, c := range []struct {
		typ     string
		subject *string
		want    string
	}{
		{TypeNotification, nil, "Message\nm\nline\nMessageId\nid\nTimestamp\nts\nTopicArn\narn\nType\nNotification\n"},
		{TypeNotification, &subject, "Message\nm\nline\nMessageId\nid\nSubject\nHi\nTimestamp\nts\nTopicArn\narn\nType\nNotification\n"},
		{TypeNotification, &empty, "Message\nm\nline\nMessageId\nid\nSubject\n\nTimestamp\nts\nTopicArn\narn\nType\nNotification\n"},
		{TypeSubscriptionConfirmation, nil, "Message\nm\nline\nMessageId\nid\nSubscribeURL\nhttps://sub\nTimestamp\nts\nToken\ntok\nTopicArn\narn\nType\nSubscriptionConfirmation\n"},
		{TypeUnsubscribeConfirmation, &subject, "Message\nm\nline\nMessageId\nid\nSubscribeURL\nhttps://sub\nTimestamp\nts\nToken\ntok\nTopicArn\narn\nType\nUnsubscribeConfirmation\n"},
	} {
		m := base
		m.Type, m.Subject = c.typ, c.subject
		assert.Equal(t, c.want, m.StringToSign(), "%s subject=%v", c.typ, c.subject != nil)
	}
}

func TestVerifySignatureVersionsAndTypes(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	ctx := t.Context()

	for _, version := range []string{"1", "2"} {
		m, err := v.Verify(ctx, f.Sign(t, snstest.Notification(topic, `{"a":1}`), version))
		require.NoError(t, err, "SignatureVersion %s", version)
		assert.Equal(t, TypeNotification, m.Type)
		assert.Equal(t, `{"a":1}`, m.Message)
		assert.Equal(t, topic, m.TopicARN)
		assert.Nil(t, m.Subject)

		withSubject := snstest.Notification(topic, "hello")
		withSubject["Subject"] = "Amazon SES Email Event Notification"
		m, err = v.Verify(ctx, f.Sign(t, withSubject, version))
		require.NoError(t, err, "the subject is signed when present")
		require.NotNil(t, m.Subject)
		assert.Equal(t, "Amazon SES Email Event Notification", *m.Subject)

		withEmptySubject := snstest.Notification(topic, "hello")
		withEmptySubject["Subject"] = ""
		m, err = v.Verify(ctx, f.Sign(t, withEmptySubject, version))
		require.NoError(t, err, "an empty subject is signed")
		require.NotNil(t, m.Subject)

		for _, typ := range []string{TypeSubscriptionConfirmation, TypeUnsubscribeConfirmation} {
			c := snstest.SubscriptionConfirmation(topic, f.ConfirmURL("tok-1"), "tok-1")
			c["Type"] = typ
			m, err := v.Verify(ctx, f.Sign(t, c, version))
			require.NoError(t, err, "%s version %s", typ, version)
			assert.Equal(t, typ, m.Type)
			assert.Equal(t, "tok-1", m.Token)
			assert.Equal(t, f.ConfirmURL("tok-1"), m.SubscribeURL)
		}
	}
	assert.Equal(t, 1, f.Fetches(), "the certificate is fetched once and cached")
}

func TestVerifyRefusesWhatIsNotSigned(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	ctx := t.Context()

	// Tampering with any signed member breaks the signature.
	var note, conf map[string]string
	require.NoError(t, json.Unmarshal(f.Sign(t, snstest.Notification(topic, `{"bounceType":"Transient"}`), "2"), &note))
	require.NoError(t, json.Unmarshal(f.Sign(t, snstest.SubscriptionConfirmation(topic, f.ConfirmURL("tok"), "tok"), "1"), &conf))
	for doc, members := range map[*map[string]string][]string{
		&note: {"Message", "MessageId", "Timestamp"},
		&conf: {"Message", "MessageId", "Timestamp", "Token", "SubscribeURL"},
	} {
		for _, member := range members {
			forged := clone(*doc)
			forged[member] += "x"
			b, _ := json.Marshal(forged)
			_, err := v.Verify(ctx, b)
			assert.ErrorIs(t, err, ErrUnauthentic, "%s of a %s", member, forged["Type"])
			assert.ErrorContains(t, err, "bad signature", member)
		}
	}
	withSubject := clone(note)
	withSubject["Subject"] = ""
	b, _ := json.Marshal(withSubject)
	_, err := v.Verify(ctx, b)
	assert.ErrorIs(t, err, ErrUnauthentic, "a subject added afterwards")
	retyped := clone(conf)
	retyped["Type"] = TypeUnsubscribeConfirmation
	b, _ = json.Marshal(retyped)
	_, err = v.Verify(ctx, b)
	assert.ErrorIs(t, err, ErrUnauthentic, "the type is signed")

	// Another key signing with the same certificate URL.
	other := snstest.NewServer(t, t0)
	forged := snstest.Notification(topic, "x")
	forged["SigningCertURL"] = f.CertURL()
	_, err = v.Verify(ctx, other.Sign(t, forged, "2"))
	assert.ErrorIs(t, err, ErrUnauthentic)

	// A version-1 signature presented as version 2, and the other way round.
	for from, to := range map[string]string{"1": "2", "2": "1"} {
		var doc map[string]string
		require.NoError(t, json.Unmarshal(f.Sign(t, snstest.Notification(topic, "x"), from), &doc))
		doc["SignatureVersion"] = to
		b, _ := json.Marshal(doc)
		_, err := v.Verify(ctx, b)
		assert.ErrorIs(t, err, ErrUnauthentic, "%s as %s", from, to)
	}

	_, err = v.Verify(ctx, f.Sign(t, snstest.Notification(topic, "x"), "3"))
	assert.ErrorIs(t, err, ErrUnauthentic, "unknown signature version")
	assert.ErrorContains(t, err, "SignatureVersion")
	unsigned := clone(note)
	unsigned["Signature"] = "not base64!"
	b, _ = json.Marshal(unsigned)
	_, err = v.Verify(ctx, b)
	assert.ErrorIs(t, err, ErrUnauthentic)
	assert.ErrorContains(t, err, "base64")

	// Members SNS does not sign may differ.
	unsub := clone(note)
	unsub["UnsubscribeURL"] = "https://sns.eu-west-1.amazonaws.com/?Action=Unsubscribe&x=1"
	b, _ = json.Marshal(unsub)
	_, err = v.Verify(ctx, b)
	assert.NoError(t, err)
}

func TestVerifyTopics(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	ctx := t.Context()
	good := f.Sign(t, snstest.Notification(topic, "x"), "2")

	// An empty allow-list refuses everything, a good message included, before fetching.
	for name, v := range map[string]*Verifier{
		"no topics":    New(Config{HostPattern: snstest.HostPattern, Client: f.Client(), Now: func() time.Time { return t0 }}),
		"empty topics": New(Config{Topics: []string{}, HostPattern: snstest.HostPattern, Client: f.Client(), Now: func() time.Time { return t0 }}),
		"nil":          nil,
		"zero":         {},
	} {
		_, err := v.Verify(ctx, good)
		assert.ErrorIs(t, err, ErrNotConfigured, name)
		assert.False(t, v.Accepts(topic), name)
		assert.ErrorIs(t, v.Confirm(ctx, Message{Type: TypeSubscriptionConfirmation, TopicARN: topic, SubscribeURL: f.ConfirmURL("t")}), ErrNotConfigured, name)
	}
	assert.Equal(t, 0, f.Fetches())

	// Only the listed topics; the list is copied.
	topics := []string{"arn:aws:sns:eu-west-1:123456789012:other", topic}
	now := t0
	v := New(Config{Topics: topics, HostPattern: snstest.HostPattern, Client: f.Client(), Now: func() time.Time { return now }})
	topics[1] = "changed"
	assert.True(t, v.Accepts(topic))
	assert.False(t, v.Accepts(""))
	_, err := v.Verify(ctx, f.Sign(t, snstest.Notification("arn:aws:sns:eu-west-1:999999999999:attacker", "x"), "2"))
	assert.ErrorIs(t, err, ErrUnauthentic)
	assert.ErrorContains(t, err, "not accepted")
	assert.Equal(t, 0, f.Fetches(), "nothing is fetched for a foreign topic")
	_, err = v.Verify(ctx, good)
	assert.NoError(t, err)
}

func TestVerifyMalformed(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	missing := func(member string, conf bool) []byte {
		m := snstest.Notification(topic, "x")
		if conf {
			m = snstest.SubscriptionConfirmation(topic, f.ConfirmURL("t"), "t")
		}
		f.Sign(t, m, "2")
		delete(m, member)
		b, _ := json.Marshal(m)
		return b
	}
	huge := snstest.Notification(topic, strings.Repeat("x", MaxBodyBytes))
	bodies := map[string][]byte{
		"not json":         []byte("not json"),
		"an array":         []byte(`[]`),
		"type only":        []byte(`{"Type":"Notification"}`),
		"unknown type":     f.Sign(t, map[string]string{"Type": "Surprise", "MessageId": "1", "TopicArn": topic, "Timestamp": "t", "Message": "x"}, "2"),
		"too deep":         []byte(`{"Type":"Notification","x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`),
		"too large":        f.Sign(t, huge, "2"),
		"no MessageId":     missing("MessageId", false),
		"no Timestamp":     missing("Timestamp", false),
		"no TopicArn":      missing("TopicArn", false),
		"no Signature":     missing("Signature", false),
		"no cert URL":      missing("SigningCertURL", false),
		"no Token":         missing("Token", true),
		"no SubscribeURL":  missing("SubscribeURL", true),
		"a number as type": []byte(`{"Type":1}`),
	}
	for name, body := range bodies {
		_, err := v.Verify(t.Context(), body)
		assert.ErrorIs(t, err, ErrMalformed, name)
	}
	assert.Equal(t, 0, f.Fetches())
	_, err := v.Verify(t.Context(), missing("Message", false))
	assert.ErrorIs(t, err, ErrUnauthentic, "an empty message is an SNS message (whose signature no longer holds)")
}

func TestVerifyCertificateURL(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	ctx := t.Context()
	_, port, _ := strings.Cut(strings.TrimPrefix(f.URL(), "https://"), ":")

	// Certificates only from hosts the pattern matches, over https, as .pem: refused
	// before any fetch.
	for _, u := range []string{
		"https://localhost:" + port + snstest.CertPath,
		"http://127.0.0.1:" + port + snstest.CertPath,
		"https://evil.example" + snstest.CertPath,
		"https://user@127.0.0.1:" + port + snstest.CertPath,
		"https://sns.eu-west-1.amazonaws.com@127.0.0.1:" + port + snstest.CertPath,
		"https:127.0.0.1:" + port + snstest.CertPath,
		"https:///x.pem",
		"://nonsense",
		f.URL() + "/confirm",
		f.URL() + "/cert.pem.txt",
	} {
		m := snstest.Notification(topic, "x")
		m["SigningCertURL"] = u
		_, err := v.Verify(ctx, f.Sign(t, m, "2"))
		assert.ErrorIs(t, err, ErrUnauthentic, u)
	}
	assert.Equal(t, 0, f.Fetches(), "no certificate was fetched")
	assert.False(t, v.AllowedURL("https://localhost/x.pem"))

	// A certificate under another name than .pem is not even fetched.
	var other atomic.Int32
	f.Handle("GET /cert.txt", func(w http.ResponseWriter, _ *http.Request) {
		other.Add(1)
		_, _ = w.Write(f.CertPEM())
	})
	txt := snstest.Notification(topic, "x")
	txt["SigningCertURL"] = f.URL() + "/cert.txt"
	_, err := v.Verify(ctx, f.Sign(t, txt, "2"))
	assert.ErrorIs(t, err, ErrUnauthentic)
	assert.ErrorContains(t, err, ".pem")
	assert.Equal(t, int32(0), other.Load())
	assert.True(t, v.AllowedURL(f.CertURL()))

	// The .pem suffix is AWS's, in any case.
	f.Handle("GET /UPPER.PEM", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(f.CertPEM()) })
	m := snstest.Notification(topic, "x")
	m["SigningCertURL"] = f.URL() + "/UPPER.PEM"
	_, err = v.Verify(ctx, f.Sign(t, m, "2"))
	assert.NoError(t, err)

	// The default host pattern is SNS's: the fake's 127.0.0.1 is foreign to it.
	strict := New(Config{Topics: []string{topic}, Client: f.Client(), Now: func() time.Time { return t0 }})
	_, err = strict.Verify(ctx, f.Sign(t, snstest.Notification(topic, "x"), "2"))
	assert.ErrorIs(t, err, ErrUnauthentic)
	assert.Equal(t, 0, f.Fetches())
	for host, ok := range map[string]bool{
		"sns.eu-west-1.amazonaws.com": true, "sns.cn-north-1.amazonaws.com.cn": true, "sns.us-gov-west-1.amazonaws.com": true,
		"sns.eu-west-1.amazonaws.com.evil.example": false, "evilsns.eu-west-1.amazonaws.com": false,
		"s3.amazonaws.com": false, "sns.amazonaws.com": false, "sns.eu-west-1.amazonaws.comx": false,
	} {
		assert.Equal(t, ok, regexp.MustCompile(DefaultHostPattern).MatchString(host), host)
		assert.Equal(t, ok, strict.AllowedURL("https://"+host+"/SimpleNotificationService-x.pem"), host)
	}
}

func TestVerifyCertificateValidity(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	body := f.Sign(t, snstest.Notification(topic, "x"), "2")
	_, err := v.Verify(t.Context(), body)
	require.NoError(t, err)
	for _, at := range []time.Time{t0.Add(400 * 24 * time.Hour), t0.Add(-48 * time.Hour)} {
		now = at
		_, err = v.Verify(t.Context(), body)
		assert.ErrorIs(t, err, ErrUnauthentic, at)
		assert.ErrorContains(t, err, "not valid now")
	}
	assert.Equal(t, 1, f.Fetches(), "a cached certificate is checked at every use")
}

func TestVerifyCertificateFetch(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "ec"},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &ecKey.PublicKey, ecKey)
	require.NoError(t, err)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})

	serve := func(b []byte) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(b) }
	}
	f.Handle("GET /down.pem", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	f.Handle("GET /missing.pem", http.NotFound)
	f.Handle("GET /junk.pem", serve([]byte("junk")))
	f.Handle("GET /key.pem", serve(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1}})))
	f.Handle("GET /bad-der.pem", serve(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}})))
	f.Handle("GET /ec.pem", serve(ecPEM))
	f.Handle("GET /moved.pem", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, snstest.CertPath, http.StatusFound) })
	// PEM skips what precedes the certificate: the padded one parses unless cut at the bound.
	f.Handle("GET /huge.pem", serve(append([]byte(strings.Repeat("\n", MaxCertBytes)), f.CertPEM()...)))
	// An endless body: read only up to the bound, so refused at once rather than timed out.
	f.Handle("GET /endless.pem", func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("\n", 32<<10))
		for r.Context().Err() == nil {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	f.Handle("GET /padded.pem", serve(append([]byte(strings.Repeat("\n", MaxCertBytes-len(f.CertPEM()))), f.CertPEM()...)))

	for path, want := range map[string]error{
		"/down.pem": ErrUnavailable, "/missing.pem": ErrUnauthentic, "/junk.pem": ErrUnauthentic, "/key.pem": ErrUnauthentic,
		"/bad-der.pem": ErrUnauthentic, "/ec.pem": ErrUnauthentic, "/moved.pem": ErrUnauthentic, "/huge.pem": ErrUnauthentic,
		"/endless.pem": ErrUnauthentic, "/padded.pem": nil,
	} {
		m := snstest.Notification(topic, "x")
		m["SigningCertURL"] = f.URL() + path
		_, err := v.Verify(t.Context(), f.Sign(t, m, "2"))
		if want == nil {
			assert.NoError(t, err, path)
			continue
		}
		require.ErrorIs(t, err, want, path)
		for _, other := range []error{ErrUnavailable, ErrUnauthentic, ErrMalformed, ErrNotConfigured} {
			if other != want {
				assert.NotErrorIs(t, err, other, path)
			}
		}
	}
	assert.Equal(t, 0, f.Fetches(), "the redirect was not followed")
	for _, path := range []string{"/huge.pem", "/endless.pem"} {
		m := snstest.Notification(topic, "x")
		m["SigningCertURL"] = f.URL() + path
		_, err := v.Verify(t.Context(), f.Sign(t, m, "2"))
		assert.ErrorContains(t, err, fmt.Sprintf("over %d bytes", MaxCertBytes), path)
	}

	// An SNS that cannot be reached: transient.
	gone := snstest.NewServer(t, t0)
	gv := newVerifier(gone, &now)
	body := gone.Sign(t, snstest.Notification(topic, "x"), "2")
	gone.Close()
	_, err = gv.Verify(t.Context(), body)
	assert.ErrorIs(t, err, ErrUnavailable)
}

func TestCertificateCacheIsBounded(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	var fetches atomic.Int32
	f.Handle("GET /certs/", func(w http.ResponseWriter, _ *http.Request) {
		fetches.Add(1)
		_, _ = w.Write(f.CertPEM())
	})
	verify := func(i int) {
		t.Helper()
		m := snstest.Notification(topic, "x")
		m["SigningCertURL"] = fmt.Sprintf("%s/certs/%d.pem", f.URL(), i)
		_, err := v.Verify(t.Context(), f.Sign(t, m, "2"))
		require.NoError(t, err, i)
	}
	n := MaxCachedCerts + 8
	for i := range n {
		verify(i)
		v.mu.Lock()
		size := len(v.certs)
		v.mu.Unlock()
		require.LessOrEqual(t, size, MaxCachedCerts)
	}
	assert.Equal(t, int32(n), fetches.Load())
	assert.Len(t, v.certs, MaxCachedCerts)

	// A certificate still cached is not fetched again; an evicted one is.
	cached, evicted := -1, -1
	for i := range n {
		if _, ok := v.certs[fmt.Sprintf("%s/certs/%d.pem", f.URL(), i)]; ok {
			cached = i
		} else {
			evicted = i
		}
	}
	require.NotEqual(t, -1, cached)
	require.NotEqual(t, -1, evicted)
	verify(cached)
	assert.Equal(t, int32(n), fetches.Load())
	verify(evicted)
	assert.Equal(t, int32(n+1), fetches.Load())
}

func TestConfirm(t *testing.T) {
	t.Parallel()
	f := snstest.NewServer(t, t0)
	now := t0
	v := newVerifier(f, &now)
	ctx := t.Context()

	m, err := v.Verify(ctx, f.Sign(t, snstest.SubscriptionConfirmation(topic, f.ConfirmURL("tok-1"), "tok-1"), "1"))
	require.NoError(t, err)
	require.NoError(t, v.Confirm(ctx, m))
	assert.Equal(t, []string{"tok-1"}, f.Confirmed(), "confirmed by visiting the SubscribeURL")

	_, port, _ := strings.Cut(strings.TrimPrefix(f.URL(), "https://"), ":")
	f.Handle("GET /moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/confirm?Token=moved", http.StatusFound)
	})
	for name, c := range map[string]struct {
		change func(*Message)
		want   error
	}{
		"a notification":        {func(m *Message) { m.Type = TypeNotification }, ErrUnauthentic},
		"an unsubscribe":        {func(m *Message) { m.Type = TypeUnsubscribeConfirmation }, ErrUnauthentic},
		"another topic":         {func(m *Message) { m.TopicARN = "arn:aws:sns:eu-west-1:999999999999:theirs" }, ErrUnauthentic},
		"a foreign host":        {func(m *Message) { m.SubscribeURL = "https://attacker.example/confirm?Token=x" }, ErrUnauthentic},
		"another host name":     {func(m *Message) { m.SubscribeURL = "https://localhost:" + port + "/confirm?Token=x" }, ErrUnauthentic},
		"plain http":            {func(m *Message) { m.SubscribeURL = strings.Replace(m.SubscribeURL, "https:", "http:", 1) }, ErrUnauthentic},
		"refused by SNS":        {func(m *Message) { m.SubscribeURL = f.URL() + "/refuse" }, ErrUnavailable},
		"a redirect":            {func(m *Message) { m.SubscribeURL = f.URL() + "/moved" }, ErrUnavailable},
		"an unreachable server": {func(m *Message) { m.SubscribeURL = "https://127.0.0.1:1/confirm" }, ErrUnavailable},
	} {
		c2 := m
		c.change(&c2)
		assert.ErrorIs(t, v.Confirm(ctx, c2), c.want, name)
	}
	assert.Equal(t, []string{"tok-1"}, f.Confirmed(), "nothing else was confirmed, the redirect not followed")
}

func TestNewCopiesTheClient(t *testing.T) {
	t.Parallel()
	c := &http.Client{Timeout: time.Second}
	v := New(Config{Topics: []string{topic}, Client: c})
	assert.Nil(t, c.CheckRedirect, "the caller's client is not changed")
	require.NotNil(t, v.client.CheckRedirect)
	assert.ErrorIs(t, v.client.CheckRedirect(nil, nil), http.ErrUseLastResponse)
	assert.Equal(t, time.Second, v.client.Timeout)
	assert.Equal(t, Timeout, New(Config{}).client.Timeout)
}

// FuzzVerify: whatever the body, Verify neither panics nor fetches (the host pattern
// matches nothing), and fails with ErrMalformed or ErrUnauthentic.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(`{"Type":"Notification","Message":"{}","MessageId":"1","Timestamp":"t","TopicArn":"a","SignatureVersion":"2","Signature":"AA==","SigningCertURL":"https://sns.x.amazonaws.com/a.pem"}`))
	f.Add([]byte(`{"Type":"SubscriptionConfirmation","MessageId":"1","Timestamp":"t","TopicArn":"a","Token":"t","SubscribeURL":"https:///","SignatureVersion":"1","Signature":"AA==","SigningCertURL":"https:///a.pem"}`))
	f.Add([]byte(`{"Type":"Notification","Subject":null}`))
	v := New(Config{Topics: []string{"a"}, HostPattern: regexp.MustCompile(`^$`)})
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := v.Verify(context.Background(), body)
		if err == nil || !(errors.Is(err, ErrMalformed) || errors.Is(err, ErrUnauthentic)) {
			t.Fatalf("Verify(%q) = %v", body, err)
		}
	})
}
