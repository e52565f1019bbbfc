package subscribers

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // Lambda's provided.al2023 image has no zoneinfo; IANA names must still resolve
	"unicode"
	"unicode/utf8"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Subscriber is a person who talks to the bot on one channel. Their identity there is
// (channel, external_id), unique per bot and never changed; everything else is theirs to
// change through the API or the conversation.
type Subscriber struct {
	ID         string  `json:"id"`
	Channel    string  `json:"channel"`
	ExternalID string  `json:"external_id"`
	FirstName  *string `json:"first_name"`
	LastName   *string `json:"last_name"`
	// Name is the display name: first and last name joined, null when neither is known.
	Name     *string `json:"name"`
	Locale   *string `json:"locale"`
	Timezone *string `json:"timezone"`
	// Labels are label ids, sorted (so, oldest label first).
	Labels []string `json:"labels"`
	// Fields are the custom field values, keyed by field name; a field without a value is absent.
	Fields     map[string]any `json:"fields"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
	LastSeenAt *time.Time     `json:"last_seen_at"`
	Revision   int64          `json:"revision"`
}

// The channel types a subscriber can talk on: the spec's bot-interface messenger, template
// messenger and social-network messenger. A bot has at most one channel of each type, so the
// type names the channel.
const (
	ChannelTelegram = "telegram"
	ChannelWhatsApp = "whatsapp"
	ChannelVK       = "vk"
	// ChannelWeb is a website visitor who answered a popup's form, known by the visitor id
	// the popup script keeps in the browser (docs/popups.md). The platform cannot message
	// it: no channel of this type is ever connected.
	ChannelWeb = "web"
	// ChannelEmail is a person known only by their email address: the sender of a message an
	// inbound email route's reaction action ran for, when no subscriber of the bot had that
	// address in its email field (docs/email.md). Its external id is the address, lower
	// case. The platform cannot message it as a channel either: no channel of this type is
	// ever connected (email goes out through campaigns, to the email field).
	ChannelEmail = "email"
)

// Channels lists the channel types.
func Channels() []string {
	return []string{ChannelTelegram, ChannelWhatsApp, ChannelVK, ChannelWeb, ChannelEmail}
}

// Subscriber limits.
const (
	MaxExternalIDLen       = 128
	MaxNameLen             = 100
	MaxLabelsPerSubscriber = 50
	// MaxLabelsPerChange bounds the labels one upsert adds: each costs two writes of its
	// transaction (a check that the label exists and the membership).
	MaxLabelsPerChange = 20
)

// Changes are what an upsert or an update sets on a subscriber. Nil members are left as
// they are.
type Changes struct {
	// FirstName and LastName replace the names; "" clears one.
	FirstName *string
	LastName  *string
	// Locale replaces the BCP 47 locale ("pt-br" is stored as "pt-BR").
	Locale *string
	// Timezone replaces the IANA time zone.
	Timezone *string
	// LastSeenAt moves last_seen_at forward; an earlier time than the stored one is ignored.
	LastSeenAt *time.Time
	// Fields set custom field values, keyed by field name or field id; a nil value clears.
	Fields map[string]any
	// AddLabels and RemoveLabels are label ids.
	AddLabels    []string
	RemoveLabels []string

	// emailField is the id of the field named email when Fields sets or clears it (prepare).
	emailField string
}

// localeRe accepts the BCP 47 tags messengers report in practice once case is normalized:
// language, optional script, optional region ("en", "pt-BR", "zh-Hant-TW", "es-419").
var localeRe = regexp.MustCompile(`^[a-z]{2,3}(-[A-Z][a-z]{3})?(-([A-Z]{2}|[0-9]{3}))?$`)

// canonicalLocale normalizes the letter case of a tag's parts: Telegram sends "pt-br".
func canonicalLocale(tag string) string {
	parts := strings.Split(strings.ReplaceAll(strings.TrimSpace(tag), "_", "-"), "-")
	for i, part := range parts {
		switch {
		case i == 0:
			parts[i] = strings.ToLower(part)
		case len(part) == 4:
			parts[i] = strings.ToUpper(part[:1]) + strings.ToLower(part[1:])
		default:
			parts[i] = strings.ToUpper(part)
		}
	}
	return strings.Join(parts, "-")
}

// checkIdentity adds the problems of a channel identity.
func checkIdentity(p *httpapi.Problems, channel, externalID string) {
	if channel == "" {
		p.Add("channel", "is required")
	} else if !slices.Contains(Channels(), channel) {
		p.Add("channel", "must be one of telegram, whatsapp, vk, web, email")
	}
	switch {
	case externalID == "":
		p.Add("external_id", "is required")
	case !p.Text("external_id", externalID, text.Line):
	case utf8.RuneCountInString(externalID) > MaxExternalIDLen:
		p.Add("external_id", "must be at most %d characters", MaxExternalIDLen)
	case strings.ContainsFunc(externalID, unicode.IsSpace):
		p.Add("external_id", "must not contain white space")
	}
}

func checkPersonName(p *httpapi.Problems, field string, name *string) {
	if name == nil {
		return
	}
	n := strings.TrimSpace(*name)
	switch {
	case utf8.RuneCountInString(n) > MaxNameLen:
		p.Add(field, "must be at most %d characters", MaxNameLen)
	default:
		p.Text(field, n, text.Name)
	}
}

// maxClockSkew is how far in the future a reported last_seen_at may be: a client's clock
// may run ahead of ours.
const maxClockSkew = 5 * time.Minute

// check adds every problem the changes have on their own, before any lookup.
func (c Changes) check(p *httpapi.Problems, now time.Time) {
	if c.LastSeenAt != nil && c.LastSeenAt.After(now.Add(maxClockSkew)) {
		p.Add("last_seen_at", "must not be in the future")
	}
	checkPersonName(p, "first_name", c.FirstName)
	checkPersonName(p, "last_name", c.LastName)
	if c.Locale != nil && !localeRe.MatchString(canonicalLocale(*c.Locale)) {
		p.Add("locale", "must be a BCP 47 tag such as en or pt-BR")
	}
	if c.Timezone != nil {
		if _, err := time.LoadLocation(*c.Timezone); err != nil || *c.Timezone == "" || *c.Timezone == "Local" {
			p.Add("timezone", "must be an IANA time zone name such as Europe/Berlin")
		}
	}
	if len(c.Fields) > MaxFieldsPerChange {
		p.Add("fields", "may set at most %d fields at once", MaxFieldsPerChange)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Fields)) { // problems in a stable order
		if !fieldNameRe.MatchString(k) && !ids.Valid("fld", k) {
			p.Add("fields."+k, "is neither a field name (lower_snake_case) nor a field id")
		}
	}
	if len(c.AddLabels) > MaxLabelsPerChange {
		p.Add("labels", "may add at most %d labels at once", MaxLabelsPerChange)
	}
	for i, l := range c.AddLabels {
		if !ids.Valid("lbl", l) {
			p.Add(fmt.Sprintf("labels[%d]", i), "must be a label id such as lbl_...")
		}
	}
}

// record is a subscriber as stored. Field values are keyed by field id, so a field deleted
// and created again under the same name never shows the old values.
type record struct {
	ID         string         `json:"id"`
	Channel    string         `json:"channel"`
	ExternalID string         `json:"external_id"`
	FirstName  string         `json:"first_name,omitempty"`
	LastName   string         `json:"last_name,omitempty"`
	Locale     string         `json:"locale,omitempty"`
	Timezone   string         `json:"timezone,omitempty"`
	Labels     []string       `json:"labels,omitempty"`
	Values     map[string]any `json:"values,omitempty"`
	CreatedAt  time.Time      `json:"created_at"`
	UpdatedAt  time.Time      `json:"updated_at"`
	LastSeenAt *time.Time     `json:"last_seen_at,omitempty"`
	// EmailField is the id of the field named email when a change last wrote its value:
	// the value of that field is the record's email index entry (email.go).
	EmailField string `json:"email_field,omitempty"`
	// revision is the item's, not the document's.
	revision int64
}

func decodeRecord(it store.Item) (record, error) {
	r, err := store.Decode[record](it)
	r.revision = it.Revision
	return r, err
}

func (r record) clone() record {
	r.Labels = slices.Clone(r.Labels)
	r.Values = maps.Clone(r.Values)
	if r.LastSeenAt != nil {
		t := *r.LastSeenAt
		r.LastSeenAt = &t
	}
	return r
}

// sameAs reports whether two records say the same thing (times of the write aside), so that
// a change that changes nothing makes no new revision.
func (r record) sameAs(o record) bool {
	r.UpdatedAt, o.UpdatedAt = time.Time{}, time.Time{}
	r.revision, o.revision = 0, 0
	if len(r.Labels) == 0 {
		r.Labels = nil
	}
	if len(o.Labels) == 0 {
		o.Labels = nil
	}
	if len(r.Values) == 0 {
		r.Values = nil
	}
	if len(o.Values) == 0 {
		o.Values = nil
	}
	return r.FirstName == o.FirstName && r.LastName == o.LastName && r.Locale == o.Locale &&
		r.Timezone == o.Timezone && slices.Equal(r.Labels, o.Labels) && maps.Equal(r.Values, o.Values) &&
		sameTime(r.LastSeenAt, o.LastSeenAt) && r.EmailField == o.EmailField
}

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return a.Equal(*b)
}

// apply makes the changes on r; values are already resolved to field ids (nil clears).
func (c Changes) apply(r *record, values map[string]any) {
	if c.FirstName != nil {
		r.FirstName = strings.TrimSpace(*c.FirstName)
	}
	if c.LastName != nil {
		r.LastName = strings.TrimSpace(*c.LastName)
	}
	if c.Locale != nil {
		r.Locale = canonicalLocale(*c.Locale)
	}
	if c.Timezone != nil {
		r.Timezone = *c.Timezone
	}
	if c.LastSeenAt != nil && (r.LastSeenAt == nil || c.LastSeenAt.After(*r.LastSeenAt)) {
		t := stamp(*c.LastSeenAt)
		r.LastSeenAt = &t
	}
	if c.emailField != "" {
		r.EmailField = c.emailField
	}
	for id, v := range values {
		if v == nil {
			delete(r.Values, id)
			continue
		}
		if r.Values == nil {
			r.Values = map[string]any{}
		}
		r.Values[id] = v
	}
	for _, l := range c.AddLabels {
		if !slices.Contains(r.Labels, l) {
			r.Labels = append(r.Labels, l)
		}
	}
	r.Labels = slices.DeleteFunc(r.Labels, func(l string) bool { return slices.Contains(c.RemoveLabels, l) })
	slices.Sort(r.Labels)
}

// item is the stored form of r at revision rev.
func (r record) item(bot string, rev int64) (store.Item, error) {
	data, err := store.Encode(r)
	if err != nil {
		return store.Item{}, err
	}
	it := store.Item{Key: subscriberKey(bot, r.ID), GSI1: channelIndex(bot, r.Channel, r.ID), Data: data, Revision: rev}
	if a := r.indexedEmail(); a != "" {
		it.GSI2 = emailIndex(bot, a, r.ID)
	}
	return it, nil
}

// view is what rendering needs besides the records: the field catalog (values of deleted
// fields are not shown) and the labels being removed in the background (not shown either).
type view struct {
	fields map[string]Field
	gone   map[string]bool
}

func (v view) render(r record) Subscriber {
	sub := Subscriber{
		ID: r.ID, Channel: r.Channel, ExternalID: r.ExternalID,
		FirstName: optional(r.FirstName), LastName: optional(r.LastName),
		Name:   optional(strings.TrimSpace(r.FirstName + " " + r.LastName)),
		Locale: optional(r.Locale), Timezone: optional(r.Timezone),
		Labels: []string{}, Fields: map[string]any{},
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, LastSeenAt: r.LastSeenAt, Revision: r.revision,
	}
	for _, l := range r.Labels {
		if !v.gone[l] {
			sub.Labels = append(sub.Labels, l)
		}
	}
	for id, val := range r.Values {
		if f, ok := v.fields[id]; ok {
			sub.Fields[f.Name] = val
		}
	}
	return sub
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
