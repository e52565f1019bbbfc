package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The route table of docs/access.md is the route declarations, rendered; it must not drift.
func TestAccessTableIsCurrent(t *testing.T) {
	a, err := openApp(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	defer a.Close()
	mux, err := a.handler()
	require.NoError(t, err)

	var b strings.Builder
	b.WriteString("| Method | Path | Scope | Rights | Token kinds |\n|---|---|---|---|---|\n")
	for _, rt := range mux.Routes() {
		if rt.Access.Public {
			fmt.Fprintf(&b, "| %s | `%s` | public | | |\n", rt.Method, rt.Path)
			continue
		}
		rights := rt.Access.Rights.String()
		if rights == "" {
			rights = "none"
		}
		kinds := "PAT, bot"
		if rt.Access.PATOnly || !rt.BotScoped {
			kinds = "PAT"
		}
		scopes := "`" + string(rt.Access.Scope) + "`"
		if rt.Access.PerCall {
			scopes = "each tool's own (docs/mcp.md)"
		}
		if rt.Access.AlsoScope != "" {
			scopes += " and `" + string(rt.Access.AlsoScope) + "`"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", rt.Method, rt.Path, scopes, rights, kinds)
	}
	table := b.String()

	path := filepath.Join("..", "..", "docs", "access.md")
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	const beginMark, endMark = "<!-- routes:begin", "<!-- routes:end -->"
	text := string(doc)
	i := strings.Index(text, beginMark)
	j := strings.Index(text, endMark)
	require.True(t, i >= 0 && j > i, "docs/access.md lacks the route table markers")
	i += strings.Index(text[i:], "-->") + len("-->\n")
	want := text[:i] + table + text[j:]
	if want == text {
		return
	}
	if os.Getenv("UPDATE_DOCS") == "1" {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	t.Fatal("docs/access.md's route table is stale: run UPDATE_DOCS=1 go test ./functions/local -run AccessTable")
}
