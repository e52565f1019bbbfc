package stack_test

import (
	"bufio"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/botplatform/api/infra/stack"
)

// The README's table of the Lambdas' environment says what the stack gives: every variable a
// Lambda gets (with every provider setting on) has a row, and each row names exactly the
// Lambdas that get its variables. A row's Lambdas are a list ("a, b and c"), "all", "all but
// x", or "every family but x, y and z" (the families: every Lambda but the authorizer and
// the audit sink); "; `VAR` also x" adds Lambdas for one of the row's variables. A variable
// the provider context leaves unset gets no Lambda here, and its row is not checked.
func TestREADMEEnvironmentTable(t *testing.T) {
	t.Parallel()
	rows := readmeEnvironmentRows(t)
	require.NotEmpty(t, rows)
	all := slices.Sorted(maps.Keys(withProviders.functions(t)))
	got := map[string][]string{}
	for _, name := range all {
		for _, v := range stack.EnvNames(name, withProviders.stack.Config) {
			got[v] = append(got[v], name)
		}
	}
	documented := map[string]bool{}
	for _, r := range rows {
		for _, v := range r.vars {
			documented[v] = true
			lambdas, ok := got[v]
			if !ok {
				continue // unset in the provider context
			}
			want := r.lambdas(t, all)
			want = append(want, r.also[v]...)
			slices.Sort(want)
			assert.Equal(t, lambdas, slices.Compact(want), "README's Lambdas of %s", v)
		}
	}
	for v := range got {
		assert.True(t, documented[v], "README's environment table has no row for %s", v)
	}
}

type envRow struct {
	vars  []string
	who   string              // the Lambdas column, as written (backticks and asides gone)
	also  map[string][]string // "; `VAR` also x"
	count int                 // "(n)" after the list, 0 when none
}

var (
	envVarRe   = regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	asideRe    = regexp.MustCompile(`\s*\([^)]*\)`)
	countRe    = regexp.MustCompile(`\((\d+)\)\s*$`)
	alsoRe     = regexp.MustCompile("`([A-Z][A-Z0-9_]+)` also (.+)")
	listSepsRe = regexp.MustCompile(`,\s*|\s+and\s+`)
)

// readmeEnvironmentRows reads the rows of the table under "Configuration: Lambda
// environment".
func readmeEnvironmentRows(t *testing.T) []envRow {
	t.Helper()
	f, err := os.Open("../../README.md")
	require.NoError(t, err)
	defer f.Close()
	var rows []envRow
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "### Configuration: Lambda environment"):
			in = true
			continue
		case !in:
			continue
		case strings.HasPrefix(line, "#"):
			return rows
		}
		cols := strings.Split(line, " | ")
		if !strings.HasPrefix(line, "| `") || len(cols) < 3 {
			continue
		}
		r := envRow{also: map[string][]string{}}
		for _, m := range envVarRe.FindAllStringSubmatch(cols[0], -1) {
			r.vars = append(r.vars, m[1])
		}
		who := strings.TrimSuffix(strings.TrimSpace(cols[len(cols)-1]), "|")
		who, alsoPart, _ := strings.Cut(who, ";")
		if m := alsoRe.FindStringSubmatch(alsoPart); m != nil {
			r.also[m[1]] = splitNames(m[2])
		}
		if m := countRe.FindStringSubmatch(who); m != nil {
			r.count, _ = strconv.Atoi(m[1])
		}
		r.who = strings.TrimSpace(asideRe.ReplaceAllString(strings.ReplaceAll(who, "`", ""), ""))
		rows = append(rows, r)
	}
	require.NoError(t, sc.Err())
	return rows
}

// lambdas are the Lambdas the row names, out of all.
func (r envRow) lambdas(t *testing.T, all []string) []string {
	t.Helper()
	var out []string
	switch {
	case r.who == "all":
		out = slices.Clone(all)
	case strings.HasPrefix(r.who, "all but "):
		out = without(all, splitNames(strings.TrimPrefix(r.who, "all but ")))
	case strings.HasPrefix(r.who, "every family but "):
		families := without(all, []string{stack.Authorizer, stack.AuditSink})
		out = without(families, splitNames(strings.TrimPrefix(r.who, "every family but ")))
	default:
		out = splitNames(r.who)
	}
	for _, name := range out {
		require.Contains(t, all, name, "README names a Lambda the stack has not: %q (in %q)", name, r.who)
	}
	if r.count > 0 {
		assert.Len(t, out, r.count, "README's count of %q", r.who)
	}
	return out
}

func splitNames(s string) []string {
	var out []string
	for _, n := range listSepsRe.Split(strings.TrimSpace(s), -1) {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	return out
}

func without(all, drop []string) []string {
	return slices.DeleteFunc(slices.Clone(all), func(n string) bool { return slices.Contains(drop, n) })
}
