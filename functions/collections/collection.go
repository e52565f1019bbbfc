// Package collections serves a bot's data tables: collections with a typed schema and their
// records, with equality filters on indexed fields and an all-or-nothing batch upsert.
// docs/collections.md explains every rule and limit.
package collections

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/text"
)

// FieldType is the type of a field's values.
type FieldType string

// The field types.
const (
	TypeString     FieldType = "string"
	TypeNumber     FieldType = "number"
	TypeBoolean    FieldType = "boolean"
	TypeDatetime   FieldType = "datetime"
	TypeStringList FieldType = "string_list"
)

func (t FieldType) valid() bool {
	switch t {
	case TypeString, TypeNumber, TypeBoolean, TypeDatetime, TypeStringList:
		return true
	}
	return false
}

// indexable reports whether values of the type can be filtered by equality. A list would
// need one index entry per element, which would make a record's write count unbounded.
func (t FieldType) indexable() bool { return t != TypeStringList }

// Limits of collections and records; docs/collections.md gives the reason for each.
const (
	MaxCollectionsPerBot    = 50
	MaxNameLen              = 100
	MaxFields               = 50
	MaxIndexedFields        = 5
	MaxFieldNameLen         = 64
	MaxRecordsPerCollection = 100_000
	MaxRecordBytes          = 32 << 10
	MaxStringLen            = 10_000
	MaxIndexedStringLen     = 200
	MaxListItems            = 100
	MaxListItemLen          = 1_000
	MaxExternalKeyLen       = 128
	MaxBatchRecords         = 500
)

// Field is one column of a collection's schema.
type Field struct {
	Name     string    `json:"name"`
	Type     FieldType `json:"type"`
	Required bool      `json:"required"`
	Indexed  bool      `json:"indexed"`
}

// storedField is a field with its internal key. Records store values under the key, not the
// name, so a field that is removed and later added again under the same name never shows
// the old field's values (which may be of another type).
type storedField struct {
	Field
	Key string `json:"key"`
}

// Collection is a bot's data table as the API shows it.
type Collection struct {
	ID     string  `json:"id"`
	Name   string  `json:"name"`
	Fields []Field `json:"fields"`
	// RecordCount is the number of records, maintained with each write.
	RecordCount int64     `json:"record_count"`
	Revision    int64     `json:"revision"`
	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// collectionDoc is a collection as stored.
type collectionDoc struct {
	ID     string        `json:"id"`
	Name   string        `json:"name"`
	Fields []storedField `json:"fields"`
	// NextKey numbers the next field's key; keys are never reused.
	NextKey   int       `json:"next_key"`
	Revision  int64     `json:"revision"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (c *collectionDoc) view(count int64) Collection {
	fields := make([]Field, len(c.Fields))
	for i, f := range c.Fields {
		fields[i] = f.Field
	}
	return Collection{ID: c.ID, Name: c.Name, Fields: fields, RecordCount: count, Revision: c.Revision, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

// field returns the field called name.
func (c *collectionDoc) field(name string) (storedField, bool) {
	for _, f := range c.Fields {
		if f.Name == name {
			return f, true
		}
	}
	return storedField{}, false
}

// byKey maps field keys to fields.
func (c *collectionDoc) byKey() map[string]storedField {
	m := make(map[string]storedField, len(c.Fields))
	for _, f := range c.Fields {
		m[f.Key] = f
	}
	return m
}

// FieldInput is a field in a request. On create, name and type are required; on update, a
// field that already exists may leave out what it does not change.
type FieldInput struct {
	Name     *string `json:"name"`
	Type     *string `json:"type"`
	Required *bool   `json:"required"`
	Indexed  *bool   `json:"indexed"`
}

var fieldNameRe = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

func checkName(p *httpapi.Problems, name string) string {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		p.Add("name", "is required")
	case len([]rune(name)) > MaxNameLen:
		p.Add("name", "must be at most %d characters", MaxNameLen)
	default:
		p.Text("name", name, text.Name)
	}
	return name
}

// checkFieldName adds a problem when name is not lower_snake_case of at most 64 characters.
func checkFieldName(p *httpapi.Problems, path, name string) {
	switch {
	case name == "":
		p.Add(path, "is required")
	case len(name) > MaxFieldNameLen || !fieldNameRe.MatchString(name):
		p.Add(path, "must be lower_snake_case: a lower-case letter, then lower-case letters, digits and _, at most %d characters", MaxFieldNameLen)
	}
}

// newSchema builds the schema of a new collection from the request's fields.
func newSchema(p *httpapi.Problems, in []FieldInput) ([]storedField, int) {
	if len(in) == 0 {
		p.Add("fields", "must list at least one field")
	}
	var out []storedField
	next := 1
	for i, fi := range in {
		path := fmt.Sprintf("fields[%d]", i)
		f, ok := newField(p, path, fi)
		if !ok {
			continue
		}
		out = append(out, storedField{Field: f, Key: fmt.Sprintf("f%d", next)})
		next++
	}
	checkSchema(p, in, out)
	return out, next
}

// newField checks a field that does not exist yet.
func newField(p *httpapi.Problems, path string, fi FieldInput) (Field, bool) {
	var f Field
	ok := true
	if fi.Name == nil {
		p.Add(path+".name", "is required")
		ok = false
	} else {
		f.Name = *fi.Name
		n := len(*p)
		checkFieldName(p, path+".name", f.Name)
		ok = ok && len(*p) == n
	}
	switch {
	case fi.Type == nil:
		p.Add(path+".type", "is required: one of string, number, boolean, datetime, string_list")
		ok = false
	case !FieldType(*fi.Type).valid():
		p.Add(path+".type", "must be one of string, number, boolean, datetime, string_list")
		ok = false
	default:
		f.Type = FieldType(*fi.Type)
	}
	f.Required = fi.Required != nil && *fi.Required
	f.Indexed = fi.Indexed != nil && *fi.Indexed
	if ok && f.Indexed && !f.Type.indexable() {
		p.Add(path+".indexed", "a %s field cannot be indexed", f.Type)
		ok = false
	}
	return f, ok
}

// checkSchema adds the problems of a whole schema: the field count, duplicate names and the
// number of indexed fields. in is the request, for the paths of duplicates.
func checkSchema(p *httpapi.Problems, in []FieldInput, fields []storedField) {
	if len(in) > MaxFields {
		p.Add("fields", "must list at most %d fields", MaxFields)
	}
	seen := map[string]bool{}
	for i, fi := range in {
		if fi.Name == nil {
			continue
		}
		if seen[*fi.Name] {
			p.Add(fmt.Sprintf("fields[%d].name", i), "%q is listed twice", *fi.Name)
		}
		seen[*fi.Name] = true
	}
	indexed := 0
	for _, f := range fields {
		if f.Indexed {
			indexed++
		}
	}
	if indexed > MaxIndexedFields {
		p.Add("fields", "at most %d fields may be indexed", MaxIndexedFields)
	}
}

// changeSchema applies an update's field list to the current schema: fields matched by name
// keep their key; new fields get fresh keys; fields left out are removed. It refuses what
// existing records could not satisfy or what would leave the index incomplete: changing a
// type, indexing an existing field, making a field required, adding a required field. It
// returns the keys of removed indexed fields, whose index entries must be purged.
func changeSchema(p *httpapi.Problems, cur *collectionDoc, in []FieldInput) (fields []storedField, next int, purged []string) {
	if len(in) == 0 {
		p.Add("fields", "must list at least one field")
	}
	next = cur.NextKey
	kept := map[string]bool{}
	for i, fi := range in {
		path := fmt.Sprintf("fields[%d]", i)
		if fi.Name == nil {
			p.Add(path+".name", "is required")
			continue
		}
		old, exists := cur.field(*fi.Name)
		if !exists {
			f, ok := newField(p, path, fi)
			if !ok {
				continue
			}
			if f.Required {
				p.Add(path+".required", "a field added to an existing collection must be optional: its records have no value for it")
				continue
			}
			fields = append(fields, storedField{Field: f, Key: fmt.Sprintf("f%d", next)})
			next++
			continue
		}
		kept[old.Key] = true
		f := old
		if fi.Type != nil && FieldType(*fi.Type) != old.Type {
			p.Add(path+".type", "cannot change from %s; remove the field and add a new one (its values are not carried over)", old.Type)
		}
		if fi.Indexed != nil && *fi.Indexed != old.Indexed {
			p.Add(path+".indexed", "cannot change on an existing field; remove the field and add a new one (its values are not carried over)")
		}
		if fi.Required != nil && *fi.Required != old.Required {
			if *fi.Required {
				p.Add(path+".required", "an existing optional field cannot become required: records may lack a value")
			} else {
				f.Required = false
			}
		}
		fields = append(fields, f)
	}
	for _, f := range cur.Fields {
		if !kept[f.Key] && f.Indexed {
			purged = append(purged, f.Key)
		}
	}
	checkSchema(p, in, fields)
	return fields, next, purged
}
