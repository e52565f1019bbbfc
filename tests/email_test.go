package tests

import (
	"bytes"
	"context"
	"encoding/base64"
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
	subIDs := map[string]string{} // by first name
	for _, p := range people {
		p["channel"] = "telegram"
		r = s.post(tok, api+"/subscribers", p)
		require.Less(t, r.Status, 300, "%s", r.Body)
		subIDs[p["first_name"].(string)] = r.JSON(t)["id"].(string)
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
	conforms(t, "POST", "/api/bots/{botID}/email-campaigns", api+"/email-campaigns", r)
	camp := r.JSON(t)["id"].(string)
	cpath := api + "/email-campaigns/" + camp
	r = s.post(tok, cpath+"/consent-preview", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/email-campaigns/{campaignID}/consent-preview", cpath+"/consent-preview", r)
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
	conforms(t, "GET", "/api/bots/{botID}/email-campaigns/{campaignID}/report", cpath+"/report", r)
	for _, sub := range []string{"", "/recipients", "/links"} {
		lr := s.get(tok, cpath+sub)
		require.Equal(t, 200, lr.Status, "%s", lr.Body)
		conforms(t, "GET", "/api/bots/{botID}/email-campaigns/{campaignID}"+sub, cpath+sub, lr)
	}
	counts := r.JSON(t)["counts"].(map[string]any)
	assert.Equal(t, float64(3), counts["sent"])
	assert.Equal(t, float64(1), counts["opened"])
	assert.Equal(t, float64(1), counts["clicked"])
	assert.Equal(t, float64(1), counts["unsubscribed"])
	assert.Equal(t, float64(2), counts["skipped"])
	r = s.get(tok, api+"/email/suppressions")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Contains(t, string(r.Body), "bo@example.org")

	// Cy asks by phone to be mailed no more: suppressed by hand.
	r = s.post(tok, api+"/email/suppressions", map[string]any{"reason": "unsubscribed", "addresses": []string{"Cy@Example.org", "bo@example.org"}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "POST", "/api/bots/{botID}/email/suppressions", api+"/email/suppressions", r)
	assert.Equal(t, map[string]any{"suppressed": 1.0, "unchanged": 1.0}, r.JSON(t), "Bo was already unsubscribed")

	// The next campaign skips Bo and Cy.
	r = s.post(tok, cpath+"/clone", nil)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	next := api + "/email-campaigns/" + r.JSON(t)["id"].(string)
	r = s.post(tok, next+"/schedule", map[string]any{"expected_revision": 1, "confirm": true})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	eventually(t, 30*time.Second, "the second campaign is sent", func() bool {
		return s.get(tok, next).JSON(t)["state"] == "sent"
	})
	later := e.smtp.Messages()[3:]
	require.Len(t, later, 1)
	assert.Equal(t, "ann@example.org", later[0].To[0])

	// Ann is erased: soon no campaign's recipients show her address, and the reports count
	// the same.
	r = s.do(req{Method: "DELETE", Path: api + "/subscribers/" + subIDs["Ann"], Token: tok})
	require.Equal(t, 204, r.Status, "%s", r.Body)
	eventually(t, 30*time.Second, "Ann's address leaves the campaigns' recipients", func() bool {
		for _, c := range []string{cpath, next} {
			if strings.Contains(string(s.get(tok, c+"/recipients").Body), "ann@example.org") {
				return false
			}
		}
		return true
	})
	r = s.get(tok, cpath+"/recipients")
	conforms(t, "GET", "/api/bots/{botID}/email-campaigns/{campaignID}/recipients", cpath+"/recipients", r)
	assert.Contains(t, string(r.Body), `"erased":true`)
	assert.Equal(t, float64(3), s.get(tok, cpath+"/report").JSON(t)["counts"].(map[string]any)["sent"])

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

// inboundSecret is what POST /esp/local/inbound requires of the inbound tests' process.
const inboundSecret = "inbound-test-secret-0123456789"

// startInbound is startEmail with an inbound secret, and a verified domain: its id.
func startInbound(t *testing.T, domain string) (*emailSetup, string) {
	t.Helper()
	e := &emailSetup{smtp: fakesmtp.New(t), dns: fakedns.New(t)}
	port := freePort(t)
	e.base = "http://127.0.0.1:" + port
	e.dir = t.TempDir()
	e.args = []string{"--addr", "127.0.0.1:" + port, "--public-url", e.base,
		"--smtp-addr", e.smtp.Addr, "--smtp-tls", "none", "--dns-server", e.dns.Addr}
	e.s = startWithEnv(t, e.dir, []string{"INBOUND_SECRET=" + inboundSecret}, e.args...)
	e.s.secret(inboundSecret)
	api := "/api/bots/" + e.s.demo.BotID
	r := e.s.post(e.s.demo.Token, api+"/email/domains", map[string]any{"name": domain})
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
	r = e.s.post(e.s.demo.Token, api+"/email/domains/"+dom.ID+"/verify", nil)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	require.Equal(t, "verified", r.JSON(t)["status"], "%s", r.Body)
	return e, dom.ID
}

// mailIn delivers a message to the local inbound route as the deployment's mail server
// would, and returns the delivery's result.
func (e *emailSetup) mailIn(t *testing.T, from, to, messageID, body string) map[string]any {
	t.Helper()
	raw := "From: " + from + "\r\nTo: " + to + "\r\nSubject: Where is my order?\r\nMessage-ID: <" + messageID + ">\r\n" +
		"Date: Mon, 02 Mar 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + body + "\r\n"
	r := e.s.do(req{Method: "POST", Path: "/esp/local/inbound", Body: map[string]any{"raw": base64.StdEncoding.EncodeToString([]byte(raw))},
		Headers: map[string]string{"X-Inbound-Secret": inboundSecret}})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	return r.JSON(t)
}

// inboundAction returns the recorded action of the bot's inbound message with the given
// Message-ID, once it has one.
func (e *emailSetup) inboundAction(t *testing.T, messageID string) (string, map[string]any) {
	t.Helper()
	r := e.s.get(e.s.demo.Token, "/api/bots/"+e.s.demo.BotID+"/email/inbound-messages")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	var list struct {
		Data []struct {
			ID        string         `json:"id"`
			MessageID string         `json:"message_id"`
			Action    map[string]any `json:"action"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal(r.Body, &list))
	for _, m := range list.Data {
		if m.MessageID == messageID {
			return m.ID, m.Action
		}
	}
	t.Fatalf("no inbound message %s: %s", messageID, r.Body)
	return "", nil
}

// An inbound route whose action is a reaction runs that published reaction for the mail's
// sender: the bot's subscriber with the address in its email field, or a subscriber of the
// email channel type created for an unknown sender. The run shows in the traces with the
// trigger inbound_email and the inbound message's id; the message's action is done, naming
// the subscriber; a redelivered message runs nothing again; a reaction that is not
// published is skipped, creating no one.
func TestEmailInboundRouteRunsReaction(t *testing.T) {
	t.Parallel()
	e, domain := startInbound(t, "help.acme-shop.com")
	s, tok, bot := e.s, e.s.demo.Token, e.s.demo.BotID
	api := "/api/bots/" + bot

	// The bot's email field, a field and a label the reaction sets, and Ann, who is known.
	ids := map[string]string{}
	for _, f := range []map[string]any{{"name": "email", "type": "string"}, {"name": "source", "type": "string"}} {
		r := s.post(tok, api+"/fields", f)
		require.Equal(t, 201, r.Status, "%s", r.Body)
		ids[f["name"].(string)] = r.JSON(t)["id"].(string)
	}
	r := s.post(tok, api+"/labels", map[string]any{"name": "Wrote by email"})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	label := r.JSON(t)["id"].(string)
	r = s.post(tok, api+"/subscribers", map[string]any{"channel": "telegram", "external_id": "1001", "first_name": "Ann",
		"fields": map[string]any{"email": "ann@example.org"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	ann := r.JSON(t)["id"].(string)

	// The reaction (an api trigger: nothing in a conversation starts it), published; another
	// never published.
	steps := fmt.Sprintf(`[{"id":"f","type":"set_field","field_id":%q,"value":"email"},{"id":"l","type":"add_label","label_id":%q}]`, ids["source"], label)
	var body map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"name":"Mail in","trigger":{"type":"api"},"steps":`+steps+`}`), &body))
	r = s.post(tok, api+"/reactions", body)
	require.Equal(t, 201, r.Status, "%s", r.Body)
	rct := r.JSON(t)["id"].(string)
	r = s.post(tok, api+"/reactions/"+rct+"/publish", map[string]any{"expected_revision": 1})
	require.Equal(t, 200, r.Status, "%s", r.Body)
	r = s.post(tok, api+"/reactions", map[string]any{"name": "Draft", "trigger": map[string]any{"type": "api"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)
	draft := r.JSON(t)["id"].(string)
	for match, reaction := range map[string]string{"support": rct, "drafts": draft} {
		r = s.post(tok, api+"/email/inbound-routes", map[string]any{"domain_id": domain, "match": match,
			"action": map[string]any{"type": "reaction", "reaction_id": reaction}})
		require.Equal(t, 201, r.Status, "%s", r.Body)
	}

	executions := func(sub string) []trace {
		t.Helper()
		path := api + "/subscribers/" + sub + "/executions"
		r := s.get(tok, path)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		conforms(t, "GET", "/api/bots/{botID}/subscribers/{subscriberID}/executions", path, r)
		var list struct {
			Data []trace `json:"data"`
		}
		require.NoError(t, json.Unmarshal(r.Body, &list))
		return list.Data
	}
	subscriber := func(id string) map[string]any {
		t.Helper()
		r := s.get(tok, api+"/subscribers/"+id)
		require.Equal(t, 200, r.Status, "%s", r.Body)
		conforms(t, "GET", "/api/bots/{botID}/subscribers/{subscriberID}", api+"/subscribers/"+id, r)
		return r.JSON(t)
	}

	// Ann writes, her address in another letter case.
	res := e.mailIn(t, "Ann <Ann@Example.ORG>", "support@help.acme-shop.com", "m1@example.org", "Where is order 42? My card is 4111 1111 1111 1111.")
	assert.Equal(t, 1.0, res["stored"])
	m1, action := e.inboundAction(t, "m1@example.org")
	assert.Equal(t, "reaction", action["type"])
	assert.Equal(t, "done", action["status"], "%v", action)
	assert.Equal(t, ann, action["subscriber_id"])
	var runs []trace
	eventually(t, 15*time.Second, "Ann's run completes", func() bool {
		runs = executions(ann)
		return len(runs) == 1 && runs[0].Status == "completed"
	})
	assert.Equal(t, rct, runs[0].ReactionID)
	assert.Equal(t, map[string]any{"type": "inbound_email", "inbound_message_id": m1}, runs[0].Trigger)
	r = s.get(tok, api+"/executions/"+runs[0].ID)
	require.Equal(t, 200, r.Status, "%s", r.Body)
	conforms(t, "GET", "/api/bots/{botID}/executions/{executionID}", api+"/executions/"+runs[0].ID, r)
	for _, secret := range []string{"4111", "order 42", "ann@example.org", "Where is"} {
		assert.NotContains(t, string(r.Body), secret, "nothing of the mail is in the trace")
	}
	a := subscriber(ann)
	assert.Equal(t, map[string]any{"email": "ann@example.org", "source": "email"}, a["fields"])
	assert.Equal(t, []any{label}, a["labels"])

	// The mail server delivers the same message again: stored once, run once. Ann's next
	// message runs again, and then she has exactly two runs.
	res = e.mailIn(t, "Ann <Ann@Example.ORG>", "support@help.acme-shop.com", "m1@example.org", "Where is order 42? My card is 4111 1111 1111 1111.")
	assert.Equal(t, 1.0, res["duplicates"])
	assert.Equal(t, 0.0, res["stored"])
	e.mailIn(t, "ann@example.org", "support@help.acme-shop.com", "m2@example.org", "Any news?")
	m2, _ := e.inboundAction(t, "m2@example.org")
	eventually(t, 15*time.Second, "Ann's second run completes", func() bool {
		runs = executions(ann)
		return len(runs) == 2 && runs[0].Status == "completed"
	})
	assert.Equal(t, m2, runs[0].Trigger["inbound_message_id"])
	assert.Equal(t, m1, runs[1].Trigger["inbound_message_id"])

	// Bo is unknown: he becomes a subscriber of the email channel type, his address in the
	// email field, and the reaction runs for him.
	e.mailIn(t, "Bo <Bo@Example.net>", "support@help.acme-shop.com", "m3@example.net", "Hello")
	_, action = e.inboundAction(t, "m3@example.net")
	assert.Equal(t, "done", action["status"], "%v", action)
	bo, _ := action["subscriber_id"].(string)
	require.NotEmpty(t, bo)
	b := subscriber(bo)
	assert.Equal(t, "email", b["channel"])
	assert.Equal(t, "bo@example.net", b["external_id"])
	eventually(t, 15*time.Second, "Bo's run completes", func() bool {
		runs = executions(bo)
		return len(runs) == 1 && runs[0].Status == "completed"
	})
	assert.Equal(t, "inbound_email", runs[0].Trigger["type"])
	b = subscriber(bo)
	assert.Equal(t, map[string]any{"email": "bo@example.net", "source": "email"}, b["fields"])
	assert.Equal(t, []any{label}, b["labels"])
	r = s.get(tok, api+"/subscribers?channel=email&external_id=bo@example.net")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 1)

	// A route whose reaction is not published: skipped, saying so, and no one is created.
	e.mailIn(t, "cy@example.com", "drafts@help.acme-shop.com", "m4@example.com", "Hi")
	_, action = e.inboundAction(t, "m4@example.com")
	assert.Equal(t, "skipped", action["status"], "%v", action)
	assert.Contains(t, action["detail"], "no published version")
	assert.NotContains(t, action, "subscriber_id")
	r = s.get(tok, api+"/subscribers?channel=email")
	require.Equal(t, 200, r.Status, "%s", r.Body)
	assert.Len(t, r.JSON(t)["data"], 1, "only Bo")
}

// An inbound route that forwards sends the mail on from the address it arrived at, signed
// with that domain's DKIM key as campaign mail is (an unsigned forward from the bot's
// domain would fail DMARC at the receiver), with the original sender as Reply-To.
func TestInboundForwardIsSigned(t *testing.T) {
	t.Parallel()
	e, domain := startInbound(t, "help.acme-shop.com")
	s, tok := e.s, e.s.demo.Token
	api := "/api/bots/" + s.demo.BotID
	r := s.post(tok, api+"/email/inbound-routes", map[string]any{"domain_id": domain, "match": "support",
		"action": map[string]any{"type": "forward", "to": "team@example.net"}})
	require.Equal(t, 201, r.Status, "%s", r.Body)

	res := e.mailIn(t, "Ada <ada@example.org>", "support@help.acme-shop.com", "fw1@example.org", "My parcel has not arrived.")
	assert.Equal(t, 1.0, res["stored"])
	_, action := e.inboundAction(t, "fw1@example.org")
	assert.Equal(t, "done", action["status"], "%v", action)
	msgs := e.smtp.Messages()
	require.Len(t, msgs, 1)
	assert.Equal(t, []string{"team@example.net"}, msgs[0].To)
	lookup := func(domain string) ([]string, error) { return e.resolver().LookupTXT(context.Background(), domain) }
	verifs, err := dkim.VerifyWithOptions(bytes.NewReader(msgs[0].Data), &dkim.VerifyOptions{LookupTXT: lookup})
	require.NoError(t, err)
	require.Len(t, verifs, 1, "one DKIM signature")
	assert.NoError(t, verifs[0].Err, "it verifies against the key the domain published")
	assert.Equal(t, "help.acme-shop.com", verifs[0].Domain)
	pm, err := mail.ReadMessage(bytes.NewReader(msgs[0].Data))
	require.NoError(t, err)
	assert.Contains(t, pm.Header.Get("From"), "support@help.acme-shop.com")
	assert.Contains(t, pm.Header.Get("Reply-To"), "ada@example.org")
	assert.Equal(t, "Fwd: Where is my order?", pm.Header.Get("Subject"))
	// The original rides along as it arrived, as a message/rfc822 attachment.
	mt, params, err := mime.ParseMediaType(pm.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/mixed", mt)
	mr := multipart.NewReader(pm.Body, params["boundary"])
	_, err = mr.NextPart() // the bodies
	require.NoError(t, err)
	att, err := mr.NextPart()
	require.NoError(t, err)
	assert.Equal(t, "message/rfc822", att.Header.Get("Content-Type"))
	orig, err := mail.ReadMessage(att)
	require.NoError(t, err)
	assert.Equal(t, "<fw1@example.org>", orig.Header.Get("Message-ID"))
	assert.Equal(t, "Ada <ada@example.org>", orig.Header.Get("From"))
}
