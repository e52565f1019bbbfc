package subscribers

import (
	"slices"
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/runes"
	"golang.org/x/text/transform"
	"golang.org/x/text/unicode/norm"
)

// Name search (`q`) is a case- and accent-insensitive prefix match on name words: "jo"
// finds "José Müller" and "Anna Jones"; "mul jo" needs both. It runs on search entries, one
// item per distinct name word of each subscriber (nameWordKey), written in the transaction
// that writes the name, so a search reads the matching entries and never the other
// subscribers.

// Search limits. Words beyond MaxNameWords of a name are not searchable; a word is indexed
// by its first maxWordLen characters.
const (
	MaxNameWords = 8
	maxWordLen   = 64
	// MaxQueryLen bounds q, in characters.
	MaxQueryLen = 100
)

// searchFold removes accents (decomposes, drops the combining marks) and folds case.
func searchFold(s string) string {
	t := transform.Chain(norm.NFD, runes.Remove(runes.In(unicode.Mn)), norm.NFC)
	out, _, err := transform.String(t, s)
	if err != nil {
		out = s
	}
	return cases.Fold().String(out)
}

// words splits text into its folded words: runs of letters and digits.
func words(s string) []string {
	return strings.FieldsFunc(searchFold(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsNumber(r) })
}

func truncateWord(w string) string {
	if r := []rune(w); len(r) > maxWordLen {
		return string(r[:maxWordLen])
	}
	return w
}

// indexWords are the words a record is found by: the distinct words of its first and last
// name, in order, each cut to maxWordLen characters, at most MaxNameWords of them.
func (r record) indexWords() []string {
	var out []string
	for _, w := range words(r.FirstName + " " + r.LastName) {
		w = truncateWord(w)
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
		if len(out) == MaxNameWords {
			break
		}
	}
	return out
}

// search is a parsed q: its words, and the one whose entries are read (the longest, the
// most selective); the others are checked on the subscribers found.
type search struct {
	words []string
	drive string
}

func parseSearch(q string) (search, bool) {
	ws := words(q)
	if len(ws) == 0 {
		return search{}, false
	}
	s := search{words: ws}
	for _, w := range ws {
		if len([]rune(w)) > len([]rune(s.drive)) {
			s.drive = w
		}
	}
	s.drive = truncateWord(s.drive)
	return s, true
}

// matches reports whether every query word starts some name word of r.
func (s search) matches(r record) bool {
	names := words(r.FirstName + " " + r.LastName)
	for _, q := range s.words {
		found := false
		for _, n := range names {
			if strings.HasPrefix(n, q) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// canonical reports whether the entry for word is the one r is listed under: a subscriber
// with several matching words ("Anna Annabel" for "ann") has several entries, and only the
// least matching word's counts, so each subscriber appears once in a search.
func (s search) canonical(r record, word string) bool {
	least := ""
	for _, w := range r.indexWords() {
		if strings.HasPrefix(w, s.drive) && (least == "" || w < least) {
			least = w
		}
	}
	return least == word
}
