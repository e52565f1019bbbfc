// Package jsonguard refuses, before anything decodes it, JSON that the platform must not
// try to decode or cannot store faithfully: nesting deeper than MaxDepth, invalid UTF-8,
// and escaped lone surrogates ("\ud800"). encoding/json accepts nesting up to 10,000 levels
// and replaces the other two with U+FFFD without a word; a value we would store is then not
// the value that was sent.
//
// Check is one linear pass over the bytes with constant memory, so it is cheap enough to run
// on every request body, provider webhook and stored cursor before json.Unmarshal sees them.
// It does not validate the JSON grammar: the decoder that follows reports syntax errors in
// its own words.
package jsonguard

import (
	"fmt"
	"unicode/utf8"
)

// MaxDepth is how deeply arrays and objects may nest in any JSON the platform reads. Our
// documents need fewer than 10 levels; 64 leaves room for customer data (collection record
// values, reaction steps) while keeping every walk over a document shallow.
const MaxDepth = 64

// Problem kinds.
const (
	TooDeep       = "too_deep"
	InvalidUTF8   = "invalid_utf8"
	LoneSurrogate = "lone_surrogate"
)

// Error says what Check refused and where.
type Error struct {
	// Kind is TooDeep, InvalidUTF8 or LoneSurrogate.
	Kind string
	// Offset is the byte offset of the offending byte: the bracket that went one level too
	// deep, the first byte of the invalid sequence, the backslash of the escape.
	Offset int
}

func (e *Error) Error() string {
	switch e.Kind {
	case TooDeep:
		return fmt.Sprintf("JSON nests deeper than %d levels (at byte %d)", MaxDepth, e.Offset)
	case InvalidUTF8:
		return fmt.Sprintf("JSON text is not valid UTF-8 (at byte %d)", e.Offset)
	default:
		return fmt.Sprintf("JSON string holds an escaped lone surrogate, which is no character (at byte %d)", e.Offset)
	}
}

// Check returns nil when b nests at most MaxDepth levels and every byte sequence is valid
// UTF-8 with no escaped lone surrogate; else the first *Error found.
func Check(b []byte) error { return check(b, true) }

// CheckDepth is Check without the text rules: for documents whose strings are other
// people's words that we pass on rather than store as ours (a provider's webhook delivery
// carries what a user typed, and refusing it would only make the provider redeliver it).
func CheckDepth(b []byte) error { return check(b, false) }

func check(b []byte, text bool) error {
	depth := 0
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		if c >= utf8.RuneSelf && !text {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				return &Error{Kind: InvalidUTF8, Offset: i}
			}
			i += n
			continue
		}
		switch {
		case inString:
			switch c {
			case '"':
				inString = false
			case '\\':
				n, err := escape(b, i)
				if err != nil && !text {
					n, err = 2, nil // skip the backslash and the u: the hex digits are plain bytes
				}
				if err != nil {
					return err
				}
				i += n
				continue
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > MaxDepth {
				return &Error{Kind: TooDeep, Offset: i}
			}
		case c == ']' || c == '}':
			depth-- // unbalanced input is the decoder's syntax error to report
		}
		i++
	}
	return nil
}

// escape measures the escape sequence at b[i] ('\\') and refuses a lone surrogate. A
// malformed escape is left to the decoder (it is a syntax error).
func escape(b []byte, i int) (int, error) {
	if i+1 >= len(b) || b[i+1] != 'u' {
		return 2, nil
	}
	r, ok := hex4(b, i+2)
	if !ok {
		return 2, nil
	}
	switch {
	case r >= 0xD800 && r < 0xDC00: // a high surrogate must be followed by an escaped low one
		if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
			if lo, ok := hex4(b, i+8); ok && lo >= 0xDC00 && lo < 0xE000 {
				return 12, nil
			}
		}
		return 0, &Error{Kind: LoneSurrogate, Offset: i}
	case r >= 0xDC00 && r < 0xE000:
		return 0, &Error{Kind: LoneSurrogate, Offset: i}
	}
	return 6, nil
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
