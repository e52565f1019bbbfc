package channels

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// Template is a message template of a WhatsApp channel as the API shows it: the local copy
// of the provider's catalog, refreshed by create, edit, sync and the provider's status
// webhook.
type Template struct {
	ID        string `json:"id"`
	ChannelID string `json:"channel_id"`
	Name      string `json:"name"`
	Language  string `json:"language"`
	// Category is marketing, utility or authentication.
	Category string `json:"category"`
	// Status is the provider's review status, in lower case (TemplateStatuses).
	Status string `json:"status"`
	// RejectionReason is the provider's reason for a rejection (INVALID_FORMAT, ...), else null.
	RejectionReason *string `json:"rejection_reason"`
	// Components are the template's parts in WhatsApp's format (HEADER, BODY, FOOTER, BUTTONS).
	Components json.RawMessage `json:"components"`
	// ProviderTemplateID is the template's id at the provider.
	ProviderTemplateID string    `json:"provider_template_id"`
	Revision           int64     `json:"revision"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

// Template statuses: the provider's, in lower case.
const (
	TemplatePending         = "pending"
	TemplateApproved        = "approved"
	TemplateRejected        = "rejected"
	TemplatePaused          = "paused"
	TemplateDisabled        = "disabled"
	TemplateInAppeal        = "in_appeal"
	TemplatePendingDeletion = "pending_deletion"
	TemplateLimitExceeded   = "limit_exceeded"
	TemplateArchived        = "archived"
)

// TemplateStatuses lists every status a template can have here.
func TemplateStatuses() []string {
	return []string{TemplatePending, TemplateApproved, TemplateRejected, TemplatePaused, TemplateDisabled,
		TemplateInAppeal, TemplatePendingDeletion, TemplateLimitExceeded, TemplateArchived}
}

// editable are the statuses in which WhatsApp lets a template be edited.
var editable = []string{TemplateApproved, TemplateRejected, TemplatePaused}

// templateRecord is a template as stored.
type templateRecord struct {
	Template
	BotID             string `json:"bot_id"`
	BusinessAccountID string `json:"business_account_id"`
}

// Keys. A bot's templates share one partition, sorted by channel and then by template id
// (creation time), so a channel's catalog is one range and a deleted bot's is one
// partition to erase. A pointer per provider template id keeps one local copy per
// provider template and channel; GSI2 finds the copies of a provider template from the
// status webhook, which names only the business account and the template.
func templatesPartition(bot string) string { return "BOT#" + bot + "#TEMPLATES" }

func channelTemplatesPrefix(ch string) string { return "CHANNEL#" + ch + "#" }

func templatePrefix(ch string) string { return channelTemplatesPrefix(ch) + "TEMPLATE#" }

func templateKey(bot, ch, id string) store.Key {
	return store.Key{PK: templatesPartition(bot), SK: templatePrefix(ch) + id}
}

func providerIDKey(bot, ch, providerID string) store.Key {
	return store.Key{PK: templatesPartition(bot), SK: channelTemplatesPrefix(ch) + "PID#" + providerID}
}

func providerIndex(waba, providerID, ch, id string) store.IndexKey {
	return store.IndexKey{PK: "WATEMPLATE#" + waba + "#" + providerID, SK: ch + "#" + id}
}

// templatePointer is what a provider id pointer holds.
type templatePointer struct {
	TemplateID string `json:"template_id"`
}

// templateAPI is what the templates need of a provider: the WhatsApp adapter. A channel
// whose adapter lacks it has no templates.
type templateAPI interface {
	Templates(ctx context.Context, conn channel.Connection) ([]whatsapp.Template, error)
	CreateTemplate(ctx context.Context, conn channel.Connection, t whatsapp.TemplateRequest) (whatsapp.CreatedTemplate, error)
	EditTemplate(ctx context.Context, conn channel.Connection, id string, e whatsapp.TemplateEdit) error
	DeleteTemplate(ctx context.Context, conn channel.Connection, id, name string) error
	UploadMedia(ctx context.Context, conn channel.Connection, up whatsapp.Upload) (string, error)
	FetchMedia(ctx context.Context, rawURL string) (*whatsapp.RemoteFile, error)
	Capabilities() channel.Capabilities
}

var _ templateAPI = (*whatsapp.Adapter)(nil)

// templateChannel is a channel with templates, ready for the provider.
type templateChannel struct {
	rec  record
	api  templateAPI
	conn channel.Connection
	waba string
}

// openTemplates loads the bot's channel id for a template operation: 404 for a channel that
// is not the bot's, 409 templates_not_supported for a type without templates. withConn also
// opens its credentials.
func (s *Service) openTemplates(ctx context.Context, bot, id string, withConn bool) (templateChannel, error) {
	rec, _, err := s.load(ctx, id)
	if err != nil {
		return templateChannel{}, err
	}
	if rec.BotID != bot {
		return templateChannel{}, errNotFound()
	}
	a, ok := s.adapters[rec.Type]
	api, hasTemplates := a.(templateAPI)
	if !ok || !hasTemplates {
		return templateChannel{}, httpapi.Errorf(httpapi.KindConflict, "templates_not_supported",
			"%s channels have no message templates; only whatsapp channels do", rec.Type)
	}
	tc := templateChannel{rec: rec, api: api}
	var settings whatsapp.Settings
	if err := json.Unmarshal(rec.Settings, &settings); err != nil {
		return templateChannel{}, fmt.Errorf("channel %s settings: %w", id, err)
	}
	tc.waba = settings.BusinessAccountID
	if withConn {
		r, err := s.open(ctx, rec)
		if err != nil {
			return templateChannel{}, err
		}
		tc.conn = r.Conn
	}
	return tc, nil
}

// templateProblem turns a provider failure of a template operation into the API's answer.
func templateProblem(err error) error {
	var ce *channel.Error
	errors.As(err, &ce)
	switch {
	case errors.Is(err, whatsapp.ErrNotConfigured):
		return httpapi.E(httpapi.KindUnavailable, "provider_unavailable",
			"this deployment has no Meta app configured for WhatsApp media uploads (WHATSAPP_APP_ID)").Wrap(err)
	case errors.Is(err, whatsapp.ErrTemplateExists):
		return httpapi.E(httpapi.KindConflict, "template_exists",
			"the WhatsApp Business Account already has a template with this name and language; sync the catalog to see it").Wrap(err)
	case errors.Is(err, channel.ErrInvalidCredentials):
		return httpapi.E(httpapi.KindUnprocessable, "credentials_rejected",
			"the provider refused the channel's credentials; connect the channel again with valid ones").Wrap(err)
	case errors.Is(err, channel.ErrRateLimited), errors.Is(err, channel.ErrUnavailable):
		e := httpapi.E(httpapi.KindUnavailable, "provider_unavailable", "the provider is unavailable or throttling; retry shortly").Wrap(err)
		if ce != nil && ce.RetryAfter >= time.Second {
			return &delayed{problem: e, after: int(ce.RetryAfter.Round(time.Second) / time.Second)}
		}
		return e
	case errors.Is(err, channel.ErrRejected) && ce != nil:
		return httpapi.Errorf(httpapi.KindUnprocessable, "template_rejected", "the provider refused the request: %s", ce.Message).
			With("provider_code", ce.Code).Wrap(err)
	}
	return err
}

// delayed is a problem with the wait the provider asked for, which the handler sends as
// Retry-After (the kernel's 503 default is 1 s).
type delayed struct {
	problem *httpapi.Error
	after   int // seconds
}

func (d *delayed) Error() string { return d.problem.Error() }
func (d *delayed) Unwrap() error { return d.problem }

// retryAfter sets Retry-After from a provider_unavailable problem that knows how long.
func retryAfter(w http.ResponseWriter, err error) error {
	var d *delayed
	if errors.As(err, &d) {
		w.Header().Set("Retry-After", strconv.Itoa(d.after))
	}
	return err
}

// apiCategory and apiStatus turn the provider's values into the API's.
func apiCategory(c string) string { return strings.ToLower(c) }

func apiStatus(s string) string {
	s = strings.ToLower(s)
	if slices.Contains(TemplateStatuses(), s) {
		return s
	}
	return TemplatePending // a status this API does not know yet: not usable, as pending
}

func reason(r string) *string {
	if r == "" || strings.EqualFold(r, "NONE") {
		return nil
	}
	return &r
}

// TemplateFilter narrows the catalog.
type TemplateFilter struct {
	Status   string
	Language string
}

// templateScanPage is how many items one store read of a catalog takes.
const templateScanPage = 200

// Templates returns one page of the channel's catalog, oldest first, filtered. after is the
// cursor of the previous page (the sort key of its last template).
func (s *Service) Templates(ctx context.Context, bot, channelID string, f TemplateFilter, limit int, after string) ([]Template, string, error) {
	if _, err := s.openTemplates(ctx, bot, channelID, false); err != nil {
		return nil, "", err
	}
	prefix := templatePrefix(channelID)
	from := prefix
	if after != "" {
		if !strings.HasPrefix(after, prefix) {
			return nil, "", store.ErrInvalidCursor
		}
		from = after
	}
	// Template ids are lower-case letters, digits and '_', all before '~'.
	q := store.Query{PK: templatesPartition(bot), From: from, To: prefix + "~", Limit: templateScanPage}
	out := []Template{}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, "", err
		}
		for i, it := range page.Items {
			if it.SK == after {
				continue
			}
			rec, err := store.Decode[templateRecord](it)
			if err != nil {
				return nil, "", err
			}
			if (f.Status != "" && rec.Status != f.Status) || (f.Language != "" && rec.Language != f.Language) {
				continue
			}
			rec.Revision = it.Revision
			out = append(out, rec.Template)
			if len(out) == limit {
				if i == len(page.Items)-1 && page.Next == "" {
					return out, "", nil
				}
				return out, it.SK, nil
			}
		}
		if page.Next == "" {
			return out, "", nil
		}
		q.Cursor = page.Next
	}
}

// allTemplates reads the channel's whole catalog.
func (s *Service) allTemplates(ctx context.Context, bot, ch string) ([]store.Item, error) {
	return catalogItems(ctx, s.store, bot, ch)
}

// catalogItems reads a channel's whole catalog from st.
func catalogItems(ctx context.Context, st store.Store, bot, ch string) ([]store.Item, error) {
	var items []store.Item
	q := store.Query{PK: templatesPartition(bot), Prefix: templatePrefix(ch)}
	for {
		page, err := st.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		items = append(items, page.Items...)
		if page.Next == "" {
			return items, nil
		}
		q.Cursor = page.Next
	}
}

// NewTemplate is a template to submit for review.
type NewTemplate struct {
	Name       string
	Language   string
	Category   string // marketing or utility
	Components []whatsapp.Component
}

// CreateTemplate submits a template to the provider for review and keeps it, pending.
func (s *Service) CreateTemplate(ctx context.Context, bot, channelID string, t NewTemplate) (Template, error) {
	tc, err := s.openTemplates(ctx, bot, channelID, true)
	if err != nil {
		return Template{}, err
	}
	created, err := tc.api.CreateTemplate(ctx, tc.conn, whatsapp.TemplateRequest{Name: t.Name, Language: t.Language,
		Category: strings.ToUpper(t.Category), Components: t.Components})
	if err != nil {
		return Template{}, templateProblem(err)
	}
	comps, err := json.Marshal(t.Components)
	if err != nil {
		return Template{}, err
	}
	at := s.now().UTC()
	now := at.Truncate(time.Second)
	rec := templateRecord{
		Template: Template{ID: ids.At("mtpl", at), ChannelID: channelID, Name: t.Name, Language: t.Language,
			Category: apiCategory(cmpOr(created.Category, t.Category)), Status: apiStatus(cmpOr(created.Status, "PENDING")),
			Components: comps, ProviderTemplateID: created.ID, Revision: 1, CreatedAt: now, UpdatedAt: now},
		BotID: bot, BusinessAccountID: tc.waba,
	}
	err = s.putNewTemplate(ctx, rec)
	var ce *store.ConditionError
	if errors.As(err, &ce) && ce.Index == 0 {
		// A sync running meanwhile found the new template at the provider and kept it first.
		return s.templateByProviderID(ctx, bot, channelID, created.ID)
	}
	if err != nil {
		// The provider has the template; the next sync brings it here.
		return Template{}, fmt.Errorf("store template %s created at the provider: %w", created.ID, err)
	}
	return rec.Template, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// putNewTemplate writes a template and its provider id pointer, both new.
func (s *Service) putNewTemplate(ctx context.Context, rec templateRecord) error {
	data, err := store.Encode(rec)
	if err != nil {
		return err
	}
	ptr, err := store.Encode(templatePointer{TemplateID: rec.ID})
	if err != nil {
		return err
	}
	return s.store.Transact(ctx, []store.Write{
		store.PutOp(store.Item{Key: providerIDKey(rec.BotID, rec.ChannelID, rec.ProviderTemplateID), Data: ptr, Revision: 1}, store.MustNotExist),
		store.PutOp(store.Item{Key: templateKey(rec.BotID, rec.ChannelID, rec.ID),
			GSI2: providerIndex(rec.BusinessAccountID, rec.ProviderTemplateID, rec.ChannelID, rec.ID), Data: data, Revision: rec.Revision}, store.MustNotExist),
	})
}

func (s *Service) templateByProviderID(ctx context.Context, bot, ch, providerID string) (Template, error) {
	it, err := s.store.Get(ctx, providerIDKey(bot, ch, providerID))
	if err != nil {
		return Template{}, err
	}
	p, err := store.Decode[templatePointer](it)
	if err != nil {
		return Template{}, err
	}
	rec, _, err := s.loadTemplate(ctx, bot, ch, p.TemplateID)
	return rec.Template, err
}

func (s *Service) loadTemplate(ctx context.Context, bot, ch, id string) (templateRecord, int64, error) {
	if !ids.Valid("mtpl", id) {
		return templateRecord{}, 0, httpapi.NotFound("template")
	}
	it, err := s.store.Get(ctx, templateKey(bot, ch, id))
	if errors.Is(err, store.ErrNotFound) {
		return templateRecord{}, 0, httpapi.NotFound("template")
	}
	if err != nil {
		return templateRecord{}, 0, err
	}
	rec, err := store.Decode[templateRecord](it)
	rec.Revision = it.Revision
	return rec, it.Revision, err
}

// TemplateChange is an edit: new components and, optionally, a new category.
type TemplateChange struct {
	ExpectedRevision int64
	Category         string // "" keeps it
	Components       []whatsapp.Component
}

// EditTemplate changes a template at the provider, which puts it back into review.
// WhatsApp edits only approved, rejected and paused templates, and never an approved
// template's category.
func (s *Service) EditTemplate(ctx context.Context, bot, channelID, id string, c TemplateChange) (Template, error) {
	tc, err := s.openTemplates(ctx, bot, channelID, true)
	if err != nil {
		return Template{}, err
	}
	rec, rev, err := s.loadTemplate(ctx, bot, channelID, id)
	if err != nil {
		return Template{}, err
	}
	if rev != c.ExpectedRevision {
		return Template{}, httpapi.StaleRevision(rev)
	}
	if !slices.Contains(editable, rec.Status) {
		return Template{}, httpapi.Errorf(httpapi.KindConflict, "template_not_editable",
			"a %s template cannot be edited; WhatsApp edits approved, rejected and paused templates", rec.Status)
	}
	if c.Category != "" && c.Category != rec.Category && rec.Status == TemplateApproved {
		return Template{}, httpapi.E(httpapi.KindConflict, "template_not_editable",
			"the category of an approved template cannot be changed; create a new template instead")
	}
	edit := whatsapp.TemplateEdit{Components: c.Components}
	if c.Category != "" && c.Category != rec.Category {
		edit.Category = strings.ToUpper(c.Category)
	}
	if err := tc.api.EditTemplate(ctx, tc.conn, rec.ProviderTemplateID, edit); err != nil {
		if errors.Is(err, whatsapp.ErrNotFound) {
			return Template{}, httpapi.E(httpapi.KindConflict, "template_not_editable",
				"the provider no longer has this template; sync the catalog").Wrap(err)
		}
		return Template{}, templateProblem(err)
	}
	comps, err := json.Marshal(c.Components)
	if err != nil {
		return Template{}, err
	}
	rec.Components, rec.Status, rec.RejectionReason = comps, TemplatePending, nil
	if c.Category != "" {
		rec.Category = c.Category
	}
	rec.Revision = rev + 1
	rec.UpdatedAt = s.now().UTC().Truncate(time.Second)
	if err := s.putTemplate(ctx, rec, rev); err != nil {
		return Template{}, err
	}
	return rec.Template, nil
}

// putTemplate replaces a template at revision rev with rec (at rec.Revision).
func (s *Service) putTemplate(ctx context.Context, rec templateRecord, rev int64) error {
	data, err := store.Encode(rec)
	if err != nil {
		return err
	}
	err = s.store.Put(ctx, store.Item{Key: templateKey(rec.BotID, rec.ChannelID, rec.ID),
		GSI2: providerIndex(rec.BusinessAccountID, rec.ProviderTemplateID, rec.ChannelID, rec.ID), Data: data, Revision: rec.Revision},
		store.RevisionIs(rev))
	if errors.Is(err, store.ErrConditionFailed) {
		_, curRev, lerr := s.loadTemplate(ctx, rec.BotID, rec.ChannelID, rec.ID)
		if lerr != nil {
			return lerr
		}
		return httpapi.StaleRevision(curRev)
	}
	return err
}

// DeleteTemplate deletes a template (this language version of it) at the provider and here.
// A template the provider no longer has is deleted here all the same.
func (s *Service) DeleteTemplate(ctx context.Context, bot, channelID, id string, expected *int64) error {
	tc, err := s.openTemplates(ctx, bot, channelID, true)
	if err != nil {
		return err
	}
	rec, rev, err := s.loadTemplate(ctx, bot, channelID, id)
	if err != nil {
		return err
	}
	if expected != nil && *expected != rev {
		return httpapi.StaleRevision(rev)
	}
	if err := tc.api.DeleteTemplate(ctx, tc.conn, rec.ProviderTemplateID, rec.Name); err != nil && !errors.Is(err, whatsapp.ErrNotFound) {
		return templateProblem(err)
	}
	cond := store.Always
	if expected != nil {
		cond = store.RevisionIs(rev)
	}
	err = s.store.Transact(ctx, []store.Write{
		store.DeleteOp(templateKey(bot, channelID, id), cond),
		store.DeleteOp(providerIDKey(bot, channelID, rec.ProviderTemplateID), store.Always),
	})
	if errors.Is(err, store.ErrConditionFailed) {
		// Changed meanwhile (a status webhook); it is gone at the provider: delete it anyway.
		return s.store.Transact(ctx, []store.Write{
			store.DeleteOp(templateKey(bot, channelID, id), store.Always),
			store.DeleteOp(providerIDKey(bot, channelID, rec.ProviderTemplateID), store.Always),
		})
	}
	return err
}

// SyncResult counts what a sync changed in the local catalog.
type SyncResult struct {
	Created   int `json:"created"`
	Updated   int `json:"updated"`
	Deleted   int `json:"deleted"`
	Unchanged int `json:"unchanged"`
}

// SyncTemplates pulls the provider's whole catalog, paging through it, and makes the local
// one equal: templates made elsewhere (WhatsApp Manager) are added, statuses, categories
// and components updated, templates deleted there removed here.
func (s *Service) SyncTemplates(ctx context.Context, bot, channelID string) (SyncResult, error) {
	var res SyncResult
	tc, err := s.openTemplates(ctx, bot, channelID, true)
	if err != nil {
		return res, err
	}
	remote, err := tc.api.Templates(ctx, tc.conn)
	if err != nil {
		return res, templateProblem(err)
	}
	items, err := s.allTemplates(ctx, bot, channelID)
	if err != nil {
		return res, err
	}
	local := map[string]store.Item{}
	for _, it := range items {
		rec, err := store.Decode[templateRecord](it)
		if err != nil {
			return res, err
		}
		local[rec.ProviderTemplateID] = it
	}
	now := s.now().UTC().Truncate(time.Second)
	seen := map[string]bool{}
	for _, t := range remote {
		if t.ID == "" || seen[t.ID] {
			continue
		}
		seen[t.ID] = true
		it, ok := local[t.ID]
		if !ok {
			rec := templateRecord{
				// Ids from the clock's full precision keep the catalog in creation order.
				Template: Template{ID: ids.At("mtpl", s.now()), ChannelID: channelID, Name: t.Name, Language: t.Language,
					Category: apiCategory(t.Category), Status: apiStatus(t.Status), RejectionReason: reason(t.RejectedReason),
					Components: components(t.Components), ProviderTemplateID: t.ID, Revision: 1, CreatedAt: now, UpdatedAt: now},
				BotID: bot, BusinessAccountID: tc.waba,
			}
			switch err := s.putNewTemplate(ctx, rec); {
			case errors.Is(err, store.ErrConditionFailed):
				res.Unchanged++ // created here meanwhile, by the create that made it
			case err != nil:
				return res, err
			default:
				res.Created++
			}
			continue
		}
		changed, err := s.updateTemplate(ctx, it.Key, func(rec *templateRecord) bool {
			next := *rec
			next.Name, next.Language, next.Category = t.Name, t.Language, apiCategory(t.Category)
			next.Status, next.RejectionReason = apiStatus(t.Status), reason(t.RejectedReason)
			next.Components = components(t.Components)
			if sameTemplate(*rec, next) {
				return false
			}
			*rec = next
			return true
		})
		switch {
		case err != nil:
			return res, err
		case changed:
			res.Updated++
		default:
			res.Unchanged++
		}
	}
	for pid, it := range local {
		if seen[pid] {
			continue
		}
		err := s.store.Transact(ctx, []store.Write{
			store.DeleteOp(it.Key, store.Always),
			store.DeleteOp(providerIDKey(bot, channelID, pid), store.Always),
		})
		if err != nil {
			return res, err
		}
		res.Deleted++
	}
	return res, nil
}

// components keeps the provider's components, [] when it sent none.
func components(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`[]`)
	}
	return raw
}

// sameTemplate compares what a sync may change, the components as JSON values (member
// order and spacing aside).
func sameTemplate(a, b templateRecord) bool {
	if a.Name != b.Name || a.Language != b.Language || a.Category != b.Category || a.Status != b.Status ||
		(a.RejectionReason == nil) != (b.RejectionReason == nil) ||
		(a.RejectionReason != nil && *a.RejectionReason != *b.RejectionReason) {
		return false
	}
	return canonical(a.Components) == canonical(b.Components)
}

func canonical(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(bytes.TrimSpace(raw))
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// updateTemplate applies change to the template at key and writes it when change reports
// a change, retrying when another writer moved the revision meanwhile. It reports whether
// it wrote; a template deleted meanwhile is no change.
func (s *Service) updateTemplate(ctx context.Context, key store.Key, change func(*templateRecord) bool) (bool, error) {
	for range 5 {
		it, err := s.store.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		rec, err := store.Decode[templateRecord](it)
		if err != nil {
			return false, err
		}
		rec.Revision = it.Revision
		if !change(&rec) {
			return false, nil
		}
		rec.Revision = it.Revision + 1
		rec.UpdatedAt = s.now().UTC().Truncate(time.Second)
		data, err := store.Encode(rec)
		if err != nil {
			return false, err
		}
		err = s.store.Put(ctx, store.Item{Key: key, GSI2: providerIndex(rec.BusinessAccountID, rec.ProviderTemplateID, rec.ChannelID, rec.ID),
			Data: data, Revision: rec.Revision}, store.RevisionIs(it.Revision))
		if errors.Is(err, store.ErrConditionFailed) {
			continue
		}
		return err == nil, err
	}
	return false, fmt.Errorf("update template %s: too many concurrent changes", key.SK)
}

// ApplyTemplateStatus records a review outcome or lifecycle change the provider announced
// (WhatsApp's message_template_status_update webhook, parsed by whatsapp.ParseEnvelope) on
// every local copy of the template: each channel of the business account that has it.
// DELETED removes the copies. A template no channel has yet, and an event this API does not
// know, change nothing: the next sync brings the catalog up to date. The webhooks family
// calls it after verifying the delivery's signature.
func (s *Service) ApplyTemplateStatus(ctx context.Context, st whatsapp.TemplateStatus) error {
	if st.BusinessAccountID == "" || st.ID == "" {
		return nil
	}
	event := strings.ToUpper(st.Status)
	status := ""
	switch event {
	case "DELETED":
	case "REINSTATED", "UNARCHIVED":
		status = TemplateApproved
	default:
		if s := strings.ToLower(event); slices.Contains(TemplateStatuses(), s) {
			status = s
		} else {
			return nil // FLAGGED and events to come: no status of their own
		}
	}
	q := store.Query{Index: store.GSI2, PK: "WATEMPLATE#" + st.BusinessAccountID + "#" + st.ID}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return err
		}
		for _, it := range page.Items {
			rec, err := store.Decode[templateRecord](it)
			if err != nil {
				return err
			}
			_, _, cerr := s.load(ctx, rec.ChannelID)
			if event == "DELETED" || isNotFound(cerr) {
				// Deleted at the provider, or left behind by a disconnected channel.
				if err := s.store.Transact(ctx, []store.Write{
					store.DeleteOp(it.Key, store.Always),
					store.DeleteOp(providerIDKey(rec.BotID, rec.ChannelID, rec.ProviderTemplateID), store.Always),
				}); err != nil {
					return err
				}
				continue
			}
			if cerr != nil {
				return cerr
			}
			if _, err := s.updateTemplate(ctx, it.Key, func(r *templateRecord) bool {
				why := reason(st.Reason)
				if status != TemplateRejected {
					why = nil
				}
				if r.Status == status && sameReason(r.RejectionReason, why) {
					return false
				}
				r.Status, r.RejectionReason = status, why
				return true
			}); err != nil {
				return err
			}
		}
		if page.Next == "" {
			return nil
		}
		q.Cursor = page.Next
	}
}

func sameReason(a, b *string) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

func isNotFound(err error) bool {
	var e *httpapi.Error
	return errors.As(err, &e) && e.Kind == httpapi.KindNotFound
}

// deleteChannelTemplates erases a channel's catalog (templates and pointers), in
// transactions of at most store.MaxTransactWrites deletes.
func (s *Service) deleteChannelTemplates(ctx context.Context, bot, ch string) error {
	q := store.Query{PK: templatesPartition(bot), Prefix: channelTemplatesPrefix(ch), Limit: store.MaxTransactWrites}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return err
		}
		if len(page.Items) == 0 {
			return nil
		}
		writes := make([]store.Write, 0, len(page.Items))
		for _, it := range page.Items {
			writes = append(writes, store.DeleteOp(it.Key, store.Always))
		}
		if err := s.store.Transact(ctx, writes); err != nil {
			return err
		}
		if page.Next == "" {
			return nil
		}
		// The deleted page is gone: read from the start of what is left.
		q.Cursor = ""
	}
}
