package email

import (
	"bytes"
	"encoding/base64"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// original is a received message that can be attached as it is.
var original = []byte("From: Ada <ada@example.org>\r\nTo: support@example.com\r\nSubject: Where is my order?\r\n" +
	"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nMy parcel has not arrived.\r\n")

// partsOf reads a multipart body: each part's header and decoded bytes.
func partsOf(t *testing.T, body io.Reader, contentType string) ([]*multipart.Part, [][]byte) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(contentType)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(mt, "multipart/"), mt)
	mr := multipart.NewReader(body, params["boundary"])
	var ps []*multipart.Part
	var data [][]byte
	for {
		p, err := mr.NextRawPart() // the data as written (no quoted-printable decoding)
		if err == io.EOF {
			return ps, data
		}
		require.NoError(t, err)
		b, err := io.ReadAll(p)
		require.NoError(t, err)
		ps, data = append(ps, p), append(data, b)
	}
}

// A message with attachments is multipart/mixed: the body first (the alternative of text
// and HTML, or the text alone), then each attachment, a message/rfc822 one as it is and
// any other in base64; it signs and verifies, and every line is CRLF and short.
func TestAttachments(t *testing.T) {
	t.Parallel()
	binary := bytes.Repeat([]byte{0, 0xff, 'a', '\n'}, 100)
	m := sampleMessage()
	m.Attachments = []Attachment{OriginalMessage(original), {Filename: "data.bin", ContentType: "application/octet-stream", Data: binary}}
	raw, err := Build(m, time.Now())
	require.NoError(t, err)
	requireCRLF(t, raw)
	signed, err := Sign(raw, *testSigner())
	require.NoError(t, err)
	verifyDKIM(t, signed)

	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	ps, data := partsOf(t, msg.Body, msg.Header.Get("Content-Type"))
	require.Len(t, ps, 3)
	alt, altData := partsOf(t, bytes.NewReader(data[0]), ps[0].Header.Get("Content-Type"))
	require.Len(t, alt, 2)
	assert.Contains(t, alt[0].Header.Get("Content-Type"), "text/plain")
	assert.Contains(t, alt[1].Header.Get("Content-Type"), "text/html")
	assert.NotEmpty(t, altData[1])

	assert.Equal(t, "message/rfc822", ps[1].Header.Get("Content-Type"))
	assert.Equal(t, "7bit", ps[1].Header.Get("Content-Transfer-Encoding"))
	assert.Equal(t, `attachment; filename="original.eml"`, ps[1].Header.Get("Content-Disposition"))
	assert.Equal(t, string(original), string(data[1]), "the original as it was")

	assert.Equal(t, "base64", ps[2].Header.Get("Content-Transfer-Encoding"))
	got, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(string(data[2]), "\r\n", ""))
	require.NoError(t, err)
	assert.Equal(t, binary, got)

	// Text only: the first part is the quoted-printable text.
	m.HTML, m.Preheader = "", ""
	raw, err = Build(m, time.Now())
	require.NoError(t, err)
	msg, err = mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	ps, _ = partsOf(t, msg.Body, msg.Header.Get("Content-Type"))
	require.Len(t, ps, 3)
	assert.Equal(t, "text/plain; charset=UTF-8", ps[0].Header.Get("Content-Type"))
	assert.Equal(t, "quoted-printable", ps[0].Header.Get("Content-Transfer-Encoding"))

	// Without attachments nothing changes: the reference tests hold that message.
	m.Attachments = nil
	raw, err = Build(m, time.Now())
	require.NoError(t, err)
	msg, err = mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	assert.Equal(t, "text/plain; charset=UTF-8", msg.Header.Get("Content-Type"))
}

// A received message that cannot be written as it is (8-bit, bare LF, a line over 998
// bytes) is attached as a file in base64 instead; attachments that could break the message
// are refused.
func TestOriginalMessageAndRefusals(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "message/rfc822", OriginalMessage(original).ContentType)
	for name, raw := range map[string][]byte{
		"8-bit":     []byte("Subject: Grüße\r\n\r\nHallo\r\n"),
		"bare LF":   []byte("Subject: x\n\nbody\n"),
		"bare CR":   []byte("Subject: x\r\n\r\nbo\rdy\r\n"),
		"long line": []byte("Subject: x\r\n\r\n" + strings.Repeat("a", 999) + "\r\n"),
		"NUL":       []byte("Subject: x\r\n\r\nbo\x00dy\r\n"),
		"empty":     nil,
	} {
		a := OriginalMessage(raw)
		assert.Equal(t, "application/octet-stream", a.ContentType, name)
		assert.Equal(t, "original.eml", a.Filename, name)
	}
	assert.Equal(t, "message/rfc822", OriginalMessage([]byte("Subject: x\r\n\r\n"+strings.Repeat("a", 998)+"\r\n")).ContentType, "998 bytes is a line")

	base := Message{From: mail.Address{Address: "a@example.com"}, To: mail.Address{Address: "b@example.org"}, Text: "hi"}
	for name, as := range map[string][]Attachment{
		"8-bit message":      {{Filename: "m.eml", ContentType: "message/rfc822", Data: []byte("Subject: Grüße\r\n\r\nx\r\n")}},
		"quote in name":      {{Filename: `a".txt`, ContentType: "text/plain", Data: []byte("x")}},
		"no name":            {{ContentType: "text/plain", Data: []byte("x")}},
		"newline in type":    {{Filename: "a.txt", ContentType: "text/plain\r\nX-Evil: 1", Data: []byte("x")}},
		"not a media type":   {{Filename: "a.txt", ContentType: "nonsense", Data: []byte("x")}},
		"too many":           make([]Attachment, maxAttachments+1),
		"non-ASCII filename": {{Filename: "счёт.pdf", ContentType: "application/pdf", Data: []byte("x")}},
	} {
		m := base
		m.Attachments = as
		_, err := Build(m, time.Now())
		assert.ErrorIs(t, err, ErrInvalidMessage, name)
	}
	m := base
	m.Attachments = []Attachment{{Filename: "big.bin", ContentType: "application/octet-stream", Data: make([]byte, MaxMessageSize)}}
	_, err := Build(m, time.Now())
	assert.ErrorIs(t, err, ErrTooLarge)
}
