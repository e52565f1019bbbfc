package reactions

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// FormatVersion is the bundle format this server writes and reads.
const FormatVersion = 1

// Bounds of a bundle an import accepts.
const (
	// MaxBundleReactions keeps one import one transaction: the registry plus, per reaction,
	// its record and at most one new version: 1 + 2*49 = 99 of store.MaxTransactWrites (the
	// 100th is the bot's publication counter, moved when the import publishes).
	MaxBundleReactions = (store.MaxTransactWrites - 1) / 2
	// MaxBundleLabels and MaxBundleFields bound the vocabulary a bundle declares.
	MaxBundleLabels = 1000
	MaxBundleFields = 200
	// MaxBundleKeyLen bounds a bundle-local key.
	MaxBundleKeyLen = 64
	// MaxLabelNameLen and MaxFieldNameLen are the subscribers family's bounds on the names
	// of labels and fields, checked here so that a bundle fails with its own paths.
	MaxLabelNameLen = 50
	MaxFieldNameLen = 64
)

// fieldNameRe is the subscribers family's form of a field name: lower_snake_case.
var fieldNameRe = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// Bundle is a self-contained, portable copy of reactions: every reference inside it is to a
// bundle-local key (reactions) or to a label or field declared in it by name, so that it can
// be imported into any bot. Exports use the ids of the exporting bot as keys.
type Bundle struct {
	FormatVersion int              `json:"format_version"`
	Reactions     []BundleReaction `json:"reactions"`
	Labels        []BundleLabel    `json:"labels"`
	Fields        []BundleField    `json:"fields"`
}

// BundleReaction is one reaction of a bundle: its draft and, when it has one, its newest
// published version. Steps refer to other reactions by their Key, and to labels and fields
// by the Key of their declaration in the bundle.
type BundleReaction struct {
	Key       string   `json:"key"`
	Draft     Content  `json:"draft"`
	Published *Content `json:"published"`
}

// BundleLabel declares a label the bundle's reactions use; the importing bot's label of the
// same name (ignoring case) is used, or one is created.
type BundleLabel struct {
	Key  string `json:"key"`
	Name string `json:"name"`
}

// BundleField declares a custom field the bundle's reactions use; the importing bot's field
// of the same name is used if it has the same type (another type is a conflict), or one is
// created.
type BundleField struct {
	Key  string    `json:"key"`
	Name string    `json:"name"`
	Type FieldType `json:"type"`
}

// checkKey adds a problem with a bundle-local key to r and records it in seen.
func checkKey(r *report, path, key string, seen map[string]int, what string, i int) {
	switch {
	case key == "":
		r.shape.Add(path, "is required")
	case len(key) > MaxBundleKeyLen || !stepIDRe.MatchString(key):
		r.shape.Add(path, "must be 1 to %d characters of A-Z a-z 0-9 _ -", MaxBundleKeyLen)
	default:
		if j, dup := seen[key]; dup {
			r.shape.Add(path, "repeats the key of %s[%d]", what, j)
			return
		}
		seen[key] = i
	}
}

// bundleUses are the references of one bundle reaction's draft and published content.
type bundleUses struct {
	draft, published uses
}

// check normalizes and validates the bundle on its own, with paths under prefix: its shape
// (400), then every reference against the bundle's own declarations (422).
func (b *Bundle) check(prefix string) ([]bundleUses, error) {
	var r report
	if b.FormatVersion != FormatVersion {
		r.shape.Add(prefix+"format_version", "must be %d, the bundle format this server reads", FormatVersion)
	}
	switch {
	case len(b.Reactions) > MaxBundleReactions:
		r.shape.Add(prefix+"reactions", "must have at most %d reactions (one import is one transaction); import a larger export in parts", MaxBundleReactions)
	case len(b.Labels) > MaxBundleLabels:
		r.shape.Add(prefix+"labels", "must have at most %d labels", MaxBundleLabels)
	case len(b.Fields) > MaxBundleFields:
		r.shape.Add(prefix+"fields", "must have at most %d fields", MaxBundleFields)
	}
	if len(r.shape) > 0 {
		return nil, r.err()
	}

	w := world{
		labels: map[string]bool{}, fields: map[string]FieldType{},
		labelWhere: "among bundle.labels", fieldWhere: "among bundle.fields", reactionWhere: "among bundle.reactions",
	}
	keys, names := map[string]int{}, map[string]int{}
	for i := range b.Labels {
		l := &b.Labels[i]
		lp := fmt.Sprintf("%slabels[%d]", prefix, i)
		checkKey(&r, lp+".key", l.Key, keys, "labels", i)
		l.Name = strings.TrimSpace(l.Name)
		checkVocabularyName(&r, lp+".name", l.Name, MaxLabelNameLen, names, "labels", i)
		w.labels[l.Key] = true
	}
	keys, names = map[string]int{}, map[string]int{}
	for i := range b.Fields {
		f := &b.Fields[i]
		fp := fmt.Sprintf("%sfields[%d]", prefix, i)
		checkKey(&r, fp+".key", f.Key, keys, "fields", i)
		f.Name = strings.TrimSpace(f.Name)
		checkVocabularyName(&r, fp+".name", f.Name, MaxFieldNameLen, names, "fields", i)
		if f.Name != "" && !fieldNameRe.MatchString(f.Name) {
			r.shape.Add(fp+".name", "must be lower_snake_case: a lower-case letter, then lower-case letters, digits and single underscores")
		}
		if !f.Type.Known() {
			r.shape.Add(fp+".type", "must be one of string, number, boolean, datetime")
		}
		w.fields[f.Key] = f.Type
	}

	keys, names = map[string]int{}, map[string]int{}
	out := make([]bundleUses, len(b.Reactions))
	for i := range b.Reactions {
		br := &b.Reactions[i]
		rp := fmt.Sprintf("%sreactions[%d]", prefix, i)
		checkKey(&r, rp+".key", br.Key, keys, "reactions", i)
		for _, c := range []*Content{&br.Draft, br.Published} {
			if c != nil {
				c.normalize()
				if c.Steps == nil {
					c.Steps = []Step{}
				}
			}
		}
		if k := strings.ToLower(br.Draft.Name); br.Draft.Name != "" {
			if j, dup := names[k]; dup {
				r.shape.Add(rp+".draft.name", "repeats the name of reactions[%d] (names are unique per bot, ignoring case)", j)
			} else {
				names[k] = i
			}
		}
		out[i].draft = br.Draft.check(&r, rp+".draft.", br.Key)
		if br.Published != nil {
			out[i].published = br.Published.check(&r, rp+".published.", br.Key)
			if len(br.Published.Steps) == 0 {
				r.flaws.Add(rp+".published.steps", "a published version has at least one step")
			}
		}
	}
	if len(r.shape) > 0 {
		return nil, r.err()
	}
	w.reaction = func(key string) (bool, error) { _, ok := keys[key]; return ok, nil }
	for _, u := range out {
		for _, x := range []uses{u.draft, u.published} {
			if err := x.resolve(&r, w); err != nil {
				return nil, err
			}
		}
	}
	return out, r.err()
}

func checkVocabularyName(r *report, path, name string, max int, seen map[string]int, what string, i int) {
	switch {
	case name == "":
		r.shape.Add(path, "is required")
	case utf8.RuneCountInString(name) > max:
		r.shape.Add(path, "must be at most %d characters", max)
	case !r.shape.Text(path, name, text.Name):
	default:
		k := strings.ToLower(name)
		if j, dup := seen[k]; dup {
			r.shape.Add(path, "repeats the name of %s[%d] (ignoring case)", what, j)
			return
		}
		seen[k] = i
	}
}

// all reads every reaction record of the bot, oldest first.
func (s *Service) all(ctx context.Context, bot string) ([]record, error) {
	var out []record
	q := store.Query{PK: reactionsPK(bot), Prefix: "rct_", Limit: 100}
	for {
		page, err := s.store.Query(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			rec, err := store.Decode[record](it)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
		if page.Next == "" {
			return out, nil
		}
		q.Cursor = page.Next
	}
}

// Export returns the bot's reactions as a bundle: each reaction's draft and newest published
// version, and the labels and fields they use. With only, just those reactions and every
// reaction they go to (directly or not), so the bundle stays self-contained. Keys are the
// bot's ids. A label or field that a reaction uses but the bot no longer has cannot be
// exported by name: that is 409 dangling_references, listing where.
func (s *Service) Export(ctx context.Context, bot string, only []string) (Bundle, error) {
	recs, err := s.all(ctx, bot)
	if err != nil {
		return Bundle{}, err
	}
	if len(only) > 0 {
		if recs, err = closure(recs, only); err != nil {
			return Bundle{}, err
		}
	}
	b := Bundle{FormatVersion: FormatVersion, Reactions: []BundleReaction{}, Labels: []BundleLabel{}, Fields: []BundleField{}}
	// all collects every label and field use, with its path in the bundle.
	var all uses
	add := func(u uses, i int, part string) {
		for _, l := range u.labels {
			all.labels = append(all.labels, use{fmt.Sprintf("reactions[%d].%s.%s", i, part, l.path), l.id})
		}
		for _, f := range u.fields {
			f.path = fmt.Sprintf("reactions[%d].%s.%s", i, part, f.path)
			all.fields = append(all.fields, f)
		}
	}
	for i, rec := range recs {
		br := BundleReaction{Key: rec.ID, Draft: rec.Content}
		add(contentUses(br.Draft, rec.ID), i, "draft")
		if rec.PublishedVersion != nil {
			v, err := s.version(ctx, bot, rec.ID, *rec.PublishedVersion)
			if err != nil {
				return Bundle{}, err
			}
			br.Published = &v.Content
			add(contentUses(v.Content, rec.ID), i, "published")
		}
		b.Reactions = append(b.Reactions, br)
	}
	var dangling httpapi.Problems
	if len(all.labels) > 0 {
		labels, err := s.vocab.Labels(ctx, bot)
		if err != nil {
			return Bundle{}, fmt.Errorf("reactions: read labels: %w", err)
		}
		byID := map[string]Label{}
		for _, l := range labels {
			byID[l.ID] = l
		}
		seen := map[string]bool{}
		for _, u := range all.labels {
			l, ok := byID[u.id]
			switch {
			case !ok:
				dangling.Add(u.path, "label %q no longer exists in this bot", u.id)
			case !seen[u.id]:
				seen[u.id] = true
				b.Labels = append(b.Labels, BundleLabel{Key: l.ID, Name: l.Name})
			}
		}
	}
	if len(all.fields) > 0 {
		fields, err := s.vocab.Fields(ctx, bot)
		if err != nil {
			return Bundle{}, fmt.Errorf("reactions: read fields: %w", err)
		}
		byID := map[string]Field{}
		for _, f := range fields {
			byID[f.ID] = f
		}
		seen := map[string]bool{}
		for _, u := range all.fields {
			f, ok := byID[u.id]
			switch {
			case !ok:
				dangling.Add(u.path, "custom field %q no longer exists in this bot", u.id)
			case !seen[u.id]:
				seen[u.id] = true
				b.Fields = append(b.Fields, BundleField{Key: f.ID, Name: f.Name, Type: f.Type})
			}
		}
	}
	if len(dangling) > 0 {
		return Bundle{}, httpapi.Errorf(httpapi.KindConflict, "dangling_references",
			"%d reference(s) to labels or fields that no longer exist; fix these reactions (and publish them), then export again", len(dangling)).
			With("errors", []httpapi.FieldError(dangling))
	}
	// Declarations in name order: an import creates them in that order, so exporting the
	// import again lists them the same way.
	slices.SortFunc(b.Labels, func(x, y BundleLabel) int {
		return cmp.Or(cmp.Compare(strings.ToLower(x.Name), strings.ToLower(y.Name)), cmp.Compare(x.Name, y.Name))
	})
	slices.SortFunc(b.Fields, func(x, y BundleField) int { return cmp.Compare(x.Name, y.Name) })
	return b, nil
}

// contentUses returns what a stored (valid) content refers to.
func contentUses(c Content, self string) uses {
	var r report
	return c.check(&r, "", self)
}

// closure returns the records of only and of every reaction they reach through gotos, in
// the order of recs. An id that is not a reaction of the bot is a bad parameter.
func closure(recs []record, only []string) ([]record, error) {
	byID := map[string]record{}
	for _, r := range recs {
		byID[r.ID] = r
	}
	want := map[string]bool{}
	queue := []string{}
	for _, id := range only {
		if _, ok := byID[id]; !ok {
			return nil, httpapi.InvalidParam("reaction_id", fmt.Sprintf("%q is not a reaction of this bot", id))
		}
		if !want[id] {
			want[id] = true
			queue = append(queue, id)
		}
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, to := range byID[id].Refs {
			if _, ok := byID[to]; ok && !want[to] {
				want[to] = true
				queue = append(queue, to)
			}
		}
	}
	return slices.DeleteFunc(recs, func(r record) bool { return !want[r.ID] }), nil
}
