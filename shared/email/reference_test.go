package email

import (
	"bytes"
	"crypto"
	"html"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/textproto"
	"strings"
	"time"

	"github.com/emersion/go-msgauth/dkim"
)

// This file keeps the package's first implementation of message assembly and DKIM
// signing (multipart.Writer, quotedprintable.Writer, a string-built header, go-msgauth's
// dkim.Sign): the tests and fuzz targets hold the one-buffer code equal to it byte for
// byte.

// referenceBuild is the first Build, with the multipart boundary given.
func referenceBuild(m Message, now time.Time, boundary string) ([]byte, error) {
	from, err := checkAddress("from", m.From)
	if err != nil {
		return nil, err
	}
	to, err := checkAddress("to", m.To)
	if err != nil {
		return nil, err
	}
	extra, err := checkHeaders(m.Headers)
	if err != nil {
		return nil, err
	}
	tags, err := formatTags(m.Tags)
	if err != nil {
		return nil, err
	}
	id, err := messageID(m.MessageID, from.Address)
	if err != nil {
		return nil, err
	}
	date := m.Date
	if date.IsZero() {
		date = now
	}
	var body bytes.Buffer
	var contentType string
	if m.HTML == "" {
		contentType = mime.FormatMediaType("text/plain", map[string]string{"charset": "UTF-8"})
		if err := referenceQP(&body, m.Text); err != nil {
			return nil, err
		}
	} else {
		mw := multipart.NewWriter(&body)
		if err := mw.SetBoundary(boundary); err != nil {
			return nil, err
		}
		contentType = mime.FormatMediaType("multipart/alternative", map[string]string{"boundary": mw.Boundary()})
		if err := referencePart(mw, "text/plain", m.Text); err != nil {
			return nil, err
		}
		if err := referencePart(mw, "text/html", withPreheader(m.HTML, m.Preheader)); err != nil {
			return nil, err
		}
		if err := mw.Close(); err != nil {
			return nil, err
		}
	}
	var h referenceHeader
	h.add("Date", date.Format(time.RFC1123Z))
	h.add("From", from.String())
	h.add("To", to.String())
	if m.ReplyTo != nil {
		replyTo, err := checkAddress("reply_to", *m.ReplyTo)
		if err != nil {
			return nil, err
		}
		h.add("Reply-To", replyTo.String())
	}
	if m.Subject != "" {
		h.add("Subject", encodeText(m.Subject))
	}
	h.add("Message-ID", id)
	h.add("MIME-Version", "1.0")
	for _, f := range extra {
		h.add(f[0], f[1])
	}
	if tags != "" {
		h.add("X-Tags", tags)
	}
	h.add("Content-Type", contentType)
	if m.HTML == "" {
		h.add("Content-Transfer-Encoding", "quoted-printable")
	}
	if h.err != nil {
		return nil, h.err
	}
	out := append(h.buf.Bytes(), "\r\n"...)
	return append(out, body.Bytes()...), nil
}

// withPreheader is the first way of adding the preheader: one new string.
func withPreheader(htmlBody, preheader string) string {
	if preheader == "" {
		return htmlBody
	}
	hidden := `<div style="` + preheaderStyle + `">` + html.EscapeString(preheader) + `</div>`
	if loc := bodyTag.FindStringIndex(htmlBody); loc != nil {
		return htmlBody[:loc[1]] + hidden + htmlBody[loc[1]:]
	}
	return hidden + htmlBody
}

func referencePart(mw *multipart.Writer, mediaType, content string) error {
	h := make(textproto.MIMEHeader)
	h.Set("Content-Type", mime.FormatMediaType(mediaType, map[string]string{"charset": "UTF-8"}))
	h.Set("Content-Transfer-Encoding", "quoted-printable")
	w, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := referenceQP(&buf, content); err != nil {
		return err
	}
	_, err = w.Write(buf.Bytes())
	return err
}

func referenceQP(buf *bytes.Buffer, s string) error {
	qp := quotedprintable.NewWriter(buf)
	if _, err := qp.Write([]byte(s)); err != nil {
		return err
	}
	if err := qp.Close(); err != nil {
		return err
	}
	if !bytes.HasSuffix(buf.Bytes(), []byte("\r\n")) {
		buf.WriteString("\r\n")
	}
	return nil
}

type referenceHeader struct {
	buf bytes.Buffer
	err error
}

func (h *referenceHeader) add(name, value string) {
	if h.err != nil {
		return
	}
	line := name + ":"
	onLine := 0
	for _, seg := range referenceSegments(strings.Trim(value, " \t")) {
		if onLine > 0 && len(line)+len(seg) > foldAt {
			h.flush(name, line)
			line, onLine = "", 0
		}
		line += seg
		onLine++
	}
	h.flush(name, line)
}

func (h *referenceHeader) flush(name, line string) {
	if len(line) > maxLineLen && h.err == nil {
		h.err = invalid("header %s has a word too long to fold under %d characters", name, maxLineLen)
	}
	h.buf.WriteString(line)
	h.buf.WriteString("\r\n")
}

func referenceSegments(value string) []string {
	if value == "" {
		return []string{" "}
	}
	var segs []string
	start := 0
	for i := 1; i < len(value); i++ {
		isWS := value[i] == ' ' || value[i] == '\t'
		prevWS := value[i-1] == ' ' || value[i-1] == '\t'
		if isWS && !prevWS {
			segs = append(segs, value[start:i])
			start = i
		}
	}
	segs = append(segs, value[start:])
	segs[0] = " " + segs[0]
	return segs
}

// referenceSign is the first Sign: go-msgauth's dkim.Sign over the whole message.
func referenceSign(raw []byte, s Signer, keys []string) ([]byte, error) {
	var out bytes.Buffer
	err := dkim.Sign(&out, bytes.NewReader(raw), &dkim.SignOptions{
		Domain:                 s.Domain,
		Selector:               s.Selector,
		Signer:                 s.Key,
		Hash:                   crypto.SHA256,
		HeaderCanonicalization: dkim.CanonicalizationRelaxed,
		BodyCanonicalization:   dkim.CanonicalizationRelaxed,
		HeaderKeys:             keys,
	})
	return out.Bytes(), err
}
