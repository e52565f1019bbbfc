package collections

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/botplatform/api/shared/text"
)

// canonical checks a JSON value against a field and returns its stored form: numbers as
// float64 (minus zero is zero), datetimes in UTC, strings and lists as sent. A problem is
// returned as a message for the client.
func canonical(f Field, raw json.RawMessage) (json.RawMessage, string) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, "is not a JSON value"
	}
	var out any
	switch f.Type {
	case TypeString:
		s, ok := v.(string)
		if !ok {
			return nil, "must be a string"
		}
		limit := MaxStringLen
		if f.Indexed {
			limit = MaxIndexedStringLen
		}
		if utf8.RuneCountInString(s) > limit {
			return nil, fmt.Sprintf("must be at most %d characters", limit)
		}
		if err := text.Check(s, text.Message); err != nil {
			return nil, err.Error()
		}
		out = s
	case TypeNumber:
		n, ok := v.(json.Number)
		if !ok {
			return nil, "must be a number"
		}
		x, err := strconv.ParseFloat(string(n), 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return nil, "must be a finite number within the range of a 64-bit float"
		}
		if x == 0 {
			x = 0 // minus zero equals zero, so it must also be stored and indexed as zero
		}
		out = x
	case TypeBoolean:
		b, ok := v.(bool)
		if !ok {
			return nil, "must be true or false"
		}
		out = b
	case TypeDatetime:
		s, ok := v.(string)
		if !ok {
			return nil, "must be an RFC 3339 time such as 2026-05-01T09:30:00Z"
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return nil, "must be an RFC 3339 time such as 2026-05-01T09:30:00Z"
		}
		out = t.UTC().Format(time.RFC3339Nano)
	case TypeStringList:
		list, ok := v.([]any)
		if !ok {
			return nil, "must be an array of strings"
		}
		if len(list) > MaxListItems {
			return nil, fmt.Sprintf("must have at most %d items", MaxListItems)
		}
		items := make([]string, len(list))
		for i, x := range list {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Sprintf("item %d must be a string", i)
			}
			if utf8.RuneCountInString(s) > MaxListItemLen {
				return nil, fmt.Sprintf("item %d must be at most %d characters", i, MaxListItemLen)
			}
			if err := text.Check(s, text.Line); err != nil {
				return nil, fmt.Sprintf("item %d %v", i, err)
			}
			items[i] = s
		}
		out = items
	default:
		return nil, "has a field type this server does not know"
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, "cannot be stored"
	}
	return b, ""
}

// indexToken is the index form of a stored (canonical) value of an indexable type: equal
// values, and only equal values, have equal tokens, and a token never contains '#', which
// separates it from the record id in the index entry's sort key.
func indexToken(t FieldType, stored json.RawMessage) string {
	switch t {
	case TypeString:
		var s string
		_ = json.Unmarshal(stored, &s)
		return escapeToken(s)
	case TypeNumber:
		var x float64
		_ = json.Unmarshal(stored, &x)
		return strconv.FormatFloat(x, 'g', -1, 64)
	case TypeBoolean:
		var b bool
		_ = json.Unmarshal(stored, &b)
		return strconv.FormatBool(b)
	case TypeDatetime:
		var s string
		_ = json.Unmarshal(stored, &s)
		return s
	}
	return ""
}

// escapeToken makes a string safe to end with '#': '%' and '#' become %25 and %23.
func escapeToken(s string) string {
	if !strings.ContainsAny(s, "%#") {
		return s
	}
	return strings.NewReplacer("%", "%25", "#", "%23").Replace(s)
}

// filterToken parses a filter's query-string value as a value of the field and returns its
// index token; the message explains a value the field cannot hold.
func filterToken(f Field, text string) (string, string) {
	switch f.Type {
	case TypeString:
		if utf8.RuneCountInString(text) > MaxIndexedStringLen {
			return "", fmt.Sprintf("must be at most %d characters, like every value of an indexed field", MaxIndexedStringLen)
		}
		return escapeToken(text), ""
	case TypeNumber:
		x, err := strconv.ParseFloat(text, 64)
		if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
			return "", "must be a finite number"
		}
		if x == 0 {
			x = 0
		}
		return strconv.FormatFloat(x, 'g', -1, 64), ""
	case TypeBoolean:
		if text != "true" && text != "false" {
			return "", "must be true or false"
		}
		return text, ""
	case TypeDatetime:
		t, err := time.Parse(time.RFC3339Nano, text)
		if err != nil {
			return "", "must be an RFC 3339 time such as 2026-05-01T09:30:00Z (encode + as %2B)"
		}
		return t.UTC().Format(time.RFC3339Nano), ""
	}
	return "", "cannot be filtered"
}
