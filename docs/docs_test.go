package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// codeRe finds the problem codes handlers build: E(KindX, "code", ...) and Errorf(KindX, "code", ...).
var codeRe = regexp.MustCompile(`(?:\bE|\bErrorf)\((?:httpapi\.)?Kind[A-Za-z]+, "([a-z_]+)"`)

// Every problem code the code base can send is documented in docs/errors.md.
func TestEveryErrorCodeIsDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("errors.md")
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]string{}
	for _, root := range []string{"../functions", "../shared"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range codeRe.FindAllStringSubmatch(string(b), -1) {
				codes[m[1]] = path
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(codes) < 20 {
		t.Fatalf("found only %d codes: the pattern no longer matches how errors are built", len(codes))
	}
	for code, where := range codes {
		if !strings.Contains(string(doc), "`"+code+"`") {
			t.Errorf("code %q (%s) is not in docs/errors.md", code, where)
		}
	}
}

// Every tag an operation carries is declared (with its description) in 00-base.yaml, so the
// rendered reference groups and explains every operation.
func TestEveryTagIsDeclared(t *testing.T) {
	var doc struct {
		Tags  []struct{ Name, Description string } `yaml:"tags"`
		Paths map[string]map[string]any            `yaml:"paths"`
	}
	if err := yaml.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, tag := range doc.Tags {
		if tag.Description == "" {
			t.Errorf("tag %q has no description", tag.Name)
		}
		declared[tag.Name] = true
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			o, ok := op.(map[string]any)
			if !ok {
				continue
			}
			tags, _ := o["tags"].([]any)
			for _, tag := range tags {
				if name, _ := tag.(string); !declared[name] {
					t.Errorf("%s %s: tag %q is not declared in docs/openapi/00-base.yaml", method, path, name)
				}
			}
		}
	}
}
