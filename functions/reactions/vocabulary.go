package reactions

import (
	"context"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/text"
)

// Vocabulary is what reactions refer to outside themselves: the bot's labels and custom
// fields, which the subscribers family owns. The composition root (functions/platform)
// adapts that family's service to it; this package never imports it.
type Vocabulary interface {
	// Labels returns every label of the bot.
	Labels(ctx context.Context, botID string) ([]Label, error)
	// Fields returns every custom field of the bot.
	Fields(ctx context.Context, botID string) ([]Field, error)
	// EnsureLabels returns the id of each named label (matched ignoring case), creating
	// those that do not exist. The map is keyed by the names as given.
	EnsureLabels(ctx context.Context, botID string, names []string) (map[string]string, error)
	// EnsureFields returns the id of each field by name, creating those that do not exist
	// with the given type. A name that exists with another type fails with an error that
	// matches ErrFieldTypeConflict under errors.Is, and nothing is created.
	EnsureFields(ctx context.Context, botID string, fields []Field) (map[string]string, error)
}

// ErrFieldTypeConflict is what a Vocabulary returns when a field exists with another type.
var ErrFieldTypeConflict = errors.New("reactions: a custom field exists with another type")

// Label is a subscriber label of a bot.
type Label struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Field is a custom subscriber field of a bot.
type Field struct {
	ID   string    `json:"id"`
	Name string    `json:"name"`
	Type FieldType `json:"type"`
}

// FieldType is the type of a custom field's values.
type FieldType string

// The field types.
const (
	FieldString   FieldType = "string"
	FieldNumber   FieldType = "number"
	FieldBoolean  FieldType = "boolean"
	FieldDatetime FieldType = "datetime"
)

// Known reports whether t is a field type.
func (t FieldType) Known() bool {
	switch t {
	case FieldString, FieldNumber, FieldBoolean, FieldDatetime:
		return true
	}
	return false
}

// checkValue reports why v (a JSON scalar) is not a value of type t, or "".
func (t FieldType) checkValue(v json.RawMessage) string {
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return "is not a JSON value"
	}
	switch t {
	case FieldString:
		s, ok := x.(string)
		if !ok {
			return "must be a string: the field is of type string"
		}
		if utf8.RuneCountInString(s) > MaxStringValueLen {
			return "must be at most " + itoa(MaxStringValueLen) + " characters"
		}
		if err := text.Check(s, text.Message); err != nil {
			return err.Error()
		}
	case FieldNumber:
		if _, ok := x.(float64); !ok {
			return "must be a number: the field is of type number"
		}
	case FieldBoolean:
		if _, ok := x.(bool); !ok {
			return "must be true or false: the field is of type boolean"
		}
	case FieldDatetime:
		s, ok := x.(string)
		if !ok {
			return "must be an RFC 3339 time string: the field is of type datetime"
		}
		if _, err := time.Parse(time.RFC3339, s); err != nil {
			return "must be an RFC 3339 time such as 2026-01-31T09:00:00Z: the field is of type datetime"
		}
	default:
		return "the field has an unknown type"
	}
	return ""
}

// opAllows reports whether a condition operator applies to a field of type t: ordering only
// to numbers and times, contains only to strings.
func opAllows(op string, t FieldType) bool {
	switch op {
	case OpGt, OpGte, OpLt, OpLte:
		return t == FieldNumber || t == FieldDatetime
	case OpContains:
		return t == FieldString
	}
	return true
}
