// Package merge parses and renders merge fields: the {{ subscriber.first_name | default: "there" }}
// placeholders of content documents, email campaigns and pushes. A text is parsed once into
// literal runs and fields; rendering looks each field up in flat data and applies its filters.
//
// The language is deliberately small (a path and a chain of filters, no logic): content is
// written by marketers and checked at publish, so every field must be knowable in advance.
package merge

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits of one text. They bound what a render can cost, whatever the author wrote.
const (
	MaxFields     = 500
	MaxPathLen    = 100
	MaxFilters    = 5
	MaxArgLen     = 200
	MaxTruncateTo = 10000
)

// Error is one problem of a text, at a byte offset.
type Error struct {
	Offset  int    `json:"offset"`
	Message string `json:"message"`
}

func (e Error) Error() string { return fmt.Sprintf("at byte %d: %s", e.Offset, e.Message) }

// Template is a parsed text.
type Template struct {
	parts []part
	size  int // bytes of literal text, to size the output
}

type part struct {
	lit   string
	field *Field
}

// Field is one placeholder.
type Field struct {
	// Path is the dotted name looked up in the data ("subscriber.first_name").
	Path string
	// Offset is where the placeholder starts in the text.
	Offset  int
	filters []filter
}

type filter struct {
	name string
	arg  string
	n    int
}

// Filters lists every filter with what it does; docs/content.md is written from it.
var Filters = map[string]string{
	"default":    `default: "text" renders text when the field is empty or unknown for the recipient`,
	"upcase":     "upper-cases the value",
	"downcase":   "lower-cases the value",
	"capitalize": "upper-cases the first letter",
	"truncate":   "truncate: N keeps the first N characters, then adds an ellipsis",
}

// Parse parses s. It returns every problem it finds rather than the first, so an author fixes
// them at once, and the template of what did parse, whose Fields can still be checked (a
// misspelt filter should not hide an unknown field). Render only a template without errors.
func Parse(s string) (*Template, []Error) {
	t := &Template{}
	var errs []Error
	fields := 0
	for i := 0; i < len(s); {
		j := strings.Index(s[i:], "{{")
		if j < 0 {
			t.lit(s[i:])
			break
		}
		t.lit(s[i : i+j])
		start := i + j
		end := strings.Index(s[start+2:], "}}")
		if end < 0 {
			errs = append(errs, Error{start, "{{ is never closed by }}"})
			break
		}
		body := s[start+2 : start+2+end]
		i = start + 2 + end + 2
		if fields++; fields > MaxFields {
			errs = append(errs, Error{start, fmt.Sprintf("more than %d merge fields", MaxFields)})
			break
		}
		f, err := parseField(body, start)
		if err != nil {
			errs = append(errs, *err)
			continue
		}
		t.parts = append(t.parts, part{field: f})
	}
	return t, errs
}

func (t *Template) lit(s string) {
	if s == "" {
		return
	}
	t.size += len(s)
	t.parts = append(t.parts, part{lit: s})
}

func parseField(body string, offset int) (*Field, *Error) {
	segs := splitPipes(body)
	path := strings.TrimSpace(segs[0])
	if path == "" {
		return nil, &Error{offset, "empty merge field {{ }}"}
	}
	if len(path) > MaxPathLen {
		return nil, &Error{offset, fmt.Sprintf("field name longer than %d characters", MaxPathLen)}
	}
	for _, name := range strings.Split(path, ".") {
		if !isIdent(name) {
			return nil, &Error{offset, fmt.Sprintf("%q is not a field name: write names such as subscriber.first_name", path)}
		}
	}
	f := &Field{Path: path, Offset: offset}
	if len(segs)-1 > MaxFilters {
		return nil, &Error{offset, fmt.Sprintf("more than %d filters on %s", MaxFilters, path)}
	}
	for _, seg := range segs[1:] {
		name, arg, hasArg := strings.Cut(strings.TrimSpace(seg), ":")
		name = strings.TrimSpace(name)
		flt := filter{name: name}
		switch name {
		case "upcase", "downcase", "capitalize":
			if hasArg {
				return nil, &Error{offset, fmt.Sprintf("filter %s takes no argument", name)}
			}
		case "default":
			s, ok := quoted(strings.TrimSpace(arg))
			if !hasArg || !ok {
				return nil, &Error{offset, `default needs a quoted text: default: "there"`}
			}
			if len(s) > MaxArgLen {
				return nil, &Error{offset, fmt.Sprintf("default text longer than %d bytes", MaxArgLen)}
			}
			flt.arg = s
		case "truncate":
			n, err := strconv.Atoi(strings.TrimSpace(arg))
			if !hasArg || err != nil || n < 1 || n > MaxTruncateTo {
				return nil, &Error{offset, fmt.Sprintf("truncate needs a length from 1 to %d: truncate: 20", MaxTruncateTo)}
			}
			flt.n = n
		case "":
			return nil, &Error{offset, "empty filter after |"}
		default:
			return nil, &Error{offset, fmt.Sprintf("unknown filter %q; known: capitalize, default, downcase, truncate, upcase", name)}
		}
		f.filters = append(f.filters, flt)
	}
	return f, nil
}

// splitPipes splits at | outside double quotes.
func splitPipes(s string) []string {
	var out []string
	inQuote, esc, start := false, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case esc:
			esc = false
		case c == '\\' && inQuote:
			esc = true
		case c == '"':
			inQuote = !inQuote
		case c == '|' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// quoted unquotes a "..." literal with \" and \\ escapes.
func quoted(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	in := s[1 : len(s)-1]
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\' && i+1 < len(in) && (in[i+1] == '"' || in[i+1] == '\\'):
			b.WriteByte(in[i+1])
			i++
		case c == '"':
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Fields lists the template's placeholders in order.
func (t *Template) Fields() []*Field {
	var out []*Field
	for _, p := range t.parts {
		if p.field != nil {
			out = append(out, p.field)
		}
	}
	return out
}

// Data is what fields are looked up in: dotted paths to values. A path absent from Data
// renders as empty (or as its default).
type Data map[string]string

// Render writes the text with every field replaced by its value, passed through its filters
// and then through escape (nil writes values as they are; HTML parts pass html.EscapeString).
func (t *Template) Render(data Data, escape func(string) string) string {
	var b strings.Builder
	b.Grow(t.size + 16*len(t.parts))
	for _, p := range t.parts {
		if p.field == nil {
			b.WriteString(p.lit)
			continue
		}
		v := p.field.value(data)
		if escape != nil {
			v = escape(v)
		}
		b.WriteString(v)
	}
	return b.String()
}

func (f *Field) value(data Data) string {
	v := data[f.Path]
	for _, flt := range f.filters {
		switch flt.name {
		case "default":
			if strings.TrimSpace(v) == "" {
				v = flt.arg
			}
		case "upcase":
			v = strings.ToUpper(v)
		case "downcase":
			v = strings.ToLower(v)
		case "capitalize":
			if r, n := utf8.DecodeRuneInString(v); n > 0 {
				v = string(unicode.ToUpper(r)) + v[n:]
			}
		case "truncate":
			if utf8.RuneCountInString(v) > flt.n {
				v = string([]rune(v)[:flt.n]) + "…"
			}
		}
	}
	return v
}
