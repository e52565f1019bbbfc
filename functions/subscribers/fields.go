package subscribers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/ids"
	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// FieldType is the type of a custom field's values. It never changes: a field of another
// type is another field.
type FieldType string

// The field types.
const (
	TypeString   FieldType = "string"
	TypeNumber   FieldType = "number"
	TypeBoolean  FieldType = "boolean"
	TypeDatetime FieldType = "datetime"
)

// FieldTypes lists every field type.
func FieldTypes() []FieldType { return []FieldType{TypeString, TypeNumber, TypeBoolean, TypeDatetime} }

// Field is a custom subscriber field ("plan", "last_order_total"): a name subscribers' values
// are keyed by, and the type every value must have.
type Field struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Type      FieldType `json:"type"`
	CreatedAt time.Time `json:"created_at"`
}

// FieldSpec describes a field to create: its name and type.
type FieldSpec struct {
	Name string    `json:"name"`
	Type FieldType `json:"type"`
}

// Field limits.
const (
	MaxFieldNameLen    = 64
	MaxFieldsPerBot    = 200
	MaxStringValueLen  = 2000
	MaxFieldsPerChange = 30
)

const fieldsCounter = "FIELDS"

// fieldNameRe is lower_snake_case: a letter, then letters, digits and single underscores.
var fieldNameRe = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// reservedFieldNames are the subscriber's own attributes: a custom field of one of these
// names would be ambiguous wherever fields and attributes meet (templates, conditions,
// exports).
var reservedFieldNames = []string{
	"channel", "created_at", "external_id", "fields", "first_name", "id", "labels",
	"last_name", "last_seen_at", "locale", "name", "revision", "timezone", "updated_at",
}

func fieldNotFound() error { return httpapi.NotFound("field") }

func (spec FieldSpec) check(p *httpapi.Problems, prefix string) {
	switch {
	case spec.Name == "":
		p.Add(prefix+"name", "is required")
	case len(spec.Name) > MaxFieldNameLen:
		p.Add(prefix+"name", "must be at most %d characters", MaxFieldNameLen)
	case !fieldNameRe.MatchString(spec.Name):
		p.Add(prefix+"name", "must be lower_snake_case: a lower-case letter, then lower-case letters, digits and single underscores")
	case slices.Contains(reservedFieldNames, spec.Name):
		p.Add(prefix+"name", "%q is a subscriber attribute; choose another name", spec.Name)
	case strings.HasPrefix(spec.Name, "fld_"):
		p.Add(prefix+"name", "must not start with fld_, which is how field ids start")
	}
	if !slices.Contains(FieldTypes(), spec.Type) {
		p.Add(prefix+"type", "must be one of string, number, boolean, datetime")
	}
}

func fieldTaken(id string) error {
	return httpapi.E(httpapi.KindConflict, "name_taken", "another field of this bot has this name").
		With("conflicting_id", id).Wrap(ErrNameTaken)
}

// CreateField adds a custom field to the bot. A name in use is 409 name_taken with the other
// field's id; the bot's 201st field is 409 limit_reached.
func (s *Service) CreateField(ctx context.Context, bot string, spec FieldSpec) (Field, error) {
	var p httpapi.Problems
	spec.check(&p, "")
	if err := p.Err(); err != nil {
		return Field{}, err
	}
	now := s.now()
	f := Field{ID: ids.At("fld", now), Name: spec.Name, Type: spec.Type, CreatedAt: stamp(now)}
	data, err := store.Encode(f)
	if err != nil {
		return Field{}, err
	}
	ref, err := nameItem(fieldNameKey(bot, f.Name), f.ID)
	if err != nil {
		return Field{}, err
	}
	err = store.Counted(ctx, s.store, countKey(bot, fieldsCounter), +1, func(c store.Counter) error {
		if c.Count >= MaxFieldsPerBot {
			return limitReached("a bot may have at most %d custom fields; delete one first", MaxFieldsPerBot)
		}
		err := s.store.Transact(ctx, []store.Write{
			c.Write,
			store.PutOp(store.Item{Key: fieldKey(bot, f.ID), Data: data, Revision: 1}, store.MustNotExist),
			store.PutOp(ref, store.MustNotExist),
		})
		if failedAt(err) == 2 {
			holder, herr := s.nameHolder(ctx, ref.Key)
			if herr != nil && !errors.Is(herr, store.ErrNotFound) {
				return herr
			}
			return fieldTaken(holder)
		}
		return err
	})
	if err != nil {
		return Field{}, fmt.Errorf("create field: %w", err)
	}
	return f, nil
}

// GetField returns one field of the bot.
func (s *Service) GetField(ctx context.Context, bot, id string) (Field, error) {
	if !ids.Valid("fld", id) {
		return Field{}, fieldNotFound()
	}
	it, err := s.store.Get(ctx, fieldKey(bot, id))
	if errors.Is(err, store.ErrNotFound) {
		return Field{}, fieldNotFound()
	}
	if err != nil {
		return Field{}, err
	}
	return store.Decode[Field](it)
}

// ListFields returns one page of the bot's fields, oldest first.
func (s *Service) ListFields(ctx context.Context, bot string, limit int, cursor string) ([]Field, string, error) {
	page, err := s.store.Query(ctx, store.Query{PK: fieldsPartition(bot), Limit: limit, Cursor: cursor})
	if err != nil {
		return nil, "", err
	}
	out, err := decodeFields(page.Items)
	return out, page.Next, err
}

// Fields returns every field of the bot, oldest first (at most MaxFieldsPerBot).
func (s *Service) Fields(ctx context.Context, bot string) ([]Field, error) {
	items, err := s.queryAll(ctx, store.Query{PK: fieldsPartition(bot)})
	if err != nil {
		return nil, err
	}
	return decodeFields(items)
}

func decodeFields(items []store.Item) ([]Field, error) {
	out := make([]Field, 0, len(items))
	for _, it := range items {
		f, err := store.Decode[Field](it)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// DeleteField deletes a field. Its values disappear from every subscriber at once (responses
// only show values of existing fields) and are erased from storage in the background. A
// later field of the same name is a new field: the old values never come back.
func (s *Service) DeleteField(ctx context.Context, bot, id string) error {
	f, err := s.GetField(ctx, bot, id)
	if isNotFound(err) && ids.Valid("fld", id) {
		if _, gerr := s.store.Get(ctx, fieldGoneKey(bot, id)); gerr == nil {
			return s.startPurge(ctx, jobPurgeField, bot, id) // a repeat while the erasure runs
		}
	}
	if err != nil {
		return err
	}
	err = store.Counted(ctx, s.store, countKey(bot, fieldsCounter), -1, func(c store.Counter) error {
		return s.store.Transact(ctx, []store.Write{
			c.Write,
			store.DeleteOp(fieldKey(bot, id), store.MustExist),
			store.DeleteOp(fieldNameKey(bot, f.Name), store.Always),
			store.PutOp(store.Item{Key: fieldGoneKey(bot, id), Revision: 1}, store.Always),
		})
	})
	if failedAt(err) == 1 {
		return fieldNotFound() // deleted concurrently; that deletion started the erasure
	}
	if err != nil {
		return fmt.Errorf("delete field: %w", err)
	}
	return s.startPurge(ctx, jobPurgeField, bot, id)
}

// EnsureFields returns the id of the field of each spec's name, creating the fields that do
// not exist yet. A field that exists with another type is an error matching
// ErrFieldTypeConflict (409 field_type_conflict).
func (s *Service) EnsureFields(ctx context.Context, bot string, specs []FieldSpec) (map[string]string, error) {
	var p httpapi.Problems
	for i, spec := range specs {
		spec.check(&p, fmt.Sprintf("fields[%d].", i))
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	// A type conflict is found before anything is created, so an import that fails on one
	// leaves the bot as it was (a conflict created concurrently can still stop it midway).
	for _, spec := range specs {
		id, err := s.nameHolder(ctx, fieldNameKey(bot, spec.Name))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if f, err := s.GetField(ctx, bot, id); err == nil && f.Type != spec.Type {
			return nil, typeConflict(f, spec)
		}
	}
	out := make(map[string]string, len(specs))
	for _, spec := range specs {
		id, err := s.ensureField(ctx, bot, spec)
		if err != nil {
			return nil, err
		}
		out[spec.Name] = id
	}
	return out, nil
}

func typeConflict(f Field, spec FieldSpec) error {
	return httpapi.Errorf(httpapi.KindConflict, "field_type_conflict", "field %q exists with type %s, not %s", spec.Name, f.Type, spec.Type).
		With("conflicting_id", f.ID).Wrap(ErrFieldTypeConflict)
}

func (s *Service) ensureField(ctx context.Context, bot string, spec FieldSpec) (string, error) {
	for try := range attempts {
		if err := pause(ctx, try); err != nil {
			return "", err
		}
		id, err := s.nameHolder(ctx, fieldNameKey(bot, spec.Name))
		switch {
		case err == nil:
			f, err := s.GetField(ctx, bot, id)
			if isNotFound(err) {
				continue // deleted between the two reads
			}
			if err != nil {
				return "", err
			}
			if f.Type != spec.Type {
				return "", typeConflict(f, spec)
			}
			return f.ID, nil
		case !errors.Is(err, store.ErrNotFound):
			return "", err
		}
		f, err := s.CreateField(ctx, bot, spec)
		if errors.Is(err, ErrNameTaken) {
			continue
		}
		return f.ID, err
	}
	return "", busy("field name " + spec.Name)
}

// catalog is the bot's fields, read once per request that reads or writes values.
type catalog struct {
	byName map[string]Field
	byID   map[string]Field
}

func (s *Service) catalog(ctx context.Context, bot string) (catalog, error) {
	fields, err := s.Fields(ctx, bot)
	if err != nil {
		return catalog{}, err
	}
	c := catalog{byName: make(map[string]Field, len(fields)), byID: make(map[string]Field, len(fields))}
	for _, f := range fields {
		c.byName[f.Name] = f
		c.byID[f.ID] = f
	}
	return c, nil
}

// resolve turns values keyed by field name or id into values keyed by field id in their
// stored form (nil clears), adding a problem for each unknown field and each value of the
// wrong type.
func (c catalog) resolve(p *httpapi.Problems, values map[string]any) map[string]any {
	out := make(map[string]any, len(values))
	via := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(values)) { // problems in a stable order
		path := "fields." + k
		f, ok := c.byName[k]
		if !ok {
			f, ok = c.byID[k]
		}
		if !ok {
			p.Add(path, "no custom field of this bot has this name or id")
			continue
		}
		if other, dup := via[f.ID]; dup {
			p.Add(path, "names the same field as fields.%s", other)
			continue
		}
		via[f.ID] = k
		if values[k] == nil {
			out[f.ID] = nil
			continue
		}
		v, problem := f.Type.value(values[k])
		if problem != "" {
			p.Add(path, "%s", problem)
			continue
		}
		out[f.ID] = v
	}
	return out
}

// value returns v in the stored form of the type, or why it does not fit.
func (t FieldType) value(v any) (any, string) {
	switch t {
	case TypeString:
		s, ok := v.(string)
		if !ok {
			return nil, "must be a string (the field's type is string)"
		}
		if len([]rune(s)) > MaxStringValueLen {
			return nil, fmt.Sprintf("must be at most %d characters", MaxStringValueLen)
		}
		if err := text.Check(s, text.Message); err != nil {
			return nil, err.Error()
		}
		return s, ""
	case TypeNumber:
		f, ok := number(v)
		if !ok {
			return nil, "must be a number (the field's type is number)"
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, "must be a finite number"
		}
		return f, ""
	case TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, "must be true or false (the field's type is boolean)"
		}
		return b, ""
	case TypeDatetime:
		var t time.Time
		switch x := v.(type) {
		case time.Time:
			t = x
		case string:
			parsed, err := time.Parse(time.RFC3339, x)
			if err != nil {
				return nil, "must be an RFC 3339 date-time such as 2026-03-01T12:00:00Z (the field's type is datetime)"
			}
			t = parsed
		default:
			return nil, "must be an RFC 3339 date-time string (the field's type is datetime)"
		}
		return stamp(t).Format(time.RFC3339), ""
	}
	return nil, "has a field type this version does not know"
}

// number accepts the numeric forms a JSON decoder or a Go caller produces.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}
