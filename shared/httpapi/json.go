package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// MaxBodyBytes caps every request body.
const MaxBodyBytes = 1 << 20

// Validator is implemented by request types that check themselves after decoding.
type Validator interface {
	Validate() error
}

// Decode reads a strict JSON body into v: at most MaxBodyBytes, no unknown fields, no
// trailing data, then v.Validate() if v has one.
func Decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return E(KindUnsupportedMediaType, "unsupported_media_type", "request bodies must be application/json")
		}
	}
	// The body is read whole (it is capped) so that an unknown field can be located in it.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return decodeError(err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return unknownFieldError(err, v, body)
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

// unknownFieldError is decodeError, except that an unknown field is named by its path in
// the body ("settings.colour"): encoding/json names only the key, which misleads when the
// same key is valid elsewhere (a "name" inside "settings").
func unknownFieldError(err error, v any, body []byte) error {
	e := decodeError(err)
	var he *Error
	if !errors.As(e, &he) || he.Code != "unknown_field" {
		return e
	}
	key, _ := he.Extensions["field"].(string)
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return e
	}
	path, ok := unknownFieldPath(reflect.TypeOf(v), doc, key, "")
	if !ok {
		return e
	}
	return Errorf(KindInvalid, "unknown_field", "unknown field %q", path).With("field", path)
}

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// unknownFieldPath walks doc alongside the Go type it was decoded into, as encoding/json
// does, and returns the path of a member named key that no field accepts.
func unknownFieldPath(t reflect.Type, doc any, key, path string) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return "", false // it decodes itself; DisallowUnknownFields does not reach inside
	}
	switch d := doc.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(d)) {
			sub := joinPath(path, k)
			var ft reflect.Type
			switch t.Kind() {
			case reflect.Map:
				ft = t.Elem()
			case reflect.Struct:
				var known bool
				if ft, known = jsonField(t, k); !known {
					if k == key {
						return sub, true
					}
					continue
				}
			default:
				return "", false
			}
			if p, ok := unknownFieldPath(ft, d[k], key, sub); ok {
				return p, true
			}
		}
	case []any:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for i, el := range d {
				if p, ok := unknownFieldPath(t.Elem(), el, key, fmt.Sprintf("%s[%d]", path, i)); ok {
					return p, true
				}
			}
		}
	}
	return "", false
}

// jsonField finds the struct field encoding/json decodes member name into: the exact
// name first, else a case-insensitive match.
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	var folded reflect.Type
	for _, f := range reflect.VisibleFields(t) {
		tag := f.Tag.Get("json")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if !f.IsExported() || tag == "-" || f.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			continue // unexported, ignored, or an embedded struct whose fields are promoted
		}
		n, _, _ := strings.Cut(tag, ",")
		if n == "" {
			n = f.Name
		}
		if n == name {
			return f.Type, true
		}
		if folded == nil && strings.EqualFold(n, name) {
			folded = f.Type
		}
	}
	return folded, folded != nil
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
