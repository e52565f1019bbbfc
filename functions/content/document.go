// Package content serves content documents and content templates: the messages, emails and
// pushes that broadcasts, email campaigns and browser push send. A document has a draft that
// is edited freely and published versions that are frozen; senders use the published version.
// docs/content.md describes the model and every check.
package content

import (
	"encoding/json"
	"fmt"
	"net/mail"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Type is a document's kind; it decides the shape of its body and never changes.
type Type string

// The document types.
const (
	TypeMessage Type = "message"
	TypeEmail   Type = "email"
	TypePush    Type = "push"
)

// Types lists every document type.
func Types() []Type { return []Type{TypeMessage, TypeEmail, TypePush} }

// Document is a content document as the API shows it.
type Document struct {
	ID   string `json:"id"`
	Type Type   `json:"type"`
	Name string `json:"name"`
	// Draft is the body being edited, shaped by Type.
	Draft json.RawMessage `json:"draft,omitempty"`
	// Revision counts every change (draft, publish, archive); mutations send it back.
	Revision int64 `json:"revision"`
	// Published is the newest published version, null until the first publish.
	Published *Version `json:"published"`
	// Archived documents are read-only and cannot be sent.
	Archived   bool       `json:"archived"`
	ArchivedAt *time.Time `json:"archived_at"`
	// TemplateID is the content template the document was created from, if any.
	TemplateID *string   `json:"template_id"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Version is a published, frozen body.
type Version struct {
	Number      int             `json:"version"`
	Body        json.RawMessage `json:"body,omitempty"`
	PublishedAt time.Time       `json:"published_at"`
}

// Limits of documents. An email's parts are bounded so the whole document stays well inside
// one DynamoDB item (400 KB); Gmail clips messages over 102 KB anyway.
const (
	MaxNameLen        = 200
	MaxDocuments      = 10000
	MaxMessageText    = 4096
	MaxButtons        = 10
	MaxButtonTitle    = 64
	MaxPayload        = 256
	MaxURLLen         = 2048
	MaxSubjectLen     = 255
	MaxPreheaderLen   = 255
	MaxHTMLBytes      = 200 << 10
	MaxTextBytes      = 100 << 10
	MaxPushTitle      = 100
	MaxPushBody       = 500
	MaxPushActions    = 2
	MaxChannelEntries = 3
	// MaxDraftBytes bounds a draft as stored (JSON, escapes included): the document item and
	// each version item must stay inside one DynamoDB item (store.MaxDataBytes).
	MaxDraftBytes = 300 << 10
)

// MessageBody is the body of a message document: what a subscriber receives on a messenger.
// Channels overrides members for one channel type ("telegram", "whatsapp", "vk"), where that
// channel's limits differ (WhatsApp shows at most 3 reply buttons).
type MessageBody struct {
	Text     string                     `json:"text"`
	Media    *MediaBody                 `json:"media,omitempty"`
	Buttons  []ButtonBody               `json:"buttons,omitempty"`
	Channels map[string]MessageOverride `json:"channels,omitempty"`
}

// MessageOverride replaces the members it gives for one channel type.
type MessageOverride struct {
	Text    *string       `json:"text,omitempty"`
	Media   *MediaBody    `json:"media,omitempty"`
	Buttons *[]ButtonBody `json:"buttons,omitempty"`
}

// MediaBody is an image, video, audio or document by URL, with an optional caption.
type MediaBody struct {
	Type    string `json:"type"`
	URL     string `json:"url"`
	Caption string `json:"caption,omitempty"`
}

// ButtonBody is a reply button (payload) or a link (url).
type ButtonBody struct {
	Title   string `json:"title"`
	Payload string `json:"payload,omitempty"`
	URL     string `json:"url,omitempty"`
}

// EmailBody is the body of an email document.
type EmailBody struct {
	Subject   string       `json:"subject"`
	Preheader string       `json:"preheader,omitempty"`
	HTML      string       `json:"html,omitempty"`
	Text      string       `json:"text,omitempty"`
	From      EmailAddress `json:"from"`
	ReplyTo   string       `json:"reply_to,omitempty"`
}

// EmailAddress is a sender identity.
type EmailAddress struct {
	Name    string `json:"name,omitempty"`
	Address string `json:"address"`
}

// PushBody is the body of a browser push document.
type PushBody struct {
	Title   string       `json:"title"`
	Body    string       `json:"body"`
	Icon    string       `json:"icon,omitempty"`
	URL     string       `json:"url,omitempty"`
	Actions []PushAction `json:"actions,omitempty"`
}

// PushAction is a button of a push notification.
type PushAction struct {
	Title string `json:"title"`
	URL   string `json:"url"`
}

// emptyBody is a new document's draft when none is given.
func emptyBody(t Type) json.RawMessage {
	switch t {
	case TypeEmail:
		return json.RawMessage(`{"subject":"","from":{"address":""}}`)
	case TypePush:
		return json.RawMessage(`{"title":"","body":""}`)
	default:
		return json.RawMessage(`{"text":""}`)
	}
}

// decodeBody strictly decodes raw as a body of type t, reporting members under path.
func decodeBody(t Type, raw json.RawMessage, path string) (any, error) {
	var v any
	switch t {
	case TypeMessage:
		v = &MessageBody{}
	case TypeEmail:
		v = &EmailBody{}
	case TypePush:
		v = &PushBody{}
	default:
		return nil, httpapi.Errorf(httpapi.KindInvalid, "validation_failed", "type: must be one of message, email, push").
			With("errors", []httpapi.FieldError{{Field: "type", Message: "must be one of message, email, push"}})
	}
	if err := httpapi.DecodeJSON(raw, v, path); err != nil {
		return nil, err
	}
	return v, nil
}

// mergeDraft applies a partial draft (RFC 7396 at the top level: a given member replaces,
// null removes) to the stored one.
func mergeDraft(stored, patch json.RawMessage) (json.RawMessage, error) {
	var base, over map[string]json.RawMessage
	if err := json.Unmarshal(stored, &base); err != nil {
		return nil, fmt.Errorf("stored draft: %w", err)
	}
	if err := json.Unmarshal(patch, &over); err != nil || over == nil {
		return nil, httpapi.E(httpapi.KindInvalid, "invalid_body", "draft must be a JSON object").With("field", "draft")
	}
	for k, v := range over {
		if string(v) == "null" {
			delete(base, k)
			continue
		}
		base[k] = v
	}
	return json.Marshal(base)
}

// encodeDraft stores body as JSON, refusing a draft too large to store.
func encodeDraft(body any, field string) (json.RawMessage, error) {
	b, err := store.Encode(body)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxDraftBytes {
		var p httpapi.Problems
		p.Add(field, "is %d bytes as stored; at most %d (JSON escapes count)", len(b), MaxDraftBytes)
		return nil, p.Err()
	}
	return b, nil
}

// checkShape adds the problems every draft must be free of, whatever it is later sent as:
// text rules and sizes. What publishing also needs (required members, merge fields, channel
// limits) is in check.go.
func checkShape(p *httpapi.Problems, body any, path string) {
	switch b := body.(type) {
	case *MessageBody:
		checkLen(p, path+".text", b.Text, MaxMessageText, text.Message)
		checkMedia(p, path+".media", b.Media)
		checkButtons(p, path+".buttons", b.Buttons)
		if len(b.Channels) > MaxChannelEntries {
			p.Add(path+".channels", "at most %d channel types", MaxChannelEntries)
		}
		for k, o := range b.Channels {
			cp := path + ".channels." + k
			if k != "telegram" && k != "whatsapp" && k != "vk" {
				p.Add(cp, "unknown channel type; use telegram, whatsapp or vk")
				continue
			}
			if o.Text != nil {
				checkLen(p, cp+".text", *o.Text, MaxMessageText, text.Message)
			}
			checkMedia(p, cp+".media", o.Media)
			if o.Buttons != nil {
				checkButtons(p, cp+".buttons", *o.Buttons)
			}
		}
	case *EmailBody:
		checkLen(p, path+".subject", b.Subject, MaxSubjectLen, text.Line)
		checkLen(p, path+".preheader", b.Preheader, MaxPreheaderLen, text.Line)
		if len(b.HTML) > MaxHTMLBytes {
			p.Add(path+".html", "is %d bytes; at most %d", len(b.HTML), MaxHTMLBytes)
		} else {
			p.Text(path+".html", b.HTML, text.Message)
		}
		if len(b.Text) > MaxTextBytes {
			p.Add(path+".text", "is %d bytes; at most %d", len(b.Text), MaxTextBytes)
		} else {
			p.Text(path+".text", b.Text, text.Message)
		}
		checkLen(p, path+".from.name", b.From.Name, MaxNameLen, text.Name)
		if b.From.Address != "" {
			checkAddress(p, path+".from.address", b.From.Address)
		}
		if b.ReplyTo != "" {
			checkAddress(p, path+".reply_to", b.ReplyTo)
		}
	case *PushBody:
		checkLen(p, path+".title", b.Title, MaxPushTitle, text.Line)
		checkLen(p, path+".body", b.Body, MaxPushBody, text.Message)
		checkURL(p, path+".icon", b.Icon)
		checkURL(p, path+".url", b.URL)
		if len(b.Actions) > MaxPushActions {
			p.Add(path+".actions", "at most %d actions (browsers show no more)", MaxPushActions)
		}
		for i, a := range b.Actions {
			ap := fmt.Sprintf("%s.actions[%d]", path, i)
			checkLen(p, ap+".title", a.Title, MaxButtonTitle, text.Line)
			if a.Title == "" {
				p.Add(ap+".title", "is required")
			}
			if a.URL == "" {
				p.Add(ap+".url", "is required")
			}
			checkURL(p, ap+".url", a.URL)
		}
	}
}

func checkLen(p *httpapi.Problems, field, s string, max int, rule text.Rule) {
	if n := utf8.RuneCountInString(s); n > max {
		p.Add(field, "is %d characters; at most %d", n, max)
		return
	}
	p.Text(field, s, rule)
}

func checkMedia(p *httpapi.Problems, path string, m *MediaBody) {
	if m == nil {
		return
	}
	switch m.Type {
	case "image", "video", "audio", "document":
	default:
		p.Add(path+".type", "must be one of image, video, audio, document")
	}
	if m.URL == "" {
		p.Add(path+".url", "is required")
	}
	checkURL(p, path+".url", m.URL)
	checkLen(p, path+".caption", m.Caption, MaxMessageText, text.Message)
}

func checkButtons(p *httpapi.Problems, path string, bs []ButtonBody) {
	if len(bs) > MaxButtons {
		p.Add(path, "at most %d buttons", MaxButtons)
		return
	}
	for i, b := range bs {
		bp := fmt.Sprintf("%s[%d]", path, i)
		if b.Title == "" {
			p.Add(bp+".title", "is required")
		}
		checkLen(p, bp+".title", b.Title, MaxButtonTitle, text.Line)
		switch {
		case (b.Payload == "") == (b.URL == ""):
			p.Add(bp, "needs exactly one of payload (a reply button) or url (a link)")
		case b.URL != "":
			checkURL(p, bp+".url", b.URL)
		default:
			checkLen(p, bp+".payload", b.Payload, MaxPayload, text.Line)
		}
	}
}

// checkURL accepts absolute http(s) URLs; a merge field may stand for the whole URL or part
// of it, so a URL with {{ is checked only for its scheme.
func checkURL(p *httpapi.Problems, field, s string) {
	if s == "" {
		return
	}
	if len(s) > MaxURLLen {
		p.Add(field, "is %d bytes; at most %d", len(s), MaxURLLen)
		return
	}
	if strings.HasPrefix(s, "{{") {
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		p.Add(field, "must be an absolute http or https URL")
	}
}

func checkAddress(p *httpapi.Problems, field, s string) {
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s {
		p.Add(field, "must be an email address such as news@example.com")
	}
}
