package content

import (
	"fmt"
	"slices"
	"strings"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/merge"
)

// Catalog is what a bot's content is checked against at validate and publish.
type Catalog struct {
	// Fields are the names of the bot's custom subscriber fields.
	Fields []string
	// Channels are the capabilities of the channel types a message document must fit: the
	// bot's connected channels, or every channel type when it has none yet.
	Channels []channel.Capabilities
	// email is set while an email document is checked: only emails have an unsubscribe link.
	email bool
}

// UnsubscribeField is the merge field of a recipient's unsubscribe link, in email documents.
const UnsubscribeField = "unsubscribe_url"

// StandardFields are the merge fields every subscriber has; custom fields are
// subscriber.fields.<name>.
var StandardFields = []string{
	"subscriber.id", "subscriber.first_name", "subscriber.last_name", "subscriber.name",
	"subscriber.locale", "subscriber.timezone", "subscriber.channel",
}

// known reports whether a merge field path names something the bot's subscribers can have.
func (c Catalog) known(path string) bool {
	if slices.Contains(StandardFields, path) || c.email && path == UnsubscribeField {
		return true
	}
	name, ok := strings.CutPrefix(path, "subscriber.fields.")
	return ok && slices.Contains(c.Fields, name)
}

// check lists every problem that keeps body from being published (and so sent): shape,
// required members, merge fields, and for messages the limits of each channel.
func check(t Type, body any, cat Catalog) httpapi.Problems {
	var p httpapi.Problems
	const path = "draft"
	cat.email = t == TypeEmail
	checkShape(&p, body, path)
	fields := func(field, s string) { checkMerge(&p, cat, field, s) }
	switch b := body.(type) {
	case *MessageBody:
		if b.Text == "" && b.Media == nil {
			p.Add(path+".text", "is required unless media is given")
		}
		fields(path+".text", b.Text)
		if b.Media != nil {
			fields(path+".media.caption", b.Media.Caption)
			fields(path+".media.url", b.Media.URL)
		}
		for i, btn := range b.Buttons {
			fields(fmt.Sprintf("%s.buttons[%d].title", path, i), btn.Title)
			fields(fmt.Sprintf("%s.buttons[%d].url", path, i), btn.URL)
		}
		for k, o := range b.Channels {
			if o.Text != nil {
				fields(path+".channels."+k+".text", *o.Text)
			}
		}
		for _, caps := range cat.Channels {
			checkChannel(&p, b, caps)
		}
	case *EmailBody:
		if strings.TrimSpace(b.Subject) == "" {
			p.Add(path+".subject", "is required")
		}
		if b.From.Address == "" {
			p.Add(path+".from.address", "is required")
		}
		if strings.TrimSpace(b.HTML) == "" && strings.TrimSpace(b.Text) == "" {
			p.Add(path+".html", "html or text is required")
		}
		fields(path+".subject", b.Subject)
		fields(path+".preheader", b.Preheader)
		fields(path+".html", b.HTML)
		fields(path+".text", b.Text)
	case *PushBody:
		if strings.TrimSpace(b.Title) == "" {
			p.Add(path+".title", "is required")
		}
		if strings.TrimSpace(b.Body) == "" {
			p.Add(path+".body", "is required")
		}
		fields(path+".title", b.Title)
		fields(path+".body", b.Body)
		fields(path+".url", b.URL)
	}
	return p
}

// checkMerge adds the parse problems of s and every merge field the bot cannot fill.
func checkMerge(p *httpapi.Problems, cat Catalog, field, s string) {
	if !strings.Contains(s, "{{") {
		return
	}
	tpl, errs := merge.Parse(s)
	for _, e := range errs {
		p.Add(field, "merge field at byte %d: %s", e.Offset, e.Message)
	}
	seen := map[string]bool{}
	for _, f := range tpl.Fields() {
		if seen[f.Path] || cat.known(f.Path) {
			continue
		}
		seen[f.Path] = true
		if name, ok := strings.CutPrefix(f.Path, "subscriber.fields."); ok {
			p.Add(field, "unknown merge field %s: the bot has no custom field %q", f.Path, name)
		} else {
			p.Add(field, "unknown merge field %s: use %s or subscriber.fields.<name>", f.Path, strings.Join(StandardFields, ", "))
		}
	}
}

// forChannel is the message as channel type k sends it: the body with k's overrides.
func (b *MessageBody) forChannel(k string) MessageBody {
	out := MessageBody{Text: b.Text, Media: b.Media, Buttons: b.Buttons}
	if o, ok := b.Channels[k]; ok {
		if o.Text != nil {
			out.Text = *o.Text
		}
		if o.Media != nil {
			out.Media = o.Media
		}
		if o.Buttons != nil {
			out.Buttons = *o.Buttons
		}
	}
	return out
}

// checkChannel adds the problems of the message on one channel type, under its path.
func checkChannel(p *httpapi.Problems, b *MessageBody, caps channel.Capabilities) {
	k := string(caps.Kind)
	m := b.forChannel(k)
	path := "draft (" + k + ")"
	if _, ok := b.Channels[k]; ok {
		path = "draft.channels." + k
	}
	if n := len([]rune(m.Text)); caps.MaxTextLength > 0 && m.Media == nil && n > caps.MaxTextLength {
		p.Add(path+".text", "is %d characters; %s allows at most %d", n, k, caps.MaxTextLength)
	}
	if m.Media != nil {
		if !caps.Sends(channel.MessageKindMedia) || !slices.ContainsFunc(caps.Media, func(l channel.MediaLimit) bool { return string(l.Type) == m.Media.Type }) {
			p.Add(path+".media.type", "%s cannot send %s media", k, m.Media.Type)
		}
		if n := len([]rune(m.Media.Caption)); caps.MaxCaptionLength > 0 && n > caps.MaxCaptionLength {
			p.Add(path+".media.caption", "is %d characters; %s allows at most %d", n, k, caps.MaxCaptionLength)
		}
	}
	if len(m.Buttons) == 0 {
		return
	}
	bl := caps.Buttons
	if !caps.Sends(channel.MessageKindButtons) {
		p.Add(path+".buttons", "%s cannot send buttons", k)
		return
	}
	if len(m.Buttons) > bl.Max {
		p.Add(path+".buttons", "has %d buttons; %s shows at most %d (override buttons in channels.%s)", len(m.Buttons), k, bl.Max, k)
	}
	links := 0
	for i, btn := range m.Buttons {
		if n := len([]rune(btn.Title)); bl.MaxTitleLength > 0 && n > bl.MaxTitleLength {
			p.Add(fmt.Sprintf("%s.buttons[%d].title", path, i), "is %d characters; %s allows at most %d", n, k, bl.MaxTitleLength)
		}
		if btn.URL != "" {
			links++
		}
	}
	switch {
	case links > 0 && !bl.URLButtons:
		p.Add(path+".buttons", "%s cannot send link buttons", k)
	case links > 0 && bl.URLButtonAlone && len(m.Buttons) > 1:
		p.Add(path+".buttons", "%s sends a link button only as the message's single button", k)
	}
}
