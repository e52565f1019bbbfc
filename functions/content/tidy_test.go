package content

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var (
	spaces     = regexp.MustCompile(`[ \t]+`)
	blankLines = regexp.MustCompile(`\n{3,}`)
)

// tidyTextRegexp is tidyText as it was written with regular expressions: the definition
// the hand-written one must keep.
func tidyTextRegexp(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(spaces.ReplaceAllString(l, " "))
	}
	return strings.TrimSpace(blankLines.ReplaceAllString(strings.Join(lines, "\n"), "\n\n"))
}

var tidyCases = []string{
	"", " ", "\n", "\n\n\n", "a", " a ", "a\nb", "a\n\nb", "a\n\n\nb", "a\n \n\t\n b",
	"\n\n a \t b  \n\n\n\nc\t\t\n", "x\r\ny\r\n\r\nz", "\u00a0a\u00a0 \tb\u00a0\n\u2003\n\u2003c",
	"a\v\fb \v c", "\xff \t\xfe\n\n\n\xff", "tab\tin\t\tthe middle  and  spaces",
	"Hi P1,\n\n\n  Our spring collection   is here:\n\n\n\n\nSee it all x\n\n",
}

func TestTidyTextKeepsTheRegexpDefinition(t *testing.T) {
	t.Parallel()
	for _, s := range tidyCases {
		assert.Equal(t, tidyTextRegexp(s), tidyText(s), "%q", s)
	}
}

func FuzzTidyText(f *testing.F) {
	for _, s := range tidyCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := tidyText(s), tidyTextRegexp(s); got != want {
			t.Fatalf("tidyText(%q) = %q, want %q", s, got, want)
		}
	})
}

func BenchmarkTidyText(b *testing.B) {
	s := textOf(strings.Repeat("<p>Our spring collection is here: light jackets,   linen shirts and canvas shoes.</p>\n\n", 40))
	b.Run("hand-written", func(b *testing.B) {
		for b.Loop() {
			tidyText(s)
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			tidyTextRegexp(s)
		}
	})
}
