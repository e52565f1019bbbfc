package tests

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/shared/auth"
)

// Revisions start at 1: an expected_revision of 0 or -1 is a malformed request on every
// route that takes one, never a stale revision. The routes come from the OpenAPI document
// (every body schema with an expected_revision member, at any depth, and every
// expected_revision query parameter), so a new route is covered when it is documented.
func TestExpectedRevisionBelowOne(t *testing.T) {
	t.Parallel()
	s := start(t)
	// The rollout-gated routes too: their entitlement is checked before the body is read.
	rollout := make([]string, len(auth.RolloutFeatures))
	for i, f := range auth.RolloutFeatures {
		rollout[i] = string(f)
	}
	s.adminJSON("account", "rollout", "--account", s.demo.AccountID, "--enable", strings.Join(rollout, ","))
	r := s.get("", "/openapi.yaml")
	require.Equal(t, http.StatusOK, r.Status)
	doc, err := openapi3.NewLoader().LoadFromData(r.Body)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(context.Background()))

	param := regexp.MustCompile(`\{(\w+)\}`)
	fill := func(path string) string {
		return param.ReplaceAllStringFunc(path, func(p string) string {
			if p == "{botID}" {
				return s.demo.BotID
			}
			return "x_1" // no such resource: the request must be refused before it is looked up
		})
	}
	var bodies, queries []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value.In == "query" && p.Value.Name == "expected_revision" {
					queries = append(queries, method+" "+path)
					for _, v := range []string{"0", "-1", "x"} {
						r := s.do(req{Method: method, Path: fill(path) + "?expected_revision=" + v, Token: s.demo.Token})
						assert.Equal(t, http.StatusBadRequest, r.Status, "%s %s ?expected_revision=%s: %s", method, path, v, r.Body)
						assert.Equal(t, "invalid_parameter", r.Code(t), "%s %s", method, path)
					}
				}
			}
			if op.RequestBody == nil || op.RequestBody.Value.Content.Get("application/json") == nil {
				continue
			}
			if after, _ := op.Extensions["x-body-read-after-lookup"].(bool); after {
				// The shared broadcast routes: which body applies depends on which generation
				// owns the id (spec 4.6), so an unknown id is 404 before the body is read.
				r := s.do(req{Method: method, Path: fill(path), Token: s.demo.Token, Body: map[string]any{"expected_revision": 0}})
				assert.Equal(t, http.StatusNotFound, r.Status, "%s %s: %s", method, path, r.Body)
				continue
			}
			schema := op.RequestBody.Value.Content.Get("application/json").Schema
			at, ok := revisionPath(schema, nil)
			if !ok {
				continue
			}
			bodies = append(bodies, method+" "+path)
			for _, v := range []int{0, -1} {
				body := nest(at, v)
				r := s.do(req{Method: method, Path: fill(path), Token: s.demo.Token, Body: body})
				assert.Equal(t, http.StatusBadRequest, r.Status, "%s %s %v: %s", method, path, body, r.Body)
				assert.Equal(t, "invalid_body", r.Code(t), "%s %s", method, path)
				field, _ := r.JSON(t)["field"].(string)
				assert.True(t, strings.HasSuffix(field, "expected_revision"), "%s %s names %q", method, path, field)
			}
		}
	}
	slices.Sort(bodies)
	slices.Sort(queries)
	t.Logf("bodies: %v", bodies)
	t.Logf("queries: %v", queries)
	// The routes that must be among them, so the walk over the document cannot find nothing.
	assert.Contains(t, bodies, "PATCH /api/bots/{botID}")
	assert.Contains(t, bodies, "POST /api/bots/{botID}/collections/{collectionID}/records/batch")
	assert.Contains(t, queries, "DELETE /api/bots/{botID}")
}

// revisionPath finds the member path to an expected_revision property in s ("" for an
// array level), depth first.
func revisionPath(s *openapi3.SchemaRef, at []string) ([]string, bool) {
	if s == nil || s.Value == nil || len(at) > 6 {
		return nil, false
	}
	v := s.Value
	if _, ok := v.Properties["expected_revision"]; ok {
		return append(at, "expected_revision"), true
	}
	for _, sub := range append(append(openapi3.SchemaRefs{}, v.AllOf...), v.OneOf...) {
		if p, ok := revisionPath(sub, at); ok {
			return p, true
		}
	}
	names := make([]string, 0, len(v.Properties))
	for name := range v.Properties {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if p, ok := revisionPath(v.Properties[name], append(slices.Clone(at), name)); ok {
			return p, true
		}
	}
	if v.Items != nil {
		return revisionPath(v.Items, append(slices.Clone(at), ""))
	}
	return nil, false
}

// nest builds the smallest body that holds v at path ("" is an array of one element).
func nest(path []string, v int) any {
	if len(path) == 0 {
		return v
	}
	inner := nest(path[1:], v)
	if path[0] == "" {
		return []any{inner}
	}
	return map[string]any{path[0]: inner}
}
