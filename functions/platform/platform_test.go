package platform

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/docs"
	"github.com/botplatform/api/shared/audit"
	"github.com/botplatform/api/shared/httpapi"
	"github.com/botplatform/api/shared/store/sqlite"
)

func testEnv(t *testing.T) *Env {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "s.db"))
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	env, err := NewEnv(Deps{Store: st, Audit: audit.NewLog(st), CursorKey: make([]byte, 32),
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Now: time.Now})
	require.NoError(t, err)
	return env
}

func TestNewEnvRefusesMissingDependencies(t *testing.T) {
	t.Parallel()
	_, err := NewEnv(Deps{CursorKey: make([]byte, 8)})
	require.Error(t, err)
	for _, want := range []string{"Store", "Audit", "CursorKey", "Log", "Now"} {
		assert.Contains(t, err.Error(), want)
	}
}

// Every operation of the OpenAPI document names the family that serves it (x-family), and
// that family registers exactly those routes. The CDK stack routes by x-family, so this is
// what makes each route reach the Lambda that can answer it.
func TestOpenAPIFamiliesMatchRegistrations(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(docs.OpenAPI)
	require.NoError(t, err)
	documented := map[string]string{} // "GET /path" -> x-family
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			fam, _ := op.Extensions["x-family"].(string)
			require.NotEmpty(t, fam, "%s %s has no x-family", method, path)
			documented[method+" "+path] = fam
		}
	}
	env := testEnv(t)
	names := map[string]bool{}
	registered := 0
	for _, f := range Families() {
		require.False(t, names[f.Name], "family %q listed twice", f.Name)
		names[f.Name] = true
		mux, err := env.Mux(httpapi.BearerAuth(env.Auth), f)
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
	for _, f := range Families() {
		_, err := os.Stat(filepath.Join("..", f.Name, "lambda", "main.go"))
		assert.NoError(t, err, "functions/%s/lambda/main.go", f.Name)
	}
	mains, err := filepath.Glob(filepath.Join("..", "*", "lambda", "main.go"))
	require.NoError(t, err)
	for _, m := range mains {
		name := filepath.Base(filepath.Dir(filepath.Dir(m)))
		if _, err := FamilyNamed(name); err != nil && !slices.Contains(Workers(), name) {
			t.Errorf("functions/%s/lambda is neither a family nor a known worker", name)
		}
	}
}

func TestFamilyNamed(t *testing.T) {
	t.Parallel()
	f, err := FamilyNamed("bots")
	require.NoError(t, err)
	assert.Equal(t, "bots", f.Name)
	_, err = FamilyNamed("nope")
	assert.Error(t, err)
}
