package mimemail

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/functions/emaildomains/internal/mimemail/mimemailtest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/encoding/charmap"
)

func TestParseMultipartMail(t *testing.T) {
	t.Parallel()
	p, err := Parse(mimemailtest.SampleMail("Support <Support@Example.COM>", "m1@sender.example"))
	require.NoError(t, err)
	assert.Equal(t, "Заказ №42 — вопрос", p.Subject)
	assert.Equal(t, "m1@sender.example", p.MessageID)
	assert.Equal(t, &Address{Name: "Ада", Address: "ada@sender.example"}, p.From)
	assert.Equal(t, []Address{{Name: "Support", Address: "Support@example.com"}}, p.To)
	assert.Equal(t, []Address{{Name: "Bo", Address: "bo@elsewhere.example"}}, p.Cc)
	require.NotNil(t, p.Date)
	assert.Equal(t, time.Date(2026, 3, 1, 10, 58, 0, 0, time.UTC), *p.Date)
	assert.Equal(t, "Привет, мир with a soft break", p.Text)
	assert.Equal(t, "<p>Привет, <b>мир</b></p>", p.HTML)
	assert.Equal(t, []Attachment{
		{Filename: "отчет.pdf", ContentType: "application/pdf", Size: 400},
		{Filename: "", ContentType: "image/png", Size: 8, Inline: true, ContentID: "logo@sender.example"},
	}, p.Attachments)
	assert.Empty(t, p.Notes)
}

func TestParseCharsets(t *testing.T) {
	t.Parallel()
	cp1251, err := charmap.Windows1251.NewEncoder().String("Здравствуйте")
	require.NoError(t, err)
	msg := func(charset, body string) []byte {
		return mimemailtest.CRLF("From: a@b.example\nSubject: =?koi8-r?B?" + koi8("тема") + "?=\nContent-Type: text/plain; charset=" + charset + "\n\n" + body)
	}
	p, err := Parse(msg("windows-1251", cp1251))
	require.NoError(t, err)
	assert.Equal(t, "Здравствуйте", p.Text)
	assert.Equal(t, "тема", p.Subject, "an encoded-word in another charset")

	p, err = Parse(msg("x-unknown", "plain ünïcode"))
	require.NoError(t, err)
	assert.Equal(t, "plain ünïcode", p.Text, "an unknown charset holding valid UTF-8 is kept")

	p, err = Parse(msg("x-unknown", cp1251))
	require.NoError(t, err)
	assert.Empty(t, p.Text)
	require.Len(t, p.Notes, 1)
	assert.Contains(t, p.Notes[0], "unknown charset")

	p, err = Parse(msg("utf-8", "bad \xff byte"))
	require.NoError(t, err)
	assert.Equal(t, "bad \uFFFD byte", p.Text)
	assert.Len(t, p.Notes, 1)

	p, err = Parse(mimemailtest.CRLF("From: a@b.example\n\nno content type"))
	require.NoError(t, err)
	assert.Equal(t, "no content type", p.Text)
}

func koi8(s string) string {
	b, err := charmap.KOI8R.NewEncoder().String(s)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString([]byte(b))
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	// Multiparts nested MaxDepth+2 deep, the text at the bottom.
	var b strings.Builder
	b.WriteString("From: a@b.example\nContent-Type: multipart/mixed; boundary=b0\n\n")
	for i := 0; i <= MaxDepth; i++ {
		fmt.Fprintf(&b, "--b%d\nContent-Type: multipart/mixed; boundary=b%d\n\n", i, i+1)
	}
	fmt.Fprintf(&b, "--b%d\nContent-Type: text/plain\n\ndeep\n--b%d--\n", MaxDepth+1, MaxDepth+1)
	for i := MaxDepth; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\n", i)
	}
	p, err := Parse(mimemailtest.CRLF(b.String()))
	require.NoError(t, err)
	assert.Empty(t, p.Text)
	assert.Equal(t, []string{"multiparts nested deeper than 5 levels are ignored"}, p.Notes)

	b.Reset()
	b.WriteString("From: a@b.example\nContent-Type: multipart/mixed; boundary=x\n\n")
	for i := range MaxParts + 5 {
		fmt.Fprintf(&b, "--x\nContent-Type: application/octet-stream\nContent-Disposition: attachment; filename=f%d.bin\n\n%d\n", i, i)
	}
	b.WriteString("--x--\n")
	p, err = Parse(mimemailtest.CRLF(b.String()))
	require.NoError(t, err)
	assert.Len(t, p.Attachments, MaxParts)
	assert.Equal(t, []string{"the message has more than 100 parts; the rest are ignored"}, p.Notes)

	_, err = Parse([]byte("this is no message"))
	assert.ErrorIs(t, err, ErrInvalid)

	p, err = Parse(mimemailtest.CRLF("From: a@b.example\nContent-Type: text/plain\nContent-Transfer-Encoding: base64\n\n!!not base64!!"))
	require.NoError(t, err)
	assert.Empty(t, p.Text)
	assert.Contains(t, p.Notes[0], "transfer encoding is damaged")
}

// FuzzParseMessage holds the parser of mail from strangers to its promises on any input: no
// panic, valid UTF-8 out, the part and note limits kept.
func FuzzParseMessage(f *testing.F) {
	f.Add(mimemailtest.SampleMail("support@example.com", "m@x"))
	f.Add(mimemailtest.CRLF("From: a@b.example\nContent-Type: text/plain; charset=koi8-r\nContent-Transfer-Encoding: quoted-printable\n\n=F0=D2=C9=D7=C5=D4"))
	f.Add(mimemailtest.CRLF("Content-Type: multipart/mixed; boundary=a\n\n--a\nContent-Type: multipart/alternative; boundary=b\n\n--b\n\nx\n--b--\n--a--\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		p, err := Parse(raw)
		if err != nil {
			return
		}
		for _, s := range []string{p.Subject, p.Text, p.HTML} {
			if !utf8.ValidString(s) {
				t.Fatalf("not UTF-8: %q", s)
			}
		}
		if len(p.Attachments) > MaxParts || len(p.Notes) > MaxNotes || len(p.Subject) > MaxSubjectBytes {
			t.Fatalf("limits broken: %d attachments, %d notes, %d bytes of subject", len(p.Attachments), len(p.Notes), len(p.Subject))
		}
	})
}
