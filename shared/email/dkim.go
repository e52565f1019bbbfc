package email

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/mail"
	"net/textproto"

	"github.com/emersion/go-msgauth/dkim"
)

// DKIMKeyBits is the size of the RSA keys GenerateKey makes: 2048 bits, the size every
// receiver accepts (RFC 8301 requires at least 1024).
const DKIMKeyBits = 2048

// signedHeaders are the fields a DKIM signature covers when the message has them, in
// this order (RFC 6376 section 5.4.1 recommends them; List-Unsubscribe and
// List-Unsubscribe-Post must be signed for one-click unsubscribe, RFC 8058).
var signedHeaders = []string{
	"From", "To", "Reply-To", "Subject", "Date", "Message-ID", "MIME-Version",
	"Content-Type", "Content-Transfer-Encoding", "List-Unsubscribe", "List-Unsubscribe-Post",
}

// Signer is a DKIM signing identity: the public key is published as a TXT record at
// <Selector>._domainkey.<Domain> (see DNSRecord).
type Signer struct {
	// Domain is the signing domain (d=), usually the From domain so DMARC aligns.
	Domain string
	// Selector names the key under the domain (s=).
	Selector string
	// Key signs; its public key must be *rsa.PublicKey or ed25519.PublicKey.
	Key crypto.Signer
}

// Sign returns raw with a DKIM-Signature header field prepended: rsa-sha256 (or
// ed25519-sha256 for an Ed25519 key), relaxed/relaxed canonicalization, covering From,
// To, Reply-To, Subject, Date, Message-ID, MIME-Version, Content-Type,
// Content-Transfer-Encoding, List-Unsubscribe and List-Unsubscribe-Post, each only when
// present in raw.
func Sign(raw []byte, s Signer) ([]byte, error) {
	if s.Domain == "" || s.Selector == "" || s.Key == nil {
		return nil, errors.New("email: dkim signer needs Domain, Selector and Key")
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("email: dkim: read header: %w", err)
	}
	var keys []string
	for _, k := range signedHeaders {
		if _, ok := msg.Header[textproto.CanonicalMIMEHeaderKey(k)]; ok {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 || keys[0] != "From" {
		return nil, errors.New("email: dkim: message has no From header")
	}
	var out bytes.Buffer
	out.Grow(len(raw) + 1024)
	err = dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{
		Domain:                 s.Domain,
		Selector:               s.Selector,
		Signer:                 s.Key,
		Hash:                   crypto.SHA256,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed,
		BodyCanonicalization:   dkim.CanonicalizationRelaxed,
		HeaderKeys:             keys,
	})
	if err != nil {
		return nil, fmt.Errorf("email: dkim: %w", err)
	}
	return out.Bytes(), nil
}

// GenerateKey makes a new RSA key of DKIMKeyBits bits for DKIM signing.
func GenerateKey() (*rsa.PrivateKey, error) {
	return rsa.GenerateKey(rand.Reader, DKIMKeyBits)
}

// DNSRecord returns the TXT record value that publishes pub for DKIM:
// "v=DKIM1; k=rsa; p=<base64 DER SubjectPublicKeyInfo>" for an RSA key, or
// "v=DKIM1; k=ed25519; p=<base64 raw key>" (RFC 8463) for an Ed25519 key. A 2048-bit
// RSA record is longer than 255 bytes, so DNS providers store it as several strings of
// one TXT record; receivers join them.
func DNSRecord(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		der, err := x509.MarshalPKIXPublicKey(k)
		if err != nil {
			return "", fmt.Errorf("email: dkim record: %w", err)
		}
		return "v=DKIM1; k=rsa; p=" + base64.StdEncoding.EncodeToString(der), nil
	case ed25519.PublicKey:
		return "v=DKIM1; k=ed25519; p=" + base64.StdEncoding.EncodeToString(k), nil
	default:
		return "", fmt.Errorf("email: dkim record: unsupported key type %T", pub)
	}
}
