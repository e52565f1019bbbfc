// Package email is the platform's outgoing email transport: it builds RFC 5322 messages
// (Build), signs them with DKIM (Sign), and hands them to a Sender: an SMTP relay (SMTP),
// Amazon SES v2 (SES), or a directory of .eml files (Sink), the offline default.
//
// A Message is plain data; Build refuses anything that could smuggle a header (a CR or LF
// in the subject, a name, an address or an extra header value), encodes non-ASCII header
// text as RFC 2047 encoded-words and bodies as quoted-printable UTF-8, and bounds the size.
// Every Sender returns a *SendError that tells permanent failures (the message or the
// recipient was refused: do not retry) from temporary ones.
package email

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"html"
	"mime"
	"net/mail"
	"regexp"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxMessageSize bounds a built message, headers and encoded bodies included (10 MiB).
// Build returns ErrTooLarge beyond it.
const MaxMessageSize = 10 << 20

// Bounds on the parts of a message; Build refuses more with ErrInvalidMessage.
const (
	maxSubjectLen   = 998  // bytes of UTF-8, before encoding
	maxNameLen      = 256  // bytes of a display name
	maxPreheaderLen = 1000 // bytes
	maxHeaders      = 32   // extra headers
	maxHeaderValue  = 2048 // bytes of one extra header value
	maxTags         = 50   // SES accepts at most 50 message tags
	maxTagLen       = 256  // SES tag name and value length
	maxMessageIDLen = 250
	foldAt          = 78  // preferred header line length (RFC 5322 section 2.1.1)
	maxLineLen      = 998 // hard header line limit, CRLF excluded
)

// Message is one email to one recipient. The zero values of the optional fields mean
// "absent".
type Message struct {
	// From is the author. Address is required; Name is the optional display name.
	From mail.Address
	// To is the single recipient. Address is required.
	To mail.Address
	// ReplyTo, when not nil, is where replies go.
	ReplyTo *mail.Address
	// Subject is the subject line; non-ASCII text is encoded.
	Subject string
	// Preheader is the optional preview text that mail clients show next to the subject.
	// It is rendered as hidden text at the start of the HTML part, and ignored when there
	// is no HTML.
	Preheader string
	// HTML is the optional HTML body. With it the message is multipart/alternative.
	HTML string
	// Text is the plain-text body. It is always required: with HTML it is the
	// alternative shown by text-only clients, and this package does not derive it.
	Text string
	// Headers are extra header fields, such as List-Unsubscribe and
	// List-Unsubscribe-Post. Names must be RFC 5322 field names and may not replace a
	// header that Build writes itself (From, To, Subject, Date, Message-ID, Content-Type,
	// ...).
	Headers map[string]string
	// Tags are name/value pairs that identify the message for reporting (campaign,
	// variant). Names and values are 1 to 256 characters of A-Z, a-z, 0-9, '_' and '-'.
	// SES sends them as message tags; Build writes them as an X-Tags header.
	Tags map[string]string
	// MessageID is the Message-ID, with or without angle brackets. When empty, one is
	// generated as <random@from-domain>.
	MessageID string
	// Date is the origination date; the zero value means the time of building.
	Date time.Time
	// Attachments, when any, follow the body in a multipart/mixed message (at most
	// maxAttachments).
	Attachments []Attachment
}

// Attachment is a file attached to a message.
type Attachment struct {
	// Filename is the name mail clients show (printable ASCII, at most 255 bytes).
	Filename string
	// ContentType is the media type. A message/rfc822 attachment (a forwarded message) is
	// written as it is, so its data must be 7-bit text with CRLF line endings and lines of
	// at most 998 bytes (RFC 2046 allows no other encoding for it; OriginalMessage picks
	// the type); any other is written in base64.
	ContentType string
	Data        []byte
}

// maxAttachments bounds Message.Attachments.
const maxAttachments = 10

// OriginalMessage is the attachment that forwards raw, a message as received: message/rfc822
// when raw can be written as it is (7-bit, CRLF line endings, lines of at most 998 bytes),
// else the same bytes as an application/octet-stream file, in base64, that mail clients
// still open as a message (original.eml).
func OriginalMessage(raw []byte) Attachment {
	if sevenBitMessage(raw) {
		return Attachment{Filename: "original.eml", ContentType: "message/rfc822", Data: raw}
	}
	return Attachment{Filename: "original.eml", ContentType: "application/octet-stream", Data: raw}
}

// sevenBitMessage reports whether b is 7-bit text (no NUL) with CRLF line endings only and
// lines of at most maxLineLen bytes.
func sevenBitMessage(b []byte) bool {
	line := 0
	for i, c := range b {
		switch {
		case c == 0 || c >= 0x80:
			return false
		case c == '\r':
			if i+1 >= len(b) || b[i+1] != '\n' {
				return false
			}
		case c == '\n':
			if i == 0 || b[i-1] != '\r' {
				return false
			}
			line = 0
			continue
		}
		if line++; line > maxLineLen+1 { // the CR counts until its LF
			return false
		}
	}
	return len(b) > 0
}

// reservedHeaders are the fields Build writes itself, or that must never be set by a
// caller; Message.Headers may not contain them (compared case-insensitively).
var reservedHeaders = map[string]bool{
	"from": true, "to": true, "cc": true, "bcc": true, "reply-to": true, "sender": true,
	"subject": true, "date": true, "message-id": true, "mime-version": true,
	"content-type": true, "content-transfer-encoding": true, "content-disposition": true,
	"dkim-signature": true, "return-path": true, "received": true, "x-tags": true,
}

// bodyTag finds the opening <body> tag, after which the preheader goes.
var bodyTag = regexp.MustCompile(`(?i)<body\b[^>]*>`)

// preheaderStyle hides the preheader in every common client while keeping it the first
// text of the message, which is what clients show as the preview.
const preheaderStyle = "display:none;font-size:1px;line-height:1px;max-height:0;max-width:0;" +
	"opacity:0;overflow:hidden;mso-hide:all"

// Build renders m as an RFC 5322 message with CRLF line endings, dated now when m.Date is
// zero. With HTML the body is multipart/alternative (text/plain, then text/html);
// otherwise it is a single text/plain part. Both are quoted-printable UTF-8. Errors wrap
// ErrInvalidMessage or ErrTooLarge.
func Build(m Message, now time.Time) ([]byte, error) {
	raw, _, err := build(m, now)
	return raw, err
}

// build is Build that also returns the Message-ID header value, angle brackets included.
func build(m Message, now time.Time) ([]byte, string, error) {
	return compose(nil, m, now, "")
}

// compose appends the message built from m to dst (a reused buffer: the campaign's
// messages are built one after the other into the same few) and returns it with the
// Message-ID. The header and the encoded bodies are written straight into dst, with no
// intermediate buffers. boundary is the multipart boundary; "" means a random one (tests
// give theirs).
func compose(dst []byte, m Message, now time.Time, boundary string) ([]byte, string, error) {
	size := len(m.Text) + len(m.HTML) + len(m.Preheader)
	for _, a := range m.Attachments {
		size += len(a.Data)
	}
	if size > MaxMessageSize {
		return nil, "", fmt.Errorf("%w: body exceeds %d bytes", ErrTooLarge, MaxMessageSize)
	}
	if err := checkAttachments(m.Attachments); err != nil {
		return nil, "", err
	}
	from, err := checkAddress("from", m.From)
	if err != nil {
		return nil, "", err
	}
	to, err := checkAddress("to", m.To)
	if err != nil {
		return nil, "", err
	}
	var replyTo *mail.Address
	if m.ReplyTo != nil {
		a, err := checkAddress("reply_to", *m.ReplyTo)
		if err != nil {
			return nil, "", err
		}
		replyTo = &a
	}
	if err := checkHeaderText("subject", m.Subject, maxSubjectLen); err != nil {
		return nil, "", err
	}
	if err := checkBody(m); err != nil {
		return nil, "", err
	}
	extra, err := checkHeaders(m.Headers)
	if err != nil {
		return nil, "", err
	}
	tags, err := formatTags(m.Tags)
	if err != nil {
		return nil, "", err
	}
	id, err := messageID(m.MessageID, from.Address)
	if err != nil {
		return nil, "", err
	}
	date := m.Date
	if date.IsZero() {
		date = now
	}
	if m.HTML != "" && boundary == "" {
		if boundary, err = randomBoundary(); err != nil {
			return nil, "", err
		}
	}
	var mixed string
	if len(m.Attachments) > 0 {
		if mixed, err = randomBoundary(); err != nil {
			return nil, "", err
		}
	}

	start := len(dst)
	h := headerWriter{b: dst}
	h.add("Date", date.Format(time.RFC1123Z))
	h.add("From", from.String())
	h.add("To", to.String())
	if replyTo != nil {
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
	switch {
	case mixed != "":
		h.add("Content-Type", "multipart/mixed; boundary="+mixed)
	case m.HTML == "":
		h.add("Content-Type", "text/plain; charset=UTF-8")
		h.add("Content-Transfer-Encoding", "quoted-printable")
	default:
		h.add("Content-Type", "multipart/alternative; boundary="+boundary)
	}
	if h.err != nil {
		return nil, "", h.err
	}
	out := append(h.b, "\r\n"...)
	if mixed == "" {
		out = appendBody(out, m, boundary)
	} else {
		// The body as the first part, then each attachment.
		out = append(out, "--"...)
		out = append(out, mixed...)
		if m.HTML == "" {
			out = append(out, "\r\nContent-Transfer-Encoding: quoted-printable\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\n"...)
		} else {
			out = append(out, "\r\nContent-Type: multipart/alternative; boundary="...)
			out = append(out, boundary...)
			out = append(out, "\r\n\r\n"...)
		}
		out = appendBody(out, m, boundary)
		for _, a := range m.Attachments {
			out = append(out, "\r\n--"...)
			out = append(out, mixed...)
			out = appendAttachment(out, a)
		}
		out = append(out, "\r\n--"...)
		out = append(out, mixed...)
		out = append(out, "--\r\n"...)
	}
	if len(out)-start > MaxMessageSize {
		return nil, "", fmt.Errorf("%w: built message exceeds %d bytes", ErrTooLarge, MaxMessageSize)
	}
	return out, id, nil
}

// appendBody appends the body: the quoted-printable text, or the multipart/alternative of
// the text and the HTML with boundary. As multipart.Writer and quotedprintable.Writer wrote
// it (reference_test.go holds the two equal): each part's header fields in sorted order,
// each part's quoted-printable text ending with a line break.
func appendBody(out []byte, m Message, boundary string) []byte {
	if m.HTML == "" {
		return appendQP(out, m.Text)
	}
	out = append(out, "--"...)
	out = append(out, boundary...)
	out = append(out, "\r\nContent-Transfer-Encoding: quoted-printable\r\nContent-Type: text/plain; charset=UTF-8\r\n\r\n"...)
	out = appendQP(out, m.Text)
	out = append(out, "\r\n--"...)
	out = append(out, boundary...)
	out = append(out, "\r\nContent-Transfer-Encoding: quoted-printable\r\nContent-Type: text/html; charset=UTF-8\r\n\r\n"...)
	out = appendHTML(out, m.HTML, m.Preheader)
	out = append(out, "\r\n--"...)
	out = append(out, boundary...)
	return append(out, "--\r\n"...)
}

// appendAttachment appends a's part header and data, after its boundary line: a
// message/rfc822 attachment as it is (checkAttachments held it to 7 bits), any other in
// base64 lines of 76 characters.
func appendAttachment(out []byte, a Attachment) []byte {
	out = append(out, "\r\nContent-Disposition: attachment; filename=\""...)
	out = append(out, a.Filename...)
	out = append(out, "\"\r\n"...)
	if strings.HasPrefix(a.ContentType, "message/") {
		out = append(out, "Content-Transfer-Encoding: 7bit\r\nContent-Type: "...)
		out = append(out, a.ContentType...)
		out = append(out, "\r\n\r\n"...)
		out = append(out, a.Data...)
		if !bytes.HasSuffix(a.Data, []byte("\r\n")) {
			out = append(out, "\r\n"...)
		}
		return out
	}
	out = append(out, "Content-Transfer-Encoding: base64\r\nContent-Type: "...)
	out = append(out, a.ContentType...)
	out = append(out, "\r\n\r\n"...)
	const perLine = 57 // bytes of data a 76-character line encodes
	for data := a.Data; len(data) > 0; {
		n := min(perLine, len(data))
		out = base64.StdEncoding.AppendEncode(out, data[:n])
		out = append(out, "\r\n"...)
		data = data[n:]
	}
	return out
}

// checkAttachments validates the attachments: their number, names and types, and that a
// message/* one can be written as it is.
func checkAttachments(as []Attachment) error {
	if len(as) > maxAttachments {
		return invalid("at most %d attachments", maxAttachments)
	}
	for i, a := range as {
		if a.Filename == "" || len(a.Filename) > 255 || strings.ContainsFunc(a.Filename, func(r rune) bool { return r < ' ' || r > '~' || r == '"' || r == '\\' }) {
			return invalid("attachment %d: the filename must be 1 to 255 printable ASCII characters without quotes or backslashes", i)
		}
		if mt, _, err := mime.ParseMediaType(a.ContentType); err != nil || !strings.Contains(mt, "/") || strings.ContainsAny(a.ContentType, "\r\n") {
			return invalid("attachment %d: %q is not a media type", i, a.ContentType)
		}
		if strings.HasPrefix(a.ContentType, "message/") && !sevenBitMessage(a.Data) {
			return invalid("attachment %d: a %s attachment must be 7-bit text with CRLF line endings and short lines", i, a.ContentType)
		}
	}
	return nil
}

// randomBoundary is a multipart boundary as multipart.NewWriter makes one: 30 random
// bytes in hex.
func randomBoundary() (string, error) {
	var b [30]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("email: multipart boundary: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// invalid returns an error wrapping ErrInvalidMessage.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidMessage}, args...)...)
}

// checkHeaderText refuses header text that could break out of its field (CR, LF), other
// control characters, text that is not UTF-8, and text longer than max bytes.
func checkHeaderText(field, s string, max int) error {
	if strings.ContainsAny(s, "\r\n") {
		return invalid("%s contains CR or LF (header injection)", field)
	}
	if !utf8.ValidString(s) {
		return invalid("%s is not valid UTF-8", field)
	}
	for _, r := range s {
		if (r < ' ' && r != '\t') || r == 0x7f {
			return invalid("%s contains control character %U", field, r)
		}
	}
	if len(s) > max {
		return invalid("%s is longer than %d bytes", field, max)
	}
	return nil
}

// checkAddress validates one address with net/mail: Address must be a bare ASCII
// addr-spec (internationalized domains in punycode), Name any single-line text.
func checkAddress(field string, a mail.Address) (mail.Address, error) {
	if err := checkHeaderText(field+" name", a.Name, maxNameLen); err != nil {
		return mail.Address{}, err
	}
	if err := checkHeaderText(field+" address", a.Address, 254); err != nil {
		return mail.Address{}, err
	}
	if a.Address == "" {
		return mail.Address{}, invalid("%s address is required", field)
	}
	for i := 0; i < len(a.Address); i++ {
		if c := a.Address[i]; c <= ' ' || c > '~' {
			return mail.Address{}, invalid("%s address %q must be ASCII without spaces", field, a.Address)
		}
	}
	p, err := mail.ParseAddress(a.Address)
	if err != nil {
		return mail.Address{}, invalid("%s address %q: %v", field, a.Address, err)
	}
	if p.Name != "" || p.Address != a.Address {
		return mail.Address{}, invalid("%s address %q is not a bare address (put the name in Name)", field, a.Address)
	}
	return mail.Address{Name: a.Name, Address: p.Address}, nil
}

// checkBody validates the body parts.
func checkBody(m Message) error {
	if m.Text == "" {
		return invalid("text is required (also with html, as the plain-text alternative)")
	}
	if !utf8.ValidString(m.Text) {
		return invalid("text is not valid UTF-8")
	}
	if !utf8.ValidString(m.HTML) {
		return invalid("html is not valid UTF-8")
	}
	if !utf8.ValidString(m.Preheader) {
		return invalid("preheader is not valid UTF-8")
	}
	if len(m.Preheader) > maxPreheaderLen {
		return invalid("preheader is longer than %d bytes", maxPreheaderLen)
	}
	return nil
}

// checkHeaders validates the extra headers and returns them as encoded name/value pairs
// sorted by name, so the same message always builds the same header.
func checkHeaders(headers map[string]string) ([][2]string, error) {
	if len(headers) > maxHeaders {
		return nil, invalid("more than %d extra headers", maxHeaders)
	}
	seen := make(map[string]bool, len(headers))
	out := make([][2]string, 0, len(headers))
	for name, value := range headers {
		if !validFieldName(name) {
			return nil, invalid("header name %q is not a valid field name", name)
		}
		lower := strings.ToLower(name)
		if reservedHeaders[lower] {
			return nil, invalid("header %s is set by the package and cannot be overridden", name)
		}
		if seen[lower] {
			return nil, invalid("header %s is given twice", name)
		}
		seen[lower] = true
		if err := checkHeaderText("header "+name, value, maxHeaderValue); err != nil {
			return nil, err
		}
		out = append(out, [2]string{name, encodeText(value)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out, nil
}

// validFieldName reports whether name is an RFC 5322 field name: 1 to 76 printable ASCII
// characters other than ':'.
func validFieldName(name string) bool {
	if name == "" || len(name) > 76 {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < '!' || c > '~' || c == ':' {
			return false
		}
	}
	return true
}

// validTagPart reports whether s is a valid SES message tag name or value.
func validTagPart(s string) bool {
	if s == "" || len(s) > maxTagLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// sortedTags validates tags and returns their names in order.
func sortedTags(tags map[string]string) ([]string, error) {
	if len(tags) > maxTags {
		return nil, invalid("more than %d tags", maxTags)
	}
	names := make([]string, 0, len(tags))
	for name, value := range tags {
		if !validTagPart(name) {
			return nil, invalid("tag name %q must be 1 to %d characters of A-Z a-z 0-9 _ -", name, maxTagLen)
		}
		if !validTagPart(value) {
			return nil, invalid("tag %s: value %q must be 1 to %d characters of A-Z a-z 0-9 _ -", name, value, maxTagLen)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// formatTags renders tags as the X-Tags value "a=1, b=2", or "" when there are none.
func formatTags(tags map[string]string) (string, error) {
	names, err := sortedTags(tags)
	if err != nil {
		return "", err
	}
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + "=" + tags[name]
	}
	return strings.Join(parts, ", "), nil
}

// messageID returns the given Message-ID in angle brackets, or generates
// <32-hex-digits@from-domain>.
func messageID(given, from string) (string, error) {
	if given == "" {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("email: generate message id: %w", err)
		}
		return "<" + hex.EncodeToString(b[:]) + "@" + from[strings.LastIndexByte(from, '@')+1:] + ">", nil
	}
	if err := checkHeaderText("message_id", given, maxMessageIDLen); err != nil {
		return "", err
	}
	id := strings.TrimSuffix(strings.TrimPrefix(given, "<"), ">")
	left, right, _ := strings.Cut(id, "@")
	if strings.Count(id, "@") != 1 || left == "" || right == "" {
		return "", invalid("message_id %q is not of the form <left@right>", given)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c > '~' || strings.IndexByte("<>()[]\\,;:\"", c) >= 0 {
			return "", invalid("message_id %q contains %q", given, c)
		}
	}
	return "<" + id + ">", nil
}

// encodeText encodes unstructured header text as RFC 2047 encoded-words when it is not
// plain ASCII: Q encoding for mostly-ASCII text, B encoding when most bytes are not ASCII
// (shorter for Cyrillic, CJK, ...).
func encodeText(s string) string {
	nonASCII := 0
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			nonASCII++
		}
	}
	if nonASCII*3 > len(s) {
		return mime.BEncoding.Encode("utf-8", s)
	}
	return mime.QEncoding.Encode("utf-8", s)
}

// appendHTML appends the HTML part's quoted-printable text: the HTML with the hidden
// preheader right after the <body> tag, or at the start when the HTML has none.
func appendHTML(dst []byte, htmlBody, preheader string) []byte {
	if preheader == "" {
		return appendQP(dst, htmlBody)
	}
	at := 0
	if loc := bodyTag.FindStringIndex(htmlBody); loc != nil {
		at = loc[1]
	}
	start := len(dst)
	q := qpWriter{b: dst}
	q.write(htmlBody[:at])
	q.write(`<div style="` + preheaderStyle + `">`)
	q.write(html.EscapeString(preheader))
	q.write(`</div>`)
	q.write(htmlBody[at:])
	return q.close(start)
}

// appendQP appends s quoted-printable encoded (line breaks become CRLF), ending with a
// line break.
func appendQP(dst []byte, s string) []byte {
	start := len(dst)
	q := qpWriter{b: dst}
	q.write(s)
	return q.close(start)
}

// qpLineMax is the longest quoted-printable line, CRLF excluded (RFC 2045 section 6.7).
const qpLineMax = 76

// qpWriter is mime/quotedprintable.Writer (text mode) appending to a slice instead of
// writing 78-byte lines to an io.Writer; FuzzQP holds the two equal.
type qpWriter struct {
	b []byte
	n int // bytes on the current line
	// cr: a CR ended a line and no plain byte came since, so an LF now belongs to that
	// line break (an encoded byte in between does not change this in quotedprintable.Writer
	// either).
	cr bool
}

// write encodes s. Printable ASCII but '=', and spaces and tabs, are copied a run at a
// time; CR, LF and CRLF become CRLF; other bytes are encoded as =XX.
func (q *qpWriter) write(s string) {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case qpLiteral(c):
			j := i + 1
			for j < len(s) && qpLiteral(s[j]) {
				j++
			}
			q.literal(s[i:j])
			i = j
			continue
		case c == '\n' || c == '\r':
			if q.cr && c == '\n' {
				q.cr = false
				break
			}
			q.cr = c == '\r'
			q.checkLastByte()
			q.crlf()
		default:
			q.encode(c)
		}
		i++
	}
}

// close ends the text (a trailing space or tab is encoded) and its line: the text written
// since start ends with a line break.
func (q *qpWriter) close(start int) []byte {
	q.checkLastByte()
	if n := len(q.b); n-start < 2 || q.b[n-2] != '\r' || q.b[n-1] != '\n' {
		q.b = append(q.b, "\r\n"...)
	}
	return q.b
}

func qpLiteral(c byte) bool { return c >= '!' && c <= '~' && c != '=' || c == ' ' || c == '\t' }

// literal copies s, with a soft line break before any byte that would be the line's 76th.
func (q *qpWriter) literal(s string) {
	for len(s) > 0 {
		if q.n == qpLineMax-1 {
			q.softBreak()
		}
		k := min(len(s), qpLineMax-1-q.n)
		q.b = append(q.b, s[:k]...)
		q.n += k
		s = s[k:]
	}
	q.cr = false
}

func (q *qpWriter) encode(c byte) {
	if qpLineMax-1-q.n < 3 {
		q.softBreak()
	}
	q.b = append(q.b, '=', upperHex[c>>4], upperHex[c&0x0f])
	q.n += 3
}

const upperHex = "0123456789ABCDEF"

// checkLastByte encodes a space or tab that would otherwise end a line.
func (q *qpWriter) checkLastByte() {
	if q.n == 0 {
		return
	}
	if c := q.b[len(q.b)-1]; c == ' ' || c == '\t' {
		q.b = q.b[:len(q.b)-1]
		q.n--
		q.encode(c)
	}
}

func (q *qpWriter) softBreak() {
	q.b = append(q.b, '=')
	q.crlf()
}

func (q *qpWriter) crlf() {
	q.b = append(q.b, '\r', '\n')
	q.n = 0
}

// headerWriter appends header fields, folded at whitespace so lines stay within 78
// characters where possible. A line that cannot be folded under 998 characters is an
// error.
type headerWriter struct {
	b   []byte
	err error
}

// add writes "name: value" followed by CRLF. The value is folded before a run of
// whitespace when the next word would take the line past 78 characters (never before its
// first word).
func (h *headerWriter) add(name, value string) {
	if h.err != nil {
		return
	}
	value = strings.Trim(value, " \t")
	line := len(h.b)
	h.b = append(h.b, name...)
	h.b = append(h.b, ": "...)
	onLine := 0 // words on the current line
	for i := 0; i < len(value); {
		j := i // the next word with the whitespace before it: value[i:j]
		for j < len(value) && isWSP(value[j]) {
			j++
		}
		for j < len(value) && !isWSP(value[j]) {
			j++
		}
		if onLine > 0 && len(h.b)-line+j-i > foldAt {
			h.endLine(name, line)
			line, onLine = len(h.b), 0
		}
		h.b = append(h.b, value[i:j]...)
		onLine++
		i = j
	}
	h.endLine(name, line)
}

// endLine ends the physical header line that began at start.
func (h *headerWriter) endLine(name string, start int) {
	if len(h.b)-start > maxLineLen && h.err == nil {
		h.err = invalid("header %s has a word too long to fold under %d characters", name, maxLineLen)
	}
	h.b = append(h.b, '\r', '\n')
}

func isWSP(c byte) bool { return c == ' ' || c == '\t' }
