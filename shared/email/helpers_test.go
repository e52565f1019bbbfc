package email

import (
	"bytes"
	"crypto/rsa"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/stretchr/testify/require"
)

// testKey is one RSA key for the whole test binary (generating 2048-bit keys is slow).
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := GenerateKey()
	if err != nil {
		panic(err)
	}
	return k
})

const (
	testDKIMDomain   = "example.com"
	testDKIMSelector = "s1"
)

func testSigner() *Signer {
	return &Signer{Domain: testDKIMDomain, Selector: testDKIMSelector, Key: testKey()}
}

// verifyDKIM checks the single DKIM signature of raw against the test key's DNS record,
// served by a custom LookupTXT, and returns the verification.
func verifyDKIM(t *testing.T, raw []byte) *dkim.Verification {
	t.Helper()
	v, err := dkimVerification(raw)
	require.NoError(t, err)
	require.NoError(t, v.Err, "DKIM signature must verify")
	return v
}

// dkimVerification verifies raw without asserting, for tests that expect a failure.
func dkimVerification(raw []byte) (*dkim.Verification, error) {
	rec, err := DNSRecord(testKey().Public())
	if err != nil {
		return nil, err
	}
	lookups := 0
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{
		LookupTXT: func(domain string) ([]string, error) {
			lookups++
			if domain != testDKIMSelector+"._domainkey."+testDKIMDomain {
				return nil, fmt.Errorf("no TXT record for %s", domain)
			}
			return []string{rec}, nil
		},
	})
	if err != nil {
		return nil, err
	}
	if len(verifs) != 1 {
		return nil, fmt.Errorf("want 1 DKIM signature, got %d", len(verifs))
	}
	if lookups == 0 && verifs[0].Err == nil {
		return nil, fmt.Errorf("signature verified without a key lookup")
	}
	return verifs[0], nil
}

// sampleMessage exercises non-ASCII names and subject, a preheader, both bodies, extra
// headers and tags.
func sampleMessage() Message {
	return Message{
		From:      mail.Address{Name: "Ünïcødé Bot 🤖", Address: "bot@example.com"},
		To:        mail.Address{Name: "Łukasz Żółć", Address: "lukasz@example.org"},
		ReplyTo:   &mail.Address{Name: "Support, Team", Address: "support@example.com"},
		Subject:   "Привет, мир — ваш заказ №42 готов ✓",
		Preheader: "Sneak <peek> & more",
		HTML:      "<!doctype html><html><BODY class=\"x\"><p>Hello, Łukasz &amp; friends</p></BODY></html>",
		Text: "Hello, Łukasz & friends\n" +
			"This line is deliberately longer than seventy-six characters, so quoted-printable must soft-break it.\n" +
			"Trailing spaces stay   \n",
		Headers: map[string]string{
			"List-Unsubscribe":      "<https://example.com/u/abc123>, <mailto:unsub@example.com?subject=abc123>",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		},
		Tags: map[string]string{"campaign": "cmp_42", "variant": "b"},
		Date: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
	}
}

// parts is a parsed message.
type parts struct {
	msg  *mail.Message
	text string // decoded, CRLF turned into LF
	html string // decoded, CRLF turned into LF
}

// parseMultipart parses raw as a multipart/alternative message with exactly a text/plain
// and a text/html part, in that order, both UTF-8, and returns the decoded bodies.
func parseMultipart(t *testing.T, raw []byte) parts {
	t.Helper()
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mt)
	require.NotEmpty(t, params["boundary"])
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var bodies []string
	for _, want := range []string{"text/plain", "text/html"} {
		p, err := mr.NextPart()
		require.NoError(t, err)
		pt, pparams, err := mime.ParseMediaType(p.Header.Get("Content-Type"))
		require.NoError(t, err)
		require.Equal(t, want, pt)
		require.Equal(t, "utf-8", strings.ToLower(pparams["charset"]))
		b, err := io.ReadAll(p) // multipart.Reader decodes quoted-printable
		require.NoError(t, err)
		bodies = append(bodies, strings.ReplaceAll(string(b), "\r\n", "\n"))
	}
	_, err = mr.NextPart()
	require.ErrorIs(t, err, io.EOF, "exactly two parts")
	return parts{msg: msg, text: bodies[0], html: bodies[1]}
}

// requireCRLF checks that every line of raw ends with CRLF and is at most 998 bytes.
func requireCRLF(t *testing.T, raw []byte) {
	t.Helper()
	require.True(t, bytes.HasSuffix(raw, []byte("\r\n")), "message ends with CRLF")
	for i, line := range bytes.Split(raw, []byte("\r\n")) {
		require.NotContains(t, string(line), "\n", "bare LF on line %d", i+1)
		require.NotContains(t, string(line), "\r", "bare CR on line %d", i+1)
		require.LessOrEqual(t, len(line), 998, "line %d too long", i+1)
	}
}
