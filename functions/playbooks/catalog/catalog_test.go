package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/functions/collections"
	"github.com/botplatform/api/functions/content"
	"github.com/botplatform/api/functions/playbooks/catalog"
	"github.com/botplatform/api/functions/popups"
	"github.com/botplatform/api/functions/reactions"
	"github.com/botplatform/api/functions/subscribers"
	"github.com/botplatform/api/shared/channel"
	"github.com/botplatform/api/shared/channel/telegram"
	"github.com/botplatform/api/shared/channel/vk"
	"github.com/botplatform/api/shared/channel/whatsapp"
	"github.com/botplatform/api/shared/eventlog"
	"github.com/botplatform/api/shared/httpapi/httpapitest"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store/sqlite/sqlitetest"
)

var t0 = time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)

// vocabulary is reactions.Vocabulary over the subscribers service, as the reactions
// family's wiring builds it.
type vocabulary struct{ svc *subscribers.Service }

func (v vocabulary) Labels(ctx context.Context, bot string) ([]reactions.Label, error) {
	list, err := v.svc.Labels(ctx, bot)
	out := make([]reactions.Label, len(list))
	for i, l := range list {
		out[i] = reactions.Label{ID: l.ID, Name: l.Name}
	}
	return out, err
}

func (v vocabulary) Fields(ctx context.Context, bot string) ([]reactions.Field, error) {
	list, err := v.svc.Fields(ctx, bot)
	out := make([]reactions.Field, len(list))
	for i, f := range list {
		out[i] = reactions.Field{ID: f.ID, Name: f.Name, Type: reactions.FieldType(f.Type)}
	}
	return out, err
}

func (vocabulary) EnsureLabels(context.Context, string, []string) (map[string]string, error) {
	return nil, fmt.Errorf("not used")
}

func (vocabulary) EnsureFields(context.Context, string, []reactions.Field) (map[string]string, error) {
	return nil, fmt.Errorf("not used")
}

// sampleAnswers answers every required question without a default as its type allows.
func sampleAnswers(p catalog.Playbook) map[string]any {
	out := map[string]any{}
	for _, q := range p.Questions {
		if q.Default != nil {
			continue
		}
		switch q.Type {
		case catalog.TypeText:
			out[q.ID] = "Sample " + q.ID
		case catalog.TypeChoice:
			out[q.ID] = q.Choices[0]
		case catalog.TypeBool:
			out[q.ID] = true
		case catalog.TypeWebsite:
			out[q.ID] = "https://shop.example"
		}
	}
	return out
}

// contentCatalog is what the content family checks a bot's documents against, as its wiring
// builds it for a bot without channels: the bot's custom fields and every channel type.
type contentCatalog struct{ subs *subscribers.Service }

func (c contentCatalog) Catalog(ctx context.Context, bot string) (content.Catalog, error) {
	fields, err := c.subs.Fields(ctx, bot)
	if err != nil {
		return content.Catalog{}, err
	}
	out := content.Catalog{Channels: []channel.Capabilities{telegram.New(telegram.Config{}).Capabilities(),
		whatsapp.New(whatsapp.Config{}).Capabilities(), vk.New(vk.Config{}).Capabilities()}}
	for _, f := range fields {
		out.Fields = append(out.Fields, f.Name)
	}
	return out, nil
}

// popupFields is popups.Fields over the subscribers service, as the popups wiring builds it.
type popupFields struct{ subs *subscribers.Service }

func (p popupFields) FieldNames(ctx context.Context, bot string) ([]string, error) {
	fields, err := p.subs.Fields(ctx, bot)
	out := make([]string, len(fields))
	for i, f := range fields {
		out[i] = f.Name
	}
	return out, err
}

// Every version of every playbook installs through the families' own services: its labels
// and fields through subscribers, its content documents through content (created and
// published: every check of a message against every channel type and of its merge fields
// against the bot's custom fields), its popups through popups (every check, the form's
// fields included), its collections through collections, its reactions are valid reaction
// bodies that create and publish (every check of the reactions family, references to the
// installed labels, fields and reactions included). No playbook placeholder is left in
// what a family receives.
func TestEveryPlaybookInstallsThroughTheFamilies(t *testing.T) {
	t.Parallel()
	clock := httpapitest.NewClock(t0, time.Millisecond)
	st := sqlitetest.Open(t)
	subs := subscribers.NewService(st, clock.Now, nil)
	cols := collections.NewService(st, nil, clock.Now, slog.New(slog.DiscardHandler))
	rx := reactions.NewService(st, vocabulary{subs}, clock.Now, slog.New(slog.DiscardHandler))
	docs := content.NewService(st, contentCatalog{subs}, nil, clock.Now)
	pops := popups.NewService(st, popupFields{subs}, nil, nil, clock.Now, nil)
	ctx := context.Background()
	for _, p := range catalog.Entries() {
		t.Run(fmt.Sprintf("%s_v%d", p.ID, p.Version), func(t *testing.T) {
			bot := ids.At("bot", clock.Now())
			answers := p.Answers(sampleAnswers(p))
			require.Empty(t, p.Missing(sampleAnswers(p)))
			resources, err := p.Render(answers, nil)
			require.NoError(t, err)
			refs := map[string]string{}
			for _, r := range resources {
				spec, err := catalog.RenderBody(r.Spec, answers, refs)
				require.NoError(t, err)
				assert.Empty(t, catalog.Placeholders(spec), "%s %s: every placeholder is filled", r.Kind, r.Key)
				var id string
				switch r.Kind {
				case catalog.KindLabel:
					var b struct{ Name string }
					require.NoError(t, json.Unmarshal(spec, &b))
					l, err := subs.CreateLabel(ctx, bot, b.Name)
					require.NoError(t, err, "label %s", r.Key)
					id = l.ID
				case catalog.KindField:
					var b subscribers.FieldSpec
					require.NoError(t, json.Unmarshal(spec, &b))
					f, err := subs.CreateField(ctx, bot, b)
					require.NoError(t, err, "field %s", r.Key)
					id = f.ID
				case catalog.KindCollection:
					var b struct {
						Name   string
						Fields []collections.FieldInput
					}
					require.NoError(t, json.Unmarshal(spec, &b))
					c, err := cols.CreateCollection(ctx, bot, b.Name, b.Fields)
					require.NoError(t, err, "collection %s", r.Key)
					id = c.ID
				case catalog.KindContent:
					var in content.NewDocument
					dec := json.NewDecoder(bytesReader(spec))
					dec.DisallowUnknownFields()
					require.NoError(t, dec.Decode(&in), "content %s is a content create body", r.Key)
					assert.Nil(t, in.TemplateID, "content %s: the catalog holds its own bodies", r.Key)
					d, err := docs.Create(ctx, bot, in)
					require.NoError(t, err, "content %s", r.Key)
					_, err = docs.Publish(ctx, bot, d.ID, d.Revision)
					require.NoError(t, err, "content %s publishes", r.Key)
					assert.Equal(t, r.Name, d.Name)
					id = d.ID
				case catalog.KindPopup:
					var d popups.Definition
					dec := json.NewDecoder(bytesReader(spec))
					dec.DisallowUnknownFields()
					require.NoError(t, dec.Decode(&d), "popup %s is a popup create body", r.Key)
					pf, err := pops.Preflight(ctx, bot, d)
					require.NoError(t, err)
					assert.Empty(t, pf.Problems, "popup %s", r.Key)
					assert.Empty(t, pf.Warnings, "popup %s", r.Key)
					pop, err := pops.Create(ctx, bot, d)
					require.NoError(t, err, "popup %s", r.Key)
					assert.Equal(t, popups.StatusPaused, pop.Status, "popup %s: catalog popups start paused", r.Key)
					id = pop.ID
				case catalog.KindReaction:
					assert.NotContains(t, string(spec), "{{", "reaction %s: every placeholder is filled", r.Key)
					var c reactions.Content
					dec := json.NewDecoder(bytesReader(spec))
					dec.DisallowUnknownFields()
					require.NoError(t, dec.Decode(&c), "reaction %s is a reaction body", r.Key)
					require.Empty(t, reactions.CheckShape(&c, ""), "reaction %s", r.Key)
					created, err := rx.Create(ctx, bot, c)
					require.NoError(t, err, "reaction %s", r.Key)
					_, err = rx.Publish(ctx, bot, created.ID, created.Revision)
					require.NoError(t, err, "reaction %s publishes", r.Key)
					id = created.ID
				default:
					t.Fatalf("unknown kind %s", r.Kind)
				}
				refs[catalog.Ref(r.Kind, r.Key)] = id
			}
		})
	}
}

// The catalog's own rules: ids unique, versions contiguous from 1, every placeholder names
// a question or a resource created before the body it is in, popups start paused and their
// forms write fields the playbook creates, KPIs name the playbook's resources, and a later
// version changes only reactions of the resources it shares with an earlier one (labels,
// fields, content, popups and collections are only ever added: their adapters refuse
// updates).
func TestCatalogRules(t *testing.T) {
	t.Parallel()
	seen := map[string][]int{}
	for _, p := range catalog.Entries() {
		seen[p.ID] = append(seen[p.ID], p.Version)
		assert.Contains(t, catalog.Verticals(), p.Vertical, p.ID)
		for _, o := range p.Outcomes {
			assert.Contains(t, catalog.Outcomes(), o, p.ID)
		}
		assert.NotEmpty(t, p.Channels, p.ID)
		questions := map[string]bool{}
		for _, q := range p.Questions {
			assert.False(t, questions[q.ID], "%s: question %s twice", p.ID, q.ID)
			questions[q.ID] = true
			assert.Contains(t, []string{catalog.TypeText, catalog.TypeChoice, catalog.TypeBool, catalog.TypeWebsite}, q.Type)
			if q.Default != nil {
				assert.Empty(t, catalog.CheckAnswer(q, q.Default), "%s: %s's default", p.ID, q.ID)
			}
			assert.Equal(t, q.Type == catalog.TypeChoice, len(q.Choices) > 0, "%s: %s's choices", p.ID, q.ID)
		}
		keys := map[string]bool{}
		add := func(kind, key string) {
			ref := catalog.Ref(kind, key)
			assert.False(t, keys[ref], "%s: %s twice", p.ID, ref)
			keys[ref] = true
		}
		for _, l := range p.Installs.Labels {
			add(catalog.KindLabel, l.Key)
		}
		for _, f := range p.Installs.Fields {
			add(catalog.KindField, f.Key)
		}
		// named checks that every placeholder of a body names a question or a resource
		// created before it.
		named := func(kind, key string, body json.RawMessage) {
			for _, ph := range catalog.Placeholders(body) {
				if ph.Kind == "answer" {
					assert.True(t, questions[ph.Name], "%s: %s %s names question %s, which the playbook does not ask", p.ID, kind, key, ph.Name)
				} else {
					assert.True(t, keys[catalog.Ref(ph.Kind, ph.Name)], "%s: %s %s names %s.%s before it is created", p.ID, kind, key, ph.Kind, ph.Name)
				}
			}
		}
		fieldNames := map[string]bool{}
		for _, f := range p.Installs.Fields {
			fieldNames[f.Name] = true
		}
		for _, c := range p.Installs.Content {
			named(catalog.KindContent, c.Key, c.Body)
			add(catalog.KindContent, c.Key)
		}
		for _, pop := range p.Installs.Popups {
			named(catalog.KindPopup, pop.Key, pop.Body)
			var b struct {
				Status  string
				Content struct{ Fields []struct{ Name string } }
			}
			require.NoError(t, json.Unmarshal(pop.Body, &b))
			assert.Equal(t, "paused", b.Status, "%s: popup %s starts paused", p.ID, pop.Key)
			for _, f := range b.Content.Fields {
				assert.True(t, fieldNames[f.Name], "%s: popup %s's form writes %s, a field the playbook does not create", p.ID, pop.Key, f.Name)
			}
			add(catalog.KindPopup, pop.Key)
		}
		for _, c := range p.Installs.Collections {
			add(catalog.KindCollection, c.Key)
		}
		for _, r := range p.Installs.Reactions {
			named(catalog.KindReaction, r.Key, r.Body)
			add(catalog.KindReaction, r.Key)
		}
		kpis := map[string]bool{}
		for _, k := range p.KPIs {
			assert.False(t, kpis[k.ID], "%s: KPI %s twice", p.ID, k.ID)
			kpis[k.ID] = true
			assert.True(t, eventlog.Reserved(k.Event) || k.Event != "", "%s: KPI %s has an event", p.ID, k.ID)
			if k.Reaction != "" {
				assert.True(t, keys[catalog.Ref(catalog.KindReaction, k.Reaction)], "%s: KPI %s", p.ID, k.ID)
			}
			if k.Label != "" {
				assert.True(t, keys[catalog.Ref(catalog.KindLabel, k.Label)], "%s: KPI %s", p.ID, k.ID)
			}
			if k.Popup != "" {
				assert.True(t, keys[catalog.Ref(catalog.KindPopup, k.Popup)], "%s: KPI %s", p.ID, k.ID)
				assert.True(t, strings.HasPrefix(k.Event, "popup_"), "%s: KPI %s counts a popup event", p.ID, k.ID)
			}
		}
	}
	c := catalog.Default()
	for id, versions := range seen {
		for i, v := range versions {
			assert.Equal(t, i+1, v, "%s: versions are 1, 2, ...", id)
		}
		for i := 1; i < len(versions); i++ {
			older, _ := c.Get(id, versions[i-1])
			newer, _ := c.Get(id, versions[i])
			a, err := older.Render(older.Answers(nil), nil)
			require.NoError(t, err)
			b, err := newer.Render(newer.Answers(nil), nil)
			require.NoError(t, err)
			for _, r := range a {
				if r.Kind == catalog.KindReaction {
					continue
				}
				j := slices.IndexFunc(b, func(x catalog.Resource) bool { return x.Kind == r.Kind && x.Key == r.Key })
				if j >= 0 {
					assert.JSONEq(t, string(r.Spec), string(b[j].Spec), "%s v%d changes %s %s: only reactions change", id, versions[i], r.Kind, r.Key)
				}
			}
		}
	}
	assert.GreaterOrEqual(t, len(seen), 4)
	assert.Greater(t, len(seen["abandoned_cart"]), 1, "one playbook has a version 2")
	latest, _ := c.Get("abandoned_cart", 0)
	assert.NotEmpty(t, latest.Installs.Content, "the abandoned cart playbook installs a content document")
	assert.NotEmpty(t, latest.Installs.Popups, "and a popup")
	lead, _ := c.Get("lead_qualification", 0)
	assert.NotEmpty(t, lead.Installs.Popups, "the lead qualification playbook installs a lead capture form")
}

func TestRender(t *testing.T) {
	t.Parallel()
	p, ok := catalog.Default().Get("abandoned_cart", 1)
	require.True(t, ok)
	answers := p.Answers(map[string]any{"store_name": "Acme", "offer_discount": false})
	assert.Equal(t, map[string]any{"store_name": "Acme", "cart_keyword": "cart", "discount_code": "COMEBACK10", "offer_discount": false}, answers)
	res, err := p.Render(answers, map[string]string{"label.cart_recovered": "lbl_x", "field.cart_code_sent": "fld_y"})
	require.NoError(t, err)
	var checkout catalog.Resource
	for _, r := range res {
		if r.Key == "cart_checkout" {
			checkout = r
		}
	}
	var body struct {
		Name    string
		Trigger struct{ Keywords []string }
		Steps   []map[string]any
	}
	require.NoError(t, json.Unmarshal(checkout.Spec, &body))
	assert.Equal(t, "Abandoned cart: checkout", checkout.Name)
	assert.Equal(t, []string{"cart"}, body.Trigger.Keywords)
	assert.Equal(t, "Welcome back to Acme! Use the code COMEBACK10 at checkout.", body.Steps[0]["text"])
	assert.Equal(t, "lbl_x", body.Steps[1]["label_id"])
	assert.Equal(t, false, body.Steps[2]["value"], "a whole-string bool answer stays a bool")
	assert.Equal(t, "fld_y", body.Steps[2]["field_id"])

	// Unknown references stay placeholders.
	res, err = p.Render(answers, nil)
	require.NoError(t, err)
	assert.Contains(t, string(res[len(res)-1].Spec), "{{reaction.cart_checkout}}")
	assert.Equal(t, []string{"store_name"}, p.Missing(nil))
	assert.Empty(t, p.Missing(map[string]any{"store_name": "x"}))
}

func TestCheckAnswer(t *testing.T) {
	t.Parallel()
	text := catalog.Question{ID: "a", Type: catalog.TypeText}
	choice := catalog.Question{ID: "b", Type: catalog.TypeChoice, Choices: []string{"x", "y"}}
	flag := catalog.Question{ID: "c", Type: catalog.TypeBool}
	site := catalog.Question{ID: "d", Type: catalog.TypeWebsite}
	for _, tc := range []struct {
		q    catalog.Question
		v    any
		okay bool
	}{
		{text, "hello", true}, {text, "", false}, {text, 3.0, false}, {text, "two\nlines", false},
		{choice, "x", true}, {choice, "z", false}, {choice, true, false},
		{flag, true, true}, {flag, "true", false},
		{site, "https://shop.example", true}, {site, "http://localhost:8080/", true}, {site, "shop.example", false},
		{site, "https://shop.example/cart", false}, {site, "ftp://shop.example", false}, {site, "https://shop.example?x=1", false},
	} {
		assert.Equal(t, tc.okay, catalog.CheckAnswer(tc.q, tc.v) == "", "%s %v", tc.q.ID, tc.v)
	}
	assert.Equal(t, "https://shop.example", catalog.NormalizeAnswer(site, " HTTPS://Shop.Example:443/ "))
	assert.Equal(t, "http://shop.example:8080", catalog.NormalizeAnswer(site, "http://shop.example:8080"))
	assert.Equal(t, "Acme", catalog.NormalizeAnswer(catalog.Question{Type: catalog.TypeText}, " Acme "))
}

func TestRecommend(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		vertical, outcome string
		channels          []string
		want              string
	}{
		{"ecommerce", catalog.OutcomeRecoverCarts, []string{"telegram"}, "abandoned_cart"},
		{"services", catalog.OutcomeBookAppointment, nil, "appointment_booking"},
		{"ecommerce", catalog.OutcomeQualifyLeads, nil, "lead_qualification"},
		{"support", catalog.OutcomeDeflectSupport, []string{"whatsapp"}, "support_triage"},
		{"services", "", nil, "appointment_booking"},
		{"", "", nil, "abandoned_cart"},
	} {
		r, ok := catalog.Recommend(tc.vertical, tc.outcome, tc.channels)
		require.True(t, ok)
		assert.Equal(t, tc.want, r.PlaybookID, "%+v", tc)
		assert.NotEmpty(t, r.Reasons)
		again, _ := catalog.Recommend(tc.vertical, tc.outcome, tc.channels)
		assert.Equal(t, r, again, "deterministic")
	}
	r, _ := catalog.Recommend("ecommerce", catalog.OutcomeRecoverCarts, []string{"telegram"})
	assert.Equal(t, 3, r.Version, "the newest version")
	assert.Equal(t, []string{"serves the outcome recover_abandoned_carts", "written for the ecommerce vertical", "runs on telegram"}, r.Reasons)
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
