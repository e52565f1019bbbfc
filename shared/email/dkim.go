package email

import (
	"bytes"
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
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
	sig, err := signature(nil, raw, s, time.Now())
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(sig)+len(raw))
	return append(append(out, sig...), raw...), nil
}

// signature appends the DKIM-Signature header field of raw (CRLF included) to dst, as
// go-msgauth's dkim.Sign makes it (the same tags in the same order, folded the same way;
// TestSignEqualsGoMsgauth holds the two equal byte for byte), but computed in one pass over the
// message as it is, with no pipe, goroutine or copy of it. The hashing and the signature
// are crypto/sha256's and the key's.
func signature(dst, raw []byte, s Signer, now time.Time) ([]byte, error) {
	if s.Domain == "" || s.Selector == "" || s.Key == nil {
		return nil, errors.New("email: dkim signer needs Domain, Selector and Key")
	}
	var algo string
	hash := crypto.SHA256
	switch s.Key.Public().(type) {
	case *rsa.PublicKey:
		algo = "rsa-sha256"
	case ed25519.PublicKey:
		algo, hash = "ed25519-sha256", 0 // Ed25519 signs the SHA-256 digest itself (RFC 8463)
	default:
		return nil, fmt.Errorf("email: dkim: unsupported key type %T", s.Key.Public())
	}
	fields, body, err := headerFields(raw)
	if err != nil {
		return nil, fmt.Errorf("email: dkim: read header: %w", err)
	}
	// The signed fields, in signedHeaders order, each the last of its name (RFC 6376
	// section 5.4.2).
	picked := make([][]byte, len(signedHeaders))
	names := make([]string, 0, len(signedHeaders))
	for i, k := range signedHeaders {
		for j := len(fields) - 1; j >= 0; j-- {
			if bytes.EqualFold(fieldName(fields[j]), []byte(k)) {
				picked[i] = fields[j]
				names = append(names, k)
				break
			}
		}
	}
	if len(names) == 0 || names[0] != "From" {
		return nil, errors.New("email: dkim: message has no From header")
	}

	h := sha256.New()
	relaxedBody(h, body)
	var sum [sha256.Size]byte
	tags := [...][2]string{ // sorted by name, b= apart, as go-msgauth writes them
		{"a", algo},
		{"bh", base64.StdEncoding.EncodeToString(h.Sum(sum[:0]))},
		{"c", "relaxed/relaxed"},
		{"d", s.Domain},
		{"h", strings.Join(names, ":")},
		{"s", s.Selector},
		{"t", strconv.FormatInt(now.Unix(), 10)},
		{"v", "1"},
	}
	field := dkimField(dst, tags[:])
	at := len(field) // b= goes here

	h.Reset()
	var canon []byte
	for _, f := range picked {
		if f != nil {
			canon = relaxedHeader(canon[:0], f)
			h.Write(canon)
		}
	}
	canon = relaxedHeader(canon[:0], append(field[len(dst):at:at], "\r\n b=\r\n"...))
	h.Write(canon[:len(canon)-2]) // the signature's own field ends without CRLF
	sig, err := s.Key.Sign(rand.Reader, h.Sum(sum[:0]), hash)
	if err != nil {
		return nil, fmt.Errorf("email: dkim: %w", err)
	}
	return appendFolded(append(field, "\r\n"...), " b="+base64.StdEncoding.EncodeToString(sig)), nil
}

// dkimField appends "DKIM-Signature:" and the tags " k=v;", a line broken before a tag
// that would take it past 75 characters (go-msgauth's formatHeaderParams).
func dkimField(dst []byte, tags [][2]string) []byte {
	dst = append(dst, "DKIM-Signature:"...)
	line := 0
	for _, t := range tags {
		if 3+line+len(t[0])+len(t[1]) > 75 {
			dst = append(dst, "\r\n"...)
			line = 0
		}
		dst = append(append(append(append(append(dst, ' '), t[0]...), '='), t[1]...), ';')
		line += 3 + len(t[0]) + len(t[1])
	}
	return dst
}

// appendFolded appends v in lines of 75 bytes joined by CRLF and a space, then CRLF
// (go-msgauth's foldHeaderField).
func appendFolded(dst []byte, v string) []byte {
	for len(v) > 75 {
		dst = append(append(dst, v[:75]...), "\r\n "...)
		v = v[75:]
	}
	return append(append(dst, v...), "\r\n"...)
}

// headerFields splits raw into its header fields (each with its continuation lines and
// line breaks) and its body (after the empty line). Lines end with LF, CRLF or, at the
// end, nothing.
func headerFields(raw []byte) ([][]byte, []byte, error) {
	var fields [][]byte
	for i := 0; ; {
		if i == len(raw) {
			return nil, nil, errors.New("no empty line after the header")
		}
		end := bytes.IndexByte(raw[i:], '\n')
		if end < 0 {
			end = len(raw)
		} else {
			end += i + 1
		}
		line := raw[i:end]
		switch {
		case len(bytes.TrimRight(line, "\r\n")) == 0:
			return fields, raw[end:], nil
		case len(fields) > 0 && (line[0] == ' ' || line[0] == '\t'):
			f := fields[len(fields)-1]
			fields[len(fields)-1] = f[:len(f)+len(line)] // continuation: the next bytes of raw
		default:
			fields = append(fields, line)
		}
		i = end
	}
}

// fieldName is the name of a header field, spaces around it removed.
func fieldName(f []byte) []byte {
	name, _, _ := bytes.Cut(f, []byte(":"))
	return bytes.TrimSpace(name)
}

// relaxedHeader appends the relaxed canonical form of a header field (RFC 6376 section
// 3.4.2): the name in lower case, the value unfolded, runs of whitespace made one space,
// no whitespace around the colon or at the end, and CRLF.
func relaxedHeader(dst, f []byte) []byte {
	name, value, ok := bytes.Cut(f, []byte(":"))
	for _, c := range bytes.TrimSpace(name) {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	dst = append(dst, ':')
	if !ok {
		return append(dst, "\r\n"...)
	}
	space := false
	start := len(dst)
	for _, c := range value {
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			space = true
			continue
		}
		if space && len(dst) > start {
			dst = append(dst, ' ')
		}
		space = false
		dst = append(dst, c)
	}
	return append(dst, "\r\n"...)
}

// relaxedBody writes the relaxed canonical form of a body (RFC 6376 section 3.4.4) to
// h, as go-msgauth's canonicalizer makes it: lone LFs become CRLF, runs of spaces and
// tabs one space, none at the end of a line, no empty lines at the end, and a final CRLF
// unless the body is empty. The stretches already canonical, most of a built message,
// are written as they are, a stretch at a time.
func relaxedBody(h io.Writer, body []byte) {
	var (
		breaks  []byte // line breaks not written yet: only text after them writes them
		space   bool   // whitespace not written yet
		written bool
		prevCR  bool
	)
	lit := []byte(" \r\n")
	for i := 0; i < len(body); {
		switch c := body[i]; c {
		case ' ', '\t':
			space, prevCR = true, false
			i++
		case '\r', '\n':
			if c == '\n' && !prevCR {
				breaks = append(breaks, '\r')
			}
			breaks = append(breaks, c)
			space, prevCR = false, c == '\r'
			i++
		default:
			if len(breaks) > 0 {
				h.Write(breaks)
				breaks = breaks[:0]
			}
			if space {
				h.Write(lit[:1])
				space = false
			}
			// A stretch that is canonical as it is: text, single spaces between words, CRLFs
			// between lines that begin with text.
			j := i + 1
			for j < len(body) {
				d := body[j]
				if d == ' ' || d == '\r' {
					if j+1 < len(body) && d == ' ' && canonText(body[j+1]) {
						j += 2
						continue
					}
					if j+2 < len(body) && d == '\r' && body[j+1] == '\n' && canonText(body[j+2]) {
						j += 3
						continue
					}
					break
				}
				if !canonText(d) {
					break
				}
				j++
			}
			h.Write(body[i:j])
			written, prevCR = true, false
			i = j
		}
	}
	if written {
		h.Write(lit[1:])
	}
}

// canonText reports whether c is neither whitespace nor a line break.
func canonText(c byte) bool { return c != ' ' && c != '\t' && c != '\r' && c != '\n' }

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
