package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/store/sqlite"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

// canonical renames a bundle's keys by position (r0, l0, f0, ...) so that two bundles can be
// compared "up to ids".
func canonical(t *testing.T, b Bundle) string {
	t.Helper()
	m := mapping{labels: map[string]string{}, fields: map[string]string{}, reactions: map[string]string{}}
	for i, r := range b.Reactions {
		m.reactions[r.Key] = fmt.Sprintf("r%d", i)
	}
	for i, l := range b.Labels {
		m.labels[l.Key] = fmt.Sprintf("l%d", i)
	}
	for i, f := range b.Fields {
		m.fields[f.Key] = fmt.Sprintf("f%d", i)
	}
	out := Bundle{FormatVersion: b.FormatVersion}
	for _, r := range b.Reactions {
		br := BundleReaction{Key: m.reactions[r.Key], Draft: m.content(r.Draft)}
		if r.Published != nil {
			p := m.content(*r.Published)
			br.Published = &p
		}
		out.Reactions = append(out.Reactions, br)
	}
	for _, l := range b.Labels {
		out.Labels = append(out.Labels, BundleLabel{Key: m.labels[l.Key], Name: l.Name})
	}
	for _, f := range b.Fields {
		out.Fields = append(out.Fields, BundleField{Key: m.fields[f.Key], Name: f.Name, Type: f.Type})
	}
	js, err := json.MarshalIndent(out, "", " ")
	require.NoError(t, err)
	return string(js)
}

// seed gives the fixture's bot a small but complete set of reactions: labels and fields of
// every kind of use, gotos between reactions and to itself, a published version, a
// published version with later draft changes, and an unpublished reaction.
func seed(t *testing.T, f *fixture) []Reaction {
	t.Helper()
	ctx := t.Context()
	vip := f.vocab.label(f.bot, "VIP")
	lead := f.vocab.label(f.bot, "lead")
	f.vocab.label(f.bot, "unused") // not exported: no reaction uses it
	plan := f.vocab.field(f.bot, "plan", FieldString)
	score := f.vocab.field(f.bot, "score", FieldNumber)
	menu := f.create(t, `{"name":"Menu","trigger":{"type":"button","payload":"MENU"}}`)
	// The goto to itself needs the reaction's id: set the steps now.
	self := steps(t, fmt.Sprintf(`[
		{"id":"m","type":"buttons","style":"quick_replies","text":"Pick","buttons":[{"title":"Again","step_id":"m"},{"title":"Pro","payload":"PRO"}]},
		{"id":"w","type":"wait","seconds":60},
		{"id":"again","type":"goto","reaction_id":%q}]`, menu.ID))
	menu, err := f.svc.Update(ctx, f.bot, menu.ID, 1, Patch{Steps: &self})
	require.NoError(t, err)
	menu, err = f.svc.Publish(ctx, f.bot, menu.ID, menu.Revision)
	require.NoError(t, err)

	welcome := f.create(t, fmt.Sprintf(`{"name":"Welcome","trigger":{"type":"start"},"steps":[
		{"id":"hi","type":"send_text","text":"Hi!"},
		{"id":"img","type":"send_media","media_type":"image","url":"https://example.com/a.png"},
		{"id":"tag","type":"add_label","label_id":%[1]q},
		{"id":"set","type":"set_field","field_id":%[3]q,"value":"free"},
		{"id":"tpl","type":"send_template","template_name":"welcome_back","template_language":"en","params":[{"field_id":%[3]q,"default":"free"},{"text":"today"}],"fallback_text":"Welcome back!"},
		{"id":"if","type":"condition","conditions":[{"field_id":%[4]q,"op":"gt","value":10},{"label_id":%[2]q,"op":"has"}],"then":"menu","else":"end"},
		{"id":"menu","type":"goto","reaction_id":%[5]q},
		{"id":"end","type":"end"}]}`, vip, lead, plan, score, menu.ID))
	welcome, err = f.svc.Publish(ctx, f.bot, welcome.ID, 1)
	require.NoError(t, err)
	changed := steps(t, fmt.Sprintf(`[{"id":"hi","type":"send_text","text":"Hello!"},{"id":"menu","type":"goto","reaction_id":%q}]`, menu.ID))
	welcome, err = f.svc.Update(ctx, f.bot, welcome.ID, welcome.Revision, Patch{Steps: &changed})
	require.NoError(t, err)

	draft := f.create(t, fmt.Sprintf(`{"name":"Draft only","trigger":{"type":"label_added","label_id":%q},"steps":[{"id":"x","type":"clear_field","field_id":%q}]}`, lead, plan))
	return []Reaction{menu, welcome, draft}
}

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	ctx := t.Context()
	seed(t, src)
	exported, err := src.svc.Export(ctx, src.bot, nil)
	require.NoError(t, err)
	require.Len(t, exported.Reactions, 3)
	assert.Equal(t, []string{"lead", "VIP"}, []string{exported.Labels[0].Name, exported.Labels[1].Name}, "only used labels, by name")
	assert.Len(t, exported.Fields, 2)
	assert.NotNil(t, exported.Reactions[0].Published)
	assert.Nil(t, exported.Reactions[2].Published)

	// Through JSON, as a client would carry it.
	js, err := json.Marshal(exported)
	require.NoError(t, err)
	var bundle Bundle
	require.NoError(t, json.Unmarshal(js, &bundle))

	dst := newFixtureOn(t, src.store, src.clock) // same store, another bot and vocabulary
	dst.bot = "bot_00000000000000000000000001"
	rep, err := dst.svc.Import(ctx, dst.bot, ImportCreate, bundle)
	require.NoError(t, err)
	assert.True(t, rep.Applied)
	assert.Empty(t, rep.Conflicts)
	for _, r := range rep.Reactions {
		assert.Equal(t, ActionCreate, r.Action)
		assert.NotNil(t, r.ReactionID)
	}
	for _, l := range rep.Labels {
		assert.Equal(t, ActionCreate, l.Action)
	}

	again, err := dst.svc.Export(ctx, dst.bot, nil)
	require.NoError(t, err)
	assert.Equal(t, canonical(t, exported), canonical(t, again))
	assert.NotEqual(t, exported.Reactions[0].Key, again.Reactions[0].Key, "new ids")

	// The imported reactions keep their state: versions, unpublished changes.
	list, _, err := dst.svc.List(ctx, dst.bot, Filter{}, 10, "")
	require.NoError(t, err)
	require.Len(t, list, 3)
	assert.Equal(t, ptr(int64(1)), list[0].PublishedVersion)
	assert.False(t, list[0].HasUnpublishedChanges)
	assert.True(t, list[1].HasUnpublishedChanges)
	assert.Nil(t, list[2].PublishedVersion)
	// The imported gotos protect their targets as created ones do.
	assert.Equal(t, "reaction_in_use", httpapitest.AsError(t, dst.svc.Delete(ctx, dst.bot, list[0].ID, nil)).Code)
}

func TestImportModes(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	ctx := t.Context()
	seed(t, src)
	bundle, err := src.svc.Export(ctx, src.bot, nil)
	require.NoError(t, err)

	dst := newFixtureOn(t, src.store, src.clock)
	dst.bot = "bot_00000000000000000000000002"
	existing := dst.create(t, `{"name":"welcome","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	_, err = dst.svc.Publish(ctx, dst.bot, existing.ID, 1)
	require.NoError(t, err)
	dst.vocab.label(dst.bot, "vip")
	dst.vocab.field(dst.bot, "plan", FieldString)

	// A dry run reports and writes nothing.
	rep, err := dst.svc.Import(ctx, dst.bot, ImportDryRun, bundle)
	require.NoError(t, err)
	assert.False(t, rep.Applied)
	assert.Equal(t, []string{ActionCreate, ActionReplace, ActionCreate},
		[]string{rep.Reactions[0].Action, rep.Reactions[1].Action, rep.Reactions[2].Action})
	assert.Equal(t, &existing.ID, rep.Reactions[1].ReactionID)
	assert.Equal(t, ptr(int64(2)), rep.Reactions[1].PublishedVersion, "replace publishes the next version")
	assert.Nil(t, rep.Reactions[0].ReactionID)
	assert.Equal(t, []string{ActionCreate, ActionReuse}, []string{rep.Labels[0].Action, rep.Labels[1].Action})
	require.Len(t, rep.Conflicts, 1)
	assert.Equal(t, ConflictNameTaken, rep.Conflicts[0].Kind)
	assert.Equal(t, []ImportMode{ImportCreate}, rep.Conflicts[0].Blocks)
	assert.Zero(t, dst.vocab.ensures-2, "a dry run creates no label or field") // the two set up above
	list, _, err := dst.svc.List(ctx, dst.bot, Filter{}, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 1)

	// Create refuses the taken name, and writes nothing.
	_, err = dst.svc.Import(ctx, dst.bot, ImportCreate, bundle)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "import_conflict", he.Code)
	assert.Equal(t, 409, he.Status())
	assert.Len(t, he.Extensions["conflicts"], 1)
	list, _, err = dst.svc.List(ctx, dst.bot, Filter{}, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 1)

	// Replace replaces the reaction of that name in place and creates the others.
	rep, err = dst.svc.Import(ctx, dst.bot, ImportReplace, bundle)
	require.NoError(t, err)
	assert.True(t, rep.Applied)
	assert.Empty(t, rep.Conflicts)
	got, err := dst.svc.Get(ctx, dst.bot, existing.ID)
	require.NoError(t, err)
	assert.Equal(t, "Welcome", got.Name)
	assert.Equal(t, int64(3), got.Revision)
	assert.Equal(t, ptr(int64(2)), got.PublishedVersion)
	assert.True(t, got.HasUnpublishedChanges, "the bundle's draft differs from its published version")
	v1, err := dst.svc.Version(ctx, dst.bot, existing.ID, 1)
	require.NoError(t, err)
	assert.Equal(t, "welcome", v1.Name, "earlier versions stay")
	list, _, err = dst.svc.List(ctx, dst.bot, Filter{}, 10, "")
	require.NoError(t, err)
	assert.Len(t, list, 3)

	// Replacing again with the same bundle is stable: same ids, new revisions.
	rep2, err := dst.svc.Import(ctx, dst.bot, ImportReplace, bundle)
	require.NoError(t, err)
	for i := range rep.Reactions {
		assert.Equal(t, *rep.Reactions[i].ReactionID, *rep2.Reactions[i].ReactionID)
		assert.Equal(t, ActionReplace, rep2.Reactions[i].Action)
	}
}

func TestImportFieldTypeConflict(t *testing.T) {
	t.Parallel()
	src := newFixture(t)
	ctx := t.Context()
	seed(t, src)
	bundle, err := src.svc.Export(ctx, src.bot, nil)
	require.NoError(t, err)
	dst := newFixtureOn(t, src.store, src.clock)
	dst.bot = "bot_00000000000000000000000003"
	dst.vocab.field(dst.bot, "score", FieldString) // the bundle's score is a number

	for _, mode := range []ImportMode{ImportCreate, ImportReplace} {
		_, err = dst.svc.Import(ctx, dst.bot, mode, bundle)
		he := httpapitest.AsError(t, err)
		assert.Equal(t, "import_conflict", he.Code, mode)
		conflicts := he.Extensions["conflicts"].([]ImportConflict)
		require.Len(t, conflicts, 1)
		assert.Equal(t, ConflictFieldType, conflicts[0].Kind)
		assert.Equal(t, FieldNumber, conflicts[0].Type)
		assert.Equal(t, FieldString, conflicts[0].ExistingType)
	}
	labels, _ := dst.vocab.Labels(ctx, dst.bot)
	assert.Empty(t, labels, "a refused import creates no label")
}

func TestImportChecksTheBundle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	many := make([]string, MaxBundleReactions+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"key":"r%d","draft":{"name":"R%d","trigger":{"type":"api"}}}`, i, i)
	}
	tests := []struct {
		name, bundle string
		code         string
		paths        []string
	}{
		{"empty", `{"format_version":1}`, "", nil},
		{"wrong format", `{"format_version":2}`, "validation_failed", []string{"bundle.format_version"}},
		{"too many", `{"format_version":1,"reactions":[` + strings.Join(many, ",") + `]}`, "validation_failed", []string{"bundle.reactions"}},
		{"bad key", `{"format_version":1,"reactions":[{"key":"a b","draft":{"name":"A","trigger":{"type":"api"}}}]}`, "validation_failed", []string{"bundle.reactions[0].key"}},
		{"repeated key", `{"format_version":1,"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"}}},{"key":"a","draft":{"name":"B","trigger":{"type":"api"}}}]}`, "validation_failed", []string{"bundle.reactions[1].key"}},
		{"repeated name", `{"format_version":1,"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"}}},{"key":"b","draft":{"name":"a","trigger":{"type":"api"}}}]}`, "validation_failed", []string{"bundle.reactions[1].draft.name"}},
		{"bad draft", `{"format_version":1,"reactions":[{"key":"a","draft":{"name":"","trigger":{"type":"api"}}}]}`, "validation_failed", []string{"bundle.reactions[0].draft.name"}},
		{"bad field", `{"format_version":1,"fields":[{"key":"f","name":"Plan","type":"money"}]}`, "validation_failed", []string{"bundle.fields[0].name", "bundle.fields[0].type"}},
		{"repeated label", `{"format_version":1,"labels":[{"key":"a","name":"VIP"},{"key":"b","name":"vip"}]}`, "validation_failed", []string{"bundle.labels[1].name"}},
		{"undeclared label", `{"format_version":1,"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"},"steps":[{"id":"s","type":"add_label","label_id":"vip"}]}}]}`, "invalid_steps", []string{"bundle.reactions[0].draft.steps[0].label_id"}},
		{"undeclared reaction", `{"format_version":1,"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"}},"published":{"name":"A","trigger":{"type":"api"},"steps":[{"id":"s","type":"goto","reaction_id":"b"}]}}]}`, "invalid_steps", []string{"bundle.reactions[0].published.steps[0].reaction_id"}},
		{"wrong value for the declared type", `{"format_version":1,"fields":[{"key":"n","name":"n","type":"number"}],"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"},"steps":[{"id":"s","type":"set_field","field_id":"n","value":"x"}]}}]}`, "invalid_steps", []string{"bundle.reactions[0].draft.steps[0].value"}},
		{"empty published", `{"format_version":1,"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"}},"published":{"name":"A","trigger":{"type":"api"}}}]}`, "invalid_steps", []string{"bundle.reactions[0].published.steps"}},
		{"self loop", `{"format_version":1,"reactions":[{"key":"a","draft":{"name":"A","trigger":{"type":"api"},"steps":[{"id":"s","type":"goto","reaction_id":"a"}]}}]}`, "invalid_steps", []string{"bundle.reactions[0].draft.steps[0].reaction_id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Bundle
			require.NoError(t, json.Unmarshal([]byte(tt.bundle), &b))
			_, err := f.svc.Import(t.Context(), f.bot, ImportDryRun, b)
			if tt.code == "" {
				require.NoError(t, err)
				return
			}
			code, got := paths(t, err)
			assert.Equal(t, tt.code, code)
			assert.Equal(t, tt.paths, got)
		})
	}
}

// failingStore makes the Nth write of every transaction fail its condition, and counts
// transactions, so a test can see that an import is one transaction and all or nothing.
type failingStore struct {
	store.Store
	mu      sync.Mutex
	failAt  int // 1-based; 0 fails nothing
	broken  bool
	calls   int
	longest int
}

func (s *failingStore) Transact(ctx context.Context, writes []store.Write) error {
	s.mu.Lock()
	s.calls++
	s.longest = max(s.longest, len(writes))
	failAt, broken := s.failAt, s.broken
	s.mu.Unlock()
	if broken {
		return errors.New("disk on fire")
	}
	if failAt > 0 && failAt <= len(writes) {
		w := slices.Clone(writes)
		k, err := w[failAt-1].Target()
		if err != nil {
			return err
		}
		// The Nth write becomes a check that cannot hold: the real store must undo the
		// writes before it.
		w[failAt-1] = store.CheckOp(store.Key{PK: k.PK, SK: k.SK + "#absent"}, store.MustExist)
		return s.Store.Transact(ctx, w)
	}
	return s.Store.Transact(ctx, writes)
}

func (s *failingStore) set(failAt int, broken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failAt, s.broken, s.calls, s.longest = failAt, broken, 0, 0
}

func TestImportIsAllOrNothing(t *testing.T) {
	t.Parallel()
	c := newClock()
	raw := sqlitetest.Open(t, sqlite.WithClock(c.Now))
	fs := &failingStore{Store: raw}
	ctx := t.Context()

	// A bundle of the largest size: every reaction published, so two writes each.
	var b Bundle
	b.FormatVersion = FormatVersion
	for i := range MaxBundleReactions {
		c := content(t, fmt.Sprintf(`{"name":"R%d","trigger":{"type":"api"},"steps":[{"id":"a","type":"send_text","text":"%d"}]}`, i, i))
		b.Reactions = append(b.Reactions, BundleReaction{Key: fmt.Sprintf("k%d", i), Draft: c, Published: &c})
	}
	f := newFixtureOn(t, fs, c)
	existing := f.create(t, `{"name":"R7","trigger":{"type":"api"},"steps":[{"id":"a","type":"end"}]}`)
	regBefore, err := raw.Get(ctx, registryKey(f.bot))
	require.NoError(t, err)

	visible := func() int {
		page, err := raw.Query(ctx, store.Query{PK: reactionsPK(f.bot)})
		require.NoError(t, err)
		n := 0
		for _, it := range page.Items {
			if strings.HasPrefix(it.SK, "rct_") {
				n++
			}
		}
		return n
	}
	for _, n := range []int{1, 2, 50, 2*MaxBundleReactions + 1} {
		fs.set(n, false)
		_, err := f.svc.Import(ctx, f.bot, ImportReplace, b)
		require.Error(t, err, "write %d failed", n)
		assert.ErrorIs(t, err, store.ErrUnavailable, "retried, then 503")
		assert.Equal(t, 1, visible(), "write %d failed: nothing is visible", n)
		regNow, err := raw.Get(ctx, registryKey(f.bot))
		require.NoError(t, err)
		assert.Equal(t, regBefore.Revision, regNow.Revision)
		vs, err := raw.Query(ctx, store.Query{PK: versionsPK(f.bot, existing.ID)})
		require.NoError(t, err)
		assert.Empty(t, vs.Items)
	}
	fs.set(0, true)
	_, err = f.svc.Import(ctx, f.bot, ImportReplace, b)
	require.Error(t, err)
	assert.Equal(t, 1, visible())

	fs.set(0, false)
	rep, err := f.svc.Import(ctx, f.bot, ImportReplace, b)
	require.NoError(t, err)
	assert.Equal(t, 1, fs.calls, "one import is one transaction")
	assert.Equal(t, 1+2*MaxBundleReactions+1, fs.longest, "registry, records, versions, publication counter")
	assert.LessOrEqual(t, fs.longest, store.MaxTransactWrites)
	assert.Equal(t, MaxBundleReactions, visible())
	assert.Equal(t, existing.ID, *rep.Reactions[7].ReactionID)
}

func TestExportRefusesDanglingVocabulary(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	vip := f.vocab.label(f.bot, "vip")
	f.create(t, fmt.Sprintf(`{"name":"A","trigger":{"type":"label_added","label_id":%q},"steps":[{"id":"a","type":"remove_label","label_id":%q}]}`, vip, vip))
	f.vocab.dropLabel(f.bot, vip)
	_, err := f.svc.Export(t.Context(), f.bot, nil)
	code, got := paths(t, err)
	assert.Equal(t, "dangling_references", code)
	assert.Equal(t, []string{"reactions[0].draft.trigger.label_id", "reactions[0].draft.steps[0].label_id"}, got)
}

func TestExportSomeReactionsWithWhatTheyReach(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	c := f.create(t, `{"name":"C","trigger":{"type":"api"}}`)
	b := f.create(t, fmt.Sprintf(`{"name":"B","trigger":{"type":"api"},"steps":[{"id":"a","type":"goto","reaction_id":%q}]}`, c.ID))
	a := f.create(t, fmt.Sprintf(`{"name":"A","trigger":{"type":"api"},"steps":[{"id":"a","type":"goto","reaction_id":%q}]}`, b.ID))
	f.create(t, `{"name":"D","trigger":{"type":"api"}}`)
	got, err := f.svc.Export(t.Context(), f.bot, []string{a.ID})
	require.NoError(t, err)
	var keys []string
	for _, r := range got.Reactions {
		keys = append(keys, r.Key)
	}
	assert.Equal(t, []string{c.ID, b.ID, a.ID}, keys)
	_, err = f.svc.Export(t.Context(), f.bot, []string{"rct_0000000000000000000000000a"})
	assert.Equal(t, "invalid_parameter", httpapitest.AsError(t, err).Code)
}
