package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/http"
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-msgauth/dkim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	fakedns "github.com/botplatform/api/tests/fakes/dns"
	fakesmtp "github.com/botplatform/api/tests/fakes/smtp"
)

// emailSetup is a local process that sends through a real SMTP server and verifies domains
// against a real DNS server, both on this machine.
type emailSetup struct {
	s    *server
	smtp *fakesmtp.Server
	dns  *fakedns.Server
	base string
	dir  string
	args []string
}

func startEmail(t *testing.T) *emailSetup {
	t.Helper()
	e := &emailSetup{smtp: fakesmtp.New(t), dns: fakedns.New(t)}
	port := freePort(t)
	e.base = "http://127.0.0.1:" + port
	e.dir = t.TempDir()
	e.args = []string{"--addr", "127.0.0.1:" + port, "--public-url", e.base,
		"--smtp-addr", e.smtp.Addr, "--smtp-tls", "none", "--dns-server", e.dns.Addr, "--email-rate", "500"}
	e.s = startWith(t, e.dir, e.args...)
	return e
}

// resolver asks the fake DNS server, as a receiving mail server would.
func (e *emailSetup) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", e.dns.Addr)
	}}
}

// htmlPart returns the decoded text/html part of a raw message.
func htmlPart(t *testing.T, raw []byte) string {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	require.NoError(t, err)
	mt, params, err := mime.ParseMediaType(m.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/alternative", mt)
	mr := multipart.NewReader(m.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		require.NoError(t, err, "no text/html part")
		if strings.HasPrefix(p.Header.Get("Content-Type"), "text/html") {
			var r io.Reader = p
			if p.Header.Get("Content-Transfer-Encoding") == "quoted-printable" {
				r = quotedprintable.NewReader(p)
			}
			b, err := io.ReadAll(r)
			require.NoError(t, err)
			return string(b)
		}
	}
}

var hrefRe = regexp.MustCompile(`href="([^"]+)"`)

// A sending domain verified against real DNS, a campaign sent through a real SMTP server:
// DKIM-valid messages with List-Unsubscribe, tracked opens and clicks, no open redirect,
// and a one-click unsubscribe that the next campaign honours.
func TestEmailDomainCampaignTrackingUnsubscribe(t *testing.T) {
	t.Parallel()
	e := startEmail(t)
	s, tok, bot := e.s, e.s.demo.Token, e.s.demo.BotID
	api := "/api/bots/" + bot

	// The domain: its records are missing until published.
	r := s.post(tok, api+"/email/domains", map[string]any{"name": "mail.acme-shop.com"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/email/domains", api+"/email/domains", r)
	var dom struct {
		ID      string `json:"id"`
		Status  string `json:"status"`
		Records []struct {
			Type, Name, Value, Status, Purpose string
			Required                           bool
			Priority                           *int
		} `json:"records"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &dom))
	assert.NotContains(t, string(r.Body), "PRIVATE KEY")
	r = s.post(tok, api+"/email/domains/"+dom.ID+"/verify", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.NoError(t, json.Unmarshal(r.Body, &dom))
	assert.NotEqual(t, "verified", dom.Status)
	missing := map[string]bool{}
	for _, rec := range dom.Records {
		if rec.Required {
			assert.Equal(t, "missing", rec.Status, "%s %s", rec.Purpose, rec.Name)
			missing[rec.Purpose] = true
		}
	}
	assert.Len(t, missing, 3, "DKIM, SPF and MAIL FROM are each named: %v", missing)

	for _, rec := range dom.Records {
		switch rec.Type {
		case "TXT":
			e.dns.TXT(rec.Name, rec.Value)
		case "MX":
			e.dns.MX(rec.Name, rec.Value, 10)
		case "CNAME":
			e.dns.CNAME(rec.Name, rec.Value)
		}
	}
	r = s.post(tok, api+"/email/domains/"+dom.ID+"/verify", map[string]any{})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.NoError(t, json.Unmarshal(r.Body, &dom))
	require.Equal(t, "verified", dom.Status, "%s", r.Body)

	// The audience: three who may be mailed, one without consent, one without an address.
	for _, f := range []map[string]any{{"name": "email", "type": "string"}, {"name": "email_consent", "type": "boolean"}} {
		r = s.post(tok, api+"/fields", f)
		require.Equal(t, 201, r.Status, "%s", r.Body)
	}
	people := []map[string]any{
		{"external_id": "1", "first_name": "Ann", "fields": map[string]any{"email": "ann@example.org", "email_consent": true}},
		{"external_id": "2", "first_name": "Bo", "fields": map[string]any{"email": "bo@example.org", "email_consent": true}},
		{"external_id": "3", "first_name": "Cy", "fields": map[string]any{"email": "cy@example.org", "email_consent": true}},
		{"external_id": "4", "first_name": "Di", "fields": map[string]any{"email": "di@example.org", "email_consent": false}},
		{"external_id": "5", "first_name": "Ed"},
	}
	for _, p := range people {
		p["channel"] = "telegram"
		r = s.post(tok, api+"/subscribers", p)
		require.Less(t, r.Status, 300, "%s", r.Body)
	}

	// The content, published.
	r = s.post(tok, api+"/content", map[string]any{"type": "email", "name": "Sale", "draft": map[string]any{
		"subject": "Hello {{ subscriber.first_name }}", "html": `<html><body><p>Hi {{ subscriber.first_name }}</p><a href="https://shop.example/sale">Sale</a><a href="{{ unsubscribe_url }}">Unsubscribe</a></body></html>`,
		"from": map[string]any{"name": "Acme", "address": "news@mail.acme-shop.com"}}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)
	r = s.post(tok, api+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)

	// A campaign whose content is not published is not ready: 422 with every check.
	r = s.post(tok, api+"/content", map[string]any{"type": "email", "name": "Draft only"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	r = s.post(tok, api+"/email-campaigns", map[string]any{"name": "Not ready", "content_id": r.JSON(t)["id"]})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	notReady := r.JSON(t)["id"].(string)
	r = s.post(tok, api+"/email-campaigns/"+notReady+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 422, r.Status, "%s", r.Body)
	assert.Equal(t, "campaign_not_ready", r.Code(t))
	assert.Contains(t, string(r.Body), `"checks"`)

	r = s.post(tok, api+"/email-campaigns", map[string]any{"name": "Sale", "content_id": doc})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	camp := r.JSON(t)["id"].(string)
	cpath := api + "/email-campaigns/" + camp
	r = s.post(tok, cpath+"/consent-preview", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	preview := r.JSON(t)["counts"].(map[string]any)
	assert.Equal(t, float64(3), preview["sendable"])
	assert.Equal(t, float64(1), preview["no_consent"])
	assert.Equal(t, float64(1), preview["no_email"])

	r = s.post(tok, cpath+"/schedule", map[string]any{"expected_revision": 1})
	assert.Equal(t, 400, r.Status, "schedule needs confirm: %s", r.Body)
	r = s.post(tok, cpath+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	eventually(t, 30*time.Second, "the campaign is sent", func() bool {
		return s.get(tok, cpath).JSON(t)["state"] == "sent"
	})
	msgs := e.smtp.Messages()
	require.Len(t, msgs, 3, "each sendable recipient once")
	to := map[string]bool{}
	lookup := func(domain string) ([]string, error) { return e.resolver().LookupTXT(context.Background(), domain) }
	for _, m := range msgs {
		to[m.To[0]] = true
		verifs, err := dkim.VerifyWithOptions(bytes.NewReader(m.Data), &dkim.VerifyOptions{LookupTXT: lookup})
		require.NoError(t, err)
		require.Len(t, verifs, 1)
		assert.NoError(t, verifs[0].Err, "the DKIM signature verifies against the published key")
		assert.Equal(t, "mail.acme-shop.com", verifs[0].Domain)
		pm, err := mail.ReadMessage(bytes.NewReader(m.Data))
		require.NoError(t, err)
		assert.Contains(t, pm.Header.Get("List-Unsubscribe"), e.base+"/u/")
		assert.Equal(t, "List-Unsubscribe=One-Click", pm.Header.Get("List-Unsubscribe-Post"))
	}
	assert.Equal(t, map[string]bool{"ann@example.org": true, "bo@example.org": true, "cy@example.org": true}, to)

	// Ann opens and clicks; a tampered click token redirects nowhere.
	var ann fakesmtp.Message
	for _, m := range msgs {
		if m.To[0] == "ann@example.org" {
			ann = m
		}
	}
	html := htmlPart(t, ann.Data)
	var pixel, click string
	for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(html, -1) {
		switch {
		case strings.Contains(m[1], "/e/t/o/"):
			pixel = m[1]
		case strings.Contains(m[1], "/e/t/c/"):
			click = m[1]
		}
	}
	require.NotEmpty(t, pixel, "the open pixel: %s", html)
	require.NotEmpty(t, click, "the tracked link: %s", html)
	assert.Regexp(t, `href="`+regexp.QuoteMeta(e.base)+`/u/[^"]+">Unsubscribe`, html, "the body's unsubscribe link is the recipient's own")
	assert.NotContains(t, hrefRe.FindAllString(html, -1), `href="https://shop.example/sale"`, "the link is tracked")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noRedirect.Get(pixel)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, "image/gif", res.Header.Get("Content-Type"))
	res, err = noRedirect.Get(click)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 302, res.StatusCode)
	assert.Equal(t, "https://shop.example/sale", res.Header.Get("Location"))
	res, err = noRedirect.Get(click[:len(click)-3] + "AAA")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 404, res.StatusCode, "a tampered token")
	assert.Empty(t, res.Header.Get("Location"))
	res, err = noRedirect.Get(click + "?url=https://evil.example")
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, "https://shop.example/sale", res.Header.Get("Location"), "the target never comes from the request")

	// Bo unsubscribes with one click (RFC 8058), as a mail provider does.
	var bo fakesmtp.Message
	for _, m := range msgs {
		if m.To[0] == "bo@example.org" {
			bo = m
		}
	}
	pm, err := mail.ReadMessage(bytes.NewReader(bo.Data))
	require.NoError(t, err)
	unsub := regexp.MustCompile(`<(https?://[^>]+/u/[^>]+)>`).FindStringSubmatch(pm.Header.Get("List-Unsubscribe"))
	require.Len(t, unsub, 2)
	res, err = http.Post(unsub[1], "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, 200, res.StatusCode)

	r = s.get(tok, cpath+"/report")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	counts := r.JSON(t)["counts"].(map[string]any)
	assert.Equal(t, float64(3), counts["sent"])
	assert.Equal(t, float64(1), counts["opened"])
	assert.Equal(t, float64(1), counts["clicked"])
	assert.Equal(t, float64(1), counts["unsubscribed"])
	assert.Equal(t, float64(2), counts["skipped"])
	r = s.get(tok, api+"/email/suppressions")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "bo@example.org")

	// The next campaign skips Bo.
	r = s.post(tok, cpath+"/clone", nil)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	next := api + "/email-campaigns/" + r.JSON(t)["id"].(string)
	r = s.post(tok, next+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	eventually(t, 30*time.Second, "the second campaign is sent", func() bool {
		return s.get(tok, next).JSON(t)["state"] == "sent"
	})
	later := e.smtp.Messages()[3:]
	require.Len(t, later, 2)
	for _, m := range later {
		assert.NotEqual(t, "bo@example.org", m.To[0])
	}

	// A forged SNS notification is refused: its certificate is not AWS's, and this process
	// accepts no topic at all.
	forged := `{"Type":"Notification","MessageId":"x","TopicArn":"arn:aws:sns:eu-west-1:123456789012:ses","Message":"{}","Timestamp":"2026-01-01T00:00:00Z","SignatureVersion":"1","Signature":"AAAA","SigningCertURL":"https://evil.example/cert.pem"}`
	r = s.do(req{Method: "POST", Path: "/esp/ses/webhook", Body: forged, Headers: map[string]string{"Content-Type": "text/plain; charset=UTF-8"}})
	assert.Equal(t, 401, r.Status, "%s", r.Body)
	assert.Equal(t, "unauthentic_webhook", r.Code(t))
	r = s.get(tok, cpath+"/report")
	assert.Equal(t, counts, r.JSON(t)["counts"], "the forged event changed nothing")
}

// kill ends the process with SIGKILL, as a crash would: nothing is flushed or closed.
func (s *server) kill() {
	s.stopOnce.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.exited
	})
}

// A campaign paused mid-send, the process killed (-9) and started again, then resumed: every
// recipient gets the message exactly once, and the send continued where it stopped.
func TestEmailCampaignPauseKillResume(t *testing.T) {
	t.Parallel()
	e := startEmail(t)
	s, tok, bot := e.s, e.s.demo.Token, e.s.demo.BotID
	api := "/api/bots/" + bot

	r := s.post(tok, api+"/email/domains", map[string]any{"name": "news.acme-shop.com"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	var dom struct {
		ID      string                               `json:"id"`
		Records []struct{ Type, Name, Value string } `json:"records"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &dom))
	for _, rec := range dom.Records {
		switch rec.Type {
		case "TXT":
			e.dns.TXT(rec.Name, rec.Value)
		case "MX":
			e.dns.MX(rec.Name, rec.Value, 10)
		}
	}
	r = s.post(tok, api+"/email/domains/"+dom.ID+"/verify", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.Equal(t, "verified", r.JSON(t)["status"], "%s", r.Body)
	for _, f := range []map[string]any{{"name": "email", "type": "string"}, {"name": "email_consent", "type": "boolean"}} {
		require.Equal(t, 201, s.post(tok, api+"/fields", f).Status)
	}
	const n = 200
	for i := range n {
		r = s.post(tok, api+"/subscribers", map[string]any{"channel": "telegram", "external_id": fmt.Sprint(10000 + i),
			"fields": map[string]any{"email": fmt.Sprintf("p%03d@example.org", i), "email_consent": true}})
		require.Less(t, r.Status, 300, "%s", r.Body)
	}
	r = s.post(tok, api+"/content", map[string]any{"type": "email", "name": "News", "draft": map[string]any{
		"subject": "News", "text": "Hello", "from": map[string]any{"address": "hello@news.acme-shop.com"}}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	doc := r.JSON(t)["id"].(string)
	require.Equal(t, 200, s.post(tok, api+"/content/"+doc+"/publish", map[string]any{"expected_revision": 1}).Status)
	r = s.post(tok, api+"/email-campaigns", map[string]any{"name": "News", "content_id": doc})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	cpath := api + "/email-campaigns/" + r.JSON(t)["id"].(string)
	r = s.post(tok, cpath+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)

	// Pause once some are out (the process sends 500 a second: poll fast).
	eventually(t, 30*time.Second, "some messages are out", func() bool { return len(e.smtp.Messages()) >= 20 })
	var rev float64
	for {
		c := s.get(tok, cpath).JSON(t)
		rev = c["revision"].(float64)
		if c["state"] != "sending" {
			t.Fatalf("the campaign finished before it could be paused: raise n (%v)", c["state"])
		}
		r = s.post(tok, cpath+"/pause", map[string]any{"expected_revision": rev})
		if r.Status == 200 {
			break
		}
		require.Equal(t, 409, r.Status, "%s", r.Body) // the send moved the revision: read again
	}
	// Wait for the step in flight to stop, then crash.
	var atPause int
	eventually(t, 20*time.Second, "the send stops", func() bool {
		before := len(e.smtp.Messages())
		time.Sleep(300 * time.Millisecond)
		atPause = len(e.smtp.Messages())
		return atPause == before
	})
	require.Less(t, atPause, n, "paused mid-send")
	s.kill()

	s = startWith(t, e.dir, e.args...)
	e.s = s
	time.Sleep(500 * time.Millisecond)
	assert.Len(t, e.smtp.Messages(), atPause, "nothing is sent while paused, across the restart")
	c := s.get(tok, cpath).JSON(t)
	require.Equal(t, "paused", c["state"])
	r = s.post(tok, cpath+"/resume", map[string]any{"expected_revision": c["revision"]})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	eventually(t, 60*time.Second, "the campaign is sent", func() bool { return s.get(tok, cpath).JSON(t)["state"] == "sent" })

	seen := map[string]int{}
	for _, m := range e.smtp.Messages() {
		seen[m.To[0]]++
	}
	assert.Len(t, seen, n, "every recipient got the message")
	for addr, k := range seen {
		assert.Equal(t, 1, k, "%s got it %d times", addr, k)
	}
	counts := s.get(tok, cpath+"/report").JSON(t)["counts"].(map[string]any)
	assert.Equal(t, float64(n), counts["sent"])
	assert.Equal(t, float64(0), counts["interrupted"])
}
