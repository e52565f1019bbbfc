package email

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"net/mail"
	"net/textproto"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testBoundary = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789ab"

// edgeMessages are messages whose bodies and headers exercise the encoders' corners:
// lines of exactly 75 and 76 bytes, trailing whitespace, every kind of line break, leading
// dots, bytes to escape at a line's end.
func edgeMessages() []Message {
	long := strings.Repeat("x", 75) + "\n" + strings.Repeat("y", 76) + "\n" + strings.Repeat("z", 74) + "=\n" +
		strings.Repeat("w", 74) + " \n" + strings.Repeat("é", 40) + "\n"
	breaks := "a\r\nb\rc\nd\r\r\ne\n\rf \t\r\ng\t\n.dot\n..two\n. \n\r=\n\x00\x7f end  "
	base := sampleMessage()
	base.MessageID = "<fixed.id@example.com>" // generated ones differ
	text := base
	text.HTML, text.Preheader = "", ""
	var out []Message
	for _, body := range []string{base.Text, long, breaks, ".", "=", " ", "\n", "\r"} {
		m := base
		m.Text, m.HTML = body, body+"<body>"+body
		out = append(out, m)
		t := text
		t.Text = body
		out = append(out, t)
	}
	noBody := base
	noBody.HTML = "<p>no body tag</p>"
	plainASCII := base
	plainASCII.Subject, plainASCII.From.Name, plainASCII.To.Name = "Hi there, a plain subject", "", ""
	plainASCII.Headers = map[string]string{"List-Unsubscribe": strings.Repeat("<https://example.com/u/"+strings.Repeat("a", 60)+">, ", 5) + "<x>"}
	plainASCII.Tags = nil
	return append(out, noBody, plainASCII)
}

func TestComposeEqualsReference(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	for i, m := range edgeMessages() {
		want, err := referenceBuild(m, now, testBoundary)
		require.NoError(t, err, "message %d", i)
		got, _, err := compose([]byte("kept"), m, now, testBoundary)
		require.NoError(t, err, "message %d", i)
		require.Equal(t, "kept", string(got[:4]), "compose appends")
		require.Equal(t, string(want), string(got[4:]), "message %d", i)
	}
}

// FuzzCompose holds the one-buffer message equal to the first implementation's for any
// text, HTML, preheader and header value.
func FuzzCompose(f *testing.F) {
	for _, m := range edgeMessages() {
		f.Add(m.Text, m.HTML, m.Preheader, m.Headers["List-Unsubscribe"])
	}
	now := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, text, html, preheader, header string) {
		m := sampleMessage()
		m.MessageID = "<fixed.id@example.com>"
		m.Text, m.HTML, m.Preheader, m.Headers = text, html, preheader, map[string]string{"List-Unsubscribe": header}
		want, wantErr := referenceBuild(m, now, testBoundary)
		got, _, err := compose(nil, m, now, testBoundary)
		if checkBody(m) != nil || checkHeaderText("header", header, maxHeaderValue) != nil {
			require.Error(t, err)
			return
		}
		if wantErr != nil {
			require.EqualError(t, err, wantErr.Error())
			return
		}
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))
	})
}

// FuzzQP holds qpWriter equal to mime/quotedprintable's writer.
func FuzzQP(f *testing.F) {
	for _, m := range edgeMessages() {
		f.Add(m.Text)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want bytes.Buffer
		require.NoError(t, referenceQP(&want, s))
		got := appendQP([]byte("\r\n"), s)
		require.Equal(t, want.String(), string(got[2:]))
	})
}

// FuzzAppendData holds appendData equal to net/textproto's DotWriter.
func FuzzAppendData(f *testing.F) {
	for _, s := range []string{"", ".", "\r", "\n", "a\r\r\nb", ".a\r\n.b\n..c\r.d", "x\r"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		var want bytes.Buffer
		bw := bufio.NewWriter(&want)
		w := textproto.NewWriter(bw).DotWriter()
		_, err := w.Write(msg)
		require.NoError(t, err)
		require.NoError(t, w.Close())
		require.Equal(t, want.String(), string(appendData(nil, msg)))
	})
}

// signedHeaderKeys are the names the first Sign asked go-msgauth to sign for raw.
func signedHeaderKeys(t testing.TB, raw []byte) []string {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	var keys []string
	for _, k := range signedHeaders {
		if _, ok := msg.Header[textproto.CanonicalMIMEHeaderKey(k)]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// signBoth signs raw with Sign and with go-msgauth in the same second (t= is the time).
func signBoth(t testing.TB, raw []byte, s Signer) (got, want []byte) {
	for range 3 {
		before := time.Now().Unix()
		var err error
		got, err = Sign(raw, s)
		require.NoError(t, err)
		want, err = referenceSign(raw, s, signedHeaderKeys(t, raw))
		require.NoError(t, err)
		if time.Now().Unix() == before {
			break
		}
	}
	return got, want
}

func TestSignEqualsGoMsgauth(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	for i, m := range edgeMessages() {
		raw, _, err := compose(nil, m, now, "")
		require.NoError(t, err)
		got, want := signBoth(t, raw, *testSigner())
		require.Equal(t, string(want), string(got), "message %d", i)
		verifyDKIM(t, got)
	}
	// Folded, repeated and oddly spaced fields: the last of a name is signed.
	raw := []byte("from: a@example.com\r\nSubject: one\r\nSubject:\r\n  two\t three \r\n\tfour\r\nTo:  b@example.com\r\n\r\n body\r\n\r\n")
	got, want := signBoth(t, raw, *testSigner())
	require.Equal(t, string(want), string(got))
	verifyDKIM(t, got)
}

var bodyHashTag = regexp.MustCompile(`bh=[^;]*;`)

// FuzzRelaxedBody holds the body hash equal to go-msgauth's for any body.
func FuzzRelaxedBody(f *testing.F) {
	for _, m := range edgeMessages() {
		f.Add(m.Text)
	}
	f.Add("")
	f.Add(" \r\n\t\r\n")
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	s := Signer{Domain: "example.com", Selector: "ed", Key: key}
	f.Fuzz(func(t *testing.T, body string) {
		raw := []byte("From: a@example.com\r\n\r\n" + body)
		got, err := Sign(raw, s)
		require.NoError(t, err)
		want, err := referenceSign(raw, s, []string{"From"})
		require.NoError(t, err)
		require.Equal(t, bodyHashTag.FindString(string(want)), bodyHashTag.FindString(string(got)))
	})
}

// campaignMessage is a message like the bench's: about 5 KB of HTML with a link, the text
// part, the unsubscribe headers and tags.
func campaignMessage() Message {
	var h strings.Builder
	h.WriteString("<!doctype html><html><head><title>News</title></head><body>")
	for i := 0; h.Len() < 5000; i++ {
		h.WriteString(`<p style="margin:0 0 12px 0;font-family:Arial,sans-serif">Paragraph of the newsletter with some words, number `)
		h.WriteString(strings.Repeat("x", i%7))
		h.WriteString(` and a <a href="https://example.com/c/abcdef">link</a>.</p>` + "\n")
	}
	h.WriteString("</body></html>")
	return Message{
		From:    mail.Address{Address: "news@example.com"},
		To:      mail.Address{Name: "Someone", Address: "someone@example.org"},
		Subject: "Hi someone@example.org",
		HTML:    h.String(),
		Text:    strings.Repeat("Paragraph of the newsletter with some words and a link.\n\n", 40),
		Headers: map[string]string{
			"List-Unsubscribe":      "<https://example.com/u/rcp_0123456789abcdef>",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		},
		Tags:      map[string]string{"bot": "bot_1", "campaign": "cmp_1", "recipient": "rcp_1"},
		MessageID: "<rcp_1.cmp_1@example.com>",
	}
}

// BenchmarkMessage is what a campaign's send costs in this package before the network:
// build, DKIM-sign (RSA-2048) and make the DATA text, the first way (first) and now
// (oneBuffer), and the same without the RSA signature itself (ed25519 instead), where the
// difference shows.
func BenchmarkMessage(b *testing.B) {
	m := campaignMessage()
	now := time.Now()
	ed := Signer{Domain: "example.com", Selector: "ed", Key: ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))}
	for _, k := range []struct {
		name string
		s    Signer
	}{{"rsa", *testSigner()}, {"ed25519", ed}} {
		b.Run(k.name+"/first", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				raw, err := referenceBuild(m, now, testBoundary)
				require.NoError(b, err)
				signed, err := referenceSign(raw, k.s, signedHeaderKeys(b, raw))
				require.NoError(b, err)
				bw := bufio.NewWriter(discard{})
				w := textproto.NewWriter(bw).DotWriter()
				_, _ = w.Write(signed)
				_ = w.Close()
			}
		})
		b.Run(k.name+"/oneBuffer", func(b *testing.B) {
			b.ReportAllocs()
			var msg, data []byte
			for b.Loop() {
				raw, _, err := compose(msg[:0], m, now, testBoundary)
				require.NoError(b, err)
				sig, err := signature(data[:0], raw, k.s, now)
				require.NoError(b, err)
				msg, data = raw, appendData(sig, raw)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
