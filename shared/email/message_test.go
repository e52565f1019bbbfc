package email

import (
	"bytes"
	"io"
	"mime"
	"mime/quotedprintable"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildRoundTripsUTF8AndMultipart(t *testing.T) {
	t.Parallel()
	m := sampleMessage()
	raw, err := Build(m, time.Now())
	require.NoError(t, err)
	requireCRLF(t, raw)

	p := parseMultipart(t, raw)
	h := p.msg.Header
	dec := new(mime.WordDecoder)

	subject, err := dec.DecodeHeader(h.Get("Subject"))
	require.NoError(t, err)
	assert.Equal(t, m.Subject, subject)
	assert.NotEqual(t, m.Subject, h.Get("Subject"), "non-ASCII subject must be encoded")

	from, err := mail.ParseAddress(h.Get("From"))
	require.NoError(t, err)
	assert.Equal(t, m.From, *from)
	to, err := h.AddressList("To")
	require.NoError(t, err)
	require.Len(t, to, 1)
	assert.Equal(t, m.To, *to[0])
	replyTo, err := h.AddressList("Reply-To")
	require.NoError(t, err)
	require.Len(t, replyTo, 1)
	assert.Equal(t, *m.ReplyTo, *replyTo[0], "a name with a comma is quoted")

	date, err := h.Date()
	require.NoError(t, err)
	assert.True(t, date.Equal(m.Date), "Date header %v", date)
	assert.Equal(t, "1.0", h.Get("MIME-Version"))
	assert.Equal(t, m.Headers["List-Unsubscribe"], h.Get("List-Unsubscribe"))
	assert.Equal(t, "List-Unsubscribe=One-Click", h.Get("List-Unsubscribe-Post"))
	assert.Equal(t, "campaign=cmp_42, variant=b", h.Get("X-Tags"))
	assert.Regexp(t, `^<[0-9a-f]{32}@example\.com>$`, h.Get("Message-ID"))

	assert.Equal(t, m.Text, p.text, "text part round-trips through quoted-printable")
	const hidden = `<div style="` + preheaderStyle + `">Sneak &lt;peek&gt; &amp; more</div>`
	assert.Equal(t, `<!doctype html><html><BODY class="x">`+hidden+`<p>Hello, Łukasz &amp; friends</p></BODY></html>`+"\n", p.html,
		"the escaped preheader comes right after <body>")

	// Bodies are 7-bit: quoted-printable with soft line breaks.
	for i, c := range raw {
		require.Less(t, c, byte(0x80), "byte %d is not ASCII", i)
	}
	assert.Contains(t, string(raw), "=\r\n", "long text line soft-broken")
}

func TestBuildTextOnlyIsSinglePart(t *testing.T) {
	t.Parallel()
	m := sampleMessage()
	m.HTML = ""
	m.Preheader = "ignored without html"
	raw, err := Build(m, time.Now())
	require.NoError(t, err)
	requireCRLF(t, raw)

	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	require.NoError(t, err)
	assert.Equal(t, "text/plain", mt)
	assert.Equal(t, "UTF-8", params["charset"])
	assert.Equal(t, "quoted-printable", msg.Header.Get("Content-Transfer-Encoding"))
	body, err := io.ReadAll(quotedprintable.NewReader(msg.Body))
	require.NoError(t, err)
	assert.Equal(t, m.Text, strings.ReplaceAll(string(body), "\r\n", "\n"))
	assert.NotContains(t, string(raw), "ignored without html")
	assert.NotContains(t, string(raw), "multipart")
}

func TestBuildRefusesHeaderInjection(t *testing.T) {
	t.Parallel()
	const evil = "x\r\nBcc: victim@example.net"
	cases := map[string]func(m *Message){
		"subject":         func(m *Message) { m.Subject = evil },
		"subject LF only": func(m *Message) { m.Subject = "x\nBcc: victim@example.net" },
		"subject CR only": func(m *Message) { m.Subject = "x\rBcc: victim@example.net" },
		"from name":       func(m *Message) { m.From.Name = evil },
		"to name":         func(m *Message) { m.To.Name = evil },
		"from address":    func(m *Message) { m.From.Address = "bot@example.com\r\nBcc: victim@example.net" },
		"to address":      func(m *Message) { m.To.Address = "a@example.org\nBcc: victim@example.net" },
		"reply_to name":   func(m *Message) { m.ReplyTo.Name = evil },
		"header":          func(m *Message) { m.Headers["List-Unsubscribe"] = "<https://x>" + "\r\nBcc: victim@example.net" },
		"message_id":      func(m *Message) { m.MessageID = "<a@b>\r\nBcc: victim@example.net" },
	}
	// The unmodified message builds, so each failure below is due to its injection.
	_, err := Build(sampleMessage(), time.Now())
	require.NoError(t, err)
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := sampleMessage()
			mutate(&m)
			raw, err := Build(m, time.Now())
			require.ErrorIs(t, err, ErrInvalidMessage)
			assert.Contains(t, err.Error(), "CR or LF")
			assert.Nil(t, raw)
		})
	}
}

func TestBuildValidates(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		mutate func(m *Message)
		want   string
	}{
		"missing to":             {func(m *Message) { m.To.Address = "" }, "to address is required"},
		"name inside address":    {func(m *Message) { m.To.Address = "Bob <bob@example.org>" }, "to address"},
		"no at sign":             {func(m *Message) { m.From.Address = "bot.example.com" }, "from address"},
		"non-ASCII address":      {func(m *Message) { m.To.Address = "łukasz@example.org" }, "must be ASCII"},
		"no text":                {func(m *Message) { m.Text = "" }, "text is required"},
		"no text even with html": {func(m *Message) { m.Text = ""; m.HTML = "<p>x</p>" }, "text is required"},
		"invalid UTF-8 subject":  {func(m *Message) { m.Subject = "bad \xff" }, "subject is not valid UTF-8"},
		"NUL in name":            {func(m *Message) { m.From.Name = "a\x00b" }, "control character"},
		"invalid UTF-8 html":     {func(m *Message) { m.HTML = "\xc3(" }, "html is not valid UTF-8"},
		"reserved header":        {func(m *Message) { m.Headers["from"] = "evil@example.net" }, "cannot be overridden"},
		"reserved content-type":  {func(m *Message) { m.Headers["Content-Type"] = "text/html" }, "cannot be overridden"},
		"header name with colon": {func(m *Message) { m.Headers["X-A:B"] = "v" }, "not a valid field name"},
		"header name with space": {func(m *Message) { m.Headers["X A"] = "v" }, "not a valid field name"},
		"duplicate header":       {func(m *Message) { m.Headers["list-unsubscribe"] = "<https://y>" }, "given twice"},
		"tag with space":         {func(m *Message) { m.Tags["campaign"] = "spring sale" }, "tag campaign"},
		"tag name with dot":      {func(m *Message) { m.Tags["a.b"] = "x" }, "tag name"},
		"tag too long":           {func(m *Message) { m.Tags["long"] = strings.Repeat("a", 257) }, "tag long"},
		"empty tag value":        {func(m *Message) { m.Tags["empty"] = "" }, "tag empty"},
		"bad message id":         {func(m *Message) { m.MessageID = "no-at-sign" }, "message_id"},
		"message id with space":  {func(m *Message) { m.MessageID = "<a b@c>" }, "message_id"},
		"unfoldable header": {func(m *Message) { m.Headers["X-Long"] = strings.Repeat("a", 1500) },
			"too long to fold"},
		"too many headers": {func(m *Message) {
			for i := 0; i < maxHeaders; i++ {
				m.Headers["X-H"+strings.Repeat("x", i)] = "v"
			}
		}, "extra headers"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := sampleMessage()
			tc.mutate(&m)
			_, err := Build(m, time.Now())
			require.ErrorIs(t, err, ErrInvalidMessage)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestBuildTooLarge(t *testing.T) {
	t.Parallel()
	m := sampleMessage()
	m.Text = strings.Repeat("a", MaxMessageSize+1)
	_, err := Build(m, time.Now())
	require.ErrorIs(t, err, ErrTooLarge)

	// 4 MiB of Cyrillic grows past 10 MiB once quoted-printable encoded: caught after
	// encoding, not only by the raw length check.
	m = sampleMessage()
	m.HTML = ""
	m.Text = strings.Repeat("ж", 2<<20)
	require.Less(t, len(m.Text), MaxMessageSize)
	_, err = Build(m, time.Now())
	require.ErrorIs(t, err, ErrTooLarge)

	// Just under the limit is fine.
	m.Text = strings.Repeat("a", 1<<20)
	raw, err := Build(m, time.Now())
	require.NoError(t, err)
	assert.Greater(t, len(raw), 1<<20)
}

func TestBuildMessageIDAndDate(t *testing.T) {
	t.Parallel()
	now := time.Date(2027, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3*3600))
	m := sampleMessage()
	m.Date = time.Time{}
	raw1, id1, err := build(m, now)
	require.NoError(t, err)
	_, id2, err := build(m, now)
	require.NoError(t, err)
	assert.Regexp(t, `^<[0-9a-f]{32}@example\.com>$`, id1)
	assert.NotEqual(t, id1, id2, "generated ids are random")
	msg, err := mail.ReadMessage(bytes.NewReader(raw1))
	require.NoError(t, err)
	assert.Equal(t, id1, msg.Header.Get("Message-ID"))
	assert.Equal(t, "Sat, 02 Jan 2027 03:04:05 +0300", msg.Header.Get("Date"), "zero Date means now")

	for _, given := range []string{"abc.123@mail.example.com", "<abc.123@mail.example.com>"} {
		m.MessageID = given
		_, id, err := build(m, now)
		require.NoError(t, err)
		assert.Equal(t, "<abc.123@mail.example.com>", id)
	}
}

func TestBuildFoldsLongHeaders(t *testing.T) {
	t.Parallel()
	for _, subject := range []string{
		strings.Repeat("Plain words in a long ASCII subject line. ", 12),
		strings.Repeat("Длинная тема письма на кириллице. ", 12),
		strings.Repeat("Mostly ASCII with an é here and there. ", 12),
	} {
		m := sampleMessage()
		m.Subject = strings.TrimSpace(subject)
		raw, err := Build(m, time.Now())
		require.NoError(t, err)
		requireCRLF(t, raw)
		header := string(raw[:bytes.Index(raw, []byte("\r\n\r\n"))])
		folded := 0
		for _, line := range strings.Split(header, "\r\n") {
			assert.LessOrEqual(t, len(line), 90, "line %q", line)
			if strings.HasPrefix(line, " ") {
				folded++
			}
		}
		assert.Greater(t, folded, 3, "the subject is folded over several lines")
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		require.NoError(t, err)
		got, err := new(mime.WordDecoder).DecodeHeader(msg.Header.Get("Subject"))
		require.NoError(t, err)
		assert.Equal(t, m.Subject, got)
	}
}

func TestPreheaderWithoutBodyTagIsPrepended(t *testing.T) {
	t.Parallel()
	got := withPreheader("<p>hi</p>", "peek")
	assert.True(t, strings.HasPrefix(got, `<div style="`+preheaderStyle+`">peek</div><p>hi</p>`), got)
	assert.Equal(t, "<p>hi</p>", withPreheader("<p>hi</p>", ""))
	assert.Regexp(t, regexp.MustCompile(`^<body onload="x">`+regexp.QuoteMeta(`<div style="`)), withPreheader(`<body onload="x"><p>hi</p>`, "peek"))
}
