package families

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/functions/bots"
	"github.com/botplatform/api/shared/family"
	"github.com/botplatform/api/shared/family/familytest"
	"github.com/botplatform/api/shared/httpapi"
)

func testEnv(t *testing.T) *family.Env {
	t.Helper()
	return familytest.Env(t, family.Deps{Tenancy: bots.Tenancy})
}

// Every operation of the OpenAPI document names the family that serves it (x-family), and
// that family registers exactly those routes. The CDK stack routes by x-family, so this is
// what makes each route reach the Lambda that can answer it.
func TestOpenAPIFamiliesMatchRegistrations(t *testing.T) {
	t.Parallel()
	documented := map[string]string{} // "GET /path" -> x-family
	for _, raw := range docs.Documents {
		doc, err := openapi3.NewLoader().LoadFromData(raw)
		require.NoError(t, err)
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				fam, _ := op.Extensions["x-family"].(string)
				require.NotEmpty(t, fam, "%s %s has no x-family", method, path)
				documented[method+" "+path] = fam
			}
		}
	}
	names := map[string]bool{}
	registered := 0
	for _, f := range All() {
		require.False(t, names[f.Name], "family %q listed twice", f.Name)
		names[f.Name] = true
		env := testEnv(t)
		mux, err := family.Compose(env, f).Mux(httpapi.BearerAuth(env.Auth))
		require.NoError(t, err)
		require.NotEmpty(t, mux.Routes(), "family %q registers no route", f.Name)
		for _, rt := range mux.Routes() {
			registered++
			assert.Equal(t, f.Name, documented[rt.Pattern()], "x-family of %s", rt.Pattern())
		}
	}
	assert.Equal(t, len(documented), registered, "every documented operation is registered by exactly one family")
}

// Every family has its Lambda main, and every Lambda main is a family (or the authorizer).
func TestEveryFamilyHasALambda(t *testing.T) {
	t.Parallel()
	for _, f := range All() {
		_, err := os.Stat(filepath.Join("..", f.Name, "lambda", "main.go"))
		assert.NoError(t, err, "functions/%s/lambda/main.go", f.Name)
	}
	mains, err := filepath.Glob(filepath.Join("..", "*", "lambda", "main.go"))
	require.NoError(t, err)
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(filepath.Dir(m)))
		if _, err := Named(name); err != nil && !slices.Contains(Workers(), name) {
			t.Errorf("functions/%s/lambda is neither a family nor a known worker", name)
		}
	}
}

func TestNamed(t *testing.T) {
	t.Parallel()
	f, err := Named("bots")
	require.NoError(t, err)
	assert.Equal(t, "bots", f.Name)
	_, err = Named("nope")
	assert.Error(t, err)
}
