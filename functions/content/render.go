package content

import (
	"fmt"
	"html"
	"regexp"
	"sort"
	"strings"

	"github.com/microcosm-cc/bluemonday"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/merge"
)

// Recipient is who a document is rendered for: a subscriber, or sample data in a preview.
type Recipient struct {
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	FirstName  string         `json:"first_name,omitempty"`
	LastName   string         `json:"last_name,omitempty"`
	Locale     string         `json:"locale,omitempty"`
	Timezone   string         `json:"timezone,omitempty"`
	Channel    string         `json:"channel"`
	ExternalID string         `json:"-"`
	Email      string         `json:"-"`
	Fields     map[string]any `json:"-"`
	// UnsubscribeURL is the recipient's own unsubscribe link, which email documents show
	// with {{ unsubscribe_url }} (a campaign sets it; previews and test sends show a
	// placeholder).
	UnsubscribeURL string `json:"-"`
}

// previewUnsubscribeURL stands in for a recipient's unsubscribe link where there is no
// campaign to unsubscribe from: previews and test sends.
const previewUnsubscribeURL = "#unsubscribe"

// data is the recipient as merge fields see it.
func (r Recipient) data() merge.Data {
	d := merge.Data{
		"subscriber.id": r.ID, "subscriber.first_name": r.FirstName, "subscriber.last_name": r.LastName,
		"subscriber.name": r.Name, "subscriber.locale": r.Locale, "subscriber.timezone": r.Timezone,
		"subscriber.channel": r.Channel, "unsubscribe_url": r.UnsubscribeURL,
	}
	for k, v := range r.Fields {
		if v != nil {
			d["subscriber.fields."+k] = fmt.Sprint(v)
		}
	}
	return d
}

// Rendered is a document filled in for one recipient. Exactly one of Message, Email, Push is set.
type Rendered struct {
	Message *channel.Message `json:"message,omitempty"`
	Email   *RenderedEmail   `json:"email,omitempty"`
	Push    *PushBody        `json:"push,omitempty"`
}

// RenderedEmail is an email ready to be built into MIME.
type RenderedEmail struct {
	Subject   string       `json:"subject"`
	Preheader string       `json:"preheader,omitempty"`
	HTML      string       `json:"html,omitempty"`
	Text      string       `json:"text"`
	From      EmailAddress `json:"from"`
	ReplyTo   string       `json:"reply_to,omitempty"`
}

// fill renders s; s was checked at validate or publish, and a draft that does not parse
// renders as written (a preview still shows something).
func fill(s string, d merge.Data, escape func(string) string) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	tpl, errs := merge.Parse(s)
	if len(errs) > 0 {
		return s
	}
	return tpl.Render(d, escape)
}

// render fills body in for r. A message renders for r's channel type (its overrides applied).
func render(body any, r Recipient) Rendered {
	d := r.data()
	switch b := body.(type) {
	case *MessageBody:
		m := b.forChannel(r.Channel)
		out := &channel.Message{Text: fill(m.Text, d, nil)}
		if m.Media != nil {
			out.Media = &channel.Media{Type: channel.MediaType(m.Media.Type), URL: fill(m.Media.URL, d, nil), Caption: fill(m.Media.Caption, d, nil)}
			if out.Media.Caption == "" {
				out.Media.Caption, out.Text = out.Text, ""
			}
		}
		for _, btn := range m.Buttons {
			out.Buttons = append(out.Buttons, channel.Button{Title: fill(btn.Title, d, nil), Payload: btn.Payload, URL: fill(btn.URL, d, nil)})
		}
		return Rendered{Message: out}
	case *EmailBody:
		e := &RenderedEmail{
			Subject: fill(b.Subject, d, nil), Preheader: fill(b.Preheader, d, nil),
			HTML: fill(b.HTML, d, html.EscapeString), Text: fill(b.Text, d, nil),
			From: b.From, ReplyTo: b.ReplyTo,
		}
		if e.Text == "" && e.HTML != "" {
			e.Text = textOf(e.HTML)
		}
		return Rendered{Email: e}
	case *PushBody:
		p := &PushBody{Title: fill(b.Title, d, nil), Body: fill(b.Body, d, nil), Icon: b.Icon, URL: fill(b.URL, d, nil)}
		for _, a := range b.Actions {
			p.Actions = append(p.Actions, PushAction{Title: fill(a.Title, d, nil), URL: fill(a.URL, d, nil)})
		}
		return Rendered{Push: p}
	}
	return Rendered{}
}

// previewPolicy keeps what an email may show and drops what could run in the dashboard that
// displays a preview: scripts, event handlers, javascript: URLs, forms, frames. Inline
// styles stay (emails are styled inline).
var previewPolicy = func() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	p.AllowAttrs("style", "align", "valign", "bgcolor", "width", "height", "border", "cellpadding", "cellspacing").Globally()
	p.AllowStyles("color", "background-color", "font-family", "font-size", "font-weight", "font-style", "text-align",
		"text-decoration", "line-height", "margin", "margin-top", "margin-bottom", "margin-left", "margin-right",
		"padding", "padding-top", "padding-bottom", "padding-left", "padding-right", "border", "width", "max-width",
		"height", "display", "vertical-align").Globally()
	p.AllowElements("center", "font")
	return p
}()

// sanitize makes rendered HTML safe to display.
func sanitize(s string) string { return previewPolicy.Sanitize(s) }

var (
	blockEnd = regexp.MustCompile(`(?i)</(p|div|h[1-6]|li|tr|table)>|<br\s*/?>`)
	stripAll = bluemonday.StrictPolicy()
)

// textOf derives the plain-text part of an HTML email: block ends become line breaks, tags
// go, entities are decoded, then tidyText.
func textOf(h string) string {
	s := blockEnd.ReplaceAllString(h, "$0\n")
	return tidyText(html.UnescapeString(stripAll.Sanitize(s)))
}

// tidyText collapses runs of spaces and tabs, trims every line and keeps at most one blank
// line between lines, none before the first or after the last. A campaign runs it for
// every recipient (on the derived text part, once its merge fields are filled in), so it
// is one pass by hand rather than regular expressions, which took about 6 % of a
// campaign's CPU (docs/performance.md); a test holds it equal to the expressions.
func tidyText(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	blank := false // an empty line since the last line written
	for line := range strings.SplitSeq(s, "\n") {
		// Trimming first is the same as collapsing first: the trimmed edges hold every
		// space and tab next to them.
		line = strings.TrimSpace(line)
		if line == "" {
			blank = true
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
			if blank {
				b.WriteByte('\n')
			}
		}
		blank = false
		for i := 0; i < len(line); i++ {
			c := line[i]
			if c != ' ' && c != '\t' {
				b.WriteByte(c)
				continue
			}
			b.WriteByte(' ')
			for i+1 < len(line) && (line[i+1] == ' ' || line[i+1] == '\t') {
				i++
			}
		}
	}
	return b.String()
}

// mergeFieldsOf lists the distinct merge fields body uses, sorted, for validate's answer.
func mergeFieldsOf(body any) []string {
	var texts []string
	switch b := body.(type) {
	case *MessageBody:
		texts = append(texts, b.Text)
		if b.Media != nil {
			texts = append(texts, b.Media.Caption, b.Media.URL)
		}
		for _, btn := range b.Buttons {
			texts = append(texts, btn.Title, btn.URL)
		}
		for _, o := range b.Channels {
			if o.Text != nil {
				texts = append(texts, *o.Text)
			}
		}
	case *EmailBody:
		texts = append(texts, b.Subject, b.Preheader, b.HTML, b.Text)
	case *PushBody:
		texts = append(texts, b.Title, b.Body, b.URL)
	}
	seen := map[string]bool{}
	for _, s := range texts {
		tpl, _ := merge.Parse(s)
		for _, f := range tpl.Fields() {
			seen[f.Path] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
