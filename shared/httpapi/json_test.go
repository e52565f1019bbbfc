package httpapi_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
)

type zone struct {
	Timezone string   `json:"timezone"`
	Locales  []string `json:"locales"`
}

type embedded struct {
	Note string `json:"note"`
}

// sample is a request body with every shape the strict decoder must walk.
type sample struct {
	embedded
	Name     string          `json:"name"`
	Count    int             `json:"count"`
	Settings *zone           `json:"settings"`
	Items    []zone          `json:"items"`
	Tags     map[string]zone `json:"tags"`
	Rights   auth.RightSet   `json:"rights"`
	Ignored  string          `json:"-"`
}

// checked is sample with a Validate method.
type checked struct {
	Name string `json:"name"`
}

func (c *checked) Validate() error {
	if c.Name == "invalid" {
		return httpapi.E(httpapi.KindInvalid, "validation_failed", "name: is invalid")
	}
	return nil
}

func decode(t *testing.T, contentType, body string, v any) error {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return httpapi.Decode(httptest.NewRecorder(), r, v)
}

func asHTTPError(t *testing.T, err error) *httpapi.Error {
	t.Helper()
	var he *httpapi.Error
	require.True(t, errors.As(err, &he), "want an *httpapi.Error, got %v", err)
	return he
}

func TestDecode(t *testing.T) {
	t.Parallel()
	const js = "application/json"
	big := `{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes) + `"}`
	exact := `{"name":"` + strings.Repeat("a", httpapi.MaxBodyBytes-len(`{"name":""}`)) + `"}`
	require.Len(t, exact, httpapi.MaxBodyBytes)
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string
		field       string // the problem's "field" member, when it has one
		detail      string // a fragment of the detail
	}{
		{"ok", js, `{"name":"a","count":2}`, 0, "", "", ""},
		{"ok with trailing newline", js, "{\"name\":\"a\"}\n\t ", 0, "", "", ""},
		{"embedded struct member", js, `{"note":"n"}`, 0, "", "", ""},
		{"nested ok", js, `{"settings":{"timezone":"UTC"},"items":[{"locales":["en"]}],"tags":{"a":{}}}`, 0, "", "", ""},
		{"missing content type", "", `{"name":"a"}`, 0, "", "", ""},
		{"charset parameter", "application/json; charset=utf-8", `{"name":"a"}`, 0, "", "", ""},
		{"+json media type", "application/merge-patch+json", `{"name":"a"}`, 0, "", "", ""},
		{"exactly the size cap", js, exact, 0, "", "", ""},

		{"unknown field", js, `{"nmae":"a"}`, 400, "unknown_field", "nmae", `"nmae"`},
		{"member names are case-sensitive", js, `{"NAME":"a"}`, 400, "unknown_field", "NAME", ""},
		{"nested names are case-sensitive", js, `{"settings":{"TimeZone":"UTC"}}`, 400, "unknown_field", "settings.TimeZone", ""},
		{"duplicate member", js, `{"name":"a","name":"b"}`, 400, "duplicate_field", "name", ""},
		{"duplicate nested member", js, `{"settings":{"timezone":"UTC","timezone":"UTC"}}`, 400, "duplicate_field", "settings.timezone", ""},
		{"duplicate key in a map value", js, `{"tags":{"a":{},"a":{}}}`, 400, "duplicate_field", "tags.a", ""},
		{"ignored field is unknown", js, `{"Ignored":"a"}`, 400, "unknown_field", "Ignored", ""},
		{"unknown nested field named by path", js, `{"settings":{"name":"x"}}`, 400, "unknown_field", "settings.name", `"settings.name"`},
		{"unknown field in an array element", js, `{"items":[{},{"zone":"x"}]}`, 400, "unknown_field", "items[1].zone", ""},
		{"unknown field in a map value", js, `{"tags":{"a":{"zone":"x"}}}`, 400, "unknown_field", "tags.a.zone", ""},
		{"unknown field after known ones", js, `{"name":"a","count":1,"extra":true}`, 400, "unknown_field", "extra", ""},

		{"wrong type", js, `{"count":"two"}`, 400, "invalid_body", "count", "an integer"},
		{"wrong nested type", js, `{"settings":{"timezone":5}}`, 400, "invalid_body", "settings.timezone", "a string"},
		{"wrong type in array", js, `{"items":[{"locales":"en"}]}`, 400, "invalid_body", "items.locales", "an array"},
		{"wrong type of object", js, `{"settings":[]}`, 400, "invalid_body", "settings", "an object"},
		{"not an object", js, `[1,2]`, 400, "invalid_body", "", "the body must be an object"},
		{"a string body", js, `"hi"`, 400, "invalid_body", "", "the body must be an object"},
		{"custom type refuses", js, `{"rights":["admin"]}`, 400, "invalid_body", "", ""},

		{"malformed", js, `{"name" "a"}`, 400, "invalid_body", "", "malformed JSON"},
		{"truncated", js, `{"name":`, 400, "invalid_body", "", "ends unexpectedly"},
		{"trailing brace", js, `{"name":"a"}}`, 400, "invalid_body", "", "after the JSON body"},
		{"two objects", js, `{} {}`, 400, "invalid_body", "", "after the JSON body"},
		{"trailing garbage", js, `{}x`, 400, "invalid_body", "", "after the JSON body"},
		{"empty body", js, ``, 400, "invalid_body", "", "required"},
		{"blank body", js, " \n ", 400, "invalid_body", "", "required"},

		{"nested at the limit", js, `{"tags":{"a":{"locales":[]}},"items":[` + strings.Repeat("[", 61) + strings.Repeat("]", 61) + `]}`, 400, "invalid_body", "items", ""},
		{"nested too deep", js, `{"items":[` + strings.Repeat("[", 63) + strings.Repeat("]", 63) + `]}`, 400, "invalid_body", "", "deeper than 64 levels"},
		{"deep and unbalanced", js, strings.Repeat("[", 100000), 400, "invalid_body", "", "deeper than 64 levels"},
		{"invalid UTF-8 in a value", js, "{\"settings\":{\"timezone\":\"Europe/\xffBerlin\"}}", 400, "invalid_body", "settings.timezone", "invalid UTF-8"},
		{"invalid UTF-8 in an array element", js, "{\"items\":[{},{\"locales\":[\"en\",\"\xc3\"]}]}", 400, "invalid_body", "items[1].locales[1]", "invalid UTF-8"},
		{"invalid UTF-8 in a key", js, "{\"tags\":{\"\xfe\":{}}}", 400, "invalid_body", "tags", "invalid UTF-8"},
		{"invalid UTF-8 in an unknown member", js, "{\"extra\":\"\xff\"}", 400, "unknown_field", "extra", ""},
		{"invalid UTF-8 where the type is wrong", js, "{\"count\":[\"\xff\"]}", 400, "invalid_body", "", "invalid UTF-8"},
		{"lone surrogate escape", js, `{"name":"a\ud800b"}`, 400, "invalid_body", "name", "lone surrogate"},
		{"lone low surrogate in a map key", js, `{"tags":{"\udc00":{}}}`, 400, "invalid_body", "", "lone surrogate"},
		{"escaped pair is a character", js, `{"name":"\ud83d\ude00"}`, 0, "", "", ""},

		{"over the cap", js, big, 413, "body_too_large", "", "1048576"},
		{"over the cap with garbage", js, strings.Repeat("x", httpapi.MaxBodyBytes+1), 413, "body_too_large", "", ""},
		{"over the cap by trailing space", js, `{}` + strings.Repeat(" ", httpapi.MaxBodyBytes), 413, "body_too_large", "", ""},

		{"text/plain", "text/plain", `{"name":"a"}`, 415, "unsupported_media_type", "", ""},
		{"form", "application/x-www-form-urlencoded", `name=a`, 415, "unsupported_media_type", "", ""},
		{"unparsable content type", "application/json;;;=", `{"name":"a"}`, 415, "unsupported_media_type", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var v sample
			err := decode(t, tt.contentType, tt.body, &v)
			if tt.status == 0 {
				require.NoError(t, err)
				return
			}
			he := asHTTPError(t, err)
			assert.Equal(t, tt.status, he.Status())
			assert.Equal(t, tt.code, he.Code)
			if tt.field != "" {
				assert.Equal(t, tt.field, he.Extensions["field"])
			}
			assert.Contains(t, he.Detail, tt.detail)
		})
	}
}

func TestDecodeFillsTheValue(t *testing.T) {
	t.Parallel()
	var v sample
	require.NoError(t, decode(t, "application/json", `{"name":"a","settings":{"timezone":"UTC"},"rights":["dialogs"]}`, &v))
	assert.Equal(t, "a", v.Name)
	require.NotNil(t, v.Settings)
	assert.Equal(t, "UTC", v.Settings.Timezone)
	assert.Equal(t, auth.RightsOf(auth.RightDialogs), v.Rights)
}

func TestDecodeCallsValidate(t *testing.T) {
	t.Parallel()
	var ok checked
	require.NoError(t, decode(t, "application/json", `{"name":"fine"}`, &ok))
	assert.Equal(t, "fine", ok.Name)

	var bad checked
	he := asHTTPError(t, decode(t, "application/json", `{"name":"invalid"}`, &bad))
	assert.Equal(t, "validation_failed", he.Code)

	// Validate runs only on a body that decoded.
	he = asHTTPError(t, decode(t, "application/json", `{"name":"invalid","x":1}`, &bad))
	assert.Equal(t, "unknown_field", he.Code)
}

func TestWriteJSONAndNoContent(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	require.NoError(t, httpapi.WriteJSON(rec, http.StatusCreated, map[string]int{"a": 1}))
	assert.Equal(t, http.StatusCreated, rec.Code)
	assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	assert.Equal(t, "7", rec.Header().Get("Content-Length"))
	assert.JSONEq(t, `{"a":1}`, rec.Body.String())

	rec = httptest.NewRecorder()
	assert.Error(t, httpapi.WriteJSON(rec, http.StatusOK, func() {}), "an unencodable value is an error, not a half response")
	assert.Zero(t, rec.Body.Len())

	rec = httptest.NewRecorder()
	require.NoError(t, httpapi.NoContent(rec))
	assert.Equal(t, http.StatusNoContent, rec.Code)
	assert.Zero(t, rec.Body.Len())
}

func TestProblems(t *testing.T) {
	t.Parallel()
	var p httpapi.Problems
	require.NoError(t, p.Err())
	p.Require("id", "bot_1")
	require.NoError(t, p.Err(), "a value given is no problem")
	p.Require("name", "")
	p.Add("settings.timezone", "unknown time zone %q", "Mars/Base")
	he := asHTTPError(t, p.Err())
	assert.Equal(t, http.StatusBadRequest, he.Status())
	assert.Equal(t, "validation_failed", he.Code)
	assert.Equal(t, "name: is required (and 1 more)", he.Detail)
	assert.Equal(t, []httpapi.FieldError{
		{Field: "name", Message: "is required"},
		{Field: "settings.timezone", Message: `unknown time zone "Mars/Base"`},
	}, he.Extensions["errors"])
}

// expected_revision members of request types are revisions (at least 1) wherever they
// stand; customer data that happens to use the name is data.
func TestDecodeRevisions(t *testing.T) {
	t.Parallel()
	type entry struct {
		ExpectedRevision *int64         `json:"expected_revision"`
		Values           map[string]any `json:"values"`
	}
	type body struct {
		ExpectedRevision *int64  `json:"expected_revision"`
		Entries          []entry `json:"entries"`
	}
	for in, field := range map[string]string{
		`{"expected_revision":0}`:                    "expected_revision",
		`{"expected_revision":-1}`:                   "expected_revision",
		`{"entries":[{},{"expected_revision":-5}]}`:  "entries[1].expected_revision",
		`{"expected_revision":-9223372036854775808}`: "expected_revision",
	} {
		var v body
		he := asHTTPError(t, decode(t, "application/json", in, &v))
		assert.Equal(t, "invalid_body", he.Code, in)
		assert.Equal(t, field, he.Extensions["field"], in)
	}
	for _, in := range []string{
		`{"expected_revision":1}`,
		`{"entries":[{"expected_revision":3,"values":{"expected_revision":0}}]}`,
	} {
		var v body
		assert.NoError(t, decode(t, "application/json", in, &v), in)
	}
	var v body
	he := asHTTPError(t, decode(t, "application/json", `{"expected_revision":1.5}`, &v))
	assert.Equal(t, "invalid_body", he.Code, "not an integer: the decoder's type error")
}
