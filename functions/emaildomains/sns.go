package emaildomains

// The SNS verification is needed by emailevents too (SES event notifications arrive the same
// way); it is meant to move to shared/ as it is.

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" // SNS SignatureVersion 1 is SHA1withRSA: AWS chose it, we only verify it
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// SNS message types.
const (
	SNSNotification             = "Notification"
	SNSSubscriptionConfirmation = "SubscriptionConfirmation"
	SNSUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// DefaultSNSCertHost matches the hosts Amazon SNS serves its signing certificates and
// subscription URLs from: sns.<region>.amazonaws.com (and .com.cn in China).
const DefaultSNSCertHost = `^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`

var defaultSNSCertHost = regexp.MustCompile(DefaultSNSCertHost)

// Errors of SNSVerifier.
var (
	// ErrSNSNotConfigured: the verifier accepts no topic.
	ErrSNSNotConfigured = errors.New("sns: no topic is accepted")
	// ErrSNSUnverified: the message failed verification; the wrapped text says why.
	ErrSNSUnverified = errors.New("sns: message failed verification")
)

// SNSMessage is an Amazon SNS HTTP(S) delivery: a Notification, or a subscription's
// SubscriptionConfirmation or UnsubscribeConfirmation.
type SNSMessage struct {
	Type      string `json:"Type"`
	MessageID string `json:"MessageId"`
	TopicARN  string `json:"TopicArn"`
	// Subject is a Notification's subject, nil when it has none (which differs from "" in
	// what is signed).
	Subject          *string `json:"Subject,omitempty"`
	Message          string  `json:"Message"`
	Timestamp        string  `json:"Timestamp"`
	Token            string  `json:"Token,omitempty"`
	SubscribeURL     string  `json:"SubscribeURL,omitempty"`
	UnsubscribeURL   string  `json:"UnsubscribeURL,omitempty"`
	SignatureVersion string  `json:"SignatureVersion"`
	Signature        string  `json:"Signature"`
	SigningCertURL   string  `json:"SigningCertURL"`
}

// StringToSign is the canonical text SNS signs (AWS's "Verifying the signatures of Amazon
// SNS messages"): each field's name and value on their own lines, in this order, a
// Notification's Subject only when it has one.
func (m SNSMessage) StringToSign() string {
	var b strings.Builder
	add := func(name, value string) { b.WriteString(name + "\n" + value + "\n") }
	add("Message", m.Message)
	add("MessageId", m.MessageID)
	if m.Type == SNSNotification {
		if m.Subject != nil {
			add("Subject", *m.Subject)
		}
	} else {
		add("SubscribeURL", m.SubscribeURL)
	}
	add("Timestamp", m.Timestamp)
	if m.Type != SNSNotification {
		add("Token", m.Token)
	}
	add("TopicArn", m.TopicARN)
	add("Type", m.Type)
	return b.String()
}

// SNSVerifier verifies Amazon SNS deliveries: the topic is one of Topics, the signing
// certificate comes over HTTPS from a host CertHost matches, is valid now, and its key
// verifies the signature (version 1: SHA1withRSA; version 2: SHA256withRSA). Certificates
// are cached by URL. The zero value with Topics set is ready to use.
type SNSVerifier struct {
	// Topics are the topic ARNs whose messages are accepted; with none, none is.
	Topics []string
	// CertHost matches the host of SigningCertURL and SubscribeURL; nil is
	// DefaultSNSCertHost. Tests serving certificates themselves set their own.
	CertHost *regexp.Regexp
	// Client fetches certificates and confirms subscriptions; nil is a client with a 10 s
	// timeout.
	Client *http.Client
	// Now is the clock of certificate validity; nil is time.Now.
	Now func() time.Time

	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

// Bounds of certificate fetching.
const (
	maxCertBytes  = 64 << 10
	maxCachedCert = 32
	snsTimeout    = 10 * time.Second
)

// Verify decodes body as an SNS delivery and verifies it. Failures wrap ErrSNSUnverified,
// or ErrSNSNotConfigured when no topic is accepted.
func (v *SNSVerifier) Verify(ctx context.Context, body []byte) (SNSMessage, error) {
	if len(v.Topics) == 0 {
		return SNSMessage{}, ErrSNSNotConfigured
	}
	var m SNSMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return SNSMessage{}, fmt.Errorf("%w: not an SNS message: %v", ErrSNSUnverified, err)
	}
	switch m.Type {
	case SNSNotification, SNSSubscriptionConfirmation, SNSUnsubscribeConfirmation:
	default:
		return SNSMessage{}, fmt.Errorf("%w: unknown type %q", ErrSNSUnverified, m.Type)
	}
	if !slices.Contains(v.Topics, m.TopicARN) {
		return SNSMessage{}, fmt.Errorf("%w: topic %q is not accepted", ErrSNSUnverified, m.TopicARN)
	}
	var hash crypto.Hash
	switch m.SignatureVersion {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return SNSMessage{}, fmt.Errorf("%w: unknown signature version %q", ErrSNSUnverified, m.SignatureVersion)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return SNSMessage{}, fmt.Errorf("%w: signature is not base64", ErrSNSUnverified)
	}
	cert, err := v.cert(ctx, m.SigningCertURL)
	if err != nil {
		return SNSMessage{}, fmt.Errorf("%w: %v", ErrSNSUnverified, err)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return SNSMessage{}, fmt.Errorf("%w: the certificate's key is not RSA", ErrSNSUnverified)
	}
	if err := rsa.VerifyPKCS1v15(pub, hash, digest(hash, m.StringToSign()), sig); err != nil {
		return SNSMessage{}, fmt.Errorf("%w: bad signature", ErrSNSUnverified)
	}
	return m, nil
}

func digest(h crypto.Hash, s string) []byte {
	if h == crypto.SHA1 {
		sum := sha1.Sum([]byte(s))
		return sum[:]
	}
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// Confirm confirms a SubscriptionConfirmation that Verify accepted, by visiting its
// SubscribeURL (which must be an SNS URL, like the certificate's).
func (v *SNSVerifier) Confirm(ctx context.Context, m SNSMessage) error {
	if m.Type != SNSSubscriptionConfirmation {
		return fmt.Errorf("sns: a %s is not confirmed", m.Type)
	}
	u, err := v.snsURL(m.SubscribeURL)
	if err != nil {
		return err
	}
	res, err := v.get(ctx, u.String())
	if err != nil {
		return fmt.Errorf("sns: confirm subscription: %w", err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("sns: confirm subscription: status %d", res.StatusCode)
	}
	return nil
}

// snsURL checks that raw is an https URL on an SNS host.
func (v *SNSVerifier) snsURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.User != nil {
		return nil, fmt.Errorf("%q is not an https URL", raw)
	}
	host := v.CertHost
	if host == nil {
		host = defaultSNSCertHost
	}
	if !host.MatchString(u.Hostname()) {
		return nil, fmt.Errorf("%q is not on an SNS host", u.Hostname())
	}
	return u, nil
}

func (v *SNSVerifier) get(ctx context.Context, u string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, snsTimeout)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	c := v.Client
	if c == nil {
		c = &http.Client{Timeout: snsTimeout}
	}
	res, err := c.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	body := res.Body
	res.Body = readCloser{Reader: body, close: func() error { defer cancel(); return body.Close() }}
	return res, nil
}

type readCloser struct {
	io.Reader
	close func() error
}

func (r readCloser) Close() error { return r.close() }

// cert returns the certificate at raw, fetched once and checked valid now.
func (v *SNSVerifier) cert(ctx context.Context, raw string) (*x509.Certificate, error) {
	parsed, err := v.snsURL(raw)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(strings.ToLower(parsed.Path), ".pem") {
		return nil, errors.New("the certificate URL does not name a .pem file")
	}
	u := parsed.String()
	v.mu.Lock()
	c, ok := v.certs[u]
	v.mu.Unlock()
	if !ok {
		if c, err = v.fetch(ctx, u); err != nil {
			return nil, err
		}
		v.mu.Lock()
		if v.certs == nil || len(v.certs) >= maxCachedCert {
			v.certs = map[string]*x509.Certificate{}
		}
		v.certs[u] = c
		v.mu.Unlock()
	}
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	if now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return nil, errors.New("the signing certificate is not valid now")
	}
	return c, nil
}

func (v *SNSVerifier) fetch(ctx context.Context, u string) (*x509.Certificate, error) {
	res, err := v.get(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("fetch signing certificate: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch signing certificate: status %d", res.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxCertBytes))
	if err != nil {
		return nil, fmt.Errorf("fetch signing certificate: %w", err)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("the signing certificate is not a PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}
