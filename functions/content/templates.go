package content

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Template is a reusable starting point for documents: creating a document from it copies
// its type and body; later changes to either side do not reach the other.
type Template struct {
	ID          string          `json:"id"`
	Type        Type            `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Body        json.RawMessage `json:"body"`
	CreatedAt   time.Time       `json:"created_at"`
}

// MaxTemplates is how many content templates a bot may keep.
const MaxTemplates = 500

// MaxDescriptionLen bounds a template's description.
const MaxDescriptionLen = 1000

// NewTemplate is a create request: a body given directly, or copied from a document's draft.
type NewTemplate struct {
	Type         Type            `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Body         json.RawMessage `json:"body"`
	FromDocument *string         `json:"from_document_id"`
}

// CreateTemplate stores a template.
func (s *Service) CreateTemplate(ctx context.Context, bot string, in NewTemplate) (Template, error) {
	var p httpapi.Problems
	if in.FromDocument != nil {
		if in.Body != nil {
			p.Add("body", "give body or from_document_id, not both")
			return Template{}, p.Err()
		}
		doc, err := s.load(ctx, bot, *in.FromDocument)
		if err != nil {
			if httpapi.KindOf(err) == httpapi.KindNotFound {
				p.Add("from_document_id", "no content document %q in this bot", *in.FromDocument)
				return Template{}, p.Err()
			}
			return Template{}, err
		}
		if in.Type != "" && in.Type != doc.Type {
			p.Add("type", "is %s but document %s is a %s document", in.Type, doc.ID, doc.Type)
			return Template{}, p.Err()
		}
		in.Type, in.Body = doc.Type, doc.Draft
	}
	if !validType(in.Type) {
		p.Add("type", "must be one of message, email, push")
		return Template{}, p.Err()
	}
	checkName(&p, "name", in.Name)
	checkLen(&p, "description", in.Description, MaxDescriptionLen, text.Message)
	if in.Body == nil {
		in.Body = emptyBody(in.Type)
	}
	body, err := decodeBody(in.Type, in.Body, "body")
	if err != nil {
		return Template{}, err
	}
	checkShape(&p, body, "body")
	if err := p.Err(); err != nil {
		return Template{}, err
	}
	raw, err := encodeDraft(body, "body")
	if err != nil {
		return Template{}, err
	}
	now := stamp(s.now())
	t := Template{ID: ids.At("ctpl", now), Type: in.Type, Name: in.Name, Description: in.Description, Body: raw, CreatedAt: now}
	b, err := store.Encode(t)
	if err != nil {
		return Template{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot, "TPL"), 1, func(c store.Counter) error {
		if c.Count >= MaxTemplates {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d content templates", MaxTemplates).With("limit", MaxTemplates)
		}
		return s.store.Transact(ctx, []store.Write{c.Write, store.PutOp(store.Item{Key: templateKey(bot, t.ID), Data: b, Revision: 1}, store.MustNotExist)})
	})
	if err != nil {
		return Template{}, fmt.Errorf("create template: %w", err)
	}
	return t, nil
}

// GetTemplate returns one template.
func (s *Service) GetTemplate(ctx context.Context, bot, id string) (Template, error) {
	it, err := s.store.Get(ctx, templateKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Template{}, httpapi.NotFound("content template")
	}
	if err != nil {
		return Template{}, err
	}
	return store.Decode[Template](it)
}

// ListTemplates returns a page of the bot's templates, oldest first.
func (s *Service) ListTemplates(ctx context.Context, bot string, limit int, cursor string) ([]Template, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: contentPK(bot), Prefix: "TPL#", Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out := make([]Template, 0, len(page.Items))
	for _, it := range page.Items {
		t, err := store.Decode[Template](it)
		if err != nil {
			return nil, "", err
		}
		out = append(out, t)
	}
	return out, page.Next, nil
}

// DeleteTemplate deletes a template; documents made from it keep their copy.
func (s *Service) DeleteTemplate(ctx context.Context, bot, id string) error {
	err := store.Counted(ctx, s.store, countKey(bot, "TPL"), -1, func(c store.Counter) error {
		return s.store.Transact(ctx, []store.Write{c.Write, store.DeleteOp(templateKey(bot, id), store.MustExist)})
	})
	var ce *store.ConditionError
	switch {
	case errors.As(err, &ce) && ce.Index == 1:
		return httpapi.NotFound("content template")
	case err != nil:
		return fmt.Errorf("delete template: %w", err)
	}
	return nil
}
