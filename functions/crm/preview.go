package crm

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	crmapi "github.com/botplatform/api/shared/crm"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
)

// The actions a preview foresees for the subscriber's record.
const (
	ActionCreate    = "create"    // no record has the key's value: a sync creates one
	ActionUpdate    = "update"    // the record differs in at least one written field
	ActionUnchanged = "unchanged" // the record has every written value already
	ActionSkip      = "skip"      // the subscriber has no key value: a sync leaves them out
)

// Why a preview's field is not written.
const (
	SkipPullOnly      = "pull_only"      // the field is pulled from the CRM, never pushed
	SkipMissingValue  = "missing_value"  // the subscriber has no value for the source
	SkipNotAnOption   = "not_an_option"  // the converted value is none of the enum's options
	SkipNoTranslation = "no_translation" // values translate some values, not this one
	SkipUnknownSource = "unknown_source" // the bot no longer has the custom field
	SkipUnknownTarget = "unknown_target" // the CRM no longer has the field
	SkipReadOnly      = "read_only"      // the CRM's field became read-only
	SkipMissingKey    = "missing_key"    // the subscriber has no value to match a record by
)

// PreviewRequest is the body of POST .../preview: the subscriber to preview, or none for a
// sample subscriber.
type PreviewRequest struct {
	SubscriberID string `json:"subscriber_id"`
}

// PreviewKey is how the subscriber's record is found.
type PreviewKey struct {
	Field  string `json:"field"`
	Source string `json:"source"`
	Value  any    `json:"value"`
}

// PreviewField is what a sync would do with one mapped field.
type PreviewField struct {
	Source    string `json:"source"`
	Target    string `json:"target"`
	Direction string `json:"direction"`
	// Status is write or skip (Reason says why).
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
	// Value is what would be written, after conversion to the CRM field's type.
	Value any `json:"value,omitempty"`
	// Current is the record's value now and Changed whether the write changes it (an
	// update only).
	Current any   `json:"current,omitempty"`
	Changed *bool `json:"changed,omitempty"`
}

// Preview is what a sync would write for one subscriber. It is computed without writing
// anything anywhere.
type Preview struct {
	ConnectionID    string `json:"connection_id"`
	MappingRevision int64  `json:"mapping_revision"`
	// SubscriberID is the subscriber previewed; Sample is true for the sample subscriber.
	SubscriberID string     `json:"subscriber_id,omitempty"`
	Sample       bool       `json:"sample"`
	Object       string     `json:"object"`
	Key          PreviewKey `json:"key"`
	Action       string     `json:"action"`
	Reason       string     `json:"reason,omitempty"`
	// RecordID is the record found by the key (update, unchanged).
	RecordID string `json:"record_id,omitempty"`
	// Properties are what would be written, by CRM field.
	Properties map[string]any `json:"properties"`
	Fields     []PreviewField `json:"fields"`
	// Deal is the deal the sync would open (the mapping's deal): for a new record, and for
	// a record with no open deal in the mapping's pipeline.
	Deal *Deal `json:"deal,omitempty"`
}

// Preview computes what a sync with the connection's current mapping would write for the
// bot's subscriber id, or for a sample subscriber when id is "". For a real subscriber it
// reads the CRM record by the key (Find) to tell a creation from an update and show the
// differences; it never writes to the CRM or the store (beyond the discovery cache).
func (s *Service) Preview(ctx context.Context, bot, id, subscriberID string) (Preview, error) {
	c, err := s.load(ctx, bot, id)
	if err != nil {
		return Preview{}, err
	}
	if s.subscribers == nil {
		return Preview{}, errNoSubscribers()
	}
	m, err := s.Mapping(ctx, bot, id)
	if err != nil {
		return Preview{}, err
	}
	var person Person
	sample := subscriberID == ""
	if sample {
		person = samplePerson(stamp(s.now()))
	} else {
		if !ids.Valid("sub", subscriberID) {
			return Preview{}, httpapi.NotFound("subscriber")
		}
		if person, err = s.subscribers.Subscriber(ctx, bot, subscriberID); err != nil {
			return Preview{}, err
		}
	}
	cat, err := s.subscribers.Catalog(ctx, bot)
	if err != nil {
		return Preview{}, err
	}
	fs, err := s.fields(ctx, bot, c, m.Object, false)
	if err != nil {
		return Preview{}, err
	}
	targets := make(map[string]crmapi.Field, len(fs.Data))
	for _, f := range fs.Data {
		targets[f.Name] = f
	}
	p := Preview{ConnectionID: id, MappingRevision: m.Revision, Sample: sample, Object: m.Object,
		Properties: map[string]any{}, Fields: make([]PreviewField, 0, len(m.Fields))}
	if !sample {
		p.SubscriberID = person.ID
	}
	if sample {
		fillSample(&person, cat, m.MappingSpec, stamp(s.now()))
	}
	p.Key = PreviewKey{Field: m.Key, Source: m.KeySource}
	if v, ok := keyValue(person, cat, m.KeySource); ok {
		p.Key.Value = v
	}
	for _, f := range m.Fields {
		pf := PreviewField{Source: f.Source, Target: f.Target, Direction: f.Direction, Status: "write"}
		pf.Value, pf.Reason = push(person, cat, f, targets)
		if pf.Reason != "" {
			pf.Status, pf.Value = "skip", nil
		} else {
			p.Properties[f.Target] = pf.Value
		}
		p.Fields = append(p.Fields, pf)
	}
	switch {
	case p.Key.Value == nil:
		p.Action, p.Reason = ActionSkip, SkipMissingKey
	case sample:
		// The sample is nobody: the CRM is not asked for its record.
		p.Action = ActionCreate
	default:
		if err := s.compare(ctx, bot, c, m, &p); err != nil {
			return Preview{}, err
		}
	}
	if p.Action == ActionCreate {
		p.Deal = m.Deal
	}
	return p, nil
}

// compare reads the subscriber's record by the key and sets the action, each written
// field's current value, and whether the sync would open the mapping's deal.
func (s *Service) compare(ctx context.Context, bot string, c Connection, m Mapping, p *Preview) error {
	cl, err := s.clientOf(ctx, bot, c)
	if err != nil {
		return err
	}
	written := make([]string, 0, len(p.Properties))
	for k := range p.Properties {
		written = append(written, k)
	}
	slices.Sort(written)
	rec, err := cl.Find(ctx, m.Object, m.Key, p.Key.Value.(string), written)
	if errors.Is(err, crmapi.ErrNotFound) {
		p.Action = ActionCreate
		return nil
	}
	if err != nil {
		return s.callProblem(ctx, bot, c.ID, err)
	}
	p.RecordID, p.Action = rec.ID, ActionUnchanged
	for i := range p.Fields {
		pf := &p.Fields[i]
		if pf.Status != "write" {
			continue
		}
		pf.Current = rec.Properties[pf.Target]
		changed := !same(pf.Current, pf.Value)
		pf.Changed = &changed
		if changed {
			p.Action = ActionUpdate
		}
	}
	if m.Deal != nil {
		// A deal the sync opened before stays the subscriber's, whatever became of it.
		l, err := (&syncer{s: s, bot: bot, c: c}).loadLink(ctx, p.SubscriberID)
		if err != nil {
			return err
		}
		if l.Deal != nil && l.Deal.Pipeline == m.Deal.Pipeline {
			return nil
		}
		deals, err := cl.Deals(ctx, m.Object, rec.ID)
		if err != nil {
			return s.callProblem(ctx, bot, c.ID, err)
		}
		if !slices.ContainsFunc(deals, func(d crmapi.Deal) bool { return d.Status == crmapi.DealOpen && d.Pipeline == m.Deal.Pipeline }) {
			p.Deal = m.Deal
		}
	}
	return nil
}

// same reports whether a record's value equals a written one, as the CRM would compare
// them: numbers, booleans and times by value, text as text.
func same(current, written any) bool {
	a, b := asText(current), asText(written)
	if a == b {
		return true
	}
	if ta, err := time.Parse(time.RFC3339, a); err == nil {
		if tb, err := time.Parse(time.RFC3339, b); err == nil {
			return ta.Equal(tb)
		}
	}
	if fa, err := strconv.ParseFloat(a, 64); err == nil {
		if fb, err := strconv.ParseFloat(b, 64); err == nil {
			return fa == fb
		}
	}
	return false
}

func asText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

// value returns the subscriber's value of a source and its type: a string, float64, bool
// or time.Time; nil when the subscriber has none.
func value(person Person, cat Catalog, src source) (v any, typ string) {
	switch src.kind {
	case "label":
		has := slices.ContainsFunc(person.Labels, func(l string) bool { return strings.EqualFold(l, src.name) })
		return has, sourceLabel
	case "field":
		typ = cat.Fields[src.name]
		v = person.Fields[src.name]
		if typ == SubscriberDatetime {
			if s, ok := v.(string); ok {
				t, err := time.Parse(time.RFC3339, s)
				if err != nil {
					return nil, typ
				}
				return t, typ
			}
		}
		if s, ok := v.(string); ok && s == "" {
			return nil, typ
		}
		return v, typ
	}
	typ = builtins[src.name].typ
	str := map[string]string{"id": person.ID, "channel": person.Channel, "external_id": person.ExternalID,
		"first_name": person.FirstName, "last_name": person.LastName, "name": person.Name, "locale": person.Locale,
		"timezone": person.Timezone}
	switch src.name {
	case "email":
		if e, ok := person.Fields["email"].(string); ok && e != "" {
			return e, typ
		}
		return nil, typ
	case "created_at":
		return person.CreatedAt, typ
	case "updated_at":
		return person.UpdatedAt, typ
	case "last_seen_at":
		if person.LastSeenAt == nil {
			return nil, typ
		}
		return *person.LastSeenAt, typ
	}
	if s := str[src.name]; s != "" {
		return s, typ
	}
	return nil, typ
}

// keyValue is the subscriber's value of the key source, as text.
func keyValue(person Person, cat Catalog, keySource string) (string, bool) {
	src, _ := parseSource(keySource)
	v, _ := value(person, cat, src)
	switch x := v.(type) {
	case string:
		return x, x != ""
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// push converts the subscriber's value of f's source to what a sync writes to f's target,
// or says why it writes nothing.
func push(person Person, cat Catalog, f MappingField, targets map[string]crmapi.Field) (any, string) {
	if f.Direction == DirectionPull {
		return nil, SkipPullOnly
	}
	tf, ok := targets[f.Target]
	switch {
	case !ok:
		return nil, SkipUnknownTarget
	case tf.ReadOnly:
		return nil, SkipReadOnly
	}
	src, _ := parseSource(f.Source)
	v, typ := value(person, cat, src)
	switch {
	case typ == "":
		return nil, SkipUnknownSource
	case v == nil:
		return nil, SkipMissingValue
	}
	var out any
	switch x := v.(type) {
	case bool:
		if tf.Type == crmapi.TypeBool {
			return x, ""
		}
		out = strconv.FormatBool(x)
	case float64:
		if tf.Type == crmapi.TypeNumber {
			return x, ""
		}
		return strconv.FormatFloat(x, 'f', -1, 64), ""
	case time.Time:
		if tf.Type == crmapi.TypeDate {
			return x.UTC().Format(time.DateOnly), ""
		}
		return x.UTC().Format(time.RFC3339), ""
	case string:
		out = x
	default:
		return nil, SkipMissingValue
	}
	s := out.(string)
	if t, ok := f.Values[s]; ok {
		s = t
	} else if len(f.Values) > 0 && (tf.Type == crmapi.TypeEnum || boolish(typ)) {
		return nil, SkipNoTranslation
	}
	if tf.Type == crmapi.TypeEnum && !slices.Contains(tf.Options, s) {
		return nil, SkipNotAnOption
	}
	return s, ""
}

// samplePerson is the sample subscriber a preview without subscriber_id shows: example
// values of every kind, so that each conversion shows.
func samplePerson(now time.Time) Person {
	seen := now.Add(-time.Hour)
	return Person{ID: "sub_sample", Channel: "telegram", ExternalID: "100200300", FirstName: "Ada", LastName: "Lovelace",
		Name: "Ada Lovelace", Locale: "en-GB", Timezone: "Europe/London", Fields: map[string]any{"email": "ada.lovelace@example.com"},
		CreatedAt: now.AddDate(0, -1, 0), UpdatedAt: now, LastSeenAt: &seen}
}

// fillSample gives the sample subscriber a value of every custom field and every label the
// mapping names.
func fillSample(person *Person, cat Catalog, m MappingSpec, now time.Time) {
	for _, f := range m.Fields {
		src, _ := parseSource(f.Source)
		switch src.kind {
		case "label":
			person.Labels = append(person.Labels, src.name)
		case "field":
			if _, ok := person.Fields[src.name]; ok {
				continue
			}
			switch cat.Fields[src.name] {
			case SubscriberString:
				person.Fields[src.name] = "sample " + strings.ReplaceAll(src.name, "_", " ")
			case SubscriberNumber:
				person.Fields[src.name] = 42.0
			case SubscriberBoolean:
				person.Fields[src.name] = true
			case SubscriberDatetime:
				person.Fields[src.name] = now.Format(time.RFC3339)
			}
		}
	}
}
