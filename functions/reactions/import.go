package reactions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
)

// ImportMode says what an import does.
type ImportMode string

// The import modes.
const (
	// ImportDryRun reports what create and replace would do and writes nothing.
	ImportDryRun ImportMode = "dry_run"
	// ImportCreate adds every reaction of the bundle; a name the bot already has is a conflict.
	ImportCreate ImportMode = "create"
	// ImportReplace adds the reactions whose names are new and replaces the bot's reactions
	// of the same name.
	ImportReplace ImportMode = "replace"
)

// Actions of an import report.
const (
	ActionCreate  = "create"
	ActionReplace = "replace"
	ActionReuse   = "reuse"
)

// Conflict kinds.
const (
	ConflictNameTaken    = "name_taken"
	ConflictFieldType    = "field_type"
	ConflictLimitReached = "limit_reached"
)

// ImportReport says what an import did (or, in a dry run, would do) with each part of the
// bundle, and what stands in the way.
type ImportReport struct {
	Mode    ImportMode `json:"mode"`
	Applied bool       `json:"applied"`
	// Reactions follow the bundle's order.
	Reactions []ImportedReaction `json:"reactions"`
	Labels    []ImportedLabel    `json:"labels"`
	Fields    []ImportedField    `json:"fields"`
	// Conflicts are what refuses the import in the modes each names; empty when applied.
	Conflicts []ImportConflict `json:"conflicts"`
	// Warnings are what the import does not refuse but that will not work in this bot as
	// things stand: send_template steps of published content whose template the bot's
	// WhatsApp catalog lacks or has not approved (checkTemplates), with their paths.
	Warnings []httpapi.FieldError `json:"warnings"`
}

// ImportedReaction is the fate of one bundle reaction.
type ImportedReaction struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	// Action is create (a new reaction) or replace (the bot's reaction of the same name gets
	// the bundle's draft; in create mode that is a conflict instead).
	Action string `json:"action"`
	// ReactionID is the reaction written (replace: the existing one); null in a dry run of a create.
	ReactionID *string `json:"reaction_id"`
	// PublishedVersion is the version the import publishes from the bundle's published
	// content, null when the bundle has none.
	PublishedVersion *int64 `json:"published_version"`
}

// ImportedLabel is the fate of one declared label.
type ImportedLabel struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	// Action is reuse (the bot has a label of that name) or create.
	Action  string  `json:"action"`
	LabelID *string `json:"label_id"`
}

// ImportedField is the fate of one declared field.
type ImportedField struct {
	Key  string    `json:"key"`
	Name string    `json:"name"`
	Type FieldType `json:"type"`
	// Action is reuse (the bot has a field of that name and type) or create.
	Action  string  `json:"action"`
	FieldID *string `json:"field_id"`
}

// ImportConflict is one reason an import is refused.
type ImportConflict struct {
	// Kind is name_taken, field_type or limit_reached.
	Kind string `json:"kind"`
	// Blocks lists the modes it refuses: name_taken blocks create only.
	Blocks  []ImportMode `json:"blocks"`
	Message string       `json:"message"`
	// Key is the bundle key of the reaction or field concerned.
	Key  string `json:"key,omitempty"`
	Name string `json:"name,omitempty"`
	// ReactionID is the bot's reaction that holds the name (name_taken).
	ReactionID string `json:"reaction_id,omitempty"`
	// FieldID, Type and ExistingType describe a field_type conflict: the bot's field of the
	// name has ExistingType, the bundle declares Type.
	FieldID      string    `json:"field_id,omitempty"`
	Type         FieldType `json:"type,omitempty"`
	ExistingType FieldType `json:"existing_type,omitempty"`
}

func (c ImportConflict) blocks(m ImportMode) bool { return slices.Contains(c.Blocks, m) }

func importConflict(rep ImportReport, mode ImportMode) error {
	var blocking []ImportConflict
	for _, c := range rep.Conflicts {
		if c.blocks(mode) {
			blocking = append(blocking, c)
		}
	}
	return httpapi.Errorf(httpapi.KindConflict, "import_conflict", "%s: %s (%d conflict(s) in all); nothing was imported",
		mode, blocking[0].Message, len(blocking)).With("conflicts", blocking)
}

// plan is an import worked out against the bot as read: each bundle reaction's existing
// reaction (replace), the bot's labels and fields by name.
type plan struct {
	report   ImportReport
	existing []*record // per bundle reaction: the bot's reaction of the same name, or nil
	reg      *registry
}

// Import imports a bundle into the bot, all or nothing. The bundle is checked first (400 for
// its shape, 422 for its flows, with paths under "bundle."); then it is matched against the
// bot: reactions by name, labels by name ignoring case, fields by name and type. A dry run
// stops there and reports. Otherwise a blocking conflict is 409 import_conflict; else
// missing labels and fields are created (idempotently, by name), and every reaction is
// written in one transaction with the registry: all of them or none. Labels and fields
// created for an import whose transaction then fails stay (unused); a retry reuses them.
func (s *Service) Import(ctx context.Context, bot string, mode ImportMode, b Bundle) (ImportReport, error) {
	uses, err := b.check("bundle.")
	if err != nil {
		return ImportReport{}, err
	}
	// Only published content runs: its templates are checked, as a publish would, but
	// without refusing. A bundle is portable, and the catalog of the bot it lands in is
	// often synced after the import.
	var published []templateUse
	for _, u := range uses {
		published = append(published, u.published.templates...)
	}
	var none report
	warnings, err := s.checkTemplates(ctx, bot, published, &none, false)
	if err != nil {
		return ImportReport{}, err
	}
	if warnings == nil {
		warnings = []httpapi.FieldError{}
	}
	for range writeAttempts {
		p, err := s.plan(ctx, bot, mode, b)
		if err != nil {
			return ImportReport{}, err
		}
		p.report.Warnings = warnings
		if mode == ImportDryRun {
			return p.report, nil
		}
		for _, c := range p.report.Conflicts {
			if c.blocks(mode) {
				return p.report, importConflict(p.report, mode)
			}
		}
		m, err := s.ensureVocabulary(ctx, bot, b, &p.report)
		if err != nil {
			return ImportReport{}, err
		}
		if len(b.Reactions) == 0 {
			p.report.Applied = true
			return p.report, nil
		}
		writes, err := s.importWrites(bot, b, uses, &p, m)
		if err != nil {
			return ImportReport{}, err
		}
		err = s.store.Transact(ctx, writes)
		var ce *store.ConditionError
		if errors.As(err, &ce) {
			// The registry, or a reaction being replaced, moved since it was read: plan again.
			continue
		}
		if err != nil {
			return ImportReport{}, fmt.Errorf("import reactions: %w", err)
		}
		p.report.Applied = true
		p.report.Conflicts = []ImportConflict{}
		var created []string
		for i := range b.Reactions {
			if p.existing[i] == nil && p.report.Reactions[i].ReactionID != nil {
				created = append(created, *p.report.Reactions[i].ReactionID)
			}
		}
		s.indexCreated(ctx, bot, created)
		return p.report, nil
	}
	return ImportReport{}, busy()
}

// plan matches the bundle against the bot as it is now.
func (s *Service) plan(ctx context.Context, bot string, mode ImportMode, b Bundle) (plan, error) {
	reg, err := s.loadRegistry(ctx, bot)
	if err != nil {
		return plan{}, err
	}
	p := plan{
		reg:      reg,
		existing: make([]*record, len(b.Reactions)),
		report: ImportReport{Mode: mode, Reactions: []ImportedReaction{}, Labels: []ImportedLabel{},
			Fields: []ImportedField{}, Conflicts: []ImportConflict{}},
	}
	creates := 0
	for i, br := range b.Reactions {
		ir := ImportedReaction{Key: br.Key, Name: br.Draft.Name, Action: ActionCreate}
		if holder := reg.holder(br.Draft.Name); holder != "" {
			rec, err := s.get(ctx, bot, holder)
			if err != nil {
				return plan{}, err
			}
			p.existing[i] = &rec
			ir.Action, ir.ReactionID = ActionReplace, &rec.ID
			p.report.Conflicts = append(p.report.Conflicts, ImportConflict{
				Kind: ConflictNameTaken, Blocks: []ImportMode{ImportCreate}, Key: br.Key, Name: br.Draft.Name, ReactionID: rec.ID,
				Message: fmt.Sprintf("the bot already has a reaction named %q (replace mode replaces it)", br.Draft.Name),
			})
			if br.Published != nil {
				n := int64(1)
				if rec.PublishedVersion != nil {
					n = *rec.PublishedVersion + 1
				}
				ir.PublishedVersion = &n
			}
		} else {
			creates++
			if br.Published != nil {
				one := int64(1)
				ir.PublishedVersion = &one
			}
		}
		p.report.Reactions = append(p.report.Reactions, ir)
	}
	if creates > 0 && len(reg.Names)+creates > MaxReactionsPerBot {
		p.report.Conflicts = append(p.report.Conflicts, ImportConflict{
			Kind: ConflictLimitReached, Blocks: []ImportMode{ImportCreate, ImportReplace},
			Message: fmt.Sprintf("the bot has %d reactions; %d more would pass the limit of %d", len(reg.Names), creates, MaxReactionsPerBot),
		})
	}

	if len(b.Labels) > 0 {
		labels, err := s.vocab.Labels(ctx, bot)
		if err != nil {
			return plan{}, fmt.Errorf("reactions: read labels: %w", err)
		}
		byName := map[string]string{}
		for _, l := range labels {
			byName[strings.ToLower(l.Name)] = l.ID
		}
		for _, bl := range b.Labels {
			il := ImportedLabel{Key: bl.Key, Name: bl.Name, Action: ActionCreate}
			if id, ok := byName[strings.ToLower(bl.Name)]; ok {
				il.Action, il.LabelID = ActionReuse, &id
			}
			p.report.Labels = append(p.report.Labels, il)
		}
	}
	if len(b.Fields) > 0 {
		fields, err := s.vocab.Fields(ctx, bot)
		if err != nil {
			return plan{}, fmt.Errorf("reactions: read fields: %w", err)
		}
		byName := map[string]Field{}
		for _, f := range fields {
			byName[f.Name] = f
		}
		for _, bf := range b.Fields {
			imf := ImportedField{Key: bf.Key, Name: bf.Name, Type: bf.Type, Action: ActionCreate}
			if f, ok := byName[bf.Name]; ok {
				imf.Action, imf.FieldID = ActionReuse, &f.ID
				if f.Type != bf.Type {
					p.report.Conflicts = append(p.report.Conflicts, ImportConflict{
						Kind: ConflictFieldType, Blocks: []ImportMode{ImportCreate, ImportReplace}, Key: bf.Key, Name: bf.Name,
						FieldID: f.ID, Type: bf.Type, ExistingType: f.Type,
						Message: fmt.Sprintf("the bot's field %q is of type %s, the bundle's of type %s", bf.Name, f.Type, bf.Type),
					})
				}
			}
			p.report.Fields = append(p.report.Fields, imf)
		}
	}
	return p, nil
}

// mapping turns bundle keys into the bot's ids.
type mapping struct {
	labels, fields, reactions map[string]string
}

// ensureVocabulary creates the bundle's labels and fields the bot lacks and returns the ids
// of all of them, filling them into the report.
func (s *Service) ensureVocabulary(ctx context.Context, bot string, b Bundle, rep *ImportReport) (mapping, error) {
	m := mapping{labels: map[string]string{}, fields: map[string]string{}, reactions: map[string]string{}}
	if len(b.Labels) > 0 {
		names := make([]string, len(b.Labels))
		for i, l := range b.Labels {
			names[i] = l.Name
		}
		got, err := s.vocab.EnsureLabels(ctx, bot, names)
		if err != nil {
			return m, err
		}
		for i, l := range b.Labels {
			id, ok := got[l.Name]
			if !ok {
				return m, fmt.Errorf("reactions: the vocabulary returned no id for label %q", l.Name)
			}
			m.labels[l.Key] = id
			rep.Labels[i].LabelID = &id
		}
	}
	if len(b.Fields) > 0 {
		specs := make([]Field, len(b.Fields))
		for i, f := range b.Fields {
			specs[i] = Field{Name: f.Name, Type: f.Type}
		}
		got, err := s.vocab.EnsureFields(ctx, bot, specs)
		if errors.Is(err, ErrFieldTypeConflict) {
			return m, httpapi.E(httpapi.KindConflict, "import_conflict",
				"a custom field of the bundle was created meanwhile with another type; nothing was imported").
				With("conflicts", []ImportConflict{})
		}
		if err != nil {
			return m, err
		}
		for i, f := range b.Fields {
			id, ok := got[f.Name]
			if !ok {
				return m, fmt.Errorf("reactions: the vocabulary returned no id for field %q", f.Name)
			}
			m.fields[f.Key] = id
			rep.Fields[i].FieldID = &id
		}
	}
	return m, nil
}

// importWrites builds the one transaction of an import: the registry first, then per bundle
// reaction its record and, when the bundle has published content, its new version.
func (s *Service) importWrites(bot string, b Bundle, bu []bundleUses, p *plan, m mapping) ([]store.Write, error) {
	now := s.now().UTC()
	at := now.Truncate(time.Second)
	for i, br := range b.Reactions {
		if ex := p.existing[i]; ex != nil {
			m.reactions[br.Key] = ex.ID
		} else {
			// Ids a nanosecond apart keep the bundle's order as the bot's (oldest-first) order.
			m.reactions[br.Key] = ids.At("rct", now.Add(time.Duration(i)))
		}
	}
	refsOf := func(u uses, self string) []string {
		out := []string{}
		for _, key := range outgoing(u, self) {
			out = append(out, m.reactions[key])
		}
		slices.Sort(out)
		return out
	}
	reg := p.reg
	writes := make([]store.Write, 1, 1+2*len(b.Reactions))
	var versions []store.Write
	for i, br := range b.Reactions {
		id := m.reactions[br.Key]
		draft := m.content(br.Draft)
		draftRefs := refsOf(bu[i].draft, br.Key)
		var rec record
		var cond store.Condition
		if ex := p.existing[i]; ex != nil {
			rec, cond = *ex, store.RevisionIs(ex.Revision)
			rec.Content = draft
			rec.Revision++
			rec.UpdatedAt = at
		} else {
			rec = record{Reaction: Reaction{ID: id, Content: draft, Revision: 1, CreatedAt: at, UpdatedAt: at}}
			cond = store.MustNotExist
			reg.Names[nameKey(draft.Name)] = id
		}
		if br.Published != nil {
			pub := m.content(*br.Published)
			n := *p.report.Reactions[i].PublishedVersion
			rec.PublishedVersion, rec.PublishedAt = &n, &at
			rec.PublishedRefs = refsOf(bu[i].published, br.Key)
			// A published version equal to the draft leaves nothing unpublished.
			rec.PublishedRevision = 0
			if sameContent(pub, draft) {
				rec.PublishedRevision = rec.Revision
			}
			vit, err := versionItem(bot, Version{ReactionID: id, Version: n, Content: pub, DraftRevision: rec.Revision, PublishedAt: at})
			if err != nil {
				return nil, err
			}
			versions = append(versions, store.PutOp(vit, store.MustNotExist))
		}
		refs := union(rec.PublishedRefs, draftRefs)
		reg.move(rec.Refs, refs)
		rec.Refs = refs
		it, err := rec.item(bot)
		if err != nil {
			return nil, err
		}
		writes = append(writes, store.PutOp(it, cond))
		p.report.Reactions[i].ReactionID = &rec.ID
	}
	w, err := reg.write(bot)
	if err != nil {
		return nil, err
	}
	writes[0] = w
	writes = append(writes, versions...)
	if len(versions) > 0 {
		// 1 + 2 × 49 writes above at most, so the transaction still fits its 100.
		writes = append(writes, bumpPublished(bot))
	}
	return writes, nil
}

// content returns c with its bundle keys replaced by the bot's ids.
func (m mapping) content(c Content) Content {
	out := c
	if c.Trigger.LabelID != "" {
		out.Trigger.LabelID = m.labels[c.Trigger.LabelID]
	}
	out.Trigger.Keywords = slices.Clone(c.Trigger.Keywords)
	out.Steps = make([]Step, len(c.Steps))
	for i, s := range c.Steps {
		if s.LabelID != "" {
			s.LabelID = m.labels[s.LabelID]
		}
		if s.FieldID != "" {
			s.FieldID = m.fields[s.FieldID]
		}
		if s.ReactionID != "" {
			s.ReactionID = m.reactions[s.ReactionID]
		}
		s.Buttons = slices.Clone(s.Buttons)
		s.Params = slices.Clone(s.Params)
		for k, p := range s.Params {
			if p.FieldID != "" {
				s.Params[k].FieldID = m.fields[p.FieldID]
			}
		}
		s.Conditions = slices.Clone(s.Conditions)
		for k, cond := range s.Conditions {
			if cond.LabelID != "" {
				s.Conditions[k].LabelID = m.labels[cond.LabelID]
			}
			if cond.FieldID != "" {
				s.Conditions[k].FieldID = m.fields[cond.FieldID]
			}
		}
		out.Steps[i] = s
	}
	return out
}
