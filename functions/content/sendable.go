package content

import (
	"context"
	"html"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/merge"
)

// EmailVersion is a published version of an email document, parsed once to be rendered for
// many recipients (a campaign's send).
type EmailVersion struct {
	// Number is the version.
	Number int
	body   EmailBody
	parts  [4]*merge.Template // subject, preheader, html, text
	// derivedText: the text template was derived from the HTML (the document has no text).
	derivedText bool
}

// EmailVersion returns version n of an email document (n = 0: the newest), for senders. An
// archived, unpublished or non-email document is refused as Published refuses it.
func (s *Service) EmailVersion(ctx context.Context, bot, id string, n int) (*EmailVersion, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return nil, err
	}
	switch {
	case rec.Archived:
		return nil, httpapi.NotFound("content document")
	case rec.Type != TypeEmail:
		return nil, httpapi.Errorf(httpapi.KindConflict, "unsupported_document_type", "content document %s is a %s document, not an email", id, rec.Type)
	case rec.PublishedVersion == 0:
		return nil, httpapi.E(httpapi.KindConflict, "document_not_published", "the content document has no published version; publish it first")
	case n == 0:
		n = rec.PublishedVersion
	case n < 0 || n > rec.PublishedVersion:
		return nil, httpapi.NotFound("version of the content document")
	}
	v, err := s.version(ctx, bot, id, n)
	if err != nil {
		return nil, err
	}
	body, err := decodeBody(TypeEmail, v.Body, "body")
	if err != nil {
		return nil, err
	}
	ev := &EmailVersion{Number: n, body: *body.(*EmailBody)}
	text := ev.body.Text
	if text == "" && ev.body.HTML != "" {
		// The text part is derived from the HTML once, merge fields and all, rather than
		// from every recipient's rendered HTML: the same text, a fraction of the work.
		text, ev.derivedText = textOf(ev.body.HTML), true
	}
	for i, text := range []string{ev.body.Subject, ev.body.Preheader, ev.body.HTML, text} {
		// Published versions passed validate's checks, so they parse; a parse error here
		// would be a stored version that no longer does: render it as written.
		if tpl, errs := merge.Parse(text); len(errs) == 0 {
			ev.parts[i] = tpl
		}
	}
	return ev, nil
}

// Render fills the version in for r, as a test send renders a draft.
func (ev *EmailVersion) Render(r Recipient) RenderedEmail {
	d := r.data()
	part := func(i int, src string, escape func(string) string) string {
		if ev.parts[i] == nil {
			return src
		}
		return ev.parts[i].Render(d, escape)
	}
	e := RenderedEmail{
		Subject: part(0, ev.body.Subject, nil), Preheader: part(1, ev.body.Preheader, nil),
		HTML: part(2, ev.body.HTML, html.EscapeString), Text: part(3, ev.body.Text, nil),
		From: ev.body.From, ReplyTo: ev.body.ReplyTo,
	}
	if ev.derivedText {
		e.Text = tidyText(e.Text) // as textOf leaves it: a value may end a line
	}
	if e.Text == "" && e.HTML != "" && !ev.derivedText {
		e.Text = textOf(e.HTML) // a stored version whose derived text did not parse
	}
	return e
}

// RawHTML is the version's HTML as written, merge fields unrendered: a campaign takes its
// link table from it.
func (ev *EmailVersion) RawHTML() string { return ev.body.HTML }
