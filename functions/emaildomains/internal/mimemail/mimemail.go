// Package mimemail reads inbound mail: an RFC 5322 message with MIME parts becomes the
// header fields a mailbox shows, its text and HTML bodies in UTF-8 and a description of
// every other part, within bounds, whatever a stranger sent. It is its own package so that
// its fuzz target runs in a small test binary.
package mimemail

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/encoding/htmlindex"
)

// Limits of what is read and kept.
const (
	// MaxParts bounds the MIME parts read; the rest of a message is ignored, with a note.
	MaxParts = 100
	// MaxDepth bounds how deep multiparts nest; deeper ones are ignored, with a note.
	MaxDepth = 5
	// MaxAddresses bounds the addresses kept of one header field.
	MaxAddresses = 50
	// MaxSubjectBytes bounds the subject (RFC 5322's line limit).
	MaxSubjectBytes = 998
	// MaxNotes bounds the notes of one message.
	MaxNotes = 20

	maxIDBytes  = 998
	maxFilename = 255
	maxName     = 256
	maxAddress  = 254
)

// Address is a mailbox of a message's header.
type Address struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
}

// Attachment describes a part of a message that is not its text or HTML body. Only this is
// kept: not its content.
type Attachment struct {
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	// Size is in bytes, decoded.
	Size int64 `json:"size"`
	// Inline parts are shown in the body (images of an HTML message).
	Inline    bool   `json:"inline"`
	ContentID string `json:"content_id,omitempty"`
}

// Message is what is kept of a message.
type Message struct {
	// MessageID is the Message-ID without angle brackets; "" when it is missing or not
	// plain text.
	MessageID   string
	From        *Address
	To, Cc      []Address
	Subject     string
	Date        *time.Time
	Text, HTML  string
	Attachments []Attachment
	// Notes say what could not be kept as it was (a part in an unknown charset, parts past
	// the limits).
	Notes []string
}

// ErrInvalid wraps why a message cannot be read at all.
var ErrInvalid = errors.New("not an RFC 5322 message")

// Parse reads raw as an RFC 5322 message with MIME parts: the header fields From, To, Cc,
// Subject, Date and Message-ID (RFC 2047 decoded), its first text/plain and text/html bodies
// that are not attachments (transfer encoding undone, decoded into UTF-8) and a description
// of every other part (nested multiparts included). Only a message whose header cannot be
// read fails; damaged parts become notes. The caller bounds the size of raw: the bodies are
// read whole.
func Parse(raw []byte) (Message, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	w := &walker{dec: &mime.WordDecoder{CharsetReader: charsetReader}}
	h := msg.Header
	w.out.Subject = w.headerText(h.Get("Subject"), MaxSubjectBytes)
	w.out.MessageID = messageID(h.Get("Message-Id"))
	if d, err := mail.ParseDate(h.Get("Date")); err == nil {
		t := d.UTC().Truncate(time.Second)
		w.out.Date = &t
	}
	if from := w.addresses("From", h.Get("From")); len(from) > 0 {
		w.out.From = &from[0]
	}
	w.out.To = w.addresses("To", h.Get("To"))
	w.out.Cc = w.addresses("Cc", h.Get("Cc"))
	w.entity(textproto.MIMEHeader(h), msg.Body, 0)
	return w.out, nil
}

type walker struct {
	dec     *mime.WordDecoder
	out     Message
	parts   int
	full    bool // MaxParts reached
	textSet bool
	htmlSet bool
	tooDeep bool
}

func (w *walker) note(format string, args ...any) {
	if len(w.out.Notes) < MaxNotes {
		w.out.Notes = append(w.out.Notes, fmt.Sprintf(format, args...))
	}
}

// charsetReader decodes the charsets of the WHATWG encoding standard, which covers what mail
// clients send (windows-1251, KOI8-R, ISO-2022-JP, GB18030, ...).
func charsetReader(charset string, in io.Reader) (io.Reader, error) {
	enc, err := htmlindex.Get(charset)
	if err != nil {
		return nil, err
	}
	return enc.NewDecoder().Reader(in), nil
}

// headerText decodes RFC 2047 encoded-words and keeps one line of valid UTF-8.
func (w *walker) headerText(v string, limit int) string {
	if d, err := w.dec.DecodeHeader(v); err == nil {
		v = d
	}
	v = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(v, "\uFFFD"))
	v, _ = Truncate(strings.TrimSpace(v), limit)
	return v
}

func (w *walker) addresses(field, v string) []Address {
	if strings.TrimSpace(v) == "" {
		return nil
	}
	p := mail.AddressParser{WordDecoder: w.dec}
	list, err := p.ParseList(v)
	if err != nil {
		w.note("the %s header could not be read as addresses", field)
		return nil
	}
	if len(list) > MaxAddresses {
		w.note("the %s header has %d addresses; the first %d are kept", field, len(list), MaxAddresses)
		list = list[:MaxAddresses]
	}
	out := make([]Address, 0, len(list))
	for _, a := range list {
		if len(a.Address) > maxAddress {
			continue
		}
		out = append(out, Address{Name: w.headerText(a.Name, maxName), Address: lowerDomain(a.Address)})
	}
	return out
}

// lowerDomain lower-cases the domain of an address (its local part is the receiver's).
func lowerDomain(addr string) string {
	at := strings.LastIndexByte(addr, '@')
	return addr[:at+1] + strings.ToLower(addr[at+1:])
}

// messageID is the Message-ID without angle brackets, or "" when it is not plain text.
func messageID(v string) string {
	v = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(v), "<"), ">")
	if v == "" || len(v) > maxIDBytes {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] >= 0x7f {
			return ""
		}
	}
	return v
}

// entity reads one MIME entity at depth (0: the message itself).
func (w *walker) entity(h textproto.MIMEHeader, body io.Reader, depth int) {
	ct, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case h.Get("Content-Type") == "":
		ct, params = "text/plain", map[string]string{"charset": "us-ascii"} // RFC 2045 section 5.2
	case err != nil && ct == "":
		ct = "application/octet-stream"
	}
	if strings.HasPrefix(ct, "multipart/") {
		w.multipart(ct, params["boundary"], body, depth)
		return
	}
	disposition, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	filename := dparams["filename"]
	if filename == "" {
		filename = params["name"]
	}
	filename = w.headerText(filename, maxFilename)
	data := decodeTransfer(h.Get("Content-Transfer-Encoding"), body)
	attached := disposition == "attachment" || filename != ""
	switch {
	case ct == "text/plain" && !attached && !w.textSet:
		if s, ok := w.text(data, params["charset"], ct); ok {
			w.out.Text, w.textSet = s, true
		}
		return
	case ct == "text/html" && !attached && !w.htmlSet:
		if s, ok := w.text(data, params["charset"], ct); ok {
			w.out.HTML, w.htmlSet = s, true
		}
		return
	}
	n, err := io.Copy(io.Discard, data)
	if err != nil {
		w.note("part %q (%s): its %s encoding is damaged; its size is counted up to the damage", filename, ct, h.Get("Content-Transfer-Encoding"))
	}
	w.out.Attachments = append(w.out.Attachments, Attachment{Filename: filename, ContentType: ct, Size: n,
		Inline: disposition == "inline" || disposition == "" && h.Get("Content-Id") != "", ContentID: messageID(h.Get("Content-Id"))})
}

func (w *walker) multipart(ct, boundary string, body io.Reader, depth int) {
	if depth >= MaxDepth {
		if !w.tooDeep {
			w.note("multiparts nested deeper than %d levels are ignored", MaxDepth)
			w.tooDeep = true
		}
		return
	}
	if boundary == "" {
		w.note("a %s part has no boundary; it is ignored", ct)
		return
	}
	mr := multipart.NewReader(body, boundary)
	for !w.full {
		// Raw: the transfer encoding is decoded here, one way for every part.
		p, err := mr.NextRawPart()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			w.note("a %s part is malformed; what follows it is ignored", ct)
			return
		}
		if w.parts == MaxParts {
			w.note("the message has more than %d parts; the rest are ignored", MaxParts)
			w.full = true
			return
		}
		w.parts++
		w.entity(p.Header, p, depth+1)
	}
}

// text decodes a text part into UTF-8. A charset this package does not know is kept when the
// part is valid UTF-8 anyway, else refused with a note.
func (w *walker) text(data io.Reader, charset, ct string) (string, bool) {
	b, err := io.ReadAll(data)
	if err != nil {
		w.note("the %s body's transfer encoding is damaged; it is not kept", ct)
		return "", false
	}
	switch cs := strings.ToLower(strings.TrimSpace(charset)); cs {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		if !utf8.Valid(b) {
			w.note("the %s body is not valid %s; the invalid bytes are replaced", ct, charset)
		}
		return strings.ToValidUTF8(string(b), "\uFFFD"), true
	default:
		enc, err := htmlindex.Get(cs)
		if err != nil {
			if utf8.Valid(b) {
				return string(b), true
			}
			w.note("the %s body is in the unknown charset %q; it is not kept", ct, charset)
			return "", false
		}
		s, err := enc.NewDecoder().Bytes(b)
		if err != nil {
			w.note("the %s body could not be decoded from %s; it is not kept", ct, charset)
			return "", false
		}
		return strings.ToValidUTF8(string(s), "\uFFFD"), true
	}
}

// decodeTransfer undoes a Content-Transfer-Encoding; an unknown one is read as it is.
func decodeTransfer(cte string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		// The decoder skips CR and LF itself; senders also leave spaces and tabs.
		return base64.NewDecoder(base64.StdEncoding, &dropBlanks{r: r})
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	default:
		return r
	}
}

// dropBlanks reads r without spaces and tabs.
type dropBlanks struct{ r io.Reader }

func (d *dropBlanks) Read(p []byte) (int, error) {
	for {
		n, err := d.r.Read(p)
		k := 0
		for _, c := range p[:n] {
			if c != ' ' && c != '\t' {
				p[k] = c
				k++
			}
		}
		if k > 0 || err != nil {
			return k, err
		}
	}
}

// Truncate cuts s to at most n bytes at a character boundary and reports whether it did.
func Truncate(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}
