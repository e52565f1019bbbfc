package emailcampaigns

import (
	"context"
	"fmt"
	"html"
	"net/mail"
	"net/url"
	"regexp"
	"strings"

	"github.com/botplatform/api/shared/email"
	"github.com/botplatform/api/shared/emaillinks"
)

// Link tracking. The link table of a campaign is made once, when it is scheduled, from the
// published version rendered for no one (every merge field empty): the distinct absolute
// http(s) URLs in the href of its <a> tags, in order of first appearance, at most MaxLinks,
// each at most maxLinkLen bytes, less those that differ in a second rendering for a probe
// person with every standard merge field set. A recipient's message has each href that is
// exactly one of them rewritten to its click URL (the token names the link by index, never
// the URL). An href that a merge field makes different per recipient is therefore not
// tracked, nor is one that still holds "{{", an unquoted href, one in another tag (<link>,
// <area>) or a URL in the text part: the table holds no one's data, and a click can only
// ever lead where the campaign itself sent everyone.
const (
	MaxLinks   = 100
	maxLinkLen = 2048
)

// anchorHref finds the quoted href value of an <a> tag (group 1, with its quotes).
var anchorHref = regexp.MustCompile(`(?i)<a\s(?:[^>]*?\s)?href\s*=\s*("[^"]*"|'[^']*')`)

// trackable returns the URL an href value stands for when it can be tracked, else "".
func trackable(raw string) string {
	v := strings.TrimSpace(html.UnescapeString(raw))
	if v == "" || len(v) > maxLinkLen || strings.Contains(v, "{{") {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return v
}

// linkTable lists the trackable URLs of an HTML body.
func linkTable(h string) []string {
	out := []string{}
	seen := map[string]bool{}
	for _, m := range anchorHref.FindAllStringSubmatch(h, -1) {
		v := trackable(m[1][1 : len(m[1])-1])
		if v == "" || seen[v] {
			continue
		}
		if len(out) == MaxLinks {
			break
		}
		seen[v] = true
		out = append(out, v)
	}
	return out
}

// track rewrites the hrefs of h that are in links to their click URLs for ref.
func (s *Service) track(h string, ref emaillinks.Ref, links []string) string {
	if len(links) == 0 {
		return h
	}
	index := make(map[string]int, len(links))
	for i, l := range links {
		index[l] = i
	}
	var b strings.Builder
	last := 0
	for _, m := range anchorHref.FindAllStringSubmatchIndex(h, -1) {
		start, end := m[2]+1, m[3]-1 // the value inside its quotes
		i, ok := index[trackable(h[start:end])]
		if !ok {
			continue
		}
		b.WriteString(h[last:start])
		b.WriteString(html.EscapeString(s.d.Links.ClickURL(s.cfg.PublicURL, ref, i)))
		last = end
	}
	b.WriteString(h[last:])
	return b.String()
}

// bodyEnd finds the closing body tags; the pixel goes before the last one.
var bodyEnd = regexp.MustCompile(`(?i)</body\s*>`)

// withPixel adds the open pixel at the end of the HTML body.
func withPixel(h, src string) string {
	img := `<img src="` + html.EscapeString(src) + `" width="1" height="1" alt="" style="display:block;width:1px;height:1px;border:0" />`
	all := bodyEnd.FindAllStringIndex(h, -1)
	if len(all) == 0 {
		return h + img
	}
	at := all[len(all)-1][0]
	return h[:at] + img + h[at:]
}

// messageID is the deterministic Message-ID of a recipient's message: the same recipient
// and campaign always give the same one, so a message is recognizable wherever it lands.
func messageID(recipient, campaign, from string) string {
	return "<" + recipient + "." + campaign + "@" + from[strings.LastIndexByte(from, '@')+1:] + ">"
}

// message is a recipient's email: the rendered content with tracked links, the open pixel
// and the unsubscribe headers of RFC 2369 and RFC 8058 (one-click).
func (s *Service) message(ref emaillinks.Ref, to mail.Address, out Rendered, links []string) email.Message {
	h := out.HTML
	if h != "" {
		h = withPixel(s.track(h, ref, links), s.d.Links.OpenURL(s.cfg.PublicURL, ref))
	}
	unsubscribe := "<" + s.d.Links.UnsubscribeURL(s.cfg.PublicURL, ref) + ">"
	if s.cfg.UnsubscribeMailto != "" {
		unsubscribe = "<mailto:" + s.cfg.UnsubscribeMailto + "?subject=unsubscribe%20" + ref.Recipient + ">, " + unsubscribe
	}
	m := email.Message{
		From:      out.From,
		To:        to,
		Subject:   out.Subject,
		Preheader: out.Preheader,
		HTML:      h,
		Text:      out.Text,
		Headers: map[string]string{
			"List-Unsubscribe":      unsubscribe,
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
		},
		Tags:      map[string]string{"bot": ref.Bot, "campaign": ref.Campaign, "recipient": ref.Recipient},
		MessageID: messageID(ref.Recipient, ref.Campaign, out.From.Address),
	}
	if out.ReplyTo != "" {
		m.ReplyTo = &mail.Address{Address: out.ReplyTo}
	}
	return m
}

// SigningMailer makes a Mailer of one of the platform's senders (*email.SES, *email.SMTP,
// *email.Sink): each message goes through a copy of it that signs with the message's
// bot's DKIM key. An *email.SMTP without a Pool gets one of its own, so that a campaign's
// messages share a few connections instead of opening one each (email.SMTPPool: a
// connection is checked with RSET before each reuse and a message never sent twice).
// Another Sender can only send unsigned messages; asked to sign, it fails with a
// configuration error (temporary: nothing was sent).
func SigningMailer(s email.Sender) Mailer {
	if x, ok := s.(*email.SMTP); ok && x.Pool == nil {
		c := *x
		c.Pool = &email.SMTPPool{MaxIdle: MaxWorkers}
		s = &c
	}
	return signing{s}
}

type signing struct{ s email.Sender }

// Send sends msg through a copy of the sender that signs with dkim.
func (m signing) Send(ctx context.Context, msg email.Message, dkim *email.Signer) (email.Receipt, error) {
	s, ok := email.Signing(m.s, dkim)
	if !ok {
		return email.Receipt{}, &email.SendError{Err: fmt.Errorf("%w: %T cannot sign with a bot's DKIM key", email.ErrConfig, m.s)}
	}
	return s.Send(ctx, msg)
}
