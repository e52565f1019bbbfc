// Package mimemailtest holds the sample mail the inbound-mail tests parse: one message as
// mail clients send it, shared by the MIME parser's tests and the sending-domains family's.
package mimemailtest

import (
	"encoding/base64"
	"mime"
	"strings"
)

// CRLF turns a readable message into one with CRLF line ends.
func CRLF(s string) []byte { return []byte(strings.ReplaceAll(s, "\n", "\r\n")) }

// SampleMail is a multipart message as mail clients send one: alternative text and HTML
// bodies (quoted-printable, base64), an attachment with an RFC 2231 file name, an inline
// image, an RFC 2047 subject and display name.
func SampleMail(to, messageID string) []byte {
	html := base64.StdEncoding.EncodeToString([]byte("<p>Привет, <b>мир</b></p>"))
	pdf := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("%PDF", 100)))
	return CRLF(`From: =?UTF-8?B?0JDQtNCw?= <ada@sender.example>
To: ` + to + `
Cc: Bo <bo@elsewhere.example>
Subject: ` + mime.BEncoding.Encode("UTF-8", "Заказ №42 — вопрос") + `
Date: Sun, 01 Mar 2026 11:58:00 +0100
Message-ID: <` + messageID + `>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="outer"

preamble
--outer
Content-Type: multipart/alternative; boundary="alt"

--alt
Content-Type: text/plain; charset=UTF-8
Content-Transfer-Encoding: quoted-printable

=D0=9F=D1=80=D0=B8=D0=B2=D0=B5=D1=82, =D0=BC=D0=B8=D1=80 with a soft=
 break
--alt
Content-Type: text/html; charset=utf-8
Content-Transfer-Encoding: base64

` + html + `
--alt--
--outer
Content-Type: application/pdf
Content-Disposition: attachment; filename*=UTF-8''%D0%BE%D1%82%D1%87%D0%B5%D1%82.pdf
Content-Transfer-Encoding: base64

` + pdf[:60] + `
` + pdf[60:] + `
--outer
Content-Type: image/png
Content-Disposition: inline
Content-ID: <logo@sender.example>
Content-Transfer-Encoding: base64

iVBORw0KGgo=
--outer--
`)
}
