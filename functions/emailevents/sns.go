package emailevents

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" // SNS SignatureVersion 1 is SHA1withRSA, as AWS defines it
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
	"strings"
	"sync"
	"time"

	"github.com/botplatform/api/shared/jsonguard"
)

// The SNS message types.
const (
	SNSNotification             = "Notification"
	SNSSubscriptionConfirmation = "SubscriptionConfirmation"
	SNSUnsubscribeConfirmation  = "UnsubscribeConfirmation"
)

// SNSMessage is an Amazon SNS message as delivered to an HTTP(S) endpoint.
type SNSMessage struct {
	Type      string `json:"Type"`
	MessageID string `json:"MessageId"`
	// Token and SubscribeURL come with the two confirmation types.
	Token    string `json:"Token"`
	TopicARN string `json:"TopicArn"`
	// Subject is nil when the publisher gave none: it is then not part of the signed text.
	Subject          *string `json:"Subject"`
	Message          string  `json:"Message"`
	Timestamp        string  `json:"Timestamp"`
	SignatureVersion string  `json:"SignatureVersion"`
	Signature        string  `json:"Signature"`
	SigningCertURL   string  `json:"SigningCertURL"`
	SubscribeURL     string  `json:"SubscribeURL"`
	UnsubscribeURL   string  `json:"UnsubscribeURL"`
}

// Verification failures: ErrSNSMalformed for a body that is no SNS message at all,
// ErrSNSUnauthentic for one whose signature does not hold. Any other error (the
// certificate could not be fetched) is transient.
var (
	ErrSNSMalformed   = errors.New("sns: not an SNS message")
	ErrSNSUnauthentic = errors.New("sns: signature does not verify")
)

// SNSVerifier checks SNS message signatures as AWS documents it ("Verifying the
// signatures of Amazon SNS messages"): the signing certificate is fetched over HTTPS from
// SigningCertURL, whose host must be SNS's, and the message's canonical text is verified
// against it with SHA1withRSA (SignatureVersion 1) or SHA256withRSA (2). Certificates are
// cached by URL: AWS rotates them rarely, and every message names one.
type SNSVerifier struct {
	client *http.Client
	host   *regexp.Regexp
	now    func() time.Time

	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

// Bounds of the certificate cache and of one certificate.
const (
	maxCachedCerts = 64
	maxCertBytes   = 64 << 10
)

// NewSNSVerifier returns a verifier fetching with client from hosts matching host.
func NewSNSVerifier(client *http.Client, host *regexp.Regexp, now func() time.Time) *SNSVerifier {
	return &SNSVerifier{client: client, host: host, now: now, certs: map[string]*x509.Certificate{}}
}

// Verify parses body as an SNS message and checks its signature.
func (v *SNSVerifier) Verify(ctx context.Context, body []byte) (SNSMessage, error) {
	var m SNSMessage
	if err := jsonguard.CheckDepth(body); err != nil {
		return SNSMessage{}, fmt.Errorf("%w: %v", ErrSNSMalformed, err)
	}
	if err := json.Unmarshal(body, &m); err != nil {
		return SNSMessage{}, fmt.Errorf("%w: %v", ErrSNSMalformed, err)
	}
	text, err := m.canonical()
	if err != nil {
		return SNSMessage{}, err
	}
	var h crypto.Hash
	var digest []byte
	switch m.SignatureVersion {
	case "1":
		d := sha1.Sum([]byte(text))
		h, digest = crypto.SHA1, d[:]
	case "2":
		d := sha256.Sum256([]byte(text))
		h, digest = crypto.SHA256, d[:]
	default:
		return SNSMessage{}, fmt.Errorf("%w: unknown SignatureVersion %q", ErrSNSUnauthentic, m.SignatureVersion)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return SNSMessage{}, fmt.Errorf("%w: the signature is not base64", ErrSNSUnauthentic)
	}
	cert, err := v.cert(ctx, m.SigningCertURL)
	if err != nil {
		return SNSMessage{}, err
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return SNSMessage{}, fmt.Errorf("%w: the signing certificate has no RSA key", ErrSNSUnauthentic)
	}
	if err := rsa.VerifyPKCS1v15(pub, h, digest, sig); err != nil {
		return SNSMessage{}, fmt.Errorf("%w: %v", ErrSNSUnauthentic, err)
	}
	return m, nil
}

// canonical is the text SNS signs: "Name\nvalue\n" for each signed member in this order.
func (m SNSMessage) canonical() (string, error) {
	type member struct{ name, value string }
	var ms []member
	switch m.Type {
	case SNSNotification:
		ms = []member{{"Message", m.Message}, {"MessageId", m.MessageID}}
		if m.Subject != nil {
			ms = append(ms, member{"Subject", *m.Subject})
		}
		ms = append(ms, member{"Timestamp", m.Timestamp}, member{"TopicArn", m.TopicARN}, member{"Type", m.Type})
	case SNSSubscriptionConfirmation, SNSUnsubscribeConfirmation:
		ms = []member{{"Message", m.Message}, {"MessageId", m.MessageID}, {"SubscribeURL", m.SubscribeURL},
			{"Timestamp", m.Timestamp}, {"Token", m.Token}, {"TopicArn", m.TopicARN}, {"Type", m.Type}}
	default:
		return "", fmt.Errorf("%w: unknown Type %q", ErrSNSMalformed, m.Type)
	}
	var b strings.Builder
	for _, x := range ms {
		if x.value == "" && x.name != "Subject" && x.name != "Message" {
			return "", fmt.Errorf("%w: %s is missing", ErrSNSMalformed, x.name)
		}
		b.WriteString(x.name)
		b.WriteByte('\n')
		b.WriteString(x.value)
		b.WriteByte('\n')
	}
	if m.Signature == "" || m.SigningCertURL == "" {
		return "", fmt.Errorf("%w: Signature and SigningCertURL are required", ErrSNSMalformed)
	}
	return b.String(), nil
}

// AllowedURL reports whether raw is an https URL on an SNS host, the only URLs the
// verifier fetches and the service confirms subscriptions at.
func (v *SNSVerifier) AllowedURL(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && u.Scheme == "https" && u.User == nil && u.Opaque == "" && v.host.MatchString(u.Hostname())
}

// cert returns the certificate at raw, from the cache or fetched.
func (v *SNSVerifier) cert(ctx context.Context, raw string) (*x509.Certificate, error) {
	if !v.AllowedURL(raw) {
		return nil, fmt.Errorf("%w: SigningCertURL is not an https URL of SNS", ErrSNSUnauthentic)
	}
	if u, _ := url.Parse(raw); !strings.HasSuffix(u.Path, ".pem") {
		return nil, fmt.Errorf("%w: SigningCertURL is not a .pem certificate", ErrSNSUnauthentic)
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
		if len(v.certs) >= maxCachedCerts {
			clear(v.certs) // only a flood of distinct URLs, all SNS's, gets here
		}
		v.certs[raw] = c
		v.mu.Unlock()
	}
	if now := v.now(); now.Before(c.NotBefore) || now.After(c.NotAfter) {
		return nil, fmt.Errorf("%w: the signing certificate is not valid now", ErrSNSUnauthentic)
	}
	return c, nil
}

func (v *SNSVerifier) fetch(ctx context.Context, raw string) (*x509.Certificate, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSNSUnauthentic, err)
	}
	res, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch the SNS signing certificate: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	switch {
	case res.StatusCode >= 500:
		return nil, fmt.Errorf("fetch the SNS signing certificate: status %d", res.StatusCode)
	case res.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("%w: the signing certificate answered %d", ErrSNSUnauthentic, res.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxCertBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch the SNS signing certificate: %w", err)
	}
	if len(b) > maxCertBytes {
		return nil, fmt.Errorf("%w: the signing certificate is over %d bytes", ErrSNSUnauthentic, maxCertBytes)
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: the signing certificate is no PEM certificate", ErrSNSUnauthentic)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrSNSUnauthentic, err)
	}
	return c, nil
}
