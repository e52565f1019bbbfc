package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/botplatform/api/shared/jsonguard"
)

// MaxBodyBytes caps every request body.
const MaxBodyBytes = 1 << 20

// Validator is implemented by request types that check themselves after decoding.
type Validator interface {
	Validate() error
}

// Decode reads a strict JSON body into v: at most MaxBodyBytes, member names exactly as
// documented and each at most once, no unknown fields, no trailing data, then v.Validate()
// if v has one.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return E(KindUnsupportedMediaType, "unsupported_media_type", "request bodies must be application/json")
		}
	}
	// The body is read whole (it is capped) so that its members can be checked before decoding.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return decodeError(err)
	}
	return DecodeJSON(body, v, "")
}

// DecodeOptional is Decode for an action whose body may be left out altogether (POST
// .../validate, .../verify, .../clone): no body at all leaves v as it is; a body given is
// decoded as strictly as any other.
func DecodeOptional(w http.ResponseWriter, r *http.Request, v any) error {
	if r.ContentLength == 0 {
		return nil
	}
	return Decode(w, r, v)
}

// DecodeJSON is Decode for a document already read, such as a member kept as
// json.RawMessage whose shape depends on another member (a channel's credentials depend on
// its type). Field paths in errors start with path ("credentials.token").
func DecodeJSON(body []byte, v any, path string) error {
	if err := checkMembers(body, reflect.TypeOf(v), path); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return prefixField(decodeError(err), path)
	}
	// A second Decode must hit EOF: Decoder.More misses `{"a":1}}`.
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return E(KindInvalid, "invalid_body", "unexpected data after the JSON body")
	}
	if val, ok := v.(Validator); ok {
		return val.Validate()
	}
	return nil
}

// prefixField puts path in front of the field an error names.
func prefixField(err error, path string) error {
	var e *Error
	if path == "" || !errors.As(err, &e) {
		return err
	}
	if f, ok := e.Extensions["field"].(string); ok {
		full := joinPath(path, f)
		e.Detail = strings.Replace(e.Detail, strconv.Quote(f), strconv.Quote(full), 1)
		e.Extensions["field"] = full
	}
	return e
}

func decodeError(err error) error {
	var (
		tooLarge *http.MaxBytesError
		syntax   *json.SyntaxError
		typeErr  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &tooLarge):
		return Errorf(KindTooLarge, "body_too_large", "request body exceeds %d bytes", MaxBodyBytes)
	case errors.Is(err, io.EOF):
		return E(KindInvalid, "invalid_body", "a JSON request body is required")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return E(KindInvalid, "invalid_body", "the JSON body ends unexpectedly")
	case errors.As(err, &syntax):
		return Errorf(KindInvalid, "invalid_body", "malformed JSON at byte %d", syntax.Offset)
	case errors.As(err, &typeErr):
		if typeErr.Field == "" {
			return Errorf(KindInvalid, "invalid_body", "the body must be %s", jsonKind(typeErr))
		}
		return Errorf(KindInvalid, "invalid_body", "field %q must be %s", typeErr.Field, jsonKind(typeErr)).
			With("field", typeErr.Field)
	}
	// encoding/json reports unknown fields only as text: `json: unknown field "x"`.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if f, uerr := strconv.Unquote(name); uerr == nil {
			name = f
		}
		return Errorf(KindInvalid, "unknown_field", "unknown field %q", name).With("field", name)
	}
	return E(KindInvalid, "invalid_body", "the JSON body could not be read").Wrap(err)
}

// errStop ends a member walk early; what stopped it (a syntax error, a type mismatch) is
// left for json.Decoder to report in its own words.
var errStop = errors.New("stop")

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkMembers refuses, before the body is decoded, what encoding/json would let through or
// report poorly. First, in one linear pass (jsonguard.Check), nesting deeper than
// jsonguard.MaxDepth, invalid UTF-8 and escaped lone surrogates (encoding/json would replace
// the last two with U+FFFD: the value stored would not be the value sent). Then it walks the
// body alongside the Go type it will be decoded into: a member whose name matches a field
// only case-insensitively ("Name" for "name"), a member given twice (encoding/json keeps the
// last silently), and an unknown member, which it names by its path ("settings.colour")
// where encoding/json names only the key. The walk's memory is linear in the body: paths are
// kept as a stack of segments and spelled out only for an error.
func checkMembers(body []byte, t reflect.Type, path string) error {
	gerr := jsonguard.Check(body)
	var ge *jsonguard.Error
	if errors.As(gerr, &ge) && ge.Kind == jsonguard.TooDeep {
		return Errorf(KindInvalid, "invalid_body", "the JSON body nests deeper than %d levels (arrays and objects, at byte %d)", jsonguard.MaxDepth, ge.Offset).
			With("max_depth", jsonguard.MaxDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	w := &walker{dec: dec, base: path, bad: -1}
	if ge != nil {
		w.bad = int64(ge.Offset) // the walk names the member or element that holds it
		w.badKind = ge.Kind
	}
	err := w.walk(t)
	if err != nil && err != errStop {
		return err
	}
	if ge != nil { // the walk stopped before reaching it: refuse without a path
		return encodingError(ge.Kind, "")
	}
	return nil
}

// encodingError is the problem for text the platform cannot store faithfully.
func encodingError(kind, field string) error {
	what := "invalid UTF-8"
	if kind == jsonguard.LoneSurrogate {
		what = "an escaped lone surrogate (\\ud800 to \\udfff unpaired), which is no character"
	}
	if field == "" {
		return Errorf(KindInvalid, "invalid_body", "the JSON body holds %s", what)
	}
	return Errorf(KindInvalid, "invalid_body", "field %q holds %s", field, what).With("field", field)
}

// walker walks one JSON document token by token.
type walker struct {
	dec  *json.Decoder
	base string
	segs []segment // the path of the value being walked, below base
	// bad is the offset of the byte jsonguard refused (-1: none); the token that spans it
	// is named in the error.
	bad     int64
	badKind string
}

// segment is one step of a path: a member name, or an array index when key is "" and
// index >= 0.
type segment struct {
	key   string
	index int
	// revision: the member is a request type's expected_revision field (not a key of
	// customer data that happens to have that name).
	revision bool
}

// path spells out the current path ("steps[2].text").
func (w *walker) path() string {
	var b strings.Builder
	b.WriteString(w.base)
	for _, s := range w.segs {
		if s.index >= 0 {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s.key)
	}
	return b.String()
}

// atRevision reports whether the value being walked is a request type's expected_revision.
// Revisions start at 1 everywhere (docs/conventions.md), so the kernel refuses 0 and negative
// ones for every route: a route cannot forget to, and none answers them 409 as stale.
func (w *walker) atRevision() bool {
	return len(w.segs) > 0 && w.segs[len(w.segs)-1].revision
}

// token reads the next token, failing when it spans the byte jsonguard refused.
func (w *walker) token() (json.Token, error) {
	tok, err := w.dec.Token()
	if err != nil {
		return nil, errStop
	}
	if w.bad >= 0 && w.dec.InputOffset() > w.bad {
		return nil, encodingError(w.badKind, w.path())
	}
	return tok, nil
}

// walk consumes one value. t is the type it decodes into, nil when unknown (any,
// json.RawMessage, a type that decodes itself, or a mismatch the decoder will report). It
// recurses once per level, at most jsonguard.MaxDepth deep.
func (w *walker) walk(t reflect.Type) error {
	tok, err := w.token()
	if err != nil {
		return err
	}
	if n, ok := tok.(json.Number); ok && w.atRevision() {
		if v, err := strconv.ParseInt(string(n), 10, 64); err == nil && v < 1 {
			f := w.path()
			return Errorf(KindInvalid, "invalid_body", "field %q must be a revision you read: an integer of at least 1", f).With("field", f)
		}
	}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t != nil && (t.Kind() == reflect.Interface || reflect.PointerTo(t).Implements(unmarshalerType)) {
		t = nil
	}
	switch tok {
	case json.Delim('{'):
		var seen map[string]bool
		for w.dec.More() {
			kt, err := w.token() // a bad byte in a member name names the object
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			w.segs = append(w.segs, segment{key: key, index: -1})
			if seen == nil {
				seen = map[string]bool{}
			}
			if seen[key] {
				sub := w.path()
				return Errorf(KindInvalid, "duplicate_field", "field %q is given more than once", sub).With("field", sub)
			}
			seen[key] = true
			var ft reflect.Type
			switch {
			case t == nil:
			case t.Kind() == reflect.Map:
				ft = t.Elem()
			case t.Kind() == reflect.Struct:
				var ok bool
				if ft, ok = exactField(t, key); !ok {
					sub := w.path()
					return Errorf(KindInvalid, "unknown_field", "unknown field %q", sub).With("field", sub)
				}
				w.segs[len(w.segs)-1].revision = key == "expected_revision"
			default:
				return errStop // an object where t is no object: the decoder reports the type
			}
			if err := w.walk(ft); err != nil {
				return err
			}
			w.segs = w.segs[:len(w.segs)-1]
		}
		if _, err := w.token(); err != nil {
			return err
		}
	case json.Delim('['):
		var et reflect.Type
		if t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) {
			et = t.Elem()
		}
		for i := 0; w.dec.More(); i++ {
			w.segs = append(w.segs, segment{index: i})
			if err := w.walk(et); err != nil {
				return err
			}
			w.segs = w.segs[:len(w.segs)-1]
		}
		if _, err := w.token(); err != nil {
			return err
		}
	}
	return nil
}

// exactField finds the struct field whose JSON name is exactly name, looking through
// embedded structs as encoding/json does.
func exactField(t reflect.Type, name string) (reflect.Type, bool) {
	m, ok := jsonFields.Load(t)
	if !ok {
		m, _ = jsonFields.LoadOrStore(t, fieldsOf(t))
	}
	ft, ok := m.(map[string]reflect.Type)[name]
	return ft, ok
}

// jsonFields holds each request struct type's fields by JSON name (fieldsOf): every body
// member is looked up, and reflect.VisibleFields allocates its answer anew at each call. The
// types are the program's own, so the map stays small.
var jsonFields sync.Map // reflect.Type → map[string]reflect.Type

// fieldsOf maps t's JSON member names to their fields' types; of two fields with one name,
// the first (as reflect.VisibleFields orders them) wins.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if !f.IsExported() && !f.Anonymous || tag == "-" || f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			continue // unexported, ignored, or an embedded struct whose fields are promoted
		}
		n, _, _ := strings.Cut(tag, ",")
		if n == "" {
			n = f.Name
		}
		if _, dup := out[n]; !dup {
			out[n] = f.Type
		}
	}
	return out
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// jsonKind names the JSON type the target expects, in the words of a client.
func jsonKind(e *json.UnmarshalTypeError) string {
	if e.Type == nil {
		return "of another type"
	}
	switch e.Type.Kind().String() {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return fmt.Sprintf("of type %s", e.Type)
}

// WriteJSON sends v with status as application/json.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode response: %w", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// NoContent sends 204.
func NoContent(w http.ResponseWriter) error {
	w.WriteHeader(http.StatusNoContent)
	return nil
}
