package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/functions/platform"
	"github.com/botplatform/api/shared/auth"
	"github.com/botplatform/api/shared/httpapi"
	fakewhatsapp "github.com/botplatform/api/tests/fakes/whatsapp"
)

// loadOpenAPI parses and validates docs/openapi.yaml as the process embeds and serves it.
// The tests share one copy and only read it: loading and validating it takes seconds under
// the race detector.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := sharedOpenAPI()
	require.NoError(t, err)
	return doc
}

var sharedOpenAPI = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	if err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml does not load: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml is not a valid OpenAPI document: %w", err)
	}
	return doc, nil
})

// newTestApp opens the local process's environment on an empty data directory.
func newTestApp(t *testing.T) (*app, *httpapi.Mux) {
	t.Helper()
	return newTestAppWith(t, appConfig{})
}

// newTestAppWith is newTestApp with the process's configuration (provider base URLs).
func newTestAppWith(t *testing.T, cfg appConfig) (*app, *httpapi.Mux) {
	t.Helper()
	a, err := openAppWith(t.TempDir(), slog.New(slog.DiscardHandler), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = a.Close() })
	mux, err := a.handler()
	require.NoError(t, err)
	return a, mux
}

// openAPIPath turns a ServeMux path into an OpenAPI path template: "{name...}" becomes
// "{name}" and the end anchor "{$}" disappears; plain "{name}" segments already match.
func openAPIPath(p string) string {
	p = strings.ReplaceAll(p, "{$}", "")
	return strings.ReplaceAll(p, "...}", "}")
}

// operations lists the document's operations as "METHOD /path".
func operations(doc *openapi3.T) map[string]*openapi3.Operation {
	out := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			out[strings.ToUpper(method)+" "+path] = op
		}
	}
	return out
}

func TestOpenAPIValid(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	assert.Equal(t, "3.1.0", doc.OpenAPI)
	ids := map[string]string{}
	for key, op := range operations(doc) {
		assert.NotEmpty(t, op.OperationID, "%s has no operationId", key)
		assert.NotEmpty(t, op.Summary, "%s has no summary", key)
		assert.NotEmpty(t, op.Description, "%s has no description", key)
		if prev, dup := ids[op.OperationID]; dup {
			t.Errorf("operationId %q is used by %s and %s", op.OperationID, prev, key)
		}
		ids[op.OperationID] = key
	}
}

// TestOpenAPIServed checks that GET /openapi.yaml answers with the embedded document.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	_, mux := newTestApp(t)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.yaml", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "application/yaml", rec.Header().Get("Content-Type"))
	assert.Equal(t, docs.OpenAPI, rec.Body.Bytes())
}

// TestOpenAPIRoutesMatch fails when a registered route is missing from the document or the
// document describes an operation the process does not serve.
func TestOpenAPIRoutesMatch(t *testing.T) {
	t.Parallel()
	_, mux := newTestApp(t)

	// The token API's document and the SDK's device document between them.
	documented := operations(loadOpenAPI(t))
	sdkDoc, err := openapi3.NewLoader().LoadFromData(docs.SDKOpenAPI)
	require.NoError(t, err, "docs/sdk-openapi.yaml does not load")
	require.NoError(t, sdkDoc.Validate(context.Background()), "docs/sdk-openapi.yaml is not a valid OpenAPI document")
	for key, op := range operations(sdkDoc) {
		assert.NotContains(t, documented, key, "both documents describe %s", key)
		documented[key] = op
	}
	registered := map[string]bool{}
	for _, rt := range mux.Routes() {
		key := rt.Method + " " + openAPIPath(rt.Path)
		registered[key] = true
		assert.Contains(t, documented, key, "route %q is served but missing from docs/openapi.yaml and docs/sdk-openapi.yaml", rt.Pattern())
	}
	for key := range documented {
		assert.True(t, registered[key], "the documents describe %s, which no route serves", key)
	}
}

// expectedKinds is the x-token-kinds a route's declared access implies.
func expectedKinds(rt httpapi.Route) []string {
	switch {
	case rt.Access.Public:
		return []string{}
	case rt.Access.PATOnly || !rt.BotScoped:
		return []string{string(auth.KindPAT)}
	default:
		return []string{string(auth.KindPAT), string(auth.KindBot)}
	}
}

// stringList reads a vendor extension that must be a list of strings.
func stringList(t *testing.T, v any, what string) []string {
	t.Helper()
	list, ok := v.([]any)
	if !ok {
		t.Errorf("%s: want a list of strings, got %T", what, v)
		return nil
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			t.Errorf("%s: want a list of strings, got an element of type %T", what, x)
			continue
		}
		out = append(out, s)
	}
	return out
}

// TestOpenAPIAccessMatchesRoutes checks each operation's x-required-scope, x-required-rights,
// x-token-kinds and security against the access the route declares in code, and that the
// description says the same in prose.
func TestOpenAPIAccessMatchesRoutes(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	_, mux := newTestApp(t)
	documented := operations(doc)

	for _, rt := range mux.Routes() {
		key := rt.Method + " " + openAPIPath(rt.Path)
		op, ok := documented[key]
		if !ok {
			continue // reported by TestOpenAPIRoutesMatch
		}
		t.Run(key, func(t *testing.T) {
			scope, ok := op.Extensions["x-required-scope"].(string)
			if assert.True(t, ok, "x-required-scope missing or not a string") {
				want := rt.Access.Scope
				if rt.Access.PerCall {
					want = perCallScope
				}
				assert.Equal(t, want, scope, "x-required-scope")
			}
			also, _ := op.Extensions["x-also-required-scope"].(string)
			assert.Equal(t, string(rt.Access.AlsoScope), also, "x-also-required-scope (absent when the route needs one scope)")
			if rt.Access.AlsoScope != "" {
				assert.Contains(t, op.Description, "`"+string(rt.Access.AlsoScope)+"`", "the description must state the second scope")
			}
			wantRights := []string{}
			for _, r := range rt.Access.Rights.Names() {
				wantRights = append(wantRights, string(r))
			}
			if v, ok := op.Extensions["x-required-rights"]; assert.True(t, ok, "x-required-rights missing") {
				assert.Equal(t, wantRights, stringList(t, v, "x-required-rights"), "x-required-rights")
			}
			if v, ok := op.Extensions["x-token-kinds"]; assert.True(t, ok, "x-token-kinds missing") {
				assert.Equal(t, expectedKinds(rt), stringList(t, v, "x-token-kinds"), "x-token-kinds")
			}

			for ext, want := range map[string]auth.Feature{"x-required-plan-feature": rt.Access.Plan, "x-required-rollout-feature": rt.Access.Rollout} {
				got, _ := op.Extensions[ext].(string)
				assert.Equal(t, string(want), got, "%s (absent when the route needs none)", ext)
				if want != "" {
					assert.Contains(t, op.Description, "`"+string(want)+"`", "the description must state the %s", ext)
				}
			}

			if rt.Access.Public {
				if assert.NotNil(t, op.Security, "a public route needs security: []") {
					assert.Empty(t, *op.Security, "a public route needs security: []")
				}
				return
			}
			if op.Security != nil {
				assert.NotEmpty(t, *op.Security, "an authenticated route cannot have security: []")
			} else {
				assert.NotEmpty(t, doc.Security, "no document-wide security for an authenticated route")
			}
			if rt.Access.PerCall {
				// Each call's access is its operation's (POST /mcp: each tool's own), which
				// TestOpenAPIDocumentsEveryTool holds to x-mcp-tools.
				assert.Contains(t, op.Description, "Scope: "+perCallScope, "the description must say that the scope is each call's")
				return
			}
			assert.Contains(t, op.Description, "Scope: `"+rt.Access.Scope+"`", "the description must state the scope")
			for _, r := range wantRights {
				assert.Contains(t, op.Description, "`"+r+"`", "the description must state the %s right", r)
			}
		})
	}
}

// TestOpenAPIErrorResponses checks that each operation documents the failures the kernel
// can produce for it, whatever its handler does.
func TestOpenAPIErrorResponses(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	_, mux := newTestApp(t)
	documented := operations(doc)

	for _, rt := range mux.Routes() {
		key := rt.Method + " " + openAPIPath(rt.Path)
		op, ok := documented[key]
		if !ok || rt.Access.Public {
			continue
		}
		t.Run(key, func(t *testing.T) {
			want := []int{401, 403, 500, 503}
			if rt.BotScoped {
				want = append(want, 404)
			}
			if op.RequestBody != nil {
				want = append(want, 400, 413, 415)
			}
			for _, p := range op.Parameters {
				if p.Value != nil && (p.Value.Name == "limit" || p.Value.Name == "cursor") {
					want = append(want, 400)
				}
			}
			for _, status := range want {
				resp := op.Responses.Status(status)
				if !assert.NotNil(t, resp, "no %d response", status) || resp.Value == nil {
					continue
				}
				assert.NotNil(t, resp.Value.Content.Get("application/problem+json"), "the %d response is not application/problem+json", status)
			}
			if rt.Mutating() && op.Responses.Status(http.StatusConflict) == nil && strings.Contains(op.Description, "expected_revision") {
				t.Errorf("the route takes expected_revision but documents no 409")
			}
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				mt := op.RequestBody.Value.Content.Get("application/json")
				if assert.NotNil(t, mt, "the request body is not application/json") && mt.Schema != nil && mt.Schema.Value != nil {
					ap := mt.Schema.Value.AdditionalProperties
					assert.True(t, ap.Has != nil && !*ap.Has, "request bodies are strict: the schema needs additionalProperties: false")
				}
			}
		})
	}
}

// createsResource reports whether an operation creates something: it takes a body and
// answers 201.
func createsResource(op *openapi3.Operation) bool {
	return op.RequestBody != nil && op.Responses.Status(http.StatusCreated) != nil
}

// TestOpenAPICreateExamples checks that every operation that creates a resource carries a
// request example.
func TestOpenAPICreateExamples(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	found := 0
	for key, op := range operations(doc) {
		if !createsResource(op) {
			continue
		}
		found++
		mt := op.RequestBody.Value.Content.Get("application/json")
		if assert.NotNil(t, mt, "%s: no application/json request body", key) {
			assert.True(t, mt.Example != nil || len(mt.Examples) > 0, "%s creates a resource but has no request example", key)
		}
	}
	assert.NotZero(t, found, "no operation creates a resource: is the 201 check broken?")
}

// requestExample returns the operation's request example (the first named one when there
// is no single example).
func requestExample(op *openapi3.Operation) (any, bool) {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil, false
	}
	mt := op.RequestBody.Value.Content.Get("application/json")
	if mt == nil {
		return nil, false
	}
	if mt.Example != nil {
		return mt.Example, true
	}
	names := make([]string, 0, len(mt.Examples))
	for name := range mt.Examples {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if ex := mt.Examples[name]; ex != nil && ex.Value != nil {
			return ex.Value.Value, true
		}
	}
	return nil, false
}

// TestOpenAPIRequestExamplesSucceed sends every request example, as is, to the demo bot of a
// fresh process with the demo full-access token, and checks that it succeeds and that the
// response matches the documented schema. The process talks to a fake WhatsApp, whose
// account is the one the channel example connects.
func TestOpenAPIRequestExamplesSucceed(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	wa := fakewhatsapp.New(t)
	a, mux := newTestAppWith(t, appConfig{Providers: platform.Providers{WhatsAppBaseURL: wa.URL(), WhatsAppAppID: fakewhatsapp.AppID}})
	demo, err := a.bootstrap(context.Background())
	require.NoError(t, err)

	ops := operations(doc)
	keys := exampleOrder(ops)
	params := map[string]string{"botID": demo.BotID}
	sent := 0
	for _, key := range keys {
		op := ops[key]
		example, ok := requestExample(op)
		if !ok {
			continue
		}
		if needs, ok := op.Extensions["x-example-needs"].(string); ok {
			t.Logf("%s: not sent: the example needs %s", key, needs)
			continue
		}
		sent++
		method, pathTemplate, _ := strings.Cut(key, " ")
		t.Run(key, func(t *testing.T) {
			body, err := json.Marshal(example)
			require.NoError(t, err)
			path := fillPath(pathTemplate, params)
			require.NotContains(t, path, "{", "no create example before this one made what the path names")
			req := httptest.NewRequest(method, path, bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+demo.Token)
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			require.Less(t, rec.Code, 300, "the example failed: %s", rec.Body.String())
			assert.NotNil(t, op.Responses.Status(rec.Code), "status %d is not documented", rec.Code)

			pathItem := doc.Paths.Value(pathTemplate)
			input := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: &openapi3filter.RequestValidationInput{
					Request:    req,
					PathParams: map[string]string{"botID": demo.BotID},
					Route:      &routers.Route{Spec: doc, Path: pathTemplate, PathItem: pathItem, Method: method, Operation: op},
				},
				Status:  rec.Code,
				Header:  rec.Header(),
				Body:    io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
				Options: &openapi3filter.Options{IncludeResponseStatus: true},
			}
			assert.NoError(t, openapi3filter.ValidateResponse(context.Background(), input),
				"the %d response does not match the document", rec.Code)
			if rec.Code == http.StatusCreated {
				learnParams(doc, rec.Header().Get("Location"), params)
			}
		})
	}
	assert.NotZero(t, sent, "no request examples found")
}

// exampleOrder sorts operations so that those that create a resource come first, parents
// before children (a parent's path is a prefix of its children's, so it sorts first): the
// examples of later operations can then address what the earlier ones created.
func exampleOrder(ops map[string]*openapi3.Operation) []string {
	keys := make([]string, 0, len(ops))
	for key := range ops {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b string) int {
		ca, cb := createsResource(ops[a]), createsResource(ops[b])
		if ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		_, pa, _ := strings.Cut(a, " ")
		_, pb, _ := strings.Cut(b, " ")
		return cmp.Or(strings.Compare(pa, pb), strings.Compare(a, b))
	})
	return keys
}

// learnParams binds the path parameters that a created resource's Location header fills:
// "/api/bots/bot_1/collections/col_2" gives collectionID for every path with that shape.
// Parameters already bound (the demo bot) keep their value.
func learnParams(doc *openapi3.T, location string, params map[string]string) {
	got := strings.Split(location, "/")
	for template := range doc.Paths.Map() {
		want := strings.Split(template, "/")
		if location == "" || len(want) != len(got) {
			continue
		}
		bound := map[string]string{}
		for i, w := range want {
			if name, ok := strings.CutPrefix(w, "{"); ok {
				bound[strings.TrimSuffix(name, "}")] = got[i]
			} else if w != got[i] {
				bound = nil
				break
			}
		}
		for name, v := range bound {
			if _, ok := params[name]; !ok {
				params[name] = v
			}
		}
	}
}

// fillPath replaces the path template's parameters that are bound.
func fillPath(template string, params map[string]string) string {
	for name, v := range params {
		template = strings.ReplaceAll(template, "{"+name+"}", v)
	}
	return template
}

// TestOpenAPIScopeCatalog keeps the Scope schema's enum equal to what a token may be granted:
// "*", every scope of the catalog, and resource:* for each of its resources.
func TestOpenAPIScopeCatalog(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	ref := doc.Components.Schemas["Scope"]
	require.NotNil(t, ref, "components.schemas.Scope is missing")

	want := []string{auth.Full}
	resources := map[string]bool{}
	for _, s := range auth.KnownScopes() {
		want = append(want, s)
		r, _, _ := strings.Cut(s, ":")
		if !resources[r] {
			resources[r] = true
			want = append(want, r+":*")
		}
	}
	for _, s := range want {
		_, err := auth.ValidateScopes([]string{s})
		require.NoError(t, err, "scope %q", s)
	}
	got := make([]string, 0, len(ref.Value.Enum))
	for _, v := range ref.Value.Enum {
		got = append(got, v.(string))
	}
	slices.Sort(want)
	slices.Sort(got)
	assert.Equal(t, want, got, "components.schemas.Scope.enum must equal the scope catalog of shared/auth/scope.go")
}

// TestOpenAPILimits keeps the documented numbers equal to the constants the code enforces.
func TestOpenAPILimits(t *testing.T) {
	t.Parallel()
	doc := loadOpenAPI(t)
	limit := doc.Components.Parameters["Limit"]
	require.NotNil(t, limit)
	s := limit.Value.Schema.Value
	require.NotNil(t, s.Min)
	require.NotNil(t, s.Max)
	assert.Equal(t, float64(1), *s.Min)
	assert.Equal(t, float64(httpapi.MaxLimit), *s.Max)
	assert.EqualValues(t, httpapi.DefaultLimit, s.Default)
}
