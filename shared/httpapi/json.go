package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
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
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	// A second Decode must hit EOF: Decoder.More misses `{"a":1}}`.
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return decodeError(err)
		}
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
			return Errorf(KindInvalid, "invalid_body", "the body must be a JSON %s", jsonKind(typeErr))
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
