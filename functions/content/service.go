package content

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// CatalogSource tells what a bot's content is checked against: its custom fields and the
// channels its messages must fit.
type CatalogSource interface {
	Catalog(ctx context.Context, bot string) (Catalog, error)
}

// Service is the content documents and templates of every bot.
type Service struct {
	store   store.Store
	catalog CatalogSource
	now     func() time.Time
	sends   *TestSender
	// events receives content_published (WithEvents); nil records none.
	events eventlog.Log
	log    *slog.Logger
}

// WithEvents makes the service append a content_published event to the bot's event log
// for each version it publishes; log is where a failure to append is reported.
func (s *Service) WithEvents(l eventlog.Log, log *slog.Logger) *Service {
	s.events, s.log = l, log
	return s
}

// NewService returns the service. sends may be nil: test sends then answer 503.
func NewService(st store.Store, catalog CatalogSource, sends *TestSender, now func() time.Time) *Service {
	return &Service{store: st, catalog: catalog, sends: sends, now: now}
}

// record is a stored document: the Document without its published body, which lives in
// its version item.
type record struct {
	Document
	// PublishedVersion and PublishedAt describe the newest version (0: never published).
	PublishedVersion int        `json:"published_version"`
	PublishedAt      *time.Time `json:"published_at"`
	bot              string
}

func (r record) summary() Document {
	d := r.Document
	d.Draft = nil
	if r.PublishedVersion > 0 {
		d.Published = &Version{Number: r.PublishedVersion, PublishedAt: *r.PublishedAt}
	}
	return d
}

func (r record) item() (store.Item, error) {
	b, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	return store.Item{
		Key:      documentKey(r.botID(), r.ID),
		GSI1:     store.IndexKey{PK: byTypePK(r.botID(), r.Type, r.Archived), SK: r.ID},
		GSI2:     store.IndexKey{PK: byStatePK(r.botID(), r.Archived), SK: r.ID},
		Revision: r.Revision,
		Data:     b,
	}, nil
}

// bot is kept on the record for its keys only.
func (r record) botID() string { return r.bot }

func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Millisecond) }

// NewDocument is a create request.
type NewDocument struct {
	Type       Type            `json:"type"`
	Name       string          `json:"name"`
	Draft      json.RawMessage `json:"draft"`
	TemplateID *string         `json:"template_id"`
}

// Create makes a document, from a template when TemplateID is given (its type and body are
// copied; a given type must match, a given draft replaces the template's members).
func (s *Service) Create(ctx context.Context, bot string, in NewDocument) (Document, error) {
	var p httpapi.Problems
	if in.TemplateID != nil {
		tpl, err := s.GetTemplate(ctx, bot, *in.TemplateID)
		if err != nil {
			if httpapi.KindOf(err) == httpapi.KindNotFound {
				p.Add("template_id", "no content template %q in this bot", *in.TemplateID)
				return Document{}, p.Err()
			}
			return Document{}, err
		}
		if in.Type != "" && in.Type != tpl.Type {
			p.Add("type", "is %s but template %s is a %s template", in.Type, tpl.ID, tpl.Type)
			return Document{}, p.Err()
		}
		in.Type = tpl.Type
		body := tpl.Body
		if in.Draft != nil {
			merged, err := mergeDraft(body, in.Draft)
			if err != nil {
				return Document{}, err
			}
			body = merged
		}
		in.Draft = body
		if in.Name == "" {
			in.Name = tpl.Name
		}
	}
	if !validType(in.Type) {
		p.Add("type", "must be one of message, email, push")
		return Document{}, p.Err()
	}
	checkName(&p, "name", in.Name)
	if in.Draft == nil {
		in.Draft = emptyBody(in.Type)
	}
	body, err := decodeBody(in.Type, in.Draft, "draft")
	if err != nil {
		return Document{}, err
	}
	checkShape(&p, body, "draft")
	if err := p.Err(); err != nil {
		return Document{}, err
	}
	draft, err := encodeDraft(body, "draft")
	if err != nil {
		return Document{}, err
	}
	now := stamp(s.now())
	rec := record{Document: Document{ID: ids.At("doc", now), Type: in.Type, Name: in.Name, Draft: draft, Revision: 1,
		TemplateID: in.TemplateID, CreatedAt: now, UpdatedAt: now}, bot: bot}
	it, err := rec.item()
	if err != nil {
		return Document{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot, "DOC"), 1, func(c store.Counter) error {
		if c.Count >= MaxDocuments {
			return httpapi.Errorf(httpapi.KindConflict, "limit_reached", "a bot has at most %d content documents; archive is not deletion, so reuse documents", MaxDocuments).
				With("limit", MaxDocuments)
		}
		return s.store.Transact(ctx, []store.Write{c.Write, store.PutOp(it, store.MustNotExist)})
	})
	if err != nil {
		return Document{}, fmt.Errorf("create document: %w", err)
	}
	return rec.Document, nil
}

func validType(t Type) bool { return t == TypeMessage || t == TypeEmail || t == TypePush }

func checkName(p *httpapi.Problems, field, name string) {
	switch {
	case strings.TrimSpace(name) == "":
		p.Add(field, "is required")
	case len([]rune(name)) > MaxNameLen:
		p.Add(field, "at most %d characters", MaxNameLen)
	default:
		p.Text(field, name, text.Name)
	}
}

// load reads a stored document.
func (s *Service) load(ctx context.Context, bot, id string) (record, error) {
	it, err := s.store.Get(ctx, documentKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return record{}, httpapi.NotFound("content document")
	}
	if err != nil {
		return record{}, err
	}
	rec, err := store.Decode[record](it)
	rec.bot = bot
	return rec, err
}

// Get returns a document with its draft and its newest published version's body.
func (s *Service) Get(ctx context.Context, bot, id string) (Document, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Document{}, err
	}
	return s.full(ctx, rec)
}

func (s *Service) full(ctx context.Context, rec record) (Document, error) {
	d := rec.Document
	if rec.PublishedVersion > 0 {
		v, err := s.version(ctx, rec.bot, rec.ID, rec.PublishedVersion)
		if err != nil {
			return Document{}, err
		}
		d.Published = &v
	}
	return d, nil
}

func (s *Service) version(ctx context.Context, bot, id string, n int) (Version, error) {
	it, err := s.store.Get(ctx, versionKey(bot, id, n))
	if err != nil {
		return Version{}, fmt.Errorf("read version %d of %s: %w", n, id, err)
	}
	return store.Decode[Version](it)
}

// Filter narrows a document list.
type Filter struct {
	Type     Type
	Archived bool
}

// List returns a page of the bot's documents as summaries (no bodies), oldest first.
func (s *Service) List(ctx context.Context, bot string, f Filter, limit int, cursor string) ([]Document, string, error) {
	q := store.Query{Index: store.GSI2, PK: byStatePK(bot, f.Archived), Limit: limit, Cursor: cursor}
	if f.Type != "" {
		q = store.Query{Index: store.GSI1, PK: byTypePK(bot, f.Type, f.Archived), Limit: limit, Cursor: cursor}
	}
	page, err := s.store.Query(ctx, q)
	if err != nil {
		return nil, "", err
	}
	out := make([]Document, 0, len(page.Items))
	for _, it := range page.Items {
		rec, err := store.Decode[record](it)
		if err != nil {
			return nil, "", err
		}
		rec.bot = bot
		out = append(out, rec.summary())
	}
	return out, page.Next, nil
}

// update applies change to the document under expected_revision and writes it with extra
// writes in one transaction. Archived documents change no more (409 document_archived).
func (s *Service) update(ctx context.Context, bot, id string, expected int64, change func(*record) ([]store.Write, error)) (record, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return record{}, err
	}
	if rec.Revision != expected {
		return record{}, httpapi.StaleRevision(rec.Revision)
	}
	if rec.Archived {
		return record{}, httpapi.E(httpapi.KindConflict, "document_archived", "the document is archived and can no longer change; clone it to work on a copy")
	}
	extra, err := change(&rec)
	if err != nil {
		return record{}, err
	}
	rec.Revision++
	rec.UpdatedAt = stamp(s.now())
	it, err := rec.item()
	if err != nil {
		return record{}, err
	}
	err = s.store.Transact(ctx, append([]store.Write{store.PutOp(it, store.RevisionIs(expected))}, extra...))
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 0 {
		return record{}, s.stale(ctx, bot, id)
	}
	if err != nil {
		return record{}, fmt.Errorf("update document: %w", err)
	}
	return rec, nil
}

// stale is the 409 for a write that lost a race: with the revision that won.
func (s *Service) stale(ctx context.Context, bot, id string) error {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return err
	}
	return httpapi.StaleRevision(rec.Revision)
}

// UpdateDraft renames the document and/or applies a partial draft.
func (s *Service) UpdateDraft(ctx context.Context, bot, id string, expected int64, name *string, patch json.RawMessage) (Document, error) {
	rec, err := s.update(ctx, bot, id, expected, func(r *record) ([]store.Write, error) {
		var p httpapi.Problems
		if name != nil {
			checkName(&p, "name", *name)
			r.Name = *name
		}
		if patch != nil {
			merged, err := mergeDraft(r.Draft, patch)
			if err != nil {
				return nil, err
			}
			body, err := decodeBody(r.Type, merged, "draft")
			if err != nil {
				return nil, err
			}
			checkShape(&p, body, "draft")
			if err := p.Err(); err != nil {
				return nil, err
			}
			if r.Draft, err = encodeDraft(body, "draft"); err != nil {
				return nil, err
			}
		}
		return nil, p.Err()
	})
	if err != nil {
		return Document{}, err
	}
	return s.full(ctx, rec)
}

// Validation is validate's answer for a draft that can be published.
type Validation struct {
	Valid bool `json:"valid"`
	// MergeFields are the merge fields the draft uses.
	MergeFields []string `json:"merge_fields"`
	// Channels are the channel types a message was checked against.
	Channels []string `json:"channels,omitempty"`
}

// Validate checks the draft as publishing would: 422 content_invalid listing every problem.
func (s *Service) Validate(ctx context.Context, bot, id string) (Validation, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return Validation{}, err
	}
	body, cat, err := s.checked(ctx, rec)
	if err != nil {
		return Validation{}, err
	}
	v := Validation{Valid: true, MergeFields: mergeFieldsOf(body)}
	if rec.Type == TypeMessage {
		for _, c := range cat.Channels {
			v.Channels = append(v.Channels, string(c.Kind))
		}
	}
	return v, nil
}

// checked decodes the draft and checks it against the bot's catalog.
func (s *Service) checked(ctx context.Context, rec record) (any, Catalog, error) {
	body, err := decodeBody(rec.Type, rec.Draft, "draft")
	if err != nil {
		return nil, Catalog{}, err
	}
	cat, err := s.catalog.Catalog(ctx, rec.bot)
	if err != nil {
		return nil, Catalog{}, err
	}
	if err := check(rec.Type, body, cat).Unprocessable("content_invalid"); err != nil {
		return nil, Catalog{}, err
	}
	return body, cat, nil
}

// Publish freezes the draft as the next version, after the checks of Validate.
func (s *Service) Publish(ctx context.Context, bot, id string, expected int64) (Document, error) {
	var v Version
	rec, err := s.update(ctx, bot, id, expected, func(r *record) ([]store.Write, error) {
		if _, _, err := s.checked(ctx, *r); err != nil {
			return nil, err
		}
		now := stamp(s.now())
		v = Version{Number: r.PublishedVersion + 1, Body: r.Draft, PublishedAt: now}
		r.PublishedVersion, r.PublishedAt = v.Number, &now
		b, err := store.Encode(v)
		if err != nil {
			return nil, err
		}
		return []store.Write{store.PutOp(store.Item{Key: versionKey(bot, id, v.Number), Data: b, Revision: 1}, store.MustNotExist)}, nil
	})
	if err != nil {
		return Document{}, err
	}
	eventlog.Emit(ctx, s.events, s.log, fmt.Sprintf("content_published:%s:%s:%d", bot, id, v.Number), eventlog.Event{
		BotID: bot, Name: eventlog.ContentPublished, At: v.PublishedAt, Source: eventlog.SourceBuilder,
		Properties: map[string]any{"document_id": id, "type": string(rec.Type), "version": float64(v.Number)}})
	d := rec.Document
	d.Published = &v
	return d, nil
}

// Archive makes the document read-only and keeps it out of the default list. Its published
// versions stay readable (sends already made refer to them).
func (s *Service) Archive(ctx context.Context, bot, id string, expected int64) (Document, error) {
	rec, err := s.update(ctx, bot, id, expected, func(r *record) ([]store.Write, error) {
		now := stamp(s.now())
		r.Archived, r.ArchivedAt = true, &now
		return nil, nil
	})
	if err != nil {
		return Document{}, err
	}
	return s.full(ctx, rec)
}

// Clone copies a document's draft into a new document (never published, not archived).
func (s *Service) Clone(ctx context.Context, bot, id string, name *string) (Document, error) {
	src, err := s.load(ctx, bot, id)
	if err != nil {
		return Document{}, err
	}
	n := src.Name + " (copy)"
	if r := []rune(n); len(r) > MaxNameLen {
		n = string(r[:MaxNameLen])
	}
	if name != nil {
		n = *name
	}
	return s.Create(ctx, bot, NewDocument{Type: src.Type, Name: n, Draft: src.Draft})
}

// Published returns the newest published version of a document and its type, for senders
// (broadcasts, email campaigns, push). An archived document is not sendable: 404 for it as
// for a missing one; a never-published one is 409 document_not_published.
func (s *Service) Published(ctx context.Context, bot, id string) (Type, Version, error) {
	rec, err := s.load(ctx, bot, id)
	if err != nil {
		return "", Version{}, err
	}
	if rec.Archived {
		return "", Version{}, httpapi.NotFound("content document")
	}
	if rec.PublishedVersion == 0 {
		return "", Version{}, httpapi.E(httpapi.KindConflict, "document_not_published", "the content document has no published version; publish it first")
	}
	v, err := s.version(ctx, bot, id, rec.PublishedVersion)
	return rec.Type, v, err
}
