// Package text holds the platform's one rule book for text a customer gives us to keep:
// which characters a name, a line or a message may hold. Text that fails is refused with a
// message naming what is wrong and where (the caller names the field), never stored with
// the offending characters removed or replaced: what we keep is what was sent, or nothing.
//
// Every rule refuses bytes that are not UTF-8 (a JSON body cannot carry them, but query
// strings, imports and the admin CLI can), NUL, and the other C0 and C1 control characters
// (U+0001 to U+001F, U+007F, U+0080 to U+009F), which no one types, some stores and
// terminals mishandle, and logs can be forged with. Message text may hold tab, line feed and
// carriage return. Names also refuse the bidirectional embedding, override and isolate
// controls (U+202A to U+202E, U+2066 to U+2069): with them a name displays as something
// other than what it is ("Trojan Source"). The directional marks U+200E, U+200F and U+061C
// stay allowed: right-to-left names need them and they cannot reorder what follows.
package text

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Rule is which characters a kind of text may hold.
type Rule int

const (
	// Name is the rule for what names a resource: bots, tokens, labels, fields,
	// collections, reactions, channels, people's names. One line, no controls, no bidi
	// embedding, override or isolate.
	Name Rule = iota
	// Line is the rule for other short, single-line text: button titles, keywords, search
	// queries, identifiers given by customers. No controls.
	Line
	// Message is the rule for text that may span lines: message bodies, captions, record
	// values. No controls but tab, line feed and carriage return.
	Message
)

// Check returns nil when s follows rule, else an error whose message says what is wrong
// and at which character (counted from 1), for the caller to put after the field's name.
func Check(s string, rule Rule) error {
	pos := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		pos++
		if r == utf8.RuneError && n <= 1 {
			return fmt.Errorf("is not valid UTF-8 (at character %d)", pos)
		}
		i += n
		if why := refused(r, rule); why != "" {
			return fmt.Errorf("%s (U+%04X at character %d)", why, r, pos)
		}
	}
	return nil
}

// Strip returns s without what Check would refuse under rule (and with bytes that are not
// UTF-8 dropped). It is for text the platform passes on from others rather than takes from
// a customer (a messenger user's display name): refusing it would refuse the user.
func Strip(s string, rule Rule) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r == utf8.RuneError && n <= 1 || refused(r, rule) != "" {
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// refused says why r may not stand in text of rule, or "" when it may.
func refused(r rune, rule Rule) string {
	switch {
	case r == 0:
		return "must not contain NUL"
	case r == '\t' || r == '\n' || r == '\r':
		if rule != Message {
			return "must be one line: no tab or line break"
		}
	case r < 0x20 || r >= 0x7F && r <= 0x9F:
		return "must not contain control characters"
	case rule == Name && (r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069):
		return "must not contain bidirectional embedding, override or isolate characters"
	}
	return ""
}
