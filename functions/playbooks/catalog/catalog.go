// Package catalog is the playbook catalog (docs/playbooks.md): vertical templates a
// customer installs into a bot, each at every version the platform has published, with the
// questions its setup asks, what it installs (labels, subscriber fields, content documents,
// popups, collections and reactions; content, popups and reactions in their families' create
// bodies with placeholders) and the
// KPIs it is judged by, read from the bot's event log. The catalog is data held in Go; its
// test checks every entry against the families' own validation.
package catalog

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
)

// Question types.
const (
	TypeText   = "text"
	TypeChoice = "choice"
	TypeBool   = "bool"
	// TypeWebsite is a website's origin: http:// or https:// and a host (and a port),
	// nothing after it (https://shop.example). Popups run there.
	TypeWebsite = "website"
)

// Resource kinds an install creates, in the order it creates them (and the reverse of the
// order a rollback deletes them): what a resource refers to exists before it (a content
// document's merge fields and a popup's form name custom fields; a reaction names labels,
// fields and other reactions).
const (
	KindLabel      = "label"
	KindField      = "field"
	KindContent    = "content"
	KindPopup      = "popup"
	KindCollection = "collection"
	KindReaction   = "reaction"
)

// Kinds lists the resource kinds in creation order.
func Kinds() []string {
	return []string{KindLabel, KindField, KindContent, KindPopup, KindCollection, KindReaction}
}

// The outcomes onboarding offers (docs/onboarding.md).
const (
	OutcomeRecoverCarts    = "recover_abandoned_carts"
	OutcomeBookAppointment = "book_appointments"
	OutcomeQualifyLeads    = "qualify_leads"
	OutcomeDeflectSupport  = "deflect_support"
)

// Outcomes lists the outcomes, in documentation order.
func Outcomes() []string {
	return []string{OutcomeRecoverCarts, OutcomeBookAppointment, OutcomeQualifyLeads, OutcomeDeflectSupport}
}

// The verticals.
const (
	VerticalEcommerce   = "ecommerce"
	VerticalServices    = "services"
	VerticalB2B         = "b2b"
	VerticalSaaSSupport = "support"
)

// Verticals lists the verticals, in documentation order.
func Verticals() []string {
	return []string{VerticalEcommerce, VerticalServices, VerticalB2B, VerticalSaaSSupport}
}

// Playbook is one version of a catalog entry.
type Playbook struct {
	ID       string   `json:"id"`
	Version  int      `json:"version"`
	Name     string   `json:"name"`
	Vertical string   `json:"vertical"`
	Outcomes []string `json:"outcomes"`
	Summary  string   `json:"summary"`
	// Channels are the channel kinds the playbook's flows are written for: a bot with a
	// channel of none of them gets a preflight warning.
	Channels  []string   `json:"channels"`
	Questions []Question `json:"questions"`
	Installs  Installs   `json:"installs"`
	KPIs      []KPI      `json:"kpis"`
}

// Question is one setup question; its answer fills {{answer.<id>}} placeholders.
type Question struct {
	ID       string `json:"id"`
	Prompt   string `json:"prompt"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	// Default is the answer used when none is given (null: none).
	Default any      `json:"default"`
	Choices []string `json:"choices,omitempty"`
}

// Installs is what a playbook creates in a bot. Every resource has a key, stable across
// versions, by which upgrades match resources and placeholders refer to them:
// {{label.<key>}}, {{field.<key>}}, {{content.<key>}}, {{popup.<key>}} and
// {{reaction.<key>}} become the created ids.
type Installs struct {
	Labels      []Label      `json:"labels"`
	Fields      []Field      `json:"fields"`
	Content     []Content    `json:"content"`
	Popups      []Popup      `json:"popups"`
	Collections []Collection `json:"collections"`
	Reactions   []Reaction   `json:"reactions"`
}

// Label is a subscriber label to create.
type Label struct {
	Key  string `json:"key"`
	Name string `json:"name"`
}

// Field is a custom subscriber field to create (the subscribers family's create body).
type Field struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// Collection is a collection to create (the collections family's create body).
type Collection struct {
	Key    string            `json:"key"`
	Name   string            `json:"name"`
	Fields []CollectionField `json:"fields"`
}

// CollectionField is one field of a collection's schema.
type CollectionField struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required,omitempty"`
	Indexed  bool   `json:"indexed,omitempty"`
}

// Content is a content document to create and publish: Body is the content family's create
// body ({type, name, draft}) with placeholders. A document's own merge fields
// ({{ subscriber.first_name }}, with spaces and no playbook kind) are left to the content
// family.
type Content struct {
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body"`
}

// Popup is a popup to create: Body is the popups family's create body ({name, status,
// content, targeting, ..., allowed_origins}) with placeholders. Catalog popups are created
// paused: they show on the customer's website, which the customer checks before switching
// them on.
type Popup struct {
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body"`
}

// Reaction is a reaction to create and publish: Body is the reactions family's create body
// ({name, trigger, steps}) with placeholders.
type Reaction struct {
	Key  string          `json:"key"`
	Body json.RawMessage `json:"body"`
}

// KPI is a number the playbook is judged by: the count of one event of the bot's event log
// (shared/eventlog) over a range, narrowed to one of the playbook's reactions (the event's
// reaction_id), labels (label_id), popups (popup_id) or a step (step_id) when given.
type KPI struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Description string `json:"description"`
	Event       string `json:"event"`
	Reaction    string `json:"reaction,omitempty"`
	Label       string `json:"label,omitempty"`
	Popup       string `json:"popup,omitempty"`
	Step        string `json:"step,omitempty"`
}

// Question returns the question id, if the playbook asks it.
func (p Playbook) Question(id string) (Question, bool) {
	i := slices.IndexFunc(p.Questions, func(q Question) bool { return q.ID == id })
	if i < 0 {
		return Question{}, false
	}
	return p.Questions[i], true
}

// SupportsChannel reports whether the playbook's flows are written for channel kind k.
func (p Playbook) SupportsChannel(k string) bool { return slices.Contains(p.Channels, k) }

// Catalog is every version of every playbook.
type Catalog struct {
	entries map[string][]Playbook // by id, versions ascending
	order   []string
}

// New returns the catalog of entries (every version of each).
func New(entries []Playbook) *Catalog {
	c := &Catalog{entries: map[string][]Playbook{}}
	for _, p := range entries {
		p.Installs = p.Installs.normalized()
		if _, ok := c.entries[p.ID]; !ok {
			c.order = append(c.order, p.ID)
		}
		c.entries[p.ID] = append(c.entries[p.ID], p)
	}
	for id := range c.entries {
		sort.Slice(c.entries[id], func(i, j int) bool { return c.entries[id][i].Version < c.entries[id][j].Version })
	}
	return c
}

// Default is the platform's catalog.
func Default() *Catalog { return New(Entries()) }

// Latest returns the newest version of every playbook of vertical ("" for all), in catalog
// order.
func (c *Catalog) Latest(vertical string) []Playbook {
	out := []Playbook{}
	for _, id := range c.order {
		v := c.entries[id]
		p := v[len(v)-1]
		if vertical == "" || p.Vertical == vertical {
			out = append(out, p)
		}
	}
	return out
}

// Get returns version of playbook id (0: the newest).
func (c *Catalog) Get(id string, version int) (Playbook, bool) {
	v, ok := c.entries[id]
	if !ok {
		return Playbook{}, false
	}
	if version == 0 {
		return v[len(v)-1], true
	}
	for _, p := range v {
		if p.Version == version {
			return p, true
		}
	}
	return Playbook{}, false
}

// Versions returns the versions of playbook id, ascending.
func (c *Catalog) Versions(id string) []int {
	var out []int
	for _, p := range c.entries[id] {
		out = append(out, p.Version)
	}
	return out
}

// Recommendation is the playbook Recommend chose and why.
type Recommendation struct {
	PlaybookID string   `json:"playbook_id"`
	Version    int      `json:"version"`
	Reasons    []string `json:"reasons"`
}

// Recommend returns the best playbook of the default catalog for an outcome, a vertical and
// the channels the customer has, with the reasons; ok is false when the catalog is empty.
func Recommend(vertical, outcome string, channels []string) (Recommendation, bool) {
	return Default().Recommend(vertical, outcome, channels)
}

// Recommend scores each playbook's newest version: serving the outcome weighs most (4),
// then the vertical (2), then running on one of the channels (1); ties go to catalog order.
// The same inputs always give the same answer.
func (c *Catalog) Recommend(vertical, outcome string, channels []string) (Recommendation, bool) {
	best, bestScore := -1, -1
	latest := c.Latest("")
	for i, p := range latest {
		score := 0
		if slices.Contains(p.Outcomes, outcome) {
			score += 4
		}
		if p.Vertical == vertical {
			score += 2
		}
		if slices.ContainsFunc(channels, p.SupportsChannel) {
			score++
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best < 0 {
		return Recommendation{}, false
	}
	p := latest[best]
	var reasons []string
	if slices.Contains(p.Outcomes, outcome) {
		reasons = append(reasons, "serves the outcome "+outcome)
	} else if outcome != "" {
		reasons = append(reasons, "no playbook serves the outcome "+outcome+" yet; this one is the closest")
	}
	if p.Vertical == vertical {
		reasons = append(reasons, "written for the "+vertical+" vertical")
	}
	var on []string
	for _, ch := range channels {
		if p.SupportsChannel(ch) && !slices.Contains(on, ch) {
			on = append(on, ch)
		}
	}
	if len(on) > 0 {
		reasons = append(reasons, "runs on "+strings.Join(on, ", "))
	} else {
		reasons = append(reasons, "needs a channel of one of the kinds "+strings.Join(p.Channels, ", ")+"; connect one before installing")
	}
	return Recommendation{PlaybookID: p.ID, Version: p.Version, Reasons: reasons}, true
}

// normalized returns i with empty lists for the kinds it has none of: the API shows [].
func (i Installs) normalized() Installs {
	if i.Labels == nil {
		i.Labels = []Label{}
	}
	if i.Fields == nil {
		i.Fields = []Field{}
	}
	if i.Content == nil {
		i.Content = []Content{}
	}
	if i.Popups == nil {
		i.Popups = []Popup{}
	}
	if i.Collections == nil {
		i.Collections = []Collection{}
	}
	if i.Reactions == nil {
		i.Reactions = []Reaction{}
	}
	return i
}
