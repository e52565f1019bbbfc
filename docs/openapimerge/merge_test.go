package openapimerge

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The served document is the merge of the fragments, as committed.
func TestGeneratedDocumentIsCurrent(t *testing.T) {
	t.Parallel()
	want, err := Dir(filepath.Join("..", "openapi"))
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "openapi.yaml"))
	require.NoError(t, err)
	if string(got) != string(want) {
		t.Fatal("docs/openapi.yaml is out of date: run `go generate ./docs`")
	}
}

func TestDuplicatesAreRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	write("00-base.yaml", "openapi: 3.1.0\npaths: {}\ncomponents:\n  schemas:\n    A: {type: string}\n")
	write("a.yaml", "paths:\n  /x:\n    get: {}\ncomponents:\n  schemas:\n    B: {type: string}\n")
	out, err := Dir(dir)
	require.NoError(t, err)
	assert.Contains(t, string(out), "/x:")
	assert.Contains(t, string(out), "B:")

	write("b.yaml", "paths:\n  /x:\n    post: {}\n")
	_, err = Dir(dir)
	assert.ErrorContains(t, err, "paths./x is defined twice")
	write("b.yaml", "components:\n  schemas:\n    A: {type: integer}\n")
	_, err = Dir(dir)
	assert.ErrorContains(t, err, "components.schemas.A is defined twice")
	write("b.yaml", "info: {title: nope}\n")
	_, err = Dir(dir)
	assert.ErrorContains(t, err, "only paths and components")
}
