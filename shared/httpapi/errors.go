package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/botplatform/api/shared/store"
	"github.com/botplatform/api/shared/text"
)

// Kind classifies an error; status() is the one place a kind becomes an HTTP status.
type Kind int

// Error kinds. Each family returns these; none writes a status code itself.
const (
	KindInternal Kind = iota
	KindInvalid
	KindUnauthenticated
	KindPaymentRequired
	KindForbidden
	KindNotFound
	KindMethodNotAllowed
	KindConflict
	KindTooLarge
	KindUnsupportedMediaType
	KindUnprocessable
	KindTooManyRequests
	KindUnavailable
	// KindBadGateway is a 502: an upstream answered, but with something unusable (a
	// model's answer that is not the JSON asked for).
	KindBadGateway
)

func (k Kind) status() int {
	switch k {
	case KindInvalid:
		return http.StatusBadRequest
	case KindUnauthenticated:
		return http.StatusUnauthorized
	case KindPaymentRequired:
		return http.StatusPaymentRequired
	case KindForbidden:
		return http.StatusForbidden
	case KindNotFound:
		return http.StatusNotFound
	case KindMethodNotAllowed:
		return http.StatusMethodNotAllowed
	case KindConflict:
		return http.StatusConflict
	case KindTooLarge:
		return http.StatusRequestEntityTooLarge
	case KindUnsupportedMediaType:
		return http.StatusUnsupportedMediaType
	case KindUnprocessable:
		return http.StatusUnprocessableEntity
	case KindTooManyRequests:
		return http.StatusTooManyRequests
	case KindUnavailable:
		return http.StatusServiceUnavailable
	case KindBadGateway:
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// Error is a client-facing failure: Code and Detail are sent, Err is only logged.
type Error struct {
	Kind   Kind
	Code   string
	Detail string
	// Extensions are extra problem members (field, current_revision, errors, ...).
	Extensions map[string]any
	// Err is the internal cause; it never reaches the client.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return e.Code + ": " + e.Detail
}

func (e *Error) Unwrap() error { return e.Err }

// Status is the HTTP status the error is sent with.
func (e *Error) Status() int { return e.Kind.status() }

// With adds a problem extension member and returns e. A standard member's name (status,
// code, ...) panics: Problem writes those itself, so the value would never reach a client.
func (e *Error) With(key string, value any) *Error {
	if reservedMember(key) {
		// The problem's own member would overwrite it: the client would never see it.
		panic("httpapi: problem extension " + key + " is a standard member's name")
	}
	if e.Extensions == nil {
		e.Extensions = map[string]any{}
	}
	e.Extensions[key] = value
	return e
}

// Wrap attaches an internal cause and returns e.
func (e *Error) Wrap(err error) *Error { e.Err = err; return e }

// E builds an Error.
func E(kind Kind, code, detail string) *Error {
	return &Error{Kind: kind, Code: code, Detail: detail}
}

// Errorf builds an Error with a formatted detail.
func Errorf(kind Kind, code, format string, args ...any) *Error {
	return &Error{Kind: kind, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// NotFound is the answer for anything missing or outside the caller's reach; it never says which.
func NotFound(what string) *Error {
	return Errorf(KindNotFound, "not_found", "%s not found", what)
}

// StaleRevision is the 409 for a failed expected_revision check, carrying the current revision.
func StaleRevision(current int64) *Error {
	return Errorf(KindConflict, "stale_revision",
		"expected_revision does not match the current revision %d; reload and retry", current).
		With("current_revision", current)
}

// InvalidParam is a 400 for a bad query or path parameter.
func InvalidParam(name, detail string) *Error {
	return E(KindInvalid, "invalid_parameter", detail).With("parameter", name)
}

// FieldError is one problem with one field of a request body.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// KindOf is the Kind of the *Error in err's chain, or -1 when there is none: how code that
// calls another family's service tells its not-found from its invalid.
func KindOf(err error) Kind {
	var he *Error
	if errors.As(err, &he) {
		return he.Kind
	}
	return -1
}

// Problems collects every field problem of a request, so a client fixes them all at once.
type Problems []FieldError

// Add records a problem with field.
func (p *Problems) Add(field, format string, args ...any) {
	*p = append(*p, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Require records that field is required when its value is empty.
func (p *Problems) Require(field, value string) {
	if value == "" {
		p.Add(field, "is required")
	}
}

// Text records a problem with field when s breaks rule (shared/text) and reports whether s
// passed: every family checks the text it keeps with this one rule book.
func (p *Problems) Text(field, s string, rule text.Rule) bool {
	if err := text.Check(s, rule); err != nil {
		p.Add(field, "%s", err.Error())
		return false
	}
	return true
}

// Err returns nil without problems, else a 400 validation_failed listing them.
func (p Problems) Err() error {
	if len(p) == 0 {
		return nil
	}
	detail := p[0].Field + ": " + p[0].Message
	if len(p) > 1 {
		detail += fmt.Sprintf(" (and %d more)", len(p)-1)
	}
	return E(KindInvalid, "validation_failed", detail).With("errors", []FieldError(p))
}

// Unprocessable returns nil without problems, else a 422 with the given code listing them:
// for a body that is well-formed but cannot be acted on as it is (content that fails its
// checks at validate or publish), as opposed to a malformed request (Err, 400).
func (p Problems) Unprocessable(code string) error {
	if len(p) == 0 {
		return nil
	}
	e := asError(p.Err())
	e.Kind, e.Code = KindUnprocessable, code
	return e
}

// AsError returns the client-safe *Error that err is answered with: its own when it is
// one, a status for the store's known conditions, else an opaque 500 whose cause is only
// for the log. Callers that answer outside an HTTP response (MCP tool errors) use it.
func AsError(err error) *Error { return asError(err) }

// problemTypeBase prefixes each problem type URI; docs/errors.md documents every code.
const problemTypeBase = "https://docs.botplatform.dev/errors/"

// asError turns any error into a client-safe *Error: known store conditions get their
// status, everything else is an opaque 500.
func asError(err error) *Error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, store.ErrInvalidCursor):
		// A sealed cursor replayed on a list whose binding matches but whose store query
		// differs (another user's token list in the same account) is still the client's error.
		return E(KindInvalid, "invalid_cursor", "cursor is malformed, altered, or belongs to another list").Wrap(err)
	case errors.Is(err, store.ErrTooLarge):
		// A family that bounds what it stores never gets here; if one does not, the client
		// still learns it sent too much rather than seeing a 500.
		return E(KindTooLarge, "resource_too_large", "the change would make the resource larger than can be stored").Wrap(err)
	case errors.Is(err, store.ErrUnavailable):
		return E(KindUnavailable, "temporarily_unavailable", "the service is busy; retry shortly").Wrap(err)
	default:
		return E(KindInternal, "internal_error", "an internal error occurred").Wrap(err)
	}
}

// reservedMember reports whether key is a member Problem always writes itself.
func reservedMember(key string) bool {
	switch key {
	case "type", "title", "status", "detail", "code", "request_id":
		return true
	}
	return false
}

// Problem is e as the members of its RFC 9457 problem document: what a response carries,
// and what an MCP tool error carries.
func (e *Error) Problem(requestID string) map[string]any {
	status := e.Status()
	body := make(map[string]any, 6+len(e.Extensions))
	for k, v := range e.Extensions {
		body[k] = v
	}
	body["type"] = problemTypeBase + e.Code
	body["title"] = http.StatusText(status)
	body["status"] = status
	body["detail"] = e.Detail
	body["code"] = e.Code
	body["request_id"] = requestID
	return body
}

// writeProblem sends e as RFC 9457 application/problem+json.
func writeProblem(w http.ResponseWriter, requestID string, e *Error) {
	status := e.Status()
	b, err := json.Marshal(e.Problem(requestID))
	if err != nil {
		b = []byte(`{"type":"` + problemTypeBase + `internal_error","status":500,"code":"internal_error"}`)
		status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	// A 429 or 503 that says how long to wait sends it as Retry-After (RFC 9110 10.2.3).
	if wait, ok := e.Extensions["retry_after_seconds"].(int64); ok && (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) {
		h.Set("Retry-After", strconv.FormatInt(max(wait, 1), 10))
	}
	if status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// RangeTooLong is the 400 range_too_long of a report or list whose time range spans more
// than maxDays days (the analytics families' bound): the span it had and max_days.
func RangeTooLong(span time.Duration, maxDays int) error {
	return Errorf(KindInvalid, "range_too_long", "the range spans %s days; at most %d",
		strconv.FormatFloat(math.Round(span.Hours()/24*10)/10, 'f', -1, 64), maxDays).With("max_days", maxDays)
}
