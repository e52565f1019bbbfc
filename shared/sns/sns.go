// Package sns verifies Amazon SNS messages delivered to an HTTP(S) endpoint, as AWS
// documents it ("Verifying the signatures of Amazon SNS messages"), and confirms the
// subscriptions they announce.
//
// A message is accepted only when its topic is one the Verifier was given (an empty list
// accepts none: every AWS account can publish messages that AWS signs, so a topic list is
// what makes a delivery ours), its signing certificate comes over HTTPS from a host the
// host pattern matches (Amazon SNS's own by default) under a .pem path, is valid now, and
// its RSA key verifies the signature over the message's canonical text (SignatureVersion 1:
// SHA1withRSA; 2: SHA256withRSA). Certificates are cached by URL, a bounded number of them;
// redirects are never followed; bodies and certificates are read up to a bound.
//
// Failures are told apart by the sentinel errors a caller maps to its answers:
// ErrNotConfigured (no topic is accepted), ErrMalformed (no SNS message at all),
// ErrUnauthentic (the message is not what SNS sent for an accepted topic) and
// ErrUnavailable (the certificate could not be fetched, or a confirmation failed, right
// now: SNS retries a delivery answered with a 5xx).
package sns

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" // SignatureVersion 1 is SHA1withRSA: AWS chose it, we only verify it
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

	"github.com/botplatform/api/shared/jsonguard"
)

// The SNS message types.
const (
	TypeNotification             = "Notification"
	TypeSubscriptionConfirmation = "SubscriptionConfirmation"
	TypeUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// DefaultHostPattern matches the hosts Amazon SNS serves its signing certificates and
// subscription URLs from: sns.<region>.amazonaws.com, and .amazonaws.com.cn in the China
// regions.
const DefaultHostPattern = `^sns\.[a-z0-9-]+\.amazonaws\.com(\.cn)?$`

var defaultHost = regexp.MustCompile(DefaultHostPattern)

// Bounds of what a Verifier reads, keeps and waits for.
const (
	// MaxBodyBytes bounds a delivery: an SNS message is at most 256 KB, escaped once more
	// in its JSON envelope.
	MaxBodyBytes = 1 << 20
	// MaxCertBytes bounds a signing certificate as fetched (AWS's are about 2 KB).
	MaxCertBytes = 64 << 10
	// MaxCachedCerts bounds the certificates a Verifier keeps: AWS rotates its signing
	// certificates rarely, so only a flood of distinct URLs fills the cache.
	MaxCachedCerts = 64
	// Timeout bounds one certificate fetch or subscription confirmation.
	Timeout = 10 * time.Second
)

// The errors of Verify and Confirm; each failure wraps exactly one, with the reason.
var (
	// ErrNotConfigured: the Verifier accepts no topic, so it refuses every message.
	ErrNotConfigured = errors.New("sns: no topic is accepted")
	// ErrMalformed: the body is no SNS message (not JSON, an unknown type, a required
	// member missing, too large).
	ErrMalformed = errors.New("sns: not an SNS message")
	// ErrUnauthentic: the message's topic is not accepted, or its signature, certificate
	// or certificate URL does not hold; for Confirm, the SubscribeURL is not an SNS URL.
	ErrUnauthentic = errors.New("sns: the message is not authentic")
	// ErrUnavailable: the signing certificate could not be fetched (network, 5xx), or the
	// confirmation did not succeed. Transient: answer so that SNS delivers again.
	ErrUnavailable = errors.New("sns: unavailable")
)

// Message is an Amazon SNS message as delivered to an HTTP(S) endpoint: a Notification,
// or a subscription's SubscriptionConfirmation or UnsubscribeConfirmation.
type Message struct {
	// Type is one of the Type* constants.
	Type      string `json:"Type"`
	MessageID string `json:"MessageId"`
	TopicARN  string `json:"TopicArn"`
	// Subject is a Notification's subject, nil when the publisher gave none: it is then
	// not part of the signed text (which differs from an empty one).
	Subject   *string `json:"Subject,omitempty"`
	Message   string  `json:"Message"`
	Timestamp string  `json:"Timestamp"`
	// Token and SubscribeURL come with the two confirmation types.
	Token            string `json:"Token,omitempty"`
	SubscribeURL     string `json:"SubscribeURL,omitempty"`
	UnsubscribeURL   string `json:"UnsubscribeURL,omitempty"`
	SignatureVersion string `json:"SignatureVersion"`
	Signature        string `json:"Signature"`
	SigningCertURL   string `json:"SigningCertURL"`
}

// StringToSign is the canonical text SNS signs: each signed member's name and value on
// lines of their own, in AWS's order. A Notification signs Message, MessageId, Subject
// (only when it has one), Timestamp, TopicArn and Type; the confirmations sign Message,
// MessageId, SubscribeURL, Timestamp, Token, TopicArn and Type.
func (m Message) StringToSign() string {
	var b strings.Builder
	add := func(name, value string) {
		b.WriteString(name)
		b.WriteByte('\n')
		b.WriteString(value)
		b.WriteByte('\n')
	}
	add("Message", m.Message)
	add("MessageId", m.MessageID)
	if m.Type == TypeNotification {
		if m.Subject != nil {
			add("Subject", *m.Subject)
		}
	} else {
		add("SubscribeURL", m.SubscribeURL)
	}
	add("Timestamp", m.Timestamp)
	if m.Type != TypeNotification {
		add("Token", m.Token)
	}
	add("TopicArn", m.TopicARN)
	add("Type", m.Type)
	return b.String()
}

// check reports a message that lacks what its type signs, or a signature.
func (m Message) check() error {
	required := []struct{ name, value string }{{"MessageId", m.MessageID}, {"Timestamp", m.Timestamp},
		{"TopicArn", m.TopicARN}, {"Signature", m.Signature}, {"SigningCertURL", m.SigningCertURL}}
	switch m.Type {
	case TypeNotification:
	case TypeSubscriptionConfirmation, TypeUnsubscribeConfirmation:
		required = append(required, struct{ name, value string }{"SubscribeURL", m.SubscribeURL},
			struct{ name, value string }{"Token", m.Token})
	default:
		return fmt.Errorf("%w: unknown Type %q", ErrMalformed, m.Type)
	}
	for _, r := range required {
		if r.value == "" {
			return fmt.Errorf("%w: %s is missing", ErrMalformed, r.name)
		}
	}
	return nil
}

// Config configures a Verifier.
type Config struct {
	// Topics are the topic ARNs whose messages are accepted; with none, none is (the
	// Verifier fails closed).
	Topics []string
	// HostPattern is what the host of a SigningCertURL or SubscribeURL must match; nil is
	// DefaultHostPattern. Tests serving certificates themselves set their own.
	HostPattern *regexp.Regexp
	// Client fetches certificates and confirms subscriptions; nil is a client with
	// Timeout. It is copied, and the copy never follows a redirect (one could lead away
	// from the hosts HostPattern allows).
	Client *http.Client
	// Now is the clock certificates must be valid by; nil is time.Now.
	Now func() time.Time
}

// Verifier verifies SNS messages and confirms subscriptions; it is safe for concurrent
// use. A nil or zero Verifier accepts no topic: it refuses every message with
// ErrNotConfigured.
type Verifier struct {
	topics []string
	host   *regexp.Regexp
	client *http.Client
	now    func() time.Time

	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

// New returns the Verifier cfg describes.
func New(cfg Config) *Verifier {
	client := &http.Client{Timeout: Timeout}
	if cfg.Client != nil {
		c := *cfg.Client
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	host := cfg.HostPattern
	if host == nil {
		host = defaultHost
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Verifier{topics: slices.Clone(cfg.Topics), host: host, client: client, now: now,
		certs: map[string]*x509.Certificate{}}
}

// configured reports whether v accepts any topic; a Verifier not made by New accepts none.
func (v *Verifier) configured() bool {
	return v != nil && len(v.topics) > 0 && v.client != nil
}

// Accepts reports whether messages of topic are accepted.
func (v *Verifier) Accepts(topic string) bool {
	return v.configured() && topic != "" && slices.Contains(v.topics, topic)
}

// Verify decodes body as an SNS message and verifies it. Every failure wraps one of
// ErrNotConfigured, ErrMalformed, ErrUnauthentic and ErrUnavailable. Nothing is fetched
// for a message of a topic that is not accepted.
func (v *Verifier) Verify(ctx context.Context, body []byte) (Message, error) {
	if !v.configured() {
		return Message{}, ErrNotConfigured
	}
	if len(body) > MaxBodyBytes {
		return Message{}, fmt.Errorf("%w: over %d bytes", ErrMalformed, MaxBodyBytes)
	}
	if err := jsonguard.CheckDepth(body); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	var m Message
	if err := json.Unmarshal(body, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if err := m.check(); err != nil {
		return Message{}, err
	}
	if !v.Accepts(m.TopicARN) {
		return Message{}, fmt.Errorf("%w: topic %q is not accepted", ErrUnauthentic, m.TopicARN)
	}
	var hash crypto.Hash
	switch m.SignatureVersion {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return Message{}, fmt.Errorf("%w: unknown SignatureVersion %q", ErrUnauthentic, m.SignatureVersion)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return Message{}, fmt.Errorf("%w: the signature is not base64", ErrUnauthentic)
	}
	cert, err := v.cert(ctx, m.SigningCertURL)
	if err != nil {
		return Message{}, err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return Message{}, fmt.Errorf("%w: the signing certificate's key is not RSA", ErrUnauthentic)
	}
	if err := rsa.VerifyPKCS1v15(pub, hash, digest(hash, m.StringToSign()), sig); err != nil {
		return Message{}, fmt.Errorf("%w: bad signature", ErrUnauthentic)
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

// Confirm confirms the subscription of a SubscriptionConfirmation that Verify accepted by
// visiting its SubscribeURL, which is what AWS documents for an HTTP(S) endpoint. Only a
// SubscriptionConfirmation of an accepted topic whose SubscribeURL is allowed (AllowedURL)
// is confirmed; anything else wraps ErrUnauthentic (ErrNotConfigured when no topic is
// accepted). A failed visit wraps ErrUnavailable: SNS sends the confirmation again.
func (v *Verifier) Confirm(ctx context.Context, m Message) error {
	switch {
	case !v.configured():
		return ErrNotConfigured
	case m.Type != TypeSubscriptionConfirmation:
		return fmt.Errorf("%w: a %q is not confirmed", ErrUnauthentic, m.Type)
	case !v.Accepts(m.TopicARN):
		return fmt.Errorf("%w: topic %q is not accepted", ErrUnauthentic, m.TopicARN)
	case !v.AllowedURL(m.SubscribeURL):
		return fmt.Errorf("%w: the SubscribeURL is not an https URL of SNS", ErrUnauthentic)
	}
	status, _, err := v.get(ctx, m.SubscribeURL, 0)
	if err == nil && status != http.StatusOK {
		err = fmt.Errorf("status %d", status)
	}
	if err != nil {
		return fmt.Errorf("%w: confirm the subscription to %s: %v", ErrUnavailable, m.TopicARN, err)
	}
	return nil
}

// AllowedURL reports whether raw is an https URL, without user information, on a host
// the host pattern matches: the only URLs a Verifier fetches certificates from and
// confirms subscriptions at.
func (v *Verifier) AllowedURL(raw string) bool {
	if v == nil || v.host == nil {
		return false
	}
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https" && u.User == nil && u.Opaque == "" && u.Hostname() != "" &&
		v.host.MatchString(u.Hostname())
}

// get fetches u, reading at most limit bytes of its body (none when limit is 0) and
// reporting whether there were more.
func (v *Verifier) get(ctx context.Context, u string, limit int64) (status int, body []byte, err error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, nil, err
	}
	res, err := v.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = res.Body.Close() }()
	if limit > 0 && res.StatusCode == http.StatusOK {
		body, err = io.ReadAll(io.LimitReader(res.Body, limit+1))
	}
	return res.StatusCode, body, err
}

// cert returns the certificate at raw, cached or fetched, checked valid now.
func (v *Verifier) cert(ctx context.Context, raw string) (*x509.Certificate, error) {
	if !v.AllowedURL(raw) {
		return nil, fmt.Errorf("%w: the SigningCertURL is not an https URL of SNS", ErrUnauthentic)
	}
	if u, _ := url.Parse(raw); !strings.HasSuffix(strings.ToLower(u.Path), ".pem") {
		return nil, fmt.Errorf("%w: the SigningCertURL does not name a .pem file", ErrUnauthentic)
	}
	v.mu.Lock()
	c, ok := v.certs[raw]
	v.mu.Unlock()
	if !ok {
		var err error
		if c, err = v.fetch(ctx, raw); err != nil {
			return nil, err
		}
		v.mu.Lock()
		if v.certs == nil {
			v.certs = map[string]*x509.Certificate{}
		}
		for k := range v.certs {
			if len(v.certs) < MaxCachedCerts {
				break
			}
			delete(v.certs, k)
		}
		v.certs[raw] = c
		v.mu.Unlock()
	}
	if now := v.now(); now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return nil, fmt.Errorf("%w: the signing certificate is not valid now", ErrUnauthentic)
	}
	return c, nil
}

func (v *Verifier) fetch(ctx context.Context, u string) (*x509.Certificate, error) {
	status, b, err := v.get(ctx, u, MaxCertBytes)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: fetch the signing certificate: %v", ErrUnavailable, err)
	case status >= 500:
		return nil, fmt.Errorf("%w: fetch the signing certificate: status %d", ErrUnavailable, status)
	case status != http.StatusOK:
		// A redirect too: it is never followed.
		return nil, fmt.Errorf("%w: the signing certificate's URL answered %d", ErrUnauthentic, status)
	case len(b) > MaxCertBytes:
		return nil, fmt.Errorf("%w: the signing certificate is over %d bytes", ErrUnauthentic, MaxCertBytes)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: the signing certificate is no PEM certificate", ErrUnauthentic)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnauthentic, err)
	}
	return c, nil
}
