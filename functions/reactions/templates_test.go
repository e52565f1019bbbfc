package reactions

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
)

// memTemplates is the channels family's template catalogs as reactions see them, per bot.
type memTemplates struct {
	mu    sync.Mutex
	bots  map[string]Catalog
	reads int
}

func (m *memTemplates) Catalog(_ context.Context, bot string) (Catalog, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	c, ok := m.bots[bot]
	return c, ok, nil
}

func (m *memTemplates) set(bot string, list ...CatalogTemplate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bots[bot] = Catalog{ChannelID: "ch_whatsapp", Templates: list}
}

func withTemplates(f *fixture) *memTemplates {
	m := &memTemplates{bots: map[string]Catalog{}}
	f.svc.WithTemplates(m)
	return m
}

// sendTemplate is a reaction named reaction whose one step sends the template.
func sendTemplate(reaction, name, language, params string) string {
	return fmt.Sprintf(`{"name":%q,"trigger":{"type":"api"},"steps":[
		{"id":"t","type":"send_template","template_name":%q,"template_language":%q,"params":[%s]}]}`, reaction, name, language, params)
}

// At publish, a send_template step's template must be in the catalog of the bot's WhatsApp
// channel, with the body parameters the step gives and no parameter of another kind; one not
// approved yet publishes with a warning. A bot without WhatsApp has nothing to check.
func TestPublishChecksTemplatesAgainstTheCatalog(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	cat := withTemplates(f)

	// No WhatsApp channel: the step sends its fallback text or is skipped; it publishes.
	r := f.create(t, sendTemplate("first", "order_update", "en_US", `{"text":"Ann"},{"text":"#42"}`))
	_, warnings, err := f.svc.PublishWithWarnings(ctx, f.bot, r.ID, 1)
	require.NoError(t, err)
	assert.Empty(t, warnings)

	cat.set(f.bot,
		CatalogTemplate{Name: "order_update", Language: "en_US", Status: "approved", BodyParams: 2},
		CatalogTemplate{Name: "order_update", Language: "de", Status: "pending", BodyParams: 2},
		CatalogTemplate{Name: "promo", Language: "en", Status: "approved", BodyParams: 0, Unsupported: "the image header"},
		CatalogTemplate{Name: "synced", Language: "en", Status: "paused", BodyParams: -1},
	)
	tests := []struct {
		name     string
		body     string
		flaws    []string // the paths of the 422's problems
		warnings []string
	}{
		{"approved", sendTemplate("approved", "order_update", "en_US", `{"text":"Ann"},{"text":"#42"}`), nil, nil},
		{"pending", sendTemplate("pending", "order_update", "de", `{"text":"Ann"},{"text":"#42"}`), nil, []string{"steps[0].template_name"}},
		{"unknown parameter count, paused", sendTemplate("unknown parameter count, paused", "synced", "en", `{"text":"x"}`), nil, []string{"steps[0].template_name"}},
		{"unknown name", sendTemplate("unknown name", "order_updates", "en_US", ``), []string{"steps[0].template_name"}, nil},
		{"unknown language", sendTemplate("unknown language", "order_update", "fr", `{"text":"Ann"},{"text":"#42"}`), []string{"steps[0].template_name"}, nil},
		{"too few parameters", sendTemplate("too few parameters", "order_update", "en_US", `{"text":"Ann"}`), []string{"steps[0].params"}, nil},
		{"a header parameter", sendTemplate("a header parameter", "promo", "en", ``), []string{"steps[0].template_name"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.create(t, tt.body)
			got, warnings, err := f.svc.PublishWithWarnings(ctx, f.bot, r.ID, 1)
			if tt.flaws != nil {
				code, paths := paths(t, err)
				assert.Equal(t, "invalid_steps", code)
				assert.Equal(t, tt.flaws, paths)
				r, err = f.svc.Get(ctx, f.bot, r.ID)
				require.NoError(t, err)
				assert.Nil(t, r.PublishedVersion, "nothing published")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, ptr(int64(1)), got.PublishedVersion)
			var at []string
			for _, w := range warnings {
				at = append(at, w.Field)
			}
			assert.Equal(t, tt.warnings, at)
		})
	}

	// Publishing again what is published changes nothing, and tells how its templates stand
	// now: the template was deleted from the catalog since.
	cat.set(f.bot)
	again, warnings, err := f.svc.PublishWithWarnings(ctx, f.bot, r.ID, 2)
	require.NoError(t, err)
	assert.Equal(t, ptr(int64(1)), again.PublishedVersion)
	require.Len(t, warnings, 1)
	assert.Equal(t, "steps[0].template_name", warnings[0].Field)
	assert.Contains(t, warnings[0].Message, `no template "order_update" in language en_US`)

	// Edits do not read the catalog: a draft may name a template that is yet to be made.
	reads := cat.reads
	f.create(t, sendTemplate("draft", "not_yet", "en", ``))
	assert.Equal(t, reads, cat.reads)
}

// An import publishes without checking templates against the catalog (a bundle is portable,
// and the catalog is often synced after it), but warns of what will not work.
func TestImportWarnsOfTemplatesTheCatalogLacks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cat := withTemplates(f)
	cat.set(f.bot, CatalogTemplate{Name: "order_update", Language: "en_US", Status: "pending", BodyParams: 1})
	plan := f.vocab.field(f.bot, "plan", FieldString)
	tpl := func(name string) string {
		return fmt.Sprintf(`[{"id":"t","type":"send_template","template_name":%q,"template_language":"en_US","params":[{"field_id":"f"}]}]`, name)
	}
	b := Bundle{FormatVersion: FormatVersion,
		Fields: []BundleField{{Key: "f", Name: "plan", Type: FieldString}},
		Reactions: []BundleReaction{
			{Key: "a", Draft: Content{Name: "A", Trigger: Trigger{Type: TriggerAPI}, Steps: steps(t, tpl("order_update"))},
				Published: &Content{Name: "A", Trigger: Trigger{Type: TriggerAPI}, Steps: steps(t, tpl("order_update"))}},
			{Key: "b", Draft: Content{Name: "B", Trigger: Trigger{Type: TriggerAPI}, Steps: steps(t, tpl("draft_only"))}},
			{Key: "c", Draft: Content{Name: "C", Trigger: Trigger{Type: TriggerAPI}, Steps: steps(t, tpl("missing"))},
				Published: &Content{Name: "C", Trigger: Trigger{Type: TriggerAPI}, Steps: steps(t, tpl("missing"))}},
		}}
	rep, err := f.svc.Import(t.Context(), f.bot, ImportCreate, b)
	require.NoError(t, err)
	assert.True(t, rep.Applied)
	var at []string
	for _, w := range rep.Warnings {
		at = append(at, w.Field)
	}
	assert.Equal(t, []string{"bundle.reactions[0].published.steps[0].template_name", "bundle.reactions[2].published.steps[0].template_name"}, at,
		"the pending template and the missing one; drafts are checked when they are published")

	// The field parameter was remapped to the bot's field of that name.
	got, err := f.svc.Get(t.Context(), f.bot, *rep.Reactions[0].ReactionID)
	require.NoError(t, err)
	assert.Equal(t, plan, got.Steps[0].Params[0].FieldID)
}

// A reaction whose template parameter reads a field the bot has deleted is refused at its
// next publish and cannot be exported by name, as for every other field use.
func TestTemplateParameterFieldsAreReferences(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := t.Context()
	plan := f.vocab.field(f.bot, "plan", FieldString)
	r := f.create(t, fmt.Sprintf(`{"name":"T","trigger":{"type":"api"},"steps":[
		{"id":"t","type":"send_template","template_name":"x","template_language":"en","params":[{"field_id":%q}]}]}`, plan))
	b, err := f.svc.Export(ctx, f.bot, nil)
	require.NoError(t, err)
	require.Len(t, b.Fields, 1, "the field a parameter reads is declared")
	assert.Equal(t, "plan", b.Fields[0].Name)

	f.vocab.mu.Lock()
	f.vocab.fields[f.bot] = nil
	f.vocab.mu.Unlock()
	_, err = f.svc.Publish(ctx, f.bot, r.ID, 1)
	code, got := paths(t, err)
	assert.Equal(t, "invalid_steps", code)
	assert.Equal(t, []string{"steps[0].params[0].field_id"}, got)
	_, err = f.svc.Export(ctx, f.bot, nil)
	he := httpapitest.AsError(t, err)
	assert.Equal(t, "dangling_references", he.Code)
	assert.Equal(t, []httpapi.FieldError{{Field: "reactions[0].draft.steps[0].params[0].field_id",
		Message: fmt.Sprintf("custom field %q no longer exists in this bot", plan)}}, he.Extensions["errors"])
}
