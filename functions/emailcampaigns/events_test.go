package emailcampaigns

import (
	"bytes"
	"context"
	"net/mail"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
)

// sentOne sends the newsletter to one subscriber and returns the campaign and its message.
func sentOne(t *testing.T) (*fixture, Campaign, email.Message) {
	t.Helper()
	f := newFixture(t, 1)
	c := f.schedule(t, f.create(t))
	f.drain(t)
	all := f.mail.all()
	require.Len(t, all, 1)
	return f, c, all[0].Msg
}

var hrefRE = regexp.MustCompile(`(?i)href=("[^"]*"|'[^']*')`)

// The message: unsubscribe headers (RFC 2369, RFC 8058 one-click), the link table's links
// rewritten to click URLs whose target is found again by index, the other hrefs as they
// were, the open pixel at the end of the body, a deterministic Message-ID, the tags.
func TestMessage(t *testing.T) {
	t.Parallel()
	f, c, m := sentOne(t)
	rows := f.rows(t, c.ID)
	require.Len(t, rows, 1)
	ref := emaillinks.Ref{Bot: f.bot, Campaign: c.ID, Recipient: rows[0].ID}

	assert.Equal(t, "<"+f.links.UnsubscribeURL(publicURL, ref)+">", m.Headers["List-Unsubscribe"])
	assert.Equal(t, "List-Unsubscribe=One-Click", m.Headers["List-Unsubscribe-Post"])
	assert.Equal(t, "<"+rows[0].ID+"."+c.ID+"@shop.example>", m.MessageID)
	assert.Equal(t, map[string]string{"bot": f.bot, "campaign": c.ID, "recipient": rows[0].ID}, m.Tags)
	assert.Equal(t, mail.Address{Name: "P0 Doe", Address: "p00000@mail.example"}, m.To)
	assert.Equal(t, "News for P0", m.Subject)
	require.NotNil(t, m.ReplyTo)
	assert.Equal(t, "care@shop.example", m.ReplyTo.Address)

	var hrefs []string
	for _, h := range hrefRE.FindAllStringSubmatch(m.HTML, -1) {
		hrefs = append(hrefs, h[1])
	}
	sale := `"` + f.links.ClickURL(publicURL, ref, 0) + `"`
	blog := `"` + f.links.ClickURL(publicURL, ref, 1) + `"`
	assert.Equal(t, []string{`"https://cdn.example/s.css"`, sale, `'https://shop.example/p/sub_00000'`, `"mailto:help@shop.example"`, sale, blog}, hrefs,
		"tracked: the sale link (twice, as one link) and the blog; not the personal link, the mailto or the stylesheet")
	assert.True(t, strings.HasSuffix(m.HTML, `<img src="`+f.links.OpenURL(publicURL, ref)+`" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" /></body></html>`))
	assert.Equal(t, "Hi P0", m.Text, "the text part is as rendered")

	token := strings.TrimPrefix(strings.Trim(blog, `"`), publicURL+emaillinks.ClickPrefix)
	got, err := f.links.Parse(emaillinks.Click, token)
	require.NoError(t, err)
	target, err := f.svc.LinkTarget(eventsCtx(t), got)
	require.NoError(t, err)
	assert.Equal(t, "https://blog.example/", target)
	got.Link = 0
	target, err = f.svc.LinkTarget(eventsCtx(t), got)
	require.NoError(t, err)
	assert.Equal(t, "https://shop.example/sale?x=1&y=2", target, "entities decoded: the URL the browser would have followed")
	got.Link = 2
	_, err = f.svc.LinkTarget(eventsCtx(t), got)
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	links, err := f.svc.Links(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, []Link{{Index: 0, URL: "https://shop.example/sale?x=1&y=2"}, {Index: 1, URL: "https://blog.example/"}}, links)

	addr, err := f.svc.Recipient(eventsCtx(t), ref)
	require.NoError(t, err)
	assert.Equal(t, "p00000@mail.example", addr)
}

func TestLinkTable(t *testing.T) {
	t.Parallel()
	h := `<a href="https://a.example/1">1</a><a href="http://b.example/">2</a><a href="https://a.example/1">again</a>` +
		`<a href="/relative">r</a><a href="javascript:alert(1)">j</a><a href="https://x.example/{{ subscriber.id }}">m</a>` +
		`<a data-href="https://not.example/">d</a><a href=https://unquoted.example/>u</a><link href="https://css.example/">`
	assert.Equal(t, []string{"https://a.example/1", "http://b.example/"}, linkTable(h))
	var many strings.Builder
	for i := range MaxLinks + 5 {
		many.WriteString(`<a href="https://a.example/` + strings.Repeat("x", i+1) + `">x</a>`)
	}
	assert.Len(t, linkTable(many.String()), MaxLinks)
	assert.Equal(t, "<p>x</p>"+`<img src="u" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" />`, withPixel("<p>x</p>", "u"))
	assert.Equal(t, `a<img src="u" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" /></BODY >`, withPixel("a</BODY >", "u"))
}

// Record is idempotent where it must be, counts recipients not events, counts machine
// opens apart, counts a click as an open, and the counters equal a recount of the rows.
func TestRecord(t *testing.T) {
	t.Parallel()
	f, c, m := sentOne(t)
	ctx := eventsCtx(t)
	ref, err := f.svc.ByMessageID(ctx, "ses-"+strings.Trim(m.MessageID, "<>"))
	require.NoError(t, err)
	assert.Equal(t, f.bot, ref.Bot)
	assert.Equal(t, c.ID, ref.Campaign)
	_, err = f.svc.ByMessageID(ctx, "<nope@example>")
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(err))

	at := t0.Add(time.Hour)
	for _, ev := range []Event{
		{Type: EventDelivered, At: at}, {Type: EventDelivered, At: at.Add(time.Minute)},
		{Type: EventOpen, Machine: true, At: at}, {Type: EventOpen, Machine: true, At: at},
	} {
		require.NoError(t, f.svc.Record(ctx, ref, ev))
	}
	counts := f.assertCounts(t, c.ID)
	assert.Equal(t, int64(1), counts.Delivered)
	assert.Equal(t, int64(1), counts.MachineOpened)
	assert.Zero(t, counts.Opened, "a privacy proxy's open is no one's")

	// A security gateway follows the link before the person reads the message: counted
	// apart, no one's open or click, in no link's clicks.
	ref.Link = 1
	for range 2 {
		require.NoError(t, f.svc.Record(ctx, ref, Event{Type: EventClick, Link: 1, Machine: true, At: at.Add(time.Minute)}))
	}
	counts = f.assertCounts(t, c.ID)
	assert.Equal(t, int64(1), counts.MachineClicked)
	assert.Zero(t, counts.Opened)
	assert.Zero(t, counts.Clicked)

	require.NoError(t, f.svc.Record(ctx, ref, Event{Type: EventClick, Link: 1, At: at.Add(2 * time.Minute)}))
	counts = f.assertCounts(t, c.ID)
	assert.Equal(t, int64(1), counts.Opened, "a click is an open")
	assert.Equal(t, int64(1), counts.Clicked)
	for _, ev := range []Event{
		{Type: EventClick, Link: 1}, {Type: EventClick, Link: 0}, {Type: EventOpen}, {Type: EventOpen},
		{Type: EventBounce}, {Type: EventBounce, Permanent: true}, {Type: EventBounce},
		{Type: EventComplaint}, {Type: EventComplaint}, {Type: EventUnsubscribe}, {Type: EventUnsubscribe},
	} {
		require.NoError(t, f.svc.Record(ctx, ref, ev))
	}
	counts = f.assertCounts(t, c.ID)
	assert.Equal(t, Counts{Recipients: 1, Sent: 1, SkippedBy: newCounts().SkippedBy, Delivered: 1, Opened: 1, MachineOpened: 1, Clicked: 1,
		MachineClicked: 1, Bounced: 1, Complained: 1, Unsubscribed: 1}, counts)

	rows := f.rows(t, c.ID)
	r := rows[0].Recipient

	// The event log has the send and what happened to it as the subscriber's: each open and
	// click a person made, the first delivery, bounce, complaint and unsubscribe once; a
	// privacy proxy's opens are no one's.
	logged := map[string]int{}
	require.NoError(t, f.events.Scan(ctx, eventlog.Query{BotID: f.bot, To: t0.Add(48 * time.Hour)}, func(e eventlog.Event) error {
		logged[e.Name]++
		assert.Equal(t, r.SubscriberID, e.SubscriberID)
		assert.Equal(t, c.ID, e.Properties["campaign_id"])
		assert.Equal(t, eventlog.SourceEmail, e.Source)
		return nil
	}))
	assert.Equal(t, map[string]int{"email_sent": 1, "email_delivered": 1, "email_opened": 3, "email_clicked": 3,
		"email_bounced": 1, "email_complained": 1, "email_unsubscribed": 1}, logged)

	assert.Equal(t, at, *r.DeliveredAt, "the first delivery stands")
	assert.Equal(t, Opens{Count: 3, FirstAt: ptr(at.Add(2 * time.Minute)), Machine: 2}, r.Opens)
	assert.Equal(t, []LinkClicks{{Link: 1, Count: 2}, {Link: 0, Count: 1}}, r.Clicks)
	assert.Equal(t, int64(2), r.MachineClicks)
	require.NotNil(t, r.Bounce)
	assert.True(t, r.Bounce.Permanent, "a hard bounce overrides a soft one")

	links, err := f.svc.Links(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), links[0].Clicks)
	assert.Equal(t, int64(1), links[0].UniqueClickers)
	assert.Equal(t, int64(2), links[1].Clicks)
	assert.Equal(t, int64(1), links[1].UniqueClickers)

	rep, err := f.svc.Report(t.Context(), f.bot, c.ID)
	require.NoError(t, err)
	assert.Equal(t, Rates{Delivery: 1, Open: 1, Click: 1, Bounce: 1, Complaint: 1, Unsubscribe: 1}, rep.Rates)

	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(f.svc.Record(ctx, ref, Event{Type: EventClick, Link: 7})), "no such link")
	assert.Equal(t, httpapi.KindInvalid, httpapi.KindOf(f.svc.Record(ctx, ref, Event{Type: "teleport"})))
	ref.Recipient = "rcp_nope"
	assert.Equal(t, httpapi.KindNotFound, httpapi.KindOf(f.svc.Record(ctx, ref, Event{Type: EventOpen})))
}

// An event for a row never sent changes nothing.
func TestRecordIgnoresRowsNeverSent(t *testing.T) {
	t.Parallel()
	f := newFixture(t, 3)
	f.aud.people[0].Consent = false
	c := f.schedule(t, f.create(t))
	f.drain(t)
	r := f.rows(t, c.ID)
	var skipped row
	for _, x := range r {
		if x.State == RowSkipped {
			skipped = x
		}
	}
	require.Equal(t, SkipNoConsent, skipped.SkipReason)
	require.NoError(t, f.svc.Record(eventsCtx(t), emaillinks.Ref{Bot: f.bot, Campaign: c.ID, Recipient: skipped.ID}, Event{Type: EventOpen}))
	counts := f.assertCounts(t, c.ID)
	assert.Zero(t, counts.Opened)
}

// SigningMailer signs with the bot's key through a copy of the platform's sender.
func TestSigningMailer(t *testing.T) {
	t.Parallel()
	key, err := email.GenerateKey()
	require.NoError(t, err)
	sink := &email.Sink{Dir: t.TempDir()}
	m := SigningMailer(sink)
	msg := email.Message{From: mail.Address{Address: "news@shop.example"}, To: mail.Address{Address: "a@mail.example"}, Subject: "Hi", Text: "Hi"}
	_, err = m.Send(t.Context(), msg, &email.Signer{Domain: "shop.example", Selector: "s1", Key: key})
	require.NoError(t, err)
	paths, err := sink.List()
	require.NoError(t, err)
	require.Len(t, paths, 1)
	raw, err := os.ReadFile(paths[0])
	require.NoError(t, err)
	assert.True(t, bytes.HasPrefix(raw, []byte("DKIM-Signature:")), "signed")
	assert.Nil(t, sink.DKIM, "the sender itself is unchanged")

	_, err = SigningMailer(otherSender{}).Send(t.Context(), msg, &email.Signer{})
	assert.ErrorIs(t, err, email.ErrConfig)
	assert.False(t, email.IsPermanent(err))
}

type otherSender struct{}

func (otherSender) Send(context.Context, email.Message) (email.Receipt, error) {
	return email.Receipt{}, nil
}
